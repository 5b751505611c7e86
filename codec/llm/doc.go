// Package llm owns the LLM wire formats: the Go types of the requests,
// responses, stream events and errors of OpenAI Chat Completions, the OpenAI
// Responses API, Anthropic Messages, Gemini/Vertex generateContent and Bedrock
// Converse/ConverseStream, and the framing of Bedrock's binary event stream.
//
// The types follow one rule (the design card): decode only the members the
// gateway reads or changes (model, stream, max tokens, messages, tools,
// usage, stop reasons, ...) and keep everything else as raw bytes. A member
// the gateway only passes on is a Raw: its JSON text, uncopied. Unknown
// members are skipped by the decoder; a body that must reach its provider
// otherwise unchanged is edited in place with SetMember, which rewrites one
// top-level member and copies the rest byte for byte ("write only what
// changed").
//
// Decoding uses sonic (github.com/bytedance/sonic) through a reusable Decoder
// with a fixed option set: member names match case-sensitively, strings and
// Raw values alias the input instead of being copied, and the input must be
// one valid JSON value, strings included (escapes, no raw control
// characters; invalid UTF-8 is replaced, on a copy): Decode checks the
// input with Valid first, since sonic lets some invalid escapes through
// in the values it skips or keeps raw. DecodeTrusted skips that pass for a
// Raw out of a Decode. Everything a decode returns (strings, Raw, slices of
// Raw) is therefore valid only while the decoded body is; copy what you keep.
// A type's Decode resets it first and reuses its top-level slices, so a
// pooled value decodes without allocating once warm.
//
// Encoding is by hand into caller-owned []byte (AppendString, AppendQuoted,
// AppendUnquoted and the Raw helpers): the translation layer
// (backend/llm/convert) writes each format member by member, copying Raw
// text verbatim, so nothing is escaped or unescaped twice.
package llm

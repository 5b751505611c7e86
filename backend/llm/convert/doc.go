// Package convert owns translation between LLM formats: a client's request
// in one format (OpenAI Chat Completions, Anthropic Messages, OpenAI
// Responses) becomes a provider's (OpenAI-compatible chat, Anthropic
// Messages, Gemini/Vertex generateContent, Bedrock Converse), and the
// provider's response, error or stream becomes the client's again. The wire
// types are codec/llm's.
//
// # Calling it per request
//
//	body, info, err := convert.Request(buf[:0], convert.Chat, convert.Bedrock, clientBody, &opts)
//	if err != nil {                     // *convert.Error: answer the client
//		e := err.(*convert.Error)
//		out = convert.AppendError(out[:0], convert.Chat, e.Status, e.Message)
//	}
//	// send body to the provider; info.Model and info.Stream pick the path
//	// for Gemini (:generateContent / :streamGenerateContent?alt=sse) and
//	// Bedrock (/model/{id}/converse / converse-stream).
//
//	// a 2xx response, whole:
//	out, usage, err := convert.Response(out[:0], providerBody, info)
//	model := convert.AppendResponseModel(nil, providerBody, info.Provider) // the model that answered
//	// a 4xx/5xx response:
//	out, status := convert.ProviderError(out[:0], info, providerStatus, providerBody)
//	// a stream (Content-Type: convert.StreamContentType(info.Client)):
//	s := convert.AcquireStream(info)
//	for each piece p read from the provider: out, err = s.Feed(out[:0], p); send out
//	out, err = s.Close(out[:0]); send out; usage, model := s.Usage(), s.Model(); convert.ReleaseStream(s)
//
// Every function appends to a caller's buffer and returns it, so a server
// that reuses its buffers translates without allocating them; scratch state
// is pooled. Values returned (RequestInfo.Model, errors' text aside) alias
// the body they came from, as codec/llm's do. Same formats (Chat client to
// Chat provider, ...) pass through: the body is copied with only the model
// (Options.Model) rewritten, and a top-level member given twice sent once
// with its last value (the one the gateway read); responses and streams
// are read only for their usage (unless masked, below).
//
// # Masking the answer
//
// With RequestInfo.Mask (a response guard, backend/llm/guard), the answer's
// text is masked, whatever the formats: Response masks every output text,
// a Stream passes each text's deltas through a guard.StreamMasker and sends
// what it held back as a last delta before the text ends. Thinking and
// tool call arguments are masked too (the arguments only inside their JSON
// strings, so they stay JSON); refusals are not. Translated answers are masked
// as they are written; same-format ones are copied with only their text
// tokens replaced, every other member byte for byte (mask.go,
// stream_mask.go say what else a masked same-format stream changes). What
// cannot be masked is refused, never sent unmasked.
//
// # What is translated
//
// System prompts (several, and their cache breakpoints for Bedrock),
// multi-turn conversations (turns of one role merged, as Bedrock and Gemini
// require), images (data URLs and base64; URLs where the provider takes
// them), tool definitions, tool choice (auto, required/any, none, a named
// tool, no parallel calls), tool calls and their results (error flag too),
// thinking (budgets from reasoning effort; signed thinking replayed to
// Anthropic and Bedrock; Gemini's thought signatures handed to the client
// and back, as a Gemini 3 model requires on function calls: a Chat tool
// call's extra_content, a Messages thinking block's signature, a
// Responses call_id; thoughtsig.go), stop sequences, temperature, top_p,
// top_k, max tokens (a default where the provider requires one), stop
// reasons and usage (input, output, cached and cache-write, reasoning
// tokens; Usage holds them in one set of terms). Errors keep the
// provider's status and take the client's shape and error type names.
//
// What cannot be translated is refused with a 400 naming it, never dropped
// silently: built-in and server tools (OpenAI's web_search_options,
// Anthropic's mcp_servers too), audio and file parts, audio output, n > 1,
// log probabilities (Chat's logprobs and top_logprobs, Responses'
// top_logprobs: no other format answers with them), structured output
// (response_format, text.format), state stored at OpenAI (Responses'
// previous_response_id, conversation, prompt and item_reference), image
// URLs for Bedrock, tool names Bedrock refuses, tool results holding
// images for Chat and Gemini providers (whose tool results carry text
// only). An output bound below 1 (max_tokens, max_completion_tokens,
// max_output_tokens) is a 400 in every format, passed through or not: no
// provider serves it, and read as none it would become the default.
//
// Dropped on purpose, as every gateway must: OpenAI reasoning items
// replayed by Responses clients and thinking blocks sent to Chat and
// Gemini providers (neither can be verified by another provider); and the
// sampling settings that the provider's format has no counterpart for,
// which change how an answer is drawn but not what is asked (agentgateway
// drops them too): Chat's seed, frequency_penalty and presence_penalty for
// Anthropic and Bedrock (Gemini takes them as its own), Chat's logit_bias
// for every other provider (it weighs OpenAI token ids, which name other
// tokens or none in another provider's vocabulary), and Messages' top_k
// for Chat providers (OpenAI has none). A same-format provider's error is
// copied when it is in the client's shape and translated when it is not
// (Vertex AI answers some errors before Claude in Google's shape).
//
// # Streams
//
// A Stream reads the provider's stream into a small set of events (start,
// block start/delta/stop, stop reason, usage, end, error) and writes the
// client's events from them: Chat chunks ending with [DONE] (a usage chunk
// first when the client asked for it), Anthropic's message_start ...
// message_stop, or the Responses API's response.created ... response.completed
// (with the full response, so the stream keeps each output item's text;
// sequence_number counts from 0, as OpenAI's). What a stream keeps of the
// answer (those texts, a Chat provider's tool calls held while another is
// open) is bounded by MaxKeptBytes: past it the stream ends with an error
// event, as an endless provider stream would otherwise grow it forever.
// SSE input is framed by the same WHATWG rules as codec/sse (which pulls
// from an io.Reader; a Stream is pushed to); Bedrock's binary event stream
// is decoded with the AWS SDK's eventstream package, CRCs checked. Each
// provider event read is bounded by MaxEventBytes; a same-format stream
// passes a larger SSE event on unread, reading only its usage and type.
//
// For remote guards on streams, TapText has a Stream keep the text of the
// deltas it writes (after masking) for TakeText, and Abort ends a stream
// with an error event of the client's format; a tapped stream writes whole
// events only, so what is held back can be released or dropped whole.
package convert

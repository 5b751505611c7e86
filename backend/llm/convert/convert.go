package convert

import (
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/relaygate/gateway/backend/llm/guard"
	"github.com/relaygate/gateway/codec/llm"
)

// Format is an LLM wire format.
type Format uint8

// The formats. Clients speak Chat, Messages or Responses; providers speak
// Chat, Messages, Gemini or Bedrock. Any format passes through to itself.
const (
	FormatUnknown Format = iota
	// Chat is OpenAI Chat Completions (/v1/chat/completions).
	Chat
	// Messages is Anthropic Messages (/v1/messages).
	Messages
	// Responses is the OpenAI Responses API (/v1/responses).
	Responses
	// Gemini is Gemini/Vertex generateContent (streamGenerateContent?alt=sse).
	Gemini
	// Bedrock is Bedrock Converse (converse-stream: AWS event stream).
	Bedrock
)

var formatNames = [...]string{"unknown", "chat", "messages", "responses", "gemini", "bedrock"}

// String is the format's name as ParseFormat reads it.
func (f Format) String() string {
	if int(f) < len(formatNames) {
		return formatNames[f]
	}
	return "format(" + strconv.Itoa(int(f)) + ")"
}

// ParseFormat reads a format's name (chat, messages, responses, gemini,
// bedrock).
func ParseFormat(s string) (Format, bool) {
	for i, n := range formatNames[1:] {
		if s == n {
			return Format(i + 1), true
		}
	}
	return FormatUnknown, false
}

// StreamContentType is the Content-Type of a stream in format f.
func StreamContentType(f Format) string {
	if f == Bedrock {
		return "application/vnd.amazon.eventstream"
	}
	return "text/event-stream"
}

// Options tune Request.
type Options struct {
	// Model, when set, is the model the provider is asked for in place of
	// the client's (a model alias, or a route's fixed model).
	Model string
	// DefaultMaxTokens is the output bound sent to a provider that requires
	// one (Messages, Bedrock) when the client set none; 4096 when 0.
	DefaultMaxTokens int
	// StreamUsage asks an OpenAI-format provider for usage in streams
	// (stream_options.include_usage) even when the client did not; the
	// stream translator then drops the usage chunk the client did not ask
	// for, so the gateway can count tokens without the client noticing.
	StreamUsage bool
	// Head, when set, is what ReadHead read of this same body: a request
	// in the provider's own format is then not walked again.
	Head *Head
}

const defaultMaxTokens = 4096

// RequestInfo is what Request learned about a request. The server keeps it
// for the response: Response, ProviderError and NewStream take it.
type RequestInfo struct {
	// Client and Provider are the formats of the two sides.
	Client, Provider Format
	// Model is the model the provider was asked for (Options.Model or the
	// client's); for Gemini and Bedrock it belongs in the URL path. It
	// aliases the request body or Options: copy it to keep it longer.
	Model string
	// Stream reports a streaming request (Gemini: use
	// :streamGenerateContent?alt=sse; Bedrock: /converse-stream).
	Stream bool
	// IncludeUsage reports that the client wants usage in its stream: always
	// for Messages and Responses clients, stream_options.include_usage for
	// Chat clients.
	IncludeUsage bool
	// MaxTokens is the output bound the provider was given (0: none).
	MaxTokens int
	// Mask, when set, masks the answer's text: Response masks the text of every
	// output text block; a Stream masks text deltas per content block with a
	// guard.StreamMasker, flushing what it held back before the block's stop event
	// (or the stream's end/error). Tool call arguments and thinking are not masked.
	// Request never sets it: the server does, before Response or AcquireStream
	// (mask.go, stream_mask.go).
	Mask *guard.Guard
}

// Usage is a response's token usage, in the same terms whatever the
// provider: InputTokens counts every prompt token, those read from or
// written to a prompt cache included; OutputTokens every generated token,
// reasoning included.
type Usage struct {
	InputTokens           int64
	OutputTokens          int64
	CachedInputTokens     int64
	CacheWriteInputTokens int64
	ReasoningTokens       int64
}

// TotalTokens is InputTokens + OutputTokens.
func (u Usage) TotalTokens() int64 { return u.InputTokens + u.OutputTokens }

// Reported reports whether u holds a provider's usage: one that reports it
// counts at least its prompt's tokens, so none (an OpenAI-compatible
// server without usage, a stream cut before it) is all zero.
func (u Usage) Reported() bool { return u.InputTokens > 0 || u.OutputTokens > 0 }

// Clamped is u with no negative count: a provider's negative count is none
// (it would refill token budgets, and lower metrics and costs).
func (u Usage) Clamped() Usage {
	u.InputTokens = max(u.InputTokens, 0)
	u.OutputTokens = max(u.OutputTokens, 0)
	u.CachedInputTokens = max(u.CachedInputTokens, 0)
	u.CacheWriteInputTokens = max(u.CacheWriteInputTokens, 0)
	u.ReasoningTokens = max(u.ReasoningTokens, 0)
	return u
}

// merge takes the fields that o reports (non-zero): providers report usage
// cumulatively, some fields in one event and some in another.
func (u *Usage) merge(o Usage) {
	if o.InputTokens != 0 {
		u.InputTokens = o.InputTokens
	}
	if o.OutputTokens != 0 {
		u.OutputTokens = o.OutputTokens
	}
	if o.CachedInputTokens != 0 {
		u.CachedInputTokens = o.CachedInputTokens
	}
	if o.CacheWriteInputTokens != 0 {
		u.CacheWriteInputTokens = o.CacheWriteInputTokens
	}
	if o.ReasoningTokens != 0 {
		u.ReasoningTokens = o.ReasoningTokens
	}
}

// Error is a request that cannot be translated: the client's mistake
// (Status 400) or a feature the target format lacks or that is not built
// (Status 400 too: the request as sent cannot be served). Answer it with
// AppendError(dst, info.Client, e.Status, e.Message).
type Error struct {
	Status  int
	Message string
}

func (e *Error) Error() string { return "convert: " + e.Message }

func badRequest(msg string) *Error { return &Error{Status: 400, Message: msg} }

func unsupported(what string, f Format) *Error {
	return badRequest(what + " cannot be translated to " + f.String())
}

// translator holds the per-call scratch state of Request and Response.
type translator struct {
	dec  llm.Decoder
	req  request
	resp response

	chatReq   llm.ChatRequest
	chatParts []llm.ChatContentPart
	chatResp  llm.ChatResponse
	anReq     llm.AnthropicRequest
	anBlocks  []llm.AnthropicBlock
	anSub     []llm.AnthropicBlock
	anResp    llm.AnthropicResponse
	rsReq     llm.ResponsesRequest
	rsItems   []llm.ResponsesItem
	rsParts   []llm.ResponsesContent
	gmResp    llm.GeminiResponse
	bdResp    llm.BedrockResponse
	usage     usages // passResponse's

	mask answerMask
}

var translators = sync.Pool{New: func() any { return new(translator) }}

// release drops the translator's references to the last body before it
// goes back to the pool, so a pooled translator never pins a large body.
func (t *translator) release() {
	t.req.reset()
	t.resp.reset()
	t.chatReq.Reset()
	t.chatResp.Reset()
	t.anReq.Reset()
	t.anResp.Reset()
	t.rsReq.Reset()
	t.gmResp.Reset()
	t.bdResp.Reset()
	t.chatParts = clearParts(t.chatParts)
	t.anBlocks = clearParts(t.anBlocks)
	t.anSub = clearParts(t.anSub)
	t.rsItems = clearParts(t.rsItems)
	t.rsParts = clearParts(t.rsParts)
	t.mask.release()
	translators.Put(t)
}

// Request translates body, a request in the client's format, into the
// provider's format, appended to dst. A request whose formats are the same
// is copied with only the model (Options.Model) and, for Chat,
// stream_options changed. The returned RequestInfo aliases body.
func Request(dst []byte, client, provider Format, body []byte, opts *Options) ([]byte, RequestInfo, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.DefaultMaxTokens <= 0 {
		o.DefaultMaxTokens = defaultMaxTokens
	}
	info := RequestInfo{Client: client, Provider: provider}
	if client == provider {
		return passRequest(dst, body, &info, &o)
	}
	t := translators.Get().(*translator)
	defer t.release()
	r := &t.req
	r.reset()
	var err error
	switch client {
	case Chat:
		err = t.readChatRequest(body)
	case Messages:
		err = t.readAnthropicRequest(body)
	case Responses:
		err = t.readResponsesRequest(body)
	default:
		return dst, info, badRequest(client.String() + " is not a client format")
	}
	if err != nil {
		return dst, info, err
	}
	if o.Model != "" {
		r.model = o.Model
	}
	info.Model, info.Stream = r.model, r.stream
	info.IncludeUsage = r.includeUsage || client != Chat
	start := len(dst)
	switch provider {
	case Chat:
		dst, err = t.writeChatRequest(dst)
	case Messages:
		dst, err = t.writeAnthropicRequest(dst, &o)
	case Gemini:
		dst, err = t.writeGeminiRequest(dst)
	case Bedrock:
		dst, err = t.writeBedrockRequest(dst, &o)
	default:
		return dst, info, badRequest(provider.String() + " is not a provider format for " + client.String() + " clients")
	}
	if err != nil {
		return dst[:start], info, err
	}
	info.MaxTokens = r.outMaxTokens
	return dst, info, nil
}

// Response translates body, a complete (not streamed) response of the
// provider, into the client's format, appended to dst, and reports its
// usage. Same formats copy the body and only read the usage; with
// info.Mask, the answer's text is masked (in place, for same formats: see
// mask.go).
func Response(dst []byte, body []byte, info RequestInfo) ([]byte, Usage, error) {
	if info.Client == info.Provider && info.Mask == nil && info.Client.providerFormat() {
		return passResponse(dst, body, info.Client)
	}
	t := translators.Get().(*translator)
	defer t.release()
	r := &t.resp
	r.reset()
	t.mask.g = info.Mask
	if info.Client == info.Provider && info.Mask != nil {
		return t.maskedPassResponse(dst, body, info.Client)
	}
	var err error
	switch info.Provider {
	case Chat:
		err = t.readChatResponse(body)
	case Messages:
		err = t.readAnthropicResponse(body)
	case Gemini:
		err = t.readGeminiResponse(body)
	case Bedrock:
		err = t.readBedrockResponse(body)
	case Responses:
		if info.Client != Responses {
			return dst, Usage{}, badRequest("responses provider responses translate only to responses clients")
		}
		err = t.readResponsesUsage(body)
	default:
		return dst, Usage{}, badRequest(info.Provider.String() + " is not a provider format")
	}
	if err != nil {
		return dst, Usage{}, err
	}
	if info.Client == info.Provider {
		return append(dst, body...), r.usage, nil
	}
	if r.model == "" {
		r.model = info.Model
	}
	t.mask.maskBlocks(r.blocks)
	switch info.Client {
	case Chat:
		dst = t.writeChatResponse(dst)
	case Messages:
		dst = t.writeAnthropicResponse(dst)
	case Responses:
		dst = t.writeResponsesResponse(dst)
	default:
		return dst, r.usage, badRequest(info.Client.String() + " is not a client format")
	}
	return dst, r.usage, nil
}

// EmbeddingsUsage is the usage an OpenAI-format embeddings answer (its
// body read whole: OpenAI's, Azure's, Gemini's OpenAI-compatible one)
// reports: usage.prompt_tokens as input, embeddings having no output. An
// answer that reports none, or one that is not JSON, has none.
func EmbeddingsUsage(body []byte) Usage {
	v, ok := llm.LastMember(body, "usage")
	if !ok || v == nil {
		return Usage{}
	}
	u, err := decodeUsage(v, Chat)
	if err != nil {
		return Usage{}
	}
	return u
}

// MaxModelBytes bounds the model name a provider's answer reports that
// AppendResponseModel and Stream.Model take: a longer one is taken as
// none (no model is that long; the metrics' labels stop at 256 bytes).
const MaxModelBytes = 256

// AppendResponseModel appends to dst the model a provider's answer (its
// body read whole, in the provider's format f) says answered: OpenAI's,
// Anthropic's and the Responses API's model, Gemini's modelVersion (the
// last member of that name, as the decoder takes). Nothing is appended
// when the body names none (Bedrock's never do), or one that is no string
// or longer than MaxModelBytes.
func AppendResponseModel(dst, body []byte, f Format) []byte {
	name := "model"
	switch f {
	case Chat, Messages, Responses:
	case Gemini:
		name = "modelVersion"
	default:
		return dst
	}
	v, ok := llm.LastMember(body, name)
	if !ok || !v.IsString() || len(v) > 2+6*MaxModelBytes {
		return dst
	}
	n := len(dst)
	dst, err := llm.AppendUnquoted(dst, v)
	if err != nil || len(dst)-n > MaxModelBytes {
		return dst[:n]
	}
	return dst
}

// Hooks for deterministic tests.
var (
	randUint64 = rand.Uint64
	nowUnix    = func() int64 { return time.Now().Unix() }
)

// appendID appends prefix and 24 random hex digits.
func appendID(dst []byte, prefix string) []byte {
	dst = append(dst, prefix...)
	a, b := randUint64(), randUint64()
	const hex = "0123456789abcdef"
	for i := 0; i < 16; i++ {
		dst = append(dst, hex[a>>60])
		a <<= 4
	}
	for i := 0; i < 8; i++ {
		dst = append(dst, hex[b>>60])
		b <<= 4
	}
	return dst
}

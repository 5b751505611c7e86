package convert

import (
	"bytes"

	"github.com/relaygate/gateway/codec/llm"
)

// The intermediate form every translation goes through: a client format is
// read into a request, written out as the provider's; a provider's response
// is read into a response, written out as the client's. Streams use events
// (stream.go). Text stays in its JSON-encoded form (a string token) from
// reader to writer, so it is copied, never unescaped and escaped again.

type role uint8

const (
	roleUser role = iota
	roleAssistant
)

type kind uint8

const (
	kText kind = iota
	kImage
	kToolUse
	kToolResult
	kThinking
	kRedacted
)

// block is a content block.
type block struct {
	kind kind
	// text: a string token (text, thinking, or a tool result's text); the
	// data token of a redacted thinking block.
	text llm.Raw
	// sig is a thinking block's signature token; a text or tool use
	// block's Gemini thought signature token (thoughtsig.go).
	sig llm.Raw
	// An image is media (its MIME type) and data (base64), both plain text,
	// or url, a string token.
	media, data []byte
	url         llm.Raw
	// id and name of a tool use; id of the tool use a result answers.
	id, name string
	// input is a tool use's input object; args, when input is empty, a
	// string token whose text is the input's JSON (OpenAI's arguments).
	input, args llm.Raw
	isError     bool
	// sub, nsub: a tool result's content blocks, request.sub[sub:sub+nsub]
	// (none: the result is text, or empty).
	sub, nsub int
	// cache is an Anthropic cache_control value (a cache breakpoint).
	cache llm.Raw
}

type message struct {
	role     role
	first, n int
}

type tool struct {
	name   string
	desc   llm.Raw
	schema llm.Raw
	cache  llm.Raw
	strict llm.Raw // Chat's and Responses' strict schema adherence; only Chat providers take it
}

type toolChoice uint8

const (
	choiceUnset toolChoice = iota
	choiceAuto
	choiceAny
	choiceNone
	choiceTool
)

type request struct {
	model        string
	stream       bool
	includeUsage bool
	maxTokens    int
	outMaxTokens int

	temperature, topP, topK llm.Raw
	// seed and the penalties are Chat's; only Gemini takes them (the
	// package comment says what is dropped).
	seed, frequencyPenalty, presencePenalty llm.Raw
	// stop is a string token or an array of them.
	stop llm.Raw

	system   []block
	messages []message
	blocks   []block
	sub      []block

	tools      []tool
	choice     toolChoice
	choiceName string
	// parallel is false when the client forbade parallel tool calls.
	noParallel     bool
	thinkingBudget int
	user           string

	// arena keeps the signature tokens made while reading (thoughtsig.go).
	arena []byte
}

func (r *request) reset() {
	clear(r.system)
	clear(r.blocks)
	clear(r.sub)
	clear(r.tools)
	*r = request{
		system: r.system[:0], messages: r.messages[:0], blocks: r.blocks[:0],
		sub: r.sub[:0], tools: r.tools[:0], arena: r.arena[:0],
	}
}

// add appends b to the conversation as role's; consecutive blocks of one
// role form one message (Bedrock and Gemini require turns to alternate).
func (r *request) add(ro role, b block) {
	if n := len(r.messages); n > 0 && r.messages[n-1].role == ro {
		r.messages[n-1].n++
	} else {
		r.messages = append(r.messages, message{role: ro, first: len(r.blocks), n: 1})
	}
	r.blocks = append(r.blocks, b)
}

func (r *request) msgBlocks(m message) []block { return r.blocks[m.first : m.first+m.n] }

func (r *request) subBlocks(b *block) []block { return r.sub[b.sub : b.sub+b.nsub] }

// hasToolHistory reports tool uses or results in the conversation.
func (r *request) hasToolHistory() bool {
	for i := range r.blocks {
		if k := r.blocks[i].kind; k == kToolUse || k == kToolResult {
			return true
		}
	}
	return false
}

// toolNameFor is the name of the tool use that id answers ("" if unknown).
func (r *request) toolNameFor(id string) string {
	for i := range r.blocks {
		if b := &r.blocks[i]; b.kind == kToolUse && b.id == id {
			return b.name
		}
	}
	return ""
}

// asksLogprobs reports a top_logprobs that asks for log probabilities: one
// given, other than 0.
func asksLogprobs(v llm.Raw) bool {
	return v.Present() && string(v) != "0"
}

// budgetForEffort maps an OpenAI reasoning effort to a thinking budget.
func budgetForEffort(effort string) int {
	switch effort {
	case "minimal", "low":
		return 1024
	case "medium":
		return 2048
	case "high":
		return 4096
	case "xhigh":
		return 8192
	}
	return 0
}

type stopReason uint8

const (
	stopNone stopReason = iota
	stopEnd
	stopMaxTokens
	stopSequence
	stopToolUse
	stopFilter
	stopPause
)

type response struct {
	id, model string
	created   int64
	blocks    []block
	stop      stopReason
	stopSeq   llm.Raw
	usage     Usage
	names     []byte // storage for generated ids
}

func (r *response) reset() {
	clear(r.blocks)
	*r = response{blocks: r.blocks[:0], names: r.names[:0]}
}

// image reads an OpenAI image URL (a string token): a data URL becomes
// media and data, anything else stays a URL.
func imageBlock(url llm.Raw) (block, error) {
	text, err := llm.Text(nil, url)
	if err != nil {
		return block{}, badRequest("image url is not a string")
	}
	media, data, ok := parseDataURL(text)
	if ok {
		return block{kind: kImage, media: media, data: data}, nil
	}
	if bytes.HasPrefix(text, []byte("data:")) {
		return block{}, badRequest("image data URL is not base64")
	}
	return block{kind: kImage, url: url}, nil
}

// parseDataURL splits data:<media>;base64,<data>.
func parseDataURL(u []byte) (media, data []byte, ok bool) {
	rest, found := bytes.CutPrefix(u, []byte("data:"))
	if !found {
		return nil, nil, false
	}
	meta, data, found := bytes.Cut(rest, []byte(","))
	if !found {
		return nil, nil, false
	}
	media, enc, found := bytes.Cut(meta, []byte(";"))
	if !found || !bytes.EqualFold(enc, []byte("base64")) {
		return nil, nil, false
	}
	return media, data, true
}

// imageFormat is Bedrock's name of an image MIME type.
func imageFormat(media []byte) string {
	switch string(media) {
	case "image/png":
		return "png"
	case "image/jpeg", "image/jpg":
		return "jpeg"
	case "image/gif":
		return "gif"
	case "image/webp":
		return "webp"
	}
	return ""
}

// mimeFromURL guesses an image's MIME type from its URL's extension.
func mimeFromURL(url []byte) string {
	if i := bytes.IndexAny(url, "?#"); i >= 0 {
		url = url[:i]
	}
	ext := url[bytes.LastIndexByte(url, '.')+1:]
	for _, m := range [...]struct{ ext, mime string }{
		{"png", "image/png"}, {"gif", "image/gif"}, {"webp", "image/webp"},
		{"jpg", "image/jpeg"}, {"jpeg", "image/jpeg"}, {"pdf", "application/pdf"},
	} {
		if bytes.EqualFold(ext, []byte(m.ext)) {
			return m.mime
		}
	}
	return "image/jpeg"
}

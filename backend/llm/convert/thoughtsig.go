package convert

import (
	"bytes"
	"strings"

	"github.com/relaygate/gateway/codec/llm"
)

// Gemini's thought signatures. A Gemini answer's parts may carry a
// thoughtSignature: an opaque token of the model's reasoning that it wants
// back on the same part when the conversation goes on. On function calls a
// Gemini 3 model requires it (a call sent back without it is a 400,
// "Function call is missing a thought_signature in functionCall parts"),
// so a translated answer hands it to the client, and the client's next
// request hands it back (block.sig of a text or tool use block):
//   - Chat clients, as Gemini's own OpenAI-compatible API does: a tool
//     call's extra_content.google.thought_signature;
//   - Messages clients, in the signature of a thinking block before the
//     part, where Anthropic clients keep the model's opaque state: the
//     thinking block of the part's thought when it has no signature of its
//     own, else a thinking block with no text. The signature is marked
//     (geminiSigPrefix): a marked signature in a request belongs to the
//     part after its thinking block, and no other provider is sent it;
//   - Responses clients, whose function call items have no place for it,
//     in the call's call_id, after thoughtIDSep (as agentgateway carries
//     it in tool call ids). The call id the other formats see is the one
//     before it.
//
// A thought's own signature (a thought part's) stays its thinking block's,
// as before. A text part's signature goes to Messages clients only (Gemini
// does not require it back); in a stream, only when it comes with the
// part that begins the text.
const (
	geminiSigPrefix = "gemini:"
	thoughtIDSep    = "__thought__"
)

// hasSig reports a signature token that says something.
func hasSig(tok llm.Raw) bool { return tok.IsString() && len(tok) > 2 }

// appendMarkedSig writes sig (a string token) as a thinking block's marked
// signature token.
func appendMarkedSig(dst []byte, sig llm.Raw) []byte {
	dst = append(dst, `"`+geminiSigPrefix...)
	dst = append(dst, sig.Inner()...)
	return append(dst, '"')
}

// unmarkSig is the Gemini signature a thinking block's signature token
// carries (appendMarkedSig), as a string token kept in arena; ok is false
// for any other signature.
func unmarkSig(arena *[]byte, tok llm.Raw) (sig llm.Raw, ok bool) {
	if !tok.IsString() {
		return nil, false
	}
	rest, found := bytes.CutPrefix(tok.Inner(), []byte(geminiSigPrefix))
	if !found || len(rest) == 0 {
		return nil, false
	}
	start := len(*arena)
	*arena = append(*arena, '"')
	*arena = append(*arena, rest...)
	*arena = append(*arena, '"')
	return (*arena)[start:len(*arena):len(*arena)], true
}

// appendThoughtID writes a Responses call id carrying sig: id, thoughtIDSep
// and the signature's text (plain text, not quoted).
func appendThoughtID(dst []byte, id string, sig llm.Raw) []byte {
	dst = append(dst, id...)
	dst = append(dst, thoughtIDSep...)
	out, err := llm.AppendUnquoted(dst, sig)
	if err != nil {
		return dst[:len(dst)-len(thoughtIDSep)]
	}
	return out
}

// splitThoughtID splits a Responses call id into the call's id and the
// signature it carries (a string token kept in arena, or nil).
func splitThoughtID(arena *[]byte, id string) (string, llm.Raw) {
	base, sig, found := strings.Cut(id, thoughtIDSep)
	if !found || sig == "" {
		return id, nil
	}
	start := len(*arena)
	*arena = llm.AppendString(*arena, sig)
	return base, (*arena)[start:len(*arena):len(*arena)]
}

// thoughtIDBase is the call's id in a Responses call id.
func thoughtIDBase(id string) string {
	if base, sig, found := strings.Cut(id, thoughtIDSep); found && sig != "" {
		return base
	}
	return id
}

// appendChatExtraContent writes a Chat tool call's extra_content member
// with sig (Gemini's OpenAI-compatible API's).
func appendChatExtraContent(dst []byte, sig llm.Raw) []byte {
	dst = append(dst, `,"extra_content":{"google":{"thought_signature":`...)
	dst = append(dst, sig...)
	return append(dst, `}}`...)
}

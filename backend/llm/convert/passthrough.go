package convert

import (
	"github.com/relaygate/gateway/codec/llm"
)

// passRequest serves a client whose format the provider speaks: the body is
// copied with only what the gateway changes rewritten (model, and for Chat
// the stream's usage option), and read only as far as RequestInfo needs.
func (t *translator) passRequest(dst, body []byte, info *RequestInfo, o *Options) ([]byte, RequestInfo, error) {
	var h struct {
		Model               string                `json:"model"`
		Stream              bool                  `json:"stream"`
		StreamOptions       llm.ChatStreamOptions `json:"stream_options"`
		MaxTokens           int                   `json:"max_tokens"`
		MaxCompletionTokens int                   `json:"max_completion_tokens"`
		MaxOutputTokens     int                   `json:"max_output_tokens"`
		GenerationConfig    struct {
			MaxOutputTokens int `json:"maxOutputTokens"`
		} `json:"generationConfig"`
		InferenceConfig struct {
			MaxTokens int `json:"maxTokens"`
		} `json:"inferenceConfig"`
	}
	// Only these members are read, and the body goes on as it came (the
	// provider validates it), so sonic's own checks suffice: no Valid pass.
	if err := t.dec.DecodeTrusted(body, &h); err != nil {
		return dst, *info, badRequest("invalid " + info.Client.String() + " request: " + err.Error())
	}
	info.Model, info.Stream = h.Model, h.Stream
	info.IncludeUsage = info.Client != Chat || h.StreamOptions.IncludeUsage
	info.MaxTokens = max(h.MaxTokens, h.MaxCompletionTokens, h.MaxOutputTokens,
		h.GenerationConfig.MaxOutputTokens, h.InferenceConfig.MaxTokens)
	switch info.Client {
	case Chat, Messages, Responses:
	case Gemini, Bedrock:
		// The model is in the path; streaming is the path's too (the server
		// sets Stream from it).
		if o.Model != "" {
			info.Model = o.Model
		}
		return append(dst, body...), *info, nil
	default:
		return dst, *info, badRequest(info.Client.String() + " is not a client format")
	}
	var err error
	start := len(dst)
	out := body
	if o.Model != "" && o.Model != h.Model {
		info.Model = o.Model
		var model [128]byte
		dst, err = llm.SetMember(dst, out, "model", llm.AppendString(model[:0], o.Model))
		if err != nil {
			return dst[:start], *info, badRequest("invalid request body")
		}
		out = dst[start:]
	}
	if info.Client == Chat && info.Stream && o.StreamUsage && !info.IncludeUsage {
		next := len(dst)
		dst, err = llm.SetMember(dst, out, "stream_options", []byte(`{"include_usage":true}`))
		if err != nil {
			return dst[:start], *info, badRequest("invalid request body")
		}
		dst = append(dst[:start], dst[next:]...)
	}
	if len(dst) == start {
		dst = append(dst, body...)
	}
	return dst, *info, nil
}

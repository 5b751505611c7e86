package llmtest

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
)

// Bedrock emulates the Bedrock runtime's Converse API: POST
// /model/{modelId}/converse (JSON) and /model/{modelId}/converse-stream
// (AWS's binary event stream: messageStart, contentBlockStart/Delta/Stop,
// messageStop, metadata). Requests must be signed with SigV4 (service
// "bedrock", Region) by AccessKeyID/SecretAccessKey: the emulator signs the
// request again with the AWS SDK's signer and compares the signatures.
// With APIKey set, "Authorization: Bearer <APIKey>" (a Bedrock API key) is
// accepted too.
//
// A request with a guardrailConfig gets Guardrail's intervention when
// Guardrail is set (stopReason guardrail_intervened, its message as the
// output, and the guardrail trace when the config enables trace), and the
// configured reply otherwise.
type Bedrock struct {
	*Server
	Region          string
	AccessKeyID     string
	SecretAccessKey string
	// SessionToken, when set, must come as X-Amz-Security-Token.
	SessionToken string
	// APIKey, when set, is an accepted Bedrock API key.
	APIKey string
	// MaxClockSkew bounds the difference between X-Amz-Date and now
	// (5 minutes by default, as AWS).
	MaxClockSkew time.Duration
	// Guardrail, when set, intervenes in every request that has a
	// guardrailConfig.
	Guardrail *Guardrail
}

// Guardrail is the intervention of a Bedrock guardrail.
type Guardrail struct {
	// ID and Version, when set, must match the request's
	// guardrailIdentifier and guardrailVersion (else 400
	// ValidationException).
	ID      string
	Version string
	// Message is the output that replaces the model's ("Sorry, the model
	// cannot answer this question." by default).
	Message string
	// FilterType is the content filter that blocked ("VIOLENCE" by default).
	FilterType string
	// Output assesses the model's output instead of the input.
	Output bool
}

// NewBedrock starts a Bedrock runtime emulator (region us-east-1) that the
// test's Cleanup stops.
func NewBedrock(tb testing.TB) *Bedrock {
	tb.Helper()
	b := &Bedrock{
		Region:          "us-east-1",
		AccessKeyID:     "AKIAEMULATEDBEDROCK1",
		SecretAccessKey: "emulatedSecretAccessKey/0123456789abcdefXYZ",
		MaxClockSkew:    5 * time.Minute,
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /model/{modelId}/converse", func(w http.ResponseWriter, r *http.Request) {
		x := b.begin(w, r, "converse")
		x.rec.Model = r.PathValue("modelId")
		if b.authorize(x) {
			b.converse(x)
		}
	})
	mux.HandleFunc("POST /model/{modelId}/converse-stream", func(w http.ResponseWriter, r *http.Request) {
		x := b.begin(w, r, "converse-stream")
		x.rec.Model, x.rec.Stream = r.PathValue("modelId"), true
		if b.authorize(x) {
			b.converse(x)
		}
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		x := b.begin(w, r, "unknown")
		x.admit()
		x.writeError(bedrockError, Failure{Status: http.StatusNotFound, Type: "UnknownOperationException", Message: "Unknown operation"})
	})
	b.Server = newServer(tb)
	b.start(mux)
	return b
}

// BaseURL is the endpoint clients are given (the origin).
func (b *Bedrock) BaseURL() string { return b.URL }

func awsRequestID() string {
	u := make([]byte, 16)
	_, _ = rand.Read(u)
	return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:])
}

// bedrockExceptions are the exceptions Bedrock answers a status with.
func bedrockException(status int) (typ, msg string) {
	switch status {
	case http.StatusBadRequest:
		return "ValidationException", "The provided request is not valid"
	case http.StatusForbidden:
		return "AccessDeniedException", "You don't have access to the model with the specified model ID."
	case http.StatusNotFound:
		return "ResourceNotFoundException", "Could not resolve the foundation model from the provided model identifier."
	case http.StatusRequestTimeout:
		return "ModelTimeoutException", "Model has timed out in processing the request. Try your request again."
	case http.StatusFailedDependency:
		return "ModelErrorException", "The model returned an error."
	case http.StatusTooManyRequests:
		return "ThrottlingException", "Too many requests, please wait before trying again."
	case http.StatusServiceUnavailable:
		return "ServiceUnavailableException", "Bedrock is unable to process your request."
	}
	if status >= 500 {
		return "InternalServerException", "The system encountered an unexpected error during processing. Try your request again."
	}
	return "ValidationException", http.StatusText(status)
}

// bedrockError renders AWS's REST-JSON error: the exception in
// X-Amzn-ErrorType and {"message": ...} as the body.
func bedrockError(h http.Header, f Failure) []byte {
	typ, msg := bedrockException(f.Status)
	if f.Type != "" {
		typ = f.Type
	}
	if f.Message != "" {
		msg = f.Message
	}
	h.Set("X-Amzn-ErrorType", typ+":http://internal.amazon.com/coral/com.amazon.bedrock/")
	h.Set("X-Amzn-RequestId", awsRequestID())
	return mustJSON(obj{{"message", msg}})
}

func (b *Bedrock) authorize(x *exchange) bool {
	refuse := func(reason, typ, msg string) bool {
		x.refuse(reason, func(h http.Header, f Failure) []byte {
			h.Set("X-Amzn-ErrorType", typ+":http://internal.amazon.com/coral/com.amazon.coral.service/")
			h.Set("X-Amzn-RequestId", awsRequestID())
			return mustJSON(obj{{"message", msg}})
		}, Failure{Status: http.StatusForbidden})
		return false
	}
	authz := x.r.Header.Get("Authorization")
	if key, ok := strings.CutPrefix(authz, "Bearer "); ok && b.APIKey != "" {
		if key != b.APIKey {
			return refuse("wrong API key", "UnrecognizedClientException", "Invalid API Key format: Must start with pre-defined prefix")
		}
		x.admit()
		return true
	}
	check := SigV4Check{AccessKeyID: b.AccessKeyID, SecretAccessKey: b.SecretAccessKey, SessionToken: b.SessionToken,
		Region: b.Region, Service: "bedrock", MaxClockSkew: b.MaxClockSkew, AllowUnsignedPayload: true}
	if reason, typ, msg := check.Verify(x.r, x.rec.Body); reason != "" {
		return refuse(reason, typ, msg)
	}
	x.admit()
	return true
}

func bedrockUsage(u Usage) obj {
	o := obj{{"inputTokens", u.InputTokens}, {"outputTokens", u.OutputTokens},
		{"totalTokens", u.InputTokens + u.OutputTokens + u.CachedInputTokens}}
	if u.CachedInputTokens > 0 {
		o = append(o, kv{"cacheReadInputTokens", u.CachedInputTokens}, kv{"cacheWriteInputTokens", 0})
	}
	return o
}

// guardrailTrace is trace.guardrail for an intervention.
func (g *Guardrail) trace(id string, textLen int) obj {
	filter := g.FilterType
	if filter == "" {
		filter = "VIOLENCE"
	}
	assessment := obj{
		{"contentPolicy", obj{{"filters", []obj{{
			{"type", filter}, {"confidence", "HIGH"}, {"filterStrength", "HIGH"},
			{"action", "BLOCKED"}, {"detected", true},
		}}}}},
		{"invocationMetrics", obj{
			{"guardrailProcessingLatency", 87},
			{"usage", obj{{"topicPolicyUnits", 0}, {"contentPolicyUnits", 1}, {"wordPolicyUnits", 0},
				{"sensitiveInformationPolicyUnits", 0}, {"sensitiveInformationPolicyFreeUnits", 0},
				{"contextualGroundingPolicyUnits", 0}}},
			{"guardrailCoverage", obj{{"textCharacters", obj{{"guarded", textLen}, {"total", textLen}}}}},
		}},
	}
	if g.Output {
		return obj{{"modelOutput", []string{}}, {"outputAssessments", obj{{id, []obj{assessment}}}}}
	}
	return obj{{"modelOutput", []string{}}, {"inputAssessment", obj{{id, assessment}}}}
}

func (b *Bedrock) converse(x *exchange) {
	if x.body == nil {
		x.writeError(bedrockError, Failure{Status: http.StatusBadRequest, Message: "Malformed input request, please reformat your input and try again."})
		return
	}
	if !x.has("messages") {
		x.writeError(bedrockError, Failure{Status: http.StatusBadRequest,
			Message: "1 validation error detected: Value null at 'messages' failed to satisfy constraint: Member must not be null"})
		return
	}
	gc, guarded := x.body["guardrailConfig"].(map[string]any)
	g := b.Guardrail
	if guarded && g != nil {
		id, _ := gc["guardrailIdentifier"].(string)
		version, _ := gc["guardrailVersion"].(string)
		if (g.ID != "" && id != g.ID) || (g.Version != "" && version != g.Version) {
			x.writeError(bedrockError, Failure{Status: http.StatusBadRequest,
				Message: "The guardrail identifier or version provided in the request does not exist."})
			return
		}
	}
	rep, ok := x.answer(bedrockError)
	if !ok {
		return
	}
	start := time.Now()
	x.w.Header().Set("X-Amzn-RequestId", awsRequestID())
	stop := rep.StopReason
	if stop == "" {
		stop = "end_turn"
		if len(rep.ToolCalls) > 0 {
			stop = "tool_use"
		}
	}
	calls := make([]ToolCall, len(rep.ToolCalls))
	for i, c := range rep.ToolCalls {
		if c.ID == "" {
			c.ID = x.s.id("tooluse_")
		}
		calls[i] = c
	}
	u := rep.usage()
	text, deltas := rep.text(), rep.deltas()
	var trace obj
	if guarded && g != nil {
		msg := g.Message
		if msg == "" {
			msg = "Sorry, the model cannot answer this question."
		}
		text, deltas, calls, stop = msg, []string{msg}, nil, "guardrail_intervened"
		if t, _ := gc["trace"].(string); t == "enabled" || t == "enabled_full" {
			id, _ := gc["guardrailIdentifier"].(string)
			trace = obj{{"guardrail", g.trace(id, len(text))}}
		}
	}
	withText := text != "" || len(calls) == 0
	metrics := func() obj { return obj{{"latencyMs", max(1, time.Since(start).Milliseconds())}} }
	if !x.rec.Stream {
		var content []obj
		if withText {
			content = append(content, obj{{"text", text}})
		}
		for _, c := range calls {
			content = append(content, obj{{"toolUse", obj{{"toolUseId", c.ID}, {"name", c.Name}, {"input", rawJSON(c.Arguments)}}}})
		}
		body := obj{
			{"output", obj{{"message", obj{{"role", "assistant"}, {"content", content}}}}},
			{"stopReason", stop}, {"usage", bedrockUsage(u)}, {"metrics", metrics()},
		}
		if trace != nil {
			body = append(body, kv{"trace", trace})
		}
		x.writeJSON(body, rep.DropAfter)
		return
	}

	st := x.startStream("application/vnd.amazon.eventstream", rep.DropAfter)
	enc := eventstream.NewEncoder()
	event := func(typ string, members ...kv) {
		var msg eventstream.Message
		msg.Headers.Set(":event-type", eventstream.StringValue(typ))
		msg.Headers.Set(":content-type", eventstream.StringValue("application/json"))
		msg.Headers.Set(":message-type", eventstream.StringValue("event"))
		// Bedrock pads each event with a "p" member of varying length.
		msg.Payload = mustJSON(append(obj(members), kv{"p", strings.Repeat("abcdefghij", 1+len(members)%3)}))
		var buf bytes.Buffer
		if err := enc.Encode(&buf, msg); err != nil {
			panic(err)
		}
		st.send(buf.Bytes())
	}
	event("messageStart", kv{"role", "assistant"})
	index := 0
	if withText {
		for _, d := range deltas {
			event("contentBlockDelta", kv{"contentBlockIndex", index}, kv{"delta", obj{{"text", d}}})
		}
		event("contentBlockStop", kv{"contentBlockIndex", index})
		index++
	}
	for _, c := range calls {
		event("contentBlockStart", kv{"contentBlockIndex", index},
			kv{"start", obj{{"toolUse", obj{{"toolUseId", c.ID}, {"name", c.Name}}}}})
		for _, piece := range splitN(c.args(), 3) {
			event("contentBlockDelta", kv{"contentBlockIndex", index}, kv{"delta", obj{{"toolUse", obj{{"input", piece}}}}})
		}
		event("contentBlockStop", kv{"contentBlockIndex", index})
		index++
	}
	if rep.StreamError != nil {
		st.send(bedrockStreamException(*rep.StreamError, enc))
		return
	}
	event("messageStop", kv{"stopReason", stop})
	meta := []kv{{"usage", bedrockUsage(u)}, {"metrics", metrics()}}
	if trace != nil {
		meta = append(meta, kv{"trace", trace})
	}
	event("metadata", meta...)
}

// bedrockStreamException is an exception message of ConverseStream's event
// stream; its :exception-type is the union member's name
// (throttlingException, modelStreamErrorException, ...).
func bedrockStreamException(f Failure, enc *eventstream.Encoder) []byte {
	typ, msg := f.Type, f.Message
	if typ == "" {
		switch f.status() {
		case http.StatusTooManyRequests:
			typ = "throttlingException"
		case http.StatusServiceUnavailable:
			typ = "serviceUnavailableException"
		case http.StatusBadRequest:
			typ = "validationException"
		case http.StatusFailedDependency:
			typ = "modelStreamErrorException"
		default:
			typ = "internalServerException"
		}
	}
	typ = strings.ToLower(typ[:1]) + typ[1:]
	if msg == "" {
		_, msg = bedrockException(f.status())
	}
	var m eventstream.Message
	m.Headers.Set(":exception-type", eventstream.StringValue(typ))
	m.Headers.Set(":content-type", eventstream.StringValue("application/json"))
	m.Headers.Set(":message-type", eventstream.StringValue("exception"))
	m.Payload = mustJSON(obj{{"message", msg}})
	var buf bytes.Buffer
	if err := enc.Encode(&buf, m); err != nil {
		panic(err)
	}
	return buf.Bytes()
}

package llmtest

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
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
	b.Server = newServer(tb, mux)
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

// sigv4 is the parsed Authorization header of a SigV4 request.
type sigv4 struct {
	keyID, date, region, service string
	signedHeaders                []string
	signature                    string
}

func parseSigV4(authz string) (sigv4, bool) {
	rest, ok := strings.CutPrefix(authz, "AWS4-HMAC-SHA256 ")
	if !ok {
		return sigv4{}, false
	}
	var s sigv4
	for _, part := range strings.Split(rest, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "Credential":
			scope := strings.Split(v, "/")
			if len(scope) != 5 || scope[4] != "aws4_request" {
				return sigv4{}, false
			}
			s.keyID, s.date, s.region, s.service = scope[0], scope[1], scope[2], scope[3]
		case "SignedHeaders":
			s.signedHeaders = strings.Split(v, ";")
		case "Signature":
			s.signature = v
		}
	}
	return s, s.keyID != "" && len(s.signedHeaders) > 0 && s.signature != ""
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
	if authz == "" {
		return refuse("no Authorization", "MissingAuthenticationTokenException", "Missing Authentication Token")
	}
	sig, ok := parseSigV4(authz)
	if !ok {
		return refuse("malformed Authorization", "IncompleteSignatureException",
			"Authorization header requires 'Credential', 'Signature' and 'SignedHeaders' parameters.")
	}
	if sig.keyID != b.AccessKeyID {
		return refuse("unknown access key "+sig.keyID, "UnrecognizedClientException", "The security token included in the request is invalid.")
	}
	if b.SessionToken != "" && x.r.Header.Get("X-Amz-Security-Token") != b.SessionToken {
		return refuse("wrong session token", "UnrecognizedClientException", "The security token included in the request is invalid.")
	}
	amzDate := x.r.Header.Get("X-Amz-Date")
	signed, err := time.Parse("20060102T150405Z", amzDate)
	if err != nil || !slices.Contains(sig.signedHeaders, "x-amz-date") {
		return refuse("no signed X-Amz-Date", "IncompleteSignatureException", "Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header.")
	}
	if skew := time.Since(signed); skew > b.MaxClockSkew || -skew > b.MaxClockSkew {
		return refuse("signature expired", "InvalidSignatureException",
			"Signature expired: "+amzDate+" is now earlier than "+time.Now().UTC().Add(-b.MaxClockSkew).Format("20060102T150405Z")+".")
	}
	switch {
	case sig.date != signed.Format("20060102"):
		return refuse("scope date", "InvalidSignatureException", "Date in Credential scope does not match YYYYMMDD from ISO-8601 version of date from HTTP: '"+sig.date+"' != '"+signed.Format("20060102")+"', from '"+amzDate+"'.")
	case sig.region != b.Region:
		return refuse("scope region "+sig.region, "InvalidSignatureException", "Credential should be scoped to a valid region. ")
	case sig.service != "bedrock":
		return refuse("scope service "+sig.service, "InvalidSignatureException", "Credential should be scoped to correct service: 'bedrock'. ")
	}
	hash := sha256.Sum256(x.rec.Body)
	payloadHash := hex.EncodeToString(hash[:])
	if h := x.r.Header.Get("X-Amz-Content-Sha256"); h != "" && h != payloadHash {
		if h != "UNSIGNED-PAYLOAD" {
			return refuse("x-amz-content-sha256 mismatch", "InvalidSignatureException", "The provided 'x-amz-content-sha256' header does not match what was computed.")
		}
		payloadHash = h
	}
	if want := b.expectedSignature(x.r, sig, signed, payloadHash); !hmac.Equal([]byte(want), []byte(sig.signature)) {
		return refuse("signature mismatch", "InvalidSignatureException", "The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method. Consult the service documentation for details.")
	}
	x.admit()
	return true
}

// expectedSignature signs a copy of r that has only the headers r signed,
// with the AWS SDK's signer, and returns the signature ("" when the signer
// would sign other headers than r did).
func (b *Bedrock) expectedSignature(r *http.Request, sig sigv4, at time.Time, payloadHash string) string {
	u := *r.URL
	u.Scheme, u.Host = "http", r.Host
	req := &http.Request{Method: r.Method, URL: &u, Host: r.Host, Header: http.Header{}, ContentLength: -1}
	creds := aws.Credentials{AccessKeyID: b.AccessKeyID, SecretAccessKey: b.SecretAccessKey}
	for _, name := range sig.signedHeaders {
		switch name {
		case "host":
		case "content-length":
			req.ContentLength = r.ContentLength
		case "x-amz-security-token":
			creds.SessionToken = r.Header.Get(name)
			req.Header[http.CanonicalHeaderKey(name)] = r.Header.Values(name)
		default:
			req.Header[http.CanonicalHeaderKey(name)] = r.Header.Values(name)
		}
	}
	err := v4.NewSigner().SignHTTP(context.Background(), creds, req, payloadHash, sig.service, sig.region, at)
	if err != nil {
		return ""
	}
	mine, ok := parseSigV4(req.Header.Get("Authorization"))
	if !ok || !slices.Equal(mine.signedHeaders, sig.signedHeaders) {
		return ""
	}
	return mine.signature
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

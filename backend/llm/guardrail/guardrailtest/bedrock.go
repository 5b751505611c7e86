package guardrailtest

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// Bedrock emulates the Bedrock runtime's ApplyGuardrail: POST
// /guardrail/{GuardrailID}/version/{GuardrailVersion}/apply with
// {"source": "INPUT"|"OUTPUT", "content": [{"text": {"text": ...}}]},
// signed with SigV4 (service "bedrock", Region) by
// AccessKeyID/SecretAccessKey: the emulator signs the request again with
// the AWS SDK's signer and compares. With APIKey set, "Authorization:
// Bearer <APIKey>" (a Bedrock API key) is accepted too.
//
// A text holding a word of Block is blocked by the content filter named
// there (the output is BlockedMessage); otherwise the words of Anonymize
// are replaced by "{TYPE}" (one output per content block, assessments
// ANONYMIZED). Without either, the action is NONE.
type Bedrock struct {
	*Server
	Region          string
	AccessKeyID     string
	SecretAccessKey string
	// SessionToken, when set, must come as X-Amz-Security-Token.
	SessionToken     string
	APIKey           string
	GuardrailID      string
	GuardrailVersion string
	// Block maps a word to the content filter type (VIOLENCE, HATE, ...).
	Block map[string]string
	// Anonymize maps a word to the PII entity type (EMAIL, NAME, ...).
	Anonymize      map[string]string
	BlockedMessage string
	// MaxClockSkew bounds the difference between X-Amz-Date and now.
	MaxClockSkew time.Duration
}

// NewBedrock starts an ApplyGuardrail emulator (region us-east-1,
// guardrail "gr-emulated" version "1") that the test's Cleanup stops.
func NewBedrock(tb testing.TB) *Bedrock {
	tb.Helper()
	b := &Bedrock{
		Server:           newServer(tb),
		Region:           "us-east-1",
		AccessKeyID:      "AKIAEMULATEDGUARDRL1",
		SecretAccessKey:  "emulatedGuardrailSecret/0123456789abcdefXYZ",
		GuardrailID:      "gr-emulated",
		GuardrailVersion: "1",
		BlockedMessage:   "Sorry, the model cannot answer this question.",
		MaxClockSkew:     5 * time.Minute,
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /guardrail/{id}/version/{version}/apply", b.apply)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		b.begin(w, r).refuse("unknown path", bedrockError("UnknownOperationException"), http.StatusNotFound, "Unknown operation")
	})
	b.start(mux)
	return b
}

// bedrockError renders AWS's REST-JSON error: the exception in
// X-Amzn-ErrorType and {"message": ...}; typ "" derives it from the
// status.
func bedrockError(typ string) errorFormat {
	return func(h http.Header, status int, msg string) []byte {
		t := typ
		if t == "" {
			switch status {
			case http.StatusBadRequest:
				t = "ValidationException"
			case http.StatusForbidden:
				t = "AccessDeniedException"
			case http.StatusNotFound:
				t = "ResourceNotFoundException"
			case http.StatusTooManyRequests:
				t = "ThrottlingException"
			case http.StatusServiceUnavailable:
				t = "ServiceUnavailableException"
			default:
				t = "InternalServerException"
			}
		}
		h.Set("X-Amzn-ErrorType", t+":http://internal.amazon.com/coral/com.amazon.bedrock/")
		h.Set("X-Amzn-RequestId", "emulated-request-id")
		return mustJSON(obj{{"message", msg}})
	}
}

// settings copies the emulator's settings under its lock.
func (b *Bedrock) settings() *Bedrock {
	var c Bedrock
	b.locked(func() {
		c = *b
		c.Block, c.Anonymize = maps.Clone(b.Block), maps.Clone(b.Anonymize)
	})
	return &c
}

func (b *Bedrock) apply(w http.ResponseWriter, r *http.Request) {
	x := b.begin(w, r)
	b = b.settings()
	if reason, typ, msg := b.authenticate(r, x.rec.Body); reason != "" {
		x.refuse(reason, bedrockError(typ), http.StatusForbidden, msg)
		return
	}
	if r.PathValue("id") != b.GuardrailID || r.PathValue("version") != b.GuardrailVersion {
		x.refuse("unknown guardrail "+r.PathValue("id")+" version "+r.PathValue("version"), bedrockError(""),
			http.StatusNotFound, "The guardrail identifier or version provided in the request does not exist.")
		return
	}
	var body struct {
		Source  string `json:"source"`
		Content []struct {
			Text *struct {
				Text string `json:"text"`
			} `json:"text"`
		} `json:"content"`
	}
	if !x.decode(&body) || body.Source != "INPUT" && body.Source != "OUTPUT" || len(body.Content) == 0 {
		x.refuse("invalid body", bedrockError(""), http.StatusBadRequest,
			"1 validation error detected: Value at 'source' failed to satisfy constraint: Member must satisfy enum value set: [INPUT, OUTPUT]")
		return
	}
	texts := make([]string, len(body.Content))
	for i, c := range body.Content {
		if c.Text == nil {
			x.refuse("a block without text", bedrockError(""), http.StatusBadRequest, "Content block must have text")
			return
		}
		texts[i] = c.Text.Text
	}
	if !x.admit(bedrockError("")) {
		return
	}
	x.writeJSON(b.judge(texts))
}

// judge is ApplyGuardrail's answer for texts.
func (b *Bedrock) judge(texts []string) obj {
	usage := obj{{"topicPolicyUnits", 0}, {"contentPolicyUnits", len(texts)}, {"wordPolicyUnits", 0},
		{"sensitiveInformationPolicyUnits", len(texts)}, {"sensitiveInformationPolicyFreeUnits", 0},
		{"contextualGroundingPolicyUnits", 0}}
	chars := 0
	for _, t := range texts {
		chars += len(t)
	}
	coverage := obj{{"textCharacters", obj{{"guarded", chars}, {"total", chars}}}}
	var filters, pii []obj
	masked := slices.Clone(texts)
	for i, t := range texts {
		for word, typ := range b.Block {
			if containsWord(t, word) {
				filters = append(filters, obj{{"type", typ}, {"confidence", "HIGH"}, {"filterStrength", "HIGH"}, {"action", "BLOCKED"}, {"detected", true}})
			}
		}
		for word, typ := range b.Anonymize {
			if containsWord(t, word) {
				pii = append(pii, obj{{"match", word}, {"type", typ}, {"action", "ANONYMIZED"}, {"detected", true}})
				masked[i] = replaceFold(masked[i], word, "{"+typ+"}")
			}
		}
	}
	assessment := obj{}
	if len(filters) > 0 {
		assessment = append(assessment, kv{"contentPolicy", obj{{"filters", filters}}})
	}
	if len(pii) > 0 {
		assessment = append(assessment, kv{"sensitiveInformationPolicy", obj{{"piiEntities", pii}}})
	}
	switch {
	case len(filters) > 0:
		return obj{{"usage", usage}, {"action", "GUARDRAIL_INTERVENED"}, {"actionReason", "Guardrail blocked."},
			{"outputs", []obj{{{"text", b.BlockedMessage}}}},
			{"assessments", []obj{assessment}}, {"guardrailCoverage", coverage}}
	case len(pii) > 0:
		outputs := make([]obj, len(masked))
		for i, t := range masked {
			outputs[i] = obj{{"text", t}}
		}
		return obj{{"usage", usage}, {"action", "GUARDRAIL_INTERVENED"}, {"actionReason", "Guardrail masked."},
			{"outputs", outputs}, {"assessments", []obj{assessment}}, {"guardrailCoverage", coverage}}
	}
	return obj{{"usage", usage}, {"action", "NONE"}, {"outputs", []obj{}}, {"assessments", []obj{{}}},
		{"guardrailCoverage", coverage}}
}

// replaceFold replaces every occurrence of word in s, ASCII case ignored.
func replaceFold(s, word, with string) string {
	lower, lw := strings.ToLower(s), strings.ToLower(word)
	var out strings.Builder
	for {
		i := strings.Index(lower, lw)
		if i < 0 {
			out.WriteString(s)
			return out.String()
		}
		out.WriteString(s[:i])
		out.WriteString(with)
		s, lower = s[i+len(word):], lower[i+len(word):]
	}
}

// authenticate checks the request's credentials: a Bedrock API key, or a
// SigV4 signature by the emulator's keys. It returns why it refuses (""
// when it accepts), with AWS's exception and message.
func (b *Bedrock) authenticate(r *http.Request, body []byte) (reason, typ, msg string) {
	authz := r.Header.Get("Authorization")
	if key, ok := strings.CutPrefix(authz, "Bearer "); ok && b.APIKey != "" {
		if subtle.ConstantTimeCompare([]byte(key), []byte(b.APIKey)) != 1 {
			return "wrong API key", "UnrecognizedClientException", "Invalid API Key format: Must start with pre-defined prefix"
		}
		return "", "", ""
	}
	if authz == "" {
		return "no Authorization", "MissingAuthenticationTokenException", "Missing Authentication Token"
	}
	sig, ok := parseSigV4(authz)
	if !ok {
		return "malformed Authorization", "IncompleteSignatureException", "Authorization header requires 'Credential', 'Signature' and 'SignedHeaders' parameters."
	}
	if sig.keyID != b.AccessKeyID {
		return "unknown access key " + sig.keyID, "UnrecognizedClientException", "The security token included in the request is invalid."
	}
	if b.SessionToken != "" && subtle.ConstantTimeCompare([]byte(r.Header.Get("X-Amz-Security-Token")), []byte(b.SessionToken)) != 1 {
		return "wrong session token", "UnrecognizedClientException", "The security token included in the request is invalid."
	}
	amzDate := r.Header.Get("X-Amz-Date")
	signed, err := time.Parse("20060102T150405Z", amzDate)
	if err != nil || !slices.Contains(sig.signedHeaders, "x-amz-date") {
		return "no signed X-Amz-Date", "IncompleteSignatureException", "Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header."
	}
	if skew := time.Since(signed); skew > b.MaxClockSkew || -skew > b.MaxClockSkew {
		return "signature expired", "InvalidSignatureException", "Signature expired: " + amzDate + " is now earlier than the allowed skew."
	}
	switch {
	case sig.date != signed.Format("20060102"):
		return "scope date", "InvalidSignatureException", "Date in Credential scope does not match YYYYMMDD from ISO-8601 version of date from HTTP."
	case sig.region != b.Region:
		return "scope region " + sig.region, "InvalidSignatureException", "Credential should be scoped to a valid region."
	case sig.service != "bedrock":
		return "scope service " + sig.service, "InvalidSignatureException", "Credential should be scoped to correct service: 'bedrock'."
	}
	sum := sha256.Sum256(body)
	payloadHash := hex.EncodeToString(sum[:])
	if h := r.Header.Get("X-Amz-Content-Sha256"); h != "" && h != payloadHash {
		return "x-amz-content-sha256 mismatch", "InvalidSignatureException", "The provided 'x-amz-content-sha256' header does not match what was computed."
	}
	want := b.expectedSignature(r, sig, signed, payloadHash)
	if want == "" || !hmac.Equal([]byte(want), []byte(sig.signature)) {
		return "signature mismatch", "InvalidSignatureException", "The request signature we calculated does not match the signature you provided."
	}
	return "", "", ""
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

// expectedSignature signs a copy of r holding only the headers r signed,
// with the AWS SDK's signer, and returns the signature ("" when the signer
// would sign other headers than r did).
func (b *Bedrock) expectedSignature(r *http.Request, sig sigv4, at time.Time, payloadHash string) string {
	u := *r.URL
	u.Scheme, u.Host = "https", r.Host
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
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, req, payloadHash, sig.service, sig.region, at); err != nil {
		return ""
	}
	mine, ok := parseSigV4(req.Header.Get("Authorization"))
	if !ok || !slices.Equal(mine.signedHeaders, sig.signedHeaders) {
		return ""
	}
	return mine.signature
}

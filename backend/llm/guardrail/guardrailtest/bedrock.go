package guardrailtest

import (
	"crypto/subtle"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/relaygate/gateway/backend/llm/llmtest"
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
	check := llmtest.SigV4Check{AccessKeyID: b.AccessKeyID, SecretAccessKey: b.SecretAccessKey, SessionToken: b.SessionToken,
		Region: b.Region, Service: "bedrock", MaxClockSkew: b.MaxClockSkew}
	return check.Verify(r, body)
}

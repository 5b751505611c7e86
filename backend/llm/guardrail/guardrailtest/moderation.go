package guardrailtest

import (
	"crypto/subtle"
	"encoding/json"
	"maps"
	"net/http"
	"strings"
	"testing"
)

// ModerationCategories are the categories of OpenAI's omni-moderation
// models, in the order the API lists them.
var ModerationCategories = []string{
	"harassment", "harassment/threatening", "hate", "hate/threatening",
	"illicit", "illicit/violent", "self-harm", "self-harm/intent",
	"self-harm/instructions", "sexual", "sexual/minors", "violence",
	"violence/graphic",
}

// Moderation emulates OpenAI's moderation endpoint, POST /v1/moderations
// with "Authorization: Bearer <APIKey>": input is a string or a list of
// strings, and each input gets a result, flagged in the categories whose
// words (Flag: word -> category) it holds.
type Moderation struct {
	*Server
	APIKey string
	Flag   map[string]string
}

// NewModeration starts a moderation emulator that the test's Cleanup
// stops.
func NewModeration(tb testing.TB) *Moderation {
	tb.Helper()
	m := &Moderation{Server: newServer(tb), APIKey: "sk-emulated-moderation-key"}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/moderations", m.moderations)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		m.begin(w, r).refuse("unknown path", openAIError, http.StatusNotFound, "Invalid URL ("+r.Method+" "+r.URL.Path+")")
	})
	m.start(mux)
	return m
}

// openAIError renders OpenAI's error body.
func openAIError(_ http.Header, status int, msg string) []byte {
	typ, code := "server_error", any(nil)
	switch status {
	case http.StatusUnauthorized:
		typ, code = "invalid_request_error", "invalid_api_key"
	case http.StatusBadRequest, http.StatusNotFound:
		typ = "invalid_request_error"
	case http.StatusTooManyRequests:
		typ, code = "requests", "rate_limit_exceeded"
	}
	return mustJSON(obj{{"error", obj{{"message", msg}, {"type", typ}, {"param", nil}, {"code", code}}}})
}

func (m *Moderation) moderations(w http.ResponseWriter, r *http.Request) {
	x := m.begin(w, r)
	var apiKey string
	var flag map[string]string
	m.locked(func() { apiKey, flag = m.APIKey, maps.Clone(m.Flag) })
	key, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || subtle.ConstantTimeCompare([]byte(key), []byte(apiKey)) != 1 {
		x.refuse("wrong or missing API key", openAIError, http.StatusUnauthorized, "Incorrect API key provided.")
		return
	}
	var body struct {
		Input json.RawMessage `json:"input"`
		Model string          `json:"model"`
	}
	var inputs []string
	if !x.decode(&body) {
		x.refuse("bad body", openAIError, http.StatusBadRequest, "We could not parse the JSON body of your request.")
		return
	}
	if json.Unmarshal(body.Input, &inputs) != nil {
		var one string
		if json.Unmarshal(body.Input, &one) != nil {
			x.refuse("bad input", openAIError, http.StatusBadRequest, "Invalid type for 'input': expected a string or an array of strings.")
			return
		}
		inputs = []string{one}
	}
	if !x.admit(openAIError) {
		return
	}
	model := body.Model
	if model == "" {
		model = "omni-moderation-latest"
	}
	results := make([]obj, len(inputs))
	for i, in := range inputs {
		results[i] = moderationResult(in, flag)
	}
	x.writeJSON(obj{{"id", m.id("modr-")}, {"model", model}, {"results", results}})
}

// moderationResult judges one input.
func moderationResult(input string, flag map[string]string) obj {
	hit := map[string]bool{}
	for word, category := range flag {
		if containsWord(input, word) {
			hit[category] = true
		}
	}
	var categories, scores, types obj
	for _, c := range ModerationCategories {
		score := 0.0001
		if hit[c] {
			score = 0.97
		}
		categories = append(categories, kv{c, hit[c]})
		scores = append(scores, kv{c, score})
		types = append(types, kv{c, []string{"text"}})
	}
	return obj{{"flagged", len(hit) > 0}, {"categories", categories},
		{"category_scores", scores}, {"category_applied_input_types", types}}
}

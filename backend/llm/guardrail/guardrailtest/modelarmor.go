package guardrailtest

import (
	"maps"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/relaygate/gateway/backend/llm/llmtest"
)

// ModelArmor emulates Google Cloud Model Armor: POST
// /v1/projects/{Project}/locations/{Location}/templates/{Template}:sanitizeUserPrompt
// ({"user_prompt_data": {"text": ...}}) and :sanitizeModelResponse
// ({"model_response_data": {"text": ...}}), with "Authorization: Bearer
// <token>" where the token is one the issuer (an llmtest Vertex emulator,
// whose token endpoint service account keys use) issued and that has not
// expired: the emulator asks the issuer, as Google's services ask its
// token service.
//
// A text holding a word of Match (word -> filter: rai, sdp,
// pi_and_jailbreak, malicious_uris, csam) matches that filter;
// filterMatchState is MATCH_FOUND when any filter matched.
type ModelArmor struct {
	*Server
	Project  string
	Location string
	Template string
	Match    map[string]string

	issuer *llmtest.Vertex
	client *http.Client
}

// NewModelArmor starts a Model Armor emulator (project "emulated-project",
// location "us-central1", template "tmpl-emulated") whose tokens the
// issuer checks; the test's Cleanup stops it.
func NewModelArmor(tb testing.TB, issuer *llmtest.Vertex) *ModelArmor {
	tb.Helper()
	m := &ModelArmor{
		Server:   newServer(tb),
		Project:  "emulated-project",
		Location: "us-central1",
		Template: "tmpl-emulated",
		issuer:   issuer,
		client:   &http.Client{Timeout: 10 * time.Second},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/projects/{project}/locations/{location}/templates/{call}", m.sanitize)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		m.begin(w, r).refuse("unknown path", googleError, http.StatusNotFound, "The requested URL "+r.URL.Path+" was not found on this server.")
	})
	m.start(mux)
	return m
}

// googleError renders Google's error body.
func googleError(_ http.Header, status int, msg string) []byte {
	st := "INTERNAL"
	switch status {
	case http.StatusBadRequest:
		st = "INVALID_ARGUMENT"
	case http.StatusUnauthorized:
		st = "UNAUTHENTICATED"
	case http.StatusForbidden:
		st = "PERMISSION_DENIED"
	case http.StatusNotFound:
		st = "NOT_FOUND"
	case http.StatusTooManyRequests:
		st = "RESOURCE_EXHAUSTED"
	case http.StatusServiceUnavailable:
		st = "UNAVAILABLE"
	}
	return mustJSON(obj{{"error", obj{{"code", status}, {"message", msg}, {"status", st}}}})
}

// settings copies the emulator's settings under its lock.
func (m *ModelArmor) settings() *ModelArmor {
	var c ModelArmor
	m.locked(func() {
		c = *m
		c.Match = maps.Clone(m.Match)
	})
	return &c
}

func (m *ModelArmor) sanitize(w http.ResponseWriter, r *http.Request) {
	x := m.begin(w, r)
	m = m.settings()
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || tok == "" {
		x.refuse("no bearer token", googleError, http.StatusUnauthorized, "Request is missing required authentication credential. Expected OAuth 2 access token.")
		return
	}
	if !m.tokenValid(tok) {
		x.refuse("token not issued or expired", googleError, http.StatusUnauthorized, "Request had invalid authentication credentials. Expected OAuth 2 access token.")
		return
	}
	template, method, _ := strings.Cut(r.PathValue("call"), ":")
	switch {
	case r.PathValue("project") != m.Project:
		x.refuse("project "+r.PathValue("project"), googleError, http.StatusForbidden, "Permission denied on resource project "+r.PathValue("project")+".")
		return
	case r.PathValue("location") != m.Location:
		x.refuse("location "+r.PathValue("location"), googleError, http.StatusBadRequest, "Location "+r.PathValue("location")+" does not match the endpoint's location "+m.Location+".")
		return
	case template != m.Template:
		x.refuse("template "+template, googleError, http.StatusNotFound, "Template "+template+" not found.")
		return
	case method != "sanitizeUserPrompt" && method != "sanitizeModelResponse":
		x.refuse("method "+method, googleError, http.StatusNotFound, "Method "+method+" not found.")
		return
	}
	// Google's JSON reads both the proto's snake_case and camelCase names.
	var body struct {
		Prompt        *struct{ Text string } `json:"user_prompt_data"`
		PromptCamel   *struct{ Text string } `json:"userPromptData"`
		Response      *struct{ Text string } `json:"model_response_data"`
		ResponseCamel *struct{ Text string } `json:"modelResponseData"`
	}
	if !x.decode(&body) {
		x.refuse("bad body", googleError, http.StatusBadRequest, "Invalid JSON payload received.")
		return
	}
	data := body.Prompt
	if data == nil {
		data = body.PromptCamel
	}
	if method == "sanitizeModelResponse" {
		data = body.Response
		if data == nil {
			data = body.ResponseCamel
		}
	}
	if data == nil {
		x.refuse("no data", googleError, http.StatusBadRequest, "Request data is empty.")
		return
	}
	if !x.admit(googleError) {
		return
	}
	x.writeJSON(obj{{"sanitizationResult", m.judge(data.Text)}})
}

// judge is the sanitizationResult for text.
func (m *ModelArmor) judge(text string) obj {
	matched := map[string]bool{}
	for word, filter := range m.Match {
		if containsWord(text, word) {
			matched[filter] = true
		}
	}
	state := func(f string) string {
		if matched[f] {
			return "MATCH_FOUND"
		}
		return "NO_MATCH_FOUND"
	}
	result := func(f string) obj { return obj{{"executionState", "EXECUTION_SUCCESS"}, {"matchState", state(f)}} }
	rai := append(result("rai"), kv{"raiFilterTypeResults", obj{
		{"dangerous", obj{{"confidenceLevel", "LOW_AND_ABOVE"}, {"matchState", state("rai")}}},
		{"harassment", obj{{"matchState", "NO_MATCH_FOUND"}}},
	}})
	overall := "NO_MATCH_FOUND"
	if len(matched) > 0 {
		overall = "MATCH_FOUND"
	}
	return obj{
		{"filterMatchState", overall},
		{"filterResults", obj{
			{"rai", obj{{"raiFilterResult", rai}}},
			{"sdp", obj{{"sdpFilterResult", obj{{"inspectResult", result("sdp")}}}}},
			{"pi_and_jailbreak", obj{{"piAndJailbreakFilterResult", append(result("pi_and_jailbreak"), kv{"confidenceLevel", "HIGH"})}}},
			{"malicious_uris", obj{{"maliciousUriFilterResult", result("malicious_uris")}}},
			{"csam", obj{{"csamFilterFilterResult", result("csam")}}},
		}},
		{"invocationResult", "SUCCESS"},
		{"sanitizationMetadata", obj{}},
	}
}

// tokenValid asks the issuer about tok: a Vertex call it authorizes and
// then answers 404 (an unknown publisher) proves the token valid; 401
// proves it not.
func (m *ModelArmor) tokenValid(tok string) bool {
	url := m.issuer.URL + "/v1/projects/" + m.issuer.Project + "/locations/" + m.issuer.Location +
		"/publishers/guardrailtest/models/token-check:check"
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader("{}"))
	if err != nil {
		return false
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	resp, err := m.client.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusNotFound
}

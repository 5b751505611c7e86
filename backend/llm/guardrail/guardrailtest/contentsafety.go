package guardrailtest

import (
	"crypto/subtle"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// Harm is a harm category and the severity a text holding a word gets.
type Harm struct {
	Category string // Hate, SelfHarm, Sexual or Violence
	Severity int    // 0 to 7 (FourSeverityLevels answers 0, 2, 4, 6)
}

// ContentSafetyCategories are the harm categories text:analyze reports.
var ContentSafetyCategories = []string{"Hate", "SelfHarm", "Sexual", "Violence"}

// Content Safety's text bounds (characters).
const (
	AnalyzeTextLimit   = 10000
	JailbreakTextLimit = 1000
)

// ContentSafety emulates Azure AI Content Safety's text APIs: POST
// /contentsafety/text:analyze ({text, blocklistNames,
// haltOnBlocklistHit} -> {blocklistsMatch, categoriesAnalysis}) and
// /contentsafety/text:detectJailbreak ({text} -> {jailbreakAnalysis:
// {detected}}), each with an api-version it knows, and a resource key in
// Ocp-Apim-Subscription-Key or "Authorization: Bearer <Token>".
//
// A text gets, per category, the highest severity of the words of Harm it
// holds (0 otherwise), matches the blocklists of Blocklists whose terms it
// holds (those named in the request), and is a jailbreak when it holds a
// word of Jailbreak. Texts over the service's limits are refused (400).
type ContentSafety struct {
	*Server
	Key        string
	Token      string
	Harm       map[string]Harm
	Blocklists map[string][]string
	Jailbreak  []string
}

// The api-versions the emulator serves.
var (
	analyzeVersions   = []string{"2023-10-01", "2024-09-01"}
	jailbreakVersions = []string{"2023-10-15-preview", "2024-02-15-preview"}
)

// NewContentSafety starts a Content Safety emulator that the test's
// Cleanup stops.
func NewContentSafety(tb testing.TB) *ContentSafety {
	tb.Helper()
	c := &ContentSafety{Server: newServer(tb), Key: "0123456789abcdef0123456789abcdef"}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /contentsafety/text:analyze", c.analyze)
	mux.HandleFunc("POST /contentsafety/text:detectJailbreak", c.detectJailbreak)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		c.begin(w, r).refuse("unknown path", azureError, http.StatusNotFound, "Resource not found")
	})
	c.start(mux)
	return c
}

// azureError renders Content Safety's error body.
func azureError(_ http.Header, status int, msg string) []byte {
	code := "InternalError"
	switch status {
	case http.StatusBadRequest:
		code = "InvalidRequestBody"
	case http.StatusUnauthorized:
		code = "401"
	case http.StatusNotFound:
		code = "404"
	case http.StatusTooManyRequests:
		code = "TooManyRequests"
	}
	return mustJSON(obj{{"error", obj{{"code", code}, {"message", msg}}}})
}

// settings copies the emulator's settings under its lock.
func (c *ContentSafety) settings() *ContentSafety {
	var cp ContentSafety
	c.locked(func() {
		cp = *c
		cp.Harm, cp.Blocklists, cp.Jailbreak = maps.Clone(c.Harm), maps.Clone(c.Blocklists), slices.Clone(c.Jailbreak)
	})
	return &cp
}

// authenticate reports why the credentials are refused ("" when accepted).
func (c *ContentSafety) authenticate(r *http.Request) string {
	if key := r.Header.Get("Ocp-Apim-Subscription-Key"); key != "" {
		if subtle.ConstantTimeCompare([]byte(key), []byte(c.Key)) != 1 {
			return "wrong key"
		}
		return ""
	}
	if tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok && c.Token != "" {
		if subtle.ConstantTimeCompare([]byte(tok), []byte(c.Token)) != 1 {
			return "wrong token"
		}
		return ""
	}
	return "no credentials"
}

// open checks what both operations check: credentials, api-version and
// the text; it returns the exchange and the text, or nil when it answered.
func (c *ContentSafety) open(w http.ResponseWriter, r *http.Request, versions []string, limit int, body any, text func() string) *exchange {
	x := c.begin(w, r)
	if reason := c.authenticate(r); reason != "" {
		x.refuse(reason, azureError, http.StatusUnauthorized, "Access denied due to invalid subscription key or wrong API endpoint. Make sure to provide a valid key for an active subscription and use a correct regional API endpoint for your resource.")
		return nil
	}
	v := r.URL.Query().Get("api-version")
	if v == "" {
		x.refuse("no api-version", azureError, http.StatusNotFound, "Resource not found")
		return nil
	}
	if !slices.Contains(versions, v) {
		x.refuse("api-version "+v, azureError, http.StatusNotFound, "Resource not found")
		return nil
	}
	if !x.decode(body) {
		x.refuse("bad body", azureError, http.StatusBadRequest, "The request body is invalid.")
		return nil
	}
	if n := utf8.RuneCountInString(text()); n == 0 || n > limit {
		x.refuse("text length", azureError, http.StatusBadRequest, "The text must be 1 to "+strconv.Itoa(limit)+" characters.")
		return nil
	}
	if !x.admit(azureError) {
		return nil
	}
	return x
}

func (c *ContentSafety) analyze(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Text               string   `json:"text"`
		BlocklistNames     []string `json:"blocklistNames"`
		HaltOnBlocklistHit bool     `json:"haltOnBlocklistHit"`
	}
	c = c.settings()
	x := c.open(w, r, analyzeVersions, AnalyzeTextLimit, &body, func() string { return body.Text })
	if x == nil {
		return
	}
	matches := []obj{}
	for _, name := range body.BlocklistNames {
		for _, term := range c.Blocklists[name] {
			if containsWord(body.Text, term) {
				matches = append(matches, obj{{"blocklistName", name}, {"blocklistItemId", c.id("item-")}, {"blocklistItemText", term}})
			}
		}
	}
	categories := []obj{}
	if !body.HaltOnBlocklistHit || len(matches) == 0 {
		for _, cat := range ContentSafetyCategories {
			sev := 0
			for word, h := range c.Harm {
				if h.Category == cat && containsWord(body.Text, word) && h.Severity > sev {
					sev = h.Severity
				}
			}
			categories = append(categories, obj{{"category", cat}, {"severity", sev}})
		}
	}
	x.writeJSON(obj{{"blocklistsMatch", matches}, {"categoriesAnalysis", categories}})
}

func (c *ContentSafety) detectJailbreak(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Text string `json:"text"`
	}
	c = c.settings()
	x := c.open(w, r, jailbreakVersions, JailbreakTextLimit, &body, func() string { return body.Text })
	if x == nil {
		return
	}
	detected := slices.ContainsFunc(c.Jailbreak, func(w string) bool { return containsWord(body.Text, w) })
	x.writeJSON(obj{{"jailbreakAnalysis", obj{{"detected", detected}}}})
}

package llmtest

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// CloudPlatformScope is the OAuth scope Vertex AI tokens must be asked for.
const CloudPlatformScope = "https://www.googleapis.com/auth/cloud-platform"

// Vertex emulates Vertex AI and the part of Google's OAuth token endpoint
// that service accounts use. Under /v1 (and /v1beta1)
// /projects/{Project}/locations/{Location}:
//   - publishers/google/models/{model}:generateContent,
//     :streamGenerateContent (SSE with alt=sse) and :countTokens;
//   - publishers/anthropic/models/{model}:rawPredict and :streamRawPredict
//     (the Messages API, anthropic_version in the body and no model), and
//     publishers/anthropic/models/count-tokens:rawPredict;
//   - endpoints/openapi/chat/completions (the OpenAI-compatible API).
//
// Requests need "Authorization: Bearer <token>" with a token this emulator
// issued and that has not expired: from POST /token, a JWT-bearer grant
// (RFC 7523) whose assertion the service account key signed (see
// ServiceAccountJSON), or from AccessToken.
//
// Failures on the Claude routes use Anthropic's error body when their
// status is 529 or their Type ends in "_error" (errors from the model),
// Google's otherwise (errors from Vertex AI: quota, authentication).
type Vertex struct {
	*Server
	Project  string
	Location string
	// TokenLifetime is the lifetime of issued tokens (an hour by default).
	TokenLifetime time.Duration

	key         *rsa.PrivateKey
	keyID       string
	clientEmail string

	tmu    sync.Mutex
	tokens map[string]time.Time // issued token -> expiry
	grants []Request
	hang   bool // token requests hang (HangTokens)
	hung   int  // token requests hanging now

	sigs thoughtSignatures
}

var (
	saKeyOnce sync.Once
	saKey     *rsa.PrivateKey
)

// serviceAccountKey is one RSA key for every emulator of the test binary
// (generating one takes a while).
func serviceAccountKey(tb testing.TB) *rsa.PrivateKey {
	saKeyOnce.Do(func() {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			tb.Fatalf("llmtest: generate key: %v", err)
		}
		saKey = k
	})
	return saKey
}

// NewVertex starts a Vertex AI emulator (project "emulated-project",
// location "us-central1") that the test's Cleanup stops.
func NewVertex(tb testing.TB) *Vertex {
	tb.Helper()
	kid := make([]byte, 20)
	_, _ = rand.Read(kid)
	v := &Vertex{
		Project:       "emulated-project",
		Location:      "us-central1",
		TokenLifetime: time.Hour,
		key:           serviceAccountKey(tb),
		keyID:         hex.EncodeToString(kid),
		clientEmail:   "llm-gateway@emulated-project.iam.gserviceaccount.com",
		tokens:        map[string]time.Time{},
	}
	gemini := geminiFlavor{vertex: true, errors: googleError, sigs: &v.sigs}
	claude := anthropicFlavor{vertex: true, errors: vertexClaudeError}
	openai := openaiFlavor{}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /token", v.token)
	for _, version := range []string{"v1", "v1beta1"} {
		prefix := "/" + version + "/projects/{project}/locations/{location}"
		mux.HandleFunc("POST "+prefix+"/publishers/{publisher}/models/{call}", func(w http.ResponseWriter, r *http.Request) {
			model, method, _ := cutLast(r.PathValue("call"), ":")
			x := v.begin(w, r, method)
			x.rec.Model = model
			switch publisher := r.PathValue("publisher"); {
			case publisher == "google":
				x.rec.Stream = method == "streamGenerateContent"
				if v.authorize(x) {
					gemini.serve(x, method)
				}
			case publisher == "anthropic" && model == "count-tokens" && method == "rawPredict":
				x.rec.Op, x.rec.Model = "count_tokens", x.str("model")
				if v.authorize(x) {
					claude.countTokens(x)
				}
			case publisher == "anthropic" && (method == "rawPredict" || method == "streamRawPredict"):
				x.rec.Stream = method == "streamRawPredict"
				if v.authorize(x) {
					claude.messages(x)
				}
			default:
				if v.authorize(x) {
					x.writeError(googleError, Failure{Status: http.StatusNotFound,
						Message: "Publisher Model `" + strings.TrimPrefix(r.URL.Path, "/"+version+"/") + "` not found."})
				}
			}
		})
		mux.HandleFunc("POST "+prefix+"/endpoints/openapi/chat/completions", func(w http.ResponseWriter, r *http.Request) {
			openai.chat(v.begin(w, r, "chat.completions"), v.authorize)
		})
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		x := v.begin(w, r, "unknown")
		x.admit()
		x.writeError(googleError, Failure{Status: http.StatusNotFound,
			Message: "The requested URL " + r.URL.Path + " was not found on this server."})
	})
	v.Server = newServer(tb)
	v.start(mux)
	return v
}

// BaseURL is the base clients are given (the origin; paths start with the
// API version).
func (v *Vertex) BaseURL() string { return v.URL }

// TokenURL is the emulator's OAuth token endpoint.
func (v *Vertex) TokenURL() string { return v.URL + "/token" }

// ClientEmail is the service account's address (the assertion's issuer).
func (v *Vertex) ClientEmail() string { return v.clientEmail }

// ServiceAccountJSON is a service account key file whose token_uri is this
// emulator's token endpoint; its private key signs the assertions the
// endpoint accepts.
func (v *Vertex) ServiceAccountJSON() []byte {
	der, err := x509.MarshalPKCS8PrivateKey(v.key)
	if err != nil {
		panic(err)
	}
	pemKey := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	b, err := json.MarshalIndent(map[string]string{
		"type":                        "service_account",
		"project_id":                  v.Project,
		"private_key_id":              v.keyID,
		"private_key":                 string(pemKey),
		"client_email":                v.clientEmail,
		"client_id":                   "100000000000000000001",
		"auth_uri":                    v.URL + "/auth",
		"token_uri":                   v.TokenURL(),
		"auth_provider_x509_cert_url": v.URL + "/certs",
		"client_x509_cert_url":        v.URL + "/certs/" + v.clientEmail,
		"universe_domain":             "googleapis.com",
	}, "", "  ")
	if err != nil {
		panic(err)
	}
	return b
}

// ServiceAccountFile writes ServiceAccountJSON to a file in the test's
// temporary directory and returns its path.
func (v *Vertex) ServiceAccountFile() string {
	v.tb.Helper()
	path := filepath.Join(v.tb.TempDir(), "service-account.json")
	if err := os.WriteFile(path, v.ServiceAccountJSON(), 0o600); err != nil {
		v.tb.Fatalf("llmtest: write key file: %v", err)
	}
	return path
}

// AccessToken issues an access token directly, as the token endpoint would.
func (v *Vertex) AccessToken() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	tok := "ya29.emu-" + hex.EncodeToString(b)
	v.tmu.Lock()
	v.tokens[tok] = time.Now().Add(v.TokenLifetime)
	v.tmu.Unlock()
	return tok
}

// RequireThoughtSignatures makes the Gemini models check thought
// signatures as Gemini 3 models do (see thoughtSignatures).
func (v *Vertex) RequireThoughtSignatures() { v.sigs.require() }

// HangTokens makes the token endpoint hang (on) or answer again (off):
// a token request that arrives while it hangs is never answered, and
// waits until its client goes away or the emulator closes, turning
// HangTokens off later included (as a token endpoint that recovered still
// leaves the requests it lost hanging).
func (v *Vertex) HangTokens(on bool) {
	v.tmu.Lock()
	v.hang = on
	v.tmu.Unlock()
}

// HungTokenRequests is the number of token requests hanging now
// (HangTokens): one whose client went away is no longer counted.
func (v *Vertex) HungTokenRequests() int {
	v.tmu.Lock()
	defer v.tmu.Unlock()
	return v.hung
}

// TokenRequests returns the requests the token endpoint received (they are
// not among Requests), with AuthError saying why a grant was refused.
func (v *Vertex) TokenRequests() []Request {
	v.tmu.Lock()
	defer v.tmu.Unlock()
	return slices.Clone(v.grants)
}

func (v *Vertex) authorize(x *exchange) bool {
	tok, ok := strings.CutPrefix(x.r.Header.Get("Authorization"), "Bearer ")
	if !ok || tok == "" {
		x.refuse("no bearer token", googleError, Failure{Status: http.StatusUnauthorized,
			Message: "Request is missing required authentication credential. Expected OAuth 2 access token, login cookie or other valid authentication credential. See https://developers.google.com/identity/sign-in/web/devconsole-project."})
		return false
	}
	v.tmu.Lock()
	exp, known := v.tokens[tok]
	v.tmu.Unlock()
	if !known || time.Now().After(exp) {
		reason := "unknown token"
		if known {
			reason = "expired token"
		}
		x.refuse(reason, googleError, Failure{Status: http.StatusUnauthorized,
			Message: "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential. See https://developers.google.com/identity/sign-in/web/devconsole-project."})
		return false
	}
	x.admit()
	if p := x.r.PathValue("project"); p != v.Project {
		x.writeError(googleError, Failure{Status: http.StatusForbidden,
			Message: "Permission denied on resource project " + p + "."})
		return false
	}
	if l := x.r.PathValue("location"); l != v.Location {
		x.writeError(googleError, Failure{Status: http.StatusBadRequest,
			Message: "Location " + l + " does not match the endpoint's location " + v.Location + "."})
		return false
	}
	return true
}

// vertexClaudeError renders a failure on a Claude route: Anthropic's body
// for errors of the model, Google's for errors of Vertex AI.
func vertexClaudeError(h http.Header, f Failure) []byte {
	if f.Status == 529 || strings.HasSuffix(f.Type, "_error") {
		return mustJSON(anthropicErrorBody(f, ""))
	}
	return googleError(h, f)
}

// token is the OAuth token endpoint: a JWT-bearer grant signed by the
// service account's key gets an access token.
func (v *Vertex) token(w http.ResponseWriter, r *http.Request) {
	x := v.begin(w, r, "token")
	v.tmu.Lock()
	hang := v.hang
	if hang {
		v.hung++
	}
	v.tmu.Unlock()
	if hang {
		x.wait(nil) // only the client's going away or Close ends it
		v.tmu.Lock()
		v.hung--
		v.tmu.Unlock()
		return
	}
	oauthError := func(status int, code, desc string) {
		x.rec.AuthError = code + ": " + desc
		v.tmu.Lock()
		v.grants = append(v.grants, x.rec)
		v.tmu.Unlock()
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.WriteHeader(status)
		_, _ = w.Write(mustJSON(obj{{"error", code}, {"error_description", desc}}))
	}
	form, err := url.ParseQuery(string(x.rec.Body))
	if err != nil {
		oauthError(http.StatusBadRequest, "invalid_request", "Invalid request body.")
		return
	}
	if gt := form.Get("grant_type"); gt != "urn:ietf:params:oauth:grant-type:jwt-bearer" {
		oauthError(http.StatusBadRequest, "unsupported_grant_type", "Invalid grant_type: "+gt)
		return
	}
	claims := jwt.MapClaims{}
	tok, err := jwt.ParseWithClaims(form.Get("assertion"), claims, func(t *jwt.Token) (any, error) {
		return &v.key.PublicKey, nil
	}, jwt.WithValidMethods([]string{"RS256"}), jwt.WithAudience(v.TokenURL()),
		jwt.WithIssuer(v.clientEmail), jwt.WithExpirationRequired(), jwt.WithIssuedAt())
	if err != nil || !tok.Valid {
		oauthError(http.StatusBadRequest, "invalid_grant", "Invalid JWT Signature.")
		return
	}
	if kid, _ := tok.Header["kid"].(string); kid != "" && kid != v.keyID {
		oauthError(http.StatusBadRequest, "invalid_grant", "Invalid JWT Signature.")
		return
	}
	scope, _ := claims["scope"].(string)
	if !slices.Contains(strings.Fields(scope), CloudPlatformScope) {
		oauthError(http.StatusBadRequest, "invalid_scope", "Invalid OAuth scope or ID token audience provided.")
		return
	}
	v.tmu.Lock()
	v.grants = append(v.grants, x.rec)
	v.tmu.Unlock()
	access := v.AccessToken()
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	_, _ = w.Write(mustJSON(obj{{"access_token", access},
		{"expires_in", int(v.TokenLifetime/time.Second) - 1}, {"token_type", "Bearer"}}))
}

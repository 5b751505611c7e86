package provider

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/valyala/fasthttp"

	"github.com/relaygate/gateway/backend/llm/llmtest"
	"github.com/relaygate/gateway/config"
)

// entraID emulates Microsoft Entra ID for one tenant and application: the
// v2 OpenID configuration and token endpoint (client credentials with a
// secret or a client assertion) over TLS, as MSAL requires, and App
// Service's managed identity endpoint (plain HTTP, as App Service serves it
// to the app).
type entraID struct {
	tls, msi *httptest.Server

	tenant, clientID string
	secret           string // the client secret taken
	assertion        string // the client assertion taken (workload identity)
	identityHeader   string // App Service's X-IDENTITY-HEADER
	token            string // the access token issued

	mu       sync.Mutex
	requests []url.Values // each token request's form (managed identity: its query)
	hang     bool         // token requests hang until their client goes (hangTokens)
	hung     int          // token requests hanging now
	stop     chan struct{}
}

func newEntraID(t *testing.T) *entraID {
	e := &entraID{
		tenant: "72f988bf-86f1-41af-91ab-2d7cd011db47", clientID: "0a1b2c3d-app",
		secret: "entra-client-secret-value", assertion: "eyJhbGciOiJSUzI1NiJ9.federated.sig",
		identityHeader: "app-service-identity-header", token: "entra-issued-access-token",
		stop: make(chan struct{}),
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{tenant}/v2.0/.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		base := e.tls.URL + "/" + r.PathValue("tenant")
		writeJSON(w, http.StatusOK, map[string]string{
			"token_endpoint":         base + "/oauth2/v2.0/token",
			"authorization_endpoint": base + "/oauth2/v2.0/authorize",
			"issuer":                 base + "/v2.0",
		})
	})
	mux.HandleFunc("POST /{tenant}/oauth2/v2.0/token", e.serveToken)
	e.tls = httptest.NewTLSServer(mux)
	t.Cleanup(e.tls.Close)
	e.msi = httptest.NewServer(http.HandlerFunc(e.serveManagedIdentity))
	t.Cleanup(e.msi.Close)
	t.Cleanup(func() { close(e.stop) }) // first: hanging requests end
	return e
}

// hangTokens makes the token endpoint hang (on) or answer again (off): a
// token request that arrives while it hangs is never answered.
func (e *entraID) hangTokens(on bool) {
	e.mu.Lock()
	e.hang = on
	e.mu.Unlock()
}

// hungRequests is the number of token requests hanging now.
func (e *entraID) hungRequests() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.hung
}

// hangs holds a token request that arrives while the endpoint hangs, until
// its client goes away; it reports whether it did.
func (e *entraID) hangs(r *http.Request) bool {
	e.mu.Lock()
	hang := e.hang
	if hang {
		e.hung++
	}
	e.mu.Unlock()
	if !hang {
		return false
	}
	_, _ = io.Copy(io.Discard, r.Body) // then the server sees the client go away
	select {
	case <-r.Context().Done():
	case <-e.stop:
	}
	e.mu.Lock()
	e.hung--
	e.mu.Unlock()
	return true
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func equalSecret(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }

func (e *entraID) record(v url.Values) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.requests = append(e.requests, v)
}

// tokenRequests are the token requests so far.
func (e *entraID) tokenRequests() []url.Values {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]url.Values(nil), e.requests...)
}

func (e *entraID) serveToken(w http.ResponseWriter, r *http.Request) {
	if e.hangs(r) {
		return
	}
	if err := r.ParseForm(); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_request"})
		return
	}
	e.record(r.PostForm)
	f := r.PostForm
	authenticated := f.Get("client_secret") != "" && equalSecret(f.Get("client_secret"), e.secret) ||
		f.Get("client_assertion_type") == "urn:ietf:params:oauth:client-assertion-type:jwt-bearer" && equalSecret(f.Get("client_assertion"), e.assertion)
	switch {
	case r.PathValue("tenant") != e.tenant:
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_request", "error_description": "AADSTS90002: Tenant not found."})
	case f.Get("grant_type") != "client_credentials" || f.Get("client_id") != e.clientID || !authenticated:
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "invalid_client", "error_description": "AADSTS7000215: Invalid client secret provided."})
	default:
		writeJSON(w, http.StatusOK, map[string]any{"token_type": "Bearer", "expires_in": 3599, "ext_expires_in": 3599, "access_token": e.token})
	}
}

func (e *entraID) serveManagedIdentity(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	e.record(q)
	if !equalSecret(r.Header.Get("X-Identity-Header"), e.identityHeader) || q.Get("api-version") != "2019-08-01" {
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "unauthorized"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{
		"access_token": e.token, "expires_on": strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10),
		"resource": q.Get("resource"), "token_type": "Bearer",
	})
}

// asksFor reports a token request whose scopes (MSAL adds openid,
// offline_access and profile) include scope.
func asksFor(q url.Values, scope string) bool {
	for _, s := range strings.Fields(q.Get("scope")) {
		if s == scope {
			return true
		}
	}
	return false
}

// options point the SDK's credentials at the emulated authority.
func (e *entraID) options() entraOptions {
	return entraOptions{
		client: azcore.ClientOptions{
			Cloud:     cloud.Configuration{ActiveDirectoryAuthorityHost: e.tls.URL + "/"},
			Transport: e.tls.Client(),
			Retry:     policy.RetryOptions{MaxRetries: -1},
		},
		noInstanceDiscovery: true,
	}
}

// azureEnvironment is what the Azure SDK's credentials read.
var azureEnvironment = []string{
	"AZURE_TENANT_ID", "AZURE_CLIENT_ID", "AZURE_CLIENT_SECRET", "AZURE_CLIENT_CERTIFICATE_PATH",
	"AZURE_CLIENT_CERTIFICATE_PASSWORD", "AZURE_USERNAME", "AZURE_PASSWORD", "AZURE_FEDERATED_TOKEN_FILE",
	"AZURE_AUTHORITY_HOST", "AZURE_TOKEN_CREDENTIALS", "AZURE_ADDITIONALLY_ALLOWED_TENANTS",
	"AZURE_REGIONAL_AUTHORITY_NAME", "IDENTITY_ENDPOINT", "IDENTITY_HEADER", "IDENTITY_SERVER_THUMBPRINT",
	"MSI_ENDPOINT", "MSI_SECRET", "IMDS_ENDPOINT",
}

// isolateAzure unsets the Azure environment for the test (t.Setenv cannot
// unset, and the SDK tells an empty variable from a missing one).
func isolateAzure(t *testing.T) {
	for _, k := range azureEnvironment {
		t.Setenv(k, "") // marks the test as changing the environment, and restores it
		if err := os.Unsetenv(k); err != nil {
			t.Fatal(err)
		}
	}
}

// fakeAzureCLI puts an `az` on PATH that prints a token for the Cognitive
// Services resource, as `az account get-access-token -o json` does.
func fakeAzureCLI(t *testing.T, token string) {
	dir := t.TempDir()
	script := fmt.Sprintf(`#!/bin/sh
case "$*" in
*"account get-access-token -o json --resource https://cognitiveservices.azure.com"*)
  printf '{"accessToken":"%s","expiresOn":"2030-01-01 00:00:00.000000","expires_on":%d,"tokenType":"Bearer"}\n' ;;
*) echo "unexpected arguments: $*" >&2; exit 1 ;;
esac
`, token, time.Now().Add(time.Hour).Unix())
	if err := os.WriteFile(filepath.Join(dir, "az"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
}

func azureAt(a *llmtest.Azure, resourceType string) *config.NamedAIProvider {
	return at(a.Addr(), config.AIProvider{Azure: &config.AzureProvider{ResourceName: "res", ResourceType: resourceType}})
}

func clientSecretAuth(e *entraID, secret string) *config.BackendAuth {
	return &config.BackendAuth{Azure: &config.AzureAuth{ExplicitConfig: &config.AzureExplicitConfig{
		ClientSecret: &config.AzureClientSecret{TenantID: e.tenant, ClientID: e.clientID, ClientSecret: config.SecretString(secret)}}}}
}

// TestAzureEntra: each azure backendAuth form gets an Entra ID token from
// the Azure SDK's credential and sends it as the bearer token; Azure OpenAI
// takes it, and none of the client's credentials goes along.
func TestAzureEntra(t *testing.T) {
	e := newEntraID(t)
	a := llmtest.NewAzure(t)
	a.EntraToken = e.token
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(e.assertion), 0o600); err != nil {
		t.Fatal(err)
	}
	managed := func(u *config.AzureUserAssignedIdentity) *config.BackendAuth {
		return &config.BackendAuth{Azure: &config.AzureAuth{ExplicitConfig: &config.AzureExplicitConfig{
			ManagedIdentity: &config.AzureManagedIdentity{UserAssignedIdentity: u}}}}
	}
	appService := map[string]string{"IDENTITY_ENDPOINT": e.msi.URL + "/msi/token", "IDENTITY_HEADER": e.identityHeader}
	tests := []struct {
		desc    string
		auth    *config.BackendAuth
		env     map[string]string
		cliTok  string                           // a fake az on PATH prints this token
		request func(t *testing.T, q url.Values) // checks the token request
	}{
		{"client secret", clientSecretAuth(e, e.secret), nil, "", func(t *testing.T, q url.Values) {
			if !asksFor(q, cognitiveServicesScope) || q.Get("client_secret") != e.secret {
				t.Errorf("token request scope %q", q.Get("scope"))
			}
		}},
		{"workload identity", &config.BackendAuth{Azure: &config.AzureAuth{ExplicitConfig: &config.AzureExplicitConfig{WorkloadIdentity: &config.EmptyObject{}}}},
			map[string]string{"AZURE_TENANT_ID": e.tenant, "AZURE_CLIENT_ID": e.clientID, "AZURE_FEDERATED_TOKEN_FILE": tokenFile}, "",
			func(t *testing.T, q url.Values) {
				if !asksFor(q, cognitiveServicesScope) || q.Get("client_assertion") != e.assertion {
					t.Errorf("token request scope %q assertion %q", q.Get("scope"), q.Get("client_assertion"))
				}
			}},
		{"managed identity, user-assigned", managed(&config.AzureUserAssignedIdentity{ClientID: ptr("mi-client-id")}), appService, "",
			func(t *testing.T, q url.Values) {
				if q.Get("resource") != "https://cognitiveservices.azure.com" || q.Get("client_id") != "mi-client-id" {
					t.Errorf("managed identity request %v", q)
				}
			}},
		{"managed identity, system-assigned", managed(nil), appService, "",
			func(t *testing.T, q url.Values) {
				if q.Get("resource") != "https://cognitiveservices.azure.com" || q.Has("client_id") {
					t.Errorf("managed identity request %v", q)
				}
			}},
		{"implicit, from the environment", &config.BackendAuth{Azure: &config.AzureAuth{Implicit: &config.EmptyObject{}}},
			map[string]string{"AZURE_TENANT_ID": e.tenant, "AZURE_CLIENT_ID": e.clientID, "AZURE_CLIENT_SECRET": e.secret}, "",
			func(t *testing.T, q url.Values) {
				if !asksFor(q, cognitiveServicesScope) || q.Get("client_secret") != e.secret {
					t.Errorf("token request scope %q", q.Get("scope"))
				}
			}},
		{"developer tools: the Azure CLI", &config.BackendAuth{Azure: &config.AzureAuth{DeveloperImplicit: &config.EmptyObject{}}}, nil, e.token, nil},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			isolateAzure(t)
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			if tt.cliTok != "" {
				fakeAzureCLI(t, tt.cliTok)
			}
			p := mustNew(t, azureAt(a, "openAI"), tt.auth)
			p.creds.(*entraCredentials).options = e.options()
			before := len(e.tokenRequests())
			r := accepted(t, a.Server, send(t, p, exchange{rt: Completions, body: chatBody, header: clientCredentials}))
			if got := r.Header.Get("Authorization"); got != "Bearer "+e.token || r.Header.Get("Api-Key") != "" {
				t.Errorf("Authorization %q, api-key %q", got, r.Header.Get("Api-Key"))
			}
			noClientSecret(t, r)
			requests := e.tokenRequests()[before:]
			if tt.request == nil {
				if len(requests) != 0 {
					t.Errorf("%d requests to Entra ID, want none", len(requests))
				}
				return
			}
			if len(requests) == 0 {
				t.Fatal("no request to Entra ID")
			}
			tt.request(t, requests[len(requests)-1])
		})
	}
}

// TestAzureEntraFoundryScope: a Foundry resource's tokens are asked for
// ai.azure.com's scope.
func TestAzureEntraFoundryScope(t *testing.T) {
	isolateAzure(t)
	e := newEntraID(t)
	p := mustNew(t, azureAt(llmtest.NewAzure(t), "foundry"), clientSecretAuth(e, e.secret))
	p.creds.(*entraCredentials).options = e.options()
	req := fasthttp.AcquireRequest()
	defer fasthttp.ReleaseRequest(req)
	req.Header.Set("Api-Key", "client-secret")
	if err := p.Authorize(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	requests := e.tokenRequests()
	if len(requests) != 1 || !asksFor(requests[0], foundryScope) {
		t.Fatalf("token requests %v, want one for %s", requests, foundryScope)
	}
	if got := string(req.Header.Peek("Authorization")); got != "Bearer "+e.token || len(req.Header.Peek("Api-Key")) != 0 {
		t.Errorf("Authorization %q api-key %q", got, req.Header.Peek("Api-Key"))
	}
}

// countingCredential counts GetToken calls.
type countingCredential struct {
	azcore.TokenCredential
	mu    sync.Mutex
	calls int
}

func (c *countingCredential) GetToken(ctx context.Context, o policy.TokenRequestOptions) (azcore.AccessToken, error) {
	c.mu.Lock()
	c.calls++
	c.mu.Unlock()
	return c.TokenCredential.GetToken(ctx, o)
}

func (c *countingCredential) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls
}

// TestAzureEntraTokenCache: one token serves many requests, concurrent
// ones included, until near its expiry; then the credential is asked
// again.
func TestAzureEntraTokenCache(t *testing.T) {
	isolateAzure(t)
	e := newEntraID(t)
	a := llmtest.NewAzure(t)
	a.EntraToken = e.token
	p := mustNew(t, azureAt(a, "openAI"), clientSecretAuth(e, e.secret))
	creds := p.creds.(*entraCredentials)
	creds.options = e.options()
	counting := &countingCredential{}
	build := creds.build
	creds.build = func(o *entraOptions) (azcore.TokenCredential, error) {
		cred, err := build(o)
		counting.TokenCredential = cred
		return counting, err
	}
	var mu sync.Mutex
	now := time.Now()
	creds.tokens.now = func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return now
	}
	x := exchange{rt: Completions, body: chatBody}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if res, err := trySend(t, p, x); err != nil || res.status != 200 {
				t.Errorf("status %d, %v", res.status, err)
			}
		})
	}
	wg.Wait()
	accepted(t, a.Server, send(t, p, x))
	if n, m := counting.count(), len(e.tokenRequests()); n != 1 || m != 1 {
		t.Fatalf("%d GetToken calls and %d token requests for 9 requests, want 1", n, m)
	}
	mu.Lock()
	now = now.Add(time.Hour) // past the token's expiry
	mu.Unlock()
	accepted(t, a.Server, send(t, p, x))
	if n := counting.count(); n != 2 {
		t.Fatalf("%d GetToken calls, want a second one after the expiry", n)
	}
}

// TestAzureEntraErrors: a secret Entra ID refuses fails Authorize with
// Entra's reason and without the secret; the request is not sent.
func TestAzureEntraErrors(t *testing.T) {
	isolateAzure(t)
	e := newEntraID(t)
	a := llmtest.NewAzure(t)
	const wrong = "wrong-secret-value-123"
	tests := []struct {
		desc string
		auth *config.BackendAuth
		env  map[string]string
		want string
	}{
		{"wrong client secret", clientSecretAuth(e, wrong), nil, "AADSTS7000215"},
		{"workload identity without its environment", &config.BackendAuth{Azure: &config.AzureAuth{ExplicitConfig: &config.AzureExplicitConfig{WorkloadIdentity: &config.EmptyObject{}}}},
			nil, "azure credentials"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			p := mustNew(t, azureAt(a, "openAI"), tt.auth)
			p.creds.(*entraCredentials).options = e.options()
			before := len(a.Requests())
			_, err := trySend(t, p, exchange{rt: Completions, body: chatBody})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Authorize = %v, want an error saying %q", err, tt.want)
			}
			if strings.Contains(err.Error(), wrong) {
				t.Errorf("error %q shows the secret", err)
			}
			if len(a.Requests()) != before {
				t.Error("the request was sent")
			}
		})
	}
}

// TestAzureNotServedForm: an azure backendAuth without a form the gateway
// serves is refused by name.
func TestAzureNotServedForm(t *testing.T) {
	_, err := New(named(azure("openAI", nil)), &config.BackendAuth{Azure: &config.AzureAuth{}})
	if err == nil || !strings.Contains(err.Error(), "not served yet") {
		t.Fatalf("New = %v, want a not served yet error", err)
	}
}

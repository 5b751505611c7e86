package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"

	"github.com/relaygate/gateway/config"
)

// cloudPlatformScope is the OAuth scope of Vertex AI's access tokens.
const cloudPlatformScope = "https://www.googleapis.com/auth/cloud-platform"

// Token refresh: a cached token is replaced refreshMargin before it
// expires (half its lifetime when that is shorter), so that no request
// carries a token that expires on the way.
const (
	refreshMargin = time.Minute
	// untimedTokenLifetime is how long a token that names no expiry is
	// used.
	untimedTokenLifetime = 5 * time.Minute
	// tokenFetchTimeout bounds a fetch whose context has no deadline.
	tokenFetchTimeout = 10 * time.Second
	// maxCredentialFile bounds a credential file.
	maxCredentialFile = 1 << 20
)

// credentialTypes are the Google credential files taken: those whose
// tokens can be fetched without a user present.
var credentialTypes = map[string]google.CredentialsType{
	string(google.ServiceAccount):                google.ServiceAccount,
	string(google.AuthorizedUser):                google.AuthorizedUser,
	string(google.ExternalAccount):               google.ExternalAccount,
	string(google.ExternalAccountAuthorizedUser): google.ExternalAccountAuthorizedUser,
	string(google.ImpersonatedServiceAccount):    google.ImpersonatedServiceAccount,
}

// gcpCredentials set a Google access token as the bearer token.
type gcpCredentials struct {
	tokens *tokenCache
}

// newGCPCredentials fetches tokens with the credential (a JSON key,
// inline or in a file), or with Application Default Credentials when it is
// nil.
func newGCPCredentials(credential *config.Secret) *gcpCredentials {
	src := googleTokens{}
	if credential != nil {
		src.inline, src.file = []byte(credential.Inline), credential.File
	}
	return &gcpCredentials{tokens: &tokenCache{fetch: src.fetch, now: time.Now}}
}

func (g *gcpCredentials) apply(ctx context.Context, req *fasthttp.Request) error {
	header, err := g.tokens.header(ctx)
	if err != nil {
		return err
	}
	removeClientCredentials(&req.Header)
	req.Header.SetBytesV("Authorization", header)
	return nil
}

// googleTokens fetches access tokens from a credential or from ADC. Each
// fetch reads the credential again (a rotated key file is picked up) and
// builds a token source bound to the fetch's context.
type googleTokens struct {
	inline []byte
	file   string
}

func (g googleTokens) fetch(ctx context.Context) (*oauth2.Token, error) {
	// oauth2 makes its requests with the client in the context; this one
	// ends them with ctx, which the service account flow would not.
	ctx = context.WithValue(ctx, oauth2.HTTPClient, &http.Client{Transport: boundTransport{ctx}})
	params := google.CredentialsParams{Scopes: []string{cloudPlatformScope}}
	var creds *google.Credentials
	var err error
	switch {
	case g.inline != nil || g.file != "":
		creds, err = g.fromJSON(ctx, params)
	default:
		creds, err = google.FindDefaultCredentialsWithParams(ctx, params)
	}
	if err != nil {
		return nil, fmt.Errorf("gcp credentials: %w", err)
	}
	tok, err := creds.TokenSource.Token()
	if err != nil {
		return nil, fmt.Errorf("gcp access token: %w", err)
	}
	return tok, nil
}

// fromJSON builds credentials from the configured JSON.
func (g googleTokens) fromJSON(ctx context.Context, params google.CredentialsParams) (*google.Credentials, error) {
	data := g.inline
	if g.file != "" {
		var err error
		if data, err = readBounded(g.file, maxCredentialFile); err != nil {
			return nil, err
		}
	}
	typ, err := credentialType(data)
	if err != nil {
		if g.file != "" {
			return nil, errors.New(g.file + ": " + err.Error())
		}
		return nil, err
	}
	return google.CredentialsFromJSONWithTypeAndParams(ctx, data, typ, params)
}

// checkCredentialJSON checks an inline credential when the configuration
// is compiled.
func checkCredentialJSON(data []byte) error {
	_, err := credentialType(data)
	return err
}

// credentialType reads a credential's type; the message never quotes the
// credential.
func credentialType(data []byte) (google.CredentialsType, error) {
	var f struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(data, &f) != nil {
		return "", errors.New("not a Google credential JSON object")
	}
	typ, ok := credentialTypes[f.Type]
	if !ok {
		return "", errors.New("credential type \"" + f.Type + "\" is not supported (service_account, authorized_user, external_account, external_account_authorized_user, impersonated_service_account are)")
	}
	return typ, nil
}

// boundTransport ends requests with its context.
type boundTransport struct{ ctx context.Context }

func (t boundTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	return http.DefaultTransport.RoundTrip(r.WithContext(t.ctx))
}

// tokenCache keeps one access token and replaces it near its expiry. One
// fetch runs at a time; requests that need a token meanwhile wait for it
// (within their context), and those that still hold a valid one go on
// with it.
type tokenCache struct {
	fetch func(ctx context.Context) (*oauth2.Token, error)
	now   func() time.Time

	cur    atomic.Pointer[cachedToken]
	mu     sync.Mutex
	flight *tokenFlight // the fetch under way, if any
}

// cachedToken is a token as the Authorization header carries it.
type cachedToken struct {
	header    []byte // "Bearer <token>"
	refreshAt time.Time
	expiry    time.Time
}

// tokenFlight is one fetch; done closes when err and the cache are set.
type tokenFlight struct {
	done chan struct{}
	err  error
}

// header is "Bearer <token>" with a token that is not about to expire.
func (c *tokenCache) header(ctx context.Context) ([]byte, error) {
	if t := c.cur.Load(); t != nil && c.now().Before(t.refreshAt) {
		return t.header, nil
	}
	return c.refresh(ctx)
}

func (c *tokenCache) refresh(ctx context.Context) ([]byte, error) {
	for {
		c.mu.Lock()
		now := c.now()
		t := c.cur.Load()
		if t != nil && now.Before(t.refreshAt) {
			c.mu.Unlock()
			return t.header, nil
		}
		if f := c.flight; f != nil {
			c.mu.Unlock()
			if t != nil && now.Before(t.expiry) {
				return t.header, nil // still valid while another request refreshes it
			}
			select {
			case <-f.done:
			case <-ctx.Done():
				return nil, fmt.Errorf("gcp access token: %w", ctx.Err())
			}
			if f.err != nil && !isContextError(f.err) {
				return nil, f.err
			}
			continue // refreshed, or the fetching request went away: look again
		}
		f := &tokenFlight{done: make(chan struct{})}
		c.flight = f
		c.mu.Unlock()
		return c.run(ctx, f, t)
	}
}

// run fetches a token for f; a failed fetch leaves a token still valid in
// use.
func (c *tokenCache) run(ctx context.Context, f *tokenFlight, prev *cachedToken) ([]byte, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, tokenFetchTimeout)
		defer cancel()
	}
	tok, err := c.fetch(ctx)
	var next *cachedToken
	if err == nil {
		next, err = c.cached(tok)
	}
	c.mu.Lock()
	if next != nil {
		c.cur.Store(next)
	}
	c.flight, f.err = nil, err
	c.mu.Unlock()
	close(f.done)
	if err != nil {
		if prev != nil && c.now().Before(prev.expiry) {
			return prev.header, nil
		}
		return nil, err
	}
	return next.header, nil
}

// cached is tok as the cache keeps it.
func (c *tokenCache) cached(tok *oauth2.Token) (*cachedToken, error) {
	if tok == nil || tok.AccessToken == "" {
		return nil, errors.New("gcp access token: the token endpoint sent none")
	}
	header, err := headerValue("Bearer ", []byte(tok.AccessToken))
	if err != nil {
		return nil, errors.New("gcp access token: " + err.Error())
	}
	now := c.now()
	expiry := tok.Expiry
	if expiry.IsZero() {
		expiry = now.Add(untimedTokenLifetime)
	}
	margin := min(refreshMargin, expiry.Sub(now)/2)
	return &cachedToken{header: header, refreshAt: expiry.Add(-margin), expiry: expiry}, nil
}

func isContextError(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// Package jwtauth owns JWT authentication: the jwtAuth and
// mcpAuthentication route policies, their key sets (inline, file, or a URL
// fetched and cached), the token locations they read and strip, and the
// location backendAuth passthrough re-adds the token at.
//
// A request's token is taken from its location (by default
// `Authorization: Bearer <token>`), its (unverified) `iss` picks the
// provider, and the provider's key with the token's `kid` must verify the
// signature with an asymmetric algorithm (RS*, PS*, ES*, EdDSA; never HMAC
// or none). Then required claims must be present, exp and nbf hold within a
// 60 s leeway, and aud must intersect the configured audiences when there
// are any. On success the claims and raw token go to policy.Ctx and the
// credential is removed from the forwarded request. Numbers in the claims
// are exact: int64, uint64 above it, float64 otherwise (exactNumbers).
//
// Modes: strict (the default) needs a valid token; optional lets requests
// without a token through but refuses invalid ones; permissive never
// refuses and sets claims only for valid tokens.
package jwtauth

import (
	"fmt"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/relaygate/gateway/config"
	"github.com/relaygate/gateway/policy"
	"github.com/relaygate/gateway/policy/credential"
	"github.com/relaygate/gateway/pool"
)

// Defaults of Options and key sets.
const (
	// DefaultCacheDuration is how long a fetched key set is used before it
	// is refreshed (the spec's RemoteJWKS cacheDuration default).
	DefaultCacheDuration = 5 * time.Minute
	// DefaultFetchTimeout bounds one outbound fetch (key set or identity
	// provider metadata).
	DefaultFetchTimeout = 5 * time.Second
	// DefaultRefetchInterval is the least time between two fetches of one
	// key set, whatever triggers them.
	DefaultRefetchInterval = 10 * time.Second
)

// Options are the runtime settings of the policies; the zero value is
// usable.
type Options struct {
	// HTTPClient makes outbound fetches; nil uses a client that follows at
	// most 3 redirects. Each fetch is bounded by FetchTimeout anyway.
	HTTPClient *http.Client
	// Logger receives fetch failures (never tokens); nil discards them.
	Logger *zap.Logger
	// Now is the clock for token times and key set caching; nil is time.Now.
	Now func() time.Time
	// FetchTimeout bounds one outbound fetch; 0 is DefaultFetchTimeout.
	FetchTimeout time.Duration
	// RefetchInterval is the least time between fetches of one key set; 0
	// is DefaultRefetchInterval.
	RefetchInterval time.Duration
	// Lease, when set, holds remote key sets: shared by the policies of a
	// snapshot that name the same one, kept across reloads, and first
	// fetched when the lease starts. Without it each policy fetches its own
	// at once.
	Lease *pool.Lease
}

var defaultClient = &http.Client{
	Transport: &http.Transport{
		Proxy:                  http.ProxyFromEnvironment,
		MaxIdleConnsPerHost:    2,
		IdleConnTimeout:        90 * time.Second,
		TLSHandshakeTimeout:    DefaultFetchTimeout,
		ResponseHeaderTimeout:  DefaultFetchTimeout,
		MaxResponseHeaderBytes: 64 << 10,
		ForceAttemptHTTP2:      true,
	},
	CheckRedirect: func(_ *http.Request, via []*http.Request) error {
		if len(via) >= 3 {
			return http.ErrUseLastResponse
		}
		return nil
	},
}

func (o Options) withDefaults() Options {
	if o.HTTPClient == nil {
		o.HTTPClient = defaultClient
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.FetchTimeout <= 0 {
		o.FetchTimeout = DefaultFetchTimeout
	}
	if o.RefetchInterval <= 0 {
		o.RefetchInterval = DefaultRefetchInterval
	}
	return o
}

// Mode says what happens to requests without a valid token.
type Mode uint8

// Modes.
const (
	Strict     Mode = iota // a valid token is required
	Optional               // no token passes; an invalid one is refused
	Permissive             // nothing is refused; only valid tokens set claims
)

// authenticator is the token check that jwtAuth and mcpAuthentication
// share: which tokens are valid, what happens without one, and where the
// token travels. Both policies embed it, so that they are configured and
// authenticate requests the same way and differ only in how they refuse.
type authenticator struct {
	v    *Validator
	mode Mode
	loc  credential.Location
}

// newAuthenticator compiles the mode and the token location (the field
// named locField) of either policy. It leaves the validator to the caller,
// which builds it from its own providers, after checks of its own, so that
// each policy reports configuration errors in the order it always has.
func newAuthenticator(mode, locField string, loc *config.AuthLocation) (authenticator, error) {
	m, err := parseMode(mode)
	if err != nil {
		return authenticator{}, err
	}
	l, err := credential.NewLocation(loc)
	if err != nil {
		return authenticator{}, policy.PrefixField(locField, err)
	}
	return authenticator{mode: m, loc: l}, nil
}

func parseMode(s string) (Mode, error) {
	switch s {
	case "", config.AuthModeStrict:
		return Strict, nil
	case config.AuthModeOptional:
		return Optional, nil
	case config.AuthModePermissive:
		return Permissive, nil
	}
	return Strict, fieldErrorf("mode", "must be one of: strict, optional, permissive")
}

// Validator returns the policy's token validator.
func (a *authenticator) Validator() *Validator { return a.v }

// authenticate runs the token check of both policies. It returns OK when the
// request may go on: with c.Claims and c.Token set and the credential
// removed when a valid token came, untouched otherwise.
func (a *authenticator) authenticate(c *policy.Ctx) Failure {
	tok := a.loc.Extract(c)
	if len(tok) == 0 {
		if a.mode == Strict {
			return FailMissing
		}
		return OK
	}
	if a.loc.Repeated(c) {
		if a.mode == Permissive {
			return OK
		}
		return FailMalformed
	}
	claims, f := a.v.Validate(tok)
	if f != OK {
		if a.mode == Permissive {
			return OK
		}
		return f
	}
	c.Claims = claims
	c.Token = append(c.Token[:0], tok...)
	a.loc.Remove(c)
	return OK
}

// JWTAuth is the jwtAuth policy. Refusals are 401 with
// `WWW-Authenticate: Bearer realm="gateway"` and, when a token was
// presented, `error="invalid_token", error_description="..."` (RFC 6750);
// the body is one short line. A token in Proxy-Authorization is refused
// with 407 and Proxy-Authenticate instead.
type JWTAuth struct {
	authenticator
	refusal    credential.Refusal
	challenges [numFailures][]byte
	bodies     [numFailures][]byte
}

// Realm is the realm of jwtAuth's challenges.
const Realm = "gateway"

var (
	headerWWWAuthenticate = []byte("WWW-Authenticate")
	contentTypeText       = []byte("text/plain; charset=utf-8")
)

// New compiles a jwtAuth policy. Inline and file key sets are parsed here
// (errors name the field); a URL key set starts its first fetch in the
// background and does not block.
func New(cfg *config.JWTAuth, o Options) (*JWTAuth, error) {
	if cfg == nil {
		return nil, fieldErrorf("", "no configuration")
	}
	o = o.withDefaults()
	a, err := newAuthenticator(cfg.Mode, "location", cfg.Location)
	if err != nil {
		return nil, err
	}
	if a.v, err = newValidator(cfg.Providers, cfg.Single, &o); err != nil {
		return nil, err
	}
	p := &JWTAuth{authenticator: a, refusal: a.loc.Refusal()}
	for f := Failure(1); f < numFailures; f++ {
		ch := `Bearer realm="` + Realm + `"`
		if f != FailMissing {
			ch += `, error="invalid_token", error_description="` + f.String() + `"`
		}
		p.challenges[f] = []byte(ch)
		p.bodies[f] = []byte("authentication failure: " + f.String() + "\n")
	}
	return p, nil
}

// OnRequest authenticates the request or answers it with a refusal.
func (p *JWTAuth) OnRequest(c *policy.Ctx) policy.Result {
	f := p.authenticate(c)
	if f == OK {
		return policy.Continue
	}
	return p.refusal.Write(c, p.challenges[f], p.bodies[f])
}

// fieldErrorf builds a *policy.FieldError.
func fieldErrorf(field, format string, args ...any) error {
	e := &policy.FieldError{Field: field, Msg: format}
	if len(args) > 0 {
		e.Msg = fmt.Sprintf(format, args...)
	}
	return e
}

func indexed(field string, i int) string { return fmt.Sprintf("%s[%d]", field, i) }

package jwtauth

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/valyala/fasthttp"
	"go.uber.org/zap"

	"github.com/relaygate/gateway/config"
	"github.com/relaygate/gateway/policy"
)

// Well-known paths of the MCP authorization spec (RFC 9728, RFC 8414).
const (
	ProtectedResourcePath   = "/.well-known/oauth-protected-resource"
	AuthorizationServerPath = "/.well-known/oauth-authorization-server"
	clientRegistrationPath  = "client-registration"
	// MCPProtocolVersion is advertised in the protected resource metadata.
	MCPProtocolVersion = "2025-06-18"
)

// Limits of the MCP OAuth helper endpoints.
const (
	maxMetadataSize     = 1 << 20  // identity provider metadata document
	maxRegistrationBody = 64 << 10 // client registration request
	metadataCacheTTL    = 5 * time.Minute
)

// MCPAuth is the mcpAuthentication policy, following agentgateway
// (mcp/auth.rs) and the MCP authorization spec:
//
//   - GET (any method) /.well-known/oauth-protected-resource<path> answers
//     the protected resource metadata of <path> without authentication:
//     resource, authorization_servers (the issuer; with a provider preset,
//     the gateway itself), mcp_protocol_version, resource_type and every
//     resourceMetadata key (converted to snake_case, overriding);
//   - /.well-known/oauth-authorization-server<path> answers the identity
//     provider's metadata, fetched (bounded in time and size, cached 5m)
//     from RFC 8414's URL, or OpenID discovery for keycloak; auth0 gets
//     ?audience=<first audience> on its authorization_endpoint, keycloak a
//     registration_endpoint on the gateway; with a preset, issuer becomes
//     the gateway URL;
//   - a path ending in "client-registration" answers dynamic client
//     registration: with clientId, a fixed registration of that client;
//     otherwise the request is proxied to the issuer's
//     /clients-registrations/openid-connect;
//   - other requests are authenticated as by jwtAuth; refusals are 401 with
//     `WWW-Authenticate: Bearer resource_metadata="<scheme>://<host>/.well-known/oauth-protected-resource<path>"`
//     (scheme and authority from resourceMetadata.resource when it is set),
//     which starts an MCP client's OAuth flow.
//
// The metadata answers carry `Access-Control-Allow-Origin: *`; a route cors
// policy, which runs first, answers preflights and decorates 401s.
type MCPAuth struct {
	authenticator
	issuer       string
	audiences    []string
	provider     config.MCPProviderKind
	metadata     map[string]any
	resourceBase string // scheme://authority of resourceMetadata.resource, or ""
	clientID     *string
	dcrURL       string
	asMetadata   *docCache
	client       *http.Client
	timeout      time.Duration
	log          *zap.Logger
}

// NewMCP compiles an mcpAuthentication policy. Without jwks, the key set
// URL is derived from the issuer: <issuer>/protocol/openid-connect/certs for
// keycloak, <issuer>/.well-known/jwks.json otherwise (auth0 and none).
func NewMCP(cfg *config.MCPAuthentication, o Options) (*MCPAuth, error) {
	if cfg == nil {
		return nil, fieldErrorf("", "no configuration")
	}
	o = o.withDefaults()
	if u, err := url.Parse(cfg.Issuer); err == nil && u.User != nil {
		// The issuer goes to every client, in the protected resource's
		// metadata (authorization_servers): credentials in it would too.
		return nil, fieldErrorf("issuer", "must not carry credentials (user:password@): it is published to clients as the authorization server")
	}
	a, err := newAuthenticator(cfg.Mode, "authorizationLocation", cfg.AuthorizationLocation)
	if err != nil {
		return nil, err
	}
	p := &MCPAuth{
		authenticator: a, issuer: cfg.Issuer, audiences: cfg.Audiences,
		clientID: cfg.ClientID, client: o.HTTPClient, timeout: o.FetchTimeout, log: o.Logger,
	}
	if cfg.Provider != nil {
		p.provider = cfg.Provider.Kind
	}
	jwks := cfg.JWKS
	if jwks == nil || jwks.Kind == config.JWKSURL && jwks.URL == "" {
		u := derivedJWKSURL(cfg.Issuer, p.provider)
		if !httpURL(u) {
			return nil, fieldErrorf("jwks", "required: no key set URL can be derived from issuer %q (it is not an http(s) URL)", cfg.Issuer)
		}
		d := &config.JWKSource{Kind: config.JWKSURL, URL: u}
		if jwks != nil {
			d.CacheDuration = jwks.CacheDuration
		}
		jwks = d
	}
	prov := config.JWTProvider{Issuer: cfg.Issuer, Audiences: cfg.Audiences, JWKS: jwks, JWTValidationOptions: cfg.JWTValidationOptions}
	if p.v, err = newValidator([]config.JWTProvider{prov}, true, &o); err != nil {
		return nil, err
	}
	p.metadata = make(map[string]any, len(cfg.ResourceMetadata))
	for k, v := range cfg.ResourceMetadata {
		p.metadata[snakeCase(k)] = v
	}
	if r, ok := cfg.ResourceMetadata["resource"].(string); ok {
		if u, err := url.Parse(r); err == nil && u.Scheme != "" && u.Host != "" {
			p.resourceBase = u.Scheme + "://" + u.Host
		}
	}
	p.dcrURL = strings.TrimRight(cfg.Issuer, "/") + "/clients-registrations/openid-connect"
	p.asMetadata = &docCache{url: asMetadataURL(cfg.Issuer, p.provider), client: o.HTTPClient, timeout: o.FetchTimeout, minGap: o.RefetchInterval, now: o.Now}
	return p, nil
}

func derivedJWKSURL(issuer string, prov config.MCPProviderKind) string {
	if prov == config.MCPProviderKeycloak {
		return issuer + "/protocol/openid-connect/certs"
	}
	return issuer + "/.well-known/jwks.json"
}

func httpURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

// asMetadataURL is where the identity provider's metadata is: OpenID
// discovery for keycloak, RFC 8414 (path inserted after the well-known
// prefix) otherwise.
func asMetadataURL(issuer string, prov config.MCPProviderKind) string {
	if prov == config.MCPProviderKeycloak {
		return strings.TrimRight(issuer, "/") + "/.well-known/openid-configuration"
	}
	u, err := url.Parse(issuer)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return strings.TrimRight(issuer, "/") + AuthorizationServerPath
	}
	origin := u.Scheme + "://" + u.Host
	if u.Path == "" || u.Path == "/" {
		return origin + AuthorizationServerPath
	}
	return origin + AuthorizationServerPath + u.Path
}

// isWellKnown reports whether the path is one of the OAuth metadata paths,
// which are answered without authentication.
func isWellKnown(path []byte) bool {
	return underPrefix(path, ProtectedResourcePath) || underPrefix(path, AuthorizationServerPath)
}

// underPrefix reports whether path is prefix or prefix + "/...".
func underPrefix(path []byte, prefix string) bool {
	return bytes.HasPrefix(path, []byte(prefix)) && (len(path) == len(prefix) || path[len(prefix)] == '/')
}

// OnRequest serves the metadata endpoints or authenticates the request.
func (p *MCPAuth) OnRequest(c *policy.Ctx) policy.Result {
	path := c.Path
	if path == nil {
		path = c.Fast.Request.URI().PathOriginal()
	}
	if isWellKnown(path) {
		switch {
		case bytes.HasSuffix(path, []byte(clientRegistrationPath)):
			p.clientRegistration(c)
		case underPrefix(path, ProtectedResourcePath):
			p.protectedResource(c, path)
		default:
			p.authorizationServer(c, path)
		}
		return policy.Done
	}
	f := FailAlreadyAuthenticated
	if c.Claims == nil {
		f = p.authenticate(c)
	}
	if f != OK {
		p.reject(c, f, path)
		return policy.Done
	}
	if bytes.HasSuffix(path, []byte(clientRegistrationPath)) {
		p.clientRegistration(c)
		return policy.Done
	}
	return policy.Continue
}

var (
	contentTypeJSON = []byte("application/json")
	bodyMissing     = []byte(`{"error":"unauthorized","error_description":"JWT token required"}`)
)

// reject answers 401 with the resource metadata challenge.
func (p *MCPAuth) reject(c *policy.Ctx, f Failure, path []byte) {
	b := c.Scratch()
	b = append(b, `Bearer resource_metadata="`...)
	b = p.appendOrigin(b, c, true)
	b = append(b, ProtectedResourcePath...)
	b = appendQuoted(b, path)
	b = append(b, '"')
	body := bodyMissing
	if f != FailMissing {
		b = append(b, `, error="invalid_token", error_description="`...)
		b = append(b, f.String()...)
		b = append(b, '"')
		body = []byte(`{"error":"invalid_token","error_description":"` + f.String() + `"}`)
	}
	resp := &c.Fast.Response
	resp.SetStatusCode(fasthttp.StatusUnauthorized)
	resp.Header.SetContentTypeBytes(contentTypeJSON)
	resp.Header.SetBytesKV(headerWWWAuthenticate, b)
	resp.SetBody(body)
	c.KeepScratch(b)
}

// appendOrigin appends "<scheme>://<authority>" of the request as the
// client sees it: the scheme of the first X-Forwarded-Proto (http or
// https) or of the connection, and the Host header. With useResource, a
// configured resourceMetadata.resource supplies both instead.
func (p *MCPAuth) appendOrigin(b []byte, c *policy.Ctx, useResource bool) []byte {
	if useResource && p.resourceBase != "" {
		return append(b, p.resourceBase...)
	}
	h := &c.Fast.Request.Header
	scheme := c.Scheme
	if v := h.Peek("X-Forwarded-Proto"); len(v) > 0 {
		first, _, _ := bytes.Cut(v, []byte(","))
		first = bytes.TrimSpace(first)
		switch {
		case bytes.EqualFold(first, []byte("https")):
			scheme = []byte("https")
		case bytes.EqualFold(first, []byte("http")):
			scheme = []byte("http")
		}
	}
	if len(scheme) == 0 {
		scheme = []byte("http")
	}
	b = append(b, scheme...)
	b = append(b, "://"...)
	host := h.Host()
	if !validAuthority(host) {
		host = []byte(c.Fast.LocalAddr().String())
	}
	return append(b, host...)
}

// validAuthority accepts Host values that are safe to reflect: letters,
// digits and "-._~:[]%".
func validAuthority(h []byte) bool {
	if len(h) == 0 || len(h) > 255 {
		return false
	}
	for _, c := range h {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-._~:[]%", c) >= 0) {
			return false
		}
	}
	return true
}

// appendQuoted appends s for a quoted-string (RFC 9110 5.6.4): '"' and '\'
// are escaped, control bytes dropped.
func appendQuoted(b, s []byte) []byte {
	for _, c := range s {
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < ' ' || c == 0x7f:
		default:
			b = append(b, c)
		}
	}
	return b
}

// metadataCORS marks the metadata answers readable from any origin.
func metadataCORS(resp *fasthttp.Response, methods string) {
	resp.Header.Set("Access-Control-Allow-Origin", "*")
	resp.Header.Set("Access-Control-Allow-Methods", methods)
	resp.Header.Set("Access-Control-Allow-Headers", "content-type")
}

func answerJSON(c *policy.Ctx, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		answerError(c, fasthttp.StatusInternalServerError, "cannot encode metadata")
		return
	}
	resp := &c.Fast.Response
	resp.SetStatusCode(status)
	resp.Header.SetContentTypeBytes(contentTypeJSON)
	resp.SetBody(body)
}

func answerError(c *policy.Ctx, status int, msg string) {
	resp := &c.Fast.Response
	resp.SetStatusCode(status)
	resp.Header.SetContentTypeBytes(contentTypeText)
	resp.SetBodyString(msg + "\n")
}

// protectedResource answers the protected resource metadata (RFC 9728) of
// the resource path following the well-known prefix.
func (p *MCPAuth) protectedResource(c *policy.Ctx, path []byte) {
	resource := string(p.appendOrigin(nil, c, false)) + string(path[len(ProtectedResourcePath):])
	servers := p.issuer
	if p.provider != 0 {
		servers = resource // the gateway adapts the provider's metadata
	}
	doc := map[string]any{
		"resource":              resource,
		"authorization_servers": []string{servers},
		"mcp_protocol_version":  MCPProtocolVersion,
		"resource_type":         "mcp-server",
	}
	for k, v := range p.metadata {
		doc[k] = v
	}
	answerJSON(c, fasthttp.StatusOK, doc)
	metadataCORS(&c.Fast.Response, "GET, OPTIONS")
}

// authorizationServer answers the identity provider's metadata, adapted to
// the preset.
func (p *MCPAuth) authorizationServer(c *policy.Ctx, path []byte) {
	raw, err := p.asMetadata.get()
	if err != nil {
		p.log.Warn("jwtauth: cannot fetch authorization server metadata", zap.String("url", config.RedactURL(p.asMetadata.url)), zap.Error(err))
		answerError(c, fasthttp.StatusInternalServerError, "authorization server metadata unavailable")
		return
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil || doc == nil {
		answerError(c, fasthttp.StatusInternalServerError, "authorization server metadata is not a JSON object")
		return
	}
	origin := string(p.appendOrigin(nil, c, false))
	switch p.provider {
	case config.MCPProviderAuth0:
		// Auth0 ignores RFC 8707 resource indicators; it takes the audience
		// as a parameter of the authorization request.
		ae, ok := doc["authorization_endpoint"].(string)
		if !ok {
			answerError(c, fasthttp.StatusInternalServerError, "authorization server metadata has no authorization_endpoint")
			return
		}
		if len(p.audiences) > 0 {
			sep := "?"
			if strings.Contains(ae, "?") {
				sep = "&"
			}
			doc["authorization_endpoint"] = ae + sep + "audience=" + url.QueryEscape(p.audiences[0])
		}
	case config.MCPProviderKeycloak:
		// Keycloak's registration endpoint answers no CORS; the gateway
		// proxies it.
		if _, ok := doc["registration_endpoint"].(string); !ok {
			answerError(c, fasthttp.StatusInternalServerError, "authorization server metadata has no registration_endpoint")
			return
		}
		doc["registration_endpoint"] = origin + string(path) + "/" + clientRegistrationPath
	}
	if p.provider != 0 {
		doc["issuer"] = origin + string(path[len(AuthorizationServerPath):])
	}
	answerJSON(c, fasthttp.StatusOK, doc)
	metadataCORS(&c.Fast.Response, "GET, OPTIONS")
}

// clientRegistration answers dynamic client registration (RFC 7591).
func (p *MCPAuth) clientRegistration(c *policy.Ctx) {
	req := &c.Fast.Request
	body, ok := readBody(req, maxRegistrationBody)
	if !ok {
		answerError(c, fasthttp.StatusRequestEntityTooLarge, "registration request too large")
		return
	}
	if p.clientID != nil {
		// A pre-registered client: answer with it, keeping the redirect URIs
		// strict clients check.
		var in map[string]any
		redirects := any([]any{})
		if json.Unmarshal(body, &in) == nil {
			if r, ok := in["redirect_uris"].([]any); ok {
				redirects = r
			}
		}
		answerJSON(c, fasthttp.StatusCreated, map[string]any{
			"client_id":                  *p.clientID,
			"client_id_issued_at":        0,
			"token_endpoint_auth_method": "none",
			"grant_types":                []string{"authorization_code"},
			"response_types":             []string{"code"},
			"redirect_uris":              redirects,
		})
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.timeout)
	defer cancel()
	out, err := http.NewRequestWithContext(ctx, http.MethodPost, p.dcrURL, bytes.NewReader(body))
	if err != nil {
		answerError(c, fasthttp.StatusInternalServerError, "client registration failed")
		return
	}
	ct := string(req.Header.ContentType())
	if ct == "" {
		ct = "application/json"
	}
	out.Header.Set("Content-Type", ct)
	up, err := p.client.Do(out)
	if err != nil {
		p.log.Warn("jwtauth: client registration failed", zap.String("url", config.RedactURL(p.dcrURL)), zap.Error(redactError(err)))
		answerError(c, fasthttp.StatusInternalServerError, "client registration failed")
		return
	}
	defer up.Body.Close()
	rb, err := io.ReadAll(io.LimitReader(up.Body, maxMetadataSize+1))
	if err != nil || len(rb) > maxMetadataSize {
		answerError(c, fasthttp.StatusInternalServerError, "client registration failed")
		return
	}
	resp := &c.Fast.Response
	resp.SetStatusCode(up.StatusCode)
	if t := up.Header.Get("Content-Type"); t != "" {
		resp.Header.SetContentType(t)
	}
	resp.SetBody(rb)
	metadataCORS(resp, "POST, OPTIONS")
}

// readBody reads the request body whole, at most limit bytes.
func readBody(req *fasthttp.Request, limit int) ([]byte, bool) {
	if req.IsBodyStream() {
		b, err := io.ReadAll(io.LimitReader(req.BodyStream(), int64(limit)+1))
		return b, err == nil && len(b) <= limit
	}
	b := req.Body()
	return b, len(b) <= limit
}

// docCache keeps a fetched JSON document: cached for metadataCacheTTL,
// fetched by one request at a time, retried at most once per minGap after a
// failure (a stale copy is served meanwhile).
type docCache struct {
	url     string
	client  *http.Client
	timeout time.Duration
	minGap  time.Duration
	now     func() time.Time

	mu       sync.Mutex
	body     []byte
	fetched  time.Time
	lastFail time.Time
}

var errRecentFailure = errors.New("the last fetch failed; not retried yet")

func (d *docCache) get() ([]byte, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.now()
	if d.body != nil && now.Sub(d.fetched) < metadataCacheTTL {
		return d.body, nil
	}
	if !d.lastFail.IsZero() && now.Sub(d.lastFail) < d.minGap {
		if d.body != nil {
			return d.body, nil
		}
		return nil, errRecentFailure
	}
	b, err := d.fetch()
	if err != nil {
		d.lastFail = now
		if d.body != nil {
			return d.body, nil
		}
		return nil, err
	}
	d.body, d.fetched = b, now
	return b, nil
}

func (d *docCache) fetch() ([]byte, error) {
	b, err := fetchJSON(d.client, d.url, "application/json", d.timeout, maxMetadataSize)
	if err != nil {
		return nil, err
	}
	if !json.Valid(b) {
		return nil, errors.New("not JSON")
	}
	return b, nil
}

// snakeCase converts a metadata key to snake_case as agentgateway does
// (heck): words break at '_', '-' and spaces, before an upper-case letter
// that follows a lower-case letter or digit, and before the last upper-case
// letter of an acronym followed by a lower-case one ("resourcePolicyUri" is
// "resource_policy_uri", "HTTPServer" is "http_server").
func snakeCase(s string) string {
	rs := []rune(s)
	var b strings.Builder
	word := false // a word is open
	for i, r := range rs {
		if r == '_' || r == '-' || r == ' ' {
			word = false
			continue
		}
		if word && unicode.IsUpper(r) && i > 0 {
			prev := rs[i-1]
			nextLower := i+1 < len(rs) && unicode.IsLower(rs[i+1])
			if unicode.IsLower(prev) || unicode.IsDigit(prev) || unicode.IsUpper(prev) && nextLower {
				word = false
			}
		}
		if !word {
			if b.Len() > 0 {
				b.WriteByte('_')
			}
			word = true
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}

package config

import (
	"encoding/json"
	"net/url"
	"unicode/utf8"

	"github.com/relaygate/gateway/config/decode"
)

// JWT authentication modes (`mode` of jwtAuth and mcpAuthentication). Unlike
// agentgateway, whose jwtAuth defaults to optional, both default to strict,
// as the spec requires.
const (
	AuthModeStrict     = "strict"
	AuthModeOptional   = "optional"
	AuthModePermissive = "permissive"
)

// JWTAuth is `policies.jwtAuth`: validate a JWT carried by the request
// against trusted issuers. The file accepts two forms, normalised here into
// Providers:
//
//	jwtAuth: {mode, location, providers: [{issuer, audiences, jwks, jwtValidationOptions}]}
//	jwtAuth: {mode, location, issuer, audiences, jwks, jwtValidationOptions}
type JWTAuth struct {
	// Mode is AuthModeStrict (the default when empty), AuthModeOptional or
	// AuthModePermissive.
	Mode string `json:"mode,omitempty"`
	// Location is where the token travels; nil means the Authorization header
	// with the prefix "Bearer ".
	Location  *AuthLocation `json:"location,omitempty"`
	Providers []JWTProvider `json:"providers"`
	// Single is set when the file used the single-issuer form, so that errors
	// found later name "jwks" rather than "providers[0].jwks".
	Single bool `json:"-"`
}

// jwtAuthFile is the union of both forms as written in the file.
type jwtAuthFile struct {
	Mode                 string                `json:"mode,omitempty" cfg:"enum=strict|optional|permissive"`
	Location             *AuthLocation         `json:"location,omitempty"`
	Providers            []JWTProvider         `json:"providers,omitempty" cfg:"minItems=1,maxItems=64"`
	Issuer               string                `json:"issuer,omitempty"`
	Audiences            []string              `json:"audiences,omitempty" cfg:"maxItems=64"`
	JWKS                 *JWKSource            `json:"jwks,omitempty"`
	JWTValidationOptions *JWTValidationOptions `json:"jwtValidationOptions,omitempty"`
}

// singleIssuerFields are the keys of the single-issuer form.
var singleIssuerFields = []string{"issuer", "audiences", "jwks", "jwtValidationOptions"}

// DecodeNode decodes either form and checks the rules spanning them.
func (j *JWTAuth) DecodeNode(n *decode.Node) {
	if !n.Expect(decode.Map) {
		return
	}
	var f jwtAuthFile
	n.Decode(&f)
	j.Mode, j.Location = f.Mode, f.Location
	if n.Get("providers") != nil {
		for _, k := range singleIssuerFields {
			if n.Get(k) != nil {
				n.Get(k).Errorf("not allowed together with providers (set it on each provider)")
			}
		}
		j.Providers = f.Providers
		seen := map[string]int{}
		for i, p := range f.Providers {
			if p.Issuer == "" {
				continue
			}
			if prev, dup := seen[p.Issuer]; dup {
				n.ErrorfAt(indexPath("providers", i)+".issuer", "issuer %q is already used by providers[%d]", p.Issuer, prev)
				continue
			}
			seen[p.Issuer] = i
		}
		return
	}
	j.Single = true
	p := JWTProvider{Issuer: f.Issuer, Audiences: f.Audiences, JWKS: f.JWKS, JWTValidationOptions: f.JWTValidationOptions}
	ok := true
	if n.Get("issuer") == nil {
		n.ErrorfAt("issuer", "required (or use providers)")
		ok = false
	} else if f.Issuer == "" {
		n.Get("issuer").Errorf("must not be empty")
		ok = false
	}
	if n.Get("jwks") == nil {
		n.ErrorfAt("jwks", "required")
		ok = false
	} else if f.JWKS != nil {
		f.JWKS.checkURL(n.Get("jwks"))
	}
	if ok {
		j.Providers = []JWTProvider{p}
	}
}

// ModeOrDefault returns the mode, AuthModeStrict when unset.
func (j *JWTAuth) ModeOrDefault() string { return modeOrDefault(j.Mode) }

func modeOrDefault(m string) string {
	if m == "" {
		return AuthModeStrict
	}
	return m
}

// JWTProvider is one trusted issuer of jwtAuth.
type JWTProvider struct {
	// Issuer must equal the token's `iss`; it also selects the provider.
	Issuer string `json:"issuer" cfg:"required,minLen=1"`
	// Audiences, when not empty, must intersect the token's `aud`.
	Audiences []string   `json:"audiences,omitempty" cfg:"maxItems=64"`
	JWKS      *JWKSource `json:"jwks" cfg:"required"`
	// JWTValidationOptions nil means the default: `exp` is required.
	JWTValidationOptions *JWTValidationOptions `json:"jwtValidationOptions,omitempty"`
}

// Validate refuses an empty key set URL (only mcpAuthentication derives one).
func (p *JWTProvider) Validate(v *decode.Validation) {
	if p.JWKS != nil {
		p.JWKS.checkURL(v.Node().Get("jwks"))
	}
}

// JWKSKind says where a key set comes from.
type JWKSKind uint8

// Key set sources.
const (
	JWKSInline JWKSKind = iota + 1 // the key set itself, as a string
	JWKSFile                       // {file: path}, read once at load
	JWKSURL                        // {url: URL}, fetched and cached
)

// JWKSource is a JSON Web Key Set given inline (a string holding the set),
// as `{file: path}` or as `{url: URL, cacheDuration}` (agentgateway's
// FileInlineOrRemote; cacheDuration, default 5m, is the spec's RemoteJWKS
// setting).
type JWKSource struct {
	Kind          JWKSKind
	Inline        string
	File          string
	URL           string
	CacheDuration *Duration
}

// jwksObject is the map form of a key set source.
type jwksObject struct {
	File          *string   `json:"file,omitempty"`
	URL           *string   `json:"url,omitempty"`
	CacheDuration *Duration `json:"cacheDuration,omitempty"`
}

// Inline key set length bounds, in characters.
const (
	minInlineJWKS = 2
	maxInlineJWKS = 65536
)

// DecodeNode decodes the string-or-object union.
func (s *JWKSource) DecodeNode(n *decode.Node) {
	if str, ok := n.String(); ok {
		s.Kind, s.Inline = JWKSInline, str
		if c := utf8.RuneCountInString(str); c < minInlineJWKS || c > maxInlineJWKS {
			n.Errorf("an inline key set must be %d to %d characters, got %d", minInlineJWKS, maxInlineJWKS, c)
		}
		return
	}
	if n.Kind() != decode.Map {
		n.Errorf("expected a key set as a string, {file: path} or {url: URL}, got %s", n.Describe())
		return
	}
	var o jwksObject
	if !n.Decode(&o) {
		return
	}
	switch n.OneOf("file", "url") {
	case "file":
		s.Kind, s.File = JWKSFile, *o.File
		if s.File == "" {
			n.Get("file").Errorf("must not be empty")
		}
		if o.CacheDuration != nil {
			n.Get("cacheDuration").Errorf("only allowed with url")
		}
	case "url":
		s.Kind, s.URL, s.CacheDuration = JWKSURL, *o.URL, o.CacheDuration
		if s.URL != "" {
			u, err := url.Parse(s.URL)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				n.Get("url").Errorf("must be an http or https URL such as https://idp.example.com/.well-known/jwks.json")
			}
		}
		if o.CacheDuration != nil && o.CacheDuration.Duration <= 0 {
			n.Get("cacheDuration").Errorf("must be > 0")
		}
	}
}

// checkURL refuses `{url: ""}` where no URL can be derived.
func (s *JWKSource) checkURL(n *decode.Node) {
	if s.Kind == JWKSURL && s.URL == "" {
		if u := n.Get("url"); u != nil {
			u.Errorf("must not be empty")
		}
	}
}

// MarshalJSON writes the source back in file form, for /config_dump; a
// URL's password and credential query parameters are redacted (redactURL).
func (s JWKSource) MarshalJSON() ([]byte, error) {
	switch s.Kind {
	case JWKSInline:
		return json.Marshal(redactJWKS(s.Inline))
	case JWKSFile:
		return json.Marshal(map[string]string{"file": s.File})
	case JWKSURL:
		m := map[string]any{"url": redactURL(s.URL)}
		if s.CacheDuration != nil {
			m["cacheDuration"] = s.CacheDuration
		}
		return json.Marshal(m)
	}
	return []byte("null"), nil
}

// jwkPrivateMembers are the members of a JSON Web Key that hold private or
// secret key material (RFC 7518 6.2.2, 6.3.2, 6.4.1; RFC 8037's OKP d):
// a verifier needs none of them, and the dump shows none.
var jwkPrivateMembers = []string{"d", "p", "q", "dp", "dq", "qi", "oth", "k"}

// redactJWKS is an inline key set as /config_dump shows it: each key's
// private or secret members (an EC or RSA "d", a symmetric "k") redacted,
// the public ones as they are; Redacted whole when it is no JSON object.
func redactJWKS(inline string) string {
	var set map[string]any
	if err := json.Unmarshal([]byte(inline), &set); err != nil {
		return Redacted
	}
	redactKey := func(k any) {
		if m, ok := k.(map[string]any); ok {
			for _, name := range jwkPrivateMembers {
				if _, ok := m[name]; ok {
					m[name] = Redacted
				}
			}
		}
	}
	if keys, ok := set["keys"].([]any); ok {
		for _, k := range keys {
			redactKey(k)
		}
	} else {
		redactKey(set) // a single key
	}
	b, err := json.Marshal(set)
	if err != nil {
		return Redacted
	}
	return string(b)
}

// RedactURL is a configured URL as a log line may show it (a key set's,
// or one derived from an mcpAuthentication issuer): its password and
// credential query parameters redacted as in /config_dump (redactURL), or
// Redacted whole when it does not parse.
func RedactURL(raw string) string {
	if _, err := url.Parse(raw); err != nil {
		return Redacted
	}
	return redactURL(raw)
}

// AuthLocation says where a credential travels: exactly one of a header
// (with an optional prefix such as "Bearer "), a query parameter or a
// cookie. The `expression` form is not supported yet.
type AuthLocation struct {
	Header         *HeaderLocation `json:"header,omitempty"`
	QueryParameter *NamedLocation  `json:"queryParameter,omitempty"`
	Cookie         *NamedLocation  `json:"cookie,omitempty"`
	Expression     Unsupported     `json:"expression,omitzero"`
}

// HeaderLocation is a credential in a header; Prefix (nil: none) is removed
// before validation and compared without regard to ASCII case.
type HeaderLocation struct {
	Name   string  `json:"name" cfg:"required"`
	Prefix *string `json:"prefix,omitempty"`
}

// NamedLocation is a credential in a query parameter or cookie.
type NamedLocation struct {
	Name string `json:"name" cfg:"required,minLen=1"`
}

// Validate enforces exactly one location and checks the names.
func (l *AuthLocation) Validate(v *decode.Validation) {
	n := 0
	for _, set := range []bool{l.Header != nil, l.QueryParameter != nil, l.Cookie != nil, l.Expression.Set} {
		if set {
			n++
		}
	}
	switch {
	case n == 0:
		v.Errorf("", "exactly one of header, queryParameter, cookie, expression is required")
	case n > 1:
		v.Errorf("", "only one of header, queryParameter, cookie, expression may be set")
	}
	if l.Header != nil && !validHeaderName(l.Header.Name) {
		v.Errorf("header.name", "invalid header name %q", l.Header.Name)
	}
	if l.Header != nil && l.Header.Prefix != nil && !validHeaderValue(*l.Header.Prefix) {
		v.Errorf("header.prefix", "must be printable ASCII")
	}
	if l.Cookie != nil && !validHeaderName(l.Cookie.Name) {
		v.Errorf("cookie.name", "invalid cookie name %q", l.Cookie.Name)
	}
}

// validHeaderValue reports whether s holds only visible ASCII and spaces.
func validHeaderValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < ' ' || c > '~' {
			return false
		}
	}
	return true
}

// JWTValidationOptions are claim requirements checked after the signature.
type JWTValidationOptions struct {
	// RequiredClaims must be present; nil means the default ["exp"], an
	// empty list requires none beyond what issuer and audiences imply.
	RequiredClaims []string `json:"requiredClaims,omitempty"`
}

// SupportedRequiredClaims are the claims requiredClaims may name.
var SupportedRequiredClaims = []string{"exp", "nbf", "aud", "iss", "sub"}

// Validate refuses claims that would not be enforced, and duplicates.
func (o *JWTValidationOptions) Validate(v *decode.Validation) {
	seen := map[string]bool{}
	for i, c := range o.RequiredClaims {
		switch {
		case !contains(SupportedRequiredClaims, c):
			v.Errorf(indexPath("requiredClaims", i), "claim %q cannot be required (use any of: %s)", c, joinOr(SupportedRequiredClaims))
		case seen[c]:
			v.Errorf(indexPath("requiredClaims", i), "duplicate claim %q", c)
		}
		seen[c] = true
	}
}

// Required returns the required claims with the default applied.
func (o *JWTValidationOptions) Required() []string {
	if o == nil || o.RequiredClaims == nil {
		return []string{"exp"}
	}
	return o.RequiredClaims
}

// MCPAuthentication is `policies.mcpAuthentication`: JWT validation for MCP
// clients following the MCP authorization spec, with OAuth protected
// resource metadata served under /.well-known/oauth-protected-resource.
type MCPAuthentication struct {
	Issuer    string       `json:"issuer" cfg:"required,minLen=1"`
	Audiences []string     `json:"audiences" cfg:"required,maxItems=64"`
	Provider  *MCPProvider `json:"provider,omitempty"`
	// ResourceMetadata is copied into the protected resource metadata
	// document, keys converted to snake_case.
	ResourceMetadata map[string]any `json:"resourceMetadata" cfg:"required"`
	// JWKS nil (or `{url: ""}`) derives the key set URL from issuer and
	// provider.
	JWKS                  *JWKSource            `json:"jwks,omitempty"`
	Mode                  string                `json:"mode,omitempty" cfg:"enum=strict|optional|permissive"`
	AuthorizationLocation *AuthLocation         `json:"authorizationLocation,omitempty"`
	JWTValidationOptions  *JWTValidationOptions `json:"jwtValidationOptions,omitempty"`
	// ClientID, when set, answers dynamic client registration with this
	// pre-registered client instead of proxying it to the identity provider.
	ClientID     *string     `json:"clientId,omitempty"`
	ClientSecret Unsupported `json:"clientSecret,omitzero"`
}

// MarshalJSON writes the policy with the issuer's password and credential
// query parameters redacted (redactURL), for /config_dump: the key set,
// metadata and registration URLs are derived from it.
func (m MCPAuthentication) MarshalJSON() ([]byte, error) {
	type plain MCPAuthentication // without this method
	p := plain(m)
	p.Issuer = redactURL(m.Issuer)
	return json.Marshal(p)
}

// ModeOrDefault returns the mode, AuthModeStrict when unset.
func (m *MCPAuthentication) ModeOrDefault() string { return modeOrDefault(m.Mode) }

// Validate checks the issuer and the audiences. The issuer must be an
// http(s) URL: it is the authorization server MCP clients discover (RFC
// 9728's authorization_servers holds RFC 8414 issuer identifiers, URLs),
// the gateway fetches its metadata from it and derives the key set URL
// from it. A name such as "probe.iss" validated, and every
// /.well-known/oauth-authorization-server request then answered 500.
func (m *MCPAuthentication) Validate(v *decode.Validation) {
	if m.Issuer != "" {
		if u, err := url.Parse(m.Issuer); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			v.Errorf("issuer", "must be an http or https URL such as https://idp.example.com/realms/r: it is the authorization server MCP clients discover (RFC 9728, RFC 8414), whose metadata the gateway serves")
		}
	}
	for i, a := range m.Audiences {
		if a == "" {
			v.Errorf(indexPath("audiences", i), "must not be empty")
		}
	}
}

// MCPProviderKind is an identity provider preset of mcpAuthentication.
type MCPProviderKind uint8

// Identity provider presets.
const (
	MCPProviderAuth0 MCPProviderKind = iota + 1
	MCPProviderKeycloak
)

// MCPProvider is `provider: {auth0: {}}` or `{keycloak: {}}`; agentgateway's
// okta, descope, authentik and entra presets are not supported yet.
type MCPProvider struct {
	Kind MCPProviderKind
}

var mcpProviders = []string{"auth0", "keycloak", "okta", "descope", "authentik", "entra"}

// DecodeNode decodes the preset union.
func (p *MCPProvider) DecodeNode(n *decode.Node) {
	key, v := oneKey(n, mcpProviders...)
	switch key {
	case "":
		return
	case "auth0":
		p.Kind = MCPProviderAuth0
	case "keycloak":
		p.Kind = MCPProviderKeycloak
	default:
		v.Errorf("provider %q is not supported yet (use auth0 or keycloak)", key)
		return
	}
	var empty struct{}
	if v.Kind() != decode.Null {
		v.Decode(&empty)
	}
}

// String names the preset as in the file.
func (p MCPProvider) String() string {
	switch p.Kind {
	case MCPProviderAuth0:
		return "auth0"
	case MCPProviderKeycloak:
		return "keycloak"
	}
	return ""
}

// MarshalJSON writes the preset back in file form.
func (p MCPProvider) MarshalJSON() ([]byte, error) {
	return []byte(`{"` + p.String() + `":{}}`), nil
}

// MarshalJSON writes the form the file used: the single-issuer form keeps
// its error paths ("jwks", not "providers[0].jwks") when the dump is read
// back.
func (j JWTAuth) MarshalJSON() ([]byte, error) {
	type plain JWTAuth // without this method
	if !j.Single || len(j.Providers) != 1 {
		return json.Marshal(plain(j))
	}
	p := j.Providers[0]
	return json.Marshal(jwtAuthFile{
		Mode: j.Mode, Location: j.Location,
		Issuer: p.Issuer, Audiences: p.Audiences, JWKS: p.JWKS, JWTValidationOptions: p.JWTValidationOptions,
	})
}

// MarshalJSON keeps an empty requiredClaims list, which requires no claim,
// apart from a missing one, which requires exp; omitempty would drop it.
func (o JWTValidationOptions) MarshalJSON() ([]byte, error) {
	type plain JWTValidationOptions // without this method
	if o.RequiredClaims == nil || len(o.RequiredClaims) > 0 {
		return json.Marshal(plain(o))
	}
	return json.Marshal(struct {
		plain
		RequiredClaims []string `json:"requiredClaims"`
	}{plain(o), []string{}})
}

package config

import (
	"encoding/json"
	"regexp"
	"unicode/utf8"

	"github.com/relaygate/gateway/config/decode"
)

// BackendAuth is `backendAuth` (and `auth` of LLM models and providers): how
// the gateway authenticates to the backend, agentgateway's BackendAuthCompat.
// The file gives exactly one kind, optionally with extra `credentials`; or
// credentials alone; or the string "copilot".
//
//	backendAuth: {passthrough: {location}}
//	backendAuth: {key: <secret>}                 (agentgateway's short form)
//	backendAuth: {key: {value: <secret>, location}}
//	backendAuth: {aws: {}}                       (the default credential chain)
//	backendAuth: {aws: {accessKeyId, secretAccessKey, sessionToken, region, serviceName}}
//	backendAuth: {gcp: {type, audience, credential}}
//	backendAuth: {azure: {explicitConfig | developerImplicit | implicit}}
//	backendAuth: copilot
//
// jwtSign, oauthTokenExchange and crossAppAccess are refused as not
// supported yet.
type BackendAuth struct {
	Passthrough *BackendAuthPassthrough
	Key         *BackendAuthKey
	GCP         *GCPAuth
	AWS         *AWSAuth
	Azure       *AzureAuth
	// Copilot is the "copilot" form: GitHub Copilot's token exchange.
	Copilot bool
	// Credentials are extra credentials added to the backend request.
	Credentials []BackendAuthCredential
}

// BackendAuthPassthrough re-adds the token jwtAuth or mcpAuthentication
// validated and removed; Location nil means `Authorization: Bearer <token>`.
type BackendAuthPassthrough struct {
	Location *AuthLocation `json:"location,omitempty"`
}

var backendAuthKinds = []string{"passthrough", "key", "gcp", "aws", "azure", "jwtSign", "oauthTokenExchange", "crossAppAccess"}

// DecodeNode decodes the union.
func (b *BackendAuth) DecodeNode(n *decode.Node) {
	if s, ok := n.String(); ok {
		if s == "copilot" {
			b.Copilot = true
		} else {
			n.Errorf("expected \"copilot\" or a map with one of: %s", joinOr(backendAuthKinds))
		}
		return
	}
	if n.Kind() != decode.Map {
		n.Errorf("expected \"copilot\" or a map with one of: %s", joinOr(backendAuthKinds))
		return
	}
	found := ""
	for _, key := range n.Keys() {
		v := n.Get(key)
		if key == "credentials" {
			if v.Decode(&b.Credentials) && v.Kind() == decode.List && len(b.Credentials) == 0 {
				v.Errorf("must have at least 1 item")
			}
			continue
		}
		if !contains(backendAuthKinds, key) {
			v.Errorf("unknown field %q (expected one of: %s, credentials)", key, joinOr(backendAuthKinds))
			continue
		}
		if found != "" {
			v.Errorf("only one of %s may be set (already have %q)", joinOr(backendAuthKinds), found)
			continue
		}
		found = key
		switch key {
		case "passthrough":
			b.Passthrough = &BackendAuthPassthrough{}
			if v.Kind() != decode.Null {
				v.Decode(b.Passthrough)
			}
		case "key":
			b.Key = &BackendAuthKey{}
			if v.Kind() == decode.Null {
				v.Errorf("expected a secret as a string, {file: path} or {value, location}")
			}
			v.Decode(b.Key)
		case "gcp":
			b.GCP = &GCPAuth{}
			if v.Kind() != decode.Null {
				v.Decode(b.GCP)
			}
		case "aws":
			b.AWS = &AWSAuth{}
			if v.Kind() != decode.Null {
				v.Decode(b.AWS)
			}
		case "azure":
			b.Azure = &AzureAuth{}
			v.Decode(b.Azure)
			if v.Kind() == decode.Null {
				v.Errorf("exactly one of explicitConfig, developerImplicit, implicit is required")
			}
		default:
			v.Errorf("backend auth %q is not supported yet", key)
		}
	}
	if found == "" && n.Get("credentials") == nil {
		n.Errorf("exactly one of %s is required (or credentials)", joinOr(backendAuthKinds))
	}
}

// Kind names the kind set, as in the file ("" for credentials alone).
func (b *BackendAuth) Kind() string {
	switch {
	case b.Passthrough != nil:
		return "passthrough"
	case b.Key != nil:
		return "key"
	case b.GCP != nil:
		return "gcp"
	case b.AWS != nil:
		return "aws"
	case b.Azure != nil:
		return "azure"
	case b.Copilot:
		return "copilot"
	}
	return ""
}

// MarshalJSON writes the union back in file form, secrets redacted.
func (b BackendAuth) MarshalJSON() ([]byte, error) {
	if b.Copilot {
		return []byte(`"copilot"`), nil
	}
	m := map[string]any{}
	switch {
	case b.Passthrough != nil:
		m["passthrough"] = b.Passthrough
	case b.Key != nil:
		m["key"] = b.Key
	case b.GCP != nil:
		m["gcp"] = b.GCP
	case b.AWS != nil:
		m["aws"] = b.AWS
	case b.Azure != nil:
		m["azure"] = b.Azure
	}
	if len(b.Credentials) > 0 {
		m["credentials"] = b.Credentials
	}
	if len(m) == 0 {
		return []byte("null"), nil
	}
	return json.Marshal(m)
}

// maxInlineKey bounds an inline backend key (the spec's 2048 characters).
const maxInlineKey = 2048

// BackendAuthKey is the `key` kind: a secret sent to the backend, in the
// Authorization header as "Bearer <key>" unless Location says otherwise.
type BackendAuthKey struct {
	Value    Secret
	Location *AuthLocation
	// Short is set when the file wrote `key: <secret>` rather than
	// `key: {value, location}`; the dump keeps the form.
	Short bool
}

// DecodeNode decodes the secret, or the {value, location} form.
func (k *BackendAuthKey) DecodeNode(n *decode.Node) {
	if n.Kind() == decode.Map && n.Get("value") != nil {
		var f struct {
			Value    Secret        `json:"value" cfg:"required"`
			Location *AuthLocation `json:"location,omitempty"`
		}
		if n.Decode(&f) {
			k.Value, k.Location = f.Value, f.Location
			checkInlineKey(n.Get("value"), k.Value)
		}
		return
	}
	if n.Kind() == decode.Map && n.Get("file") == nil {
		n.Errorf("expected a secret as a string, {file: path} or {value, location}")
		return
	}
	k.Short = true
	if n.Decode(&k.Value) {
		checkInlineKey(n, k.Value)
	}
}

func checkInlineKey(n *decode.Node, s Secret) {
	if c := utf8.RuneCountInString(s.Inline); c > maxInlineKey {
		n.Errorf("an inline key must be at most %d characters, got %d", maxInlineKey, c)
	}
}

// MarshalJSON writes the form the file used, the secret redacted.
func (k BackendAuthKey) MarshalJSON() ([]byte, error) {
	if k.Short {
		return json.Marshal(k.Value)
	}
	m := map[string]any{"value": k.Value}
	if k.Location != nil {
		m["location"] = k.Location
	}
	return json.Marshal(m)
}

// BackendAuthCredential is one entry of `backendAuth.credentials`: a
// secret placed where Location says.
type BackendAuthCredential struct {
	Location AuthLocation `json:"location" cfg:"required"`
	Key      Secret       `json:"key" cfg:"required"`
}

// AWSAuth signs backend requests with AWS SigV4: with explicit keys
// (accessKeyId and secretAccessKey, optionally sessionToken), or with the
// default credential chain (environment, profile, instance role), which
// may assume a role first.
type AWSAuth struct {
	AccessKeyID     string         `json:"accessKeyId,omitempty"`
	SecretAccessKey SecretString   `json:"secretAccessKey,omitempty"`
	SessionToken    SecretString   `json:"sessionToken,omitempty"`
	Region          *string        `json:"region,omitempty" cfg:"minLen=1"`
	ServiceName     *string        `json:"serviceName,omitempty" cfg:"minLen=1"`
	AssumeRole      *AWSAssumeRole `json:"assumeRole,omitempty"`
}

// Explicit reports whether the credentials are given in the file rather
// than found by the default chain.
func (a *AWSAuth) Explicit() bool { return a.AccessKeyID != "" }

// Validate requires both keys of explicit credentials, and keeps assumeRole
// to the default chain (agentgateway's two forms).
func (a *AWSAuth) Validate(v *decode.Validation) {
	n := v.Node()
	explicit := n.Get("accessKeyId") != nil || n.Get("secretAccessKey") != nil || n.Get("sessionToken") != nil
	if !explicit {
		return
	}
	if a.AccessKeyID == "" {
		v.Errorf("accessKeyId", "required with explicit credentials (leave out secretAccessKey and sessionToken to use the default credential chain)")
	}
	if a.SecretAccessKey == "" {
		v.Errorf("secretAccessKey", "required with explicit credentials (leave out accessKeyId and sessionToken to use the default credential chain)")
	}
	if a.AssumeRole != nil {
		v.Errorf("assumeRole", "only allowed with the default credential chain, not with explicit credentials")
	}
}

// AWSAssumeRole is a role assumed through STS before signing.
type AWSAssumeRole struct {
	RoleARN     string          `json:"roleArn" cfg:"required,minLen=1"`
	SessionName *AWSSessionName `json:"sessionName,omitempty"`
	Tags        []AWSSessionTag `json:"tags,omitempty"`
}

// AWSSessionName is the role session name: a fixed string (2 to 64 of
// letters, digits and +=,.@_-, as STS takes) or `{expression: <CEL>}`
// evaluated per request.
type AWSSessionName struct {
	Static     string
	Expression CELExpression
}

var awsSessionName = regexp.MustCompile(`^[\w+=,.@-]{2,64}$`)

// DecodeNode decodes the string-or-{expression} union.
func (s *AWSSessionName) DecodeNode(n *decode.Node) {
	if str, ok := n.String(); ok {
		s.Static = str
		if !awsSessionName.MatchString(str) {
			n.Errorf("must be 2 to 64 letters, digits or any of +=,.@_-")
		}
		return
	}
	if n.Kind() != decode.Map {
		n.Errorf("expected a session name or {expression: <CEL>}, got %s", n.Describe())
		return
	}
	var f struct {
		Expression CELExpression `json:"expression" cfg:"required"`
	}
	if n.Decode(&f) {
		s.Expression = f.Expression
	}
}

// MarshalJSON writes the form the file used.
func (s AWSSessionName) MarshalJSON() ([]byte, error) {
	if s.Expression != "" {
		return json.Marshal(map[string]CELExpression{"expression": s.Expression})
	}
	return jsonString(s.Static), nil
}

// AWSSessionTag is an STS session tag: a fixed value or a CEL expression.
type AWSSessionTag struct {
	Key        string         `json:"key" cfg:"required,minLen=1"`
	Value      *string        `json:"value,omitempty"`
	Expression *CELExpression `json:"expression,omitempty"`
}

// Validate requires exactly one of value and expression.
func (t *AWSSessionTag) Validate(v *decode.Validation) {
	switch {
	case t.Value == nil && t.Expression == nil:
		v.Errorf("", "exactly one of value, expression is required")
	case t.Value != nil && t.Expression != nil:
		v.Errorf("expression", "only one of value, expression may be set")
	}
}

// GCPAuth authenticates to Google Cloud with a token from the credential
// (ADC JSON; nil means the ambient credentials): an access token (Type
// empty or "accessToken") or an ID token for Audience (Type "idToken";
// audience nil means the destination host).
type GCPAuth struct {
	Type       string  `json:"type,omitempty" cfg:"enum=idToken|accessToken"`
	Audience   *string `json:"audience,omitempty" cfg:"minLen=1"`
	Credential *Secret `json:"credential,omitempty"`
}

// Validate keeps audience to ID tokens.
func (g *GCPAuth) Validate(v *decode.Validation) {
	if g.Audience != nil && g.Type != "idToken" {
		v.Errorf("audience", "only allowed with type: idToken")
	}
}

// AzureAuth authenticates to Azure: exactly one of explicitConfig,
// developerImplicit (developer tools' credentials) and implicit (workload
// identity, managed identity or developer tools, as the environment has).
type AzureAuth struct {
	ExplicitConfig    *AzureExplicitConfig `json:"explicitConfig,omitempty"`
	DeveloperImplicit *EmptyObject         `json:"developerImplicit,omitempty"`
	Implicit          *EmptyObject         `json:"implicit,omitempty"`
}

// DecodeNode decodes the map strictly and requires exactly one form.
func (a *AzureAuth) DecodeNode(n *decode.Node) {
	type plain AzureAuth
	decodeExactlyOne(n, (*plain)(a), "explicitConfig", "developerImplicit", "implicit")
}

// AzureExplicitConfig is exactly one of clientSecret, managedIdentity and
// workloadIdentity.
type AzureExplicitConfig struct {
	ClientSecret     *AzureClientSecret    `json:"clientSecret,omitempty"`
	ManagedIdentity  *AzureManagedIdentity `json:"managedIdentity,omitempty"`
	WorkloadIdentity *EmptyObject          `json:"workloadIdentity,omitempty"`
}

// DecodeNode decodes the map strictly and requires exactly one form.
func (a *AzureExplicitConfig) DecodeNode(n *decode.Node) {
	type plain AzureExplicitConfig
	decodeExactlyOne(n, (*plain)(a), "clientSecret", "managedIdentity", "workloadIdentity")
}

// AzureClientSecret is an Entra application's client credentials (the
// keys are snake_case in agentgateway's schema).
type AzureClientSecret struct {
	TenantID     string       `json:"tenant_id" cfg:"required,minLen=1"`
	ClientID     string       `json:"client_id" cfg:"required,minLen=1"`
	ClientSecret SecretString `json:"client_secret" cfg:"required,minLen=1"`
}

// AzureManagedIdentity is the system-assigned identity, or the
// user-assigned one named.
type AzureManagedIdentity struct {
	UserAssignedIdentity *AzureUserAssignedIdentity `json:"userAssignedIdentity,omitempty"`
}

// AzureUserAssignedIdentity names a user-assigned identity by exactly one
// of its client, object or resource id.
type AzureUserAssignedIdentity struct {
	ClientID   *string `json:"clientId,omitempty" cfg:"minLen=1"`
	ObjectID   *string `json:"objectId,omitempty" cfg:"minLen=1"`
	ResourceID *string `json:"resourceId,omitempty" cfg:"minLen=1"`
}

// DecodeNode decodes the map strictly and requires exactly one id.
func (a *AzureUserAssignedIdentity) DecodeNode(n *decode.Node) {
	type plain AzureUserAssignedIdentity
	decodeExactlyOne(n, (*plain)(a), "clientId", "objectId", "resourceId")
}

// EmptyObject is a setting written as `{}`: its presence is what counts.
type EmptyObject struct{}

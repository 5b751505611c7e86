package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/valyala/fasthttp"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"

	"github.com/relaygate/gateway/config"
	"github.com/relaygate/gateway/policy/credential"
)

// cloudPlatformScope is the OAuth scope of Vertex AI's access tokens.
const cloudPlatformScope = "https://www.googleapis.com/auth/cloud-platform"

// maxCredentialFile bounds a credential file.
const maxCredentialFile = 1 << 20

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
	return &gcpCredentials{tokens: &tokenCache{what: "gcp access token", fetch: src.fetch, now: time.Now}}
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
		if data, err = credential.ReadBounded(g.file, maxCredentialFile); err != nil {
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

package provider

import (
	"bytes"
	"context"

	"github.com/valyala/fasthttp"

	"github.com/relaygate/gateway/config"
	"github.com/relaygate/gateway/policy"
	"github.com/relaygate/gateway/policy/credential"
)

// credentials put a provider's credentials on a request.
type credentials interface {
	apply(ctx context.Context, req *fasthttp.Request) error
}

// clientCredentialHeaders are the headers clients send provider keys in;
// they are removed before the gateway's own credentials go on, so that
// none of the client's reaches the provider beside them.
var clientCredentialHeaders = [...]string{"Authorization", "X-Api-Key", "Api-Key", "X-Goog-Api-Key"}

// clientCredentialNames are clientCredentialHeaders as bytes, for the
// comparison with the request's header names.
var clientCredentialNames = func() (names [len(clientCredentialHeaders)][]byte) {
	for i, h := range clientCredentialHeaders {
		names[i] = []byte(h)
	}
	return names
}()

// removeClientCredentials removes every value of the client's credential
// headers. One pass over the headers finds which are there; only those
// are deleted (each Del normalises its name and walks the headers again,
// which for the four names was most of a keyed request's authorization).
func removeClientCredentials(h *fasthttp.RequestHeader) {
	var found [len(clientCredentialHeaders)]bool
	any := false
	for k := range h.All() {
		for i, name := range clientCredentialNames {
			if len(k) == len(name) && bytes.EqualFold(k, name) {
				found[i], any = true, true
			}
		}
	}
	if !any {
		return
	}
	for i, name := range clientCredentialHeaders {
		if found[i] {
			policy.DelRequestHeader(h, []byte(name)) // every value: a second one would survive a Set
		}
	}
}

// The Anthropic API version sent when the client names none
// (https://docs.anthropic.com/en/api/versioning).
const (
	anthropicVersionHeader = "anthropic-version"
	anthropicVersion       = "2023-06-01"
)

// azureAnthropicPath is where Azure Foundry serves Claude's Messages API.
var azureAnthropicPath = []byte("/anthropic/v1/messages")

// Authorize readies req for the provider once its body, path and Host are
// final: the provider's own headers (anthropic-version: 2023-06-01 on
// Anthropic's API when the client sent none) and its credentials:
//   - a `key` backendAuth removes the client's credential headers
//     (Authorization, x-api-key, api-key, x-goog-api-key) and sets the
//     key where the provider takes it (OpenAI, custom, Vertex and Bedrock
//     "Authorization: Bearer k", Azure "api-key", Anthropic "x-api-key",
//     Gemini "x-goog-api-key") or where key.location says;
//   - `aws` (and Bedrock without backendAuth) signs the request with SigV4
//     over its final method, target, Host, body and x-amz-* headers;
//   - `gcp` (and Vertex without backendAuth) sets "Authorization: Bearer"
//     with an access token for the cloud-platform scope, cached until near
//     its expiry;
//   - `azure` sets "Authorization: Bearer" with a Microsoft Entra ID
//     access token for https://cognitiveservices.azure.com/.default
//     (https://ai.azure.com/.default for an Azure Foundry resource), from
//     the Azure SDK's credential of the form configured, cached until near
//     its expiry;
//   - `passthrough` and no backendAuth on other kinds leave the client's
//     headers as they are;
//   - `credentials` put more secrets at their locations, after the kind's
//     (before a SigV4 signature, which then covers them).
//
// ctx bounds the wait for a token: a request whose ctx ends (its client
// hung up, its deadline passed) stops waiting, while the fetch, bounded
// on its own (tokenCache), goes on for the others. For SigV4 it bounds
// the credential load. Errors say what failed without any secret. With a key or a cached token and no credentials, Authorize
// allocates nothing.
func (p *Provider) Authorize(ctx context.Context, req *fasthttp.Request) error {
	p.setProviderHeaders(&req.Header, req.Header.RequestURI())
	if len(p.extra) == 0 {
		if p.creds == nil {
			return nil
		}
		return p.creds.apply(ctx, req)
	}
	if _, signs := p.creds.(*sigv4Credentials); signs {
		if err := p.applyExtra(req); err != nil {
			return err
		}
		return p.creds.apply(ctx, req)
	}
	if p.creds != nil {
		if err := p.creds.apply(ctx, req); err != nil {
			return err
		}
	}
	return p.applyExtra(req)
}

// applyExtra puts backendAuth's credentials on req, each replacing every
// value the client sent at its location.
func (p *Provider) applyExtra(req *fasthttp.Request) error {
	_, err := credential.InsertAll(req, p.extra, nil)
	return err
}

// AuthorizeFetches reports whether Authorize may fetch something (a token,
// or signing credentials), and so needs a context with a deadline; with a
// key, or no credentials, it does not.
func (p *Provider) AuthorizeFetches() bool {
	switch p.creds.(type) {
	case nil, *keyCredentials:
		return false
	}
	return true
}

// SignsRequest reports whether Authorize signs the request (SigV4): a
// header changed after it would break the signature.
func (p *Provider) SignsRequest() bool {
	_, ok := p.creds.(*sigv4Credentials)
	return ok
}

// setProviderHeaders sets the headers the provider's API requires.
func (p *Provider) setProviderHeaders(h *fasthttp.RequestHeader, target []byte) {
	anthropic := p.kind == kindAnthropic ||
		p.kind == kindAzure && p.azure.foundry && bytes.Contains(target, azureAnthropicPath)
	if anthropic && len(h.Peek(anthropicVersionHeader)) == 0 {
		h.Set(anthropicVersionHeader, anthropicVersion)
	}
}

// authPath is where backendAuth errors point, relative to the provider.
const authPath = "policies.backendAuth"

// compileAuth builds the credentials of auth, or the provider's default
// ones without it (Bedrock's AWS default chain, Vertex's Google ADC).
func (p *Provider) compileAuth(auth *config.BackendAuth) (credentials, error) {
	if auth == nil {
		switch p.kind {
		case kindBedrock:
			return newSigV4Credentials(nil, p.bedrock.region), nil
		case kindVertex:
			return newGCPCredentials(nil), nil
		}
		return nil, nil
	}
	switch {
	case auth.Passthrough != nil:
		return nil, nil
	case auth.Key != nil:
		return p.compileKey(auth.Key)
	case auth.AWS != nil:
		return p.compileAWS(auth.AWS)
	case auth.GCP != nil:
		return p.compileGCP(auth.GCP)
	case auth.Azure != nil:
		return p.compileAzure(auth.Azure)
	case auth.Copilot:
		return nil, fieldError(authPath, "backend auth \"copilot\" is not supported yet")
	}
	return nil, nil
}

// compileAWS checks an aws backendAuth: the region is the provider's
// unless auth names one (a provider that is not Bedrock has none).
func (p *Provider) compileAWS(a *config.AWSAuth) (credentials, error) {
	if a.AssumeRole != nil {
		return nil, fieldError(authPath+".aws.assumeRole", "assuming an AWS role is not supported yet")
	}
	region := p.bedrock.region
	if a.Region != nil {
		region = *a.Region
	}
	if region == "" {
		return nil, fieldError(authPath+".aws.region", "required for a "+p.config+" provider (only Bedrock providers have a region)")
	}
	return newSigV4Credentials(a, region), nil
}

// compileGCP checks a gcp backendAuth.
func (p *Provider) compileGCP(g *config.GCPAuth) (credentials, error) {
	if g.Type == "idToken" {
		return nil, fieldError(authPath+".gcp.type", "Google ID tokens are not supported yet (access tokens are)")
	}
	if g.Credential != nil && !g.Credential.IsFile() {
		if err := checkCredentialJSON([]byte(g.Credential.Inline)); err != nil {
			return nil, fieldError(authPath+".gcp.credential", err.Error())
		}
	}
	return newGCPCredentials(g.Credential), nil
}

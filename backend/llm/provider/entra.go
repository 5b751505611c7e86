package provider

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/valyala/fasthttp"
	"golang.org/x/oauth2"

	"github.com/relaygate/gateway/config"
)

// The scopes of Microsoft Entra ID access tokens: Azure OpenAI and the
// other Cognitive Services resources take cognitiveservices.azure.com's;
// Foundry resources (services.ai.azure.com) take ai.azure.com's, as
// agentgateway asks for them (http/auth/azure.rs).
const (
	cognitiveServicesScope = "https://cognitiveservices.azure.com/.default"
	foundryScope           = "https://ai.azure.com/.default"
)

// entraCredentials set a Microsoft Entra ID access token as the bearer
// token. The Azure SDK's credential is built on first use (reading the
// environment then, for the forms that read it) and its tokens are cached
// by a tokenCache.
type entraCredentials struct {
	scope   string
	build   func(o *entraOptions) (azcore.TokenCredential, error)
	options entraOptions
	tokens  *tokenCache

	mu   sync.Mutex
	cred azcore.TokenCredential
}

// entraOptions reach the SDK's credentials. They are the SDK's defaults in
// the gateway; tests point them at an emulated Entra ID.
type entraOptions struct {
	client azcore.ClientOptions
	// noInstanceDiscovery skips asking login.microsoftonline.com about the
	// authority (which an emulated one is not known to).
	noInstanceDiscovery bool
}

// compileAzure builds the credentials of an azure backendAuth: the
// explicit forms (client secret, managed identity, workload identity),
// the developer tools' (Azure CLI, then Azure Developer CLI) or the SDK's
// DefaultAzureCredential chain (environment, workload identity, managed
// identity, developer tools) for implicit.
func (p *Provider) compileAzure(a *config.AzureAuth) (credentials, error) {
	const path = authPath + ".azure"
	var build func(o *entraOptions) (azcore.TokenCredential, error)
	switch {
	case a.ExplicitConfig != nil && a.ExplicitConfig.ClientSecret != nil:
		s := a.ExplicitConfig.ClientSecret
		if !validTenantID(s.TenantID) {
			return nil, fieldError(path+".explicitConfig.clientSecret.tenant_id", "must be a tenant id or domain (letters, digits, '-' and '.')")
		}
		tenant, client, secret := s.TenantID, s.ClientID, string(s.ClientSecret)
		build = func(o *entraOptions) (azcore.TokenCredential, error) {
			return azidentity.NewClientSecretCredential(tenant, client, secret, &azidentity.ClientSecretCredentialOptions{
				ClientOptions: o.client, DisableInstanceDiscovery: o.noInstanceDiscovery,
			})
		}
	case a.ExplicitConfig != nil && a.ExplicitConfig.ManagedIdentity != nil:
		id := managedIdentityID(a.ExplicitConfig.ManagedIdentity.UserAssignedIdentity)
		build = func(o *entraOptions) (azcore.TokenCredential, error) {
			return azidentity.NewManagedIdentityCredential(&azidentity.ManagedIdentityCredentialOptions{ClientOptions: o.client, ID: id})
		}
	case a.ExplicitConfig != nil && a.ExplicitConfig.WorkloadIdentity != nil:
		build = func(o *entraOptions) (azcore.TokenCredential, error) {
			return azidentity.NewWorkloadIdentityCredential(&azidentity.WorkloadIdentityCredentialOptions{
				ClientOptions: o.client, DisableInstanceDiscovery: o.noInstanceDiscovery,
			})
		}
	case a.DeveloperImplicit != nil:
		build = developerTools
	case a.Implicit != nil:
		build = func(o *entraOptions) (azcore.TokenCredential, error) {
			return azidentity.NewDefaultAzureCredential(&azidentity.DefaultAzureCredentialOptions{
				ClientOptions: o.client, DisableInstanceDiscovery: o.noInstanceDiscovery,
			})
		}
	default:
		return nil, fieldError(path, "this Azure credential form is not served yet")
	}
	scope := cognitiveServicesScope
	if p.kind == kindAzure && p.azure.foundry {
		scope = foundryScope
	}
	e := &entraCredentials{scope: scope, build: build}
	e.tokens = &tokenCache{what: "azure access token", fetch: e.fetch, now: time.Now}
	return e, nil
}

// developerTools is agentgateway's developerImplicit (the Rust SDK's
// DeveloperToolsCredential): the Azure CLI's login, else the Azure
// Developer CLI's.
func developerTools(*entraOptions) (azcore.TokenCredential, error) {
	cli, err := azidentity.NewAzureCLICredential(nil)
	if err != nil {
		return nil, err
	}
	azd, err := azidentity.NewAzureDeveloperCLICredential(nil)
	if err != nil {
		return nil, err
	}
	return azidentity.NewChainedTokenCredential([]azcore.TokenCredential{cli, azd}, nil)
}

// managedIdentityID is the user-assigned identity named, or nil for the
// system-assigned one.
func managedIdentityID(u *config.AzureUserAssignedIdentity) azidentity.ManagedIDKind {
	switch {
	case u == nil:
		return nil
	case u.ClientID != nil:
		return azidentity.ClientID(*u.ClientID)
	case u.ObjectID != nil:
		return azidentity.ObjectID(*u.ObjectID)
	case u.ResourceID != nil:
		return azidentity.ResourceID(*u.ResourceID)
	}
	return nil
}

// validTenantID is the Azure SDK's rule for a tenant: letters, digits, '-'
// and '.' (a GUID or a domain). It becomes part of the token endpoint's
// path.
func validTenantID(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.') {
			return false
		}
	}
	return s != ""
}

func (e *entraCredentials) apply(ctx context.Context, req *fasthttp.Request) error {
	header, err := e.tokens.header(ctx)
	if err != nil {
		return err
	}
	removeClientCredentials(&req.Header)
	req.Header.SetBytesV("Authorization", header)
	return nil
}

// fetch gets a token from the SDK's credential (which has its own cache;
// ours keeps the header ready and one fetch at a time).
func (e *entraCredentials) fetch(ctx context.Context) (*oauth2.Token, error) {
	cred, err := e.credential()
	if err != nil {
		return nil, errors.New("azure credentials: " + err.Error())
	}
	tok, err := cred.GetToken(ctx, policy.TokenRequestOptions{Scopes: []string{e.scope}})
	if err != nil {
		return nil, fmt.Errorf("azure access token: %w", err)
	}
	return &oauth2.Token{AccessToken: tok.Token, Expiry: tok.ExpiresOn}, nil
}

// credential is the SDK's credential, built once (a failed build is tried
// again by the next fetch).
func (e *entraCredentials) credential() (azcore.TokenCredential, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.cred == nil {
		cred, err := e.build(&e.options)
		if err != nil {
			return nil, err
		}
		e.cred = cred
	}
	return e.cred, nil
}

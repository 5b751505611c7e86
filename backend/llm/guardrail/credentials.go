package guardrail

import (
	"context"
	"errors"
	"strings"

	"github.com/valyala/fasthttp"

	"github.com/relaygate/gateway/backend/llm/provider"
	"github.com/relaygate/gateway/config"
	"github.com/relaygate/gateway/config/decode"
	"github.com/relaygate/gateway/policy/credential"
)

// credentials put a guard's credentials on its calls: through an LLM
// provider compiled for the purpose (provider.Authorize: keys, SigV4 with
// the AWS SDK's signer, Google access tokens, with their caches and key
// file reloads), or the client's own token (passthrough).
type credentials struct {
	provider    *provider.Provider
	passthrough *credential.Location
}

func (c *credentials) apply(ctx context.Context, req *fasthttp.Request, token []byte) error {
	if c.passthrough != nil {
		if len(token) > 0 {
			c.passthrough.Insert(req, token, nil)
		}
		return nil
	}
	return c.provider.Authorize(ctx, req)
}

// authRules are the backendAuth kinds a guard kind takes, and what it does
// without one.
type authRules struct {
	key, aws, gcp, azure bool
	// takes names the kinds taken, for the error about another.
	takes string
	// required: the guard needs a backendAuth (there is no default
	// credential to find).
	required string
	// implicit is the backendAuth used when none is configured (nil: the
	// provider's default, which is none but for AWS and Google).
	implicit *config.BackendAuth
	// keyHeader is where a key goes when its location names none ("":
	// the provider's default, "Authorization: Bearer").
	keyHeader string
}

// compileCredentials builds the credentials of a guard whose service
// authenticates as the LLM provider p would (p names the kind and its
// region or project; the provider's host is not used). path is the
// guard's policies ("bedrockGuardrails.policies"). nil, nil: no
// credentials.
func compileCredentials(p config.AIProvider, pols *config.SimpleBackendPolicies, path string, rules authRules) (*credentials, error) {
	var auth *config.BackendAuth
	if pols != nil {
		auth = pols.BackendAuth
	}
	authPath := path + ".backendAuth"
	if auth == nil {
		switch {
		case rules.required != "":
			return nil, fieldError(authPath, "required: "+rules.required)
		case rules.implicit != nil:
			return providerCredentials(p, rules.implicit, authPath)
		case rules.aws || rules.gcp:
			// The provider's default: the AWS chain, or Google's ADC.
			return providerCredentials(p, nil, authPath)
		}
		return nil, nil
	}
	if len(auth.Credentials) > 0 {
		return nil, fieldError(authPath+".credentials", "extra credentials are not supported for guards yet")
	}
	switch {
	case auth.Passthrough != nil:
		loc, err := credential.NewLocation(auth.Passthrough.Location)
		if err != nil {
			return nil, policyFieldError(authPath+".passthrough.location", err)
		}
		return &credentials{passthrough: &loc}, nil
	case auth.Key != nil && rules.key:
		if rules.keyHeader != "" && auth.Key.Location == nil {
			k := *auth.Key
			k.Location = &config.AuthLocation{Header: &config.HeaderLocation{Name: rules.keyHeader}}
			cp := *auth
			cp.Key = &k
			auth = &cp
		}
	case auth.AWS != nil && rules.aws, auth.GCP != nil && rules.gcp, auth.Azure != nil && rules.azure:
	default:
		return nil, fieldError(authPath+"."+auth.Kind(), "this guard's service takes "+rules.takes)
	}
	return providerCredentials(p, auth, authPath)
}

// providerCredentials compiles p with auth and keeps it for Authorize;
// provider errors are re-rooted at the guard's backendAuth.
func providerCredentials(p config.AIProvider, auth *config.BackendAuth, authPath string) (*credentials, error) {
	prov, err := provider.New(&config.NamedAIProvider{Name: "guardrail", Provider: p}, auth)
	if err != nil {
		var fe *decode.FieldError
		if errors.As(err, &fe) {
			rest, ok := strings.CutPrefix(fe.Path, "policies.backendAuth")
			if ok {
				return nil, fieldError(authPath+rest, fe.Msg)
			}
			return nil, fieldError(authPath, fe.Msg)
		}
		return nil, fieldError(authPath, err.Error())
	}
	return &credentials{provider: prov}, nil
}

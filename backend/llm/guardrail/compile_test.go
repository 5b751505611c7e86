package guardrail_test

import (
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/relaygate/gateway/backend/llm/guardrail"
	"github.com/relaygate/gateway/config"
)

// TestCompileErrors: what this package cannot serve is refused with the
// path of the field at fault, relative to the guard.
func TestCompileErrors(t *testing.T) {
	const bedrock = `bedrockGuardrails:
  guardrailIdentifier: gr
  guardrailVersion: "1"
  region: us-east-1
`
	const armor = `googleModelArmor:
  templateId: t
  projectId: p
`
	cases := []struct {
		desc, yaml string
		answer     bool
		path, msg  string
	}{
		{desc: "regex is aipolicy's", yaml: "regex: {rules: [{builtin: email}]}\n", path: "regex", msg: "aipolicy"},
		{desc: "regex answers too", yaml: "regex: {rules: [{builtin: email}]}\n", answer: true, path: "regex", msg: "aipolicy"},
		{desc: "a webhook backend without a resolver", yaml: "webhook: {target: {backend: guards}}\n", path: "webhook.target.backend", msg: "no backend"},
		{desc: "forwarding a pseudo-header", yaml: "webhook:\n  target: {host: \"a:1\"}\n  forwardHeaderMatches: [{name: \":path\", value: {exact: /}}]\n",
			path: "webhook.forwardHeaderMatches[0].name", msg: "pseudo-header"},
		{desc: "forwarding a framing header", yaml: "webhook:\n  target: {host: \"a:1\"}\n  forwardHeaderMatches: [{name: x-ok, value: {exact: a}}, {name: Transfer-Encoding, value: {exact: chunked}}]\n",
			path: "webhook.forwardHeaderMatches[1].name", msg: "cannot be forwarded"},
		{desc: "moderation needs a key", yaml: "openAIModeration: {}\n", path: "openAIModeration.policies.backendAuth", msg: "needs a key"},
		{desc: "moderation takes no AWS credentials", yaml: "openAIModeration: {policies: {backendAuth: {aws: {}}}}\n",
			path: "openAIModeration.policies.backendAuth.aws", msg: "takes a key"},
		{desc: "extra credentials", yaml: "openAIModeration: {policies: {backendAuth: {key: k, credentials: [{key: x, location: {header: {name: X-K}}}]}}}\n",
			path: "openAIModeration.policies.backendAuth.credentials"},
		{desc: "bedrock takes no Google credentials", yaml: bedrock + "  policies: {backendAuth: {gcp: {}}}\n",
			path: "bedrockGuardrails.policies.backendAuth.gcp"},
		{desc: "bedrock: an AWS role is not supported yet (the provider's refusal, re-rooted)",
			yaml: bedrock + "  policies: {backendAuth: {aws: {assumeRole: {roleArn: \"arn:aws:iam::1:role/r\"}}}}\n",
			path: "bedrockGuardrails.policies.backendAuth.aws.assumeRole"},
		{desc: "model armor takes no key", yaml: armor + "  policies: {backendAuth: {key: k}}\n", path: "googleModelArmor.policies.backendAuth.key"},
		{desc: "model armor: Google ID tokens", yaml: armor + "  policies: {backendAuth: {gcp: {type: idToken}}}\n",
			path: "googleModelArmor.policies.backendAuth.gcp.type"},
		{desc: "model armor: a bad inline credential", yaml: armor + "  policies: {backendAuth: {gcp: {credential: \"{}\"}}}\n",
			path: "googleModelArmor.policies.backendAuth.gcp.credential"},
		{desc: "model armor: a location that is no host label", yaml: armor + "  location: US_Central\n", path: "googleModelArmor.location"},
		{desc: "model armor: a template that is no path segment", yaml: "googleModelArmor: {templateId: a/b, projectId: p}\n", path: "googleModelArmor.templateId"},
		{desc: "content safety checking nothing", yaml: "azureContentSafety: {endpoint: x.cognitiveservices.azure.com, policies: {backendAuth: {key: k}}}\n",
			path: "azureContentSafety", msg: "check nothing"},
		{desc: "content safety takes no Google credentials", yaml: "azureContentSafety: {endpoint: x.cognitiveservices.azure.com, analyzeText: {}, policies: {backendAuth: {gcp: {}}}}\n",
			path: "azureContentSafety.policies.backendAuth.gcp", msg: "takes a key or azure credentials"},
		{desc: "content safety answers need analyzeText", yaml: "azureContentSafety: {endpoint: x.cognitiveservices.azure.com, policies: {backendAuth: {key: k}}}\n",
			answer: true, path: "azureContentSafety.analyzeText"},
		{desc: "a rejection header that cannot be sent", yaml: "openAIModeration: {policies: {backendAuth: {key: k}}}\nrejection: {headers: {set: {x-a: \"a\\nb\"}}}\n",
			path: "rejection.headers.set.x-a"},
		{desc: "a request header modifier that cannot be sent", yaml: "openAIModeration: {policies: {backendAuth: {key: k}, requestHeaderModifier: {add: {x-a: \"\\u0001\"}}}}\n",
			path: "openAIModeration.policies.requestHeaderModifier.add.x-a"},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			var err error
			if tc.answer {
				_, err = newResponseGuard(tc.yaml, guardrail.Options{})
			} else {
				_, err = newRequestGuard(tc.yaml, guardrail.Options{})
			}
			if err == nil {
				t.Fatal("compiled")
			}
			if got := fieldPath(err); got != tc.path {
				t.Errorf("path %q, want %q (%v)", got, tc.path, err)
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("message %q, want it to hold %q", err, tc.msg)
			}
		})
	}
}

// TestCompileScope: a scope other than the default is Bedrock's alone
// (config refuses it on decoding; a configuration built in code meets the
// same rule here).
func TestCompileScope(t *testing.T) {
	_, err := guardrail.NewRequestGuard(&config.RequestGuard{
		OpenAIModeration: &config.ModerationGuard{Policies: &config.SimpleBackendPolicies{BackendAuth: &config.BackendAuth{Key: &config.BackendAuthKey{Value: config.Secret{Inline: "k"}}}}},
		Scope:            []config.ContentScope{config.ScopeToolInput},
	}, guardrail.Options{})
	if got := fieldPath(err); got != "scope" {
		t.Errorf("path %q (%v)", got, err)
	}
	g, err := guardrail.NewRequestGuard(&config.RequestGuard{
		OpenAIModeration: &config.ModerationGuard{Policies: &config.SimpleBackendPolicies{BackendAuth: &config.BackendAuth{Key: &config.BackendAuthKey{Value: config.Secret{Inline: "k"}}}}},
	}, guardrail.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := g.Scope(); len(got) != 2 || got[0] != config.ScopeSystemPrompt || got[1] != config.ScopeMessages {
		t.Errorf("default scope %v", got)
	}
}

// TestRejectionWrite: a configured rejection answers with its status, body
// and headers.
func TestRejectionWrite(t *testing.T) {
	g := mustResponseGuard(t, "webhook: {target: {host: \"a:1\"}}\nrejection: {status: 451, body: gone, headers: {set: {content-type: text/plain}}}\n", guardrail.Options{})
	var resp fasthttp.Response
	if status := g.Rejection().Write(&resp); status != 451 {
		t.Errorf("status %d", status)
	}
	if string(resp.Body()) != "gone" || string(resp.Header.ContentType()) != "text/plain" {
		t.Errorf("body %q content type %q", resp.Body(), resp.Header.ContentType())
	}
	g = mustResponseGuard(t, "webhook: {target: {host: \"a:1\"}}\n", guardrail.Options{})
	if r := g.Rejection(); r.Status != 403 || string(r.Body) != config.DefaultResponseRejectionBody {
		t.Errorf("default answer rejection %d %q", r.Status, r.Body)
	}
}

// TestAzureCredentials: Content Safety takes the provider's azure
// credentials (Entra ID tokens for the Cognitive Services scope), and the
// implicit ones when it names none, as agentgateway does. Compiling them
// reads and fetches nothing.
func TestAzureCredentials(t *testing.T) {
	for _, policies := range []string{
		"",
		"  policies: {backendAuth: {azure: {implicit: {}}}}\n",
		"  policies: {backendAuth: {azure: {developerImplicit: {}}}}\n",
		"  policies: {backendAuth: {azure: {explicitConfig: {managedIdentity: {}}}}}\n",
	} {
		yaml := "azureContentSafety:\n  endpoint: x.cognitiveservices.azure.com\n  analyzeText: {}\n" + policies
		if _, err := newRequestGuard(yaml, guardrail.Options{}); err != nil {
			t.Errorf("%q: %v", policies, err)
		}
	}
}

package server

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/relaygate/gateway/backend/llm/llmtest"
)

// TestBackendCredentialsStayOutOfTelemetry: the credentials the gateway
// puts on an upstream request (backendAuth key and credentials in a
// header, a query parameter and a cookie, an AWS signature, an LLM
// provider's key, Google token, Azure key and SigV4 signature) go
// upstream only. Expressions that read the request once it was sent
// (access log fields, span attributes, response transformations) see it
// as it was before: the client's values at those places, the backend's
// header modifier. They read the request after the gateway had turned it
// into the upstream one, and `request.headers["authorization"]` logged
// the backend's key in place of the client's token.
func TestBackendCredentialsStayOutOfTelemetry(t *testing.T) {
	var up seenRequests
	upAddr := upstream(t, http.HandlerFunc(up.handler))
	o := llmtest.NewOpenAI(t)
	v := llmtest.NewVertex(t)
	b := llmtest.NewBedrock(t)
	az := llmtest.NewAzure(t)
	for _, e := range []*llmtest.Server{o.Server, v.Server, b.Server, az.Server} {
		e.SetDefault(llmtest.Reply{Text: "ok"})
	}
	recv := &otlpReceiver{}
	collector := upstream(t, recv)
	tg := startGateway(t, `
frontendPolicies:
  tracing:
    host: '${COLLECTOR}'
    protocol: http
    randomSampling: true
    attributes:
      req: 'request'
  accessLog:
    add:
      req: 'request'
binds:
- port: 3000
  listeners:
  - routes:
    - name: key
      matches: [{path: {pathPrefix: /key}}]
      policies:
        backendAuth: {key: sk-backendsecret-123}
        transformations:
          response:
            set: {x-seen-authorization: 'request.headers["authorization"]'}
      backends: [{host: '${UP}'}]
    - name: creds
      matches: [{path: {pathPrefix: /creds}}]
      backends:
      - host: '${UP}'
        policies:
          requestHeaderModifier: {set: {x-backend-set: shown}}
          backendAuth:
            key: {value: sk-header-secret, location: {header: {name: X-Api-Key}}}
            credentials:
            - {location: {queryParameter: {name: api_key}}, key: sk-query-secret}
            - {location: {cookie: {name: session}}, key: sk-cookie-secret}
    - name: aws
      matches: [{path: {pathPrefix: /aws}}]
      policies:
        backendAuth:
          aws: {accessKeyId: AKIDEXAMPLE, secretAccessKey: wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY, sessionToken: sk-aws-session-secret, region: eu-west-3, serviceName: execute-api}
      backends: [{host: '${UP}'}]
    - name: openai
      matches: [{path: {pathPrefix: /openai}}]
      policies: {urlRewrite: {path: {prefix: /}}}
      backends:
      - ai:
          name: o
          hostOverride: '${O}'
          provider: {openAI: {}}
          policies:
            backendAuth:
              key: '${OKEY}'
              credentials: [{location: {header: {name: X-Sub}}, key: sk-sub-secret}]
    - name: vertex
      matches: [{path: {pathPrefix: /vertex}}]
      policies: {urlRewrite: {path: {prefix: /}}}
      backends:
      - ai:
          name: v
          hostOverride: '${V}'
          provider: {vertex: {projectId: '${VPROJECT}', region: '${VREGION}'}}
          policies: {backendAuth: {gcp: {credential: {file: '${VFILE}'}}}}
    - name: bedrock
      matches: [{path: {pathPrefix: /bedrock}}]
      policies: {urlRewrite: {path: {prefix: /}}}
      backends:
      - ai:
          name: b
          hostOverride: '${B}'
          provider: {bedrock: {region: '${BREGION}'}}
          policies: {backendAuth: {aws: {accessKeyId: '${BAK}', secretAccessKey: '${BSK}'}}}
    - name: azure
      matches: [{path: {pathPrefix: /azure}}]
      policies: {urlRewrite: {path: {prefix: /}}}
      backends:
      - ai:
          name: az
          hostOverride: '${AZ}'
          provider: {azure: {resourceName: emulated, resourceType: openAI}}
          policies: {backendAuth: {key: '${AZKEY}'}}
`, map[string]string{
		"UP": upAddr, "COLLECTOR": collector,
		"O": o.Addr(), "OKEY": o.APIKey,
		"V": v.Addr(), "VPROJECT": v.Project, "VREGION": v.Location, "VFILE": v.ServiceAccountFile(),
		"B": b.Addr(), "BREGION": b.Region, "BAK": b.AccessKeyID, "BSK": b.SecretAccessKey,
		"AZ": az.Addr(), "AZKEY": az.APIKey,
	})
	chat := func(model string) string {
		return `{"model":"` + model + `","messages":[{"role":"user","content":"hi"}]}`
	}
	lastUp := func() *http.Request { return up.last(t) }
	lastEmu := func(e *llmtest.Server) func() *http.Request {
		return func() *http.Request {
			reqs := e.Requests()
			if len(reqs) == 0 {
				t.Fatal("the provider got no request")
			}
			return &http.Request{Header: reqs[len(reqs)-1].Header}
		}
	}
	for _, tc := range []struct {
		name, method, path, body string
		header                   []string
		upstream                 func() *http.Request
		// secrets must reach the upstream and nothing else; secretHeaders
		// name upstream headers whose values are secrets too.
		secrets       []string
		secretHeaders []string
		// shown must be in what the expressions saw.
		shown []string
	}{
		{
			name: "key", method: "GET", path: "/key/a", header: []string{"Authorization", "Bearer client-token"},
			upstream: lastUp, secrets: []string{"sk-backendsecret-123"}, shown: []string{"Bearer client-token"},
		},
		{
			name: "key, query, cookie", method: "GET", path: "/creds/a?q=1&api_key=client-query",
			header:   []string{"X-Api-Key", "client-key", "Cookie", "session=client-cookie; other=kept"},
			upstream: lastUp, secrets: []string{"sk-header-secret", "sk-query-secret", "sk-cookie-secret"},
			shown: []string{"client-key", "client-query", "session=client-cookie", "x-backend-set", "shown"},
		},
		{
			name: "aws", method: "GET", path: "/aws/a", header: []string{"Authorization", "Bearer client-token"},
			upstream: lastUp, secrets: []string{"sk-aws-session-secret", "AWS4-HMAC-SHA256", "AKIDEXAMPLE"},
			secretHeaders: []string{"Authorization", "X-Amz-Security-Token"}, shown: []string{"Bearer client-token"},
		},
		{
			name: "openai", method: "POST", path: "/openai/v1/chat/completions", body: chat("gpt-4o-mini"),
			header: []string{"Authorization", "Bearer client-token", "X-Sub", "client-sub"}, upstream: lastEmu(o.Server),
			secrets: []string{o.APIKey, "sk-sub-secret"}, shown: []string{"Bearer client-token", "client-sub"},
		},
		{
			name: "vertex", method: "POST", path: "/vertex/v1/chat/completions", body: chat("gemini-2.5-pro"),
			header: []string{"Authorization", "Bearer client-token"}, upstream: lastEmu(v.Server),
			secretHeaders: []string{"Authorization"}, shown: []string{"Bearer client-token"},
		},
		{
			name: "bedrock", method: "POST", path: "/bedrock/v1/chat/completions", body: chat("anthropic.claude-3-haiku-20240307-v1:0"),
			header: []string{"Authorization", "Bearer client-token"}, upstream: lastEmu(b.Server),
			secrets: []string{b.AccessKeyID, "AWS4-HMAC-SHA256"}, secretHeaders: []string{"Authorization"}, shown: []string{"Bearer client-token"},
		},
		{
			name: "azure", method: "POST", path: "/azure/v1/chat/completions", body: chat("gpt-4o"),
			header: []string{"Api-Key", "client-api-key"}, upstream: lastEmu(az.Server),
			secrets: []string{az.APIKey}, secretHeaders: []string{"Api-Key"}, shown: []string{"client-api-key"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(tc.method, tg.url(3000)+tc.path, strings.NewReader(tc.body))
			if tc.body != "" {
				req.Header.Set("Content-Type", "application/json")
			}
			for i := 0; i+1 < len(tc.header); i += 2 {
				req.Header.Set(tc.header[i], tc.header[i+1])
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("%d %s", resp.StatusCode, body)
			}
			secrets := append([]string(nil), tc.secrets...)
			sent := tc.upstream()
			for _, name := range tc.secretHeaders {
				if v := sent.Header.Get(name); v != "" {
					secrets = append(secrets, v)
				}
			}
			var sentText strings.Builder
			sent.Header.Write(&sentText)
			if sent.URL != nil {
				sentText.WriteString(sent.URL.RawQuery)
			}
			for _, s := range secrets {
				if !strings.Contains(sentText.String(), s) {
					t.Fatalf("the upstream did not get %q: %s", s, sentText.String())
				}
			}
			check := func(what, seen string) {
				t.Helper()
				var held, lacked []string
				for _, s := range secrets {
					if strings.Contains(seen, s) {
						held = append(held, s)
					}
				}
				for _, s := range tc.shown {
					if !strings.Contains(seen, s) {
						lacked = append(lacked, s)
					}
				}
				if len(held) > 0 || len(lacked) > 0 {
					t.Errorf("%s holds the backend credentials %q, lacks %q: %s", what, held, lacked, seen)
				}
			}
			if tc.name == "key" {
				check("the response", resp.Header.Get("X-Seen-Authorization"))
			}
			route, _, _ := strings.Cut(tc.path[1:], "/")
			var line string
			eventually(t, 5*time.Second, "the access line", func() bool {
				for _, e := range tg.accessLogs().FilterMessage("request").All() {
					if f := e.ContextMap(); f["route"] == route {
						// As JSON: a map field is a json.RawMessage.
						b, err := json.Marshal(f)
						if err != nil {
							t.Fatal(err)
						}
						line = string(b)
						return true
					}
				}
				return false
			})
			check("the access line", line)
			var span *tracepb.Span
			eventually(t, 10*time.Second, "the span", func() bool {
				for _, s := range recv.all() {
					if spanAttrs(s)["http.route"] == route {
						span = s
						return true
					}
				}
				return false
			})
			check("the span", fmt.Sprint(spanAttrs(span)))
		})
	}
}

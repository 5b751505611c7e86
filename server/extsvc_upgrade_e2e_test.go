package server

import (
	"bufio"
	"io"
	"net"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	procv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/relaygate/gateway/policy/extauthz/extauthztest"
	"github.com/relaygate/gateway/policy/extproc/extproctest"
	"github.com/relaygate/gateway/policy/remoteratelimit/rlstest"
)

// TestExtServiceCannotMakeUpgrade: an external service (ext_authz's OK
// answer, ext_proc's request header mutation, the rate limit service's
// request_headers_to_add) that adds Connection: upgrade and Upgrade to a
// plain request does not make it an upgrade. Before, the request went
// upstream as one, the upstream's 101 reached the client and the
// connection became a tunnel: the client's next pipelined request, meant
// for another route, went to the first route's upstream past routing and
// policies. A client's own upgrade on the same route is still one, to the
// protocol it asked for: the service cannot change or remove its Upgrade.
func TestExtServiceCannotMakeUpgrade(t *testing.T) {
	upgradeFields := map[string]string{"connection": "upgrade", "upgrade": "echo"}
	authz := extauthztest.Start(t, &extauthztest.Server{Decide: func(*authv3.CheckRequest) *authv3.CheckResponse {
		var hs []*corev3.HeaderValueOption
		for k, v := range upgradeFields {
			hs = append(hs, &corev3.HeaderValueOption{Header: &corev3.HeaderValue{Key: k, Value: v}})
		}
		return extauthztest.Allow(&authv3.OkHttpResponse{Headers: hs}, nil)
	}})
	proc := extproctest.Start(t, &extproctest.Server{Answer: func(st *extproctest.Stream, m *procv3.ProcessingRequest) []*procv3.ProcessingResponse {
		if _, ok := m.Request.(*procv3.ProcessingRequest_RequestHeaders); ok {
			return []*procv3.ProcessingResponse{extproctest.Reply(st, m, extproctest.Set(upgradeFields), nil)}
		}
		return extproctest.Passthrough(st, m)
	}})
	rls := rlstest.Start(t, &rlstest.Server{Limit: 1000, RequestHeaders: []*corev3.HeaderValue{
		{Key: "Connection", Value: "upgrade"}, {Key: "Upgrade", Value: "echo"},
	}})
	for _, tc := range []struct{ name, policy string }{
		{"extAuthz", `extAuthz: {host: '${AUTHZ}', protocol: {grpc: {}}}`},
		{"extProc", `extProc: {host: '${PROC}'}`},
		{"remoteRateLimit", `remoteRateLimit: {domain: d, host: '${RLS}', descriptors: [{entries: [{key: k, value: '"v"'}]}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			first, seen := switchingUpstream(t)
			other, otherSeen := rawHTTPUpstream(t, echoAnswer)
			tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - matches: [{path: {pathPrefix: /other}}]
      backends: [{host: '${OTHER}'}]
    - policies:
        `+tc.policy+`
      backends: [{host: '${FIRST}'}]
`, map[string]string{"FIRST": first, "OTHER": other, "AUTHZ": authz, "PROC": proc, "RLS": rls})

			// A plain request, and a second one for the other route
			// pipelined behind it.
			c, br := dialRaw(t, tg.addr(3000))
			io.WriteString(c, "GET /first HTTP/1.1\r\nHost: a\r\n\r\nGET /other/second HTTP/1.1\r\nHost: a\r\n\r\n")
			resp, err := readReply(br, "GET")
			if err != nil || resp.status() != 200 || string(resp.body) != "plain" {
				t.Fatalf("the plain request: %q %q %v; want 200 plain", resp.line, resp.body, err)
			}
			if got := nextSeen(t, seen); got.fields.has("Upgrade") || strings.Contains(strings.ToLower(got.fields.get("Connection")), "upgrade") {
				t.Errorf("the first route's upstream saw %q %q: the service's upgrade fields went upstream", got.line, got.fields)
			}
			resp, err = readReply(br, "GET")
			if err != nil || resp.status() != 200 || !strings.HasPrefix(string(resp.body), "GET /other/second ") {
				t.Fatalf("the pipelined request: %q %q %v; want the other route's answer", resp.line, resp.body, err)
			}
			if got := nextSeen(t, otherSeen); got.target() != "/other/second" {
				t.Errorf("the other route's upstream saw %q", got.line)
			}

			// The client's own upgrade still is one.
			c, br = dialRaw(t, tg.addr(3000))
			io.WriteString(c, "GET /ws HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: mine\r\n\r\n")
			if resp, err := readReply(br, "GET"); err != nil || resp.status() != 101 || resp.fields.get("Upgrade") != "mine" {
				t.Fatalf("the client's upgrade: %q %q %v; want 101 to mine", resp.line, resp.fields, err)
			}
			if got := nextSeen(t, seen); got.fields.get("Upgrade") != "mine" || !strings.EqualFold(got.fields.get("Connection"), "upgrade") {
				t.Errorf("the upstream saw the client's upgrade as %q", got.fields)
			}
			if line, err := br.ReadString('\n'); err != nil || line != "greeting\n" {
				t.Fatalf("after the 101: %q %v", line, err)
			}
			io.WriteString(c, "ping\n")
			if line, err := br.ReadString('\n'); err != nil || line != "ping\n" {
				t.Fatalf("echo through the tunnel: %q %v", line, err)
			}
		})
	}
}

// switchingUpstream switches to any protocol a request's Upgrade names
// (answering 101 with it, then a greeting, then echoing bytes); plain
// requests get 200 "plain".
func switchingUpstream(t *testing.T) (string, <-chan message) {
	t.Helper()
	seen := make(chan message, 64)
	addr := requestUpstream(t, func(c net.Conn, br *bufio.Reader, m message) bool {
		seen <- m
		if p := m.fields.get("Upgrade"); p != "" {
			io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: "+p+"\r\nConnection: Upgrade\r\n\r\ngreeting\n")
			io.Copy(c, br)
			return false
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nplain")
		return true
	})
	return addr, seen
}

// TestUnaskedSwitchRefused: a request the client did not send as an
// upgrade never goes as one, whatever the route's header policies make of
// its head. A route's requestHeaderModifier setting Connection: upgrade and
// Upgrade runs before the request goes upstream: the fields are
// hop-by-hop, removed, and the request goes plain (before, it became a
// tunnel). A backend's runs after: the upstream request asks to switch,
// and the 101 is refused with 502. Either way the connection goes on
// serving the requests behind it.
func TestUnaskedSwitchRefused(t *testing.T) {
	for _, tc := range []struct {
		name, route, backend string
		status               int
	}{
		{name: "route", route: "requestHeaderModifier: {set: {connection: upgrade, upgrade: echo}}", backend: "{}", status: 200},
		{name: "backend", route: "{}", backend: "requestHeaderModifier: {set: {connection: upgrade, upgrade: echo}}", status: 502},
	} {
		t.Run(tc.name, func(t *testing.T) {
			first, _ := switchingUpstream(t)
			tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - policies:
        `+tc.route+`
      backends:
      - host: '${FIRST}'
        policies:
          `+tc.backend+`
`, map[string]string{"FIRST": first})
			c, br := dialRaw(t, tg.addr(3000))
			io.WriteString(c, "GET /first HTTP/1.1\r\nHost: a\r\n\r\nGET /second HTTP/1.1\r\nHost: a\r\n\r\n")
			for _, target := range []string{"/first", "/second"} {
				resp, err := readReply(br, "GET")
				if err != nil || resp.status() != tc.status {
					t.Fatalf("%s: %q %q %v; want %d", target, resp.line, resp.body, err, tc.status)
				}
			}
		})
	}
}

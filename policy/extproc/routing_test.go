package extproc

import (
	"testing"
	"time"

	procv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/relaygate/gateway/policy"
	"github.com/relaygate/gateway/policy/extproc/extproctest"
)

// TestRoutingHeadersAreNotTheServices: as Envoy's default header mutation
// rules have it, a service's edits of :method, :authority, host and
// :scheme are ignored (the request keeps its method and the route's
// authority) while :path and other headers apply. Before, a service
// could send the request upstream as PUT with Host: evil.example.
func TestRoutingHeadersAreNotTheServices(t *testing.T) {
	svc := &extproctest.Server{Answer: func(st *extproctest.Stream, m *procv3.ProcessingRequest) []*procv3.ProcessingResponse {
		if _, ok := m.Request.(*procv3.ProcessingRequest_RequestHeaders); ok {
			return []*procv3.ProcessingResponse{extproctest.Reply(st, m, extproctest.Set(map[string]string{
				":method": "PUT", ":authority": "evil.example", "host": "evil2.example", ":scheme": "https",
				":path": "/rewritten?q=1", "x-ok": "1",
			}), nil)}
		}
		return extproctest.Passthrough(st, m)
	}}
	p := compile(t, extproctest.Start(t, svc), false, 5*time.Second)
	c := newCtx("GET", "/x", "")
	if p.OnRequest(c) != policy.Continue {
		t.Fatalf("refused: %d", c.Fast.Response.StatusCode())
	}
	h := &c.Fast.Request.Header
	if string(h.Method()) != "GET" || string(h.Host()) != "example.com" || c.HostRewritten {
		t.Errorf("method %s, host %s (rewritten %v): want the client's GET and example.com", h.Method(), h.Host(), c.HostRewritten)
	}
	if string(h.RequestURI()) != "/rewritten?q=1" || string(c.Path) != "/rewritten" || string(h.Peek("X-Ok")) != "1" {
		t.Errorf("target %s, path %s, x-ok %q: want the service's :path and header applied", h.RequestURI(), c.Path, h.Peek("X-Ok"))
	}
}

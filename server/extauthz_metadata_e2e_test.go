package server

import (
	"net"
	"strconv"
	"testing"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"

	"github.com/relaygate/gateway/policy/extauthz/extauthztest"
)

// TestExtAuthzGRPCMetadataAndDestination: a protocol.grpc.metadata value
// that is not a map, known only when computed (request.path), is left out
// of the check and said in a warning, once per 10 s rather than per
// request (one whose type says so is refused at load: config); a map
// goes. The check names the address the client connected to as its
// destination, as Envoy's does. Before, such a value was dropped without
// a word, and the check had no destination.
func TestExtAuthzGRPCMetadataAndDestination(t *testing.T) {
	authz := &extauthztest.Server{Decide: func(*authv3.CheckRequest) *authv3.CheckResponse { return extauthztest.Allow(nil, nil) }}
	up, _ := headerRecorder(t, nil)
	tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - policies:
        extAuthz:
          host: '${AUTHZ}'
          protocol: {grpc: {metadata: {m1: 'request.path', m2: '{"p": request.path}'}}}
      backends: [{host: '${UP}'}]
`, map[string]string{"UP": up, "AUTHZ": extauthztest.Start(t, authz)})
	for range 3 {
		if resp, body := get(t, tg.url(3000)+"/x"); resp.StatusCode != 200 {
			t.Fatalf("%d %q", resp.StatusCode, body)
		}
	}
	attrs := authz.Last(t).GetAttributes()
	fm := attrs.GetMetadataContext().GetFilterMetadata()
	if _, ok := fm["m1"]; ok || fm["m2"].GetFields()["p"].GetStringValue() != "/x" {
		t.Errorf("filter metadata %v: want m2 alone", fm)
	}
	if n := tg.logs.FilterMessageSnippet("not a map").Len(); n != 1 {
		t.Errorf("%d warnings about m1 for 3 requests, want 1", n)
	}
	_, port, _ := net.SplitHostPort(tg.addr(3000))
	sa := attrs.GetDestination().GetAddress().GetSocketAddress()
	if sa.GetAddress() != "127.0.0.1" || strconv.Itoa(int(sa.GetPortValue())) != port {
		t.Errorf("destination %v, want 127.0.0.1:%s", sa, port)
	}
}

package extauthz

import (
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/relaygate/gateway/config"
	"github.com/relaygate/gateway/policy/extauthz/extauthztest"
)

func connPolicy(t *testing.T, cfg config.ExtAuthz, addr string, timeout time.Duration) *ExtAuthz {
	t.Helper()
	p, err := NewConnectionCheck(&cfg, Options{Addr: addr, Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func httpProto(h config.ExtAuthzHTTP) *config.ExtAuthzProtocol {
	return &config.ExtAuthzProtocol{HTTP: &h}
}

var (
	connSource = map[string]any{"address": "192.0.2.7", "port": int64(40000)}
	connDest   = map[string]any{"address": "198.51.100.1", "port": int64(443), "hostname": "api.test"}
)

// TestCheckConnection: the check is GET / with expressions over source and
// destination; a 2xx allows and anything else denies.
func TestCheckConnection(t *testing.T) {
	s := &extauthztest.HTTP{Decide: func(r *http.Request) int {
		if r.Header.Get("X-Dest") == "api.test:443" {
			return 200
		}
		return 403
	}}
	addr := extauthztest.StartHTTP(t, s)
	plain := connPolicy(t, config.ExtAuthz{Protocol: httpProto(config.ExtAuthzHTTP{})}, addr, 0)
	if v := plain.CheckConnection(connSource, connDest); v != Denied {
		t.Fatalf("verdict %d, want Denied", v)
	}
	if c := s.Checks()[0]; c.Method != "GET" || c.URI != "/" || c.Header.Get("Authorization") != "" || c.Body != "" {
		t.Errorf("the check was %s %s %v %q, want GET / with no headers of a request", c.Method, c.URI, c.Header, c.Body)
	}
	path := config.ValueExpression(`"/check/" + source.address + "/" + string(source.port)`)
	dest := config.ValueExpression(`destination.hostname + ":" + string(destination.port)`)
	body := config.ValueExpression(`{"src": source.address, "method": request.method}`)
	method := config.ValueExpression(`"POST"`)
	exprs := connPolicy(t, config.ExtAuthz{Protocol: httpProto(config.ExtAuthzHTTP{Path: &path, Body: &body,
		AddRequestHeaders: map[string]config.ValueExpression{"X-Dest": dest, ":method": method}})}, addr, 0)
	if v := exprs.CheckConnection(connSource, connDest); v != Allowed {
		t.Fatalf("verdict %d, want Allowed", v)
	}
	c := s.Checks()[1]
	if c.Method != "POST" || c.URI != "/check/192.0.2.7/40000" || c.Header.Get("X-Dest") != "api.test:443" || c.Body != `{"method":"GET","src":"192.0.2.7"}` {
		t.Errorf("the check was %s %s x-dest %q body %q", c.Method, c.URI, c.Header.Get("X-Dest"), c.Body)
	}
}

func TestCheckConnectionFailureModes(t *testing.T) {
	dead := func() string {
		ln, _ := net.Listen("tcp", "127.0.0.1:0")
		addr := ln.Addr().String()
		ln.Close()
		return addr
	}()
	held := &extauthztest.HTTP{Hold: make(chan struct{})}
	slow := extauthztest.StartHTTP(t, held)
	t.Cleanup(func() { close(held.Hold) })
	noValue := config.ValueExpression(`destination.missing`)
	for _, tc := range []struct {
		desc, addr string
		mode       config.ExtAuthzFailureMode
		path       *config.ValueExpression
		want       Verdict
	}{
		{"unreachable, deny", dead, config.ExtAuthzFailureMode{}, nil, Failed},
		{"unreachable, deny with a status", dead, config.ExtAuthzFailureMode{DenyStatus: 503}, nil, Failed},
		{"unreachable, allow", dead, config.ExtAuthzFailureMode{Allow: true}, nil, Allowed},
		{"too slow, deny", slow, config.ExtAuthzFailureMode{}, nil, Failed},
		{"too slow, allow", slow, config.ExtAuthzFailureMode{Allow: true}, nil, Allowed},
		{"a path without a value", dead, config.ExtAuthzFailureMode{}, &noValue, Failed},
		// A fault of the policy, not of the service: failureMode allow
		// does not let it through (as agentgateway).
		{"a path without a value, allow", dead, config.ExtAuthzFailureMode{Allow: true}, &noValue, Failed},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			p := connPolicy(t, config.ExtAuthz{FailureMode: tc.mode, Protocol: httpProto(config.ExtAuthzHTTP{Path: tc.path})}, tc.addr, 300*time.Millisecond)
			start := time.Now()
			if v := p.CheckConnection(connSource, connDest); v != tc.want {
				t.Fatalf("verdict %d, want %d", v, tc.want)
			}
			if took := time.Since(start); took > 2*time.Second {
				t.Errorf("the check took %v: the timeout did not hold", took)
			}
		})
	}
}

// TestCheckConnectionCache: cache.key over source keeps one decision per
// client address.
func TestCheckConnectionCache(t *testing.T) {
	s := &extauthztest.HTTP{}
	addr := extauthztest.StartHTTP(t, s)
	p := connPolicy(t, config.ExtAuthz{Protocol: httpProto(config.ExtAuthzHTTP{}),
		Cache: &config.ExtAuthzCache{Key: []config.ValueExpression{`source.address`}, TTL: `duration("1m")`}}, addr, 0)
	other := map[string]any{"address": "192.0.2.8", "port": int64(1)}
	for _, src := range []map[string]any{connSource, connSource, other, connSource} {
		if v := p.CheckConnection(src, connDest); v != Allowed {
			t.Fatalf("verdict %d", v)
		}
	}
	if n := len(s.Checks()); n != 2 {
		t.Fatalf("%d checks for two addresses, want 2", n)
	}
}

func TestNewConnectionCheckRefusesGRPC(t *testing.T) {
	for _, cfg := range []config.ExtAuthz{
		{},
		{Protocol: &config.ExtAuthzProtocol{GRPC: &config.ExtAuthzGRPC{}}},
		{Conditional: []config.ConditionalExtAuthz{{}}},
	} {
		if _, err := NewConnectionCheck(&cfg, Options{Addr: "127.0.0.1:1"}); err == nil {
			t.Errorf("%+v accepted", cfg)
		}
	}
}

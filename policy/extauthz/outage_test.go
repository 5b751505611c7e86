package extauthz

import (
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/relaygate/gateway/config"
	"github.com/relaygate/gateway/policy"
	"github.com/relaygate/gateway/policy/policytest"
)

// deadAddr is a port on 127.0.0.1 that refuses: a service that is down.
func deadAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// outageRequests is how many checks an outage test fails within logEvery.
const outageRequests = 40

// checkOutageLog has fail fail outageRequests checks of p at once, then
// one more logEvery later on p's clock, and checks that the log said so
// in one line with msg, then in a second counting the rest, and nothing
// else.
func checkOutageLog(t *testing.T, p *ExtAuthz, logs *observer.ObservedLogs, msg string, fail func()) {
	t.Helper()
	var clock atomic.Int64
	p.now = func() time.Time { return time.Unix(0, clock.Load()) }
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range outageRequests / 4 {
				fail()
			}
		})
	}
	wg.Wait()
	if n := logs.Len(); n != 1 {
		t.Fatalf("%d lines for %d failed checks within %v, want 1", n, outageRequests, logEvery)
	}
	if f := logs.All()[0]; f.Message != msg || f.ContextMap()["similar_errors_not_logged"] != int64(0) || f.ContextMap()["error"] == nil {
		t.Fatalf("logged %q %v, want %q with its error and similar_errors_not_logged 0", f.Message, f.ContextMap(), msg)
	}
	clock.Add(int64(logEvery))
	fail()
	all := logs.All()
	if len(all) != 2 || all[1].Message != msg || all[1].ContextMap()["similar_errors_not_logged"] != int64(outageRequests-1) {
		t.Fatalf("after %v: %d lines, the last %q %v; want a second with %d held back", logEvery, len(all), all[len(all)-1].Message, all[len(all)-1].ContextMap(), outageRequests-1)
	}
}

// TestServiceOutageLogThrottled: an authorization service that cannot be
// reached fails every request, and the log says so once per logEvery per
// policy, with the count of the lines held back, over either protocol and
// in either failure mode; the failure mode still applies to each request.
// Every failed request wrote a warning.
func TestServiceOutageLogThrottled(t *testing.T) {
	for _, tc := range []struct {
		desc   string
		http   bool
		allow  bool
		status int // 0: allowed
		msg    string
	}{
		{"gRPC, deny", false, false, 403, "extAuthz: the authorization service could not decide; denying"},
		{"gRPC, allow", false, true, 0, "extAuthz: the authorization service could not decide; allowing (failureMode allow)"},
		{"HTTP, deny", true, false, 403, "extAuthz: the authorization service could not decide; denying"},
		{"HTTP, allow", true, true, 0, "extAuthz: the authorization service could not decide; allowing (failureMode allow)"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			cfg := config.ExtAuthz{FailureMode: config.ExtAuthzFailureMode{Allow: tc.allow}}
			if tc.http {
				cfg.Protocol = httpProto(config.ExtAuthzHTTP{})
			}
			core, logs := observer.New(zap.WarnLevel)
			p, err := New(&cfg, Options{Addr: deadAddr(t), Timeout: 2 * time.Second, Logger: zap.New(core)})
			if err != nil {
				t.Fatal(err)
			}
			checkOutageLog(t, p, logs, tc.msg, func() {
				c := policytest.Ctx(policytest.NewRequest("GET", "/"))
				res := p.OnRequest(c)
				if tc.status == 0 && res != policy.Continue || tc.status != 0 && (res != policy.Done || c.Fast.Response.StatusCode() != tc.status) {
					t.Errorf("%v %d, want the failure mode's (status %d, 0: allowed)", res, c.Fast.Response.StatusCode(), tc.status)
				}
			})
		})
	}
}

// TestConnectionServiceOutageLogThrottled is TestServiceOutageLogThrottled
// for networkExtAuthz: a line per connection said nothing more than one
// per logEvery with the count.
func TestConnectionServiceOutageLogThrottled(t *testing.T) {
	for _, tc := range []struct {
		desc  string
		allow bool
		want  Verdict
		msg   string
	}{
		{"deny", false, Failed, "networkExtAuthz: the authorization service could not decide; closing the connection"},
		{"allow", true, Allowed, "networkExtAuthz: the authorization service could not decide; allowing the connection (failureMode allow)"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			core, logs := observer.New(zap.WarnLevel)
			cfg := config.ExtAuthz{FailureMode: config.ExtAuthzFailureMode{Allow: tc.allow}, Protocol: httpProto(config.ExtAuthzHTTP{})}
			p, err := NewConnectionCheck(&cfg, Options{Addr: deadAddr(t), Timeout: 2 * time.Second, Logger: zap.New(core)})
			if err != nil {
				t.Fatal(err)
			}
			checkOutageLog(t, p, logs, tc.msg, func() {
				if v := p.CheckConnection(connSource, connDest); v != tc.want {
					t.Errorf("verdict %d, want %d", v, tc.want)
				}
			})
		})
	}
}

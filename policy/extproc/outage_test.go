package extproc

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
)

// TestServiceOutageLogThrottled: a processing service that cannot be
// reached (a port on 127.0.0.1 that refuses) fails every request, and the
// log says so once per logEvery per policy, with the count of the lines
// held back, in either failure mode; the failure mode still applies to
// each request. Every failed request wrote a warning.
func TestServiceOutageLogThrottled(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	const requests = 40
	for _, tc := range []struct {
		mode   string
		status int // 0: the request goes on
		msg    string
	}{
		{"failClosed", 500, "extProc: the external processing service failed; answering 500"},
		{"failOpen", 0, "extProc: the external processing service failed; the request goes on unprocessed (failureMode failOpen)"},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			core, logs := observer.New(zap.WarnLevel)
			p, err := New(&config.ExtProc{Host: dead, FailureMode: tc.mode}, Options{Addr: dead, Timeout: 2 * time.Second, Logger: zap.New(core)})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = p.conn.Close() })
			var clock atomic.Int64
			p.now = func() time.Time { return time.Unix(0, clock.Load()) }
			fail := func() {
				c := newCtx("POST", "/x", "payload")
				res := p.OnRequest(c)
				if tc.status == 0 && (res != policy.Continue || string(c.Fast.Request.Body()) != "payload") ||
					tc.status != 0 && (res != policy.Done || c.Fast.Response.StatusCode() != tc.status) {
					t.Errorf("%v %d, want the failure mode's (status %d, 0: the request goes on whole)", res, c.Fast.Response.StatusCode(), tc.status)
				}
			}
			var wg sync.WaitGroup
			for range 4 {
				wg.Go(func() {
					for range requests / 4 {
						fail()
					}
				})
			}
			wg.Wait()
			if n := logs.Len(); n != 1 {
				t.Fatalf("%d lines for %d failed requests within %v, want 1", n, requests, logEvery)
			}
			if f := logs.All()[0]; f.Message != tc.msg || f.ContextMap()["similar_errors_not_logged"] != int64(0) || f.ContextMap()["error"] == nil {
				t.Fatalf("logged %q %v, want %q with its error and similar_errors_not_logged 0", f.Message, f.ContextMap(), tc.msg)
			}
			clock.Add(int64(logEvery))
			fail()
			all := logs.All()
			if len(all) != 2 || all[1].Message != tc.msg || all[1].ContextMap()["similar_errors_not_logged"] != int64(requests-1) {
				t.Fatalf("after %v: %d lines, the last %q %v; want a second with %d held back", logEvery, len(all), all[len(all)-1].Message, all[len(all)-1].ContextMap(), requests-1)
			}
		})
	}
}

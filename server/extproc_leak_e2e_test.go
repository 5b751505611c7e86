package server

import (
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/relaygate/gateway/policy/extproc/extproctest"
)

// TestExtProcAbandonedExchangesLeaveNothing: clients that go away in the
// middle of a processed response, or of a processed request body, leave
// no stream or goroutine behind once their requests are over.
func TestExtProcAbandonedExchangesLeaveNothing(t *testing.T) {
	proc := &extproctest.Server{}
	up := &echoUpstream{}
	tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - policies:
        extProc: {host: '${PROC}'}
      backends: [{host: '${UP}'}]
`, map[string]string{"PROC": extproctest.Start(t, proc), "UP": upstream(t, up)})
	base := tg.url(3000)
	// Warm up: the gRPC connection and the pools.
	get(t, base+"/stream?n=10")
	settle := func() int {
		n := runtime.NumGoroutine()
		for range 20 {
			runtime.Gosched()
			time.Sleep(5 * time.Millisecond)
			if m := runtime.NumGoroutine(); m < n {
				n = m
			}
		}
		return n
	}
	before := settle()
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	for i := 0; i < 30; i++ {
		// A response read in part, then dropped.
		resp, err := client.Get(base + "/stream?n=2000000")
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 1000)
		_, _ = io.ReadFull(resp.Body, buf)
		resp.Body.Close()
		// A request body abandoned mid-way.
		pr, pw := io.Pipe()
		go func() {
			_, _ = pw.Write([]byte(strings.Repeat("a", 10000)))
			pw.CloseWithError(io.ErrUnexpectedEOF)
		}()
		req, _ := http.NewRequest(http.MethodPost, base+"/", pr)
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		now := settle()
		if now <= before+5 {
			break
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines, %d before:\n%s", now, before, buf[:runtime.Stack(buf, true)])
		}
	}
}

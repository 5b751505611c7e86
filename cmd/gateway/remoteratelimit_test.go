package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/relaygate/gateway/policy/remoteratelimit/envoyrls"
)

// The limit the rate limit service keeps for each tenant: rlsLimit
// requests per rlsUnit, which lasts rlsWindow.
const (
	rlsDomain = "relaygate-e2e"
	rlsLimit  = 10
	rlsUnit   = "hour"
	rlsWindow = time.Hour
)

// TestRemoteRateLimitAcrossProcesses: two gateway processes, run on one
// config file, ask one real rate limit service (Envoy's, over its own
// Redis), so a tenant's limit holds across both: exactly the limit passes
// in all, though each gateway let only part of it through. Then the
// service goes down (failClosed answers 500, failOpen lets requests by)
// and comes back with the counts it had, since they are in Redis.
func TestRemoteRateLimitAcrossProcesses(t *testing.T) {
	envoyrls.Require(t)
	redis := envoyrls.StartRedis(t)
	rls := envoyrls.Start(t, redis, map[string]string{"gateway.yaml": fmt.Sprintf(`
domain: %s
descriptors:
- key: tenant
  rate_limit: {unit: %s, requests_per_unit: %d}
`, rlsDomain, rlsUnit, rlsLimit)})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("rate limit service log:\n%s", rls.Logs())
		}
	})

	var mu sync.Mutex
	upstreamHits := map[string]int{} // by tenant
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		upstreamHits[r.Header.Get("X-Tenant")]++
		mu.Unlock()
		io.WriteString(w, "upstream")
	}))
	t.Cleanup(up.Close)
	hits := func(tenant string) int {
		mu.Lock()
		defer mu.Unlock()
		return upstreamHits[tenant]
	}

	// One file for both processes; only the listening port differs, from
	// the environment.
	limits := func(failureMode string) string {
		return fmt.Sprintf(`remoteRateLimit:
          domain: %s
          host: %s
          failureMode: %s
          descriptors:
          - entries: [{key: tenant, value: 'request.headers["x-tenant"]'}]`, rlsDomain, rls.Addr, failureMode)
	}
	path := filepath.Join(t.TempDir(), "config.yaml")
	writeConfig(t, path, fmt.Sprintf(`config:
  adminAddr: 127.0.0.1:0
  statsAddr: 127.0.0.1:0
  readinessAddr: 127.0.0.1:0
binds:
- port: ${GW_PORT}
  listeners:
  - routes:
    - matches: [{path: {pathPrefix: /open}}]
      policies:
        %s
      backends: [{host: %s}]
    - policies:
        %s
      backends: [{host: %s}]
`, limits("failOpen"), up.Listener.Addr(), limits("failClosed"), up.Listener.Addr()))
	var gateways [2]string
	for i := range gateways {
		port := freePort(t)
		p := startProc(t, path, "GW_PORT="+strconv.Itoa(port))
		p.waitLog(fmt.Sprintf(`listening.*"port": %d`, port))
		gateways[i] = fmt.Sprintf("http://127.0.0.1:%d", port)
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("gateway %d log:\n%s", i, p.logs())
			}
		})
	}
	client := &http.Client{Timeout: 10 * time.Second}
	send := func(t *testing.T, gw int, path, tenant string) reply {
		t.Helper()
		req, err := http.NewRequest("GET", gateways[gw]+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Tenant", tenant)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("GET %s on gateway %d: %v", path, gw, err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return reply{status: resp.StatusCode, body: string(body), remaining: resp.Header.Get("RateLimit-Remaining"), limit: resp.Header.Get("RateLimit-Limit"),
			xRemaining: resp.Header.Get("X-RateLimit-Remaining"), xLimit: resp.Header.Get("X-RateLimit-Limit")}
	}

	t.Run("the limit holds across both gateways", func(t *testing.T) {
		inOneWindow(t, func(try int, window int64) func() {
			shared, solo := fmt.Sprintf("shared-%d", try), fmt.Sprintf("solo-%d", try)
			// Twice the limit and two more, alternating between the
			// gateways.
			var alternating []reply
			for i := range 2*rlsLimit + 2 {
				alternating = append(alternating, send(t, i%2, "/", shared))
			}
			// One gateway alone, for another tenant.
			var alone []reply
			for range rlsLimit + 2 {
				alone = append(alone, send(t, 1, "/", solo))
			}
			counter, err := redis.Do("GET", fmt.Sprintf("%s_tenant_%s_%d", rlsDomain, shared, window))
			return func() {
				passed := [2]int{}
				for i, r := range alternating {
					want := 200
					if i >= rlsLimit {
						want = 429
					}
					r.check(t, fmt.Sprintf("alternating request %d (gateway %d)", i+1, i%2), want)
					if r.status == 200 {
						passed[i%2]++
					}
				}
				// Each let half the limit through, and then refused: a limit
				// kept by each gateway alone would have let it pass twice as
				// many, as the tenant that used one gateway only shows.
				if passed != [2]int{rlsLimit / 2, rlsLimit / 2} {
					t.Errorf("passed by gateway %v, want %d each", passed, rlsLimit/2)
				}
				for i, r := range alone {
					want := 200
					if i >= rlsLimit {
						want = 429
					}
					r.check(t, fmt.Sprintf("one-gateway request %d", i+1), want)
				}
				if got := hits(shared); got != rlsLimit {
					t.Errorf("the upstream got %d requests of the alternating tenant, want %d", got, rlsLimit)
				}
				if got := hits(solo); got != rlsLimit {
					t.Errorf("the upstream got %d requests of the one-gateway tenant, want %d", got, rlsLimit)
				}
				// The count is Redis's: every request of both gateways.
				if err != nil || counter != strconv.Itoa(len(alternating)) {
					t.Errorf("Redis counter of the alternating tenant: %q, %v; want %d", counter, err, len(alternating))
				}
			}
		})
	})

	t.Run("the service down and back", func(t *testing.T) {
		inOneWindow(t, func(try int, window int64) func() {
			tenant := fmt.Sprintf("restart-%d", try)
			var spent []reply
			for i := range rlsLimit {
				spent = append(spent, send(t, i%2, "/", tenant))
			}
			rls.Stop()
			var closed, open [2]reply
			for gw := range 2 {
				closed[gw] = send(t, gw, "/", tenant)
				open[gw] = send(t, gw, "/open", tenant)
			}
			rls.Restart()
			// Each gateway reconnects on its own: wait until neither fails.
			var after [2]reply
			for gw := range 2 {
				deadline := time.Now().Add(15 * time.Second)
				for {
					after[gw] = send(t, gw, "/", tenant)
					if after[gw].status != 500 || time.Now().After(deadline) {
						break
					}
					time.Sleep(50 * time.Millisecond)
				}
			}
			return func() {
				for i, r := range spent {
					r.check(t, fmt.Sprintf("request %d before the service stopped", i+1), 200)
				}
				for gw := range 2 {
					if r := closed[gw]; r.status != 500 || r.body != "rate limit service unavailable\n" {
						t.Errorf("gateway %d, failClosed with the service down: %d %q; want 500", gw, r.status, r.body)
					}
					if r := open[gw]; r.status != 200 || r.body != "upstream" {
						t.Errorf("gateway %d, failOpen with the service down: %d %q; want 200 from the upstream", gw, r.status, r.body)
					}
					// The tenant's count outlived the service: it is in Redis.
					after[gw].check(t, fmt.Sprintf("gateway %d once the service is back", gw), 429)
				}
			}
		})
	})
}

// reply is what a test request got.
type reply struct {
	status           int
	body             string
	limit, remaining string // the service's RateLimit-* headers
	// xLimit, xRemaining are the gateway's X-RateLimit-* headers, from the
	// service's descriptor statuses.
	xLimit, xRemaining string
}

// check wants status; a 429 must carry the service's answer; both carry
// the service's headers and the X-RateLimit-* its statuses give.
func (r reply) check(t *testing.T, what string, status int) {
	t.Helper()
	switch {
	case r.status != status:
		t.Errorf("%s: %d %q, want %d", what, r.status, r.body, status)
	case status == 200 && r.body != "upstream":
		t.Errorf("%s: body %q, want the upstream's", what, r.body)
	case status == 429 && (r.body != "rate limit exceeded\n" || r.remaining != "0" || r.limit != strconv.Itoa(rlsLimit)):
		t.Errorf("%s: 429 %q with RateLimit-Limit %q, RateLimit-Remaining %q; want the service's headers (%d, 0)", what, r.body, r.limit, r.remaining, rlsLimit)
	case r.limit != strconv.Itoa(rlsLimit) || r.remaining == "" || r.xLimit != r.limit || r.xRemaining != r.remaining:
		t.Errorf("%s: %d with RateLimit-Limit %q, RateLimit-Remaining %q, X-RateLimit-Limit %q, X-RateLimit-Remaining %q; want the service's headers and the same from its statuses",
			what, r.status, r.limit, r.remaining, r.xLimit, r.xRemaining)
	}
}

// inOneWindow runs f until one run of it falls wholly in one window of the
// service's limits, then runs the checks it returns. The service counts a
// descriptor per window of wall-clock time (starting at multiples of
// rlsWindow since the epoch, the key's last part in Redis), so a run that
// crossed a boundary saw two counts; f makes new descriptors on each try.
func inOneWindow(t *testing.T, f func(try int, window int64) (check func())) {
	t.Helper()
	secs := int64(rlsWindow / time.Second)
	for try := range 3 {
		window := time.Now().Unix() / secs * secs
		check := f(try, window)
		if time.Now().Unix()/secs*secs == window {
			check()
			return
		}
		t.Logf("try %d crossed a boundary of the service's windows; again", try)
	}
	t.Fatal("every try crossed a boundary of the service's windows")
}

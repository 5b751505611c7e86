package main

import (
	"strings"
	"testing"
	"time"
)

func TestParseBulk(t *testing.T) {
	tests := []struct {
		desc    string
		in      string
		want    wrkResult
		wantErr string
	}{
		{
			desc: "complete",
			in:   "bytes=1073741824\nconns=4\nseconds=0.500000\nthroughput=2147483648\nerrors=0\n",
			want: wrkResult{Requests: 1 << 30, ReqPerSec: 2147483648, P50: 500 * time.Millisecond},
		},
		{
			desc: "a failed connection",
			in:   "bytes=805306368\nconns=4\nseconds=1.000000\nthroughput=805306368\nerrors=1\nfirst_error=the sink read 5 bytes of 268435456\n",
			want: wrkResult{Requests: 805306368, ReqPerSec: 805306368, P50: time.Second, SocketErrors: 1,
				FirstErr: "the sink read 5 bytes of 268435456"},
		},
		{desc: "no bytes", in: "seconds=1\nthroughput=1\nerrors=0\n", wantErr: "no bytes"},
		{desc: "negative throughput", in: "bytes=1\nseconds=1\nthroughput=-1\nerrors=0\n", wantErr: "throughput"},
		{desc: "no seconds", in: "bytes=1\nthroughput=1\nerrors=0\n", wantErr: "no seconds"},
		{desc: "endless", in: "bytes=1\nseconds=99999\nthroughput=1\nerrors=0\n", wantErr: "under an hour"},
		{desc: "wrk output", in: wrkSmall, wantErr: "want key=value"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			got, err := parseBulk([]byte(tc.in))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("parseBulk error = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("parseBulk = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestParseConns(t *testing.T) {
	got, err := parseConns([]byte("requests=3600\nerrors=2\nthroughput=1200.00\np50_us=41000\np99_us=99000\nseconds=3.0\nfirst_error=handshake: EOF\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := wrkResult{Requests: 3600, ReqPerSec: 1200, P50: 41 * time.Millisecond, P99: 99 * time.Millisecond,
		SocketErrors: 2, FirstErr: "handshake: EOF"}
	if got != want {
		t.Fatalf("parseConns = %+v, want %+v", got, want)
	}
	if _, err := parseConns([]byte("requests=1\n")); err == nil {
		t.Fatal("parseConns accepted a summary without errors, throughput and percentiles")
	}
}

const h2loadOut = `starting benchmark...
spawning thread #0: 10 total client(s). Timing-based test with 0s of warm-up time and 3s of main duration for measurements.
Application protocol: h2

finished in 3.00s, 41234.33 req/s, 5.12MB/s
requests: 123703 total, 123803 started, 123703 done, 123690 succeeded, 13 failed, 3 errored, 2 timeout
status codes: 123690 2xx, 0 3xx, 6 4xx, 2 5xx
traffic: 14.73MB (15445245) total, 4.98MB (5221512) headers (space savings 47.97%), 8.58MB (9000000) data
                     min         max         mean         sd        +/- sd
time for request:      220us     13.84ms      2.39ms      1.21ms    71.42%
req/s           :    4118.49     4152.06     4130.33        9.86    60.00%
p50_us: 2100
p99_us: 7900
`

func TestParseH2load(t *testing.T) {
	got, err := parseH2load([]byte(h2loadOut))
	if err != nil {
		t.Fatal(err)
	}
	want := wrkResult{Requests: 123703, ReqPerSec: 41234.33, P50: 2100 * time.Microsecond, P99: 7900 * time.Microsecond,
		SocketErrors: 5, Non2xx: 8}
	if got != want {
		t.Fatalf("parseH2load = %+v, want %+v", got, want)
	}
	for _, tc := range []struct{ desc, in, wantErr string }{
		{"no percentiles", strings.ReplaceAll(h2loadOut, "p50_us: 2100\np99_us: 7900\n", ""), "missing p50_us, p99_us"},
		{"bad requests line", strings.Replace(h2loadOut, "123703 done", "x done", 1), "requests line"},
		{"bad rate", strings.Replace(h2loadOut, "41234.33 req/s", "fast req/s", 1), "req/s"},
		{"nothing", "", "missing req/s"},
		{"wrk output", wrkSmall, "missing req/s"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			if _, err := parseH2load([]byte(tc.in)); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("parseH2load error = %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

func FuzzParseH2load(f *testing.F) {
	f.Add([]byte(h2loadOut))
	f.Fuzz(func(t *testing.T, in []byte) {
		r, err := parseH2load(in)
		if err != nil {
			return
		}
		if r.ReqPerSec < 0 || r.P50 < 0 || r.P99 < 0 || r.Requests < 0 {
			t.Fatalf("accepted negative figures: %+v", r)
		}
	})
}

// l4Fixture is a run with the gateway and one other target in one
// connection-layer case.
func l4Fixture(caseID, other string, gw, o run) *results {
	return &results{
		meta: map[string]string{"tcp_bytes": "1073741824", "tcp_conns": "4", "https_conns": "50", "h2_conns": "10",
			"h2_streams": "10"},
		targets: map[string]targetInfo{targetGateway: {status: "ok"}, processOf(other): {status: "ok"}},
		runs:    map[string]map[string]run{caseID: {targetGateway: gw, other: o}},
	}
}

func TestEvaluateL4Goals(t *testing.T) {
	ok := func(rate float64, p99 time.Duration) run {
		return run{res: wrkResult{Requests: 1000, ReqPerSec: rate, P99: p99}}
	}
	find := func(goals []goal, prefix string) goal {
		for _, g := range goals {
			if strings.HasPrefix(g.name, prefix) {
				return g
			}
		}
		t.Fatalf("no goal %q", prefix)
		return goal{}
	}
	tests := []struct {
		desc         string
		r            *results
		goal         string
		wantStatus   string
		wantMeasured string
	}{
		{
			desc: "TCP above HAProxy", r: l4Fixture(tcpCase, targetHAProxy, ok(2*gib, 0), ok(gib, 0)),
			goal: "TCP throughput ≥ HAProxy's (1 GiB, 4 conns)", wantStatus: goalMet, wantMeasured: "2.00 GiB/s vs 1.00 GiB/s (2.00×)",
		},
		{
			desc: "TCP under 0.9 of direct", r: l4Fixture(tcpCase, targetDirect, ok(2*gib, 0), ok(2.5*gib, 0)),
			goal: "TCP throughput ≥ 0.9× the direct copy", wantStatus: goalNotMet, wantMeasured: "2.00 GiB/s vs 2.50 GiB/s (0.80×)",
		},
		{
			desc: "TCP against splicing HAProxy is informational", r: l4Fixture(tcpCase, targetHAProxySplice, ok(gib, 0), ok(2*gib, 0)),
			goal: "TCP throughput vs HAProxy splicing", wantStatus: goalInfo, wantMeasured: "(0.50×)",
		},
		{
			desc: "passthrough below HAProxy", r: l4Fixture(tlsCase, targetHAProxy, ok(900, 0), ok(1000, 0)),
			goal: "TLS passthrough connections/s ≥ HAProxy's", wantStatus: goalNotMet, wantMeasured: "900 vs 1,000 (0.90×)",
		},
		{
			desc: "passthrough with failed connections", r: l4Fixture(tlsCase, targetHAProxy,
				run{res: wrkResult{Requests: 10, ReqPerSec: 2000, SocketErrors: 1}}, ok(1000, 0)),
			goal: "TLS passthrough connections/s ≥ HAProxy's", wantStatus: goalNotMeasured,
		},
		{
			desc: "HTTPS p99 within 1.2x", r: l4Fixture(httpsCase, targetNginx, ok(100, 6*time.Millisecond), ok(90, 5*time.Millisecond)),
			goal: "HTTPS p99 ≤ 1.2× nginx (50 conns)", wantStatus: goalMet, wantMeasured: "6.00 ms vs 5.00 ms (1.20×)",
		},
		{
			desc: "h2 not served", r: l4Fixture(h2Case, targetNginx, run{unserved: "not served by this build: ALPN http/1.1"}, ok(100, time.Millisecond)),
			goal: "h2 req/s ≥ nginx (10 conns × 10 streams)", wantStatus: goalNotMeasured, wantMeasured: "not served by this build",
		},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			g := find(tc.r.evaluateL4Goals(), tc.goal)
			if g.status != tc.wantStatus || !strings.Contains(g.measured, tc.wantMeasured) {
				t.Fatalf("goal = %+v, want status %q, measured containing %q", g, tc.wantStatus, tc.wantMeasured)
			}
		})
	}
}

// TestProblemsL4: failed connections are listed with the first error; a
// case not served by the build is not a problem.
func TestProblemsL4(t *testing.T) {
	r := &results{
		meta:    map[string]string{},
		targets: map[string]targetInfo{targetGateway: {status: "ok"}, targetHAProxy: {status: "ok"}},
		runs: map[string]map[string]run{
			tlsCase: {targetHAProxySplice: {}, targetGateway: {res: wrkResult{Requests: 5, SocketErrors: 2, FirstErr: "handshake: EOF"}}},
			h2Case:  {targetGateway: {unserved: "not served by this build"}},
			tcpCase: {targetHAProxySplice: {err: "round 2: tcpload failed: connection refused"}},
		},
	}
	got := strings.Join(r.problems(), "\n")
	want := "TCP throughput, HAProxy, spliced: round 2: tcpload failed: connection refused\n" +
		"TLS passthrough, gateway: 2 failed connections (excluded from goals); the first: handshake: EOF"
	if got != want {
		t.Fatalf("problems =\n%s\nwant\n%s", got, want)
	}
}

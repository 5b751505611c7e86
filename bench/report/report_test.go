package main

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/runs")

func TestRenderGolden(t *testing.T) {
	tests := []struct {
		desc string
		dir  string
		// wantIn are fragments the output must hold, beyond the golden match;
		// wantNotIn, fragments it must not.
		wantIn, wantNotIn []string
	}{
		{
			desc: "complete quiet run",
			dir:  "complete",
			wantIn: []string{
				"| RSS idle < 40 MiB | 18.7 MiB | met |", "| gateway | 41,388 |",
				// The reference: a row after HAProxy, in the ratio line and
				// against nginx, and its idle RSS without connection figures.
				"| HAProxy | 27,398 | 890 µs | 34.48 ms | — | 0 | 3% |\n| bare fasthttp proxy (reference) | 58,155 | 590 µs | 101.52 ms | — | 0 | 1% |\n",
				"; gateway/bare fasthttp proxy (reference): req/s 0.71×, p99 0.16×. bare fasthttp proxy/nginx: req/s 1.05×, p99 1.30×.\n",
				"| bare fasthttp proxy (reference) | 9.0 MiB | — | — | — | 14.0 MiB |",
				"| fasthttp | v1.77.0 |",
			},
		},
		{
			desc: "measured in rounds",
			dir:  "rounds",
			wantIn: []string{
				// The median of 30,000, 41,388 and 45,000, with the range;
				// the busiest round's other load.
				"| gateway | 41,388 (30,000–45,000) |",
				"in 3 rounds per case",
				"small, 1 conn, HAProxy: round 2: wrk failed: unable to connect",
				// Round by round: 30,000, 41,388 and 45,000 against 55,176 each.
				"(req/s round by round: median 0.75×, 0.54×–0.81×)",
				// CPU per request: the median of the rounds' (14, 16 and 18 µs
				// against 14, 15 and 16); HAProxy's was not measured.
				"| gateway | 41,388 (30,000–45,000) | 739 µs | 16.49 ms (5.00 ms–30.00 ms) | 16.0 µs |",
				"| HAProxy | 27,398 (27,398–27,398) | 890 µs | 34.48 ms (34.48 ms–34.48 ms) | — |",
				"gateway/nginx: req/s 0.75×, p99 0.21×, CPU per request 1.07× (",
				// The reference's round by round against nginx: 57,000,
				// 58,155 and 60,000 against 55,386 each.
				"bare fasthttp proxy/nginx: req/s 1.05×, p99 1.30×, CPU per request 0.93× (req/s round by round: median 1.05×, 1.03×–1.08×).",
				// Its failed round: reported, and no ratio for that case.
				"1 MiB, 10 conns, bare fasthttp proxy (reference): round 2: wrk failed: unable to connect",
				"gateway/HAProxy: req/s 0.49×, p99 1.80× (req/s round by round: median 0.49×, 0.49×–0.49×).\n",
			},
		},
		{
			desc: "access logs on, nginx both ways, the LLM case",
			dir:  "logs-llm",
			wantIn: []string{
				"- Access logs: **on** for every target",
				"| vegeta (LLM constant-rate load) | v12.13.0 |",
				// nginx without buffering: its own row and ratio.
				"| nginx, proxy_buffering off | 1,450 (1,400–1,500) |",
				"gateway/nginx, proxy_buffering off: req/s 1.41×",
				// The LLM latency tables: added over direct, medians of rounds.
				"| gateway (LLM route) | 6,100 (6,000–6,200) | 152 µs | 270 µs (265 µs–275 µs) | +85 µs | +150 µs |",
				"| nginx | 9,100 (9,000–9,200) | 102 µs | 180 µs (175 µs–185 µs) | +35 µs | +60 µs |",
				"#### Constant rate, 5,000 req/s",
				"| gateway (LLM route) | 4,999 (4,999–4,999) | 175 µs | 420 µs (400 µs–900 µs) | +93 µs | +260 µs |",
				// The gateway's plain route: a row in every LLM table, the
				// LLM work over it, its ratios, and the two baselines of the
				// LLM route's rate, the same request's first.
				"| gateway, plain route (no LLM work) | 7,500 (7,400–7,600) | 121 µs | 220 µs (215 µs–225 µs) | +54 µs | +100 µs | 75.0 µs | 0 | 1% |\n| nginx |",
				"| gateway, plain route (no LLM work) | 4,999 (4,999–4,999) | 142 µs | 330 µs (320 µs–600 µs) | +60 µs | +170 µs |",
				"| gateway, plain route (no LLM work) | 15,000 (14,500–15,500) | 3.31 ms | 5.31 ms (5.30 ms–5.32 ms) | 45.0 µs | 0 | 1% |",
				"The LLM work (the gateway's LLM route minus its plain route, same process and request): p50 +31 µs, p99 +50 µs.",
				"The LLM work (the gateway's LLM route minus its plain route, same process and request): p50 +33 µs, p99 +90 µs.",
				"gateway (LLM route)/gateway, plain route: req/s 0.83×, p99 1.23×, CPU per request 1.33× (req/s round by round: median 0.83×, 0.83×–0.84×)",
				"gateway, plain route/nginx: req/s 0.73×",
				"The gateway's LLM route at 0.83× of its plain route's req/s with the same request (15,000; the goal's baseline), " +
					"and at 0.45× of its plain-proxy req/s of the small GET (100 B response, no request body, 50 connections: 27,500;",
				"107 µs (LiteLLM's Rust build), agentgateway 186 µs, Bifrost 939 µs (onthebench, July 2026, Graviton, 4 cores)",
				// Goals.
				"| LLM added p50 ≤ 1.2× nginx's (1 conn) | +85 µs vs +35 µs (2.43×) | **not met** |",
				"| LLM added p99 ≤ 1.2× nginx's (5,000 req/s) | +260 µs vs +110 µs (2.36×) | **not met** |",
				"| LLM req/s ≥ 0.9× the gateway's plain-proxy req/s, same request (50 conns) | 12,500 vs 15,000 (0.83×) | **not met** |",
				"| LLM req/s vs the gateway's plain-proxy req/s, small GET (50 conns) | 12,500 vs 27,500 (0.45×) | informational |",
				"| LLM work's added p50 / p99: LLM route − plain route (1 conn) | +31 µs / +50 µs | informational |",
				"| LLM work's added p50 / p99: LLM route − plain route (5,000 req/s) | +33 µs / +90 µs | informational |",
				// The policy case: both routes, their ratio round by round,
				// the policies' cost and its goal.
				"| gateway, plain route | 27,500 (27,000–28,000) | 1.75 ms | 3.30 ms (3.21 ms–3.40 ms) | 22.0 µs | 0 | 2% |",
				"| gateway, policy route (jwtAuth, authorization, localRateLimit) | 25,800 (25,000–26,500) | 1.88 ms |",
				"policy route/plain route: req/s 0.94×, p99 1.09×, CPU per request 1.09× (req/s round by round: median 0.94×, 0.93×–0.95×).",
				"The policies cost 6.2 % of the plain route's req/s (25,800 vs 27,500; round by round, median 6.2 %): the goal, under 10 %, is met.",
				"| policy route (JWT, CEL, rate limit) req/s cost < 10 % of the plain route's (small, 50 conns) | 25,800 vs 27,500 (0.94×, cost 6.2 %) | met |",
				// Access logs: lines against requests.
				"| HAProxy | 701,200 | 712,000 | 0.985 |",
				"| gateway | 812,345 | 812,340 | 1.000 |",
			},
		},
		{
			desc: "the connection layer alone",
			dir:  "l4",
			wantIn: []string{
				"| h2load (h2 case) | 1.52.0 |",
				"#### TCP throughput: 1 GiB over 4 connections",
				// The median rounds, the range in GiB/s, CPU per GiB.
				"| gateway | 2.80 GiB/s (2.70–2.90) | 357.14 ms | 150 ms | 0 | 3% |",
				"| HAProxy | 1.00 GiB/s (0.90–1.10) | 1.00 s | 1.20 s | 0 | 3% |",
				"| HAProxy, spliced | 2.10 GiB/s (2.00–2.20) |",
				"gateway/HAProxy: throughput 2.80×, CPU per GiB 0.12× (throughput round by round: median 2.80×, 2.64×–3.00×)",
				"| gateway | 1,200 (1,150–1,250) | 41.67 ms | 100.00 ms (97.00 ms–106.35 ms) | 150.0 µs | 0 | 2% |",
				"gateway/HAProxy: connections/s 0.92×",
				"| gateway | 20,000 (19,500–21,000) | 2.40 ms | 4.50 ms (4.40 ms–4.60 ms) | 48.0 µs | 0 | 3% |",
				"gateway: TLSv1.3, TLS_AES_128_GCM_SHA256; key exchange X25519, 253 bits; ALPN none; nginx: TLSv1.3, TLS_AES_256_GCM_SHA384",
				"| gateway | not served by this build | — | — | — | — | — |",
				"| nginx | 30,000 (29,000–31,000) | 3.10 ms | 8.00 ms (7.80 ms–8.30 ms) | 40.0 µs | 0 | 2% |",
				// Goals.
				"| TCP throughput ≥ HAProxy's (1 GiB, 4 conns) | 2.80 GiB/s vs 1.00 GiB/s (2.80×) | met |",
				"| TCP throughput ≥ 0.9× the direct copy (1 GiB, 4 conns) | 2.80 GiB/s vs 3.00 GiB/s (0.93×) | met |",
				"| TCP throughput vs HAProxy splicing (1 GiB, 4 conns) | 2.80 GiB/s vs 2.10 GiB/s (1.33×) | informational |",
				"| TLS passthrough connections/s ≥ HAProxy's | 1,200 vs 1,300 (0.92×) | **not met** |",
				"| HTTPS req/s ≥ nginx (50 conns) | 20,000 vs 19,000 (1.05×) | met |",
				"| HTTPS p99 ≤ 1.2× nginx (50 conns) | 4.50 ms vs 4.00 ms (1.12×) | met |",
				"| h2 req/s ≥ nginx (10 conns × 10 streams) | not served by this build | not measured |",
			},
			// The cases of BENCH_CASES only: no empty plain tables, and no
			// problem for the h2 case the gateway does not serve.
			wantNotIn: []string{"### Small body", "### 1 MiB body", "## Problems in this run", "gateway/nginx: req/s 0.00×"},
		},
		{
			desc: "gateway failed, broken runs, busy machine",
			dir:  "gateway-failed",
			wantIn: []string{
				"**Warning: the machine was busy.**",
				"| gateway | failed |",
				"- gateway: failed — not ready: process exited (pid 4242) boom: config error",
				"1 MiB, 10 conns, nginx: not wrk --latency output",
				"small, 1 conn, HAProxy: wrk failed: unable to connect",
				"| RSS idle < 40 MiB | — | not measured |",
				// A run without the reference, as before it existed.
				"| bare fasthttp proxy (reference) | not run |",
			},
			wantNotIn: []string{"gateway/bare fasthttp proxy", "bare fasthttp proxy/nginx", "### Policy route"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			dir := filepath.Join("testdata", "runs", tc.dir)
			r, err := loadResults(dir)
			if err != nil {
				t.Fatalf("loadResults: %v", err)
			}
			got := r.render()
			golden := dir + ".golden.md"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if got != string(want) {
				t.Errorf("render differs from %s (run go test -update after checking the change):\n%s", golden, got)
			}
			for _, frag := range tc.wantIn {
				if !strings.Contains(got, frag) {
					t.Errorf("output lacks %q", frag)
				}
			}
			for _, frag := range tc.wantNotIn {
				if strings.Contains(got, frag) {
					t.Errorf("output holds %q", frag)
				}
			}
		})
	}
}

func TestProblemsFailedReference(t *testing.T) {
	r := &results{
		meta:    map[string]string{},
		targets: map[string]targetInfo{targetFastHTTP: {status: "failed", note: "does not forward correctly"}},
		runs:    map[string]map[string]run{"small-c50": {targetFastHTTP: {err: "exited before small-c50"}}},
	}
	got := r.problems()
	want := "bare fasthttp proxy (reference): failed — does not forward correctly"
	if len(got) != 1 || got[0] != want {
		t.Fatalf("problems = %q, want just %q", got, want)
	}
}

// TestProblemsGatewayPlain: the plain route is the gateway process, so a
// failed gateway covers its plain route's failed runs, and a failed run of a
// running gateway's plain route is listed under the route's own name.
func TestProblemsGatewayPlain(t *testing.T) {
	tests := []struct {
		desc    string
		gateway targetInfo
		want    []string
	}{
		{
			desc:    "gateway failed",
			gateway: targetInfo{status: "failed", note: "exited during llm-c1"},
			want:    []string{"gateway: failed — exited during llm-c1"},
		},
		{
			desc:    "gateway running",
			gateway: targetInfo{status: "ok"},
			want:    []string{"LLM, 50 conns, gateway, plain route (no LLM work): LLM check failed: 401"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			r := &results{
				meta:    map[string]string{},
				targets: map[string]targetInfo{targetGateway: tc.gateway},
				runs:    map[string]map[string]run{llmLoadCase: {targetGatewayPlain: {err: "LLM check failed: 401"}}},
			}
			got := r.problems()
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Fatalf("problems = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestProblemsGatewayPolicy: a policy route that failed run.sh's check (it
// did not enforce) is listed under its own name while the gateway runs, and
// its goal is not measured.
func TestProblemsGatewayPolicy(t *testing.T) {
	r := &results{
		meta:    map[string]string{},
		targets: map[string]targetInfo{targetGateway: {status: "ok"}},
		runs: map[string]map[string]run{policyCase: {
			targetGatewayPolicy: {err: "round 1: policy route check failed (no token must get 401): status 200, want 401"},
		}},
	}
	got := r.problems()
	want := "policy route, 50 conns, gateway, policy route: round 1: policy route check failed (no token must get 401): status 200, want 401"
	if len(got) != 1 || got[0] != want {
		t.Fatalf("problems = %q, want just %q", got, want)
	}
	if g := r.evaluatePolicyGoal(); g.status != goalNotMeasured {
		t.Fatalf("policy goal = %+v, want not measured", g)
	}
}

func TestLoadResultsErrors(t *testing.T) {
	tests := []struct {
		desc    string
		files   map[string]string
		wantErr string
	}{
		{desc: "missing meta", files: map[string]string{}, wantErr: "meta.txt"},
		{desc: "malformed meta", files: map[string]string{"meta.txt": "date 2026\n"}, wantErr: "want key=value"},
		{
			desc:    "bad RSS figure",
			files:   map[string]string{"meta.txt": "date=x\n", "targets/gateway.txt": "status=ok\nrss_idle_kib=12MB\n"},
			wantErr: "rss_idle_kib",
		},
		{
			desc:    "bad load figure",
			files:   map[string]string{"meta.txt": "date=x\n", "wrk/small-c1.direct.err": "boom", "wrk/small-c1.direct.load": "other_cpu_pct=-3\n"},
			wantErr: "other_cpu_pct",
		},
		{
			desc:    "bad CPU figure",
			files:   map[string]string{"meta.txt": "date=x\n", "wrk/small-c1.direct.r1.err": "boom", "wrk/small-c1.direct.r1.load": "target_cpu_us=1.5\n"},
			wantErr: "target_cpu_us",
		},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			dir := t.TempDir()
			for name, body := range tc.files {
				path := filepath.Join(dir, name)
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			_, err := loadResults(dir)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("loadResults error = %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestParseKV(t *testing.T) {
	tests := []struct {
		desc    string
		in      string
		want    map[string]string
		wantErr string
	}{
		{desc: "pairs, comments, blanks", in: "# c\na=1\n\nb = x=y \n", want: map[string]string{"a": "1", "b": " x=y "}},
		{desc: "empty value", in: "note=\n", want: map[string]string{"note": ""}},
		{desc: "CRLF", in: "a=1\r\n", want: map[string]string{"a": "1"}},
		{desc: "no equals", in: "a\n", wantErr: "line 1"},
		{desc: "empty key", in: "=1\n", wantErr: "want key=value"},
		{desc: "space in key", in: "a b=1\n", wantErr: "want key=value"},
		{desc: "duplicate", in: "a=1\na=2\n", wantErr: "duplicate key"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			got, err := parseKV([]byte(tc.in))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("parseKV error = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseKV: %v", err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("parseKV = %q, want %q", got, tc.want)
			}
			for k, v := range tc.want {
				if got[k] != v {
					t.Fatalf("parseKV[%q] = %q, want %q", k, got[k], v)
				}
			}
		})
	}
}

func FuzzParseKV(f *testing.F) {
	f.Add([]byte("a=1\n# c\nb=x=y\n"))
	f.Add([]byte("=\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		kv, err := parseKV(in)
		if err != nil {
			return
		}
		for k := range kv {
			if k == "" || strings.ContainsAny(k, " \t=\n") {
				t.Fatalf("accepted bad key %q", k)
			}
		}
	})
}

func TestFormatting(t *testing.T) {
	tests := []struct {
		desc string
		got  string
		want string
	}{
		{desc: "count below 1000", got: fmtCount(999), want: "999"},
		{desc: "count with separators", got: fmtCount(1234567), want: "1,234,567"},
		{desc: "negative count", got: fmtCount(-1234), want: "-1,234"},
		{desc: "rate rounds", got: fmtRate(55893.5), want: "55,894"},
		{desc: "microseconds", got: fmtLatency(565 * time.Microsecond), want: "565 µs"},
		{desc: "milliseconds", got: fmtLatency(4460 * time.Microsecond), want: "4.46 ms"},
		{desc: "seconds", got: fmtLatency(1500 * time.Millisecond), want: "1.50 s"},
		{desc: "added latency", got: fmtSignedLatency(94 * time.Microsecond), want: "+94 µs"},
		{desc: "negative added latency", got: fmtSignedLatency(-3 * time.Microsecond), want: "−3 µs"},
		{desc: "MiB", got: fmtMiB(19104), want: "18.7 MiB"},
		{desc: "ratio", got: fmtRatio(1.2049), want: "1.20×"},
		{desc: "table cell escaping", got: escapeCell("a|b\nc"), want: `a\|b c`},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			if tc.got != tc.want {
				t.Fatalf("got %q, want %q", tc.got, tc.want)
			}
		})
	}
}

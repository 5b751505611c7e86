package main

import (
	"testing"
	"time"
)

// fixture builds results where the gateway and nginx have the given numbers
// in every case, and direct has p50 10µs at 1 connection.
func fixture(gw, ng wrkResult, gwInfo targetInfo) *results {
	r := &results{meta: map[string]string{}, targets: map[string]targetInfo{targetGateway: gwInfo}, runs: map[string]map[string]run{}}
	for _, c := range cases {
		r.runs[c.id] = map[string]run{
			targetDirect:  {res: wrkResult{Requests: 1, ReqPerSec: 1, P50: 10 * time.Microsecond, P99: time.Millisecond}},
			targetGateway: {res: gw},
			targetNginx:   {res: ng},
		}
	}
	return r
}

func TestEvaluateGoals(t *testing.T) {
	ng := wrkResult{Requests: 1, ReqPerSec: 1000, P50: 100 * time.Microsecond, P99: 1000 * time.Microsecond}
	memOK := targetInfo{
		rssIdleKiB:     optInt{v: 20 << 10, ok: true},
		rssConnsKiB:    optInt{v: 100 << 10, ok: true},
		connsOpened:    optInt{v: 10000, ok: true},
		connsOpenAtEnd: optInt{v: 10000, ok: true},
	}
	tests := []struct {
		desc string
		gw   wrkResult
		info targetInfo
		// want maps a goal name to its expected status.
		want map[string]string
	}{
		{
			desc: "equal to nginx meets every goal",
			gw:   ng,
			info: memOK,
			want: map[string]string{
				"req/s ≥ nginx (small, 50 conns)":    goalMet,
				"p99 ≤ 1.2× nginx (1 MiB, 10 conns)": goalMet,
				"added p50 at 1 conn ≤ nginx's":      goalMet,
				"RSS idle < 40 MiB":                  goalMet,
				"RSS with 10k idle conns < 200 MiB":  goalMet,
			},
		},
		{
			desc: "slower and later than nginx",
			gw:   wrkResult{Requests: 1, ReqPerSec: 999, P50: 101 * time.Microsecond, P99: 1201 * time.Microsecond},
			info: memOK,
			want: map[string]string{
				"req/s ≥ nginx (small, 50 conns)":  goalNotMet,
				"p99 ≤ 1.2× nginx (small, 1 conn)": goalNotMet,
				"added p50 at 1 conn ≤ nginx's":    goalNotMet,
			},
		},
		{
			desc: "p99 exactly 1.2x nginx is met",
			gw:   wrkResult{Requests: 1, ReqPerSec: 1000, P50: 100 * time.Microsecond, P99: 1200 * time.Microsecond},
			info: memOK,
			want: map[string]string{"p99 ≤ 1.2× nginx (small, 50 conns)": goalMet},
		},
		{
			desc: "gateway run with errors is not measured",
			gw:   wrkResult{Requests: 1, ReqPerSec: 5000, P50: time.Microsecond, P99: time.Microsecond, Non2xx: 3},
			info: memOK,
			want: map[string]string{
				"req/s ≥ nginx (small, 50 conns)": goalNotMeasured,
				"added p50 at 1 conn ≤ nginx's":   goalNotMeasured,
			},
		},
		{
			desc: "memory over the bounds",
			gw:   ng,
			info: targetInfo{
				rssIdleKiB:  optInt{v: 40 << 10, ok: true},
				rssConnsKiB: optInt{v: 200 << 10, ok: true},
				connsOpened: optInt{v: 10000, ok: true},
			},
			want: map[string]string{"RSS idle < 40 MiB": goalNotMet, "RSS with 10k idle conns < 200 MiB": goalNotMet},
		},
		{
			desc: "gateway closed idle connections",
			gw:   ng,
			info: targetInfo{
				rssIdleKiB:     optInt{v: 1, ok: true},
				rssConnsKiB:    optInt{v: 2, ok: true},
				connsOpened:    optInt{v: 10000, ok: true},
				connsOpenAtEnd: optInt{v: 9000, ok: true},
			},
			want: map[string]string{"RSS with 10k idle conns < 200 MiB": goalNotMet},
		},
		{
			desc: "fewer than 10k connections is not measured",
			gw:   ng,
			info: targetInfo{rssConnsKiB: optInt{v: 2, ok: true}, connsOpened: optInt{v: 500, ok: true}},
			want: map[string]string{"RSS with 10k idle conns < 200 MiB": goalNotMeasured, "RSS idle < 40 MiB": goalNotMeasured},
		},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			got := map[string]string{}
			for _, g := range fixture(tc.gw, ng, tc.info).evaluateGoals() {
				got[g.name] = g.status
			}
			for name, want := range tc.want {
				s, ok := got[name]
				if !ok {
					t.Fatalf("no goal named %q; have %v", name, got)
				}
				if s != want {
					t.Errorf("%s: status %q, want %q", name, s, want)
				}
			}
		})
	}
}

// llmFixture has direct, the gateway's LLM route, its plain route and nginx
// in the LLM cases. Direct has p50 100 µs and p99 200 µs, the plain route
// 130 µs and 250 µs; the LLM route and nginx have the given ones. At 50
// connections the LLM route runs at llmRPS, the plain route with the same
// request at 10,000 req/s, and the gateway's plain proxy of the small GET at
// 20,000: a goal read off the wrong baseline shows.
func llmFixture(gwP50, gwP99, ngP50, ngP99 time.Duration, llmRPS float64) *results {
	res := func(rps float64, p50, p99 time.Duration) run {
		return run{res: wrkResult{Requests: 1, ReqPerSec: rps, P50: p50, P99: p99}}
	}
	r := &results{meta: map[string]string{"llm_rate": "5000"}, targets: map[string]targetInfo{}, runs: map[string]map[string]run{
		smallCase: {targetGateway: res(20000, time.Millisecond, time.Millisecond)},
	}}
	for _, c := range []string{llmLatencyCase, llmRateCase, llmLoadCase} {
		r.runs[c] = map[string]run{
			targetDirect:       res(20000, 100*time.Microsecond, 200*time.Microsecond),
			targetGateway:      res(llmRPS, gwP50, gwP99),
			targetGatewayPlain: res(10000, 130*time.Microsecond, 250*time.Microsecond),
			targetNginx:        res(15000, ngP50, ngP99),
		}
	}
	return r
}

// Goal and informational row names of the LLM route's rate and work.
const (
	llmRateGoal     = "LLM req/s ≥ 0.9× the gateway's plain-proxy req/s, same request (50 conns)"
	llmRateSmallGET = "LLM req/s vs the gateway's plain-proxy req/s, small GET (50 conns)"
	llmWorkConn     = "LLM work's added p50 / p99: LLM route − plain route (1 conn)"
	llmWorkRate     = "LLM work's added p50 / p99: LLM route − plain route (5,000 req/s)"
)

func TestEvaluateLLMGoals(t *testing.T) {
	const us = time.Microsecond
	tests := []struct {
		desc                       string
		gwP50, gwP99, ngP50, ngP99 time.Duration
		llmRPS                     float64
		// dropPlain leaves the plain route out, as in a run from before it.
		dropPlain bool
		// want maps a row name to its status; wantMeasured, to what it shows.
		want, wantMeasured map[string]string
	}{
		{
			desc: "adding what nginx adds, at the plain rate, meets every goal",
			// Both add 50 µs at p50 and 100 µs at p99.
			gwP50: 150 * us, gwP99: 300 * us, ngP50: 150 * us, ngP99: 300 * us, llmRPS: 10000,
			want: map[string]string{
				"LLM added p50 ≤ 1.2× nginx's (1 conn)":      goalMet,
				"LLM added p99 ≤ 1.2× nginx's (5,000 req/s)": goalMet,
				llmRateGoal:     goalMet,
				llmRateSmallGET: goalInfo,
				llmWorkConn:     goalInfo,
				llmWorkRate:     goalInfo,
			},
			wantMeasured: map[string]string{
				llmRateGoal:     "10,000 vs 10,000 (1.00×)",
				llmRateSmallGET: "10,000 vs 20,000 (0.50×)",
				// 150 − 130 µs and 300 − 250 µs.
				llmWorkConn: "+20 µs / +50 µs",
				llmWorkRate: "+20 µs / +50 µs",
			},
		},
		{
			desc: "exactly at the bounds is met",
			// 60 µs against 50 µs, 120 µs against 100 µs; 0.9× the plain
			// route's rate with the same request.
			gwP50: 160 * us, gwP99: 320 * us, ngP50: 150 * us, ngP99: 300 * us, llmRPS: 9000,
			want: map[string]string{
				"LLM added p50 ≤ 1.2× nginx's (1 conn)": goalMet,
				"LLM added p99 ≤ 1.2× nginx's (1 conn)": goalMet,
				llmRateGoal: goalMet,
			},
			wantMeasured: map[string]string{llmRateGoal: "9,000 vs 10,000 (0.90×)", llmRateSmallGET: "9,000 vs 20,000 (0.45×)"},
		},
		{
			desc:  "past the bounds is not met",
			gwP50: 161 * us, gwP99: 321 * us, ngP50: 150 * us, ngP99: 300 * us, llmRPS: 8999,
			want: map[string]string{
				"LLM added p50 ≤ 1.2× nginx's (5,000 req/s)": goalNotMet,
				"LLM added p99 ≤ 1.2× nginx's (1 conn)":      goalNotMet,
				llmRateGoal: goalNotMet,
			},
		},
		{
			desc: "nginx adding nothing measurable leaves the ratio unmeasured",
			// nginx's p50 at direct's.
			gwP50: 150 * us, gwP99: 300 * us, ngP50: 100 * us, ngP99: 300 * us, llmRPS: 10000,
			want: map[string]string{
				"LLM added p50 ≤ 1.2× nginx's (1 conn)": goalNotMeasured,
				"LLM added p99 ≤ 1.2× nginx's (1 conn)": goalMet,
			},
		},
		{
			desc:  "the LLM route faster than its plain route shows a negative LLM work",
			gwP50: 120 * us, gwP99: 240 * us, ngP50: 150 * us, ngP99: 300 * us, llmRPS: 10000,
			want:         map[string]string{llmWorkConn: goalInfo},
			wantMeasured: map[string]string{llmWorkConn: "−10 µs / −10 µs"},
		},
		{
			desc:  "without the plain route the goal is not measured, the small GET still shown",
			gwP50: 150 * us, gwP99: 300 * us, ngP50: 150 * us, ngP99: 300 * us, llmRPS: 10000, dropPlain: true,
			want: map[string]string{
				llmRateGoal:     goalNotMeasured,
				llmRateSmallGET: goalInfo,
				llmWorkConn:     goalNotMeasured,
				llmWorkRate:     goalNotMeasured,
			},
			wantMeasured: map[string]string{llmRateGoal: "", llmRateSmallGET: "10,000 vs 20,000 (0.50×)", llmWorkConn: ""},
		},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			r := llmFixture(tc.gwP50, tc.gwP99, tc.ngP50, tc.ngP99, tc.llmRPS)
			if tc.dropPlain {
				for _, c := range llmCases {
					delete(r.runs[c.id], targetGatewayPlain)
				}
			}
			got := map[string]goal{}
			for _, g := range r.evaluateLLMGoals() {
				got[g.name] = g
			}
			for name, want := range tc.want {
				g, ok := got[name]
				if !ok {
					t.Fatalf("no goal named %q; have %v", name, got)
				}
				if g.status != want {
					t.Errorf("%s: status %q, want %q", name, g.status, want)
				}
			}
			for name, want := range tc.wantMeasured {
				if g := got[name]; g.measured != want {
					t.Errorf("%s: measured %q, want %q", name, g.measured, want)
				}
			}
		})
	}
}

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

// llmFixture has direct, the gateway and nginx in the LLM cases with the
// given p50 and p99 (direct: 100 µs and 200 µs), the LLM route at llmRPS
// and the plain proxy at 10,000 req/s at 50 connections.
func llmFixture(gwP50, gwP99, ngP50, ngP99 time.Duration, llmRPS float64) *results {
	res := func(rps float64, p50, p99 time.Duration) run {
		return run{res: wrkResult{Requests: 1, ReqPerSec: rps, P50: p50, P99: p99}}
	}
	r := &results{meta: map[string]string{"llm_rate": "5000"}, targets: map[string]targetInfo{}, runs: map[string]map[string]run{
		smallCase: {targetGateway: res(10000, time.Millisecond, time.Millisecond)},
	}}
	for _, c := range []string{llmLatencyCase, llmRateCase, llmLoadCase} {
		r.runs[c] = map[string]run{
			targetDirect:  res(20000, 100*time.Microsecond, 200*time.Microsecond),
			targetGateway: res(llmRPS, gwP50, gwP99),
			targetNginx:   res(15000, ngP50, ngP99),
		}
	}
	return r
}

func TestEvaluateLLMGoals(t *testing.T) {
	const us = time.Microsecond
	tests := []struct {
		desc                       string
		gwP50, gwP99, ngP50, ngP99 time.Duration
		llmRPS                     float64
		want                       map[string]string
	}{
		{
			desc: "adding what nginx adds, at the plain rate, meets every goal",
			// Both add 50 µs at p50 and 100 µs at p99.
			gwP50: 150 * us, gwP99: 300 * us, ngP50: 150 * us, ngP99: 300 * us, llmRPS: 10000,
			want: map[string]string{
				"LLM added p50 ≤ 1.2× nginx's (1 conn)":                       goalMet,
				"LLM added p99 ≤ 1.2× nginx's (5,000 req/s)":                  goalMet,
				"LLM req/s ≥ 0.9× the gateway's plain-proxy req/s (50 conns)": goalMet,
			},
		},
		{
			desc: "exactly at the bounds is met",
			// 60 µs against 50 µs, 120 µs against 100 µs; 0.9× the plain rate.
			gwP50: 160 * us, gwP99: 320 * us, ngP50: 150 * us, ngP99: 300 * us, llmRPS: 9000,
			want: map[string]string{
				"LLM added p50 ≤ 1.2× nginx's (1 conn)":                       goalMet,
				"LLM added p99 ≤ 1.2× nginx's (1 conn)":                       goalMet,
				"LLM req/s ≥ 0.9× the gateway's plain-proxy req/s (50 conns)": goalMet,
			},
		},
		{
			desc:  "past the bounds is not met",
			gwP50: 161 * us, gwP99: 321 * us, ngP50: 150 * us, ngP99: 300 * us, llmRPS: 8999,
			want: map[string]string{
				"LLM added p50 ≤ 1.2× nginx's (5,000 req/s)":                  goalNotMet,
				"LLM added p99 ≤ 1.2× nginx's (1 conn)":                       goalNotMet,
				"LLM req/s ≥ 0.9× the gateway's plain-proxy req/s (50 conns)": goalNotMet,
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
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			got := map[string]string{}
			for _, g := range llmFixture(tc.gwP50, tc.gwP99, tc.ngP50, tc.ngP99, tc.llmRPS).evaluateLLMGoals() {
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

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

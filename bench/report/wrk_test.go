package main

import (
	"strings"
	"testing"
	"time"
)

const wrkSmall = `Running 2s test @ http://127.0.0.1:18080/small
  1 threads and 50 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency   832.30us    0.90ms  13.90ms   90.72%
    Req/Sec    56.28k    13.69k   70.53k    70.00%
  Latency Distribution
     50%  565.00us
     75%  739.00us
     90%    1.63ms
     99%    4.46ms
  112102 requests in 2.01s, 21.17MB read
Requests/sec:  55893.38
Transfer/sec:     10.55MB
`

const wrkErrors = `Running 1s test @ http://127.0.0.1:18080/nope
  1 threads and 1 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency    65.55us   68.77us   1.96ms   99.20%
    Req/Sec    16.11k     2.25k   22.67k    90.91%
  Latency Distribution
     50%   59.00us
     75%   73.00us
     90%   78.00us
     99%    1.20s
  17632 requests in 1.10s, 1.06MB read
  Socket errors: connect 2, read 3, write 0, timeout 7
  Non-2xx or 3xx responses: 17632
Requests/sec:  16037.84
Transfer/sec:      0.96MB
`

func TestParseWrk(t *testing.T) {
	tests := []struct {
		desc    string
		in      string
		want    wrkResult
		wantErr string
	}{
		{
			desc: "clean run",
			in:   wrkSmall,
			want: wrkResult{Requests: 112102, ReqPerSec: 55893.38, P50: 565 * time.Microsecond, P99: 4460 * time.Microsecond},
		},
		{
			desc: "socket errors and non-2xx responses",
			in:   wrkErrors,
			want: wrkResult{Requests: 17632, ReqPerSec: 16037.84, P50: 59 * time.Microsecond, P99: 1200 * time.Millisecond, SocketErrors: 12, Non2xx: 17632},
		},
		{desc: "empty output", in: "", wantErr: "missing Requests/sec, request count, 50% latency, 99% latency"},
		{desc: "connection refused run", in: "unable to connect to 127.0.0.1:1 Connection refused\n", wantErr: "not wrk --latency output"},
		{desc: "no latency distribution", in: "  10 requests in 1.00s, 1KB read\nRequests/sec: 10.00\n", wantErr: "missing 50% latency, 99% latency"},
		{desc: "bad latency unit", in: strings.Replace(wrkSmall, "565.00us", "565.00xy", 1), wantErr: "no known unit"},
		{desc: "negative latency", in: strings.Replace(wrkSmall, "565.00us", "-5.00us", 1), wantErr: "not a plain decimal"},
		{desc: "bad rate", in: strings.Replace(wrkSmall, "55893.38", "NaN", 1), wantErr: "requests/sec line"},
		{desc: "bad socket errors", in: strings.Replace(wrkErrors, "read 3", "read x", 1), wantErr: "socket errors read"},
		{desc: "socket error total overflows", in: strings.Replace(wrkErrors, "connect 2, read 3", "connect 9223372036854775807, read 3", 1), wantErr: "overflows"},
		{desc: "huge latency", in: strings.Replace(wrkSmall, "4.46ms", "99999999999h", 1), wantErr: "out of range"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			got, err := parseWrk([]byte(tc.in))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("parseWrk error = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseWrk: %v", err)
			}
			if got != tc.want {
				t.Fatalf("parseWrk = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestParseWrkDuration(t *testing.T) {
	tests := []struct {
		desc    string
		in      string
		want    time.Duration
		wantErr bool
	}{
		{desc: "microseconds", in: "59.00us", want: 59 * time.Microsecond},
		{desc: "milliseconds", in: "1.63ms", want: 1630 * time.Microsecond},
		{desc: "seconds", in: "2.00s", want: 2 * time.Second},
		{desc: "minutes", in: "1.50m", want: 90 * time.Second},
		{desc: "hours", in: "1.00h", want: time.Hour},
		{desc: "no unit", in: "12", wantErr: true},
		{desc: "unit only", in: "ms", wantErr: true},
		{desc: "exponent rejected", in: "1e3us", wantErr: true},
		{desc: "empty", in: "", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			got, err := parseWrkDuration(tc.in)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("parseWrkDuration(%q) = %v, want an error", tc.in, got)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("parseWrkDuration(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
			}
		})
	}
}

func FuzzParseWrk(f *testing.F) {
	f.Add([]byte(wrkSmall))
	f.Add([]byte(wrkErrors))
	f.Add([]byte("Requests/sec: 1.\n 50% 1us\n 99% 1h\n 1 requests in"))
	f.Fuzz(func(t *testing.T, in []byte) {
		r, err := parseWrk(in)
		if err != nil {
			return
		}
		if r.ReqPerSec < 0 || r.P50 < 0 || r.P99 < 0 || r.Requests < 0 || r.Errors() < 0 {
			t.Fatalf("parseWrk accepted negative values: %+v", r)
		}
	})
}

func TestParseRate(t *testing.T) {
	tests := []struct {
		desc    string
		in      string
		want    wrkResult
		wantErr string
	}{
		{desc: "kept up", in: "target_rate=5000\nrequests=15000\nerrors=2\nrate=5000.0\nthroughput=4990.5\np50_us=120\np99_us=450\nmax_us=900\n",
			want: wrkResult{Requests: 15000, Non2xx: 2, ReqPerSec: 4990.5, P50: 120 * time.Microsecond, P99: 450 * time.Microsecond}},
		{desc: "no target rate recorded", in: "requests=10\nerrors=0\nthroughput=1\np50_us=1\np99_us=2\n",
			want: wrkResult{Requests: 10, ReqPerSec: 1, P50: time.Microsecond, P99: 2 * time.Microsecond}},
		{desc: "fell behind", in: "target_rate=5000\nrequests=15000\nerrors=0\nthroughput=4700\np50_us=9000\np99_us=90000\n",
			wantErr: "answered 4,700 of the 5,000 req/s asked for"},
		{desc: "latency that would overflow", in: "requests=1\nerrors=0\nthroughput=1\np50_us=1\np99_us=9223372036854775807\n",
			wantErr: "latency beyond an hour"},
		{desc: "no p99", in: "target_rate=5000\nrequests=15000\nerrors=0\nthroughput=5000\np50_us=1\n", wantErr: "no p99_us"},
		{desc: "wrk output", in: "Running 3s test @ http://127.0.0.1/\n", wantErr: "want key=value"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			got, err := parseRate([]byte(tc.in))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// FuzzParseRate: whatever parseRate accepts holds no negative figure, and
// answers at least the share of the rate asked for that it requires.
func FuzzParseRate(f *testing.F) {
	f.Add([]byte("target_rate=5000\nrequests=15000\nerrors=2\nrate=5000.0\nthroughput=4990.5\np50_us=120\np99_us=450\n"))
	f.Add([]byte("requests=1\nerrors=0\nthroughput=0\np50_us=0\np99_us=0\n"))
	f.Add([]byte("target_rate=9223372036854775807\nrequests=1\nerrors=0\nthroughput=1e308\np50_us=1\np99_us=1\n"))
	f.Add([]byte("requests=1\nerrors=0\nthroughput=1\np50_us=9223372036854775807\np99_us=1\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		r, err := parseRate(in)
		if err != nil {
			return
		}
		if r.ReqPerSec < 0 || r.P50 < 0 || r.P99 < 0 || r.Requests < 0 || r.Errors() < 0 {
			t.Fatalf("parseRate accepted negative values: %+v", r)
		}
		kv, _ := parseKV(in)
		if target, err := parseCount(kv["target_rate"]); err == nil && r.ReqPerSec < minAnsweredShare*float64(target) {
			t.Fatalf("parseRate accepted %v req/s answered of %d asked for", r.ReqPerSec, target)
		}
	})
}

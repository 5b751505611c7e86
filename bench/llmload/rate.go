package main

import (
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// rateSummary is what one constant-rate run measured.
type rateSummary struct {
	Target    int // the rate asked for, per second
	Requests  int
	Errors    int     // failed requests and non-2xx answers
	FirstErr  string  // the first of them, for the report
	Rate      float64 // requests sent per second
	Succeeded float64 // successful answers per second
	P50, P99  time.Duration
	Max       time.Duration
}

func runRate(args []string) error {
	fs := flag.NewFlagSet("rate", flag.ContinueOnError)
	target := fs.String("url", "", "chat completions URL of the target")
	bodyFile := fs.String("body", "", "request body (JSON)")
	key := fs.String("key", "", "API key to send as Authorization: Bearer (none if empty)")
	rate := fs.Int("rate", 5000, "requests per second")
	duration := fs.Duration("duration", 3*time.Second, "length of the measured run")
	out := fs.String("out", "", "file for the key=value summary; standard output if empty")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *target == "" || *bodyFile == "" || *rate <= 0 || *duration <= 0 {
		return errors.New("rate needs -url, -body, a positive -rate and -duration")
	}
	body, err := os.ReadFile(*bodyFile)
	if err != nil {
		return err
	}
	tgt := vegeta.Target{Method: http.MethodPost, URL: *target, Body: body, Header: http.Header{"Content-Type": {"application/json"}}}
	if *key != "" {
		tgt.Header.Set("Authorization", "Bearer "+*key)
	}
	s := attack(tgt, *rate, *duration)
	if *out == "" {
		_, err = os.Stdout.WriteString(s.kv())
		return err
	}
	return os.WriteFile(*out, []byte(s.kv()), 0o644)
}

// maxConns bounds the keep-alive connections to the target, as nginx's
// `keepalive 64` bounds its own to an upstream. A request due while all are
// busy waits for one, and the wait counts in its latency; without the bound
// a stall of the target (or the machine) would open hundreds of new
// connections, and measure their handshakes.
const maxConns = 64

// attack sends tgt at rate per second for d, open loop: a request is due
// at its time whether or not the earlier ones were answered, so a slow
// target is charged for the queue it builds (what wrk's closed loop hides).
func attack(tgt vegeta.Target, rate int, d time.Duration) rateSummary {
	noProxy := func(*http.Request) (*url.URL, error) { return nil, nil }
	a := vegeta.NewAttacker(vegeta.KeepAlive(true), vegeta.HTTP2(false), vegeta.MaxBody(0),
		vegeta.Connections(maxConns), vegeta.MaxConnections(maxConns),
		vegeta.Timeout(5*time.Second), vegeta.Proxy(noProxy))
	pacer := vegeta.Rate{Freq: rate, Per: time.Second}
	var m vegeta.Metrics
	lat := make([]time.Duration, 0, int(d.Seconds()*float64(rate))+rate)
	var firstErr string
	for res := range a.Attack(vegeta.NewStaticTargeter(tgt), pacer, d, "llm") {
		m.Add(res)
		lat = append(lat, res.Latency)
		if firstErr == "" && (res.Error != "" || res.Code < 200 || res.Code > 299) {
			firstErr = fmt.Sprintf("status %d %s", res.Code, res.Error)
		}
	}
	m.Close()
	s := rateSummary{
		Target:    rate,
		Requests:  len(lat),
		Errors:    len(lat) - int(m.Success*float64(len(lat))+0.5),
		FirstErr:  firstErr,
		Rate:      m.Rate,
		Succeeded: m.Throughput,
	}
	s.P50, s.P99, s.Max = percentiles(lat)
	return s
}

// percentiles returns the exact p50, p99 and maximum of lat (sorted in
// place): the nearest-rank value, as wrk reports its own.
func percentiles(lat []time.Duration) (p50, p99, highest time.Duration) {
	if len(lat) == 0 {
		return 0, 0, 0
	}
	slices.Sort(lat)
	rank := func(q float64) time.Duration {
		i := sort.Search(len(lat), func(i int) bool { return float64(i+1) >= q*float64(len(lat)) })
		return lat[min(i, len(lat)-1)]
	}
	return rank(0.50), rank(0.99), lat[len(lat)-1]
}

// kv writes the summary as the key=value lines bench/report reads.
func (s rateSummary) kv() string {
	var b strings.Builder
	fmt.Fprintf(&b, "target_rate=%d\n", s.Target)
	fmt.Fprintf(&b, "requests=%d\n", s.Requests)
	fmt.Fprintf(&b, "errors=%d\n", s.Errors)
	fmt.Fprintf(&b, "rate=%.1f\n", s.Rate)
	fmt.Fprintf(&b, "throughput=%.1f\n", s.Succeeded)
	fmt.Fprintf(&b, "p50_us=%d\n", s.P50.Microseconds())
	fmt.Fprintf(&b, "p99_us=%d\n", s.P99.Microseconds())
	fmt.Fprintf(&b, "max_us=%d\n", s.Max.Microseconds())
	if s.FirstErr != "" {
		fmt.Fprintf(&b, "first_error=%s\n", strings.Join(strings.Fields(s.FirstErr), " "))
	}
	return b.String()
}

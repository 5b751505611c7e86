package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// wrkResult is what the report uses from one wrk run.
type wrkResult struct {
	Requests     int64         // completed requests
	ReqPerSec    float64       // "Requests/sec:" line
	P50, P99     time.Duration // from the --latency distribution
	SocketErrors int64         // connect+read+write+timeout errors
	Non2xx       int64         // "Non-2xx or 3xx responses:" count
	FirstErr     string        // the first error, where the load generator names it
}

// Errors is the total of socket errors and non-2xx/3xx responses.
func (r wrkResult) Errors() int64 { return r.SocketErrors + r.Non2xx }

// parseWrk reads the text wrk 4 prints when run with --latency.
func parseWrk(out []byte) (wrkResult, error) {
	var (
		r                  wrkResult
		haveRate, haveReqs bool
		haveP50, haveP99   bool
	)
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		fields := strings.Fields(line)
		switch {
		case strings.HasPrefix(line, "Requests/sec:"):
			v, err := parseNonNegFloat(strings.TrimSpace(strings.TrimPrefix(line, "Requests/sec:")))
			if err != nil {
				return wrkResult{}, fmt.Errorf("requests/sec line: %w", err)
			}
			r.ReqPerSec, haveRate = v, true
		case len(fields) == 2 && (fields[0] == "50%" || fields[0] == "99%"):
			d, err := parseWrkDuration(fields[1])
			if err != nil {
				return wrkResult{}, fmt.Errorf("latency %s: %w", fields[0], err)
			}
			if fields[0] == "50%" {
				r.P50, haveP50 = d, true
			} else {
				r.P99, haveP99 = d, true
			}
		case len(fields) >= 3 && fields[1] == "requests" && fields[2] == "in":
			n, err := parseCount(fields[0])
			if err != nil {
				return wrkResult{}, fmt.Errorf("request count: %w", err)
			}
			r.Requests, haveReqs = n, true
		case strings.HasPrefix(line, "Socket errors:"):
			n, err := parseSocketErrors(strings.TrimPrefix(line, "Socket errors:"))
			if err != nil {
				return wrkResult{}, err
			}
			r.SocketErrors = n
		case strings.HasPrefix(line, "Non-2xx or 3xx responses:"):
			n, err := parseCount(strings.TrimSpace(strings.TrimPrefix(line, "Non-2xx or 3xx responses:")))
			if err != nil {
				return wrkResult{}, fmt.Errorf("non-2xx count: %w", err)
			}
			r.Non2xx = n
		}
	}
	if err := sc.Err(); err != nil {
		return wrkResult{}, fmt.Errorf("reading wrk output: %w", err)
	}
	var missing []string
	for _, m := range []struct {
		ok   bool
		name string
	}{{haveRate, "Requests/sec"}, {haveReqs, "request count"}, {haveP50, "50% latency"}, {haveP99, "99% latency"}} {
		if !m.ok {
			missing = append(missing, m.name)
		}
	}
	if len(missing) > 0 {
		return wrkResult{}, fmt.Errorf("not wrk --latency output: missing %s", strings.Join(missing, ", "))
	}
	return r, nil
}

// parseWrkDuration reads wrk's latency format: a decimal number followed by
// us, ms, s, m or h.
func parseWrkDuration(s string) (time.Duration, error) {
	units := []struct {
		suffix string
		scale  float64
	}{
		{"us", float64(time.Microsecond)},
		{"ms", float64(time.Millisecond)},
		{"s", float64(time.Second)},
		{"m", float64(time.Minute)},
		{"h", float64(time.Hour)},
	}
	for _, u := range units {
		num, ok := strings.CutSuffix(s, u.suffix)
		if !ok {
			continue
		}
		v, err := parseNonNegFloat(num)
		if err != nil {
			return 0, fmt.Errorf("duration %q: %w", s, err)
		}
		d := v * u.scale
		if d > float64(24*time.Hour) {
			return 0, fmt.Errorf("duration %q out of range", s)
		}
		return time.Duration(d), nil
	}
	return 0, fmt.Errorf("duration %q has no known unit", s)
}

// parseNonNegFloat accepts plain decimal numbers only (no NaN, Inf, signs
// or exponents).
func parseNonNegFloat(s string) (float64, error) {
	if s == "" || strings.Trim(s, "0123456789.") != "" {
		return 0, fmt.Errorf("%q is not a plain decimal number", s)
	}
	return strconv.ParseFloat(s, 64)
}

func parseCount(s string) (int64, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%q is not a count", s)
	}
	return n, nil
}

// parseSocketErrors reads " connect 0, read 0, write 0, timeout 0".
func parseSocketErrors(s string) (int64, error) {
	var total int64
	parts := strings.Split(s, ",")
	for _, p := range parts {
		f := strings.Fields(p)
		if len(f) != 2 {
			return 0, fmt.Errorf("socket errors: bad item %q", strings.TrimSpace(p))
		}
		n, err := parseCount(f[1])
		if err != nil {
			return 0, fmt.Errorf("socket errors %s: %w", f[0], err)
		}
		if n > math.MaxInt64-total {
			return 0, errors.New("socket errors: total overflows")
		}
		total += n
	}
	return total, nil
}

// parseRate reads the key=value summary of one `llmload rate` run:
// requests, errors, throughput (answered req/s), p50_us and p99_us.
func parseRate(out []byte) (wrkResult, error) {
	kv, err := parseKV(out)
	if err != nil {
		return wrkResult{}, err
	}
	num := func(key string) (int64, error) {
		v, ok := kv[key]
		if !ok {
			return 0, fmt.Errorf("no %s", key)
		}
		return parseCount(v)
	}
	var r wrkResult
	if r.Requests, err = num("requests"); err != nil {
		return wrkResult{}, err
	}
	if r.Non2xx, err = num("errors"); err != nil {
		return wrkResult{}, err
	}
	p50, err := num("p50_us")
	if err != nil {
		return wrkResult{}, err
	}
	p99, err := num("p99_us")
	if err != nil {
		return wrkResult{}, err
	}
	if p50 > maxRateLatencyUs || p99 > maxRateLatencyUs {
		return wrkResult{}, fmt.Errorf("latency beyond an hour: p50 %d µs, p99 %d µs", p50, p99)
	}
	r.P50, r.P99 = time.Duration(p50)*time.Microsecond, time.Duration(p99)*time.Microsecond
	tp, ok := kv["throughput"]
	if !ok {
		return wrkResult{}, errors.New("no throughput")
	}
	if r.ReqPerSec, err = parseNonNegFloat(tp); err != nil {
		return wrkResult{}, fmt.Errorf("throughput: %w", err)
	}
	// A run that answered well below the rate asked for measured a queue,
	// the target's or the machine's, not the target's latency at that rate.
	if target, err := num("target_rate"); err == nil && r.ReqPerSec < minAnsweredShare*float64(target) {
		return wrkResult{}, fmt.Errorf("answered %s of the %s req/s asked for: the target or the machine could not keep up",
			fmtRate(r.ReqPerSec), fmtCount(target))
	}
	return r, nil
}

// maxRateLatencyUs bounds a latency read from llmload, in µs (an hour: no
// run lasts that long), so that it converts to a time.Duration unharmed.
const maxRateLatencyUs = int64(time.Hour / time.Microsecond)

// minAnsweredShare is the share of a constant-rate run's requests per
// second that must be answered for its latencies to count.
const minAnsweredShare = 0.95

// parseBulk reads the key=value summary of one `tcpload bulk` run: bytes
// (that the sink confirmed), seconds, throughput (bytes/s), errors
// (connections that failed) and first_error. A request is a byte: Requests
// is the bytes, ReqPerSec the bytes per second and P50 the run's duration.
func parseBulk(out []byte) (wrkResult, error) {
	kv, err := parseKV(out)
	if err != nil {
		return wrkResult{}, err
	}
	var r wrkResult
	for _, f := range []struct {
		key string
		dst *int64
	}{{"bytes", &r.Requests}, {"errors", &r.SocketErrors}} {
		v, ok := kv[f.key]
		if !ok {
			return wrkResult{}, fmt.Errorf("no %s", f.key)
		}
		if *f.dst, err = parseCount(v); err != nil {
			return wrkResult{}, fmt.Errorf("%s: %w", f.key, err)
		}
	}
	for _, f := range []struct {
		key string
		dst *float64
	}{{"throughput", &r.ReqPerSec}} {
		v, ok := kv[f.key]
		if !ok {
			return wrkResult{}, fmt.Errorf("no %s", f.key)
		}
		if *f.dst, err = parseNonNegFloat(v); err != nil {
			return wrkResult{}, fmt.Errorf("%s: %w", f.key, err)
		}
	}
	secs, ok := kv["seconds"]
	if !ok {
		return wrkResult{}, errors.New("no seconds")
	}
	d, err := parseNonNegFloat(secs)
	if err != nil || d > float64(time.Hour/time.Second) {
		return wrkResult{}, fmt.Errorf("seconds: %q is not a duration under an hour", secs)
	}
	r.P50 = time.Duration(d * float64(time.Second))
	r.FirstErr = kv["first_error"]
	return r, nil
}

// parseConns reads the summary of one `tcpload tls` run: the constant-rate
// keys (requests being connections), errors being failed connections.
func parseConns(out []byte) (wrkResult, error) {
	r, err := parseRate(out)
	if err != nil {
		return wrkResult{}, err
	}
	r.SocketErrors, r.Non2xx = r.Non2xx, 0
	if kv, err := parseKV(out); err == nil {
		r.FirstErr = kv["first_error"]
	}
	return r, nil
}

// parseH2load reads h2load's summary ("finished in ..., N req/s", the
// "requests:" and "status codes:" lines) and the p50_us / p99_us lines
// bench/run.sh appends from h2load's per-request log.
func parseH2load(out []byte) (wrkResult, error) {
	var (
		r                           wrkResult
		haveRate, haveReqs          bool
		haveP50, haveP99, haveCodes bool
	)
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(line, "finished in "):
			// finished in 3.00s, 41234.33 req/s, 5.12MB/s
			parts := strings.Split(line, ",")
			if len(parts) < 2 || !strings.HasSuffix(strings.TrimSpace(parts[1]), " req/s") {
				return wrkResult{}, fmt.Errorf("finished line %q", line)
			}
			v, err := parseNonNegFloat(strings.TrimSuffix(strings.TrimSpace(parts[1]), " req/s"))
			if err != nil {
				return wrkResult{}, fmt.Errorf("req/s: %w", err)
			}
			r.ReqPerSec, haveRate = v, true
		case strings.HasPrefix(line, "requests: "):
			// requests: N total, N started, N done, N succeeded, N failed, N errored, N timeout
			n, err := countsLine(strings.TrimPrefix(line, "requests: "))
			if err != nil {
				return wrkResult{}, fmt.Errorf("requests line: %w", err)
			}
			done, okDone := n["done"]
			errored, okErr := n["errored"]
			timeout, okTO := n["timeout"]
			if !okDone || !okErr || !okTO {
				return wrkResult{}, fmt.Errorf("requests line %q lacks done, errored or timeout", line)
			}
			r.Requests, r.SocketErrors, haveReqs = done, errored+timeout, true
		case strings.HasPrefix(line, "status codes: "):
			n, err := countsLine(strings.TrimPrefix(line, "status codes: "))
			if err != nil {
				return wrkResult{}, fmt.Errorf("status codes line: %w", err)
			}
			r.Non2xx, haveCodes = n["4xx"]+n["5xx"], true
		case strings.HasPrefix(line, "p50_us: "), strings.HasPrefix(line, "p99_us: "):
			key, v, _ := strings.Cut(line, ": ")
			us, err := parseCount(v)
			if err != nil || us > maxRateLatencyUs {
				return wrkResult{}, fmt.Errorf("%s: %q", key, v)
			}
			if key == "p50_us" {
				r.P50, haveP50 = time.Duration(us)*time.Microsecond, true
			} else {
				r.P99, haveP99 = time.Duration(us)*time.Microsecond, true
			}
		}
	}
	if err := sc.Err(); err != nil {
		return wrkResult{}, fmt.Errorf("reading h2load output: %w", err)
	}
	var missing []string
	for _, m := range []struct {
		ok   bool
		name string
	}{{haveRate, "req/s"}, {haveReqs, "request counts"}, {haveCodes, "status codes"}, {haveP50, "p50_us"}, {haveP99, "p99_us"}} {
		if !m.ok {
			missing = append(missing, m.name)
		}
	}
	if len(missing) > 0 {
		return wrkResult{}, fmt.Errorf("not h2load output with percentiles: missing %s", strings.Join(missing, ", "))
	}
	return r, nil
}

// countsLine reads "N name, N name, ..." into name -> N.
func countsLine(s string) (map[string]int64, error) {
	out := map[string]int64{}
	for _, item := range strings.Split(s, ",") {
		f := strings.Fields(item)
		if len(f) != 2 {
			return nil, fmt.Errorf("bad item %q", strings.TrimSpace(item))
		}
		n, err := parseCount(f[0])
		if err != nil {
			return nil, err
		}
		out[f[1]] = n
	}
	return out, nil
}

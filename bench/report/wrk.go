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

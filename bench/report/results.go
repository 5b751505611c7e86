package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"
)

// Target names, in report order. They match the names bench/run.sh uses.
const (
	targetDirect  = "direct"
	targetGateway = "gateway"
	// targetNginx is nginx with its default response buffering,
	// targetNginxNobuf the same with proxy_buffering off.
	targetNginx      = "nginx"
	targetNginxNobuf = "nginx-nobuf"
	targetHAProxy    = "haproxy"
	// targetFastHTTP is bench/fastproxy, a bare fasthttp reverse proxy: the
	// reference for what the gateway's own stack costs by itself.
	targetFastHTTP = "fasthttp"
	// targetGatewayPlain is the LLM case's baseline: a plain route of the
	// gateway process to the emulated provider, taking the same request as
	// the LLM route without its LLM work. It is a route, not a process: it
	// has no targets/NAME.txt of its own (see processOf).
	targetGatewayPlain = "gateway-plain"
	// targetGatewayPolicy is the policy case's route: a bind of the gateway
	// process to the plain route's upstream behind jwtAuth, authorization
	// and localRateLimit. A route, like targetGatewayPlain (see processOf).
	targetGatewayPolicy = "gateway-policy"
	// targetHAProxySplice is a second TCP frontend of the HAProxy process,
	// splicing both directions ("option splice-request", "option
	// splice-response"; the TCP throughput case only). A frontend,
	// not a process (see processOf).
	targetHAProxySplice = "haproxy-splice"
)

var targets = []string{targetDirect, targetGateway, targetNginx, targetNginxNobuf, targetHAProxy, targetFastHTTP}

// proxies are the targets that sit between wrk and the upstream.
var proxies = []string{targetGateway, targetNginx, targetNginxNobuf, targetHAProxy, targetFastHTTP}

// benchCase is one load shape. IDs match the wrk file names run.sh writes.
type benchCase struct {
	id    string
	title string
	short string // for goal rows
	conns int
}

const latencyCase = "small-c1"

const smallCase = "small-c50"

var cases = []benchCase{
	{id: smallCase, title: "Small body (100 B), 50 connections", short: "small, 50 conns", conns: 50},
	{id: "1m-c10", title: "1 MiB body, 10 connections", short: "1 MiB, 10 conns", conns: 10},
	{id: latencyCase, title: "Small body (100 B), 1 connection (latency)", short: "small, 1 conn", conns: 1},
}

// The LLM case: chat completions against an emulated provider, through
// nginx (no LLM work) and the gateway's LLM route. llmRateCase runs at a
// constant rate (llmload, open loop); the others are wrk runs.
const (
	llmLatencyCase = "llm-c1"
	llmRateCase    = "llm-rate"
	llmLoadCase    = "llm-c50"
)

var llmCases = []benchCase{
	{id: llmLatencyCase, title: "1 connection", short: "LLM, 1 conn", conns: 1},
	{id: llmRateCase, title: "constant rate", short: "LLM, constant rate"},
	{id: llmLoadCase, title: "50 connections", short: "LLM, 50 conns", conns: 50},
}

var llmTargets = []string{targetDirect, targetGateway, targetGatewayPlain, targetNginx}

// The policy case: the small GET at 50 connections through the gateway's
// plain route (targetGateway) and its policy route, alternating round by
// round, no direct.
const policyCase = "policy-c50"

var policyCases = []benchCase{
	{id: policyCase, title: "Policy route", short: "policy route, 50 conns", conns: 50},
}

var policyTargets = []string{targetGateway, targetGatewayPolicy}

// The connection layer: TCP throughput and TLS passthrough connections
// (direct, the gateway, HAProxy), HTTPS and h2 termination (the gateway,
// nginx).
const (
	tcpCase   = "tcp-bulk"
	tlsCase   = "tls-conn"
	httpsCase = "https-c50"
	h2Case    = "h2"
)

var l4Cases = []benchCase{
	{id: tcpCase, title: "TCP throughput", short: "TCP throughput"},
	{id: tlsCase, title: "TLS passthrough, new connections", short: "TLS passthrough"},
	{id: httpsCase, title: "HTTPS termination", short: "HTTPS, 50 conns", conns: 50},
	{id: h2Case, title: "HTTP/2 termination", short: "h2"},
}

var (
	tcpTargets   = []string{targetDirect, targetGateway, targetHAProxy, targetHAProxySplice}
	tlsTargets   = []string{targetDirect, targetGateway, targetHAProxy}
	httpsTargets = []string{targetGateway, targetNginx}
)

// allCases are the plain cases, the policy case, the LLM ones, then the
// connection layer's.
func allCases() []benchCase {
	return slices.Concat(cases, policyCases, llmCases, l4Cases)
}

// caseTargets are the targets that may have a run in case c.
func caseTargets(c benchCase) []string {
	is := func(cs []benchCase) bool {
		return slices.ContainsFunc(cs, func(l benchCase) bool { return l.id == c.id })
	}
	switch {
	case is(llmCases):
		return llmTargets
	case is(policyCases):
		return policyTargets
	case c.id == tcpCase:
		return tcpTargets
	case c.id == tlsCase:
		return tlsTargets
	case c.id == httpsCase || c.id == h2Case:
		return httpsTargets
	}
	return targets
}

// kindOf is how case c's load runs are read and ranked.
func kindOf(id string) runKind {
	switch id {
	case llmRateCase:
		return rateRuns
	case tcpCase:
		return bulkRuns
	case tlsCase:
		return connRuns
	case h2Case:
		return h2Runs
	}
	return wrkRuns
}

// processOf is the target whose process serves t, and whose targets/NAME.txt
// (status, memory, access log) is t's: the gateway's for its plain and
// policy routes, HAProxy's for its splicing frontend.
func processOf(t string) string {
	switch t {
	case targetGatewayPlain, targetGatewayPolicy:
		return targetGateway
	case targetHAProxySplice:
		return targetHAProxy
	}
	return t
}

// optInt is an integer that may be absent.
type optInt struct {
	v  int64
	ok bool
}

// targetInfo is what run.sh recorded about one target (targets/NAME.txt).
type targetInfo struct {
	status         string // ok, failed or skipped; "" if never recorded
	note           string
	rssIdleKiB     optInt
	rssOpenedKiB   optInt // right after the idle connections opened
	rssConnsKiB    optInt // once they were held idle for idle_hold
	rssPeakKiB     optInt
	connsOpened    optInt
	connsOpenAtEnd optInt
	// With access logs on: the lines the target's access log held at the
	// end, and the requests the load generators completed against it.
	accessLogLines optInt
	requestsSent   optInt
}

// run is one target's measurement in one case: a parsed result, or why there
// is none. Measured in rounds, res is the round with the median req/s.
type run struct {
	res wrkResult
	err string // "" when res is valid
	// unserved says why the case does not apply to the target (the
	// gateway without HTTP/2 in the h2 case): neither a result nor a
	// failure.
	unserved string
	otherCPU optInt // CPU used by other processes meanwhile, % of one CPU (the most of any round)
	// cpuPerReq is the target's own CPU time per completed request in µs
	// (its process tree's user and system time; direct's is the upstream's),
	// 0 when not measured; over rounds, the median of the rounds'.
	cpuPerReq float64
	// rounds is how many rounds res is the median of (1: a single run);
	// minRPS and maxRPS are the range of req/s over them.
	rounds         int
	minRPS, maxRPS float64
	// Measured in rounds, res.P99 is the median of the rounds' p99s (one
	// round's p99 rests on 1 % of its requests and swings from round to
	// round far more than its req/s); minP99 and maxP99 are their range.
	minP99, maxP99 time.Duration
	// roundRPS is req/s by round, in round order (nil for a single run).
	roundRPS []float64
}

// results is everything one bench run left in its output directory.
type results struct {
	meta    map[string]string
	targets map[string]targetInfo
	runs    map[string]map[string]run // case ID -> target -> run
}

// loadResults reads the directory layout bench/run.sh writes:
//
//	meta.txt                 key=value facts about the machine and run
//	targets/NAME.txt         key=value: status, note, rss_*_kib, conns_*
//	wrk/CASE.TARGET.txt      raw wrk --latency output
//	wrk/CASE.TARGET.err      why that run has no output
//	wrk/CASE.TARGET.load     other_cpu_pct=N: CPU other processes used meanwhile;
//	                         target_cpu_us=N: CPU time the target used meanwhile
//	wrk/CASE.TARGET.unserved why the case does not apply to the target
//
// or, measured in rounds, the same three files per round as
// wrk/CASE.TARGET.rN.{txt,err,load} with N from 1.
func loadResults(dir string) (*results, error) {
	r := &results{targets: map[string]targetInfo{}, runs: map[string]map[string]run{}}
	meta, err := readKVFile(filepath.Join(dir, "meta.txt"))
	if err != nil {
		return nil, err
	}
	r.meta = meta
	for _, t := range targets {
		info, err := loadTarget(filepath.Join(dir, "targets", t+".txt"))
		if err != nil {
			return nil, err
		}
		r.targets[t] = info
	}
	for _, c := range allCases() {
		r.runs[c.id] = map[string]run{}
		kind := kindOf(c.id)
		for _, t := range caseTargets(c) {
			base := filepath.Join(dir, "wrk", c.id+"."+t)
			rn, ok, err := loadRounds(base, kind)
			if err != nil {
				return nil, err
			}
			if ok {
				r.runs[c.id][t] = rn
			}
		}
	}
	return r, nil
}

func loadTarget(path string) (targetInfo, error) {
	kv, err := readKVFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return targetInfo{}, nil
	}
	if err != nil {
		return targetInfo{}, err
	}
	info := targetInfo{status: kv["status"], note: kv["note"]}
	for key, dst := range map[string]*optInt{
		"rss_idle_kib":      &info.rssIdleKiB,
		"rss_opened_kib":    &info.rssOpenedKiB,
		"rss_conns_kib":     &info.rssConnsKiB,
		"rss_peak_kib":      &info.rssPeakKiB,
		"conns_opened":      &info.connsOpened,
		"conns_open_at_end": &info.connsOpenAtEnd,
		"access_log_lines":  &info.accessLogLines,
		"requests_sent":     &info.requestsSent,
	} {
		s, ok := kv[key]
		if !ok || s == "" {
			continue
		}
		n, err := parseCount(s)
		if err != nil {
			return targetInfo{}, fmt.Errorf("%s: %s: %w", path, key, err)
		}
		*dst = optInt{v: n, ok: true}
	}
	return info, nil
}

// runKind is how one kind of load run is read and ranked.
type runKind struct {
	parse func([]byte) (wrkResult, error)
	// rank orders a case's rounds; the median round by it stands for them.
	rank func(wrkResult) float64
}

var (
	// wrkRuns are wrk's closed-loop runs, ranked by req/s.
	wrkRuns = runKind{parse: parseWrk, rank: func(r wrkResult) float64 { return r.ReqPerSec }}
	// rateRuns are constant-rate runs (bench/llmload), whose req/s is set
	// by the load generator, ranked by p50.
	rateRuns = runKind{parse: parseRate, rank: func(r wrkResult) float64 { return float64(r.P50) }}
	// bulkRuns are `tcpload bulk` runs: a request is a byte, ranked by
	// throughput.
	bulkRuns = runKind{parse: parseBulk, rank: func(r wrkResult) float64 { return r.ReqPerSec }}
	// connRuns are `tcpload tls` runs: a request is a connection, ranked
	// by connections per second.
	connRuns = runKind{parse: parseConns, rank: func(r wrkResult) float64 { return r.ReqPerSec }}
	// h2Runs are h2load runs, ranked by req/s.
	h2Runs = runKind{parse: parseH2load, rank: func(r wrkResult) float64 { return r.ReqPerSec }}
)

// loadRounds reads a target's runs in one case: base itself, or its rounds
// base.r1, base.r2, ... A failed round fails the whole; otherwise the median
// round by kind.rank stands for them (the upper of the two middle ones for
// an even count).
func loadRounds(base string, kind runKind) (run, bool, error) {
	if msg, err := os.ReadFile(base + ".unserved"); err == nil {
		s := oneLine(string(msg))
		if s == "" {
			s = "not served by this build"
		}
		return run{unserved: s}, true, nil
	}
	if rn, ok := loadRun(base, kind); ok {
		var err error
		rn.rounds = 1
		rn.minRPS, rn.maxRPS = rn.res.ReqPerSec, rn.res.ReqPerSec
		err = loadLoad(base+".load", &rn)
		return rn, true, err
	}
	var rounds []run
	for i := 1; ; i++ {
		rb := fmt.Sprintf("%s.r%d", base, i)
		rn, ok := loadRun(rb, kind)
		if !ok {
			break
		}
		if err := loadLoad(rb+".load", &rn); err != nil {
			return run{}, false, err
		}
		rounds = append(rounds, rn)
	}
	if len(rounds) == 0 {
		return run{}, false, nil
	}
	var busiest optInt
	for i, rn := range rounds {
		if rn.otherCPU.ok && (!busiest.ok || rn.otherCPU.v > busiest.v) {
			busiest = rn.otherCPU
		}
		if rn.err != "" {
			rn.err = fmt.Sprintf("round %d: %s", i+1, rn.err)
			rn.otherCPU = busiest
			return rn, true, nil
		}
	}
	byRound := make([]float64, len(rounds))
	for i, rn := range rounds {
		byRound[i] = rn.res.ReqPerSec
	}
	sort.Slice(rounds, func(i, j int) bool { return kind.rank(rounds[i].res) < kind.rank(rounds[j].res) })
	med := rounds[len(rounds)/2]
	med.otherCPU = busiest
	med.rounds = len(rounds)
	med.minRPS, med.maxRPS = slices.Min(byRound), slices.Max(byRound)
	med.roundRPS = byRound
	p99s := make([]time.Duration, len(rounds))
	for i, rn := range rounds {
		p99s[i] = rn.res.P99
	}
	sort.Slice(p99s, func(i, j int) bool { return p99s[i] < p99s[j] })
	med.res.P99, med.minP99, med.maxP99 = p99s[len(p99s)/2], p99s[0], p99s[len(p99s)-1]
	var cpus []float64
	for _, rn := range rounds {
		if rn.cpuPerReq > 0 {
			cpus = append(cpus, rn.cpuPerReq)
		}
	}
	med.cpuPerReq = 0
	if len(cpus) > 0 {
		sort.Float64s(cpus)
		med.cpuPerReq = cpus[len(cpus)/2]
	}
	return med, true, nil
}

// pairedRatios divides a's req/s by b's round by round: targets of one round
// run back to back, so the machine's drift mostly cancels. ok is false
// without rounds on both sides.
func pairedRatios(a, b run) (median, lo, hi float64, ok bool) {
	if len(a.roundRPS) < 2 || len(a.roundRPS) != len(b.roundRPS) {
		return 0, 0, 0, false
	}
	ratios := make([]float64, 0, len(a.roundRPS))
	for i, x := range a.roundRPS {
		if b.roundRPS[i] > 0 {
			ratios = append(ratios, x/b.roundRPS[i])
		}
	}
	if len(ratios) == 0 {
		return 0, 0, 0, false
	}
	sort.Float64s(ratios)
	return ratios[len(ratios)/2], ratios[0], ratios[len(ratios)-1], true
}

// loadRun reads base.txt (the load generator's output) or base.err; ok is
// false when neither exists, i.e. the run was not attempted.
func loadRun(base string, kind runKind) (run, bool) {
	if out, err := os.ReadFile(base + ".txt"); err == nil {
		res, perr := kind.parse(out)
		if perr != nil {
			return run{err: perr.Error()}, true
		}
		if res.Requests == 0 {
			return run{err: "no request completed"}, true
		}
		return run{res: res}, true
	}
	if msg, err := os.ReadFile(base + ".err"); err == nil {
		s := strings.TrimSpace(string(msg))
		if s == "" {
			s = "failed"
		}
		return run{err: s}, true
	}
	return run{}, false
}

// loadLoad reads a run's .load file into rn: the other processes' load and
// the target's CPU per request. A missing file or key means unknown.
func loadLoad(path string, rn *run) error {
	kv, err := readKVFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, key := range []string{"other_cpu_pct", "target_cpu_us"} {
		v, ok := kv[key]
		if !ok || v == "" {
			continue
		}
		n, err := parseCount(v)
		if err != nil {
			return fmt.Errorf("%s: %s: %w", path, key, err)
		}
		switch key {
		case "other_cpu_pct":
			rn.otherCPU = optInt{v: n, ok: true}
		case "target_cpu_us":
			if rn.err == "" && rn.res.Requests > 0 {
				rn.cpuPerReq = float64(n) / float64(rn.res.Requests)
			}
		}
	}
	return nil
}

func readKVFile(path string) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	kv, err := parseKV(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return kv, nil
}

// parseKV reads key=value lines. Blank lines and lines starting with # are
// skipped; the value is everything after the first '='.
func parseKV(b []byte) (map[string]string, error) {
	kv := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimRight(sc.Text(), "\r")
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key, val, ok := strings.Cut(line, "=")
		key = strings.TrimSpace(key)
		if !ok || key == "" || strings.ContainsAny(key, " \t") {
			return nil, fmt.Errorf("line %d: want key=value, got %q", n, line)
		}
		if _, dup := kv[key]; dup {
			return nil, fmt.Errorf("line %d: duplicate key %q", n, key)
		}
		kv[key] = val
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return kv, nil
}

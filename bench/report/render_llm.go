package main

import (
	"fmt"
	"strings"
	"time"
)

// accessLogMethod is the Method bullet that says how each target logs.
func accessLogMethod(mode string) string {
	switch mode {
	case "on":
		return "- Access logs: **on** for every target, each writing one line per request to a file in the run's temp dir, " +
			"buffered (`BENCH_ACCESS_LOG=off` turns them all off). nginx (both): `access_log FILE combined buffer=64k flush=1s`, " +
			"its default format, buffered as its docs advise for busy servers. HAProxy: `option httplog` (its default HTTP format; " +
			"`option tcplog` on its TCP frontends, a line per connection) " +
			"as syslog over UDP on loopback (`log 127.0.0.1:PORT local0`: one datagram per request, never blocking), received by `bench/logsink` " +
			"on the proxy's CPU (a 16 MiB socket buffer, capped by `net.core.rmem_max`), which appends the lines to the file through a 64 KiB buffer flushed every second; " +
			"its CPU time counts as HAProxy's (HAProxy's docs warn that logging to a file \"will significantly slow HAProxy down\"). " +
			"Gateway: its default access log (text, one line per request with method, path, status, duration, route, backend, bytes, " +
			"client address, and the LLM fields; a line per forwarded TCP or TLS connection) on standard error, redirected to the file, buffered by the gateway (256 KiB, flushed every second). " +
			"Bare fasthttp proxy: a combined-format line per request through a 64 KiB `bufio.Writer` flushed every second.\n"
	case "off":
		return "- Access logs: **off** for every target (`BENCH_ACCESS_LOG=off`): nginx `access_log off`, HAProxy no log target, " +
			"the gateway `logging.level: info,access=off`, the bare fasthttp proxy without `-access-log`.\n"
	}
	return "- Access logs: not recorded for this run.\n"
}

// renderAccessLogs shows, with logs on, that every target logged every
// request: lines written against requests completed.
func (r *results) renderAccessLogs(b *strings.Builder) {
	if r.meta["access_log"] != "on" {
		return
	}
	b.WriteString("\n### Access logs\n\n| target | lines written | requests completed by the load generators | lines per request |\n|---|---:|---:|---:|\n")
	for _, t := range proxies {
		info := r.targets[t]
		lines, sent, per := "—", "—", "—"
		if info.accessLogLines.ok {
			lines = fmtCount(info.accessLogLines.v)
		}
		if info.requestsSent.ok {
			sent = fmtCount(info.requestsSent.v)
		}
		if info.accessLogLines.ok && info.requestsSent.ok && info.requestsSent.v > 0 {
			per = fmt.Sprintf("%.3f", float64(info.accessLogLines.v)/float64(info.requestsSent.v))
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s |\n", targetLabels[t], lines, sent, per)
	}
	b.WriteString("\nCounted once the targets stopped (each flushes its buffer on SIGTERM). Requests completed: every measured and " +
		"warm-up run of wrk and llmload, every connection of tcpload's TCP and TLS passthrough runs (one line each), plus one per " +
		"connection of the idle-connection test; the probes that check each target " +
		"forwards correctly add a few lines more, and HAProxy logs a line for a connection closed without a request. " +
		"Below 1.000, lines were lost (HAProxy drops a log datagram rather than wait when the receiver's socket buffer is full).\n")
}

// renderLLM writes the LLM case: latency at 1 connection and at a constant
// rate, added over direct, and req/s at 50 connections.
func (r *results) renderLLM(b *strings.Builder) {
	if !r.anyRun(llmCases) {
		return
	}
	rate := r.llmRate()
	b.WriteString("\n### LLM: chat completions, 1 KB prompt\n\n")
	b.WriteString("`bench/llmupstream` plays an OpenAI provider that answers at once: `POST /v1/chat/completions` gets a fixed " +
		"308-byte chat completion with usage, after the key is checked. Every request is `bench/llm/request.json` " +
		"(958 bytes, model `fast`, one e-mail address in the prompt). *direct*: straight to the provider. *nginx*: `proxy_pass` " +
		"to it, no LLM work. *gateway*: the LLM route of `bench/gateway.yaml`, an `ai` backend (OpenAI, `hostOverride` the " +
		"provider, `backendAuth` key) with `modelAliases {fast: gpt-4o-mini}`, `defaults {temperature: 0.2}` and a prompt " +
		"guard masking e-mail addresses, access log as above. *gateway, plain route*: the same gateway process, another bind of " +
		"`bench/gateway.yaml` with a plain route to the provider and no LLM work, the client's own key passing through as through " +
		"nginx: the LLM route's baseline with the same request. Before measuring, `bench/llmload check` sends one request through each " +
		"and reads what reached the provider: through the LLM route the model must be `gpt-4o-mini`, the temperature 0.2, the " +
		"address masked, the key the backend's; through the others the body as sent. " +
		"*Added*: the target's p50 (p99) minus direct's, each the median over the rounds.\n")

	r.renderLLMLatency(b, llmLatencyCase, "#### 1 connection (wrk)", "req/s")
	r.renderLLMLatency(b, llmRateCase, fmt.Sprintf("#### Constant rate, %s req/s (llmload: vegeta as a library, open loop; "+
		"wrk2 is not packaged by Debian)", rate), "answered req/s")
	r.renderLLMLoad(b)

	b.WriteString("\nFor scale, published figures, not measured here: the best added p99 at concurrency 1 is 107 µs (LiteLLM's Rust build), " +
		"agentgateway 186 µs, Bifrost 939 µs (onthebench, July 2026, Graviton, 4 cores).\n")
}

// renderLLMLatency is the table of one LLM latency case with added p50 and
// p99 over direct.
func (r *results) renderLLMLatency(b *strings.Builder, caseID, title, rateName string) {
	fmt.Fprintf(b, "\n%s\n\n| target | %s | p50 | p99 | added p50 | added p99 | CPU per request | errors | other CPU load |\n"+
		"|---|---:|---:|---:|---:|---:|---:|---:|---:|\n", title, rateName)
	for _, t := range llmTargets {
		cells := r.llmCells(caseID, t)
		added50, added99 := "—", "—"
		if t != targetDirect {
			if d, ok := r.added(caseID, t, p50Of); ok {
				added50 = fmtSignedLatency(d)
			}
			if d, ok := r.added(caseID, t, p99Of); ok {
				added99 = fmtSignedLatency(d)
			}
		}
		row := append(cells[:4:4], added50, added99)
		row = append(row, cells[4:]...)
		fmt.Fprintf(b, "| %s |\n", strings.Join(row, " | "))
	}
	if p50, p99, ok := r.llmWork(caseID); ok {
		fmt.Fprintf(b, "\nThe LLM work (the gateway's LLM route minus its plain route, same process and request): p50 %s, p99 %s.\n",
			fmtSignedLatency(p50), fmtSignedLatency(p99))
	}
}

// llmWork is what the LLM work adds in one case: the gateway's LLM route's
// p50 and p99 minus its plain route's. The two differ in that work alone,
// so this is its latency, unmixed with the cost of carrying the request.
func (r *results) llmWork(caseID string) (p50, p99 time.Duration, ok bool) {
	llm, okLLM := r.valid(caseID, targetGateway)
	plain, okPlain := r.valid(caseID, targetGatewayPlain)
	if !okLLM || !okPlain {
		return 0, 0, false
	}
	return llm.P50 - plain.P50, llm.P99 - plain.P99, true
}

// renderLLMLoad is the 50-connection LLM table, with the gateway's LLM
// route against nginx and against its own plain route, and its rate against
// both of the gateway's plain-proxy rates: the same request's (the goal's)
// and the small GET's (informational).
func (r *results) renderLLMLoad(b *strings.Builder) {
	b.WriteString("\n#### 50 connections (wrk)\n\n| target | req/s | p50 | p99 | CPU per request | errors | other CPU load |\n" +
		"|---|---:|---:|---:|---:|---:|---:|\n")
	for _, t := range llmTargets {
		fmt.Fprintf(b, "| %s |\n", strings.Join(r.llmCells(llmLoadCase, t), " | "))
	}
	var ratios []string
	for _, p := range []struct{ a, b, name string }{
		{targetGateway, targetNginx, "gateway (LLM route)/nginx"},
		{targetGateway, targetGatewayPlain, "gateway (LLM route)/gateway, plain route"},
		{targetGatewayPlain, targetNginx, "gateway, plain route/nginx"},
	} {
		if s, ok := r.ratio(llmLoadCase, p.a, p.b, p.name); ok {
			ratios = append(ratios, s)
		}
	}
	var sentences []string
	if len(ratios) > 0 {
		sentences = append(sentences, strings.Join(ratios, "; ")+".")
	}
	var shares []string
	if ratio, plain, ok := r.llmRateOver(llmLoadCase, targetGatewayPlain); ok {
		shares = append(shares, fmt.Sprintf("%s of its plain route's req/s with the same request (%s; the goal's baseline)",
			fmtRatio(ratio), fmtRate(plain)))
	}
	if ratio, plain, ok := r.llmRateOver(smallCase, targetGateway); ok {
		shares = append(shares, fmt.Sprintf("%s of its plain-proxy req/s of the small GET (100 B response, no request body, "+
			"50 connections: %s; informational, as it mixes the LLM work with the cost of carrying a 1 KB POST)",
			fmtRatio(ratio), fmtRate(plain)))
	}
	if len(shares) > 0 {
		sentences = append(sentences, "The gateway's LLM route at "+strings.Join(shares, ", and at ")+".")
	}
	if len(sentences) > 0 {
		fmt.Fprintf(b, "\n%s\n", strings.Join(sentences, " "))
	}
}

// llmRateOver divides the gateway's LLM route's req/s at 50 connections by
// a plain route's req/s (plainTarget's in caseID), and returns the latter
// too: gateway-plain in llmLoadCase is the same request, the gateway in
// smallCase the small GET.
func (r *results) llmRateOver(caseID, plainTarget string) (ratio, plainRPS float64, ok bool) {
	llm, okLLM := r.valid(llmLoadCase, targetGateway)
	plain, okPlain := r.valid(caseID, plainTarget)
	if !okLLM || !okPlain || plain.ReqPerSec <= 0 {
		return 0, 0, false
	}
	return llm.ReqPerSec / plain.ReqPerSec, plain.ReqPerSec, true
}

// llmCells are a target's cells in an LLM case: label, req/s (with range),
// p50, p99 (with range), CPU per request, errors, other CPU load.
func (r *results) llmCells(caseID, t string) []string {
	label := targetLabels[t]
	if t == targetGateway {
		label = "gateway (LLM route)"
	}
	cells := []string{label, "—", "—", "—", "—", "—", "—"}
	rn, ran := r.runs[caseID][t]
	switch {
	case !ran:
		cells[1] = "not run"
	case rn.err != "":
		cells[1] = "failed"
	default:
		cells[1], cells[2], cells[3] = fmtRate(rn.res.ReqPerSec), fmtLatency(rn.res.P50), fmtLatency(rn.res.P99)
		if rn.rounds > 1 {
			cells[1] += fmt.Sprintf(" (%s–%s)", fmtRate(rn.minRPS), fmtRate(rn.maxRPS))
			cells[3] += fmt.Sprintf(" (%s–%s)", fmtLatency(rn.minP99), fmtLatency(rn.maxP99))
		}
		if rn.cpuPerReq > 0 {
			cells[4] = fmtCPU(rn.cpuPerReq)
		}
		cells[5] = fmtCount(rn.res.Errors())
	}
	if ran && rn.otherCPU.ok {
		cells[6] = fmt.Sprintf("%d%%", rn.otherCPU.v)
	}
	return cells
}

func p50Of(r wrkResult) time.Duration { return r.P50 }
func p99Of(r wrkResult) time.Duration { return r.P99 }

// added is a percentile of target minus the same of direct in one case.
func (r *results) added(caseID, target string, pct func(wrkResult) time.Duration) (time.Duration, bool) {
	t, ok1 := r.valid(caseID, target)
	d, ok2 := r.valid(caseID, targetDirect)
	if !ok1 || !ok2 {
		return 0, false
	}
	return pct(t) - pct(d), true
}

// llmRate is the constant rate of the LLM case, as run.sh recorded it.
func (r *results) llmRate() string {
	if v := strings.TrimSpace(r.meta["llm_rate"]); v != "" {
		if n, err := parseCount(v); err == nil {
			return fmtCount(n)
		}
		return v
	}
	return "?"
}

// anyRun reports whether any target has a run in any of cs.
func (r *results) anyRun(cs []benchCase) bool {
	for _, c := range cs {
		if len(r.runs[c.id]) > 0 {
			return true
		}
	}
	return false
}

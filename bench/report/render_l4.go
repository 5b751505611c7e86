package main

import (
	"fmt"
	"strings"
)

// The connection layer's goals (the issue's): TCP throughput at least
// HAProxy's and within 10 % of the direct copy; TLS passthrough connections
// per second at least HAProxy's; HTTPS and h2 req/s at least nginx's, HTTPS
// p99 at most 1.2x nginx's.
const minTCPDirectShare = 0.9

// l4Labels name the targets in the connection layer's tables where they
// differ from targetLabels.
var l4Labels = map[string]string{
	targetHAProxySplice: "HAProxy, spliced",
}

func l4Label(t string) string {
	if l, ok := l4Labels[t]; ok {
		return l
	}
	return targetLabels[t]
}

const gib = 1 << 30

// fmtGiBps formats bytes per second as GiB/s.
func fmtGiBps(bps float64) string { return fmt.Sprintf("%.2f GiB/s", bps/gib) }

// fmtCPUPerGiB formats CPU time per byte, given in µs, per GiB.
func fmtCPUPerGiB(usPerByte float64) string {
	ms := usPerByte * gib / 1000
	if ms >= 1000 {
		return fmt.Sprintf("%.2f s", ms/1000)
	}
	return fmt.Sprintf("%.0f ms", ms)
}

// renderConnectionLayer writes the TCP, TLS passthrough, HTTPS and h2
// cases, each only if it ran.
func (r *results) renderConnectionLayer(b *strings.Builder) {
	if !r.anyRun(l4Cases) {
		return
	}
	m := func(key, def string) string {
		if v := strings.TrimSpace(r.meta[key]); v != "" {
			return v
		}
		return def
	}
	b.WriteString("\n### Connection layer\n\n")
	b.WriteString("Pinned as above: each proxy on its CPU with one worker, the load generator on the other, the upstream beside the proxy. " +
		"The TCP and TLS passthrough cases' upstream is `bench/tcpsink`; with access logs on, the gateway writes a line per " +
		"forwarded connection and HAProxy's TCP frontends one too (`option tcplog`). The HTTPS and h2 cases reach the plain " +
		"cases' upstream and log every request as above; their certificate is one ECDSA P-256 pair `bench/certgen` makes for each run, served by " +
		"every TLS endpoint.\n")

	if r.anyRun(l4Cases[:1]) {
		fmt.Fprintf(b, "\n#### TCP throughput: %s over %s connections\n\n", fmtBytes(m("tcp_bytes", "?")), m("tcp_conns", "?"))
		b.WriteString("`bench/tcpload bulk` writes the bytes as fast as it can (256 KiB writes), half-closes, and waits for the sink's " +
			"count of what it read: a round lasts from the first dial to the last count, and fails if a count differs. *direct*: " +
			"straight to the sink (no proxy). *gateway*: a `protocol: TCP` listener with one tcpRoute. *HAProxy*: `mode tcp`, " +
			"its defaults (no kernel splicing); *HAProxy, spliced*: a second frontend of the same process with `option splice-request` and `option splice-response` " +
			"(kernel splicing both ways; HAProxy's `option splice-auto` spliced nothing here). " +
			"*CPU per GiB*: the target's own CPU time (its process tree) per GiB moved; direct's is the sink's.\n\n")
		b.WriteString("| target | throughput | duration | CPU per GiB | errors | other CPU load |\n|---|---:|---:|---:|---:|---:|\n")
		for _, t := range tcpTargets {
			cells := r.l4Cells(tcpCase, t, func(rn run) []string {
				thr := fmtGiBps(rn.res.ReqPerSec)
				if rn.rounds > 1 {
					thr += fmt.Sprintf(" (%.2f–%.2f)", rn.minRPS/gib, rn.maxRPS/gib)
				}
				cpu := "—"
				if rn.cpuPerReq > 0 {
					cpu = fmtCPUPerGiB(rn.cpuPerReq)
				}
				return []string{thr, fmtLatency(rn.res.P50), cpu}
			})
			fmt.Fprintf(b, "| %s |\n", strings.Join(cells, " | "))
		}
		r.l4Ratios(b, tcpCase, "throughput", "CPU per GiB", [][2]string{
			{targetGateway, targetHAProxy}, {targetGateway, targetHAProxySplice}, {targetGateway, targetDirect},
		})
	}

	if r.anyRun(l4Cases[1:2]) {
		fmt.Fprintf(b, "\n#### TLS passthrough: new connections per second, %s workers\n\n", m("tls_conns", "?"))
		b.WriteString("`bench/tcpload tls`: each worker opens one connection after another for the round's duration: a full TLS 1.3 " +
			"handshake with the upstream through the proxy (X25519, no session resumption, the certificate verified for the server " +
			"name), one `GET /` with `Connection: close`, the 2-byte answer read to its end, close. The upstream is crypto/tls " +
			"(session tickets off), the load generator too. *gateway*: a `protocol: TLS` listener without a tls block (passthrough), " +
			"its tcpRoute matching the server name. *HAProxy*: `mode tcp`, `tcp-request inspect-delay 5s`, `tcp-request content " +
			"accept if { req_ssl_hello_type 1 }`, `use_backend` on `req_ssl_sni`, as its docs route TLS by SNI. p50 and p99: " +
			"a connection's time from dial to close. Both ends' handshake crypto runs on the two CPUs beside the proxy and costs " +
			"several times its relay, so the connection rates of the proxies differ less than their own costs do: " +
			"*CPU per connection* (the proxy's process tree; direct's: the upstream's) is the proxy's own work.\n\n")
		b.WriteString("| target | connections/s | p50 | p99 | CPU per connection | errors | other CPU load |\n|---|---:|---:|---:|---:|---:|---:|\n")
		for _, t := range tlsTargets {
			cells := r.l4Cells(tlsCase, t, rateCells)
			fmt.Fprintf(b, "| %s |\n", strings.Join(cells, " | "))
		}
		r.l4Ratios(b, tlsCase, "connections/s", "CPU per connection", [][2]string{{targetGateway, targetHAProxy}, {targetGateway, targetDirect}})
	}

	if r.anyRun(l4Cases[2:3]) {
		fmt.Fprintf(b, "\n#### HTTPS termination: %s keep-alive connections, small body (100 B)\n\n", m("https_conns", "?"))
		b.WriteString("`wrk -t1 -cN --latency https://…/small` (OpenSSL, TLS 1.3, no ALPN: HTTP/1.1), every connection kept alive " +
			"for the round. *gateway*: a `protocol: HTTPS` listener (crypto/tls defaults) with the plain route. *nginx*: a " +
			"`listen … ssl` server block, `ssl_protocols TLSv1.2 TLSv1.3`, `ssl_session_cache shared:SSL:10m` as its docs advise, " +
			"the plain cases' proxying. No direct: the upstream speaks plain HTTP.\n\n")
		b.WriteString("| target | req/s | p50 | p99 | CPU per request | errors | other CPU load |\n|---|---:|---:|---:|---:|---:|---:|\n")
		for _, t := range httpsTargets {
			fmt.Fprintf(b, "| %s |\n", strings.Join(r.l4Cells(httpsCase, t, rateCells), " | "))
		}
		r.l4Ratios(b, httpsCase, "req/s", "CPU per request", [][2]string{{targetGateway, targetNginx}})
		r.negotiated(b, "https")
	}

	if r.anyRun(l4Cases[3:4]) {
		fmt.Fprintf(b, "\n#### HTTP/2 termination: h2load, %s connections × %s streams\n\n", m("h2_conns", "?"), m("h2_streams", "?"))
		fmt.Fprintf(b, "`h2load -t1 -c%s -m%s -D <duration> https://…/small` (OpenSSL, ALPN h2): %s connections, each with up to %s "+
			"requests in flight. p50 and p99 from h2load's per-request log. *gateway*: its HTTPS listener offered h2 by ALPN. *nginx*: a "+
			"`listen … ssl http2` server block, otherwise as in the HTTPS case. A target that does not negotiate h2 is *not served by "+
			"this build*: no failure, and no goal.\n\n", m("h2_conns", "?"), m("h2_streams", "?"), m("h2_conns", "?"), m("h2_streams", "?"))
		b.WriteString("| target | req/s | p50 | p99 | CPU per request | errors | other CPU load |\n|---|---:|---:|---:|---:|---:|---:|\n")
		for _, t := range httpsTargets {
			fmt.Fprintf(b, "| %s |\n", strings.Join(r.l4Cells(h2Case, t, rateCells), " | "))
		}
		r.l4Ratios(b, h2Case, "req/s", "CPU per request", [][2]string{{targetGateway, targetNginx}})
		r.negotiated(b, "h2")
	}
}

// rateCells are the rate, p50 and p99 cells of a run, with their ranges,
// and CPU per unit of work.
func rateCells(rn run) []string {
	rate, p99 := fmtRate(rn.res.ReqPerSec), fmtLatency(rn.res.P99)
	if rn.rounds > 1 {
		rate += fmt.Sprintf(" (%s–%s)", fmtRate(rn.minRPS), fmtRate(rn.maxRPS))
		p99 += fmt.Sprintf(" (%s–%s)", fmtLatency(rn.minP99), fmtLatency(rn.maxP99))
	}
	cpu := "—"
	if rn.cpuPerReq > 0 {
		cpu = fmtCPU(rn.cpuPerReq)
	}
	return []string{rate, fmtLatency(rn.res.P50), p99, cpu}
}

// l4Cells are a target's cells in a connection-layer case: label, the
// measures cells gives (three or four), errors, other CPU load.
func (r *results) l4Cells(caseID, t string, cells func(run) []string) []string {
	n := len(cells(run{}))
	out := []string{l4Label(t)}
	rn, ran := r.runs[caseID][t]
	switch {
	case !ran:
		out = append(out, "not run")
	case rn.unserved != "":
		out = append(out, "not served by this build")
	case rn.err != "":
		out = append(out, "failed")
	default:
		out = append(out, cells(rn)...)
		out = append(out, fmtCount(rn.res.Errors()))
	}
	for len(out) < n+2 {
		out = append(out, "—")
	}
	other := "—"
	if ran && rn.otherCPU.ok {
		other = fmt.Sprintf("%d%%", rn.otherCPU.v)
	}
	return append(out, other)
}

// l4Ratios writes a sentence of ratios of pairs of targets in one case:
// the rate, CPU per unit of work, and the rate round by round.
func (r *results) l4Ratios(b *strings.Builder, caseID, rateName, cpuName string, pairs [][2]string) {
	var parts []string
	for _, p := range pairs {
		x, okA := r.valid(caseID, p[0])
		y, okB := r.valid(caseID, p[1])
		if !okA || !okB || y.ReqPerSec == 0 {
			continue
		}
		s := fmt.Sprintf("%s/%s: %s %s", l4Label(p[0]), l4Label(p[1]), rateName, fmtRatio(x.ReqPerSec/y.ReqPerSec))
		if y.P99 > 0 && x.P99 > 0 {
			s += ", p99 " + fmtRatio(float64(x.P99)/float64(y.P99))
		}
		runA, runB := r.runs[caseID][p[0]], r.runs[caseID][p[1]]
		if runA.cpuPerReq > 0 && runB.cpuPerReq > 0 {
			s += fmt.Sprintf(", %s %s", cpuName, fmtRatio(runA.cpuPerReq/runB.cpuPerReq))
		}
		if med, lo, hi, ok := pairedRatios(runA, runB); ok {
			s += fmt.Sprintf(" (%s round by round: median %s, %s–%s)", rateName, fmtRatio(med), fmtRatio(lo), fmtRatio(hi))
		}
		parts = append(parts, s)
	}
	if len(parts) > 0 {
		fmt.Fprintf(b, "\n%s.\n", strings.Join(parts, "; "))
	}
}

// negotiated writes what OpenSSL's client (wrk's and h2load's library)
// negotiated with each target, as run.sh recorded it.
func (r *results) negotiated(b *strings.Builder, group string) {
	var parts []string
	for _, t := range httpsTargets {
		if v := strings.TrimSpace(r.meta["tls_params."+group+"."+t]); v != "" {
			parts = append(parts, fmt.Sprintf("%s: %s", l4Label(t), escapeCell(v)))
		}
	}
	if len(parts) > 0 {
		fmt.Fprintf(b, "\nNegotiated with `openssl s_client` (the library of the load generator): %s.\n", strings.Join(parts, "; "))
	}
}

// fmtBytes writes a byte count from meta as GiB or MiB where exact.
func fmtBytes(s string) string {
	n, err := parseCount(s)
	switch {
	case err != nil:
		return s + " bytes"
	case n > 0 && n%gib == 0:
		return fmt.Sprintf("%d GiB", n/gib)
	case n > 0 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n/(1<<20))
	}
	return fmtCount(n) + " bytes"
}

// evaluateL4Goals checks the connection layer's goals.
func (r *results) evaluateL4Goals() []goal {
	var goals []goal
	tcpShort := ""
	if by, conns := strings.TrimSpace(r.meta["tcp_bytes"]), strings.TrimSpace(r.meta["tcp_conns"]); by != "" && conns != "" {
		tcpShort = fmt.Sprintf(" (%s, %s conns)", fmtBytes(by), conns)
	}
	httpsShort := ""
	if c := strings.TrimSpace(r.meta["https_conns"]); c != "" {
		httpsShort = fmt.Sprintf(" (%s conns)", c)
	}
	rateGoal := func(name, caseID, other string, share float64, format func(float64) string) goal {
		g := goal{name: name, status: goalNotMeasured}
		if rn := r.runs[caseID][targetGateway]; rn.unserved != "" {
			g.measured = "not served by this build"
			return g
		}
		gw, okGW := r.valid(caseID, targetGateway)
		o, okO := r.valid(caseID, other)
		if okGW && okO && o.ReqPerSec > 0 {
			ratio := gw.ReqPerSec / o.ReqPerSec
			g.measured = fmt.Sprintf("%s vs %s (%s)", format(gw.ReqPerSec), format(o.ReqPerSec), fmtRatio(ratio))
			g.status = metIf(ratio >= share)
		}
		return g
	}
	goals = append(goals,
		rateGoal("TCP throughput ≥ HAProxy's"+tcpShort, tcpCase, targetHAProxy, 1, fmtGiBps),
		rateGoal(fmt.Sprintf("TCP throughput ≥ %.1f× the direct copy%s", minTCPDirectShare, tcpShort), tcpCase, targetDirect,
			minTCPDirectShare, fmtGiBps))
	splice := rateGoal("TCP throughput vs HAProxy splicing"+tcpShort, tcpCase, targetHAProxySplice, 1, fmtGiBps)
	if splice.status != goalNotMeasured {
		splice.status = goalInfo
	}
	goals = append(goals, splice,
		rateGoal("TLS passthrough connections/s ≥ HAProxy's", tlsCase, targetHAProxy, 1, fmtRate),
		rateGoal("HTTPS req/s ≥ nginx"+httpsShort, httpsCase, targetNginx, 1, fmtRate))
	p99 := goal{name: fmt.Sprintf("HTTPS p99 ≤ %.1f× nginx%s", maxP99Ratio, httpsShort), status: goalNotMeasured}
	gw, okGW := r.valid(httpsCase, targetGateway)
	ng, okNg := r.valid(httpsCase, targetNginx)
	if okGW && okNg && ng.P99 > 0 {
		ratio := float64(gw.P99) / float64(ng.P99)
		p99.measured = fmt.Sprintf("%s vs %s (%s)", fmtLatency(gw.P99), fmtLatency(ng.P99), fmtRatio(ratio))
		p99.status = metIf(ratio <= maxP99Ratio)
	}
	h2Short := ""
	if c, m := strings.TrimSpace(r.meta["h2_conns"]), strings.TrimSpace(r.meta["h2_streams"]); c != "" && m != "" {
		h2Short = fmt.Sprintf(" (%s conns × %s streams)", c, m)
	}
	return append(goals, p99, rateGoal("h2 req/s ≥ nginx"+h2Short, h2Case, targetNginx, 1, fmtRate))
}

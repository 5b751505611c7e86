package main

import (
	"fmt"
	"time"
)

// Goal thresholds for the gateway.
const (
	maxP99Ratio       = 1.2
	maxIdleRSSKiB     = 40 << 10  // 40 MiB
	maxConnsRSSKiB    = 200 << 10 // 200 MiB
	goalIdleConnCount = 10000
	// The LLM route: added latency at most 1.2× what nginx adds (at p50
	// and p99), and at least 0.9× the gateway's own plain-proxy req/s.
	maxLLMAddedRatio   = 1.2
	minLLMPlainRPSRate = 0.9
)

// Goal outcomes. goalInfo marks a row that is no goal, shown beside the
// goals to be read with them.
const (
	goalMet         = "met"
	goalNotMet      = "**not met**"
	goalNotMeasured = "not measured"
	goalInfo        = "informational"
)

// goal is one row of the Goals table.
type goal struct {
	name     string
	measured string
	status   string
}

// evaluateGoals checks the gateway against nginx and the absolute memory
// bounds. A goal whose inputs are missing or invalid is "not measured".
func (r *results) evaluateGoals() []goal {
	var goals []goal
	for _, c := range cases {
		gw, gwOK := r.valid(c.id, targetGateway)
		ng, ngOK := r.valid(c.id, targetNginx)
		rate := goal{name: fmt.Sprintf("req/s ≥ nginx (%s)", c.short), status: goalNotMeasured}
		p99 := goal{name: fmt.Sprintf("p99 ≤ %.1f× nginx (%s)", maxP99Ratio, c.short), status: goalNotMeasured}
		if gwOK && ngOK && ng.ReqPerSec > 0 && ng.P99 > 0 {
			ratio := gw.ReqPerSec / ng.ReqPerSec
			rate.measured = fmt.Sprintf("%s vs %s (%s)", fmtRate(gw.ReqPerSec), fmtRate(ng.ReqPerSec), fmtRatio(ratio))
			rate.status = metIf(gw.ReqPerSec >= ng.ReqPerSec)
			pr := float64(gw.P99) / float64(ng.P99)
			p99.measured = fmt.Sprintf("%s vs %s (%s)", fmtLatency(gw.P99), fmtLatency(ng.P99), fmtRatio(pr))
			p99.status = metIf(pr <= maxP99Ratio)
		}
		goals = append(goals, rate, p99)
	}

	added := goal{name: "added p50 at 1 conn ≤ nginx's", status: goalNotMeasured}
	gwAdd, gwOK := r.addedP50(targetGateway)
	ngAdd, ngOK := r.addedP50(targetNginx)
	if gwOK && ngOK {
		added.measured = fmt.Sprintf("%s vs %s", fmtSignedLatency(gwAdd), fmtSignedLatency(ngAdd))
		added.status = metIf(gwAdd <= ngAdd)
	}
	goals = append(goals, added)

	info := r.targets[targetGateway]
	idle := goal{name: "RSS idle < 40 MiB", status: goalNotMeasured}
	if info.rssIdleKiB.ok {
		idle.measured = fmtMiB(info.rssIdleKiB.v)
		idle.status = metIf(info.rssIdleKiB.v < maxIdleRSSKiB)
	}
	goals = append(goals, idle)

	conns := goal{name: "RSS with 10k idle conns < 200 MiB", status: goalNotMeasured}
	if info.rssConnsKiB.ok && info.connsOpened.ok {
		conns.measured = fmt.Sprintf("%s with %s conns", fmtMiB(info.rssConnsKiB.v), fmtCount(info.connsOpened.v))
		switch {
		case info.connsOpened.v < goalIdleConnCount:
			conns.measured += " (fewer than 10,000 held)"
			if info.rssConnsKiB.v >= maxConnsRSSKiB {
				conns.status = goalNotMet
			}
		case info.connsOpenAtEnd.ok && info.connsOpenAtEnd.v < info.connsOpened.v:
			conns.measured += fmt.Sprintf(" (gateway closed %s of them)", fmtCount(info.connsOpened.v-info.connsOpenAtEnd.v))
			conns.status = goalNotMet
		default:
			conns.status = metIf(info.rssConnsKiB.v < maxConnsRSSKiB)
		}
	}
	goals = append(goals, conns, r.evaluatePolicyGoal())
	goals = append(goals, r.evaluateLLMGoals()...)
	return append(goals, r.evaluateL4Goals()...)
}

// evaluateLLMGoals checks the gateway's LLM route: its added latency
// against nginx's in the 1-connection and constant-rate runs, and its req/s
// at 50 connections against its own plain route's with the same request.
// Informational rows follow: the req/s against the small GET's plain rate
// (the goal's baseline before the plain route took the same request), and
// the latency the LLM work adds over the plain route.
func (r *results) evaluateLLMGoals() []goal {
	var goals []goal
	for _, c := range []struct{ id, short string }{
		{llmLatencyCase, "1 conn"},
		{llmRateCase, r.llmRate() + " req/s"},
	} {
		for _, p := range []struct {
			name string
			of   func(wrkResult) time.Duration
		}{{"p50", p50Of}, {"p99", p99Of}} {
			g := goal{name: fmt.Sprintf("LLM added %s ≤ %.1f× nginx's (%s)", p.name, maxLLMAddedRatio, c.short), status: goalNotMeasured}
			gw, okGW := r.added(c.id, targetGateway, p.of)
			ng, okNg := r.added(c.id, targetNginx, p.of)
			switch {
			case !okGW || !okNg:
			case ng <= 0:
				// Below the noise: no ratio to compare with.
				g.measured = fmt.Sprintf("%s vs %s (nginx adds nothing measurable)", fmtSignedLatency(gw), fmtSignedLatency(ng))
			default:
				ratio := float64(gw) / float64(ng)
				g.measured = fmt.Sprintf("%s vs %s (%s)", fmtSignedLatency(gw), fmtSignedLatency(ng), fmtRatio(ratio))
				g.status = metIf(ratio <= maxLLMAddedRatio)
			}
			goals = append(goals, g)
		}
	}
	rate := goal{name: fmt.Sprintf("LLM req/s ≥ %.1f× the gateway's plain-proxy req/s, same request (50 conns)", minLLMPlainRPSRate),
		status: goalNotMeasured}
	if ratio, plain, ok := r.llmRateOver(llmLoadCase, targetGatewayPlain); ok {
		rate.measured = r.llmRateMeasured(ratio, plain)
		rate.status = metIf(ratio >= minLLMPlainRPSRate)
	}
	small := goal{name: "LLM req/s vs the gateway's plain-proxy req/s, small GET (50 conns)",
		status: goalNotMeasured}
	if ratio, plain, ok := r.llmRateOver(smallCase, targetGateway); ok {
		small.measured = r.llmRateMeasured(ratio, plain)
		small.status = goalInfo
	}
	goals = append(goals, rate, small)
	for _, c := range []struct{ id, short string }{
		{llmLatencyCase, "1 conn"},
		{llmRateCase, r.llmRate() + " req/s"},
	} {
		work := goal{name: fmt.Sprintf("LLM work's added p50 / p99: LLM route − plain route (%s)", c.short), status: goalNotMeasured}
		if p50, p99, ok := r.llmWork(c.id); ok {
			work.measured = fmt.Sprintf("%s / %s", fmtSignedLatency(p50), fmtSignedLatency(p99))
			work.status = goalInfo
		}
		goals = append(goals, work)
	}
	return goals
}

// llmRateMeasured is the measured cell of an LLM req/s row: the LLM route's
// rate against a plain one.
func (r *results) llmRateMeasured(ratio, plainRPS float64) string {
	llm, _ := r.valid(llmLoadCase, targetGateway)
	return fmt.Sprintf("%s vs %s (%s)", fmtRate(llm.ReqPerSec), fmtRate(plainRPS), fmtRatio(ratio))
}

// valid returns the result of a run that completed without errors.
func (r *results) valid(caseID, target string) (wrkResult, bool) {
	rn, ok := r.runs[caseID][target]
	if !ok || rn.err != "" || rn.unserved != "" || rn.res.Errors() > 0 {
		return wrkResult{}, false
	}
	return rn.res, true
}

// addedP50 is target's p50 minus direct's p50 in the 1-connection case.
func (r *results) addedP50(target string) (time.Duration, bool) {
	t, ok1 := r.valid(latencyCase, target)
	d, ok2 := r.valid(latencyCase, targetDirect)
	if !ok1 || !ok2 {
		return 0, false
	}
	return t.P50 - d.P50, true
}

func metIf(ok bool) string {
	if ok {
		return goalMet
	}
	return goalNotMet
}

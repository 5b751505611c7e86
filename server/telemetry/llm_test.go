package telemetry

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	dto "github.com/prometheus/client_model/go"
)

// chat is a successful streamed chat exchange; tests change what they need.
func chat() LLMObservation {
	return LLMObservation{
		Operation:         "chat",
		Provider:          "openai",
		RequestModel:      "gpt-4o",
		ResponseModel:     "gpt-4o-2024-08-06",
		Route:             "default/llm",
		Backend:           "openai",
		InputTokens:       1200,
		OutputTokens:      101,
		CachedInputTokens: 1024,
		Duration:          1500 * time.Millisecond,
		TimeToFirstToken:  500 * time.Millisecond,
		Cost:              0.0042,
	}
}

// chatLabels are the labels every family but health gives chat().
var chatLabels = map[string]string{
	"gen_ai_operation_name": "chat",
	"gen_ai_provider_name":  "openai",
	"gen_ai_request_model":  "gpt-4o",
	"gen_ai_response_model": "gpt-4o-2024-08-06",
	"route":                 "default/llm",
	"backend":               "openai",
}

func with(base map[string]string, kv ...string) map[string]string {
	out := make(map[string]string, len(base)+len(kv)/2)
	for k, v := range base {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i]] = kv[i+1]
	}
	return out
}

// histogramOf returns the histogram of the series of fam with exactly
// labels, or nil.
func histogramOf(fams map[string]*dto.MetricFamily, fam string, labels map[string]string) *dto.Histogram {
	if m := exactly(fams, fam, labels); m != nil {
		return m.GetHistogram()
	}
	return nil
}

// exactly returns the metric of fam whose label set is exactly labels.
func exactly(fams map[string]*dto.MetricFamily, fam string, labels map[string]string) *dto.Metric {
next:
	for _, m := range fams[fam].GetMetric() {
		if len(m.GetLabel()) != len(labels) {
			continue
		}
		for _, lp := range m.GetLabel() {
			if v, ok := labels[lp.GetName()]; !ok || v != lp.GetValue() {
				continue next
			}
		}
		return m
	}
	return nil
}

func TestLLMObserve(t *testing.T) {
	type want struct {
		fam    string
		labels map[string]string
		count  uint64  // histograms: observations; 0 means the series must be absent
		sum    float64 // histograms: the sum; counters and gauges: the value
	}
	tests := []struct {
		desc string
		obs  []func(*LLMObservation)
		want []want
	}{
		{
			desc: "streamed success records every family",
			obs:  []func(*LLMObservation){nil},
			want: []want{
				{famLLMTokenUsage, with(chatLabels, "gen_ai_token_type", "input"), 1, 1200},
				{famLLMTokenUsage, with(chatLabels, "gen_ai_token_type", "output"), 1, 101},
				{famLLMTokenUsage, with(chatLabels, "gen_ai_token_type", "input_cache_read"), 1, 1024},
				{famLLMRequestDuration, chatLabels, 1, 1.5},
				{famLLMTimeToFirstToken, chatLabels, 1, 0.5},
				// (1.5 s - 0.5 s) / (101 - 1) tokens
				{famLLMTimePerOutputTok, chatLabels, 1, 0.01},
				{famLLMCost, chatLabels, 0, 0.0042},
			},
		},
		{
			desc: "a failure carries error_type on the duration only, and no stream timings",
			obs: []func(*LLMObservation){func(o *LLMObservation) {
				o.ErrorType = "429"
				o.OutputTokens, o.CachedInputTokens = 0, 0
				o.Cost = math.NaN()
			}},
			want: []want{
				{famLLMRequestDuration, with(chatLabels, "error_type", "429"), 1, 1.5},
				{famLLMRequestDuration, chatLabels, 0, 0},
				{famLLMTokenUsage, with(chatLabels, "gen_ai_token_type", "input"), 1, 1200},
				{famLLMTokenUsage, with(chatLabels, "gen_ai_token_type", "output"), 0, 0},
				{famLLMTimeToFirstToken, chatLabels, 0, 0},
				{famLLMTimePerOutputTok, chatLabels, 0, 0},
			},
		},
		{
			desc: "not a stream: no first-token or per-token time",
			obs: []func(*LLMObservation){func(o *LLMObservation) {
				o.TimeToFirstToken = 0
			}},
			want: []want{
				{famLLMRequestDuration, chatLabels, 1, 1.5},
				{famLLMTimeToFirstToken, chatLabels, 0, 0},
				{famLLMTimePerOutputTok, chatLabels, 0, 0},
			},
		},
		{
			desc: "one output token: first-token time but no per-token time",
			obs: []func(*LLMObservation){func(o *LLMObservation) {
				o.OutputTokens = 1
			}},
			want: []want{
				{famLLMTimeToFirstToken, chatLabels, 1, 0.5},
				{famLLMTimePerOutputTok, chatLabels, 0, 0},
			},
		},
		{
			desc: "unknown token counts and costs are not recorded",
			obs: []func(*LLMObservation){
				func(o *LLMObservation) { o.InputTokens, o.OutputTokens, o.CachedInputTokens, o.Cost = -1, -1, -1, -1 },
				func(o *LLMObservation) {
					o.InputTokens, o.OutputTokens, o.CachedInputTokens, o.Cost = 0, 0, 0, math.Inf(1)
				},
			},
			want: []want{
				{famLLMTokenUsage, with(chatLabels, "gen_ai_token_type", "input"), 0, 0},
				{famLLMTokenUsage, with(chatLabels, "gen_ai_token_type", "output"), 0, 0},
				{famLLMTokenUsage, with(chatLabels, "gen_ai_token_type", "input_cache_read"), 0, 0},
				{famLLMRequestDuration, chatLabels, 2, 3},
			},
		},
		{
			desc: "costs add up, and a zero cost creates the series",
			obs: []func(*LLMObservation){
				func(o *LLMObservation) { o.Cost = 0 },
				func(o *LLMObservation) { o.Cost = 0.25; o.RequestModel = "m2" },
				func(o *LLMObservation) { o.Cost = 0.5; o.RequestModel = "m2" },
			},
			want: []want{
				{famLLMCost, chatLabels, 0, 0},
				{famLLMCost, with(chatLabels, "gen_ai_request_model", "m2"), 0, 0.75},
			},
		},
		{
			desc: "empty labels are exposed as unknown",
			obs: []func(*LLMObservation){func(o *LLMObservation) {
				o.ResponseModel, o.Backend = "", ""
			}},
			want: []want{
				{famLLMRequestDuration, with(chatLabels, "gen_ai_response_model", "unknown", "backend", "unknown"), 1, 1.5},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			r := NewRegistry()
			m := r.LLM()
			for _, edit := range tc.obs {
				o := chat()
				if edit != nil {
					edit(&o)
				}
				m.Observe(&o)
			}
			fams := scrape(t, r)
			for _, w := range tc.want {
				metric := exactly(fams, w.fam, w.labels)
				isHistogram := w.fam != famLLMCost
				switch {
				case isHistogram && w.count == 0:
					if metric != nil {
						t.Errorf("%s%v present, want absent", w.fam, w.labels)
					}
				case metric == nil:
					t.Errorf("%s%v missing", w.fam, w.labels)
				case isHistogram:
					h := metric.GetHistogram()
					if h.GetSampleCount() != w.count || math.Abs(h.GetSampleSum()-w.sum) > 1e-9 {
						t.Errorf("%s%v = count %d sum %v, want %d, %v", w.fam, w.labels, h.GetSampleCount(), h.GetSampleSum(), w.count, w.sum)
					}
				default:
					if got := metric.GetCounter().GetValue(); math.Abs(got-w.sum) > 1e-12 {
						t.Errorf("%s%v = %v, want %v", w.fam, w.labels, got, w.sum)
					}
				}
			}
		})
	}
}

// TestLLMBuckets: each histogram has the conventions' bounds, and an
// observation on a bound counts in that bound's bucket.
func TestLLMBuckets(t *testing.T) {
	tests := []struct {
		desc   string
		fam    string
		bounds []float64
		edit   func(*LLMObservation)
		le     float64 // the smallest bucket the observation counts in
	}{
		{"tokens on a bound", famLLMTokenUsage, tokenBuckets, func(o *LLMObservation) { o.InputTokens = 1024 }, 1024},
		{"tokens above a bound", famLLMTokenUsage, tokenBuckets, func(o *LLMObservation) { o.InputTokens = 1025 }, 4096},
		{"one token", famLLMTokenUsage, tokenBuckets, func(o *LLMObservation) { o.InputTokens = 1 }, 1},
		{"tokens beyond the last bound", famLLMTokenUsage, tokenBuckets, func(o *LLMObservation) { o.InputTokens = 1 << 27 }, math.Inf(1)},
		{"duration on a bound", famLLMRequestDuration, llmDurationBuckets, func(o *LLMObservation) { o.Duration = 640 * time.Millisecond }, 0.64},
		{"duration just above", famLLMRequestDuration, llmDurationBuckets, func(o *LLMObservation) { o.Duration = 640*time.Millisecond + 1 }, 1.28},
		{"negative duration counts as zero", famLLMRequestDuration, llmDurationBuckets, func(o *LLMObservation) { o.Duration = -time.Second }, 0.01},
		{"first token", famLLMTimeToFirstToken, firstTokenBuckets, func(o *LLMObservation) { o.TimeToFirstToken = 60 * time.Millisecond }, 0.06},
		{"per output token", famLLMTimePerOutputTok, perOutputTokenBuckets, func(o *LLMObservation) {
			o.TimeToFirstToken, o.Duration, o.OutputTokens = time.Millisecond, 301*time.Millisecond, 1001 // 0.3 ms a token
		}, 0.001},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			r := NewRegistry()
			o := chat()
			tc.edit(&o)
			r.LLM().Observe(&o)
			labels := chatLabels
			if tc.fam == famLLMTokenUsage {
				labels = with(chatLabels, "gen_ai_token_type", "input")
			}
			h := histogramOf(scrape(t, r), tc.fam, labels)
			if h == nil {
				t.Fatalf("%s%v missing", tc.fam, labels)
			}
			bs := h.GetBucket()
			if len(bs) != len(tc.bounds)+1 {
				t.Fatalf("%d buckets, want %d", len(bs), len(tc.bounds)+1)
			}
			for i, b := range bs {
				wantLE := math.Inf(1)
				if i < len(tc.bounds) {
					wantLE = tc.bounds[i]
				}
				if b.GetUpperBound() != wantLE {
					t.Errorf("bucket %d: le=%v, want %v", i, b.GetUpperBound(), wantLE)
				}
				var want uint64
				if b.GetUpperBound() >= tc.le {
					want = 1
				}
				if b.GetCumulativeCount() != want {
					t.Errorf("le=%v: %d, want %d", b.GetUpperBound(), b.GetCumulativeCount(), want)
				}
			}
		})
	}
}

// TestLLMSeriesAreBounded: models a client makes up cannot grow a family
// past its bound, and long values cannot be kept.
func TestLLMSeriesAreBounded(t *testing.T) {
	r := NewRegistry()
	m := r.LLM()
	observe := func(route, model string) {
		o := chat()
		o.Route, o.RequestModel, o.ResponseModel = route, model, model
		o.TimeToFirstToken = 0
		m.Observe(&o)
	}
	for i := range maxLLMSeries {
		observe("r", "model-"+strconv.Itoa(i))
	}
	for i := range 50 { // past the bound: counted under model "other"
		observe("r", "late-"+strconv.Itoa(i))
	}
	for i := range maxLLMSeriesFolded { // new routes past the bound fill the folded sets, then one series
		observe("route-"+strconv.Itoa(i), "x")
	}
	observe("r", strings.Repeat("m", maxLLMLabelLen+1)) // a known set: too long a model is "other"

	fams := scrape(t, r)
	series := fams[famLLMRequestDuration].GetMetric()
	if n := len(series); n != maxLLMSeriesFolded+1 {
		t.Fatalf("%d duration series, want %d (the bound, then one for everything)", n, maxLLMSeriesFolded+1)
	}
	other := with(chatLabels, "route", "r", "gen_ai_request_model", "other", "gen_ai_response_model", "other")
	if h := histogramOf(fams, famLLMRequestDuration, other); h.GetSampleCount() != 51 {
		t.Errorf("route r, model other: %d observations, want 51 (50 late models and the long one)", h.GetSampleCount())
	}
	all := map[string]string{}
	for k := range chatLabels {
		all[k] = "other"
	}
	// With 1001 sets before the routes, the folded bound had room for 999
	// of them; the other 1001 share the one overflow series.
	if h := histogramOf(fams, famLLMRequestDuration, all); h.GetSampleCount() != maxLLMSeries+1 {
		t.Errorf("overflow series: %d observations, want %d", h.GetSampleCount(), maxLLMSeries+1)
	}
	for _, s := range series {
		for _, lp := range s.GetLabel() {
			if len(lp.GetValue()) > maxLLMLabelLen {
				t.Fatalf("label %s has %d bytes", lp.GetName(), len(lp.GetValue()))
			}
		}
	}
}

// TestLLMLabelsRenderedOnce: values that render the same label (invalid
// UTF-8 replaced; "" and "unknown") share a series, so the exposition
// never repeats one, which Prometheus would refuse.
func TestLLMLabelsRenderedOnce(t *testing.T) {
	r := NewRegistry()
	m := r.LLM()
	for _, model := range []string{"a\xff", "a\xfe", "a\uFFFD", "", "unknown"} {
		o := chat()
		o.RequestModel = model
		m.Observe(&o)
	}
	fams := scrape(t, r)
	tests := []struct {
		model string
		count uint64
	}{{"a\uFFFD", 3}, {"unknown", 2}}
	for _, tc := range tests {
		if h := histogramOf(fams, famLLMRequestDuration, with(chatLabels, "gen_ai_request_model", tc.model)); h.GetSampleCount() != tc.count {
			t.Errorf("model %q: %d observations, want %d", tc.model, h.GetSampleCount(), tc.count)
		}
	}
	if n := len(fams[famLLMRequestDuration].GetMetric()); n != 2 {
		t.Errorf("%d series, want 2", n)
	}
}

// TestLLMKeepsNoCallerBytes: label values may alias a request buffer that
// is reused; the series' keys must be copies.
func TestLLMKeepsNoCallerBytes(t *testing.T) {
	r := NewRegistry()
	m := r.LLM()
	buf := []byte("gpt-4o")
	o := chat()
	o.RequestModel = unsafe.String(&buf[0], len(buf))
	m.Observe(&o)
	copy(buf, "XXXXXX")
	for k := range m.exchanges.byKey {
		if k.requestModel != "gpt-4o" {
			t.Errorf("exchange key holds model %q, want a copy of gpt-4o", k.requestModel)
		}
	}
	o.RequestModel = "gpt-4o"
	m.Observe(&o)
	if h := histogramOf(scrape(t, r), famLLMRequestDuration, chatLabels); h.GetSampleCount() != 2 {
		t.Errorf("%d observations, want 2", h.GetSampleCount())
	}
}

func TestLLMProviderHealth(t *testing.T) {
	r := NewRegistry()
	m := r.LLM()
	m.SetProviderHealth("llm", "primary", true)
	m.SetProviderHealth("llm", "secondary", true)
	m.SetProviderHealth("llm", "secondary", false)
	m.ProviderEvicted("llm", "secondary")
	m.ProviderEvicted("llm", "secondary")
	m.ProviderEvicted("other", "p") // evicted without a gauge set: counter only

	fams := scrape(t, r)
	tests := []struct {
		desc   string
		fam    string
		labels map[string]string
		want   float64 // -1: absent
	}{
		{"live", famLLMProviderHealthy, map[string]string{"backend": "llm", "provider": "primary"}, 1},
		{"evicted", famLLMProviderHealthy, map[string]string{"backend": "llm", "provider": "secondary"}, 0},
		{"gauge never set", famLLMProviderHealthy, map[string]string{"backend": "other", "provider": "p"}, -1},
		{"evictions", famLLMProviderEvictions, map[string]string{"backend": "llm", "provider": "secondary"}, 2},
		{"no evictions yet", famLLMProviderEvictions, map[string]string{"backend": "llm", "provider": "primary"}, 0},
		{"evictions without gauge", famLLMProviderEvictions, map[string]string{"backend": "other", "provider": "p"}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			m := exactly(fams, tc.fam, tc.labels)
			switch {
			case tc.want < 0:
				if m != nil {
					t.Errorf("present, want absent")
				}
			case m == nil:
				t.Errorf("missing")
			default:
				got := m.GetCounter().GetValue()
				if tc.fam == famLLMProviderHealthy {
					got = m.GetGauge().GetValue()
				}
				if got != tc.want {
					t.Errorf("= %v, want %v", got, tc.want)
				}
			}
		})
	}
}

func TestLLMMetadata(t *testing.T) {
	r := goldenLLMRegistry()
	fams := scrape(t, r)
	for _, f := range llmFamilies {
		t.Run(f.name, func(t *testing.T) {
			mf := fams[f.name]
			if mf == nil {
				t.Fatal("family missing")
			}
			if mf.GetHelp() != f.help {
				t.Errorf("help = %q, want %q", mf.GetHelp(), f.help)
			}
			if got := strings.ToLower(mf.GetType().String()); got != f.typ {
				t.Errorf("type = %q, want %q", got, f.typ)
			}
		})
	}
}

func TestLLMNilAndIdle(t *testing.T) {
	var m *LLMMetrics
	o := chat()
	m.Observe(&o)
	m.SetProviderHealth("b", "p", true)
	m.ProviderEvicted("b", "p")
	r := NewRegistry()
	r.LLM().Observe(nil)
	first, second := r.LLM(), r.LLM()
	if first != second {
		t.Error("LLM returned a new handle")
	}
	if fams := scrape(t, r); len(fams) != 0 {
		t.Errorf("a registry with no LLM exchange exposes %d families", len(fams))
	}
}

// goldenLLMRegistry fills a registry with a fixed set of LLM events.
func goldenLLMRegistry() *Registry {
	r := NewRegistry()
	m := r.LLM()
	o := chat()
	m.Observe(&o)
	o.Duration, o.TimeToFirstToken, o.OutputTokens, o.Cost = 3*time.Second, 250*time.Millisecond, 12, 0.0001
	m.Observe(&o)
	failed := chat()
	failed.ErrorType, failed.OutputTokens, failed.CachedInputTokens, failed.Cost = "timeout", 0, 0, math.NaN()
	failed.Duration = 30 * time.Second
	m.Observe(&failed)
	emb := LLMObservation{
		Operation: "embeddings", Provider: "aws.bedrock", RequestModel: `amazon.titan-embed-text-v2:0 "q"`,
		Route: "default/emb", Backend: "bedrock", InputTokens: 9, Duration: 80 * time.Millisecond, Cost: 0,
	}
	m.Observe(&emb)
	m.SetProviderHealth("openai", "primary", true)
	m.SetProviderHealth("openai", "fallback", false)
	m.ProviderEvicted("openai", "fallback")
	return r
}

func TestLLMExpositionGolden(t *testing.T) {
	var buf bytes.Buffer
	goldenLLMRegistry().WritePrometheus(&buf)
	path := filepath.Join("testdata", "llm_exposition.golden")
	if *update {
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(buf.Bytes(), want) {
		t.Errorf("exposition differs from %s (run with -update if intended):\n%s", path, buf.Bytes())
	}
	scrape(t, goldenLLMRegistry())
}

func TestLLMObserveDoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	r := NewRegistry()
	m := r.LLM()
	o := chat()
	failed := chat()
	failed.ErrorType = "429"
	past := chat()
	m.Observe(&o)
	m.Observe(&failed)
	for i := range maxLLMSeriesFolded + 1 { // fill every bound
		past.Route = "r" + strconv.Itoa(i)
		m.Observe(&past)
	}
	m.SetProviderHealth("b", "p", true)
	// Models never seen, built before measuring (building them allocates).
	models := make([]string, 2000)
	for i := range models {
		models[i] = "new-" + strconv.Itoa(i)
	}
	next := 0

	tests := []struct {
		desc string
		fn   func()
	}{
		{"Observe on existing series", func() { m.Observe(&o) }},
		{"Observe a failure", func() { m.Observe(&failed) }},
		{"Observe a new label set past every bound", func() {
			past.RequestModel = models[next%len(models)]
			next++
			m.Observe(&past)
		}},
		{"SetProviderHealth", func() { m.SetProviderHealth("b", "p", false) }},
		{"ProviderEvicted", func() { m.ProviderEvicted("b", "p") }},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			if n := testing.AllocsPerRun(1000, tc.fn); n != 0 {
				t.Errorf("%v allocations per call, want 0", n)
			}
		})
	}
}

// TestLLMConcurrentUse observes, sets health and scrapes from many
// goroutines, then checks the totals. Run with -race.
func TestLLMConcurrentUse(t *testing.T) {
	const (
		workers = 8
		perWork = 1000
	)
	r := NewRegistry()
	m := r.LLM()
	stop := make(chan struct{})
	scraped := make(chan error, 1)
	go func() {
		defer close(scraped)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := parseExposition(r); err != nil {
				scraped <- err
				return
			}
		}
	}()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range perWork {
				o := chat()
				o.RequestModel = "m" + strconv.Itoa(i%7)
				if i%3 == 0 {
					o.ErrorType = "429"
				}
				o.Cost = 0.5
				m.Observe(&o)
				m.SetProviderHealth("b", "p"+strconv.Itoa(w%2), i%2 == 0)
				m.ProviderEvicted("b", "p")
			}
		})
	}
	wg.Wait()
	close(stop)
	if err := <-scraped; err != nil {
		t.Fatalf("concurrent scrape: %v", err)
	}
	fams := scrape(t, r)
	var durations, inputs uint64
	var cost float64
	for _, s := range fams[famLLMRequestDuration].GetMetric() {
		durations += s.GetHistogram().GetSampleCount()
	}
	for _, s := range fams[famLLMTokenUsage].GetMetric() {
		for _, lp := range s.GetLabel() {
			if lp.GetName() == "gen_ai_token_type" && lp.GetValue() == "input" {
				inputs += s.GetHistogram().GetSampleCount()
			}
		}
	}
	for _, s := range fams[famLLMCost].GetMetric() {
		cost += s.GetCounter().GetValue()
	}
	checks := []struct {
		desc      string
		got, want float64
	}{
		{"duration observations", float64(durations), workers * perWork},
		{"duration series (7 models, with and without error)", float64(len(fams[famLLMRequestDuration].GetMetric())), 14},
		{"input observations", float64(inputs), workers * perWork},
		{"cost", cost, 0.5 * workers * perWork},
		{"evictions", exactly(fams, famLLMProviderEvictions, map[string]string{"backend": "b", "provider": "p"}).GetCounter().GetValue(), workers * perWork},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.desc, c.got, c.want)
		}
	}
}

// FuzzLLMLabels feeds arbitrary label values through Observe and checks
// that the exposition parses and that values come back as written (after
// invalid UTF-8 is replaced and too long ones are folded).
func FuzzLLMLabels(f *testing.F) {
	f.Add("chat", "openai", "gpt-4o", "", "r", "b", "")
	f.Add(`a"b\c`, "line\nbreak", "bad\xff", "unknown", "", "路由", "429")
	f.Add("", "", strings.Repeat("m", 300), "other", "r", "b", "timeout")
	f.Fuzz(func(t *testing.T, op, provider, reqModel, respModel, route, backend, errType string) {
		r := NewRegistry()
		o := LLMObservation{
			Operation: op, Provider: provider, RequestModel: reqModel, ResponseModel: respModel,
			Route: route, Backend: backend, ErrorType: errType,
			InputTokens: 3, OutputTokens: 2, Duration: time.Second, TimeToFirstToken: time.Millisecond, Cost: 1,
		}
		r.LLM().Observe(&o)
		r.LLM().Observe(&o)
		r.LLM().SetProviderHealth(backend, provider, true)
		fams := scrape(t, r)
		norm := func(s string) string {
			switch {
			case len(s) > maxLLMLabelLen:
				return otherLabel
			case s == "":
				return unknownLabel
			}
			return strings.ToValidUTF8(s, "\uFFFD")
		}
		labels := map[string]string{
			"gen_ai_operation_name": norm(op), "gen_ai_provider_name": norm(provider),
			"gen_ai_request_model": norm(reqModel), "gen_ai_response_model": norm(respModel),
			"route": norm(route), "backend": norm(backend),
		}
		if errType != "" {
			labels["error_type"] = norm(errType)
		}
		if h := histogramOf(fams, famLLMRequestDuration, labels); h.GetSampleCount() != 2 {
			t.Fatalf("duration series %v: %d observations, want 2", labels, h.GetSampleCount())
		}
		if exactly(fams, famLLMProviderHealthy, map[string]string{"backend": norm(backend), "provider": norm(provider)}) == nil {
			t.Fatalf("health series missing")
		}
	})
}

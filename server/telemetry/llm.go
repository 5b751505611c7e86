package telemetry

import (
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// LLM metric families. The names are the OpenTelemetry GenAI semantic
// conventions' metrics (gen_ai.client.token.usage, gen_ai.server.*) turned
// into Prometheus names by the OTel rules: dots become underscores, unit
// "s" adds "_seconds", the annotation unit "{token}" adds nothing. They
// carry the package's "agentgateway_" prefix, as agentgateway's do.
const (
	famLLMTokenUsage        = "agentgateway_gen_ai_client_token_usage"
	famLLMRequestDuration   = "agentgateway_gen_ai_server_request_duration_seconds"
	famLLMTimeToFirstToken  = "agentgateway_gen_ai_server_time_to_first_token_seconds"
	famLLMTimePerOutputTok  = "agentgateway_gen_ai_server_time_per_output_token_seconds"
	famLLMCost              = "agentgateway_gen_ai_client_cost_total"
	famLLMProviderHealthy   = "agentgateway_gen_ai_provider_healthy"
	famLLMProviderEvictions = "agentgateway_gen_ai_provider_evictions_total"
)

// llmFamilies are the families' # HELP and # TYPE lines, in exposition order.
var llmFamilies = [...]family{
	{famLLMTokenUsage, "Number of tokens used per LLM exchange, by gen_ai_token_type (input, output, and input_cache_read: the part of input read from the provider's cache).", "histogram"},
	{famLLMRequestDuration, "Duration of LLM exchanges (seconds) from the request's start to the response's last byte; error_type is set on failed exchanges.", "histogram"},
	{famLLMTimeToFirstToken, "Time to the first token of successful streamed LLM responses (seconds).", "histogram"},
	{famLLMTimePerOutputTok, "Time per output token after the first of successful streamed LLM responses (seconds).", "histogram"},
	{famLLMCost, "Total cost of LLM exchanges in the model catalog's currency units.", "counter"},
	{famLLMProviderHealthy, "Whether an LLM provider of a backend is in rotation (1) or evicted (0).", "gauge"},
	{famLLMProviderEvictions, "The total number of times an LLM provider of a backend was evicted.", "counter"},
}

// Bucket bounds. The semantic conventions recommend each list; the time per
// output token list starts with 0.001 s (1,000 tokens/s) as agentgateway's
// does, since current models stream faster than the convention's first
// bound of 0.01 s.
var (
	tokenBuckets = []float64{1, 4, 16, 64, 256, 1024, 4096, 16384, 65536,
		262144, 1048576, 4194304, 16777216, 67108864}
	llmDurationBuckets = []float64{0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64,
		1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92}
	firstTokenBuckets = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08,
		0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10}
	perOutputTokenBuckets = []float64{0.001, 0.01, 0.025, 0.05, 0.075, 0.1,
		0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5}
)

var (
	tokenLayout          = newBucketLayout(tokenBuckets, 1)
	llmDurationLayout    = newBucketLayout(llmDurationBuckets, float64(time.Second))
	firstTokenLayout     = newBucketLayout(firstTokenBuckets, float64(time.Second))
	perOutputTokenLayout = newBucketLayout(perOutputTokenBuckets, float64(time.Second))
)

// Series bounds. Model names come from clients; the other labels come from
// the configuration and the gateway's own error classes, but are bounded
// the same way in case a caller passes something a client chose.
const (
	// maxLLMSeries is the number of label sets of each seriesSet that keep
	// their models. A new label set beyond it is counted with both models
	// "other".
	maxLLMSeries = 1000
	// maxLLMSeriesFolded bounds label sets including the folded ones; beyond
	// it every new label set is counted in one series labelled "other".
	maxLLMSeriesFolded = 2 * maxLLMSeries
	// maxLLMLabelLen is the longest label value kept; a longer one is
	// exposed as "other", so that a series cannot hold a huge string (the
	// MCP metrics' tool and target too).
	maxLLMLabelLen = 256
	otherLabel     = "other"
)

// LLMObservation is one finished LLM exchange. Observe reads it and keeps
// nothing of it: label values are copied when their series is created.
type LLMObservation struct {
	Operation     string // gen_ai.operation.name: "chat", "embeddings", "generate_content", ...
	Provider      string // gen_ai.provider.name: "openai", "anthropic", "aws.bedrock", "gcp.gemini", ...
	RequestModel  string // the model the client asked for
	ResponseModel string // the model the provider says answered; "" when unknown
	Route         string // the gateway's route name
	Backend       string // the gateway's backend name

	// Token counts as the provider billed them. 0 or less means unknown (or
	// none) and is not recorded: the conventions forbid reporting counts
	// that are not known. InputTokens counts every input token, those read
	// from the cache included; CachedInputTokens is that cached part (a
	// subset of InputTokens, recorded as gen_ai_token_type="input_cache_read").
	InputTokens, OutputTokens, CachedInputTokens int64

	Duration         time.Duration // from the request's start to the response's last byte
	TimeToFirstToken time.Duration // from the request's start to the first token; 0: not a stream
	ErrorType        string        // "" on success; else a short class: "429", "timeout", "upstream_reset", ...
	Cost             float64       // in the catalog's currency units; NaN or < 0: unknown, not recorded
}

// LLMMetrics records LLM exchanges and the health of LLM providers. Obtain
// it from Registry.LLM; a nil *LLMMetrics ignores observations. All methods
// are safe for concurrent use.
type LLMMetrics struct {
	// exchanges holds the series labelled without error_type: token usage,
	// the duration of successes, time to first token, time per output token
	// and cost. One lookup serves a successful exchange.
	exchanges seriesSet[exchangeSeries]
	// failures holds the durations of failed exchanges, labelled with
	// error_type.
	failures seriesSet[histogram]
	// providers holds the health series, labelled by backend and provider.
	providers seriesSet[providerSeries]
}

// LLM returns the registry's LLM metrics; every call returns the same handle.
func (r *Registry) LLM() *LLMMetrics {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.llm == nil {
		r.llm = newLLMMetrics()
	}
	return r.llm
}

func newLLMMetrics() *LLMMetrics {
	m := &LLMMetrics{}
	m.exchanges.init(exchangeLabels, foldModels, newExchangeSeries)
	m.failures.init(failureLabels, foldModels, func() *histogram { return newHistogram(llmDurationLayout) })
	m.providers.init(providerLabels, foldAll, func() *providerSeries { return new(providerSeries) })
	return m
}

// Observe records one exchange. It does not allocate once the exchange's
// label sets have a series.
//
// Recorded: token usage per known count; the request duration, with
// error_type when ErrorType is set; the time to first token and the time
// per output token ((Duration - TimeToFirstToken) / (OutputTokens - 1))
// for successful streams only, as the conventions define them for
// successful responses; the cost when it is known.
func (m *LLMMetrics) Observe(o *LLMObservation) {
	if m == nil || o == nil {
		return
	}
	k := llmLabels{
		operation:     boundLabel(o.Operation),
		provider:      boundLabel(o.Provider),
		requestModel:  boundLabel(o.RequestModel),
		responseModel: boundLabel(o.ResponseModel),
		route:         boundLabel(o.Route),
		backend:       boundLabel(o.Backend),
	}
	s := m.exchanges.get(k)
	s.observeTokens(o)
	if o.ErrorType == "" && o.TimeToFirstToken > 0 {
		s.firstToken.observe(int64(o.TimeToFirstToken))
		if o.OutputTokens > 1 && o.Duration > o.TimeToFirstToken {
			s.perOutputToken.observe(int64((o.Duration - o.TimeToFirstToken) / time.Duration(o.OutputTokens-1)))
		}
	}
	if o.Cost >= 0 && !math.IsInf(o.Cost, 1) { // NaN fails the comparison
		s.cost.add(o.Cost)
	}
	if o.ErrorType == "" {
		s.duration.observe(int64(o.Duration))
		return
	}
	k.errorType = boundLabel(o.ErrorType)
	m.failures.get(k).observe(int64(o.Duration))
}

// SetProviderHealth sets the health gauge of a backend's provider (its
// name in the backend's configuration): 1 while live, 0 while evicted.
func (m *LLMMetrics) SetProviderHealth(backend, provider string, live bool) {
	if m == nil {
		return
	}
	s := m.providers.get(llmLabels{backend: boundLabel(backend), provider: boundLabel(provider)})
	var v uint32
	if live {
		v = 1
	}
	s.health.Store(v | providerHealthSet)
}

// ProviderEvicted counts one eviction of a backend's provider.
func (m *LLMMetrics) ProviderEvicted(backend, provider string) {
	if m == nil {
		return
	}
	m.providers.get(llmLabels{backend: boundLabel(backend), provider: boundLabel(provider)}).evictions.Add(1)
}

// boundLabel keeps a label value within maxLLMLabelLen bytes.
func boundLabel(v string) string {
	if len(v) > maxLLMLabelLen {
		return otherLabel
	}
	return v
}

// llmLabels is the key of a series: comparable, so a lookup by it does not
// allocate. Each family uses the fields it is labelled with.
type llmLabels struct {
	operation, provider, requestModel, responseModel, route, backend, errorType string
}

// clone copies the values, which may alias a caller's buffer, before a
// series keeps them.
func (k llmLabels) clone() llmLabels {
	return llmLabels{
		strings.Clone(k.operation), strings.Clone(k.provider),
		strings.Clone(k.requestModel), strings.Clone(k.responseModel),
		strings.Clone(k.route), strings.Clone(k.backend), strings.Clone(k.errorType),
	}
}

// foldModels is the first overflow step of the exchange and duration
// families: the client-chosen labels become "other".
func foldModels(k llmLabels) llmLabels {
	k.requestModel, k.responseModel = otherLabel, otherLabel
	return k
}

// foldAll is the last overflow step: one series for everything else.
// A failure stays a failure (error_type "other"); a success keeps no
// error_type.
func foldAll(k llmLabels) llmLabels {
	errorType := ""
	if k.errorType != "" {
		errorType = otherLabel
	}
	return llmLabels{otherLabel, otherLabel, otherLabel, otherLabel, otherLabel, otherLabel, errorType}
}

// exchangeLabels renders the labels the conventions give every GenAI
// metric, then the gateway's own.
func exchangeLabels(k llmLabels) string {
	b := make([]byte, 0, 160)
	b = appendLabel(b, "gen_ai_operation_name", k.operation)
	b = append(b, ',')
	b = appendLabel(b, "gen_ai_provider_name", k.provider)
	b = append(b, ',')
	b = appendLabel(b, "gen_ai_request_model", k.requestModel)
	b = append(b, ',')
	b = appendLabel(b, "gen_ai_response_model", k.responseModel)
	b = append(b, ',')
	b = appendLabel(b, "route", k.route)
	b = append(b, ',')
	b = appendLabel(b, "backend", k.backend)
	return string(b)
}

// failureLabels adds error_type, which the conventions require on failed
// exchanges only: a success has no error_type label at all.
func failureLabels(k llmLabels) string {
	return string(appendLabel(append([]byte(exchangeLabels(k)), ','), "error_type", k.errorType))
}

// providerLabels renders the health series' labels.
func providerLabels(k llmLabels) string {
	b := appendLabel(nil, "backend", k.backend)
	b = append(b, ',')
	return string(appendLabel(b, "provider", k.provider))
}

// seriesSet maps label sets to series of type T, bounded as described at
// maxLLMSeries. Series are created once per label set and live as long as
// the registry. Label sets that render identically (invalid UTF-8 replaced,
// "" and "unknown") share one series, so the exposition never repeats one.
type seriesSet[T any] struct {
	mu      sync.RWMutex
	byKey   map[llmLabels]*T
	byText  map[string]*T
	ordered []labelled[T] // each series once, in creation order

	render func(llmLabels) string
	fold   func(llmLabels) llmLabels
	fresh  func() *T
}

// labelled is a series with its rendered label list (without braces).
type labelled[T any] struct {
	labels string
	s      *T
}

func (ss *seriesSet[T]) init(render func(llmLabels) string, fold func(llmLabels) llmLabels, fresh func() *T) {
	ss.byKey = make(map[llmLabels]*T)
	ss.byText = make(map[string]*T)
	ss.render, ss.fold, ss.fresh = render, fold, fresh
}

// get returns the series that counts k, creating it if needed.
func (ss *seriesSet[T]) get(k llmLabels) *T {
	ss.mu.RLock()
	s, _ := ss.lookup(k)
	ss.mu.RUnlock()
	if s != nil {
		return s
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s, k = ss.lookup(k)
	if s != nil {
		return s
	}
	k = k.clone()
	text := ss.render(k)
	if s = ss.byText[text]; s == nil {
		s = ss.fresh()
		ss.byText[text] = s
		ss.ordered = append(ss.ordered, labelled[T]{text, s})
	}
	ss.byKey[k] = s
	return s
}

// lookup finds the series k is counted in, following the overflow steps,
// and returns the key a new series would take. The caller holds mu.
func (ss *seriesSet[T]) lookup(k llmLabels) (*T, llmLabels) {
	if s := ss.byKey[k]; s != nil || len(ss.byKey) < maxLLMSeries {
		return s, k
	}
	k = ss.fold(k)
	if s := ss.byKey[k]; s != nil || len(ss.byKey) < maxLLMSeriesFolded {
		return s, k
	}
	k = foldAll(k)
	return ss.byKey[k], k
}

// sorted returns the series ordered by their labels.
func (ss *seriesSet[T]) sorted() []labelled[T] {
	ss.mu.RLock()
	out := make([]labelled[T], len(ss.ordered))
	copy(out, ss.ordered)
	ss.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].labels < out[j].labels })
	return out
}

// Token types, the values of gen_ai_token_type.
const (
	tokenInput = iota
	tokenOutput
	tokenInputCacheRead
	numTokenTypes
)

// tokenTypeNames are the label values. The conventions define "input" and
// "output" and allow custom values; "input_cache_read" is agentgateway's.
var tokenTypeNames = [numTokenTypes]string{"input", "output", "input_cache_read"}

// exchangeSeries holds the series of one label set without error_type.
type exchangeSeries struct {
	tokens         [numTokenTypes]*histogram
	duration       *histogram // of successes
	firstToken     *histogram
	perOutputToken *histogram
	cost           floatCounter
}

func newExchangeSeries() *exchangeSeries {
	s := &exchangeSeries{
		duration:       newHistogram(llmDurationLayout),
		firstToken:     newHistogram(firstTokenLayout),
		perOutputToken: newHistogram(perOutputTokenLayout),
	}
	for i := range s.tokens {
		s.tokens[i] = newHistogram(tokenLayout)
	}
	return s
}

// observeTokens records the known token counts of o.
func (s *exchangeSeries) observeTokens(o *LLMObservation) {
	for i, n := range [numTokenTypes]int64{o.InputTokens, o.OutputTokens, o.CachedInputTokens} {
		if n > 0 {
			s.tokens[i].observe(n)
		}
	}
}

// providerHealthSet marks a health value as set; the low bit is the value.
const providerHealthSet = 2

// providerSeries is the health of one provider of one backend.
type providerSeries struct {
	health    atomic.Uint32 // 0 until set, then providerHealthSet | live
	evictions atomic.Uint64
}

// floatCounter is a counter of float64 values, added without a lock.
type floatCounter struct {
	bits atomic.Uint64 // math.Float64bits of the total
	set  atomic.Bool   // added to at least once (a zero cost counts)
}

func (c *floatCounter) add(v float64) {
	for {
		old := c.bits.Load()
		if c.bits.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+v)) {
			break
		}
	}
	if !c.set.Load() {
		c.set.Store(true)
	}
}

func (c *floatCounter) value() float64 { return math.Float64frombits(c.bits.Load()) }

// bucketLayout is the bucket bounds of a histogram family.
type bucketLayout struct {
	bounds []int64  // upper bounds in the observed unit (tokens, nanoseconds)
	le     []string // the rendered bounds, then "+Inf"
	unit   float64  // observed units per exposed unit: 1 for tokens, 1e9 for seconds
}

func newBucketLayout(bounds []float64, unit float64) *bucketLayout {
	l := &bucketLayout{unit: unit}
	for _, b := range bounds {
		l.bounds = append(l.bounds, int64(math.Round(b*unit)))
		l.le = append(l.le, strconv.FormatFloat(b, 'f', -1, 64))
	}
	l.le = append(l.le, "+Inf")
	return l
}

// histogram is a fixed-bucket Prometheus histogram of integer observations
// (tokens or nanoseconds). As durationHistogram, it counts each observation
// in one bucket and accumulates at exposition, so _count always equals the
// +Inf bucket.
type histogram struct {
	layout *bucketLayout
	counts []atomic.Uint64 // one per bound, then +Inf
	sum    atomic.Uint64
}

func newHistogram(l *bucketLayout) *histogram {
	return &histogram{layout: l, counts: make([]atomic.Uint64, len(l.bounds)+1)}
}

// observe records v; a negative value counts as zero.
func (h *histogram) observe(v int64) {
	v = max(v, 0)
	i := 0
	for i < len(h.layout.bounds) && v > h.layout.bounds[i] {
		i++
	}
	h.counts[i].Add(1)
	h.sum.Add(uint64(v))
}

// count is the number of observations.
func (h *histogram) count() uint64 {
	var n uint64
	for i := range h.counts {
		n += h.counts[i].Load()
	}
	return n
}

// appendTo appends the histogram's series in the text format.
func (h *histogram) appendTo(b []byte, name, labels string) []byte {
	b, count := appendBuckets(b, name, labels, h.layout.le, h.counts)
	b = appendSample(b, name+"_sum", labels, float64(h.sum.Load())/h.layout.unit)
	return appendCount(b, name, labels, count)
}

// appendSample appends one `name{labels} value` line. Values are written
// without an exponent: token sums and costs read better as 1234567 and
// 0.000024975 than as 1.234567e+06 and 2.4975e-05.
func appendSample(b []byte, name, labels string, v float64) []byte {
	b = append(b, name...)
	b = append(b, '{')
	b = append(b, labels...)
	b = append(b, "} "...)
	b = strconv.AppendFloat(b, v, 'f', -1, 64)
	return append(b, '\n')
}

// appendLLM appends the LLM families that have series, each with its
// # HELP and # TYPE lines and its series ordered by labels.
func (r *Registry) appendLLM(b []byte) []byte {
	r.mu.Lock()
	m := r.llm
	r.mu.Unlock()
	if m == nil {
		return b
	}
	exchanges := m.exchanges.sorted()
	failures := m.failures.sorted()
	providers := m.providers.sorted()

	var tokens, firstToken, perOutputToken, requestDuration []labelledHistogram
	var cost, healthy, evictions []labelledValue
	for _, e := range exchanges {
		for i, h := range e.s.tokens {
			if h.count() > 0 {
				tokens = append(tokens, labelledHistogram{e.labels + `,gen_ai_token_type="` + tokenTypeNames[i] + `"`, h})
			}
		}
		if e.s.duration.count() > 0 {
			requestDuration = append(requestDuration, labelledHistogram{e.labels, e.s.duration})
		}
		if e.s.firstToken.count() > 0 {
			firstToken = append(firstToken, labelledHistogram{e.labels, e.s.firstToken})
		}
		if e.s.perOutputToken.count() > 0 {
			perOutputToken = append(perOutputToken, labelledHistogram{e.labels, e.s.perOutputToken})
		}
		if e.s.cost.set.Load() {
			cost = append(cost, labelledValue{e.labels, e.s.cost.value()})
		}
	}
	for _, f := range failures {
		requestDuration = append(requestDuration, labelledHistogram{f.labels, f.s})
	}
	sort.Slice(requestDuration, func(i, j int) bool { return requestDuration[i].labels < requestDuration[j].labels })
	for _, p := range providers {
		if h := p.s.health.Load(); h&providerHealthSet != 0 {
			healthy = append(healthy, labelledValue{p.labels, float64(h &^ providerHealthSet)})
		}
		evictions = append(evictions, labelledValue{p.labels, float64(p.s.evictions.Load())})
	}

	// Histogram lines are most of the text: reserve room for them at once
	// rather than growing the buffer through every doubling.
	size := 0
	for _, hs := range [...][]labelledHistogram{tokens, requestDuration, firstToken, perOutputToken} {
		for _, h := range hs {
			size += (len(h.h.counts) + 2) * (len(famLLMTimePerOutputTok) + len(h.labels) + 40)
		}
	}
	b = slices.Grow(b, size)
	b = appendHistogramFamily(b, llmFamilies[0], tokens)
	b = appendHistogramFamily(b, llmFamilies[1], requestDuration)
	b = appendHistogramFamily(b, llmFamilies[2], firstToken)
	b = appendHistogramFamily(b, llmFamilies[3], perOutputToken)
	b = appendValueFamily(b, llmFamilies[4], cost)
	b = appendValueFamily(b, llmFamilies[5], healthy)
	return appendValueFamily(b, llmFamilies[6], evictions)
}

type labelledHistogram struct {
	labels string
	h      *histogram
}

type labelledValue struct {
	labels string
	v      float64
}

func appendHistogramFamily(b []byte, f family, hs []labelledHistogram) []byte {
	if len(hs) == 0 {
		return b
	}
	b = appendMeta(b, f)
	for _, h := range hs {
		b = h.h.appendTo(b, f.name, h.labels)
	}
	return b
}

func appendValueFamily(b []byte, f family, vs []labelledValue) []byte {
	if len(vs) == 0 {
		return b
	}
	b = appendMeta(b, f)
	for _, v := range vs {
		b = appendSample(b, f.name, v.labels, v.v)
	}
	return b
}

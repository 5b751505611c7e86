package server

import (
	"context"
	"encoding/json"
	"math"
	"sort"
	"strconv"
	"time"

	"cel.dev/cel-go/cel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploggrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploghttp"
	otellog "go.opentelemetry.io/otel/log"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	"go.opentelemetry.io/otel/sdk/resource"
	"go.opentelemetry.io/otel/trace"

	"github.com/relaygate/gateway/codec/logline"
	"github.com/relaygate/gateway/config"
	"github.com/relaygate/gateway/policy"
	"github.com/relaygate/gateway/policy/celrules"
	"github.com/relaygate/gateway/pool"
)

// otlpAccessLog is frontendPolicies.accessLog.otlp at work: each access
// record the filter keeps also goes, as an OpenTelemetry log record with
// the record's fields as attributes, to an OTLP collector.
type otlpAccessLog struct {
	exp *otlpLogExporter // kept in the snapshot's lease
	// own: the record's fields are its own (otlp.fields): add and remove
	// replace accessLog's added fields; else it takes those.
	own    bool
	filter cel.Program // otlp.filter; nil: accessLog's decides
	add    []accessLogField
	remove map[string]bool
}

// compileAccessLogOTLP builds frontendPolicies.accessLog.otlp into the
// frontend's access log policy; nothing when it is not set.
func (c *compiler) compileAccessLogOTLP(f *config.File, p *accessLogPolicy) error {
	if f.FrontendPolicies == nil || f.FrontendPolicies.AccessLog == nil || f.FrontendPolicies.AccessLog.OTLP == nil || p == nil {
		return nil
	}
	const field = "frontendPolicies.accessLog.otlp"
	cfg := f.FrontendPolicies.AccessLog.OTLP
	addr, err := c.serviceAddr(cfg.Host, cfg.Backend)
	if err != nil {
		return kindError(field, err)
	}
	protocol, path := cfg.Protocol, cfg.Path
	if protocol == "" {
		protocol = "grpc"
	}
	if path == "" {
		path = "/v1/logs"
	}
	headers := cfg.Policies.Headers()
	key, err := json.Marshal([]any{addr, protocol, path, headerValues(headers)})
	if err != nil {
		return kindError(field, err)
	}
	exp, err := pool.LoadOrNew(c.lease, "otlplog\x00"+string(key), func() (*otlpLogExporter, error) {
		return newOTLPLogExporter(addr, protocol, path, headers)
	})
	if err != nil {
		return kindError(field, &policy.FieldError{Msg: "the exporter: " + err.Error()})
	}
	o := &otlpAccessLog{exp: exp}
	if cfg.Filter != nil {
		if o.filter, err = config.CompileValueExpression(string(*cfg.Filter), true); err != nil {
			return kindError(field+".filter", err)
		}
	}
	if fl := cfg.Fields; fl != nil {
		o.own = true
		for key, expr := range fl.Add {
			prog, err := config.CompileValueExpression(string(expr), false)
			if err != nil {
				return kindError(field+".fields.add."+key, err)
			}
			o.add = append(o.add, accessLogField{key: key, prog: prog})
		}
		sort.Slice(o.add, func(i, j int) bool { return o.add[i].key < o.add[j].key })
		// A removed field, and a built-in one an added field replaces,
		// are left out of the record.
		o.remove = map[string]bool{}
		for _, name := range fl.Remove {
			o.remove[name] = true
		}
		for key := range fl.Add {
			if _, ok := logline.AccessFieldNamed(key); ok {
				o.remove[key] = true
			}
		}
	}
	p.otlp = o
	return nil
}

// export sends the record a describes (its Extra, accessLog's added
// fields, already in it) unless the filter drops it. logged is what
// accessLog's filter decided; in is what the expressions see; sc is the
// request's span, if it had one.
func (o *otlpAccessLog) export(in *celrules.Input, a *logline.Access, logged bool, sc trace.SpanContext) {
	if !o.keeps(in, logged) {
		return
	}
	var omit logline.AccessFields
	if !o.own {
		// Without fields of its own, the record has the line's.
		omit = a.Omit
	}
	r := o.begin(logline.AccessMessage, o.remove, omit)
	accessAttributes(&r, a)
	o.finish(&r, in, a.Extra, sc)
}

// exportConn is export for a connection's record.
func (o *otlpAccessLog) exportConn(in *celrules.Input, c *logline.Conn, logged bool) {
	if !o.keeps(in, logged) {
		return
	}
	var omit logline.AccessFields
	if !o.own {
		omit = c.Omit
	}
	r := o.begin(logline.ConnMessage, o.remove, omit)
	connAttributes(&r, c)
	o.finish(&r, in, c.Extra, trace.SpanContext{})
}

// keeps applies otlp.filter, or accessLog's decision without one.
func (o *otlpAccessLog) keeps(in *celrules.Input, logged bool) bool {
	if o.filter != nil {
		return keeps(o.filter, in)
	}
	return logged
}

// otlpRecord is a log record being built: the attributes the record's
// settings leave out are skipped as they are added.
type otlpRecord struct {
	otellog.Record
	remove map[string]bool
	omit   logline.AccessFields
}

func (o *otlpAccessLog) begin(body string, remove map[string]bool, omit logline.AccessFields) otlpRecord {
	r := otlpRecord{remove: remove, omit: omit}
	now := time.Now()
	r.SetTimestamp(now)
	r.SetObservedTimestamp(now)
	r.SetSeverity(otellog.SeverityInfo)
	r.SetSeverityText("INFO")
	r.SetBody(attribute.StringValue(body))
	return r
}

// add adds kv unless the settings leave it out.
func (r *otlpRecord) add(kv attribute.KeyValue) {
	if r.remove[string(kv.Key)] {
		return
	}
	if f, ok := logline.AccessFieldNamed(string(kv.Key)); ok && r.omit&f != 0 {
		return
	}
	r.AddAttributes(kv)
}

// finish adds the record's own fields (otlp.fields.add) or the line's
// added ones, and the span's identity, and sends it.
func (o *otlpAccessLog) finish(r *otlpRecord, in *celrules.Input, extra []logline.AccessField, sc trace.SpanContext) {
	if o.own {
		for _, f := range o.add {
			if v, err := celrules.EvalLLM(f.prog, in, nil); err == nil {
				field := accessField(f.key, v)
				r.AddAttributes(fieldAttribute(&field))
			}
		}
	} else {
		for i := range extra {
			r.AddAttributes(fieldAttribute(&extra[i]))
		}
	}
	ctx := context.Background()
	if sc.IsValid() {
		// The SDK takes the record's trace and span from the context; the
		// attributes name them for backends that do not show those.
		ctx = trace.ContextWithSpanContext(ctx, sc)
		r.AddAttributes(attribute.String("trace.id", sc.TraceID().String()), attribute.String("span.id", sc.SpanID().String()))
	}
	o.exp.logger.Emit(ctx, r.Record)
}

// fieldAttribute is an added field as an attribute of its type (a uint
// past int64's range as text).
func fieldAttribute(f *logline.AccessField) attribute.KeyValue {
	switch f.Kind {
	case logline.AccessInt:
		return attribute.Int64(f.Key, f.Int)
	case logline.AccessUint:
		if f.Uint <= math.MaxInt64 {
			return attribute.Int64(f.Key, int64(f.Uint))
		}
		return attribute.String(f.Key, strconv.FormatUint(f.Uint, 10))
	case logline.AccessFloat:
		return attribute.Float64(f.Key, f.Float)
	case logline.AccessBool:
		return attribute.Bool(f.Key, f.Int != 0)
	}
	return attribute.String(f.Key, f.Value)
}

// accessAttributes are the fields of a request's access line.
func accessAttributes(r *otlpRecord, a *logline.Access) {
	r.add(attribute.String("method", logline.Method(a.Method)))
	r.add(attribute.String("path", string(a.Path)))
	r.add(attribute.Int("status", a.Status))
	r.add(attribute.String("duration", a.Duration.String()))
	r.add(attribute.String("route", a.Route))
	r.add(attribute.String("backend", a.Backend))
	r.add(attribute.Int64("bytes_in", int64(a.BytesIn)))
	r.add(attribute.Int64("bytes_out", int64(a.BytesOut)))
	if a.Src != nil {
		r.add(attribute.String("src", a.Src.String()))
	}
	if a.UpstreamError != nil {
		r.add(attribute.String("upstream_error", a.UpstreamError.Error()))
	}
	if m := &a.MCP; m.Method != "" {
		r.add(attribute.String("mcp.method", m.Method))
		if m.Target != "" {
			r.add(attribute.String("mcp.target", m.Target))
		}
		if m.Tool != "" {
			r.add(attribute.String("mcp.tool", m.Tool))
		}
		if m.Denied {
			r.add(attribute.Bool("mcp.denied", true))
		}
	}
	if x := &a.LLM; x.Provider != "" {
		r.add(attribute.String("llm.provider", x.Provider))
		r.add(attribute.String("llm.request_model", string(x.RequestModel)))
		r.add(attribute.String("llm.model", string(x.Model)))
		if x.HasUsage {
			r.add(attribute.Int64("llm.input_tokens", x.InputTokens))
			r.add(attribute.Int64("llm.output_tokens", x.OutputTokens))
			if x.CachedInputTokens > 0 {
				r.add(attribute.Int64("llm.cached_input_tokens", x.CachedInputTokens))
			}
		}
		if x.CostKnown {
			r.add(attribute.Float64("llm.cost", x.Cost))
		}
		if x.Guard != "" {
			r.add(attribute.String("llm.guard", x.Guard))
		}
		if x.Error != "" {
			r.add(attribute.String("llm.error", x.Error))
		}
	}
}

// connAttributes are the fields of a connection's access line.
func connAttributes(r *otlpRecord, c *logline.Conn) {
	r.add(attribute.String("protocol", c.Protocol))
	r.add(attribute.String("bind", c.Bind))
	r.add(attribute.String("listener", c.Listener))
	r.add(attribute.String("route", c.Route))
	r.add(attribute.String("backend", c.Backend))
	if c.Src != nil {
		r.add(attribute.String("src", c.Src.String()))
	}
	for _, kv := range [...][2]string{{"tls.sni", c.SNI}, {"destination", c.Destination}, {"endpoint", c.Endpoint}} {
		if kv[1] != "" {
			r.add(attribute.String(kv[0], kv[1]))
		}
	}
	r.add(attribute.Int64("bytes_in", c.BytesIn))
	r.add(attribute.Int64("bytes_out", c.BytesOut))
	r.add(attribute.String("duration", c.Duration.String()))
	r.add(attribute.String("end", c.End))
	if c.UpstreamError != nil {
		r.add(attribute.String("upstream_error", c.UpstreamError.Error()))
	}
}

// otlpLogExporter is the OpenTelemetry log SDK sending records to an OTLP
// collector: a batch processor (a batch goes when full or a second after
// its first record; records beyond its queue are dropped, so a slow
// collector loses records and never delays requests) over the SDK's OTLP
// exporter for gRPC or HTTP, with its retries.
type otlpLogExporter struct {
	provider *sdklog.LoggerProvider
	logger   otellog.Logger
}

const (
	otlpLogQueue   = 4096
	otlpLogBatch   = 512
	otlpLogTimeout = 10 * time.Second
)

// newOTLPLogExporter returns an exporter to the collector at addr
// (host:port, plain text) over protocol grpc or http (to path). It
// connects lazily.
func newOTLPLogExporter(addr, protocol, path string, headers map[string]string) (*otlpLogExporter, error) {
	ctx := context.Background()
	var exp sdklog.Exporter
	var err error
	if protocol == "http" {
		exp, err = otlploghttp.New(ctx, otlploghttp.WithEndpoint(addr), otlploghttp.WithURLPath(path),
			otlploghttp.WithInsecure(), otlploghttp.WithHeaders(headers), otlploghttp.WithTimeout(otlpLogTimeout))
	} else {
		exp, err = otlploggrpc.New(ctx, otlploggrpc.WithEndpoint(addr),
			otlploggrpc.WithInsecure(), otlploggrpc.WithHeaders(headers), otlploggrpc.WithTimeout(otlpLogTimeout))
	}
	if err != nil {
		return nil, err
	}
	batch := sdklog.NewBatchProcessor(validLogs{exp}, sdklog.WithMaxQueueSize(otlpLogQueue),
		sdklog.WithExportMaxBatchSize(otlpLogBatch), sdklog.WithExportInterval(traceBatchTimeout),
		sdklog.WithExportTimeout(otlpLogTimeout))
	provider := sdklog.NewLoggerProvider(sdklog.WithProcessor(batch),
		sdklog.WithResource(resource.NewSchemaless(attribute.String("service.name", "gateway"))))
	return &otlpLogExporter{provider: provider, logger: provider.Logger("gateway.access")}, nil
}

// Close sends what is queued and stops the exporter (the lease calls it
// when no snapshot uses it any more).
func (e *otlpLogExporter) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return e.provider.Shutdown(ctx)
}

package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"time"

	"cel.dev/cel-go/cel"
	"go.opentelemetry.io/otel/trace"
	collogspb "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	logspb "go.opentelemetry.io/proto/otlp/logs/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

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
		if len(fl.Remove) > 0 {
			o.remove = map[string]bool{}
			for _, name := range fl.Remove {
				o.remove[name] = true
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
	if o.filter != nil {
		v, err := celrules.EvalLLM(o.filter, in, nil)
		if err == nil {
			if b, ok := v.Value().(bool); ok && !b {
				return
			}
		}
	} else if !logged {
		return
	}
	var omit logline.AccessFields
	if !o.own {
		// Without fields of its own, the record has the line's.
		omit = a.Omit
	}
	rec := accessRecord(a, o.remove, omit)
	if o.own {
		for _, f := range o.add {
			v, err := celrules.EvalLLM(f.prog, in, nil)
			if err != nil {
				continue
			}
			rec.Attributes = append(rec.Attributes, stringKV(f.key, celrules.Text(v)))
		}
	} else {
		for _, f := range a.Extra {
			rec.Attributes = append(rec.Attributes, stringKV(f.Key, f.Value))
		}
	}
	if sc.IsValid() {
		tid, sid := sc.TraceID(), sc.SpanID()
		rec.TraceId, rec.SpanId = tid[:], sid[:]
		rec.Flags = uint32(sc.TraceFlags())
		rec.Attributes = append(rec.Attributes, stringKV("trace.id", tid.String()), stringKV("span.id", sid.String()))
	}
	o.exp.emit(rec)
}

// accessRecord is the log record of an access record: the fields of the
// access line as attributes (but those removed), "request" as its body.
func accessRecord(a *logline.Access, remove map[string]bool, omit logline.AccessFields) *logspb.LogRecord {
	now := uint64(time.Now().UnixNano())
	rec := &logspb.LogRecord{
		TimeUnixNano:         now,
		ObservedTimeUnixNano: now,
		SeverityNumber:       logspb.SeverityNumber_SEVERITY_NUMBER_INFO,
		SeverityText:         "INFO",
		Body:                 &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: logline.AccessMessage}},
	}
	add := func(kv *commonpb.KeyValue) {
		if remove[kv.Key] {
			return
		}
		if f, ok := logline.AccessFieldNamed(kv.Key); ok && omit&f != 0 {
			return
		}
		rec.Attributes = append(rec.Attributes, kv)
	}
	add(stringKV("method", logline.Method(a.Method)))
	add(stringKV("path", string(a.Path)))
	add(intKV("status", int64(a.Status)))
	add(stringKV("duration", a.Duration.String()))
	add(stringKV("route", a.Route))
	add(stringKV("backend", a.Backend))
	add(intKV("bytes_in", int64(a.BytesIn)))
	add(intKV("bytes_out", int64(a.BytesOut)))
	if a.Src != nil {
		add(stringKV("src", a.Src.String()))
	}
	if a.UpstreamError != nil {
		add(stringKV("upstream_error", a.UpstreamError.Error()))
	}
	if m := &a.MCP; m.Method != "" {
		add(stringKV("mcp.method", m.Method))
		if m.Target != "" {
			add(stringKV("mcp.target", m.Target))
		}
		if m.Tool != "" {
			add(stringKV("mcp.tool", m.Tool))
		}
		if m.Denied {
			add(&commonpb.KeyValue{Key: "mcp.denied", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_BoolValue{BoolValue: true}}})
		}
	}
	if x := &a.LLM; x.Provider != "" {
		add(stringKV("llm.provider", x.Provider))
		add(stringKV("llm.request_model", string(x.RequestModel)))
		add(stringKV("llm.model", string(x.Model)))
		if x.HasUsage {
			add(intKV("llm.input_tokens", x.InputTokens))
			add(intKV("llm.output_tokens", x.OutputTokens))
			if x.CachedInputTokens > 0 {
				add(intKV("llm.cached_input_tokens", x.CachedInputTokens))
			}
		}
		if x.CostKnown {
			add(&commonpb.KeyValue{Key: "llm.cost", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: x.Cost}}})
		}
		if x.Guard != "" {
			add(stringKV("llm.guard", x.Guard))
		}
		if x.Error != "" {
			add(stringKV("llm.error", x.Error))
		}
	}
	return rec
}

func stringKV(k, v string) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v}}}
}

func intKV(k string, v int64) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: v}}}
}

// otlpLogExporter sends log records to an OTLP collector in batches, from
// a goroutine of its own: a batch goes when it is full or a second after
// its first record. Records beyond its queue are dropped (a slow collector
// loses records, never delays requests).
type otlpLogExporter struct {
	queue chan *logspb.LogRecord
	stop  chan struct{}
	done  chan struct{}
	send  func(context.Context, *collogspb.ExportLogsServiceRequest) error
	close func() error
	// resource names the service in every batch.
	resource *resourcepb.Resource
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
	e := &otlpLogExporter{
		queue:    make(chan *logspb.LogRecord, otlpLogQueue),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
		resource: &resourcepb.Resource{Attributes: []*commonpb.KeyValue{stringKV("service.name", "gateway")}},
		close:    func() error { return nil },
	}
	if protocol == "http" {
		client := &http.Client{Timeout: otlpLogTimeout}
		url := "http://" + addr + path
		e.send = func(ctx context.Context, req *collogspb.ExportLogsServiceRequest) error {
			body, err := proto.Marshal(req)
			if err != nil {
				return err
			}
			hr, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
			if err != nil {
				return err
			}
			hr.Header.Set("Content-Type", "application/x-protobuf")
			for k, v := range headers {
				hr.Header.Set(k, v)
			}
			resp, err := client.Do(hr)
			if err != nil {
				return err
			}
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			resp.Body.Close()
			if resp.StatusCode/100 != 2 {
				return fmt.Errorf("collector answered %s", strconv.Itoa(resp.StatusCode))
			}
			return nil
		}
	} else {
		cc, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return nil, err
		}
		client := collogspb.NewLogsServiceClient(cc)
		md := metadata.New(headers)
		e.send = func(ctx context.Context, req *collogspb.ExportLogsServiceRequest) error {
			_, err := client.Export(metadata.NewOutgoingContext(ctx, md), req)
			return err
		}
		e.close = cc.Close
	}
	go e.run()
	return e, nil
}

// emit queues a record, or drops it when the queue is full.
func (e *otlpLogExporter) emit(r *logspb.LogRecord) {
	select {
	case e.queue <- r:
	default:
	}
}

func (e *otlpLogExporter) run() {
	defer close(e.done)
	var batch []*logspb.LogRecord
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	flush := func(ctx context.Context) {
		if len(batch) == 0 {
			return
		}
		req := &collogspb.ExportLogsServiceRequest{ResourceLogs: []*logspb.ResourceLogs{{
			Resource:  e.resource,
			ScopeLogs: []*logspb.ScopeLogs{{Scope: &commonpb.InstrumentationScope{Name: "gateway.access"}, LogRecords: batch}},
		}}}
		ctx, cancel := context.WithTimeout(ctx, otlpLogTimeout)
		_ = e.send(ctx, req) // a failed batch is lost, as the trace exporter's
		cancel()
		batch = nil
	}
	for {
		select {
		case r := <-e.queue:
			if len(batch) == 0 {
				timer.Reset(traceBatchTimeout)
			}
			batch = append(batch, r)
			if len(batch) >= otlpLogBatch {
				timer.Stop()
				flush(context.Background())
			}
		case <-timer.C:
			flush(context.Background())
		case <-e.stop:
			timer.Stop()
			for {
				select {
				case r := <-e.queue:
					batch = append(batch, r)
					continue
				default:
				}
				break
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			flush(ctx)
			cancel()
			return
		}
	}
}

// Close sends what is queued and stops the exporter (the lease calls it
// when no snapshot uses it any more).
func (e *otlpLogExporter) Close() error {
	close(e.stop)
	<-e.done
	return e.close()
}

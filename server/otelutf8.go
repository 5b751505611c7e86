package server

import (
	"context"
	"slices"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/relaygate/gateway/policy"
)

// OTLP is protobuf, whose strings must be UTF-8: the SDK's exporters
// refuse to marshal a batch holding one that is not, and the whole batch
// (a second of every client's spans, or of access records) is lost. The
// strings of spans and records carry a client's bytes (its path, headers
// read by CEL, an LLM request's model, span names CEL computes), which
// HTTP lets hold any byte. validSpans and validLogs stand between the
// batch processors and the exporters, the one place every span and
// record passes: each string that is not UTF-8 has its bad runs replaced
// with U+FFFD (policy.ProtoString). Checking costs no allocation, and it
// is done on the exporter's goroutine, off the request path; only a span
// or record holding such a string is copied.

// validSpans is a span exporter whose spans' strings are made UTF-8.
type validSpans struct{ sdktrace.SpanExporter }

func (e validSpans) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	out := spans
	for i, s := range spans {
		v, changed := validSpan(s)
		if !changed {
			continue
		}
		if &out[0] == &spans[0] {
			// The processor's batch is its own: copy it before changing it.
			out = slices.Clone(spans)
		}
		out[i] = v
	}
	return e.SpanExporter.ExportSpans(ctx, out)
}

// utf8Span is a span with its strings made UTF-8.
type utf8Span struct {
	sdktrace.ReadOnlySpan
	name   string
	attrs  []attribute.KeyValue
	events []sdktrace.Event
	links  []sdktrace.Link
	status sdktrace.Status
}

func (s *utf8Span) Name() string                     { return s.name }
func (s *utf8Span) Attributes() []attribute.KeyValue { return s.attrs }
func (s *utf8Span) Events() []sdktrace.Event         { return s.events }
func (s *utf8Span) Links() []sdktrace.Link           { return s.links }
func (s *utf8Span) Status() sdktrace.Status          { return s.status }

// validSpan is s with its strings made UTF-8; s and false when they are.
func validSpan(s sdktrace.ReadOnlySpan) (sdktrace.ReadOnlySpan, bool) {
	name, c1 := validString(s.Name())
	attrs, c2 := validKeyValues(s.Attributes())
	status := s.Status()
	var c3 bool
	status.Description, c3 = validString(status.Description)
	events := s.Events()
	c4 := false
	for i, ev := range events {
		name, cn := validString(ev.Name)
		attrs, ca := validKeyValues(ev.Attributes)
		if !cn && !ca {
			continue
		}
		if !c4 {
			events, c4 = slices.Clone(events), true
		}
		events[i].Name, events[i].Attributes = name, attrs
	}
	links := s.Links()
	c5 := false
	for i, l := range links {
		attrs, ca := validKeyValues(l.Attributes)
		if !ca {
			continue
		}
		if !c5 {
			links, c5 = slices.Clone(links), true
		}
		links[i].Attributes = attrs
	}
	if !c1 && !c2 && !c3 && !c4 && !c5 {
		return s, false
	}
	return &utf8Span{ReadOnlySpan: s, name: name, attrs: attrs, events: events, links: links, status: status}, true
}

// validLogs is a log exporter whose records' strings are made UTF-8.
type validLogs struct{ sdklog.Exporter }

func (e validLogs) Export(ctx context.Context, records []sdklog.Record) error {
	out := records
	for i := range records {
		r := &records[i]
		if !recordInvalid(r) {
			continue
		}
		if &out[0] == &records[0] {
			out = slices.Clone(records)
		}
		// The exporter's contract: a record is changed on a clone, which
		// shares nothing with the processor's.
		c := r.Clone()
		validRecord(&c)
		out[i] = c
	}
	return e.Exporter.Export(ctx, out)
}

// recordInvalid reports whether a string of r is not UTF-8.
func recordInvalid(r *sdklog.Record) bool {
	if !utf8.ValidString(r.EventName()) || !utf8.ValidString(r.SeverityText()) {
		return true
	}
	if _, changed := validValue(r.Body()); changed {
		return true
	}
	bad := false
	r.WalkAttributes(func(kv attribute.KeyValue) bool {
		_, bad = validKeyValue(kv)
		return !bad
	})
	return bad
}

// validRecord makes the strings of r UTF-8.
func validRecord(r *sdklog.Record) {
	if s, changed := validString(r.EventName()); changed {
		r.SetEventName(s)
	}
	if s, changed := validString(r.SeverityText()); changed {
		r.SetSeverityText(s)
	}
	if v, changed := validValue(r.Body()); changed {
		r.SetBody(v)
	}
	attrs := make([]attribute.KeyValue, 0, r.AttributesLen())
	r.WalkAttributes(func(kv attribute.KeyValue) bool {
		kv, _ = validKeyValue(kv)
		attrs = append(attrs, kv)
		return true
	})
	r.SetAttributes(attrs...)
}

// validString is s made UTF-8, and whether that changed it.
func validString(s string) (string, bool) {
	if utf8.ValidString(s) {
		return s, false
	}
	return policy.ProtoString(s), true
}

// validKeyValues is kvs with every key and string made UTF-8: kvs itself
// and false when they are, else a copy.
func validKeyValues(kvs []attribute.KeyValue) ([]attribute.KeyValue, bool) {
	var out []attribute.KeyValue
	for i, kv := range kvs {
		v, changed := validKeyValue(kv)
		if !changed {
			continue
		}
		if out == nil {
			out = slices.Clone(kvs)
		}
		out[i] = v
	}
	if out == nil {
		return kvs, false
	}
	return out, true
}

func validKeyValue(kv attribute.KeyValue) (attribute.KeyValue, bool) {
	k, ck := validString(string(kv.Key))
	v, cv := validValue(kv.Value)
	if !ck && !cv {
		return kv, false
	}
	return attribute.KeyValue{Key: attribute.Key(k), Value: v}, true
}

// validValue is v with every string in it made UTF-8, and whether that
// changed it.
func validValue(v attribute.Value) (attribute.Value, bool) {
	switch v.Type() {
	case attribute.STRING:
		if s, changed := validString(v.AsString()); changed {
			return attribute.StringValue(s), true
		}
	case attribute.STRINGSLICE:
		ss := v.AsStringSlice()
		changed := false
		for i, s := range ss {
			var c bool
			if ss[i], c = validString(s); c {
				changed = true
			}
		}
		if changed {
			return attribute.StringSliceValue(ss), true
		}
	case attribute.SLICE:
		vs := v.AsSlice()
		changed := false
		for i, e := range vs {
			var c bool
			if vs[i], c = validValue(e); c {
				changed = true
			}
		}
		if changed {
			return attribute.SliceValue(vs...), true
		}
	case attribute.MAP:
		if kvs, changed := validKeyValues(v.AsMap()); changed {
			return attribute.MapValue(kvs...), true
		}
	}
	return v, false
}

package logline

import (
	"encoding/json"
	"net"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Access is one request's access log record: the fields of the gateway's
// access line, in the order the line writes them. Byte slices may point
// into the request's buffers: a logger encodes or copies them before Log
// returns and keeps none.
type Access struct {
	Method, Path      []byte
	Status            int
	Duration          time.Duration
	Route, Backend    string
	BytesIn, BytesOut int
	Src               net.Addr
	UpstreamError     error     // nil: none
	MCP               AccessMCP // Method "": not an MCP request
	LLM               AccessLLM // Provider "": not an LLM request
	// Extra are fields the configuration adds (accessLog.add), last.
	Extra []AccessField
	// Omit are the built-in fields the line leaves out (accessLog.remove).
	Omit AccessFields
}

// AccessFields is a set of the access line's built-in fields.
type AccessFields uint32

// The access line's built-in fields, for Access.Omit.
const (
	FieldMethod AccessFields = 1 << iota
	FieldPath
	FieldStatus
	FieldDuration
	FieldRoute
	FieldBackend
	FieldBytesIn
	FieldBytesOut
	FieldSrc
	FieldUpstreamError
	FieldMCPMethod
	FieldMCPTarget
	FieldMCPTool
	FieldMCPDenied
	FieldLLMProvider
	FieldLLMRequestModel
	FieldLLMModel
	FieldLLMInputTokens
	FieldLLMOutputTokens
	FieldLLMCachedInputTokens
	FieldLLMCost
	FieldLLMGuard
	FieldLLMError
	// The connection line's own (Conn).
	FieldProtocol
	FieldBind
	FieldListener
	FieldSNI
	FieldDestination
	FieldEndpoint
	FieldEnd
)

// The fields of each line: a removal of a field the line has not leaves
// it as it is.
const (
	RequestFields AccessFields = FieldLLMError<<1 - 1
	ConnFields    AccessFields = FieldDuration | FieldRoute | FieldBackend | FieldBytesIn | FieldBytesOut |
		FieldSrc | FieldUpstreamError | FieldProtocol | FieldBind | FieldListener | FieldSNI |
		FieldDestination | FieldEndpoint | FieldEnd
)

// accessFieldNames are the built-in fields' names on the line.
var accessFieldNames = map[string]AccessFields{
	"method": FieldMethod, "path": FieldPath, "status": FieldStatus, "duration": FieldDuration,
	"route": FieldRoute, "backend": FieldBackend, "bytes_in": FieldBytesIn, "bytes_out": FieldBytesOut,
	"src": FieldSrc, "upstream_error": FieldUpstreamError,
	"mcp.method": FieldMCPMethod, "mcp.target": FieldMCPTarget, "mcp.tool": FieldMCPTool, "mcp.denied": FieldMCPDenied,
	"llm.provider": FieldLLMProvider, "llm.request_model": FieldLLMRequestModel, "llm.model": FieldLLMModel,
	"llm.input_tokens": FieldLLMInputTokens, "llm.output_tokens": FieldLLMOutputTokens,
	"llm.cached_input_tokens": FieldLLMCachedInputTokens, "llm.cost": FieldLLMCost,
	"llm.guard": FieldLLMGuard, "llm.error": FieldLLMError,
	"protocol": FieldProtocol, "bind": FieldBind, "listener": FieldListener, "tls.sni": FieldSNI,
	"destination": FieldDestination, "endpoint": FieldEndpoint, "end": FieldEnd,
}

// AccessFieldNamed is the built-in field of the line named name; ok is
// false for a name that is none (or one every line must have: level, ts,
// logger, msg).
func AccessFieldNamed(name string) (f AccessFields, ok bool) {
	f, ok = accessFieldNames[name]
	return f, ok
}

// has reports whether the line writes field f.
func (a *Access) has(f AccessFields) bool { return a.Omit&f == 0 }

// AccessField is a field added to a line (accessLog.add): a value under a
// key, written with its type as agentgateway writes an expression's value:
// a string quoted, a number or a bool bare, as zap writes fields of those
// types in either format ("code":200, not "code":"200"), a list, a map or
// null as its JSON. The zero Kind is a string.
type AccessField struct {
	Key   string
	Value string // an AccessString's, or an AccessJSON's compact JSON text
	Kind  AccessFieldKind
	Int   int64   // an AccessInt's, or an AccessBool's (1: true)
	Uint  uint64  // an AccessUint's
	Float float64 // an AccessFloat's
}

// AccessFieldKind is the type of an added field's value.
type AccessFieldKind uint8

// Added fields' types.
const (
	AccessString AccessFieldKind = iota
	AccessInt
	AccessUint
	AccessFloat
	AccessBool
	// AccessJSON is a list, a map or null: Value is its JSON text, compact
	// and valid (as encoding/json writes it), written as it is.
	AccessJSON
)

// zapField is f as a zap field of its type.
func (f *AccessField) zapField() zap.Field {
	switch f.Kind {
	case AccessInt:
		return zap.Int64(f.Key, f.Int)
	case AccessUint:
		return zap.Uint64(f.Key, f.Uint)
	case AccessFloat:
		return zap.Float64(f.Key, f.Float)
	case AccessBool:
		return zap.Bool(f.Key, f.Int != 0)
	case AccessJSON:
		return zap.Reflect(f.Key, json.RawMessage(f.Value))
	}
	return zap.String(f.Key, f.Value)
}

// appendValue appends f's value as zap's encoders write zapField's.
func (f *AccessField) appendValue(bs []byte) []byte {
	switch f.Kind {
	case AccessInt:
		return appendInt(bs, f.Int)
	case AccessUint:
		return strconv.AppendUint(bs, f.Uint, 10)
	case AccessFloat:
		return appendFloat(bs, f.Float, 64)
	case AccessBool:
		return strconv.AppendBool(bs, f.Int != 0)
	case AccessJSON:
		return append(bs, f.Value...)
	}
	return appendQuoted(bs, f.Value)
}

// AccessMCP is what an MCP request was.
type AccessMCP struct {
	Method, Target, Tool string
	Denied               bool
}

// AccessLLM is what an LLM request was: the provider, the model the client
// asked for and the one asked of the provider, the usage and cost when
// known, and the guard's decision and the error's type when there were any.
type AccessLLM struct {
	Provider                                     string
	RequestModel, Model                          []byte
	HasUsage                                     bool
	InputTokens, OutputTokens, CachedInputTokens int64
	CostKnown                                    bool
	Cost                                         float64
	Guard, Error                                 string
}

// AccessLogger receives one record per request (Log) and one per
// connection forwarded or closed unforwarded (LogConn). Neither may keep
// its record or anything it points to.
type AccessLogger interface {
	Log(a *Access)
	LogConn(c *Conn)
}

// Access line constants: the logger's name and the message of every line.
const (
	AccessLoggerName = "access"
	AccessMessage    = "request"
)

// ZapAccess logs records through a zap logger, as entries at info level
// with message AccessMessage and one field per value (a core sees what
// zap.String and friends make, for tests that read entries and for
// embedders with cores of their own). Its strings are copies, so a core
// may keep an entry. The logger is used as given: name it
// AccessLoggerName to get the line AccessWriter writes.
func ZapAccess(l *zap.Logger) AccessLogger { return zapAccess{l} }

type zapAccess struct{ l *zap.Logger }

// maxAccessFields bounds a record's fields: 9 always, the upstream error,
// 4 of MCP and 9 of LLM requests.
const maxAccessFields = 24

// accessFieldArrays holds the fields of a line while zap writes it: a fresh
// slice of them was the largest cost of building the line.
var accessFieldArrays = sync.Pool{New: func() any { return new([maxAccessFields]zap.Field) }}

func (z zapAccess) Log(a *Access) {
	ce := z.l.Check(zap.InfoLevel, AccessMessage)
	if ce == nil {
		return
	}
	arr := accessFieldArrays.Get().(*[maxAccessFields]zap.Field)
	fields := arr[:0]
	if a.Omit == 0 {
		fields = append(fields,
			zap.String("method", Method(a.Method)),
			zap.String("path", string(a.Path)),
			zap.Int("status", a.Status),
			zap.Duration("duration", a.Duration),
			zap.String("route", a.Route),
			zap.String("backend", a.Backend),
			zap.Int("bytes_in", a.BytesIn),
			zap.Int("bytes_out", a.BytesOut),
			zap.Stringer("src", a.Src),
		)
	} else {
		fields = a.appendCommonZap(fields)
	}
	if a.UpstreamError != nil && a.has(FieldUpstreamError) {
		fields = append(fields, zap.NamedError("upstream_error", a.UpstreamError))
	}
	if m := &a.MCP; m.Method != "" {
		if a.has(FieldMCPMethod) {
			fields = append(fields, zap.String("mcp.method", m.Method))
		}
		if m.Target != "" && a.has(FieldMCPTarget) {
			fields = append(fields, zap.String("mcp.target", m.Target))
		}
		if m.Tool != "" && a.has(FieldMCPTool) {
			fields = append(fields, zap.String("mcp.tool", m.Tool))
		}
		if m.Denied && a.has(FieldMCPDenied) {
			fields = append(fields, zap.Bool("mcp.denied", true))
		}
	}
	if x := &a.LLM; x.Provider != "" {
		if a.has(FieldLLMProvider) {
			fields = append(fields, zap.String("llm.provider", x.Provider))
		}
		if a.has(FieldLLMRequestModel) {
			fields = append(fields, zap.String("llm.request_model", string(x.RequestModel)))
		}
		if a.has(FieldLLMModel) {
			fields = append(fields, zap.String("llm.model", string(x.Model)))
		}
		if x.HasUsage {
			if a.has(FieldLLMInputTokens) {
				fields = append(fields, zap.Int64("llm.input_tokens", x.InputTokens))
			}
			if a.has(FieldLLMOutputTokens) {
				fields = append(fields, zap.Int64("llm.output_tokens", x.OutputTokens))
			}
			if x.CachedInputTokens > 0 && a.has(FieldLLMCachedInputTokens) {
				fields = append(fields, zap.Int64("llm.cached_input_tokens", x.CachedInputTokens))
			}
		}
		if x.CostKnown && a.has(FieldLLMCost) {
			fields = append(fields, zap.Float64("llm.cost", x.Cost))
		}
		if x.Guard != "" && a.has(FieldLLMGuard) {
			fields = append(fields, zap.String("llm.guard", x.Guard))
		}
		if x.Error != "" && a.has(FieldLLMError) {
			fields = append(fields, zap.String("llm.error", x.Error))
		}
	}
	for i := range a.Extra {
		fields = append(fields, a.Extra[i].zapField())
	}
	// zap's cores encode the fields at once or copy the slice (its
	// observer does), so the array is free again after Write.
	ce.Write(fields...)
	clear(arr[:])
	accessFieldArrays.Put(arr)
}

// appendCommonZap appends the fields every line has, but those omitted.
func (a *Access) appendCommonZap(fields []zap.Field) []zap.Field {
	if a.has(FieldMethod) {
		fields = append(fields, zap.String("method", Method(a.Method)))
	}
	if a.has(FieldPath) {
		fields = append(fields, zap.String("path", string(a.Path)))
	}
	if a.has(FieldStatus) {
		fields = append(fields, zap.Int("status", a.Status))
	}
	if a.has(FieldDuration) {
		fields = append(fields, zap.Duration("duration", a.Duration))
	}
	if a.has(FieldRoute) {
		fields = append(fields, zap.String("route", a.Route))
	}
	if a.has(FieldBackend) {
		fields = append(fields, zap.String("backend", a.Backend))
	}
	if a.has(FieldBytesIn) {
		fields = append(fields, zap.Int("bytes_in", a.BytesIn))
	}
	if a.has(FieldBytesOut) {
		fields = append(fields, zap.Int("bytes_out", a.BytesOut))
	}
	if a.has(FieldSrc) {
		fields = append(fields, zap.Stringer("src", a.Src))
	}
	return fields
}

// AccessWriter writes records as access lines: the bytes ZapAccess writes
// through a logger named AccessLoggerName with this package's encoder of
// the same format (or zap's own), without an entry, fields or an encoder's
// dispatch in between. FuzzAccessWriterMatchesZap holds the two to the
// same lines. Lines are built on the stack and gathered in a buffer that a
// goroutine writes out (see lineSink).
type AccessWriter struct {
	sink  *lineSink
	keys  *accessKeys
	addrs addrTexts
	now   func() time.Time
}

// AccessWriterOptions say how an AccessWriter buffers.
type AccessWriterOptions struct {
	// BufferSize is the size of each of the two buffers lines gather in;
	// 0 writes every line at once.
	BufferSize int
	// FlushInterval bounds how long a line waits in a buffer (required
	// with a BufferSize).
	FlushInterval time.Duration
}

// NewAccessWriter returns a writer of lines in the given format ("json",
// else zap's console text) to out, which must take concurrent writes when
// anything else writes to it too (zapcore.Lock). Stop it to write out
// what it holds.
func NewAccessWriter(format string, out zapcore.WriteSyncer, opts AccessWriterOptions) *AccessWriter {
	keys := &consoleAccessKeys
	if format == "json" {
		keys = &jsonAccessKeys
	}
	return &AccessWriter{sink: newLineSink(out, opts.BufferSize, opts.FlushInterval), keys: keys, now: time.Now}
}

// Sync writes out every line logged so far.
func (w *AccessWriter) Sync() error { return w.sink.Sync() }

// Stop writes out every line logged so far and ends the writer's
// goroutines; lines logged after it are written at once.
func (w *AccessWriter) Stop() error { return w.sink.Stop() }

// accessKeys are a format's constant parts: what goes before the fields
// (after the time), each field's separator and key, and the line's end.
type accessKeys struct {
	json                                              bool
	head, method, path, status, duration, route       string
	backend, bytesIn, bytesOut, src                   string
	mcpMethod, mcpTarget, mcpTool, mcpDenied          string
	llmProvider, llmRequestModel, llmModel            string
	llmInput, llmOutput, llmCached, llmCost, llmGuard string
	llmError, end                                     string
	sep, colon                                        string // around an added field's key
}

// keysOf builds a format's constant parts from its separators.
func keysOf(json bool, head, first, sep, colon, end string) accessKeys {
	k := func(name string) string { return sep + `"` + name + `"` + colon }
	return accessKeys{
		json:            json,
		head:            head,
		method:          first + `"method"` + colon,
		path:            k("path"),
		status:          k("status"),
		duration:        k("duration"),
		route:           k("route"),
		backend:         k("backend"),
		bytesIn:         k("bytes_in"),
		bytesOut:        k("bytes_out"),
		src:             k("src"),
		mcpMethod:       k("mcp.method"),
		mcpTarget:       k("mcp.target"),
		mcpTool:         k("mcp.tool"),
		mcpDenied:       k("mcp.denied"),
		llmProvider:     k("llm.provider"),
		llmRequestModel: k("llm.request_model"),
		llmModel:        k("llm.model"),
		llmInput:        k("llm.input_tokens"),
		llmOutput:       k("llm.output_tokens"),
		llmCached:       k("llm.cached_input_tokens"),
		llmCost:         k("llm.cost"),
		llmGuard:        k("llm.guard"),
		llmError:        k("llm.error"),
		end:             end,
		sep:             sep,
		colon:           colon,
	}
}

var (
	// "2026-11-26T05:33:13.123Z\tINFO\taccess\trequest\t{"method": …}\n"
	consoleAccessKeys = keysOf(false, "\tINFO\t"+AccessLoggerName+"\t"+AccessMessage+"\t{", "", ", ", ": ", "}\n")
	// {"level":"info","ts":"…","logger":"access","msg":"request","method":…}\n
	jsonAccessKeys = keysOf(true, `","logger":"`+AccessLoggerName+`","msg":"`+AccessMessage+`"`, ",", ",", ":", "}\n")
)

// maxStackLine is the room a line is built in on the stack; a longer one
// grows onto the heap.
const maxStackLine = 1024

// Log writes a's line.
func (w *AccessWriter) Log(a *Access) {
	var stack [maxStackLine]byte
	w.sink.write(w.appendLine(stack[:0], a, w.now()))
}

// appendLine appends a's line stamped with t.
func (w *AccessWriter) appendLine(bs []byte, a *Access, t time.Time) []byte {
	k := w.keys
	if k.json {
		bs = append(bs, `{"level":"info","ts":"`...)
		bs = seconds.appendTime(bs, t, true)
	} else {
		bs = seconds.appendTime(bs, t, true)
	}
	bs = append(bs, k.head...)
	if a.Omit != 0 {
		return w.appendOmitting(bs, a)
	}
	bs = append(bs, k.method...)
	bs = appendQuoted(bs, a.Method)
	bs = append(bs, k.path...)
	bs = appendQuoted(bs, a.Path)
	bs = append(bs, k.status...)
	bs = appendInt(bs, int64(a.Status))
	bs = append(bs, k.duration...)
	bs = appendSeconds(bs, a.Duration)
	bs = append(bs, k.route...)
	bs = appendQuoted(bs, a.Route)
	bs = append(bs, k.backend...)
	bs = appendQuoted(bs, a.Backend)
	bs = append(bs, k.bytesIn...)
	bs = appendInt(bs, int64(a.BytesIn))
	bs = append(bs, k.bytesOut...)
	bs = appendInt(bs, int64(a.BytesOut))
	if addr, ok := a.Src.(*net.TCPAddr); ok {
		bs = append(bs, k.src...)
		bs = w.addrs.appendQuoted(bs, addr)
	} else {
		bs = w.addField(bs, zap.Stringer("src", a.Src))
	}
	if a.UpstreamError != nil {
		bs = w.addField(bs, zap.NamedError("upstream_error", a.UpstreamError))
	}
	if m := &a.MCP; m.Method != "" {
		bs = append(bs, k.mcpMethod...)
		bs = appendQuoted(bs, m.Method)
		if m.Target != "" {
			bs = append(bs, k.mcpTarget...)
			bs = appendQuoted(bs, m.Target)
		}
		if m.Tool != "" {
			bs = append(bs, k.mcpTool...)
			bs = appendQuoted(bs, m.Tool)
		}
		if m.Denied {
			bs = append(bs, k.mcpDenied...)
			bs = append(bs, "true"...)
		}
	}
	if x := &a.LLM; x.Provider != "" {
		bs = append(bs, k.llmProvider...)
		bs = appendQuoted(bs, x.Provider)
		bs = append(bs, k.llmRequestModel...)
		bs = appendQuoted(bs, x.RequestModel)
		bs = append(bs, k.llmModel...)
		bs = appendQuoted(bs, x.Model)
		if x.HasUsage {
			bs = append(bs, k.llmInput...)
			bs = appendInt(bs, x.InputTokens)
			bs = append(bs, k.llmOutput...)
			bs = appendInt(bs, x.OutputTokens)
			if x.CachedInputTokens > 0 {
				bs = append(bs, k.llmCached...)
				bs = appendInt(bs, x.CachedInputTokens)
			}
		}
		if x.CostKnown {
			bs = append(bs, k.llmCost...)
			bs = appendFloat(bs, x.Cost, 64)
		}
		if x.Guard != "" {
			bs = append(bs, k.llmGuard...)
			bs = appendQuoted(bs, x.Guard)
		}
		if x.Error != "" {
			bs = append(bs, k.llmError...)
			bs = appendQuoted(bs, x.Error)
		}
	}
	for i := range a.Extra {
		f := &a.Extra[i]
		bs = append(bs, k.sep...)
		bs = appendQuoted(bs, f.Key)
		bs = append(bs, k.colon...)
		bs = f.appendValue(bs)
	}
	return append(bs, k.end...)
}

// appendOmitting appends a's fields after the line's head, leaving out
// those a.Omit names: each key with the separator its place needs.
func (w *AccessWriter) appendOmitting(bs []byte, a *Access) []byte {
	k := w.keys
	spaced := !k.json
	key := func(f AccessFields, name string) bool {
		if !a.has(f) {
			return false
		}
		bs = appendKey(bs, name, spaced)
		return true
	}
	if key(FieldMethod, "method") {
		bs = appendQuoted(bs, a.Method)
	}
	if key(FieldPath, "path") {
		bs = appendQuoted(bs, a.Path)
	}
	if key(FieldStatus, "status") {
		bs = appendInt(bs, int64(a.Status))
	}
	if key(FieldDuration, "duration") {
		bs = appendSeconds(bs, a.Duration)
	}
	if key(FieldRoute, "route") {
		bs = appendQuoted(bs, a.Route)
	}
	if key(FieldBackend, "backend") {
		bs = appendQuoted(bs, a.Backend)
	}
	if key(FieldBytesIn, "bytes_in") {
		bs = appendInt(bs, int64(a.BytesIn))
	}
	if key(FieldBytesOut, "bytes_out") {
		bs = appendInt(bs, int64(a.BytesOut))
	}
	if a.has(FieldSrc) {
		if addr, ok := a.Src.(*net.TCPAddr); ok {
			bs = appendKey(bs, "src", spaced)
			bs = w.addrs.appendQuoted(bs, addr)
		} else {
			bs = w.addField(bs, zap.Stringer("src", a.Src))
		}
	}
	if a.UpstreamError != nil && a.has(FieldUpstreamError) {
		bs = w.addField(bs, zap.NamedError("upstream_error", a.UpstreamError))
	}
	if m := &a.MCP; m.Method != "" {
		if key(FieldMCPMethod, "mcp.method") {
			bs = appendQuoted(bs, m.Method)
		}
		if m.Target != "" && key(FieldMCPTarget, "mcp.target") {
			bs = appendQuoted(bs, m.Target)
		}
		if m.Tool != "" && key(FieldMCPTool, "mcp.tool") {
			bs = appendQuoted(bs, m.Tool)
		}
		if m.Denied && key(FieldMCPDenied, "mcp.denied") {
			bs = append(bs, "true"...)
		}
	}
	if x := &a.LLM; x.Provider != "" {
		if key(FieldLLMProvider, "llm.provider") {
			bs = appendQuoted(bs, x.Provider)
		}
		if key(FieldLLMRequestModel, "llm.request_model") {
			bs = appendQuoted(bs, x.RequestModel)
		}
		if key(FieldLLMModel, "llm.model") {
			bs = appendQuoted(bs, x.Model)
		}
		if x.HasUsage {
			if key(FieldLLMInputTokens, "llm.input_tokens") {
				bs = appendInt(bs, x.InputTokens)
			}
			if key(FieldLLMOutputTokens, "llm.output_tokens") {
				bs = appendInt(bs, x.OutputTokens)
			}
			if x.CachedInputTokens > 0 && key(FieldLLMCachedInputTokens, "llm.cached_input_tokens") {
				bs = appendInt(bs, x.CachedInputTokens)
			}
		}
		if x.CostKnown && key(FieldLLMCost, "llm.cost") {
			bs = appendFloat(bs, x.Cost, 64)
		}
		if x.Guard != "" && key(FieldLLMGuard, "llm.guard") {
			bs = appendQuoted(bs, x.Guard)
		}
		if x.Error != "" && key(FieldLLMError, "llm.error") {
			bs = appendQuoted(bs, x.Error)
		}
	}
	for i := range a.Extra {
		bs = appendKey(bs, a.Extra[i].Key, spaced)
		bs = a.Extra[i].appendValue(bs)
	}
	return append(bs, k.end...)
}

// addField appends a field of a kind the line writes rarely or that zap
// writes in more than one way (an address that is no *net.TCPAddr, an
// error), as the encoders write it. The field is written apart and
// copied: a field's own code may take the writer (fieldWriter.addOther),
// which would move the line's stack buffer to the heap.
func (w *AccessWriter) addField(bs []byte, f zapcore.Field) []byte {
	// The field writer decides its separator by the last byte written, so
	// it starts from the line's.
	last := byte('"')
	if len(bs) > 0 {
		last = bs[len(bs)-1]
	}
	fw := &fieldWriter{bs: append(make([]byte, 0, 128), last), spaced: !w.keys.json}
	fw.addField(&f)
	return append(bs, fw.bs[1:]...)
}

var (
	_ AccessLogger = zapAccess{}
	_ AccessLogger = (*AccessWriter)(nil)
)

// MaxClientValue bounds a value the client chose that a record carries (a
// model name, an MCP method or tool): the request body bounds it only at
// maxBufferSize, and an access line or span is no place for megabytes.
const MaxClientValue = 256

// boundedSuffix ends a value cut at MaxClientValue.
const boundedSuffix = "..."

// BoundValue returns s, or when longer than MaxClientValue its first
// whole characters within the bound followed by "...".
func BoundValue(s string) string {
	if len(s) <= MaxClientValue {
		return s
	}
	return s[:runeCut(s, MaxClientValue)] + boundedSuffix
}

// BoundBytes is BoundValue for bytes; a value within the bound is b itself.
func BoundBytes(b []byte) []byte {
	if len(b) <= MaxClientValue {
		return b
	}
	n := runeCut(b, MaxClientValue)
	return append(b[:n:n], boundedSuffix...)
}

// runeCut returns the largest n <= max at which s can be cut without
// splitting a UTF-8 character.
func runeCut[T string | []byte](s T, max int) int {
	n := max
	for n > 0 && n < len(s) && !utf8.RuneStart(s[n]) {
		n--
	}
	return n
}

// boundedError is an error whose text was cut for the log lines and spans
// it reaches (BoundError); the error it stands for stays in the chain.
type boundedError struct {
	msg string
	err error
}

func (e *boundedError) Error() string { return e.msg }
func (e *boundedError) Unwrap() error { return e.err }

// BoundError returns err, or when its text is longer than MaxClientValue,
// err with its text cut there and marked as truncated (errors.Is and As
// still see err): an external service's error message is the service's to
// write, of any length, and a warning logged per request is no place for
// it whole.
func BoundError(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if len(msg) <= MaxClientValue {
		return err
	}
	return &boundedError{msg: BoundValue(msg) + " (truncated from " + strconv.Itoa(len(msg)) + " bytes)", err: err}
}

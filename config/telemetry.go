package config

import (
	"fmt"
	"strings"
	"sync"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/common/types/traits"

	"github.com/relaygate/gateway/config/decode"
)

var (
	telemetryEnvOnce sync.Once
	telemetryEnv     *cel.Env
	telemetryEnvErr  error
)

// TelemetryCELEnv is the environment of the expressions that shape what a
// request leaves behind once it is answered: span attributes and
// resources (config.tracing.fields, frontendPolicies.tracing) and the
// tracing filter. It is ValueCELEnv's plus
//
//   - `llm`, what an LLM request came to (agentgateway's variable of that
//     name): provider, requestModel, responseModel, streaming, inputTokens,
//     outputTokens, totalTokens, cachedInputTokens, prompt (the messages
//     the client sent, each a map of role and content) and completion (the
//     texts of the answer, when it was not streamed). A field that is not
//     known (no usage reported, not an LLM request) is absent, and an
//     expression reading it fails;
//   - flatten(v) and flattenRecursive(v) (also flatten_recursive), which
//     mark a list or a map to be spread into one attribute per element,
//     named by the attribute's name, a dot and the index or key (nested
//     lists and maps spread too with flattenRecursive). They only shape
//     attributes, so rules do not have them.
func TelemetryCELEnv() (*cel.Env, error) {
	telemetryEnvOnce.Do(func() {
		base, err := ValueCELEnv()
		if err != nil {
			telemetryEnvErr = err
			return
		}
		dyn := cel.DynType
		flat := func(id string, recursive bool) cel.FunctionOpt {
			return cel.Overload(id, []*cel.Type{dyn}, dyn, cel.UnaryBinding(func(v ref.Val) ref.Val { return flattenMark(v, recursive) }))
		}
		telemetryEnv, telemetryEnvErr = base.Extend(
			cel.Variable("llm", cel.MapType(cel.StringType, dyn)),
			cel.Function("flatten", flat("flatten_global_dyn", false)),
			cel.Function("flattenRecursive", flat("flatten_recursive_global_dyn", true)),
			cel.Function("flatten_recursive", flat("flatten_recursive_snake_global_dyn", true)),
		)
		if telemetryEnvErr != nil {
			telemetryEnvErr = fmt.Errorf("building the telemetry CEL environment: %w", telemetryEnvErr)
		}
	})
	return telemetryEnv, telemetryEnvErr
}

// The keys of the one-entry maps flatten and flattenRecursive answer.
const (
	flattenKey          = "\x00flatten"
	flattenRecursiveKey = "\x00flattenRecursive"
)

func flattenMark(v ref.Val, recursive bool) ref.Val {
	switch v.(type) {
	case traits.Lister, traits.Mapper:
	default:
		return types.NewErr("flatten only works on a list or a map")
	}
	key := flattenKey
	if recursive {
		key = flattenRecursiveKey
	}
	return types.NewRefValMap(types.DefaultTypeAdapter, map[ref.Val]ref.Val{types.String(key): v})
}

// Flattened reports whether v is what flatten or flattenRecursive made of a
// list or a map, and returns that list or map.
func Flattened(v ref.Val) (inner ref.Val, recursive, ok bool) {
	m, isMap := v.(traits.Mapper)
	if !isMap || m.Size() != types.Int(1) {
		return nil, false, false
	}
	if in, found := m.Find(types.String(flattenKey)); found {
		return in, false, true
	}
	if in, found := m.Find(types.String(flattenRecursiveKey)); found {
		return in, true, true
	}
	return nil, false, false
}

// TelemetryProgram is a compiled expression of TelemetryCELEnv and what it
// reads of `llm` (so that what is costly to gather is gathered only for
// expressions that read it).
type TelemetryProgram struct {
	cel.Program
	// LLM: it reads `llm`; Prompt and Completion: llm.prompt or
	// llm.completion (or the whole map).
	LLM, Prompt, Completion bool
}

// CompileTelemetryExpression checks and compiles an expression of
// TelemetryCELEnv, of any result type or, when boolean is set, a boolean.
func CompileTelemetryExpression(expr string, boolean bool) (*TelemetryProgram, error) {
	env, err := TelemetryCELEnv()
	if err != nil {
		return nil, err
	}
	ast, iss := env.Compile(expr)
	if iss.Err() != nil {
		return nil, fmt.Errorf("invalid CEL expression: %s", iss.Err())
	}
	if t := ast.OutputType(); boolean && t != cel.BoolType && t != cel.DynType {
		return nil, fmt.Errorf("invalid CEL expression: the result is %s, not bool", t)
	}
	est, err := checkCELCost(env, ast)
	if err != nil {
		return nil, err
	}
	p, err := celProgram(env, ast, est) // no plan-time optimisation: random() is per evaluation
	if err != nil {
		return nil, err
	}
	tp := &TelemetryProgram{Program: p}
	for _, r := range ast.NativeRep().ReferenceMap() {
		if r.Name == "llm" {
			tp.LLM = true
		}
	}
	if tp.LLM {
		// A field named in the text, or the map passed whole (to json(),
		// say): a reading of more than the cheap fields is assumed.
		whole := !strings.Contains(expr, "llm.")
		tp.Prompt = whole || strings.Contains(expr, "prompt")
		tp.Completion = whole || strings.Contains(expr, "completion")
	}
	return tp, nil
}

// TelemetryExpression is an expression of TelemetryCELEnv with a result of
// any type, compiled when the config is decoded.
type TelemetryExpression string

// DecodeNode decodes and compiles the expression.
func (e *TelemetryExpression) DecodeNode(n *decode.Node) {
	*e = TelemetryExpression(decodeTelemetry(n, false))
}

// TelemetryCondition is a boolean expression of TelemetryCELEnv.
type TelemetryCondition string

// DecodeNode decodes and compiles the condition.
func (e *TelemetryCondition) DecodeNode(n *decode.Node) {
	*e = TelemetryCondition(decodeTelemetry(n, true))
}

func decodeTelemetry(n *decode.Node, boolean bool) string {
	expr, ok := celText(n)
	if !ok {
		return ""
	}
	if _, err := CompileTelemetryExpression(expr, boolean); err != nil {
		n.Errorf("%v", err)
	}
	return expr
}

// CollectorPolicies is the `policies` of a telemetry collector
// (agentgateway's SimpleLocalBackendPolicies): how the gateway connects to
// it. Only requestHeaderModifier's add and set are served: they are sent
// with every export.
type CollectorPolicies struct {
	RequestHeaderModifier *HeaderModifier `json:"requestHeaderModifier,omitempty"`
	Transformations       Unsupported     `json:"transformations,omitzero"`
	BackendTLS            Unsupported     `json:"backendTLS,omitzero"`
	BackendAuth           Unsupported     `json:"backendAuth,omitzero"`
	HTTP                  Unsupported     `json:"http,omitzero"`
	TCP                   Unsupported     `json:"tcp,omitzero"`
	BackendTunnel         Unsupported     `json:"backendTunnel,omitzero"`
}

// Validate refuses removing headers: an export sends only its own.
func (p *CollectorPolicies) Validate(v *decode.Validation) {
	if h := p.RequestHeaderModifier; h != nil && len(h.Remove) > 0 {
		v.Errorf("requestHeaderModifier.remove", "an export sends no header to remove")
	}
}

// Headers are the headers every export sends (add, then set).
func (p *CollectorPolicies) Headers() map[string]string {
	out := map[string]string{}
	if p == nil || p.RequestHeaderModifier == nil {
		return out
	}
	for k, v := range p.RequestHeaderModifier.Add {
		out[k] = v
	}
	for k, v := range p.RequestHeaderModifier.Set {
		out[k] = v
	}
	return out
}

// validateCollector checks a collector reference: exactly one of host,
// backend and service (not served), a host:port host, an absolute path.
func validateCollector(v *decode.Validation, host string, backend *string, service bool, path string) {
	checkService(v, host, backend, service)
	if path != "" && !strings.HasPrefix(path, "/") {
		v.Errorf("path", "must start with /")
	}
}

// attributeNames checks the names of added attributes and removed ones.
func attributeNames(v *decode.Validation, field string, names []string) {
	for _, name := range names {
		if name == "" || len(name) > 255 {
			v.Errorf(field, "attribute names must be 1 to 255 characters")
			return
		}
	}
}

// AccessLogOTLP is `frontendPolicies.accessLog.otlp`: every access log
// record also exported as an OpenTelemetry log record over OTLP, to the
// collector at host (or the named host backend).
type AccessLogOTLP struct {
	Host     string             `json:"host,omitempty"`
	Backend  string             `json:"backend,omitempty"`
	Service  Unsupported        `json:"service,omitzero"`
	Policies *CollectorPolicies `json:"policies,omitempty"`
	// Filter exports a record only when it holds; unset, accessLog's
	// filter decides.
	Filter *ValueCondition `json:"filter,omitempty"`
	// Fields replaces accessLog's added fields for the exported records
	// (and may remove built-in ones from them).
	Fields *AccessLogFields `json:"fields,omitempty"`
	// Protocol is grpc (the default) or http (protobuf, to Path).
	Protocol string `json:"protocol,omitempty" cfg:"enum=grpc|http"`
	// Path is the HTTP protocol's path (default /v1/logs).
	Path string `json:"path,omitempty"`
}

// Validate checks the collector.
func (o *AccessLogOTLP) Validate(v *decode.Validation) {
	validateCollector(v, o.Host, &o.Backend, o.Service.Set, o.Path)
}

// AccessLogFields are the fields of the records exported over OTLP.
type AccessLogFields struct {
	Add    map[string]ValueExpression `json:"add,omitempty" cfg:"maxItems=64"`
	Remove []string                   `json:"remove,omitempty" cfg:"maxItems=64"`
}

// Validate checks the field names.
func (f *AccessLogFields) Validate(v *decode.Validation) {
	for name := range f.Add {
		if name == "" || len(name) > 128 {
			v.Errorf("add", "field names must be 1 to 128 characters")
		}
	}
	for i, name := range f.Remove {
		if name == "" {
			v.Errorf(indexPath("remove", i), "must not be empty")
		}
	}
}

// checkTelemetry checks what spans the telemetry settings: config.tracing
// and frontendPolicies.tracing are one setting in two places (agentgateway
// turns the first into the second), so only one may be given; a named
// collector backend must exist.
func (f *File) checkTelemetry(c checker, names map[string]int) {
	fp := f.FrontendPolicies
	if fp == nil {
		return
	}
	if fp.Tracing != nil && f.Config != nil && f.Config.Tracing != nil {
		c.Errorf("frontendPolicies.tracing", "config.tracing is also set: use one of them")
	}
	backend := func(path, name string) {
		if _, ok := names[name]; name != "" && !ok {
			c.Errorf(path, "no backend named %q in the top-level backends", name)
		}
	}
	if fp.Tracing != nil {
		backend("frontendPolicies.tracing.backend", fp.Tracing.Backend)
	}
	if fp.AccessLog != nil && fp.AccessLog.OTLP != nil {
		backend("frontendPolicies.accessLog.otlp.backend", fp.AccessLog.OTLP.Backend)
	}
}

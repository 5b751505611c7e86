package config

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"

	"github.com/relaygate/gateway/config/decode"
)

var (
	valueEnvOnce sync.Once
	valueEnv     *cel.Env
	valueEnvErr  error
)

// ValueCELEnv is the environment of expressions that compute a value or
// inject a fault rather than decide whether a request may pass (delay,
// conditional direct responses, extAuthz's HTTP path, headers, body and
// metadata): LLMCELEnv's variables and functions plus random(), a number in
// [0, 1) drawn anew on each evaluation, and unvalidatedJwtPayload(token),
// the claims of a JWT read without checking its signature. Rules must not
// use either (an authorization decision is never left to chance, nor to
// claims nobody verified), so they stay out of CELEnv.
func ValueCELEnv() (*cel.Env, error) {
	valueEnvOnce.Do(func() {
		base, err := LLMCELEnv()
		if err != nil {
			valueEnvErr = err
			return
		}
		valueEnv, valueEnvErr = base.Extend(
			cel.Function("random",
				cel.Overload("random_double", nil, cel.DoubleType,
					cel.FunctionBinding(func(...ref.Val) ref.Val { return types.Double(rand.Float64()) }))),
			cel.Function("unvalidatedJwtPayload",
				cel.Overload("unvalidated_jwt_payload_string", []*cel.Type{cel.StringType}, cel.MapType(cel.StringType, cel.DynType),
					cel.UnaryBinding(unvalidatedJWTPayload))))
		if valueEnvErr != nil {
			valueEnvErr = fmt.Errorf("building the fault CEL environment: %w", valueEnvErr)
		}
	})
	return valueEnv, valueEnvErr
}

// unvalidatedJWTPayload decodes a JWT's claims without checking anything:
// the middle segment, base64url, as JSON.
func unvalidatedJWTPayload(v ref.Val) ref.Val {
	s, ok := v.Value().(string)
	if !ok {
		return types.NewErr("unvalidatedJwtPayload: not a string")
	}
	parts := strings.Split(strings.TrimSpace(s), ".")
	if len(parts) != 3 {
		return types.NewErr("unvalidatedJwtPayload: not a JWT")
	}
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return types.NewErr("unvalidatedJwtPayload: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // exp and iat are integers: int, not double, in CEL
	var claims map[string]any
	if err := dec.Decode(&claims); err != nil {
		return types.NewErr("unvalidatedJwtPayload: %v", err)
	}
	return types.DefaultTypeAdapter.NativeToValue(jsonNumbers(claims))
}

// jsonNumbers turns json.Numbers into int64 when whole, else float64.
func jsonNumbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		f, _ := x.Float64()
		return f
	case map[string]any:
		for k, e := range x {
			x[k] = jsonNumbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = jsonNumbers(e)
		}
	}
	return v
}

// CompileValueExpression checks and compiles an expression of ValueCELEnv.
// It is compiled without cel-go's plan-time optimisation, which would
// evaluate random() once, at load.
func CompileValueExpression(expr string, boolean bool) (cel.Program, error) {
	env, err := ValueCELEnv()
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
	return celProgram(env, ast, est)
}

// celText is the text of an expression field, 1 to maxCELBytes long; ok is
// false, the reason recorded at n, for anything else.
func celText(n *decode.Node) (expr string, ok bool) {
	expr, ok = n.String()
	if !ok || expr == "" || len(expr) > maxCELBytes {
		n.Errorf("expected a CEL expression of 1 to %d characters", maxCELBytes)
		return "", false
	}
	return expr, true
}

// ValueExpression is an expression of ValueCELEnv with a result of any
// type, compiled when the config is decoded.
type ValueExpression string

// DecodeNode decodes and compiles the expression.
func (e *ValueExpression) DecodeNode(n *decode.Node) {
	expr, ok := celText(n)
	if !ok {
		return
	}
	if _, err := CompileValueExpression(expr, false); err != nil {
		n.Errorf("%v", err)
	}
	*e = ValueExpression(expr)
}

// ValueCondition is a boolean expression of ValueCELEnv (conditional
// direct responses, the access log's filter).
type ValueCondition string

// DecodeNode decodes and compiles the condition.
func (e *ValueCondition) DecodeNode(n *decode.Node) {
	expr, ok := celText(n)
	if !ok {
		return
	}
	if _, err := CompileValueExpression(expr, true); err != nil {
		n.Errorf("%v", err)
	}
	*e = ValueCondition(expr)
}

// Delay is `policies.delay`: latency injected before the request is
// forwarded.
type Delay struct {
	Duration FaultDuration `json:"duration" cfg:"required"`
}

// MaxDelay bounds an injected delay.
const MaxDelay = 5 * time.Minute

// FaultDuration is a duration ("2s"), or a CEL expression of ValueCELEnv
// giving a duration or a number of milliseconds, evaluated per request.
type FaultDuration struct {
	Fixed time.Duration
	Expr  string // set when the duration is computed
}

// DecodeNode decodes either form.
func (d *FaultDuration) DecodeNode(n *decode.Node) {
	s, ok := n.String()
	if !ok {
		if ms, isInt := n.Int(); isInt {
			s = fmt.Sprint(ms)
		} else {
			n.Errorf("expected a duration or a CEL expression, got %s", n.Describe())
			return
		}
	}
	if v, err := time.ParseDuration(s); err == nil {
		if v < 0 || v > MaxDelay {
			n.Errorf("must be between 0s and %v", MaxDelay)
			return
		}
		d.Fixed = v
		return
	}
	if len(s) == 0 || len(s) > maxCELBytes {
		n.Errorf("must be 1 to %d characters", maxCELBytes)
		return
	}
	if _, err := CompileValueExpression(s, false); err != nil {
		n.Errorf("neither a duration nor a valid CEL expression: %v", err)
		return
	}
	d.Expr = s
}

// IsZero reports an unset duration.
func (d FaultDuration) IsZero() bool { return d.Fixed == 0 && d.Expr == "" }

// MarshalJSON writes the file form, an expression's literals redacted
// (redactCEL).
func (d FaultDuration) MarshalJSON() ([]byte, error) {
	if d.Expr != "" {
		return jsonString(redactCEL(d.Expr)), nil
	}
	return jsonString(d.Fixed.String()), nil
}

// AccessLogPolicy is `frontendPolicies.accessLog`: which requests are
// logged and the fields added to their lines.
type AccessLogPolicy struct {
	// Filter logs a request only when it holds (a failing one logs it).
	Filter *ValueCondition `json:"filter,omitempty"`
	// Add adds a field per entry, its value by CEL (as text; JSON for
	// what is not a string, number or bool); a value that fails to
	// evaluate leaves its field out.
	Add map[string]ValueExpression `json:"add,omitempty" cfg:"maxItems=64"`
	// Remove are built-in fields the lines leave out (method, src,
	// llm.cost, tls.sni, ...; not level, ts, logger or msg): a request
	// line's and a connection line's, each leaving out those it has.
	Remove   []string       `json:"remove,omitempty" cfg:"maxItems=32"`
	OTLP     *AccessLogOTLP `json:"otlp,omitempty"`
	Database Unsupported    `json:"database,omitzero"`
}

// accessLogFields are the fields an access line (a request's or a
// connection's) may carry.
var accessLogFields = map[string]bool{
	"level": true, "ts": true, "logger": true, "msg": true,
	"method": true, "path": true, "status": true, "duration": true, "route": true, "backend": true,
	"bytes_in": true, "bytes_out": true, "src": true, "upstream_error": true,
	"mcp.method": true, "mcp.target": true, "mcp.tool": true, "mcp.denied": true,
	"llm.provider": true, "llm.request_model": true, "llm.model": true, "llm.input_tokens": true,
	"llm.output_tokens": true, "llm.cached_input_tokens": true, "llm.cost": true, "llm.guard": true, "llm.error": true,
	// The connection line's own (a forwarded TCP or TLS connection).
	"protocol": true, "bind": true, "listener": true, "tls.sni": true, "destination": true, "endpoint": true, "end": true,
}

// Validate refuses empty added field names, and removed ones that are not
// built-in fields. An added field named like a built-in one replaces it,
// as in agentgateway (its a2a example adds `backend`), except the four
// every line has.
func (p *AccessLogPolicy) Validate(v *decode.Validation) {
	for i, name := range p.Remove {
		switch name {
		case "level", "ts", "logger", "msg":
			v.Errorf(indexPath("remove", i), "%q is on every line and cannot be removed", name)
		default:
			if !accessLogFields[name] {
				v.Errorf(indexPath("remove", i), "%q is not a field of the access line", name)
			}
		}
	}
	for name := range p.Add {
		switch {
		case name == "" || len(name) > 128:
			v.Errorf("add", "field names must be 1 to 128 characters")
		case name == "level" || name == "ts" || name == "logger" || name == "msg":
			v.Errorf("add."+name, "%q is on every line and cannot be replaced", name)
		}
	}
}

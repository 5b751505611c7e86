package config

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"

	"github.com/relaygate/gateway/config/decode"
)

var (
	faultEnvOnce sync.Once
	faultEnv     *cel.Env
	faultEnvErr  error
)

// FaultCELEnv is the environment of fault injection (delay, conditional
// direct responses): LLMCELEnv's variables and functions plus random(), a
// number in [0, 1) drawn anew on each evaluation, which rules must not use
// (an authorization decision is never left to chance) but injected faults
// are made of.
func FaultCELEnv() (*cel.Env, error) {
	faultEnvOnce.Do(func() {
		base, err := LLMCELEnv()
		if err != nil {
			faultEnvErr = err
			return
		}
		faultEnv, faultEnvErr = base.Extend(cel.Function("random",
			cel.Overload("random_double", nil, cel.DoubleType,
				cel.FunctionBinding(func(...ref.Val) ref.Val { return types.Double(rand.Float64()) }))))
		if faultEnvErr != nil {
			faultEnvErr = fmt.Errorf("building the fault CEL environment: %w", faultEnvErr)
		}
	})
	return faultEnv, faultEnvErr
}

// CompileFaultExpression checks and compiles an expression of FaultCELEnv.
// It is compiled without cel-go's plan-time optimisation, which would
// evaluate random() once, at load.
func CompileFaultExpression(expr string, boolean bool) (cel.Program, error) {
	env, err := FaultCELEnv()
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
	if err := checkCELCost(env, ast); err != nil {
		return nil, err
	}
	p, err := env.Program(ast)
	if err != nil {
		return nil, fmt.Errorf("invalid CEL expression: %v", err)
	}
	return p, nil
}

// FaultCondition is a boolean expression of FaultCELEnv.
type FaultCondition string

// DecodeNode decodes and compiles the condition.
func (e *FaultCondition) DecodeNode(n *decode.Node) {
	expr, ok := n.String()
	if !ok || expr == "" || len(expr) > maxCELBytes {
		n.Errorf("expected a CEL expression of 1 to %d characters", maxCELBytes)
		return
	}
	if _, err := CompileFaultExpression(expr, true); err != nil {
		n.Errorf("%v", err)
	}
	*e = FaultCondition(expr)
}

// Delay is `policies.delay`: latency injected before the request is
// forwarded.
type Delay struct {
	Duration FaultDuration `json:"duration" cfg:"required"`
}

// MaxDelay bounds an injected delay.
const MaxDelay = 5 * time.Minute

// FaultDuration is a duration ("2s"), or a CEL expression of FaultCELEnv
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
	if _, err := CompileFaultExpression(s, false); err != nil {
		n.Errorf("neither a duration nor a valid CEL expression: %v", err)
		return
	}
	d.Expr = s
}

// IsZero reports an unset duration.
func (d FaultDuration) IsZero() bool { return d.Fixed == 0 && d.Expr == "" }

// MarshalJSON writes the file form.
func (d FaultDuration) MarshalJSON() ([]byte, error) {
	if d.Expr != "" {
		return jsonString(d.Expr), nil
	}
	return jsonString(d.Fixed.String()), nil
}

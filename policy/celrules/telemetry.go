package celrules

import (
	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/interpreter"
)

// EvalTelemetry evaluates p, an expression compiled in
// config.TelemetryCELEnv, with in's variables (an empty request when in is
// nil) and llm, what an LLM request came to (absent when nil: an
// expression reading it fails). The error is the evaluation's.
func EvalTelemetry(p cel.Program, in *Input, llm map[string]any) (ref.Val, error) {
	if in == nil {
		in = &emptyInput
	}
	act := &telemetryActivation{llmActivation: llmActivation{activation: activation{in: in}}, llm: llm}
	v, _, err := p.Eval(act)
	return v, err
}

// telemetryActivation adds llm to the LLM expressions' variables.
type telemetryActivation struct {
	llmActivation
	llm map[string]any
}

var _ interpreter.Activation = (*telemetryActivation)(nil)

// ResolveName implements interpreter.Activation.
func (a *telemetryActivation) ResolveName(name string) (any, bool) {
	if name == "llm" {
		if a.llm == nil {
			return nil, false
		}
		return a.llm, true
	}
	return a.llmActivation.ResolveName(name)
}

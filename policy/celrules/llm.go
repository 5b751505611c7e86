package celrules

import (
	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/interpreter"
)

// EvalLLM evaluates p, an expression compiled in config.LLMCELEnv
// (config.CompileLLMExpression), with in's variables (request, source, jwt;
// an empty request when in is nil) and llmRequest, the LLM request body
// decoded as JSON (absent when nil: an expression reading it fails). The
// error is the evaluation's: the caller decides what a failed expression
// means.
func EvalLLM(p cel.Program, in *Input, llmRequest map[string]any) (ref.Val, error) {
	if in == nil {
		in = &emptyInput
	}
	act := &llmActivation{activation: activation{in: in}, llmRequest: llmRequest}
	v, _, err := p.Eval(act)
	return v, err
}

var emptyInput Input

// llmActivation adds llmRequest to the rules' variables.
type llmActivation struct {
	activation
	llmRequest map[string]any
}

var _ interpreter.Activation = (*llmActivation)(nil)

// ResolveName implements interpreter.Activation.
func (a *llmActivation) ResolveName(name string) (any, bool) {
	if name == "llmRequest" {
		if a.llmRequest == nil {
			return nil, false
		}
		return a.llmRequest, true
	}
	return a.activation.ResolveName(name)
}

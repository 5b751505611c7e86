package config

import (
	"fmt"
	"strings"
	"sync"

	"cel.dev/cel-go/cel"

	"github.com/relaygate/gateway/config/decode"
)

// CELExpression is a CEL expression that computes a value (agentgateway's
// Expression where any result will do): a request body field of an LLM
// transformation, a webhook header, an AWS session tag. It is compiled when
// the file is decoded, in the LLM environment (LLMCELEnv), so that a bad
// expression is a config error naming its field.
type CELExpression string

// DecodeNode decodes and compiles the expression.
func (e *CELExpression) DecodeNode(n *decode.Node) { *e = CELExpression(decodeCELText(n, false)) }

// CELCondition is a CEL expression that must give a boolean: a virtual
// model's `when`, a conditional rate limit's `condition`. It is compiled
// when the file is decoded, in the LLM environment (LLMCELEnv).
type CELCondition string

// DecodeNode decodes and compiles the condition.
func (c *CELCondition) DecodeNode(n *decode.Node) { *c = CELCondition(decodeCELText(n, true)) }

// decodeCELText returns the expression n holds, recording at n why it is
// not a valid one (a condition when boolean is set).
func decodeCELText(n *decode.Node, boolean bool) string {
	expr, ok := n.String()
	if !ok {
		n.Errorf("expected a CEL expression (a string), got %s", n.Describe())
		return ""
	}
	if expr == "" || len(expr) > maxCELBytes {
		n.Errorf("must be 1 to %d characters", maxCELBytes)
		return expr
	}
	if _, err := compileLLM(expr, boolean); err != nil {
		n.Errorf("%v", err)
	}
	return expr
}

var (
	llmEnvOnce sync.Once
	llmEnv     *cel.Env
	llmEnvErr  error
)

// LLMCELEnv is the environment of the expressions of LLM settings: CELEnv's
// variables and functions plus `llmRequest`, the JSON body of an LLM request
// as the client sent it (agentgateway's variable of that name:
// `llmRequest.model`, `llmRequest.max_tokens`, `llmRequest.metadata.x`). It
// extends CELEnv rather than adding the variable there, so that
// authorization rules, evaluated where no LLM request exists, cannot name
// it.
func LLMCELEnv() (*cel.Env, error) {
	llmEnvOnce.Do(func() {
		base, err := CELEnv()
		if err != nil {
			llmEnvErr = err
			return
		}
		llmEnv, llmEnvErr = base.Extend(cel.Variable("llmRequest", cel.MapType(cel.StringType, cel.DynType)))
		if llmEnvErr != nil {
			llmEnvErr = fmt.Errorf("building the LLM CEL environment: %w", llmEnvErr)
		}
	})
	return llmEnv, llmEnvErr
}

// CompileLLMExpression checks and compiles an expression of any result type
// in LLMCELEnv.
func CompileLLMExpression(expr string) (cel.Program, error) {
	return compileLLM(expr, false)
}

// CompileLLMCondition checks and compiles a boolean expression in
// LLMCELEnv.
func CompileLLMCondition(expr string) (cel.Program, error) {
	return compileLLM(expr, true)
}

// CompileLLMExpressionAst is CompileLLMExpression that also returns the
// checked syntax tree, for callers that analyse the expression (which
// variables it reads).
func CompileLLMExpressionAst(expr string) (cel.Program, *cel.Ast, error) {
	return compileLLMAst(expr, false)
}

func compileLLM(expr string, boolean bool) (cel.Program, error) {
	p, _, err := compileLLMAst(expr, boolean)
	return p, err
}

func compileLLMAst(expr string, boolean bool) (cel.Program, *cel.Ast, error) {
	env, err := LLMCELEnv()
	if err != nil {
		return nil, nil, err
	}
	ast, iss := env.Compile(expr)
	if iss.Err() != nil {
		return nil, nil, fmt.Errorf("invalid CEL expression: %s", llmUnsupportedHint(iss.Err().Error()))
	}
	if t := ast.OutputType(); boolean && t != cel.BoolType && t != cel.DynType {
		return nil, nil, fmt.Errorf("invalid CEL expression: the result is %s, not bool", t)
	}
	est, err := checkCELCost(env, ast)
	if err != nil {
		return nil, nil, err
	}
	p, err := celProgram(env, ast, est, cel.EvalOptions(cel.OptOptimize))
	if err != nil {
		return nil, nil, err
	}
	return p, ast, nil
}

// llmUnsupportedHint adds, to an undeclared-reference error about a
// function of agentgateway's library left out of CELEnv (celUnsupported),
// that the function is not available: the reasons given for rules (a rule
// must not decide at random) do not apply to computed values, so none is
// given.
func llmUnsupportedHint(msg string) string {
	for _, u := range celUnsupported {
		if strings.Contains(msg, "undeclared reference to '"+u.name+"'") {
			msg += "\n" + u.name + "() is agentgateway's, and not available in this gateway's CEL yet"
		}
	}
	return msg
}

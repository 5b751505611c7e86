package celrules

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"cel.dev/cel-go/cel"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/relaygate/gateway/config"
)

// Sample is a request described in JSON, for trying an expression without
// sending one (the admin server's POST /cel): what each variable holds.
// Header names are lower-cased, as a rule sees them.
type Sample struct {
	Expression string `json:"expression"`
	Request    struct {
		Method  string            `json:"method"`
		Path    string            `json:"path"`
		Host    string            `json:"host"`
		Scheme  string            `json:"scheme"`
		URI     string            `json:"uri"`
		Headers map[string]string `json:"headers"`
		Query   map[string]string `json:"query"`
		// Body is request.body (bytes, as a request's); absent when
		// left out.
		Body *string `json:"body"`
	} `json:"request"`
	Source struct {
		Address string `json:"address"`
		Port    int64  `json:"port"`
	} `json:"source"`
	JWT       map[string]any `json:"jwt"`
	APIKey    map[string]any `json:"apiKey"`
	ExtAuthz  map[string]any `json:"extauthz"`
	BasicAuth *struct {
		Username string `json:"username"`
	} `json:"basicAuth"`
	MCP        *MCPItemSample `json:"mcp"`
	LLMRequest map[string]any `json:"llmRequest"`
}

// MCPItemSample names the MCP item of a Sample: {"tool": {"name": ...}}.
type MCPItemSample struct {
	Tool     *MCPNamed `json:"tool"`
	Prompt   *MCPNamed `json:"prompt"`
	Resource *MCPNamed `json:"resource"`
}

// MCPNamed is an MCP item's name and target.
type MCPNamed struct {
	Name   string `json:"name"`
	Target string `json:"target"`
}

// MaxSample bounds a sample's JSON.
const MaxSample = 64 << 10

// MaxSampleCost bounds what evaluating a sample's expression may cost, in
// cel-go's units (about one an operation): a rule over a sample takes a
// few hundred; lists built a million elements at a time are refused before
// they take the gateway's memory.
const MaxSampleCost = 1_000_000

// EvalSample decodes a Sample (unknown fields refused), compiles its
// expression as every CEL field is (with llmRequest available) and
// evaluates it. The result is the value as JSON would hold it.
func EvalSample(data []byte) (any, error) {
	if len(data) > MaxSample {
		return nil, fmt.Errorf("the sample is larger than %d bytes", MaxSample)
	}
	var s Sample
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("sample: %v", err)
	}
	if strings.TrimSpace(s.Expression) == "" {
		return nil, errors.New("sample: expression is required")
	}
	_, ast, err := config.CompileLLMExpressionAst(s.Expression)
	if err != nil {
		return nil, err
	}
	env, err := config.LLMCELEnv()
	if err != nil {
		return nil, err
	}
	// The load-time estimate (config.MaxCELCost) bounds what a rule may
	// cost on the largest request; a sample is one small request, and the
	// gateway serving traffic must not spend its memory on an expression
	// tried out here, so its actual cost is bounded too.
	p, err := env.Program(ast, cel.EvalOptions(cel.OptOptimize), cel.CostLimit(MaxSampleCost))
	if err != nil {
		return nil, fmt.Errorf("invalid CEL expression: %v", err)
	}
	in := s.input()
	v, err := EvalLLM(p, &in, s.LLMRequest)
	if err != nil {
		return nil, fmt.Errorf("evaluation failed (a rule would count it false): %v", err)
	}
	out, err := v.ConvertToNative(reflect.TypeFor[*structpb.Value]())
	if err != nil {
		// Not a JSON value (bytes, a duration, an IP): as CEL prints it.
		return fmt.Sprint(v.Value()), nil
	}
	return out.(*structpb.Value).AsInterface(), nil
}

// input turns the sample into what rules see.
func (s *Sample) input() Input {
	r := &s.Request
	headers := map[string]any{}
	for k, v := range r.Headers {
		headers[strings.ToLower(k)] = v
	}
	query := map[string]any{}
	for k, v := range r.Query {
		query[k] = v
	}
	in := Input{
		Claims:   s.JWT,
		APIKey:   s.APIKey,
		ExtAuthz: s.ExtAuthz,
		Request: map[string]any{
			"method": r.Method, "path": r.Path, "host": r.Host, "scheme": r.Scheme, "uri": r.URI,
			"headers": headers, "query": query,
		},
		Source: map[string]any{"address": s.Source.Address, "port": s.Source.Port},
	}
	if r.Body != nil {
		in.Request["body"] = []byte(*r.Body)
	}
	if s.BasicAuth != nil {
		in.BasicAuthUser = s.BasicAuth.Username
	}
	if m := s.MCP; m != nil {
		for kind, item := range map[MCPKind]*MCPNamed{MCPTool: m.Tool, MCPPrompt: m.Prompt, MCPResource: m.Resource} {
			if item != nil {
				in.MCP = &MCPItem{Kind: kind, Name: item.Name, Target: item.Target}
			}
		}
	}
	return in
}

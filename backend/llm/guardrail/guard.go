package guardrail

import (
	"context"
	"fmt"
	"iter"
	"slices"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/relaygate/gateway/backend"
	"github.com/relaygate/gateway/config"
	"github.com/relaygate/gateway/config/decode"
	"github.com/relaygate/gateway/policy"
	"github.com/relaygate/gateway/policy/celrules"
)

// Message is one text a guard judges, with the role of the message it comes
// from ("system", "user", "assistant", "tool", ...).
type Message struct{ Role, Content string }

// Action is a guard's decision.
type Action uint8

const (
	// Pass lets the texts go on unchanged.
	Pass Action = iota
	// Mask replaces the texts with Verdict.Messages.
	Mask
	// Reject stops the exchange with Verdict.Rejection.
	Reject
)

func (a Action) String() string {
	switch a {
	case Pass:
		return "pass"
	case Mask:
		return "mask"
	case Reject:
		return "reject"
	}
	return "unknown"
}

// Verdict is what a guard decided about the texts it was given.
type Verdict struct {
	Action Action
	// Messages are the replacements of a Mask: exactly one per Message
	// checked, in the same order.
	Messages []Message
	// Rejection is the answer the client gets for a Reject: the guard's
	// configured rejection, or the webhook's own status and body.
	Rejection *Rejection
	// Reason says why, for logs ("flagged: violence"); it never holds
	// credentials, and holds no prompt text unless a webhook put some in
	// its reason.
	Reason string
	// Failed reports that the guard service could not be asked or gave no
	// usable answer, and Action is what the webhook's failureMode made of
	// that: Pass (failOpen) or Reject (failClosed).
	Failed bool
}

// Rejection is the answer to a rejected request or response. It is
// immutable and shared by every exchange it answers.
type Rejection struct {
	Status  int
	Body    []byte
	headers *policy.HeaderModifier
}

// Write replaces resp with the rejection and returns its status. No
// Content-Type is set unless the configured headers set one, as in
// agentgateway.
func (r *Rejection) Write(resp *fasthttp.Response) int {
	resp.Reset()
	resp.SetStatusCode(r.Status)
	resp.SetBody(r.Body) // a copy: response policies may edit it
	if r.headers != nil {
		r.headers.ApplyResponse(&resp.Header)
	}
	return r.Status
}

// Headers are header fields a guard may forward to a webhook:
// *fasthttp.RequestHeader and *fasthttp.ResponseHeader are Headers.
type Headers interface {
	All() iter.Seq2[[]byte, []byte]
}

// Input is what a guard may read of the exchange besides the texts. Every
// field may be left zero; only webhook guards read any of them.
type Input struct {
	// Header is what a webhook's forwardHeaderMatches choose from: the
	// client's request headers for a request guard; for a response guard
	// agentgateway passes the provider's response headers (plus the
	// request's traceparent).
	Header Headers
	// Request is the client's request as webhook header expressions see it
	// (request, source, jwt); nil: an empty request.
	Request *celrules.Input
	// LLMRequest is the client's body decoded as JSON, which webhook header
	// expressions read as llmRequest (request guards only; see
	// Guard.NeedsLLMRequest). nil: expressions that read it fail, and their
	// header is not set.
	LLMRequest map[string]any
	// Token is the credential the client authenticated with (the token
	// jwtAuth validated and removed), inserted for a guard whose
	// backendAuth is passthrough.
	Token []byte
	// Trace is the request's span: each call to a guard service is a
	// child span (zero: the request is not traced).
	Trace policy.Trace
}

// Unit says which texts of an exchange a guard judges.
type Unit uint8

const (
	// PerMessage: one Message per message of the conversation, as
	// agentgateway's get_messages makes them: the system prompt first as
	// role "system" (when the format keeps it apart), then each message
	// with its text parts joined into one Content. For an answer: one
	// Message per choice, role "assistant", its text joined.
	PerMessage Unit = iota
	// PerText: one Message per text in the guard's Scope, in document
	// order, as agentgateway's visit_text_mut visits them (Bedrock
	// guardrails): a message's adjacent text parts are one text; tool
	// calls' arguments and tool results are texts of their own scopes.
	PerText
)

// Options give New what it needs from the server.
type Options struct {
	// ResolveBackend returns the "host:port" of a top-level backend a
	// webhook names ({backend: name}); false when there is none the
	// webhook can call (the server's mirror policy accepts host backends
	// only). nil: webhooks that name a backend are refused.
	ResolveBackend func(name string) (addr string, ok bool)
	// Pool returns the connection pool to addr with the given TLS and, when
	// the guard's policies set one, tcp policy: the server's backend.Pools,
	// so that a reload keeps warm connections. nil: each guard keeps pools
	// of its own with the default dialing settings.
	Pool func(addr string, tls backend.UpstreamTLS, tcp *config.BackendTCP) *backend.Upstream
	// Timeout bounds each call to a guard service when the guard's
	// policies.http.requestTimeout does not; the context's deadline, when
	// earlier, bounds it more. Default DefaultTimeout.
	Timeout time.Duration
	// MaxAnswer bounds a guard service's answer body (a webhook's mask
	// repeats the prompt, so keep it above the largest request body).
	// Default DefaultMaxAnswer.
	MaxAnswer int
	// HostOverride sends the calls meant for a cloud service's host (the
	// key: "api.openai.com", "bedrock-runtime.us-east-1.amazonaws.com",
	// "modelarmor.us-central1.rep.googleapis.com", an Azure endpoint) to
	// another "host:port" over plain HTTP, keeping the service's Host
	// header, path and signatures. A hook for tests and local emulators:
	// the configuration has no such setting.
	HostOverride map[string]string
}

// Defaults of Options.
const (
	// DefaultTimeout is agentgateway's timeout of a guard call.
	DefaultTimeout = 10 * time.Second
	// DefaultMaxAnswer bounds a guard's answer.
	DefaultMaxAnswer = 4 << 20
)

func (o *Options) timeout() time.Duration {
	if o.Timeout > 0 {
		return o.Timeout
	}
	return DefaultTimeout
}

func (o *Options) maxAnswer() int {
	if o.MaxAnswer > 0 {
		return o.MaxAnswer
	}
	return DefaultMaxAnswer
}

// phase is the side of the exchange a guard judges.
type phase uint8

const (
	promptPhase phase = iota
	answerPhase
)

// checker is one kind of guard: it asks its service about msgs (never
// empty of text, for the cloud kinds) and decides.
type checker interface {
	check(ctx context.Context, msgs []Message, in *Input) (Verdict, error)
}

// Guard is one compiled remote guard: a webhook, OpenAI moderation, a
// Bedrock guardrail, a Model Armor template or Azure Content Safety, with
// the rejection its Reject answers. It is immutable and safe for concurrent
// use.
type Guard struct {
	kind      string
	unit      Unit
	scope     []config.ContentScope
	rejection *Rejection
	checker   checker
	// callsOnEmpty: the service is asked even when no text has content
	// (webhooks; the cloud kinds have nothing to judge then).
	callsOnEmpty bool
	// failOpen: an error is a Pass; failClosed an error is a Reject (webhooks
	// only: the cloud kinds return the error).
	hasFailureMode, failOpen bool
	needsLLM                 bool
	services                 []*service
}

// NewRequestGuard compiles a guard of the prompt. Errors are
// *decode.FieldError with paths relative to the guard ("webhook.target",
// "bedrockGuardrails.policies.backendAuth"). Regex guards are aipolicy's
// and refused here. New does no network I/O and reads no file.
func NewRequestGuard(c *config.RequestGuard, opts Options) (*Guard, error) {
	g := &Guard{}
	rej, err := newRejection(c.Rejection, config.DefaultRequestRejectionBody)
	if err != nil {
		return nil, err
	}
	g.rejection = rej
	switch {
	case c.Webhook != nil:
		err = g.compileWebhook(c.Webhook, promptPhase, &opts)
	case c.OpenAIModeration != nil:
		err = g.compileModeration(c.OpenAIModeration, &opts)
	case c.BedrockGuardrails != nil:
		err = g.compileBedrock(c.BedrockGuardrails, promptPhase, &opts)
		g.unit, g.scope = PerText, scopeOrDefault(c.Scope)
	case c.GoogleModelArmor != nil:
		err = g.compileModelArmor(c.GoogleModelArmor, promptPhase, &opts)
	case c.AzureContentSafety != nil:
		err = g.compileAzure(c.AzureContentSafety, promptPhase, &opts)
	case c.Regex != nil:
		return nil, fieldError("regex", "regex guards are applied by the ai policy (aipolicy), not by this package")
	default:
		return nil, fieldError("", "a guard kind is required")
	}
	if err != nil {
		return nil, err
	}
	if g.scope == nil {
		if c.Scope != nil && !sameScope(c.Scope, config.DefaultContentScope) {
			return nil, fieldError("scope", "only regex and bedrockGuardrails guards take a scope other than the default (systemPrompt, messages)")
		}
		g.scope = config.DefaultContentScope
	}
	return g, nil
}

// NewResponseGuard compiles a guard of the answer; see NewRequestGuard.
func NewResponseGuard(c *config.ResponseGuard, opts Options) (*Guard, error) {
	g := &Guard{}
	rej, err := newRejection(c.Rejection, config.DefaultResponseRejectionBody)
	if err != nil {
		return nil, err
	}
	g.rejection = rej
	switch {
	case c.Webhook != nil:
		err = g.compileWebhook(c.Webhook, answerPhase, &opts)
	case c.BedrockGuardrails != nil:
		err = g.compileBedrock(c.BedrockGuardrails, answerPhase, &opts)
		g.unit = PerText
	case c.GoogleModelArmor != nil:
		err = g.compileModelArmor(c.GoogleModelArmor, answerPhase, &opts)
	case c.AzureContentSafety != nil:
		err = g.compileAzure(c.AzureContentSafety, answerPhase, &opts)
	case c.Regex != nil:
		return nil, fieldError("regex", "regex guards are applied by the ai policy (aipolicy), not by this package")
	default:
		return nil, fieldError("", "a guard kind is required")
	}
	if err != nil {
		return nil, err
	}
	g.scope = config.DefaultContentScope
	return g, nil
}

// Check asks the guard about msgs: the texts of the prompt (request
// guards) or of the answer (response guards), made as Unit says. ctx's
// deadline bounds the call when it is earlier than the guard's timeout
// (a cancellation without a deadline is seen only before the call).
//
// When the service fails, a webhook's failureMode decides: failClosed (the
// default) gives a Reject with the guard's rejection, failOpen a Pass; both
// have Failed set and a nil error. The cloud guards return the error, as
// agentgateway does: the server answers 503 (or, guarding a stream, lets
// the window pass: agentgateway's streaming guards fail open).
func (g *Guard) Check(ctx context.Context, msgs []Message, in *Input) (Verdict, error) {
	if in == nil {
		in = &emptyInput
	}
	if !g.callsOnEmpty && !hasContent(msgs) {
		return Verdict{Action: Pass, Reason: "no text to judge"}, nil
	}
	v, err := g.checker.check(ctx, msgs, in)
	if err == nil {
		if v.Action == Reject && v.Rejection == nil {
			v.Rejection = g.rejection
		}
		return v, nil
	}
	err = fmt.Errorf("%s guard: %w", g.kind, err)
	if !g.hasFailureMode {
		return Verdict{}, err
	}
	if g.failOpen {
		return Verdict{Action: Pass, Failed: true, Reason: "failing open: " + err.Error()}, nil
	}
	return Verdict{Action: Reject, Rejection: g.rejection, Failed: true, Reason: "failing closed: " + err.Error()}, nil
}

var emptyInput Input

// Kind is the guard kind as the configuration names it: "webhook",
// "openAIModeration", "bedrockGuardrails", "googleModelArmor" or
// "azureContentSafety".
func (g *Guard) Kind() string { return g.kind }

// Unit says which texts Check takes.
func (g *Guard) Unit() Unit { return g.unit }

// Scope is what a PerText guard reads of a prompt (the default, system
// prompts and messages, for every other guard).
func (g *Guard) Scope() []config.ContentScope { return g.scope }

// NeedsLLMRequest reports whether Check reads Input.LLMRequest (a webhook
// header expression names llmRequest), so that the server decodes the
// body only then.
func (g *Guard) NeedsLLMRequest() bool { return g.needsLLM }

// Rejection is the guard's configured rejection.
func (g *Guard) Rejection() *Rejection { return g.rejection }

// Close closes the idle connections of the pools the guard keeps itself
// (Options.Pool nil); pools the server gave are the server's.
func (g *Guard) Close() {
	for _, s := range g.services {
		s.close()
	}
}

// newRejection compiles a guard's rejection (the spec's 403 and
// defaultBody when nil).
func newRejection(c *config.GuardRejection, defaultBody string) (*Rejection, error) {
	r := &Rejection{Status: config.DefaultRejectionStatus, Body: []byte(defaultBody)}
	if c == nil {
		return r, nil
	}
	if c.Status != nil {
		r.Status = *c.Status
	}
	if c.Body != nil {
		r.Body = slices.Clone([]byte(*c.Body))
	}
	if c.Headers != nil {
		h, err := policy.NewHeaderModifier(c.Headers)
		if err != nil {
			return nil, decode.Under("rejection.headers", err)
		}
		r.headers = h
	}
	return r, nil
}

func scopeOrDefault(s []config.ContentScope) []config.ContentScope {
	if len(s) == 0 {
		return config.DefaultContentScope
	}
	return slices.Clone(s)
}

func sameScope(a, b []config.ContentScope) bool {
	if len(a) != len(b) {
		return false
	}
	for _, s := range b {
		if !slices.Contains(a, s) {
			return false
		}
	}
	return true
}

// hasContent reports whether any message has text.
func hasContent(msgs []Message) bool {
	for i := range msgs {
		if msgs[i].Content != "" {
			return true
		}
	}
	return false
}

func fieldError(path, msg string) *decode.FieldError {
	return &decode.FieldError{Path: path, Msg: msg}
}

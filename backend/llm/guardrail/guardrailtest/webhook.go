package guardrailtest

import (
	"net/http"
	"testing"
)

// Message is a text of a webhook call: agentgateway's
// SimpleChatCompletionMessage.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// WebhookCall is what a webhook is asked: the prompt's messages (POST
// .../request: {"body":{"messages":[...]}}) or the answer's choices (POST
// .../response: {"body":{"choices":[{"message":...}]}}).
type WebhookCall struct {
	Request Request
	// Answer is set for a response guard's call (choices).
	Answer   bool
	Messages []Message
}

// WebhookAction is a webhook's decision: a Pass unless Mask or Reject is
// set.
type WebhookAction struct {
	// Mask, when not nil, masks: these messages are sent back.
	Mask []Message
	// Reject, when set, rejects with this body and status_code.
	Reject *WebhookRejection
	Reason string
}

// WebhookRejection is a rejection's body and status.
type WebhookRejection struct {
	Body   string
	Status int
}

// Webhook emulates a guardrail webhook of agentgateway's protocol. It
// accepts any POST path (a :path header expression may move it) and tells
// a prompt from an answer by the body. Judge decides (nil passes
// everything).
type Webhook struct {
	*Server
	Judge func(WebhookCall) WebhookAction
}

// NewWebhook starts a webhook emulator that the test's Cleanup stops.
func NewWebhook(tb testing.TB) *Webhook {
	tb.Helper()
	w := &Webhook{Server: newServer(tb)}
	w.start(http.HandlerFunc(w.serve))
	return w
}

func webhookError(_ http.Header, status int, msg string) []byte {
	return mustJSON(obj{{"error", msg}, {"status", status}})
}

func (w *Webhook) serve(rw http.ResponseWriter, r *http.Request) {
	x := w.begin(rw, r)
	if r.Method != http.MethodPost {
		x.refuse("method "+r.Method, webhookError, http.StatusMethodNotAllowed, "method not allowed")
		return
	}
	var body struct {
		Body struct {
			Messages []Message `json:"messages"`
			Choices  []struct {
				Message Message `json:"message"`
			} `json:"choices"`
		} `json:"body"`
	}
	if !x.decode(&body) || body.Body.Messages == nil && body.Body.Choices == nil {
		x.refuse("not a guardrail call", webhookError, http.StatusBadRequest, "expected {body: {messages}} or {body: {choices}}")
		return
	}
	if !x.admit(webhookError) {
		return
	}
	call := WebhookCall{Request: x.rec, Messages: body.Body.Messages}
	if body.Body.Messages == nil {
		call.Answer = true
		for _, c := range body.Body.Choices {
			call.Messages = append(call.Messages, c.Message)
		}
	}
	var judge func(WebhookCall) WebhookAction
	w.locked(func() { judge = w.Judge })
	var act WebhookAction
	if judge != nil {
		act = judge(call)
	}
	x.writeJSON(obj{{"action", act.wire(call.Answer)}})
}

// wire is the action as the protocol writes it.
func (a WebhookAction) wire(answer bool) obj {
	var o obj
	switch {
	case a.Reject != nil:
		o = obj{{"body", a.Reject.Body}, {"status_code", a.Reject.Status}}
	case a.Mask != nil && answer:
		choices := make([]obj, len(a.Mask))
		for i, m := range a.Mask {
			choices[i] = obj{{"message", m}}
		}
		o = obj{{"body", obj{{"choices", choices}}}}
	case a.Mask != nil:
		o = obj{{"body", obj{{"messages", a.Mask}}}}
	default:
		o = obj{}
	}
	if a.Reason != "" {
		o = append(o, kv{"reason", a.Reason})
	}
	return o
}

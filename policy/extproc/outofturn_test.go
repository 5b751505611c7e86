package extproc

import (
	"testing"
	"time"

	procv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"

	"github.com/relaygate/gateway/policy"
	"github.com/relaygate/gateway/policy/extproc/extproctest"
)

// answerOf is an answer of the given kind, changing nothing but setting
// x-early when it carries header edits.
func answerOf(kind string) *procv3.ProcessingResponse {
	cr := &procv3.CommonResponse{HeaderMutation: extproctest.Set(map[string]string{"x-early": "unsolicited"})}
	hr := &procv3.HeadersResponse{Response: cr}
	br := &procv3.BodyResponse{Response: cr}
	switch kind {
	case "request_headers":
		return &procv3.ProcessingResponse{Response: &procv3.ProcessingResponse_RequestHeaders{RequestHeaders: hr}}
	case "response_headers":
		return &procv3.ProcessingResponse{Response: &procv3.ProcessingResponse_ResponseHeaders{ResponseHeaders: hr}}
	case "request_body":
		return &procv3.ProcessingResponse{Response: &procv3.ProcessingResponse_RequestBody{RequestBody: br}}
	case "response_body":
		return &procv3.ProcessingResponse{Response: &procv3.ProcessingResponse_ResponseBody{ResponseBody: br}}
	case "request_trailers":
		return &procv3.ProcessingResponse{Response: &procv3.ProcessingResponse_RequestTrailers{RequestTrailers: &procv3.TrailersResponse{}}}
	case "response_trailers":
		return &procv3.ProcessingResponse{Response: &procv3.ProcessingResponse_ResponseTrailers{ResponseTrailers: &procv3.TrailersResponse{}}}
	case "immediate":
		return &procv3.ProcessingResponse{Response: &procv3.ProcessingResponse_ImmediateResponse{ImmediateResponse: &procv3.ImmediateResponse{
			Status: &typev3.HttpStatus{Code: typev3.StatusCode_Forbidden}, Body: []byte("stopped"),
		}}}
	}
	panic(kind)
}

// bound runs f, failing the test when it takes longer than a service
// failure handled at once could (the policy's timeout is far longer).
func bound(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: still waiting after 10s (the policy's timeout is a minute): the answer out of turn was queued, not failed", what)
	}
}

// TestAnswerOutOfTurnFailsAtOnce: an answer that is not the one the
// gateway waits for (another direction's, a message never sent, trailers,
// a second answer to headers, a body's before its headers') fails the
// phase in progress at once, as the failure mode says: 500 when failing
// closed, unprocessed when failing open. An immediate response stays valid
// in either phase.
func TestAnswerOutOfTurnFailsAtOnce(t *testing.T) {
	tests := []struct {
		desc     string
		phase    string // the phase answered out of turn: request or response
		body     string // the request's
		answer   string // the answer to the phase's headers
		wantCode int    // failing closed; 0: the failure's 500
	}{
		{desc: "response headers to request headers", phase: "request", answer: "response_headers"},
		{desc: "response body to request headers", phase: "request", answer: "response_body"},
		{desc: "request body to request headers, no body sent", phase: "request", answer: "request_body"},
		{desc: "request body before the request headers' answer", phase: "request", body: "payload", answer: "request_body"},
		{desc: "request trailers", phase: "request", answer: "request_trailers"},
		{desc: "response trailers", phase: "request", answer: "response_trailers"},
		{desc: "request headers answered twice", phase: "response", answer: "request_headers"},
		{desc: "request body to response headers", phase: "response", answer: "request_body"},
		{desc: "response body before the response headers' answer", phase: "response", answer: "response_body"},
		{desc: "response trailers to response headers", phase: "response", answer: "response_trailers"},
		{desc: "immediate response to request headers", phase: "request", answer: "immediate", wantCode: 403},
		{desc: "immediate response to response headers", phase: "response", answer: "immediate", wantCode: 403},
	}
	for _, tc := range tests {
		for _, failOpen := range []bool{false, true} {
			name := tc.desc + "/failClosed"
			if failOpen {
				name = tc.desc + "/failOpen"
			}
			t.Run(name, func(t *testing.T) {
				svc := &extproctest.Server{Answer: func(st *extproctest.Stream, m *procv3.ProcessingRequest) []*procv3.ProcessingResponse {
					switch m.Request.(type) {
					case *procv3.ProcessingRequest_RequestHeaders:
						if tc.phase == "request" {
							return []*procv3.ProcessingResponse{answerOf(tc.answer)}
						}
					case *procv3.ProcessingRequest_ResponseHeaders:
						return []*procv3.ProcessingResponse{answerOf(tc.answer)}
					case *procv3.ProcessingRequest_ResponseBody:
						// Unanswered, so that the answer to the response's
						// headers is the only one the phase gets.
						return nil
					}
					return extproctest.Passthrough(st, m)
				}}
				p := compile(t, extproctest.Start(t, svc), failOpen, time.Minute)
				method := "GET"
				if tc.body != "" {
					method = "POST"
				}
				// Not reset after: a phase bound gave up on may still use it.
				c := newCtx(method, "/x", tc.body)
				var res policy.Result
				bound(t, "request phase", func() { res = p.OnRequest(c) })
				resp := &c.Fast.Response
				if tc.phase == "request" {
					switch {
					case tc.wantCode != 0:
						if res != policy.Done || resp.StatusCode() != tc.wantCode {
							t.Fatalf("result %v, status %d, want Done %d", res, resp.StatusCode(), tc.wantCode)
						}
					case failOpen:
						if res != policy.Continue || string(c.Fast.Request.Body()) != tc.body || len(c.Fast.Request.Header.Peek("x-early")) > 0 {
							t.Fatalf("failOpen: result %v, body %q, x-early %q; want Continue, the body whole, unprocessed", res, c.Fast.Request.Body(), c.Fast.Request.Header.Peek("x-early"))
						}
					default:
						if res != policy.Done || resp.StatusCode() != 500 || string(resp.Body()) != string(bodyFailed) {
							t.Fatalf("failClosed: result %v, status %d %q; want Done 500", res, resp.StatusCode(), resp.Body())
						}
					}
					return
				}
				if res != policy.Continue {
					t.Fatalf("request phase: %v, status %d", res, resp.StatusCode())
				}
				_ = c.Fast.Request.Body() // the body goes on
				resp.SetBodyString("answer")
				bound(t, "response phase", func() { p.OnResponse(c) })
				defer func() { _ = resp.CloseBodyStream() }()
				code, body := resp.StatusCode(), string(resp.Body())
				switch {
				case tc.wantCode != 0:
					if code != tc.wantCode {
						t.Fatalf("status %d %q, want %d", code, body, tc.wantCode)
					}
				case failOpen:
					if code != 200 || body != "answer" || len(resp.Header.Peek("x-early")) > 0 {
						t.Fatalf("failOpen: status %d %q, x-early %q; want the response unprocessed", code, body, resp.Header.Peek("x-early"))
					}
				default:
					if code != 500 || body != string(bodyFailed) {
						t.Fatalf("failClosed: status %d %q, want 500", code, body)
					}
				}
			})
		}
	}
}

// TestUnsolicitedAnswerIsNotKeptForLater: a service that answers the
// request's headers and then, unasked, sends an answer for the response
// breaks the stream when it does: the gateway ends it, and the response
// phase fails as the failure mode says (500, or the response unprocessed)
// instead of applying the early answer to the real response.
func TestUnsolicitedAnswerIsNotKeptForLater(t *testing.T) {
	for _, failOpen := range []bool{false, true} {
		svc := &extproctest.Server{}
		p := compile(t, extproctest.Start(t, svc), failOpen, time.Minute)
		c := newCtx("GET", "/x", "")
		if res := p.OnRequest(c); res != policy.Continue {
			t.Fatalf("failOpen=%v: request phase %v, status %d", failOpen, res, c.Fast.Response.StatusCode())
		}
		st := svc.Last(t)
		if err := st.Send(answerOf("response_headers")); err != nil {
			t.Fatal(err)
		}
		select {
		case <-st.Done():
		case <-time.After(10 * time.Second):
			t.Errorf("failOpen=%v: the gateway kept the stream after an answer out of turn", failOpen)
		}
		resp := &c.Fast.Response
		resp.SetBodyString("answer")
		bound(t, "response phase", func() { p.OnResponse(c) })
		code, body, early := resp.StatusCode(), string(resp.Body()), string(resp.Header.Peek("x-early"))
		if early != "" {
			t.Errorf("failOpen=%v: the unsolicited answer was applied to the response (x-early: %s)", failOpen, early)
		}
		switch {
		case failOpen && (code != 200 || body != "answer"):
			t.Errorf("failOpen: status %d %q, want the response unprocessed", code, body)
		case !failOpen && (code != 500 || body != string(bodyFailed)):
			t.Errorf("failClosed: status %d %q, want 500", code, body)
		}
		_ = resp.CloseBodyStream()
		c.Reset()
	}
}

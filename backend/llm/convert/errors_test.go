package convert

import (
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestProviderErrorGolden(t *testing.T) {
	cases := []struct {
		desc     string
		provider Format
		status   int
		body     string
	}{
		{desc: "openai invalid request", provider: Chat, status: 400, body: `{"error":{"message":"Invalid 'messages[1].content'","type":"invalid_request_error","param":"messages","code":null}}`},
		{desc: "openai rate limit", provider: Chat, status: 429, body: `{"error":{"message":"Rate limit reached","type":"requests","param":null,"code":"rate_limit_exceeded"}}`},
		{desc: "anthropic overloaded", provider: Messages, status: 529, body: `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`},
		{desc: "anthropic auth", provider: Messages, status: 401, body: `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`},
		{desc: "gemini invalid argument", provider: Gemini, status: 400, body: `{"error":{"code":400,"message":"Request contains an invalid argument.","status":"INVALID_ARGUMENT"}}`},
		{desc: "gemini quota, array-wrapped", provider: Gemini, status: 429, body: `[{"error":{"code":429,"message":"Resource has been exhausted","status":"RESOURCE_EXHAUSTED"}}]`},
		{desc: "bedrock validation", provider: Bedrock, status: 400, body: `{"message":"The model returned the following errors: messages: roles must alternate"}`},
		{desc: "bedrock access denied, capitalised", provider: Bedrock, status: 403, body: `{"Message":"User is not authorized"}`},
		{desc: "not JSON (a proxy's page)", provider: Chat, status: 502, body: "<html>Bad Gateway</html>"},
	}
	var got []byte
	for _, tc := range cases {
		for _, client := range clientFormats {
			if client == tc.provider {
				continue
			}
			out, status := ProviderError(nil, RequestInfo{Client: client, Provider: tc.provider}, tc.status, []byte(tc.body))
			got = append(got, "# "+tc.desc+" -> "+client.String()+" ("+strconv.Itoa(status)+")\n"...)
			got = append(got, out...)
			got = append(got, '\n')
			if status != tc.status {
				t.Errorf("%s: status %d, want the provider's %d", tc.desc, status, tc.status)
			}
			indent(t, out)
		}
	}
	checkGolden(t, filepath.Join("testdata/errors", "provider_errors.golden"), got)
}

func TestAppendError(t *testing.T) {
	cases := []struct {
		desc   string
		f      Format
		status int
		want   string
	}{
		{desc: "chat 400", f: Chat, status: 400, want: `{"error":{"message":"m \"q\"","type":"invalid_request_error","param":null,"code":null}}`},
		{desc: "messages 429", f: Messages, status: 429, want: `{"type":"error","error":{"type":"rate_limit_error","message":"m \"q\""}}`},
		{desc: "messages 500", f: Messages, status: 500, want: `{"type":"error","error":{"type":"api_error","message":"m \"q\""}}`},
		{desc: "responses 503", f: Responses, status: 503, want: `{"error":{"message":"m \"q\"","type":"server_error","param":null,"code":null}}`},
		{desc: "chat 404", f: Chat, status: 404, want: `{"error":{"message":"m \"q\"","type":"invalid_request_error","param":null,"code":null}}`},
		{desc: "messages 404", f: Messages, status: 404, want: `{"type":"error","error":{"type":"not_found_error","message":"m \"q\""}}`},
		{desc: "gemini 404", f: Gemini, status: 404, want: `{"error":{"code":404,"message":"m \"q\"","status":"NOT_FOUND"}}`},
		{desc: "bedrock 400", f: Bedrock, status: 400, want: `{"message":"m \"q\""}`},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			if got := string(AppendError(nil, tc.f, tc.status, `m "q"`)); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

// TestAppendRateLimitError: a 429 of the gateway's rate limit in each
// client's API's words.
func TestAppendRateLimitError(t *testing.T) {
	for f, want := range map[Format]string{
		Chat:      `{"error":{"message":"m \"q\"","type":"tokens","param":null,"code":"rate_limit_exceeded"}}`,
		Responses: `{"error":{"message":"m \"q\"","type":"tokens","param":null,"code":"rate_limit_exceeded"}}`,
		Messages:  `{"type":"error","error":{"type":"rate_limit_error","message":"m \"q\""}}`,
	} {
		if got := string(AppendRateLimitError(nil, f, "tokens", `m "q"`)); got != want {
			t.Errorf("%v:\ngot  %s\nwant %s", f, got, want)
		}
	}
	want := `{"error":{"message":"m","type":"requests","param":null,"code":"rate_limit_exceeded"}}`
	if got := string(AppendRateLimitError(nil, Chat, "requests", "m")); got != want {
		t.Errorf("requests:\ngot  %s\nwant %s", got, want)
	}
}

func TestErrorTextBounded(t *testing.T) {
	body := strings.Repeat("é", 2000)
	out, _ := ProviderError(nil, RequestInfo{Client: Chat, Provider: Bedrock}, 500, []byte(body))
	if len(out) > maxErrorText+200 || strings.Contains(string(out), `\ufffd`) {
		t.Errorf("error text not bounded at a rune: %d bytes: %.80s", len(out), out)
	}
}

// TestProviderErrorSameFormat: a same-format provider's error is copied
// when it is in the client's shape, and translated when it is not (Vertex
// AI answers some errors before Claude in Google's shape).
func TestProviderErrorSameFormat(t *testing.T) {
	cases := []struct {
		desc   string
		f      Format
		status int
		body   string
		want   string
	}{
		{desc: "anthropic error, copied", f: Messages, status: 529,
			body: `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"req_1"}`,
			want: `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"req_1"}`},
		{desc: "vertex quota error before claude, translated", f: Messages, status: 429,
			body: `{"error":{"code":429,"message":"Quota exceeded","status":"RESOURCE_EXHAUSTED"}}`,
			want: `{"type":"error","error":{"type":"rate_limit_error","message":"Quota exceeded"}}`},
		{desc: "anthropic shape without a type, translated", f: Messages, status: 500,
			body: `{"type":"error","error":{"message":"boom"}}`,
			want: `{"type":"error","error":{"type":"api_error","message":"boom"}}`},
		{desc: "openai error, copied", f: Chat, status: 400,
			body: `{"error":{"message":"bad","type":"invalid_request_error","param":null,"code":null}}`,
			want: `{"error":{"message":"bad","type":"invalid_request_error","param":null,"code":null}}`},
		{desc: "azure error (no type), copied: the SDK reads its message", f: Chat, status: 429,
			body: `{"error":{"code":"429","message":"Rate limited"}}`,
			want: `{"error":{"code":"429","message":"Rate limited"}}`},
		{desc: "a proxy's page before openai, translated", f: Responses, status: 502,
			body: `<html>Bad Gateway</html>`,
			want: `{"error":{"message":"<html>Bad Gateway</html>","type":"server_error","param":null,"code":null}}`},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			out, status := ProviderError([]byte("prefix:"), RequestInfo{Client: tc.f, Provider: tc.f}, tc.status, []byte(tc.body))
			if got := strings.TrimPrefix(string(out), "prefix:"); got != tc.want || status != tc.status {
				t.Errorf("got  %d %s\nwant %d %s", status, got, tc.status, tc.want)
			}
		})
	}
}

// TestAnswerError: an answer with a success status that is an error object,
// or no answer, is an AnswerError with the status its error names (else
// 502), translated or passed on; answers that only look empty (a Gemini
// prompt blocked, an Anthropic-compatible answer without its type) are
// answers.
// A Responses answer without output is still one when it is a response
// object: a background request's answer is queued (output [], usage null),
// and passed on as it is.
func TestResponsesQueuedIsAnAnswer(t *testing.T) {
	body := `{"id":"resp_1","object":"response","status":"queued","background":true,"output":[],"usage":null}`
	out, _, err := Response(nil, []byte(body), RequestInfo{Client: Responses, Provider: Responses, Model: "m"})
	if err != nil {
		t.Fatalf("a queued response refused: %v", err)
	}
	if !strings.Contains(string(out), `"status":"queued"`) {
		t.Fatalf("passed on as %s", out)
	}
}

func TestAnswerError(t *testing.T) {
	for _, tc := range []struct {
		provider Format
		body     string
		status   int // 0: an answer
		typ, msg string
	}{
		{Messages, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, 529, "overloaded_error", "Overloaded"},
		{Messages, `{"type":"error","error":{"type":"invalid_request_error","message":"bad"}}`, 400, "invalid_request_error", "bad"},
		{Messages, `{}`, 502, "", "the provider's answer is not a message"},
		{Messages, `{"content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn"}`, 0, "", ""},
		{Gemini, `{"error":{"code":429,"message":"Resource exhausted","status":"RESOURCE_EXHAUSTED"}}`, 429, "rate_limit_error", "Resource exhausted"},
		{Gemini, `{"error":{"code":200,"message":"odd"}}`, 502, "api_error", "odd"},
		{Gemini, `{"promptFeedback":{"blockReason":"SAFETY"},"usageMetadata":{"promptTokenCount":3}}`, 0, "", ""},
		{Gemini, `{"usageMetadata":{"promptTokenCount":3}}`, 502, "", "the provider's answer has no candidates"},
		{Bedrock, `{"message":"throttled"}`, 502, "", "throttled"},
		{Bedrock, `{"Message":"throttled"}`, 502, "", "throttled"},
		{Bedrock, `null`, 502, "", "invalid response from provider: llm: invalid JSON object"},
		{Chat, `{"error":{"message":"The server had an error","type":"server_error"}}`, 502, "server_error", "The server had an error"},
		{Chat, `{"id":"x","choices":[]}`, 502, "", "the provider's answer has no choices"},
		{Responses, `{"error":{"message":"The server had an error","type":"server_error"}}`, 502, "server_error", "The server had an error"},
		{Responses, `{"id":"r"}`, 502, "", "the provider's answer has no output"},
	} {
		for _, client := range []Format{tc.provider, Chat, Messages} {
			if client == Bedrock || client == Gemini || tc.provider == Responses && client != Responses {
				continue
			}
			t.Run(tc.provider.String()+" to "+client.String()+" "+tc.body, func(t *testing.T) {
				_, _, err := Response(nil, []byte(tc.body), RequestInfo{Client: client, Provider: tc.provider, Model: "m"})
				var ae *AnswerError
				if tc.status == 0 {
					if err != nil {
						t.Fatalf("an answer refused: %v", err)
					}
					return
				}
				if !errors.As(err, &ae) || ae.Status != tc.status || ae.Type != tc.typ || string(ae.Message) != tc.msg {
					t.Fatalf("err %v (%+v), want status %d type %q message %q", err, ae, tc.status, tc.typ, tc.msg)
				}
			})
		}
	}
}

// TestRequestTypeErrors: a translated request with a value of the wrong
// type is refused with a message naming it, and the head's members with
// the message a same-format route gives; never the decoder's text, which
// quoted the body around the error ("Mismatch type int64 with value ...
// at index 74").
func TestRequestTypeErrors(t *testing.T) {
	for _, tc := range []struct {
		client Format
		body   string
		want   string
	}{
		{Chat, `{"model":"m","max_tokens":5000.5,"messages":[{"role":"user","content":"hi"}]}`, `invalid chat completions request: "max_tokens" is not an integer`},
		{Messages, `{"model":"m","max_tokens":5000.5,"messages":[{"role":"user","content":"hi"}]}`, `invalid messages request: "max_tokens" is not an integer`},
		// An output bound below 1 is no bound a provider serves (and not
		// none, which would send the default).
		{Chat, `{"model":"m","max_tokens":-5,"messages":[{"role":"user","content":"hi"}]}`, `invalid chat completions request: "max_tokens" must be at least 1`},
		{Chat, `{"model":"m","max_tokens":0,"messages":[{"role":"user","content":"hi"}]}`, `invalid chat completions request: "max_tokens" must be at least 1`},
		{Chat, `{"model":"m","max_tokens":null,"max_completion_tokens":0,"messages":[{"role":"user","content":"hi"}]}`, `invalid chat completions request: "max_completion_tokens" must be at least 1`},
		{Messages, `{"model":"m","max_tokens":-5,"messages":[{"role":"user","content":"hi"}]}`, `invalid messages request: "max_tokens" must be at least 1`},
		{Messages, `{"model":"m","max_tokens":0,"messages":[{"role":"user","content":"hi"}]}`, `invalid messages request: "max_tokens" must be at least 1`},
		{Responses, `{"model":"m","max_output_tokens":0,"input":"hi"}`, `invalid responses request: "max_output_tokens" must be at least 1`},
		{Responses, `{"model":"m","max_output_tokens":-1,"input":"hi"}`, `invalid responses request: "max_output_tokens" must be at least 1`},
		{Responses, `{"model":"m","max_output_tokens":"9","input":"hi"}`, `invalid responses request: "max_output_tokens" is not an integer`},
		{Chat, `{"model":"m","stream":"yes","messages":[{"role":"user","content":"hi"}]}`, `invalid chat completions request: "stream" is not a boolean`},
		{Chat, `{"model":"m","tools":{},"messages":[{"role":"user","content":"hi"}]}`, "invalid chat completions request: tools has the wrong type"},
		{Messages, `{"model":"m","max_tokens":5,"tools":{},"messages":[{"role":"user","content":"hi"}]}`, "invalid messages request: tools has the wrong type"},
		{Responses, `{"model":"m","tools":{},"input":"hi"}`, "invalid responses request: tools has the wrong type"},
		{Chat, `{"model":"m","messages":[{"role":"user","content":"hi"},{"role":5,"content":"x"}]}`, "invalid chat completions request: messages[1].role has the wrong type"},
		{Messages, `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":5}]}`, "invalid content: the value has the wrong type"},
		{Messages, `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image","source":5}]}]}`, "invalid content: [1].source has the wrong type"},
	} {
		t.Run(tc.client.String()+" "+tc.body, func(t *testing.T) {
			_, _, err := Request(nil, tc.client, Gemini, []byte(tc.body), nil)
			var ce *Error
			if !errors.As(err, &ce) || ce.Status != 400 || ce.Message != tc.want {
				t.Fatalf("err %v, want 400 %q", err, tc.want)
			}
		})
	}
}

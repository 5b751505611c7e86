package awssign

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/relaygate/gateway/backend/llm/llmtest"
	"github.com/relaygate/gateway/config"
)

var testAuth = &config.AWSAuth{AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "secret", SessionToken: "token", Region: ptr("eu-west-3"), ServiceName: ptr("execute-api")}

func ptr(s string) *string { return &s }

// toHTTP is what a server receives of req.
func toHTTP(t testing.TB, req *fasthttp.Request) (*http.Request, []byte) {
	t.Helper()
	r, err := http.NewRequest(string(req.Header.Method()), "http://"+string(req.Header.Host())+string(req.Header.RequestURI()), nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range req.Header.All() {
		r.Header.Add(string(k), string(v))
	}
	return r, req.Body()
}

// TestSign: a signed request passes the emulated AWS check (the SDK's
// signer recomputing it), a client's own signature headers are replaced,
// and a streamed body is refused rather than signed unhashed.
func TestSign(t *testing.T) {
	check := &llmtest.SigV4Check{AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "secret", SessionToken: "token",
		Region: "eu-west-3", Service: "execute-api", MaxClockSkew: time.Minute}
	s := New(testAuth, "us-east-1")
	for _, tc := range []struct{ desc, method, target, body string }{
		{"get", "GET", "/prod/items?b=2&a=1", ""},
		{"post", "POST", "/prod/items", `{"n":1}`},
		{"escaped path", "GET", "/prod/a%20b/c", ""},
	} {
		var req fasthttp.Request
		req.Header.SetMethod(tc.method)
		req.SetRequestURI(tc.target)
		req.Header.SetHost("api.example.com")
		req.Header.Set("X-Amz-Date", "20200101T000000Z")
		req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=CLIENT/x")
		req.SetBodyString(tc.body)
		if err := s.Sign(context.Background(), &req); err != nil {
			t.Fatalf("%s: %v", tc.desc, err)
		}
		r, body := toHTTP(t, &req)
		if reason, _, _ := check.Verify(r, body); reason != "" {
			t.Errorf("%s: %s (%q)", tc.desc, reason, r.Header.Get("Authorization"))
		}
		if n := len(r.Header.Values("Authorization")); n != 1 {
			t.Errorf("%s: %d Authorization headers", tc.desc, n)
		}
	}
	var req fasthttp.Request
	req.Header.SetMethod("POST")
	req.SetBodyStream(strings.NewReader("x"), -1)
	if err := s.Sign(context.Background(), &req); err == nil {
		t.Error("a streamed body was signed")
	}
}

// BenchmarkSign: signing one request, as a host backend with backendAuth
// aws does on each.
func BenchmarkSign(b *testing.B) {
	s := New(testAuth, "")
	var req fasthttp.Request
	body := []byte(strings.Repeat(`{"n":1}`, 100))
	b.ReportAllocs()
	for b.Loop() {
		req.Reset()
		req.Header.SetMethod("POST")
		req.SetRequestURI("/prod/items?a=1")
		req.Header.SetHost("api.example.com")
		req.Header.SetContentType("application/json")
		req.SetBodyRaw(body)
		if err := s.Sign(context.Background(), &req); err != nil {
			b.Fatal(err)
		}
	}
}

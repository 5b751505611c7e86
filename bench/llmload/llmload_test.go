package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

const sentBody = `{"model":"fast","messages":[{"role":"system","content":"Be brief."},` +
	`{"role":"user","content":"Write to jane.doe@example.com, or to ops@corp.example.org."}]}`

func TestCheckRewritten(t *testing.T) {
	tests := []struct {
		desc    string
		seen    string
		wantErr string // "" for none
	}{
		{desc: "rewritten as configured",
			seen: `{"model":"gpt-4o-mini","messages":[{"role":"system","content":"Be brief."},` +
				`{"role":"user","content":"Write to <EMAIL_ADDRESS>, or to <EMAIL_ADDRESS>."}],"temperature":0.2}`},
		{desc: "alias not resolved",
			seen:    `{"model":"fast","messages":[{},{"content":"<EMAIL>"}],"temperature":0.2}`,
			wantErr: `model "fast", want "gpt-4o-mini"`},
		{desc: "default not applied",
			seen:    `{"model":"gpt-4o-mini","messages":[{},{"content":"<EMAIL>"}]}`,
			wantErr: "temperature absent, want 0.2"},
		{desc: "a client's own temperature is not the default",
			seen:    `{"model":"gpt-4o-mini","messages":[{},{"content":"<EMAIL>"}],"temperature":0.9}`,
			wantErr: "temperature 0.9, want 0.2"},
		{desc: "one address left",
			seen:    `{"model":"gpt-4o-mini","messages":[{},{"content":"<EMAIL> ops@corp.example.org"}],"temperature":0.2}`,
			wantErr: "the e-mail address ops@corp.example.org was not masked"},
		{desc: "a message dropped",
			seen:    `{"model":"gpt-4o-mini","messages":[{"content":"<EMAIL>"}],"temperature":0.2}`,
			wantErr: "1 messages, want 2"},
		{desc: "not JSON", seen: `model: gpt-4o-mini`, wantErr: "what the provider got"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			err := checkRewritten([]byte(sentBody), []byte(tc.seen))
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestEmailsIn(t *testing.T) {
	got := emailsIn([]byte(sentBody))
	if strings.Join(got, " ") != "jane.doe@example.com ops@corp.example.org" {
		t.Fatalf("emailsIn = %q", got)
	}
	body, err := os.ReadFile(filepath.Join("..", "llm", "request.json"))
	if err != nil {
		t.Fatal(err)
	}
	if got := emailsIn(body); len(got) != 1 || got[0] != "jane.doe@example.com" {
		t.Fatalf("bench/llm/request.json: emailsIn = %q, want the one address it holds", got)
	}
}

func TestPercentiles(t *testing.T) {
	tests := []struct {
		desc          string
		n             int // latencies 1..n µs, shuffled
		p50, p99, max time.Duration
	}{
		{desc: "one", n: 1, p50: 1 * time.Microsecond, p99: 1 * time.Microsecond, max: 1 * time.Microsecond},
		{desc: "hundred", n: 100, p50: 50 * time.Microsecond, p99: 99 * time.Microsecond, max: 100 * time.Microsecond},
		{desc: "thousand", n: 1000, p50: 500 * time.Microsecond, p99: 990 * time.Microsecond, max: 1000 * time.Microsecond},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			lat := make([]time.Duration, tc.n)
			for i := range lat {
				lat[i] = time.Duration((i*7919)%tc.n+1) * time.Microsecond
			}
			p50, p99, highest := percentiles(lat)
			if p50 != tc.p50 || p99 != tc.p99 || highest != tc.max {
				t.Fatalf("got %v %v %v, want %v %v %v", p50, p99, highest, tc.p50, tc.p99, tc.max)
			}
		})
	}
	if a, b, c := percentiles(nil); a != 0 || b != 0 || c != 0 {
		t.Fatal("percentiles of nothing are not zero")
	}
}

// provider is a stand-in for bench/llmupstream: it records the last body
// marked for recording and answers a chat completion, or fails every
// failEvery-th request.
type provider struct {
	mu        sync.Mutex
	last      []byte
	n         int
	failEvery int
	rewrite   func([]byte) []byte
}

func (p *provider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/last" {
		p.mu.Lock()
		defer p.mu.Unlock()
		_, _ = w.Write(p.last)
		return
	}
	body, _ := io.ReadAll(r.Body)
	p.mu.Lock()
	p.n++
	fail := p.failEvery > 0 && p.n%p.failEvery == 0
	if r.Header.Get(recordHeader) != "" {
		if p.rewrite != nil {
			body = p.rewrite(body)
		}
		p.last = body
	}
	p.mu.Unlock()
	if fail {
		http.Error(w, "overloaded", http.StatusServiceUnavailable)
		return
	}
	_, _ = io.WriteString(w, `{"object":"chat.completion","usage":{"total_tokens":3}}`)
}

func TestRunCheck(t *testing.T) {
	body := filepath.Join(t.TempDir(), "body.json")
	if err := os.WriteFile(body, []byte(sentBody), 0o644); err != nil {
		t.Fatal(err)
	}
	gatewayLike := func([]byte) []byte {
		return []byte(`{"model":"gpt-4o-mini","messages":[{},{"content":"x"}],"temperature":0.2}`)
	}
	tests := []struct {
		desc    string
		rewrite func([]byte) []byte
		expect  string
		wantErr string
	}{
		{desc: "raw passes through", expect: "raw"},
		{desc: "raw altered", expect: "raw", rewrite: gatewayLike, wantErr: "differ"},
		{desc: "gateway rewrites", expect: "gateway", rewrite: gatewayLike},
		{desc: "gateway that did nothing", expect: "gateway", wantErr: `model "fast"`},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			srv := httptest.NewServer(&provider{rewrite: tc.rewrite})
			defer srv.Close()
			err := runCheck([]string{"-url", srv.URL + "/v1/chat/completions", "-upstream", srv.URL, "-body", body, "-expect", tc.expect})
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

// TestAttack: a short constant-rate run over real sockets counts every
// request, and the failed ones.
func TestAttack(t *testing.T) {
	p := &provider{failEvery: 10}
	srv := httptest.NewServer(p)
	defer srv.Close()
	tgt := vegeta.Target{Method: http.MethodPost, URL: srv.URL + "/v1/chat/completions", Body: []byte(sentBody)}
	s := attack(tgt, 200, 500*time.Millisecond)
	// 100 are due; a loaded machine may start fewer before the end.
	p.mu.Lock()
	served := p.n
	p.mu.Unlock()
	if s.Requests < 50 || s.Requests > 100 || s.Requests != served {
		t.Fatalf("%d requests at 200/s for 0.5 s (the server saw %d), want 50 to 100, all seen", s.Requests, served)
	}
	if want := served / 10; s.Errors != want || !strings.Contains(s.FirstErr, "503") {
		t.Fatalf("%d errors (first %q), want %d with status 503", s.Errors, s.FirstErr, want)
	}
	if s.P50 <= 0 || s.P99 < s.P50 || s.Max < s.P99 {
		t.Fatalf("latencies p50 %v p99 %v max %v", s.P50, s.P99, s.Max)
	}
	kv := s.kv()
	for _, want := range []string{"target_rate=200\n", fmt.Sprintf("requests=%d\n", served), fmt.Sprintf("errors=%d\n", served/10), "p50_us=", "p99_us=", "first_error=status 503"} {
		if !strings.Contains(kv, want) {
			t.Errorf("summary lacks %q:\n%s", want, kv)
		}
	}
}

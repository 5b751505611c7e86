package main

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestExpectationCheck(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ten":
			_, _ = w.Write([]byte("0123456789"))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()

	tests := []struct {
		desc    string
		path    string
		want    expectation
		wantErr string
	}{
		{desc: "status and length match", path: "/ten", want: expectation{status: 200, length: 10}},
		{desc: "any length", path: "/ten", want: expectation{status: 200, length: -1}},
		{desc: "length mismatch", path: "/ten", want: expectation{status: 200, length: 11}, wantErr: "body is 10 bytes, want 11"},
		{desc: "status mismatch", path: "/missing", want: expectation{status: 200, length: -1}, wantErr: "status 404, want 200"},
		{desc: "expected error status", path: "/missing", want: expectation{status: 404, length: -1}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			err := tc.want.check(context.Background(), srv.Client(), srv.URL+tc.path)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("check: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("check error = %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

// waitFor polls cond until it holds, failing the test after a bound.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached within 5s")
		}
		time.Sleep(5 * time.Millisecond) // polling interval, bounded above
	}
}

func TestPoll(t *testing.T) {
	tests := []struct {
		desc      string
		failFirst int32
		failWith  error
		timeout   time.Duration
		wantErr   bool
		wantCalls int32
	}{
		{desc: "succeeds at once", failFirst: 0, timeout: time.Second, wantCalls: 1},
		{desc: "succeeds after retries", failFirst: 3, timeout: 5 * time.Second, wantCalls: 4},
		{desc: "gives up at the bound", failFirst: 1 << 30, timeout: 50 * time.Millisecond, wantErr: true},
		{desc: "stops when the process exited", failFirst: 1 << 30, failWith: errExited, timeout: 5 * time.Second, wantErr: true, wantCalls: 1},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), tc.timeout)
			defer cancel()
			var calls atomic.Int32
			failWith := tc.failWith
			if failWith == nil {
				failWith = errors.New("busy")
			}
			err := poll(ctx, time.Millisecond, func() error {
				if calls.Add(1) <= tc.failFirst {
					return failWith
				}
				return nil
			})
			if tc.wantErr {
				if !errors.Is(err, failWith) {
					t.Fatalf("poll error = %v, want one wrapping %v", err, failWith)
				}
			} else if err != nil {
				t.Fatalf("poll: %v", err)
			}
			if got := calls.Load(); tc.wantCalls > 0 && got != tc.wantCalls {
				t.Fatalf("try called %d times, want %d", got, tc.wantCalls)
			}
		})
	}
}

// TestExpectationSendsMethodBodyAndHeaders: a POST with a body and a header
// arrives as asked; a GET sends no body.
func TestExpectationSendsMethodBodyAndHeaders(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Method == http.MethodPost && string(body) == `{"a":1}` && r.Header.Get("Authorization") == "Bearer k" {
			_, _ = w.Write([]byte("ok"))
			return
		}
		if r.Method == http.MethodGet && len(body) == 0 {
			_, _ = w.Write([]byte("get"))
			return
		}
		w.WriteHeader(http.StatusTeapot)
	}))
	defer srv.Close()
	ctx := context.Background()
	post := expectation{status: 200, length: 2, method: http.MethodPost, body: []byte(`{"a":1}`),
		header: http.Header{"Authorization": {"Bearer k"}}}
	if err := post.check(ctx, srv.Client(), srv.URL); err != nil {
		t.Fatalf("POST: %v", err)
	}
	if err := (expectation{status: 200, length: 3}).check(ctx, srv.Client(), srv.URL); err != nil {
		t.Fatalf("GET: %v", err)
	}
	var h headerFlags
	if err := h.Set("Authorization: Bearer k"); err != nil || http.Header(h).Get("Authorization") != "Bearer k" {
		t.Fatalf("-header: %v %v", err, h)
	}
	if err := h.Set("no colon"); err == nil {
		t.Fatal(`-header "no colon" accepted`)
	}
}

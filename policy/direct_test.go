package policy

import (
	"errors"
	"strings"
	"testing"

	"github.com/relaygate/gateway/config"
)

func TestNewDirectResponseRefuses(t *testing.T) {
	tests := []struct {
		desc  string
		cfg   *config.DirectResponse
		field string
	}{
		{desc: "no config", cfg: nil, field: ""},
		{desc: "no status", cfg: &config.DirectResponse{Body: config.Bytes("x")}, field: "status"},
		{desc: "status too low", cfg: &config.DirectResponse{Status: intp(101)}, field: "status"},
		{desc: "status too high", cfg: &config.DirectResponse{Status: intp(600)}, field: "status"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			p, err := NewDirectResponse(tt.cfg)
			if err == nil {
				t.Fatalf("NewDirectResponse = %v, want an error", p)
			}
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != tt.field {
				t.Errorf("error = %v, want a *FieldError for field %q", err, tt.field)
			}
		})
	}
}

func TestDirectResponse(t *testing.T) {
	tests := []struct {
		desc   string
		status int
		body   string
	}{
		{desc: "body", status: 200, body: `{"ok":true}`},
		{desc: "no body", status: 204, body: ""},
		{desc: "error status", status: 503, body: "maintenance\n"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			cfg := &config.DirectResponse{Status: intp(tt.status), Body: config.Bytes(tt.body)}
			p, err := NewDirectResponse(cfg)
			if err != nil {
				t.Fatal(err)
			}
			cfg.Body = append(cfg.Body[:0], "mutated"...) // the policy keeps its own copy
			c := newCtx("POST", "/anything")
			if got := p.OnRequest(c); got != Done {
				t.Fatalf("OnRequest = %s, want Done", resultName(got))
			}
			resp := &c.Fast.Response
			if resp.StatusCode() != tt.status || string(resp.Body()) != tt.body {
				t.Errorf("answer = %d %q, want %d %q", resp.StatusCode(), resp.Body(), tt.status, tt.body)
			}
			if wire := wireResponse(t, resp); strings.Contains(wire, "Content-Type") {
				t.Errorf("direct response has a Content-Type:\n%s", wire)
			}
		})
	}
}

func TestDirectResponseZeroAllocs(t *testing.T) {
	p, err := NewDirectResponse(&config.DirectResponse{Status: intp(200), Body: config.Bytes("hello")})
	if err != nil {
		t.Fatal(err)
	}
	c := newCtx("GET", "/")
	allocs := testing.AllocsPerRun(100, func() {
		c.Fast.Response.Reset()
		p.OnRequest(c)
	})
	if allocs != 0 {
		t.Errorf("allocations per request = %v, want 0", allocs)
	}
}

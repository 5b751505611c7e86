package server

import (
	"testing"

	"github.com/relaygate/gateway/codec/logline"
	"github.com/relaygate/gateway/config"
)

// TestAccessLogAddReplacesBuiltIn: an added field named like a built-in
// one leaves the built-in out of the line, so the line has the key once
// (agentgateway's semantics); other added fields leave the built-ins be.
func TestAccessLogAddReplacesBuiltIn(t *testing.T) {
	p, err := newAccessLogPolicy(&config.AccessLogPolicy{Add: map[string]config.ValueExpression{
		"backend": "backend", "tls.sni": `"x"`, "team": `"blue"`,
	}})
	if err != nil {
		t.Fatal(err)
	}
	backend, _ := logline.AccessFieldNamed("backend")
	sni, _ := logline.AccessFieldNamed("tls.sni")
	route, _ := logline.AccessFieldNamed("route")
	if p.omit&backend == 0 || p.connOmit&backend == 0 {
		t.Errorf("backend is not left out of the lines: %b, %b", p.omit, p.connOmit)
	}
	if p.connOmit&sni == 0 {
		t.Errorf("tls.sni is not left out of the connection line: %b", p.connOmit)
	}
	if (p.omit|p.connOmit)&route != 0 {
		t.Error("route, not added, is left out")
	}
}

package credential

import (
	"net/http"

	"github.com/relaygate/gateway/policy"
)

// Refusal is how an authentication kind refuses a request whose credential
// travels at a location: 401 with WWW-Authenticate, or, for a credential in
// Proxy-Authorization, which is addressed to the proxy, 407 with
// Proxy-Authenticate (RFC 9110 11.7.1).
type Refusal struct {
	Status int
	Header []byte // the challenge's header name
}

var (
	headerWWWAuthenticate   = []byte("WWW-Authenticate")
	headerProxyAuthenticate = []byte("Proxy-Authenticate")
	contentTypeText         = []byte("text/plain; charset=utf-8")
)

// Refusal returns how a credential at l is refused.
func (l *Location) Refusal() Refusal {
	if l.IsProxyHeader() {
		return Refusal{Status: http.StatusProxyAuthRequired, Header: headerProxyAuthenticate}
	}
	return Refusal{Status: http.StatusUnauthorized, Header: headerWWWAuthenticate}
}

// Write answers c with the refusal: its status, the challenge and a plain
// text body.
func (r Refusal) Write(c *policy.Ctx, challenge, body []byte) policy.Result {
	resp := &c.Fast.Response
	resp.SetStatusCode(r.Status)
	resp.Header.SetContentTypeBytes(contentTypeText)
	resp.Header.SetBytesKV(r.Header, challenge)
	resp.SetBody(body)
	return policy.Done
}

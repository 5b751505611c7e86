package server

import (
	"errors"
	"slices"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/relaygate/gateway/backend"
	"github.com/relaygate/gateway/codec/logline"
	"github.com/relaygate/gateway/config"
	"github.com/relaygate/gateway/policy"
)

// This file compiles the backendTLS policy into the TLS settings of an
// upstream pool, and reports the handshakes that fail.
//
// backendTLS is a kind a route holds for its backends (routeKinds lists it
// without a build): routeBackend inherits the route's setting into the
// backend's PolicySet below the backend's own levels, so that the backend
// level replaces the route's whole, as for every kind. The merged value
// becomes PoolSettings.TLS, part of the pool key, for host and dynamic
// backends, the HTTP targets of an MCP backend and every provider of an ai
// backend (a provider's own backendTLS replacing it).

// compileBackendTLS turns a backendTLS policy into pool settings, reading
// its files now: one that cannot be used is an error naming its field
// (cert, key or root), so a file that loads never fails a dial for it.
func compileBackendTLS(cfg *config.BackendTLS) (backend.UpstreamTLS, error) {
	t := backend.UpstreamTLS{
		Enabled:           true,
		ServerName:        cfg.Hostname,
		RootsFile:         cfg.Root,
		CertFile:          cfg.Cert,
		KeyFile:           cfg.Key,
		Insecure:          cfg.Insecure,
		InsecureHost:      cfg.InsecureHost,
		SubjectAltNames:   backend.JoinList(cfg.SubjectAltNames),
		ALPN:              backend.JoinList(cfg.ALPN),
		KeyExchangeGroups: backend.JoinList(cfg.KeyExchangeGroups),
	}
	loaded, err := t.Load()
	if err != nil {
		var fe *backend.TLSFileError
		if errors.As(err, &fe) {
			return t, &policy.FieldError{Field: fe.Role, Msg: strconv.Quote(fe.Path) + ": " + fe.Msg}
		}
		return t, err
	}
	return loaded, nil
}

// checkHTTPALPN holds backendTLS's alpn list to the protocols a backend
// speaks to its targets: host and dynamic backends (h2 allowed) HTTP/1.1 or
// HTTP/2 as http.version (version, versionAuto when unset) lets them, MCP
// and LLM targets HTTP/1.1 only. A list that would leave the setting
// unheeded is an error rather than narrowed in silence. (A TCP route
// carries bytes: it offers any list.)
func checkHTTPALPN(alpn []string, h2 bool, version int) error {
	if len(alpn) == 0 {
		return nil
	}
	at := func(name string) string { return "alpn[" + strconv.Itoa(slices.Index(alpn, name)) + "]" }
	hasH1, hasH2 := slices.Contains(alpn, backend.ALPNHTTP11), slices.Contains(alpn, "h2")
	switch {
	case hasH2 && !h2:
		return &policy.FieldError{Field: at("h2"), Msg: "this backend kind speaks HTTP/1.1 to its targets: offer http/1.1"}
	case !hasH1 && !hasH2:
		what := "http/1.1 or h2, the protocols the gateway speaks to HTTP backends"
		if !h2 {
			what = "http/1.1, the protocol this backend kind speaks to its targets"
		}
		return &policy.FieldError{Field: "alpn", Msg: "must include " + what}
	case version == versionHTTP1 && !hasH1:
		return &policy.FieldError{Field: "alpn", Msg: "must include http/1.1: http.version is HTTP1"}
	case version == versionHTTP2 && !hasH2:
		return &policy.FieldError{Field: "alpn", Msg: "must include h2: http.version is HTTP2"}
	}
	return nil
}

// tlsLogEvery bounds the log lines about one backend's failed handshakes:
// each failed request is in the access log already.
const tlsLogEvery = 10 * time.Second

// connectFailed counts a connect failure of the backend and, when it was
// a TLS handshake (a certificate that does not verify, a backend that
// refuses the client certificate), says so in the log, naming the backend,
// the address and the reason, at most once per tlsLogEvery, with the number
// of those held back since the last line.
func (rb *routeBackend) connectFailed(log *zap.Logger, err error) {
	rb.connectErrors.ConnectError()
	var he *backend.HandshakeError
	if !errors.As(err, &he) {
		return
	}
	dropped, ok := rb.tlsLog.Allow(time.Now())
	if !ok {
		return
	}
	log.Warn("upstream TLS handshake failed",
		zap.String("backend", rb.name), zap.String("address", he.Addr),
		zap.String("server_name", he.ServerName), zap.NamedError("reason", he.Err),
		logline.DroppedField(dropped))
}

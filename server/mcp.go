package server

import (
	"context"
	"crypto/tls"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/relaygate/gateway/backend"
	mcpgw "github.com/relaygate/gateway/backend/mcp"
	"github.com/relaygate/gateway/backend/sock"
	"github.com/relaygate/gateway/config"
	"github.com/relaygate/gateway/config/decode"
	"github.com/relaygate/gateway/policy/celrules"
	"github.com/relaygate/gateway/pool"
)

// mcpBackend returns the MCP backend for a route's `mcp:` config: the
// running one when the config is unchanged since the last snapshot (its
// sessions carry on), else a new one. Backends the new snapshot no longer
// uses are closed by Apply once it is in place.
//
// upTLS, when enabled, is the backend's backendTLS (tlsPath its field): the
// HTTP targets are reached with TLS on their address, an http:// URL
// included.
func (c *compiler) mcpBackend(path, routeName, scope string, cfg *config.MCPBackend, upTLS backend.UpstreamTLS, tlsPath string, auth *config.BackendAuth) (*mcpgw.Backend, error) {
	if upTLS.Enabled && !slices.ContainsFunc(cfg.Targets, func(t config.MCPTarget) bool { return t.Kind != config.MCPTargetStdio }) {
		return nil, &decode.FieldError{Path: tlsPath, Msg: "applies to the HTTP targets of an MCP backend, and this one has none"}
	}
	var ttl time.Duration
	var key []byte
	var maxSessions, maxProcs int
	if s := c.file.Config; s != nil {
		if s.MCP != nil {
			if s.MCP.SessionTTL != nil {
				ttl = s.MCP.SessionTTL.Duration
			}
			if s.MCP.MaxSessions != nil {
				maxSessions = *s.MCP.MaxSessions
			}
			if s.MCP.MaxStdioProcesses != nil {
				maxProcs = *s.MCP.MaxStdioProcesses
			}
		}
		if s.Session != nil {
			key = s.Session.Key
		}
	}
	// Everything the backend is made of, secrets included
	// (config.Fingerprint): its sessions hold the credentials and targets
	// they were opened with, so another of any makes another backend.
	spec := config.Fingerprint(struct {
		Route  string
		Scope  string
		Config *config.MCPBackend
		TTL    time.Duration
		Key    []byte
		TLS    backend.UpstreamTLS
		Limits [2]int
		Auth   *config.BackendAuth
	}{routeName, scope, cfg, ttl, key, upTLS, [2]int{maxSessions, maxProcs}, auth})
	return pool.LoadOrNew(c.lease, "mcp\x00"+spec, func() (*mcpgw.Backend, error) {
		var tlsConfig *tls.Config
		if upTLS.Enabled {
			// No host: net/http names each target's (SNI, and the name
			// verified unless backendTLS says another).
			tc, err := upTLS.Config("")
			if err != nil {
				return nil, &decode.FieldError{Path: tlsPath, Msg: err.Error()}
			}
			tlsConfig = tc
		}
		b, err := mcpgw.New(mcpgw.Options{
			TLS:               tlsConfig,
			Name:              routeName,
			Scope:             scope,
			Config:            cfg,
			SessionTTL:        ttl,
			SessionKey:        key,
			MaxSessions:       maxSessions,
			MaxStdioProcesses: maxProcs,
			Logger:            c.gw.log,
			Metrics:           c.gw.metrics.MCP(routeName),
		})
		if err != nil {
			return nil, fmt.Errorf("%s.mcp: %w", path, err)
		}
		return b, nil
	})
}

// routeScope names a route by its bind, listener and name: MCP session ids
// are sealed to it, so a same-named route elsewhere refuses them.
func routeScope(port int, l *config.Listener, routeName string) string {
	return strconv.Itoa(port) + "\x00" + l.Namespace + "/" + l.Name + "\x00" + l.Hostname + "\x00" + routeName
}

// serveMCP answers a request whose backend is an MCP backend.
func (b *bind) serveMCP(rs *requestState, r *route, rb *routeBackend, m *mcpgw.Backend) int {
	pc := &rs.pc
	fctx := pc.Fast
	var allow mcpgw.Authorizer
	if r.mcpAuthz != nil {
		// The input is copied out of the request: streamed answers evaluate
		// rules after the handler returned and fasthttp reused the request.
		in := celrules.InputFromCtx(pc)
		rules := r.mcpAuthz
		allow = func(kind mcpgw.ItemKind, name, target string) bool {
			item := celrules.MCPItem{Kind: authzKind(kind), Name: name, Target: target}
			local := in
			local.MCP = &item
			return rules.Allowed(&local)
		}
	}
	req := mcpgw.Request{
		Fast:    fctx,
		Authz:   allow,
		Timeout: callTimeout(r, rb),
		MaxBody: rs.bind.frontend.maxBufferSize,
		Subject: mcpgw.Subject(pc.Claims, pc.Token),
	}
	if rb.auth != nil {
		req.Credentials = rb.auth
		if rb.auth.passthrough && len(pc.Token) > 0 {
			req.Token = append([]byte(nil), pc.Token...)
		}
	}
	// A client that goes away ends its call: the target is told to stop
	// rather than work on for an answer nobody reads. As for LLM requests,
	// an HTTP/1.x client's FIN counts as going away (clientWatch).
	var hangup *sock.HangupWatch
	var stop context.CancelFunc
	if rs.h2 != nil {
		req.Context = rs.h2.context()
	} else if hangup = sock.Hangups(fctx.Conn(), 0); hangup != nil {
		req.Context, stop = context.WithCancel(context.Background())
		hangup.OnGone(stop)
	}
	rs.mcp = m.Serve(&req)
	if stop != nil && !fctx.Response.IsBodyStream() {
		// Answered. (An event stream's call goes on while fasthttp writes
		// it, after this returns: the watch stays until the connection's
		// next request replaces it, or its close.)
		hangup.OnGone(nil)
		stop()
	}
	if rs.span != nil {
		// The session the request belongs to: the one it named, or the
		// one an initialize opened.
		id := fctx.Response.Header.Peek("Mcp-Session-Id")
		if len(id) == 0 {
			id = fctx.Request.Header.Peek("Mcp-Session-Id")
		}
		rs.mcpSession = append(rs.mcpSession[:0], id...)
	}
	status := fctx.Response.StatusCode()
	if status == 0 {
		status = fasthttp.StatusOK
	}
	return status
}

// callTimeout bounds one MCP call: the shortest of the route's request
// timeout, its per-attempt backend timeout and the backend's
// requestTimeout; zero when none is set.
func callTimeout(r *route, rb *routeBackend) time.Duration {
	d := time.Duration(0)
	for _, t := range [...]time.Duration{r.timeout, r.backendTimeout, rb.requestTimeout} {
		if t > 0 && (d == 0 || t < d) {
			d = t
		}
	}
	return d
}

func authzKind(k mcpgw.ItemKind) celrules.MCPKind {
	switch k {
	case mcpgw.Prompt:
		return celrules.MCPPrompt
	case mcpgw.Resource:
		return celrules.MCPResource
	}
	return celrules.MCPTool
}

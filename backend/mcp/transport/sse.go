package transport

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// SSEOptions configure a connection to a legacy (2024-11-05) HTTP+SSE
// target.
type SSEOptions struct {
	// URL is the SSE endpoint (the GET stream); the server names the
	// endpoint for POSTs in its first event.
	URL string
	// Client is required.
	Client *http.Client
	// HeaderFunc, when set, gives headers for each request to the URL's
	// origin (the stream and each POST: credentials, which may rotate),
	// where the SDK did not set the header itself; its error fails the
	// request.
	HeaderFunc func() (http.Header, error)
}

// DialSSE opens the legacy SSE stream and waits for the server's endpoint
// event; ctx bounds that handshake, not the connection, which lives until
// Close. A stream the server ends makes Read return io.EOF.
func DialSSE(ctx context.Context, o SSEOptions) (mcp.Connection, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if o.Client == nil {
		return nil, errors.New("SSE target: no HTTP client")
	}
	client := withHeaders(o.Client, o.URL, o.HeaderFunc)
	client.Transport = sameOrigin(client.Transport, o.URL)
	// The SDK ties the stream to the context given to Connect: give it one
	// that outlives ctx, and cancel it when ctx ends before the handshake.
	life, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, cancel)
	conn, err := (&mcp.SSEClientTransport{Endpoint: o.URL, HTTPClient: &client}).Connect(life)
	if !stop() {
		if err == nil {
			_ = conn.Close()
		}
		cancel()
		return nil, ctx.Err()
	}
	if err != nil {
		cancel()
		return nil, err
	}
	return &sseConn{Connection: conn, cancel: cancel}, nil
}

// sseConn ends the stream's context on Close.
type sseConn struct {
	mcp.Connection
	cancel context.CancelFunc
}

func (c *sseConn) Close() error {
	err := c.Connection.Close()
	c.cancel()
	return err
}

// ErrEndpointOrigin is the error of a request of a legacy SSE connection
// to another origin than the SSE URL's: an endpoint event naming another
// host (or a redirect there).
var ErrEndpointOrigin = errors.New("SSE target: endpoint origin does not match connection origin")

// sameOrigin wraps base (http.DefaultTransport when nil) so that it refuses
// every request to another origin than target's. The SDK's SSE client
// POSTs to whatever URL the server's endpoint event names: a target could
// point the gateway's POSTs, tool arguments and all, at any host (SSRF).
// The TypeScript SDK refuses such an endpoint the same way.
func sameOrigin(base http.RoundTripper, target string) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return &originGuard{base: base, origin: originOf(target)}
}

type originGuard struct {
	base   http.RoundTripper
	origin string
}

func (g *originGuard) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme+"://"+req.URL.Host != g.origin {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, fmt.Errorf("%w (%s, not %s)", ErrEndpointOrigin, req.URL.Scheme+"://"+req.URL.Host, g.origin)
	}
	return g.base.RoundTrip(req)
}

// CloseIdleConnections lets http.Client.CloseIdleConnections reach the base.
func (g *originGuard) CloseIdleConnections() {
	if c, ok := g.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// withHeaders is a copy of client whose requests to target's origin get
// fn's headers, where they do not set them themselves (client itself when
// fn is nil).
func withHeaders(client *http.Client, target string, fn func() (http.Header, error)) http.Client {
	c := *client
	if fn == nil {
		return c
	}
	base := c.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	c.Transport = &headerTransport{base: base, origin: originOf(target), fn: fn}
	return c
}

// originOf is the scheme and host of a URL ("" when it does not parse).
func originOf(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return ""
	}
	return p.Scheme + "://" + p.Host
}

// headerTransport adds the headers fn gives at the time to every request
// to the target's origin. They are credentials for that target, so a
// request elsewhere (a redirect the client follows, a legacy SSE endpoint
// on another host) goes without them, as net/http drops Authorization on
// a redirect to another domain.
type headerTransport struct {
	base   http.RoundTripper
	origin string
	fn     func() (http.Header, error)
}

func (t *headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme+"://"+req.URL.Host != t.origin {
		return t.base.RoundTrip(req)
	}
	h, err := t.fn()
	if err != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, fmt.Errorf("%w: %w", ErrCredentials, err)
	}
	r := req.Clone(req.Context())
	for k, v := range h {
		if _, set := r.Header[k]; !set {
			r.Header[k] = v
		}
	}
	return t.base.RoundTrip(r)
}

// CloseIdleConnections lets http.Client.CloseIdleConnections reach the base.
func (t *headerTransport) CloseIdleConnections() {
	if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

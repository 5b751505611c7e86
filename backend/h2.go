package backend

//lint:file-ignore SA1019 x/net's http2.Transport is the client that speaks HTTP/2 in cleartext with prior knowledge over connections it is handed (DialTLSContext); x/net deprecates it for net/http's Transport, whose h2c support is not per-pool (on Go 1.27 the same type wraps net/http's implementation).

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
	"golang.org/x/net/http2"
)

// HTTP/2 to upstreams (backends' http.version: HTTP2, and gRPC by
// default): x/net's http2.Transport over connections the pool dials, in
// cleartext with prior knowledge (h2c) or over TLS with ALPN h2. Each
// Upstream has one transport, made on first use, which multiplexes the
// requests to its address over as few connections as their streams allow.
// The exchange reads and writes the same fasthttp request and response as
// the HTTP/1.1 one (Exchange), so the request path around it is shared.

// h2Pool is an upstream's HTTP/2 side: its transport and connections,
// made on first use.
type h2Pool struct {
	once  sync.Once
	mu    sync.Mutex
	conns *h2Conns
	// notH2 says the last cleartext connection's upstream answered in
	// HTTP/1.x (h2cConn).
	notH2 atomic.Bool
}

// h2Ping is how long an upstream HTTP/2 connection may be silent before it
// is pinged, and how long the ping's answer may take: a dead connection is
// found before a request waits on it.
const (
	h2PingAfter   = 30 * time.Second
	h2PingTimeout = 15 * time.Second
)

// h2StreamWindow is how much of a response the upstream may send on a
// stream ahead of the client's reading it: x/net's default, 4 MiB, let a
// client that reads nothing (an HTTP/2 client keeping its window shut, or
// trickling it open a byte at a time) hold 4 MiB of gateway memory per
// stream for as long as it liked (2 GB from 500 streams, measured). 256
// KiB keeps a stalled stream near what the kernel holds for a stalled
// HTTP/1.1 one, and still moves 256 KiB per round trip (2.5 GB/s at 0.1
// ms, 25 MB/s at 10 ms). The connection's window stays x/net's 1 GiB, far
// above streams × 256 KiB: stalled streams never use up the connection's
// window, which would stall the other clients' streams on it.
const h2StreamWindow = 256 << 10

// errNotH2 is the failure of a TLS upstream that did not agree to HTTP/2.
var errNotH2 = errors.New("the upstream did not negotiate HTTP/2 (ALPN h2)")

// ErrPickedHTTP1 is what ExchangeH2 returns when backendTLS offered h2 and
// http/1.1 and the backend picked http/1.1: nothing was sent, and the
// request is to go in HTTP/1.1 (Exchange), as every later one will
// (ALPNVersion).
var ErrPickedHTTP1 = errors.New("the upstream picked http/1.1 over h2 (ALPN)")

// h2Conns returns the upstream's HTTP/2 connections, made on first use.
func (u *Upstream) h2Conns() *h2Conns {
	u.h2.once.Do(func() {
		p := &h2Conns{u: u}
		// The receive windows are set through a net/http Transport's
		// HTTP2 settings, the only way x/net takes them; that Transport
		// carries nothing else and sends nothing.
		t, err := http2.ConfigureTransports(&http.Transport{HTTP2: &http.HTTP2Config{MaxReceiveBufferPerStream: h2StreamWindow}})
		if err != nil {
			panic("backend: configuring HTTP/2: " + err.Error()) // only when called twice on one Transport
		}
		t.AllowHTTP = u.tls == nil
		// A proxy passes bodies as they are: no Accept-Encoding of its
		// own, no decompression.
		t.DisableCompression = true
		// x/net's default is 10 MiB: a response head the HTTP/1.1 side
		// would refuse (a 502) passed here.
		t.MaxHeaderListSize = MaxResponseHeadBytes
		t.IdleConnTimeout = u.idle
		t.ReadIdleTimeout = h2PingAfter
		t.PingTimeout = h2PingTimeout
		// Connections are dialled and kept by p, which x/net tells when
		// one dies.
		t.ConnPool = p
		p.t = t
		u.h2.mu.Lock()
		u.h2.conns = p
		u.h2.mu.Unlock()
	})
	return u.h2.conns
}

// dialH2 opens an HTTP/2 connection to the upstream: TCP, then TLS with
// ALPN h2 when the pool speaks TLS. A failure is a connect failure: nothing
// was sent.
func (u *Upstream) dialH2(ctx context.Context, nd *net.Dialer, network string) (net.Conn, error) {
	if u.tlsErr != nil {
		return nil, u.tlsErr
	}
	c, err := nd.DialContext(ctx, network, u.Addr)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBackendUnreachable, err)
	}
	if u.tls == nil {
		return &h2cConn{Conn: c, notH2: &u.h2.notH2}, nil
	}
	tc, err := handshake(c, u.Addr, u.tlsH2, u.dialing)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBackendUnreachable, err)
	}
	if p := tc.(*tls.Conn).ConnectionState().NegotiatedProtocol; p != http2.NextProtoTLS {
		tc.Close()
		if u.alpn == alpnAuto && (p == ALPNHTTP11 || p == "") {
			// Offered both, the backend picked HTTP/1.1: so be it, for this
			// request (nothing of it was sent) and every later one.
			u.spokeHTTP1.Store(true)
			return nil, ErrPickedHTTP1
		}
		// A handshake failure as far as the logs go: it names the backend.
		return nil, fmt.Errorf("%w: %w", ErrBackendUnreachable, &HandshakeError{Addr: u.Addr, ServerName: u.tlsH2.ServerName, Err: errNotH2})
	}
	return tc, nil
}

// ErrUpstreamNotHTTP2 is the failure of an upstream taken for HTTP/2 in
// cleartext (prior knowledge: gRPC, an HTTP/2 client's request by the
// version rule, http.version HTTP2) that answered in HTTP/1.x. x/net would
// report the HTTP/1.x status line read as a frame (a frame size or
// protocol error), which says nothing of the cause.
var ErrUpstreamNotHTTP2 = errors.New("the upstream answered HTTP/2 (cleartext, prior knowledge) in HTTP/1.x: it speaks HTTP/1.1 only (the backend's policies.http.version: HTTP1 says so)")

// h2cConn is a cleartext HTTP/2 connection to an upstream whose first byte
// is checked: an HTTP/2 server's first frame is its SETTINGS, whose length
// starts with a zero byte, where an HTTP/1.x answer starts with 'H'.
// What was seen is kept on the pool too (notH2): x/net may fail the
// request with its own error (the connection "could not be established")
// rather than the read's, and the exchange then names the cause itself.
type h2cConn struct {
	net.Conn
	checked bool // read only by x/net's one reading goroutine
	notH2   *atomic.Bool
}

func (c *h2cConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if !c.checked && n > 0 {
		c.checked = true
		c.notH2.Store(p[0] == 'H')
		if p[0] == 'H' {
			return 0, ErrUpstreamNotHTTP2
		}
	}
	return n, err
}

// closeH2 retires the upstream's HTTP/2 connections, if it has any: the
// idle ones close now, the others when their streams end.
func (u *Upstream) closeH2() {
	u.h2.mu.Lock()
	p := u.h2.conns
	u.h2.mu.Unlock()
	if p != nil {
		p.closeIdle()
	}
}

// BodyInterrupter ends a read of a client's request body in progress (and
// makes later ones fail): the exchange reading it is over. An HTTP/2
// exchange reads the body on a goroutine of its own, while the response
// is already on its way (gRPC's streams go both ways at once).
type BodyInterrupter interface {
	InterruptBody()
}

// ExchangeH2 sends req to the upstream in HTTP/2 and fills resp, as
// Exchange does in HTTP/1.1: the response body streams (its Close gives the
// stream up and tells the StreamObserver), and trailer fields reach resp's
// trailer section at its end. The request body is read while the response
// comes; intr ends a read of it that outlives the exchange. ctx ends the
// exchange when the client goes away; deadline, when not zero, bounds the
// whole response. te asks for trailers (TE: trailers, which gRPC servers
// expect).
func (u *Upstream) ExchangeH2(ctx context.Context, req *fasthttp.Request, resp *fasthttp.Response, deadline time.Time, intr BodyInterrupter, te bool) error {
	conns := u.h2Conns()
	var cancel context.CancelFunc
	if !deadline.IsZero() {
		ctx, cancel = context.WithDeadline(ctx, deadline)
	}
	hr := u.h2Request(ctx, req, te)
	var body *upBody
	if n := req.Header.ContentLength(); req.IsBodyStream() || len(req.Body()) > 0 {
		if !req.IsBodyStream() {
			n = len(req.Body())
		}
		body = newUpBody(req, hr, intr)
		hr.Body, hr.GetBody = body.view(), body.replay
		hr.ContentLength = int64(max(n, -1))
		for k := range req.Header.Trailers() {
			if hr.Trailer == nil {
				hr.Trailer = http.Header{}
			}
			hr.Trailer[string(k)] = nil
		}
	}
	hresp, err := conns.roundTrip(hr)
	if err != nil && !errors.Is(err, ErrUpstreamNotHTTP2) && u.h2.notH2.Load() {
		err = fmt.Errorf("%w (%w)", ErrUpstreamNotHTTP2, err)
	}
	if err != nil {
		body.detach()
		// Past the deadline, whatever ended the exchange (the upstream
		// holding the same deadline may have reset the stream first) is
		// the deadline's doing.
		timedOut := ctx.Err() == context.DeadlineExceeded || !deadline.IsZero() && !time.Now().Before(deadline)
		if cancel != nil {
			cancel()
		}
		if timedOut {
			return fasthttp.ErrTimeout
		}
		return err
	}
	body.gotAnswer()
	resp.Reset()
	resp.Header.SetNoDefaultContentType(true)
	resp.SetStatusCode(hresp.StatusCode)
	for k, vv := range hresp.Header {
		if k == "Content-Length" {
			continue
		}
		for _, v := range vv {
			resp.Header.Add(k, v)
		}
	}
	for k := range hresp.Trailer {
		_ = resp.Header.AddTrailer(k)
	}
	s := &h2Body{r: hresp.Body, hresp: hresp, dst: &resp.Header, body: body, cancel: cancel, pool: conns}
	status := hresp.StatusCode
	if req.Header.IsHead() || status == fasthttp.StatusNoContent || status == fasthttp.StatusNotModified || hresp.ContentLength == 0 {
		// No body: the head is the whole answer (a gRPC answer of a status
		// alone comes so: "trailers-only"), or trailers follow at once.
		resp.SkipBody = req.Header.IsHead()
		if hresp.ContentLength >= 0 && resp.SkipBody {
			resp.Header.SetContentLength(int(hresp.ContentLength))
		}
		_, err := io.Copy(io.Discard, s)
		s.release()
		return err
	}
	n := int(hresp.ContentLength)
	if len(hresp.Trailer) > 0 {
		// Trailers announced: an HTTP/1.1 client gets them after a
		// chunked body, which is the framing that has room for them.
		n = -1
	}
	resp.SetBodyStream(s, n)
	return nil
}

// h2Request is req as x/net's transport takes it: the target as the
// request holds it (origin form: the path and query of an absolute-form
// target), the Host field as :authority, the other fields but those HTTP/2
// does not carry (RFC 9113 8.2.2) and the framing.
func (u *Upstream) h2Request(ctx context.Context, req *fasthttp.Request, te bool) *http.Request {
	scheme := "http"
	if u.tls != nil {
		scheme = "https"
	}
	target := req.Header.RequestURI()
	if len(target) > 0 && target[0] != '/' && target[0] != '*' {
		if i := bytes.Index(target, schemeSep); i >= 0 {
			rest := target[i+len(schemeSep):]
			if j := bytes.IndexAny(rest, "/?"); j >= 0 {
				target = rest[j:]
			} else {
				target = nil
			}
		}
	}
	path, query := target, []byte(nil)
	if i := bytes.IndexByte(target, '?'); i >= 0 {
		path, query = target[:i], target[i+1:]
	}
	if len(path) == 0 {
		path = slash
	}
	hr := (&http.Request{
		Method:     string(req.Header.Method()),
		URL:        &url.URL{Scheme: scheme, Host: u.Addr, Opaque: string(path), RawQuery: string(query)},
		Proto:      "HTTP/2.0",
		ProtoMajor: 2,
		Host:       string(req.Header.Host()),
		Header:     make(http.Header, 8),
	}).WithContext(ctx)
	if hr.Host == "" {
		hr.Host = u.Addr
	}
	for k, v := range req.Header.All() {
		if notOnH2(k) {
			continue
		}
		key := string(k)
		hr.Header[key] = append(hr.Header[key], string(v))
	}
	if te {
		hr.Header["Te"] = teTrailers
	}
	if _, ok := hr.Header["User-Agent"]; !ok {
		// x/net sends a User-Agent of its own (Go-http-client/2.0) unless
		// the name is there: a proxy adds none (nor does the HTTP/1.1 path).
		hr.Header["User-Agent"] = nil
	}
	return hr
}

var (
	schemeSep  = []byte("://")
	slash      = []byte("/")
	teTrailers = []string{"trailers"}
	// notH2 are the fields an HTTP/2 request does not carry: the
	// connection-specific ones (RFC 9113 8.2.2), and those the transport
	// makes itself (Host as :authority, Content-Length, Trailer).
	notH2 = [][]byte{
		[]byte("Host"), []byte("Content-Length"), []byte("Transfer-Encoding"), []byte("Connection"),
		[]byte("Keep-Alive"), []byte("Proxy-Connection"), []byte("Upgrade"), []byte("Te"), []byte("Trailer"),
	}
)

func notOnH2(k []byte) bool {
	for _, n := range notH2 {
		if len(k) == len(n) && bytes.EqualFold(k, n) {
			return true
		}
	}
	return false
}

// h2Body is a response body streaming from an upstream HTTP/2 stream.
type h2Body struct {
	r      io.ReadCloser
	hresp  *http.Response
	dst    *fasthttp.ResponseHeader // takes the trailer fields at the end
	body   *upBody
	cancel context.CancelFunc
	pool   *h2Conns // told when the stream ends
	got    int
	eof    bool
	err    error
	obs    StreamObserver
	// keepOnce makes the next Close do nothing (Detach).
	keepOnce bool
	released bool
}

func (s *h2Body) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	s.got += n
	switch {
	case err == io.EOF:
		if !s.eof {
			s.eof = true
			s.copyTrailer()
		}
	case err != nil && s.err == nil:
		s.err = err
		if errors.Is(err, context.DeadlineExceeded) {
			s.err = fasthttp.ErrTimeout
		}
	}
	return n, err
}

// copyTrailer gives the response the trailer fields that came after the
// body; the server writes them after it. Fields the upstream did not
// announce go on too, except those no trailer may hold.
func (s *h2Body) copyTrailer() {
	for k, vv := range s.hresp.Trailer {
		if len(vv) == 0 {
			continue
		}
		if !announced(s.dst, []byte(k)) && s.dst.AddTrailer(k) != nil {
			continue
		}
		for _, v := range vv {
			s.dst.Add(k, v)
		}
	}
}

// Detach makes the next Close do nothing (policy.TakeBodyStream).
func (s *h2Body) Detach() { s.keepOnce = true }

func (s *h2Body) observe(o StreamObserver) { s.obs = o }

// Close ends the stream (resetting it upstream if its body was not read to
// the end), stops reading the request body, and tells the observer.
func (s *h2Body) Close() error {
	if s.keepOnce {
		s.keepOnce = false
		return nil
	}
	if s.released {
		return nil
	}
	s.release()
	obs, got, err := s.obs, s.got, s.err
	if !s.eof && err == nil {
		err = ErrStreamAbandoned
	} else if s.eof {
		err = nil
	}
	if obs != nil {
		obs.StreamClosed(got, err)
	}
	return nil
}

// release gives the exchange up: the upstream stream, the request body,
// the deadline.
func (s *h2Body) release() {
	s.released = true
	// The request body first: x/net's Close waits for the stream's
	// request-body writer, which may be blocked reading a client that
	// sends nothing more (an upstream that answered before the request's
	// end); until detach interrupts that read, Close would wait for the
	// client's next bytes or its body idle timeout.
	s.body.detach()
	_ = s.r.Close()
	if s.cancel != nil {
		s.cancel()
	}
	s.pool.streamEnded()
}

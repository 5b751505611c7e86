package server

import (
	"bufio"
	"io"
	"net"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/relaygate/gateway/backend"
	"github.com/relaygate/gateway/backend/sock"
)

// upgradeHandshakeTimeout bounds the upstream's answer to an upgrade request.
const upgradeHandshakeTimeout = 30 * time.Second

// tunnel forwards an upgrade request (WebSocket and the like) on a dedicated
// upstream connection; on 101 the two connections are spliced byte for byte.
// acct, when set, is a realtime session's account: the upstream's frames
// are read on their way to the client (realtimeObserver), and the session
// is recorded when the tunnel ends.
func (b *bind) tunnel(rs *requestState, up *backend.Upstream, acct *realtimeAccount) int {
	fctx := rs.pc.Fast
	conn, err := up.Dial()
	if err != nil {
		rs.upstreamErr = err
		rs.backend.connectFailed(b.gw.log, err)
		return respondError(fctx, fasthttp.StatusServiceUnavailable, "upstream unavailable")
	}
	_ = conn.SetDeadline(time.Now().Add(upgradeHandshakeTimeout))
	bw := bufio.NewWriter(conn)
	up.PrepareRequest(&fctx.Request)
	err = fctx.Request.Write(bw)
	if err == nil {
		err = bw.Flush()
	}
	if err != nil {
		conn.Close()
		rs.upstreamErr = err
		return respondError(fctx, fasthttp.StatusBadGateway, "bad upstream response")
	}
	br := bufio.NewReader(conn)
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseResponse(resp)
	// AwaitHeadGrowing refuses a head with a bare-LF blank line at once,
	// which fasthttp's parser would wait on until the handshake timeout,
	// and takes heads up to the exchanges' limit where br holds 4 KiB.
	br, err = backend.AwaitHeadGrowing(br)
	if err == nil {
		err = resp.ReadLimitBody(br, rs.bind.frontend.maxBufferSize)
	}
	if err != nil {
		conn.Close()
		rs.upstreamErr = err
		if sock.IsTimeout(err) {
			return respondError(fctx, fasthttp.StatusGatewayTimeout, "upstream request timeout")
		}
		return respondError(fctx, fasthttp.StatusBadGateway, "bad upstream response")
	}
	if resp.StatusCode() != fasthttp.StatusSwitchingProtocols {
		// No upgrade: relay the answer as an ordinary response.
		conn.Close()
		resp.CopyTo(&fctx.Response)
		cleanResponse(&fctx.Response.Header)
		return resp.StatusCode()
	}
	if acct != nil && len(resp.Header.Peek("Sec-WebSocket-Extensions")) > 0 {
		// An extension the client was not offered: its frames could not
		// be read (and the client would refuse them anyway).
		conn.Close()
		return respondError(fctx, fasthttp.StatusBadGateway, "upstream negotiated a WebSocket extension")
	}
	head := &resp.Header
	_ = conn.SetDeadline(time.Time{})
	rawHead := append([]byte(nil), head.Header()...)
	raw := fctx.Conn()
	done := b.startTunnel(raw, conn, rs)
	rs.tunneled = true
	fctx.HijackSetNoResponse(true)
	fctx.Hijack(func(client net.Conn) {
		defer close(done)
		setWriteStall(raw, 0) // a tunnel, not a response (client is fasthttp's wrapper of raw)
		if acct != nil {
			br = bufio.NewReader(io.TeeReader(br, &realtimeObserver{acct: acct}))
		}
		var in, out int64
		if _, err := client.Write(rawHead); err == nil {
			in, out = splice(client, conn, br)
		}
		conn.Close()
		if acct != nil {
			acct.finish()
		}
		rs.tunnelEnded(in, out)
	})
	return fasthttp.StatusSwitchingProtocols
}

// tunnel is a client connection handed over to an upgrade tunnel.
type tunnel struct {
	upstream io.Closer     // closed if the tunnel never starts (may be nil)
	rec      *requestState // recorded if the tunnel never starts (may be nil)
	done     chan struct{} // closed when the tunnel ends
	started  bool          // fasthttp hijacked the connection and runs the tunnel
}

// startTunnel records that the client connection c is about to become a
// tunnel to upstream; the returned channel must be closed when it ends.
// rec, when set, is the request whose record waits for the tunnel's end
// (tunnelEnded).
func (b *bind) startTunnel(c net.Conn, upstream io.Closer, rec *requestState) chan struct{} {
	// The client's bytes from here on are the tunnel's, not request heads.
	if h := sock.HeadWatchOf(c); h != nil {
		h.Stop()
	}
	t := &tunnel{upstream: upstream, rec: rec, done: make(chan struct{})}
	b.mu.Lock()
	b.tunnels[c] = t
	b.mu.Unlock()
	return t.done
}

// awaitTunnel waits for the tunnel of c, if c became one, to end. fasthttp
// runs a hijacked connection's tunnel on its own goroutine and returns from
// ServeConn at once; the connection's serve call must last as long as the
// tunnel, or netpoll would hand the connection's next bytes to a new serve
// call. A tunnel fasthttp never started (its response could not be flushed)
// closes its upstream connection here, and its request is recorded.
func (b *bind) awaitTunnel(c net.Conn) {
	b.mu.Lock()
	t := b.tunnels[c]
	delete(b.tunnels, c)
	b.mu.Unlock()
	switch {
	case t == nil:
	case t.started:
		<-t.done
	default:
		if t.upstream != nil {
			t.upstream.Close()
		}
		if t.rec != nil {
			t.rec.tunnelEnded(0, 0)
		}
	}
}

// splice copies both directions until either side ends, then closes both.
// upstreamBuf holds bytes the upstream sent right after its 101 response.
// in and out are the bytes that went from the client to the upstream and
// back.
func splice(client, upstream net.Conn, upstreamBuf *bufio.Reader) (in, out int64) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		in, _ = io.Copy(upstream, client)
		closeWrite(upstream)
	}()
	out, _ = io.Copy(client, upstreamBuf)
	closeWrite(client)
	wg.Wait()
	return in, out
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
		return
	}
	_ = c.Close()
}

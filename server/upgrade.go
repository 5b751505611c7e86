package server

import (
	"bufio"
	"io"
	"net"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/relaygate/gateway/backend"
)

// upgradeHandshakeTimeout bounds the upstream's answer to an upgrade request.
const upgradeHandshakeTimeout = 30 * time.Second

// tunnel forwards an upgrade request (WebSocket and the like) on a dedicated
// upstream connection; on 101 the two connections are spliced byte for byte.
func (b *bind) tunnel(rs *requestState, up *backend.Upstream) int {
	fctx := rs.pc.Fast
	conn, err := up.Dial()
	if err != nil {
		rs.upstreamErr = err
		rs.backend.connectErrors.ConnectError()
		return respondError(fctx, fasthttp.StatusServiceUnavailable, "upstream unavailable")
	}
	_ = conn.SetDeadline(time.Now().Add(upgradeHandshakeTimeout))
	bw := bufio.NewWriter(conn)
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
	if err := resp.ReadLimitBody(br, rs.bind.frontend.maxBufferSize); err != nil {
		conn.Close()
		rs.upstreamErr = err
		if isTimeout(err) {
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
	head := &resp.Header
	_ = conn.SetDeadline(time.Time{})
	rawHead := append([]byte(nil), head.Header()...)
	fctx.HijackSetNoResponse(true)
	fctx.Hijack(func(client net.Conn) {
		defer conn.Close()
		if _, err := client.Write(rawHead); err != nil {
			return
		}
		splice(client, conn, br)
	})
	return fasthttp.StatusSwitchingProtocols
}

// splice copies both directions until either side ends, then closes both.
// upstreamBuf holds bytes the upstream sent right after its 101 response.
func splice(client, upstream net.Conn, upstreamBuf *bufio.Reader) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, _ = io.Copy(upstream, client)
		closeWrite(upstream)
	}()
	_, _ = io.Copy(client, upstreamBuf)
	closeWrite(client)
	wg.Wait()
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
		return
	}
	_ = c.Close()
}

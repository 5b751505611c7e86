package extauthz

import (
	"errors"
	"io"
	"net"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/relaygate/gateway/pool/sockpeek"
)

// exchange sends one check over HTTP and reads the service's answer: one
// attempt, as Envoy makes it. fasthttp's HostClient.Do sent a check again,
// up to five times in all, when the service closed the connection without
// answering (its default for GET, HEAD and PUT: MaxIdemponentCallAttempts),
// and networkExtAuthz's synthetic GET made five checks per connection.
//
// A pooled connection the service closed while it was idle is not a
// failure of the check: it is looked at before the check goes on it
// (sockpeek.PeerClosed) and dropped for another, or a new one. One whose close
// crossed the check on its way (nothing of an answer came back on a
// connection that had served checks before) has the check sent once more;
// a new connection that fails fails the check.
func (f *fasthttpClient) exchange(req *fasthttp.Request, resp *fasthttp.Response, deadline time.Time) error {
	stale, err := f.attempt(req, resp, deadline)
	if stale {
		_, err = f.attempt(req, resp, deadline)
	}
	return err
}

// attempt makes one attempt of exchange. stale reports that it failed on
// a reused connection before any byte of an answer came back.
func (f *fasthttpClient) attempt(req *fasthttp.Request, resp *fasthttp.Response, deadline time.Time) (stale bool, err error) {
	hc := f.HostClient
	timeout := time.Until(deadline)
	if timeout <= 0 {
		return false, fasthttp.ErrTimeout
	}
	cc, err := hc.AcquireConn(timeout, req.ConnectionClose())
	if err != nil {
		return false, err
	}
	reused := !cc.LastUseTime().IsZero()
	for reused && sockpeek.PeerClosed(cc.Conn()) {
		// Closed by the service while idle (each one found so leaves the
		// pool; a pool that runs dry dials).
		hc.CloseConn(cc)
		if cc, err = hc.AcquireConn(timeout, req.ConnectionClose()); err != nil {
			return false, err
		}
		reused = !cc.LastUseTime().IsZero()
	}
	conn := cc.Conn()
	if err := conn.SetDeadline(deadline); err != nil {
		hc.CloseConn(cc)
		return reused, err
	}
	resp.Reset()
	resp.SkipBody = req.Header.IsHead() // a HEAD's answer has no body, whatever its length says
	bw := hc.AcquireWriter(conn)
	err = req.Write(bw)
	if err == nil {
		err = bw.Flush()
	}
	hc.ReleaseWriter(bw)
	if err != nil {
		hc.CloseConn(cc)
		return reused && !isTimeout(err), timeoutErr(err)
	}
	br := hc.AcquireReader(conn)
	err = resp.ReadLimitBody(br, hc.MaxResponseBodySize)
	hc.ReleaseReader(br)
	if err != nil {
		hc.CloseConn(cc)
		var nothing fasthttp.ErrNothingRead
		return reused && (errors.As(err, &nothing) || errors.Is(err, io.EOF)), timeoutErr(err)
	}
	if req.ConnectionClose() || resp.ConnectionClose() {
		hc.CloseConn(cc)
		return false, nil
	}
	if err := conn.SetDeadline(time.Time{}); err != nil {
		hc.CloseConn(cc)
		return false, nil
	}
	hc.ReleaseConn(cc)
	return false, nil
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// timeoutErr gives a timeout as fasthttp.ErrTimeout, as the HostClient did.
func timeoutErr(err error) error {
	if isTimeout(err) {
		return fasthttp.ErrTimeout
	}
	return err
}

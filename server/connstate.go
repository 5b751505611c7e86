package server

import "github.com/valyala/fasthttp"

// connState is where a client connection stands, as its bind tracks it for
// drain and for the deadline each state has. It is the bind's own, whatever
// serves the connection: fasthttp (whose states map onto it), the HTTP/2
// server, or a forwarding of bytes.
type connState int32

const (
	connNew        connState = iota // accepted (or woken), nothing read yet
	connActive                      // an HTTP/1 request in progress, or an HTTP/2 connection
	connIdle                        // waiting for its next HTTP/1 request
	connHijacked                    // handed over to an upgrade or CONNECT tunnel
	connClosed                      // done
	connForwarding                  // bytes forwarded (TCP, TLS passthrough): active, without HTTP deadlines

	// connRetiring is a mark on an active connection's state word: a reload
	// retired it, and it closes once its request is answered (retire.go).
	// The next state stored takes it off (bind.storeState).
	connRetiring connState = 1 << 8
)

// fromFastHTTP is the bind's state for one of fasthttp's.
func fromFastHTTP(st fasthttp.ConnState) connState {
	switch st {
	case fasthttp.StateActive:
		return connActive
	case fasthttp.StateIdle:
		return connIdle
	case fasthttp.StateHijacked:
		return connHijacked
	case fasthttp.StateClosed:
		return connClosed
	}
	return connNew
}

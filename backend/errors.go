package backend

import (
	"errors"
	"net"
	"os"
	"syscall"

	"github.com/valyala/fasthttp"
)

// Failure classifies an upstream error.
type Failure uint8

// Failure classes, each with its own client-facing status.
const (
	// FailureNone means no error.
	FailureNone Failure = iota
	// FailureConnect: the backend refused the connection or could not be reached
	// (503). Nothing was sent, so any request may be retried.
	FailureConnect
	// FailureTimeout: no response in time (504).
	FailureTimeout
	// FailureProtocol: the backend closed the connection or sent a malformed
	// response (502).
	FailureProtocol
)

// ErrBackendUnreachable is reported when a connection could not be established.
var ErrBackendUnreachable = errors.New("backend unreachable")

// Classify maps an error from an upstream exchange to its failure class.
func Classify(err error) Failure {
	switch {
	case err == nil:
		return FailureNone
	case errors.Is(err, fasthttp.ErrTimeout), errors.Is(err, os.ErrDeadlineExceeded):
		return FailureTimeout
	case errors.Is(err, fasthttp.ErrDialTimeout), errors.Is(err, ErrBackendUnreachable),
		errors.Is(err, fasthttp.ErrNoFreeConns), errors.Is(err, ErrPoolFull), errors.Is(err, ErrStreamRefused), errors.Is(err, syscall.ECONNREFUSED),
		errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return FailureConnect
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return FailureConnect
	}
	var opErr *net.OpError
	if errors.As(err, &opErr) && opErr.Op == "dial" {
		return FailureConnect
	}
	var netErr net.Error
	if errors.As(err, &netErr) && netErr.Timeout() {
		return FailureTimeout
	}
	return FailureProtocol
}

// Status is the HTTP status a client gets for a failure class.
func (f Failure) Status() int {
	switch f {
	case FailureConnect:
		return fasthttp.StatusServiceUnavailable
	case FailureTimeout:
		return fasthttp.StatusGatewayTimeout
	case FailureProtocol:
		return fasthttp.StatusBadGateway
	}
	return fasthttp.StatusOK
}

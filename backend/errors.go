package backend

import (
	"errors"
	"net"
	"os"
	"strings"
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

// redactedError is an upstream error whose message no longer carries the
// upstream's bytes (withoutUpstreamBytes); the error it stands for stays
// in the chain.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// withoutUpstreamBytes returns err with the bytes of the upstream's answer
// that fasthttp quotes in its parse errors cut off (a head too large gives
// its first and last 200 bytes, a malformed field its value): they may hold
// cookies or tokens, and the error reaches the access log. What the error
// says of the fault stays ("invalid header value", "small read buffer"),
// and errors.Is and errors.As still see the error it wraps.
func withoutUpstreamBytes(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	cut := len(msg)
	if i := strings.Index(msg, ", contents: "); i >= 0 {
		cut = i
	}
	if i := strings.IndexByte(msg[:cut], '"'); i >= 0 {
		cut = i
	}
	if cut == len(msg) {
		return err
	}
	return &redactedError{msg: strings.TrimRight(msg[:cut], " :"), err: err}
}

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
		errors.Is(err, fasthttp.ErrNoFreeConns), errors.Is(err, syscall.ECONNREFUSED),
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

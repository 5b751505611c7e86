package logline

import "strings"

// redactedError is a peer's error whose message no longer carries the
// peer's bytes (WithoutPeerBytes); the error it stands for stays in the
// chain.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// WithoutPeerBytes returns err with the bytes of a peer's answer that
// fasthttp quotes in its parse errors cut off (a head too large gives its
// first and last 200 bytes, a malformed field its value): they may hold
// cookies or tokens, and errors reach log lines. What the error says of
// the fault stays ("invalid header value", "small read buffer"), and
// errors.Is and errors.As still see the error it wraps.
func WithoutPeerBytes(err error) error {
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

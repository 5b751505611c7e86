package transport

import (
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

var (
	// ErrSessionExpired matches (errors.Is) the error of a response the
	// connection made up because the target refused the session id the
	// request carried (404; or 400 without an answer to the request, see
	// refusedSession): the upstream session is gone, a new one needs an
	// initialize, and the request was not processed. On the wire it is
	// code CodeSessionExpired.
	ErrSessionExpired = errors.New("upstream MCP session expired")
	// ErrUnauthorized matches the error of a response made up for a request
	// the target refused with 401 or 403.
	ErrUnauthorized = errors.New("upstream MCP authorization failed")
	// ErrCredentials matches the error of a request to an HTTP target whose
	// credentials (HeaderFunc) could not be had.
	ErrCredentials = errors.New("credentials for the MCP target unavailable")
	// ErrProcessStart matches the error of a stdio target whose process
	// could not be started (its command not found, not executable).
	ErrProcessStart = errors.New("stdio target: the process could not be started")
)

// ProcessExit is the error of a stdio connection whose process ended on
// its own (or was stopped because its output broke). Its text names the
// command, how it ended and its last stderr line, for the gateway's log;
// Status and Broke say the same without them.
type ProcessExit struct {
	// Status is how the process ended: "exit status 3", "signal:
	// killed", or "" when that is not known.
	Status string
	// Broke, when set, is why the gateway stopped the process: its output
	// broke (a line past the bound, bytes that are not JSON).
	Broke error

	text string
	wait error // the process' wait error, if any
}

func (e *ProcessExit) Error() string { return e.text }

// Unwrap gives the wait error (errors.As finds *exec.ExitError).
func (e *ProcessExit) Unwrap() error { return e.wait }

// CodeSessionExpired is the JSON-RPC code of an ErrSessionExpired response
// (the code other MCP implementations use for "session not found").
const CodeSessionExpired = -32001

// upstreamError is the error of a response the connection made up for a
// request: it encodes as its JSON-RPC error (jsonrpc keeps the code of a
// wrapped *jsonrpc.Error) and matches its sentinel with errors.Is.
type upstreamError struct {
	wire *jsonrpc.Error
	kind error // ErrSessionExpired, ErrUnauthorized or nil
}

func (e *upstreamError) Error() string { return e.wire.Message }

func (e *upstreamError) Unwrap() []error {
	if e.kind == nil {
		return []error{e.wire}
	}
	return []error{e.wire, e.kind}
}

func newUpstreamError(kind error, code int64, format string, args ...any) error {
	return &upstreamError{wire: &jsonrpc.Error{Code: code, Message: fmt.Sprintf(format, args...)}, kind: kind}
}

// errorResponse answers request id with err.
func errorResponse(id jsonrpc.ID, err error) *jsonrpc.Response {
	return &jsonrpc.Response{ID: id, Error: err}
}

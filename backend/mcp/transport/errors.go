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
)

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

package mcp

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/relaygate/gateway/backend/mcp/transport"
)

// A target's failure reaches its client as the target's configured name
// and the class of failure ("target down: connection refused", "target
// files: its process exited (exit status 7)"), never the detail, which
// the gateway logs: a target's URL and address, a stdio command's path, a
// stderr line are the deployment's, not the client's. They used to be the
// answer ("target down: streamable HTTP target: Post
// \"http://10.0.3.7:21099/mcp\": dial tcp ...").

// safeError is an error of the gateway's own whose text a client may read
// as it is: it names no address, path or process.
type safeError struct{ msg string }

func (e *safeError) Error() string { return e.msg }

func safe(msg string) error { return &safeError{msg: msg} }

// publicFailure is the class of a failure to reach or use a target, for
// its client.
func publicFailure(err error) string {
	var (
		own   *safeError
		rpc   *jsonrpc.Error
		exit  *transport.ProcessExit
		dns   *net.DNSError
		op    *net.OpError
		netE  net.Error
		cert  *tls.CertificateVerificationError
		x509U x509.UnknownAuthorityError
		x509H x509.HostnameError
		x509C x509.CertificateInvalidError
		alert tls.AlertError
		rec   tls.RecordHeaderError
	)
	switch {
	case err == nil:
		return "failed"
	case errors.As(err, &own):
		return own.msg
	case errors.As(err, &rpc):
		// A target's own error answer, or one the transport made up for
		// it (an HTTP status, a malformed answer): the target's words.
		return rpc.Message
	case errors.As(err, &exit):
		switch {
		case exit.Broke != nil:
			return "its process was stopped: its output broke"
		case exit.Status != "":
			return "its process exited (" + exit.Status + ")"
		}
		return "its process exited"
	case errors.Is(err, transport.ErrProcessStart):
		return "its process could not be started"
	case errors.Is(err, transport.ErrCredentials):
		return "the gateway's credentials for it are unavailable"
	case errors.Is(err, transport.ErrEndpointOrigin):
		return "its SSE endpoint is on another origin"
	case errors.Is(err, context.DeadlineExceeded):
		return "timed out"
	case errors.Is(err, context.Canceled):
		return "cancelled"
	case errors.Is(err, sdk.ErrConnectionClosed):
		return "connection closed"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset"
	case errors.As(err, &dns):
		return "its host name does not resolve"
	case errors.As(err, &cert), errors.As(err, &x509U), errors.As(err, &x509H), errors.As(err, &x509C), errors.As(err, &alert), errors.As(err, &rec):
		return "TLS handshake failed"
	case errors.As(err, &netE) && netE.Timeout():
		return "timed out"
	case errors.As(err, &op):
		return "unreachable"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.EPIPE):
		return "the connection ended"
	}
	return "failed"
}

// targetMessage is a client's message for target name's failure err.
func targetMessage(name string, err error) string {
	msg := publicFailure(err)
	if strings.HasPrefix(msg, "target "+name+" ") || strings.HasPrefix(msg, "target "+name+":") {
		return msg // a failure already told (a restart's initialize)
	}
	return "target " + name + ": " + msg
}

// failure is the error of a response that answers a call with a target's
// failure: its client reads wire (targetMessage), the log cause
// (logDetail). It encodes as wire, code included.
type failure struct {
	wire  *jsonrpc.Error
	cause error
}

func (f *failure) Error() string   { return f.wire.Message }
func (f *failure) Unwrap() []error { return []error{f.wire, f.cause} }

// failureResponse answers id with target name's failure err.
func failureResponse(id jsonrpc.ID, name string, err error) *jsonrpc.Response {
	return &jsonrpc.Response{ID: id, Error: &failure{wire: &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: targetMessage(name, err)}, cause: err}}
}

// logDetail is what the log says of a failure: its cause when the client
// was told only its class.
func logDetail(err error) error {
	var f *failure
	if errors.As(err, &f) && f.cause != nil {
		return f.cause
	}
	return err
}

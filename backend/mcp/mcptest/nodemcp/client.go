package nodemcp

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
)

// Step is one operation of a TSClient scenario (testdata/node/client.mjs).
// Op is one of:
//
//	listTools, listResources, listResourceTemplates, listPrompts, ping
//	callTool          Name, Args; Progress asks for progress notifications
//	                  (the SDK sends a progressToken; see StepResult.Progress)
//	readResource      URI
//	subscribeResource URI
//	getPrompt         Name, Args
//	setLoggingLevel   Level
//	request           Method, Params: any request; Result is the raw result
//	notify            Method, Params: a client notification
//	waitNotification  Method, Count (default 1): until that many server
//	                  notifications of Method are in Report.Notifications
//	terminate         HTTP DELETE of the session (transport.terminateSession);
//	                  streamable HTTP only
//	close             client.close()
//
// TimeoutMs bounds the step (default ClientOptions.TimeoutMs).
type Step struct {
	Op        string         `json:"op"`
	Name      string         `json:"name,omitempty"`
	Args      map[string]any `json:"args,omitempty"`
	Progress  bool           `json:"progress,omitempty"`
	URI       string         `json:"uri,omitempty"`
	Level     string         `json:"level,omitempty"`
	Method    string         `json:"method,omitempty"`
	Params    any            `json:"params,omitempty"`
	Count     int            `json:"count,omitempty"`
	TimeoutMs int            `json:"timeoutMs,omitempty"`
}

// ClientOptions configures TSClient; the zero value is fine.
type ClientOptions struct {
	// Transport is "http" (streamable HTTP) or "sse"; empty means sse if
	// the URL's path ends in /sse, else http.
	Transport string `json:"transport,omitempty"`
	// Headers are sent on every HTTP request.
	Headers map[string]string `json:"headers,omitempty"`
	// TimeoutMs bounds initialize and each step (default 30000).
	TimeoutMs int `json:"timeoutMs,omitempty"`
	// Capabilities are the client's capabilities (default none).
	Capabilities map[string]any `json:"capabilities,omitempty"`
	// ClientName is the clientInfo name (default "nodemcp-client").
	ClientName string `json:"clientName,omitempty"`
}

// Report is what client.mjs prints.
type Report struct {
	Connected bool `json:"connected"`
	// ConnectError is why connect (initialize) failed; no step ran then.
	ConnectError *StepError `json:"connectError,omitempty"`
	// SessionID is the Mcp-Session-Id after initialize (streamable HTTP).
	SessionID string `json:"sessionId,omitempty"`
	// ProtocolVersion is the version negotiated by initialize.
	ProtocolVersion    string          `json:"protocolVersion,omitempty"`
	ServerInfo         json.RawMessage `json:"serverInfo,omitempty"`
	ServerCapabilities json.RawMessage `json:"serverCapabilities,omitempty"`
	Instructions       string          `json:"instructions,omitempty"`
	Steps              []StepResult    `json:"steps"`
	// Notifications are the server's notifications, in order, except
	// progress (see StepResult.Progress).
	Notifications []Notification `json:"notifications"`
	// TransportErrors are the errors the SDK reported through onerror.
	TransportErrors []string `json:"transportErrors"`
}

// StepResult is the outcome of one Step.
type StepResult struct {
	Op     string          `json:"op"`
	OK     bool            `json:"ok"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  *StepError      `json:"error,omitempty"`
	// Progress holds the progress notifications of a callTool with
	// Progress that arrived before its result. (Over SSE the everything
	// server's last one can come after the result: the SDK then drops it
	// and reports it in Report.TransportErrors.)
	Progress []Progress `json:"progress,omitempty"`
	// SessionID is the transport's session id after the step (empty once
	// terminated).
	SessionID string `json:"sessionId,omitempty"`
}

// StepError is a failed step: Code is the JSON-RPC error code, or the HTTP
// status for transport errors, when the SDK gives one.
type StepError struct {
	Code    *int            `json:"code,omitempty"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *StepError) Error() string {
	if e.Code != nil {
		return fmt.Sprintf("%s (code %d)", e.Message, *e.Code)
	}
	return e.Message
}

// Progress is one notifications/progress.
type Progress struct {
	Progress float64 `json:"progress"`
	Total    float64 `json:"total,omitempty"`
	Message  string  `json:"message,omitempty"`
}

// Notification is one server notification.
type Notification struct {
	Method string          `json:"method"`
	Params json.RawMessage `json:"params,omitempty"`
}

// TSClient runs testdata/node/client.mjs, an MCP client on the
// TypeScript SDK's StreamableHTTPClientTransport (or SSEClientTransport),
// against url: it connects, runs steps in order (a failed step does not stop
// the others), closes, and returns its report. err is non-nil only when the
// script could not run or its report not be parsed; a failed connect is
// Report.ConnectError, a failed step StepResult.Error. It is bounded by ctx
// and RunTimeout.
func TSClient(tb testing.TB, ctx context.Context, url string, steps []Step, opts *ClientOptions) (*Report, error) {
	tb.Helper()
	in := get(tb)
	if steps == nil {
		steps = []Step{}
	}
	if opts == nil {
		opts = &ClientOptions{}
	}
	sj, err := json.Marshal(steps)
	if err != nil {
		return nil, err
	}
	oj, err := json.Marshal(opts)
	if err != nil {
		return nil, err
	}
	out, err := runNode(ctx, in.node, in.dir, nil, filepath.Join(in.dir, "client.mjs"), url, string(sj), string(oj))
	if err != nil {
		return nil, err
	}
	var r Report
	if err := json.Unmarshal(out, &r); err != nil {
		return nil, fmt.Errorf("client.mjs report: %w: %q", err, out)
	}
	return &r, nil
}

// Package transport owns the gateway's connections to MCP targets: each
// constructor returns an mcp.Connection (github.com/modelcontextprotocol/go-sdk)
// that carries raw JSON-RPC messages, so the relay in backend/mcp sees every
// message and sends initialize itself.
//
//   - DialStreamable is our own client of the Streamable HTTP transport
//     (MCP 2025-06-18): POSTs answered with JSON or an SSE stream, the
//     standalone GET stream, session ids, and HTTP failures turned into
//     JSON-RPC error responses for the request that caused them.
//   - StartStdio runs a command and speaks the SDK's newline-delimited JSON
//     (IOTransport) over its stdin and stdout, skipping the stdout lines
//     that are not JSON-RPC messages (banners, log lines) as the TypeScript
//     SDK does, and makes its exit visible as a Read error; its stderr is
//     passed on line by line.
//   - DialSSE connects to a legacy (2024-11-05) HTTP+SSE server through the
//     SDK's SSEClientTransport, adding headers to every request.
package transport

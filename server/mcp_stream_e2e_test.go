package server

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/relaygate/gateway/backend/mcp/mcptest"
)

// streamingMCPTarget is mcptest.PingingTarget served by upstream.
type streamingMCPTarget struct {
	host string
	*mcptest.PingingTarget
}

func startStreamingMCPTarget(t *testing.T) *streamingMCPTarget {
	t.Helper()
	f := &streamingMCPTarget{PingingTarget: new(mcptest.PingingTarget)}
	f.host = upstream(t, f.PingingTarget)
	return f
}

// socketFDs counts the process' file descriptors that are TCP sockets
// with an end on port (of 127.0.0.1): a client's and the gateway's, not
// those of other tests' servers.
func socketFDs(t *testing.T, port int) int {
	t.Helper()
	table, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		t.Skip("no /proc/net/tcp")
	}
	inodes := map[string]bool{}
	for _, line := range strings.Split(string(table), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 10 {
			continue
		}
		for _, addr := range f[1:3] { // local and remote, ADDR:PORT in hex
			_, hexPort, _ := strings.Cut(addr, ":")
			if p, err := strconv.ParseUint(hexPort, 16, 16); err == nil && int(p) == port {
				inodes[f[9]] = true
			}
		}
	}
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd")
	}
	n := 0
	for _, fd := range fds {
		link, _ := os.Readlink("/proc/self/fd/" + fd.Name())
		if inode, ok := strings.CutPrefix(link, "socket:["); ok && inodes[strings.TrimSuffix(inode, "]")] {
			n++
		}
	}
	return n
}

// mcpGoroutines counts the goroutines in the MCP backend's code (client
// streams, targets' streams, sessions).
func mcpGoroutines() int {
	buf := make([]byte, 16<<20)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	for _, g := range bytes.Split(buf, []byte("\n\n")) {
		if bytes.Contains(g, []byte("relaygate/gateway/backend/mcp")) {
			n++
		}
	}
	return n
}

// portOf is the port of a host:port.
func portOf(t *testing.T, hostport string) int {
	t.Helper()
	_, p, _ := net.SplitHostPort(hostport)
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatalf("port of %q: %v", hostport, err)
	}
	return n
}

// droppedStream is a client's MCP stream on the gateway: drop hangs up on
// it and reports, for HTTP/1.1, whether the gateway then ended it.
type droppedStream interface{ drop(t *testing.T) }

// h1MCPStream is a stream on a raw HTTP/1.1 connection.
type h1MCPStream struct {
	conn net.Conn
	body *bufio.Reader
}

// drop half-closes the connection, as a client that closes it does (its
// FIN), and waits for the gateway to end the stream and the connection:
// well before the keep-alive comment, which a half-closed client still
// takes.
func (s *h1MCPStream) drop(t *testing.T) {
	t.Helper()
	defer s.conn.Close()
	_ = s.conn.(*net.TCPConn).CloseWrite()
	_ = s.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.Copy(io.Discard, s.body); err != nil {
		t.Fatalf("the gateway did not end a dropped stream: %v", err)
	}
}

// h2MCPStream is a stream on an HTTP/2 connection.
type h2MCPStream struct {
	cancel context.CancelFunc
	body   io.ReadCloser
}

// drop resets the stream.
func (s *h2MCPStream) drop(*testing.T) {
	s.cancel()
	s.body.Close()
}

// openH1Stream sends a GET on a new connection and reads the response
// head and body up to the line that starts with first.
func openH1Stream(t *testing.T, addr, path, session, first string) (*h1MCPStream, string) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+path, nil)
	req.Header.Set("Accept", "text/event-stream")
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
		req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	}
	if err := req.Write(conn); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %v %v", path, resp, err)
	}
	body := bufio.NewReader(resp.Body)
	for {
		line, err := body.ReadString('\n')
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		if strings.HasPrefix(line, first) {
			return &h1MCPStream{conn: conn, body: body}, line
		}
	}
}

// TestMCPDroppedStreamsReleaseEverything: clients that open their MCP
// stream (streamable HTTP GET, legacy SSE GET /sse) and go away without a
// DELETE have it ended at their hang-up, not at the next keep-alive
// comment 25 s later (which a half-closed client never failed), and cost
// no upstream connection, socket or goroutine shortly after: the targets'
// standalone streams close once no client stream needs them (a legacy
// session ends with its stream). 500 such clients used to hold 500 sockets
// in CLOSE-WAIT, 500 upstream connections until their sessions expired,
// and 3,000 goroutines.
func TestMCPDroppedStreamsReleaseEverything(t *testing.T) {
	const n = 20
	type variant struct {
		tr     Transport
		proto  string
		legacy bool
	}
	var variants []variant
	for _, tr := range e2eTransports {
		variants = append(variants, variant{tr, "HTTP/1.1", false}, variant{tr, "HTTP/1.1", true})
	}
	variants = append(variants, variant{TransportStd, "HTTP/2", false}, variant{TransportStd, "HTTP/2", true})
	for _, v := range variants {
		name := fmt.Sprintf("%s/%s/streamable", v.tr, v.proto)
		if v.legacy {
			name = fmt.Sprintf("%s/%s/legacy", v.tr, v.proto)
		}
		t.Run(name, func(t *testing.T) {
			up := startStreamingMCPTarget(t)
			tg := startGatewayWith(t, "binds:\n- port: 3000\n  listeners:\n  - routes:\n    - backends:\n      - mcp:\n          targets:\n          - name: a\n            mcp: { host: '${TARGET}' }\n", map[string]string{"TARGET": up.host + "/mcp"}, v.tr)
			endpoint := tg.url(3000) + "/mcp"
			var sessions []string
			if !v.legacy {
				for range n {
					sessions = append(sessions, initRaw(t, endpoint))
				}
			}
			h2 := h2cClient()
			h2.Timeout = 0
			defer h2.CloseIdleConnections()
			// round opens n streams, drops them and waits until the
			// targets' streams closed.
			round := func(k int) {
				streams := make([]droppedStream, n)
				for i := range n {
					session := ""
					if !v.legacy {
						session = sessions[i]
					}
					streams[i] = openMCPStream(t, tg, h2, v.proto, session)
				}
				eventually(t, 10*time.Second, "every target stream open", func() bool { return up.Open.Load() == n })
				for _, s := range streams {
					s.drop(t)
				}
				h2.CloseIdleConnections()
				// Within the gateway's linger of the targets' streams
				// (5 s), well before the client streams' keep-alive (25 s);
				// a legacy session ends at once, before its keep-alive
				// (5 s, which an HTTP/2 reset made fail).
				bound := 15 * time.Second
				if v.legacy {
					bound = 3 * time.Second
				}
				eventually(t, bound, "every target stream closed", func() bool { return up.Open.Load() == 0 })
				if v.legacy {
					eventually(t, 5*time.Second, "every legacy session ended", func() bool { return up.Deletes.Load() == int64(k*n) })
				} else if up.Deletes.Load() != 0 {
					t.Fatalf("%d sessions ended with their streams", up.Deletes.Load())
				}
			}
			if v.legacy {
				// Legacy sessions are opened with their streams: a first
				// round fills the pool of connections to the target,
				// which the baseline must include.
				round(1)
			}
			// What the gateway holds beside the streams: sessions, the
			// test's connections. Counted on the gateway's port (the
			// target's streams are counted by the target; its pooled
			// connections vary with how many DELETEs ran at once) and in
			// the MCP code: the process' totals move with other tests'
			// leftovers and the HTTP/2 workers' pool.
			gw := portOf(t, tg.addr(3000))
			goroutines, fds := mcpGoroutines(), socketFDs(t, gw)
			round(2)
			eventually(t, 5*time.Second, "the sockets and goroutines released", func() bool {
				return mcpGoroutines() <= goroutines+2 && socketFDs(t, gw) <= fds+2
			})
			if !v.legacy {
				// The sessions live on: a stream opens the target's again.
				s := openMCPStream(t, tg, h2, v.proto, sessions[0])
				eventually(t, 10*time.Second, "the target stream open again", func() bool { return up.Open.Load() == 1 })
				s.drop(t)
				h2.CloseIdleConnections()
			}
		})
	}
}

// openMCPStream opens a client's MCP stream over proto: the GET stream of
// session, or without one a legacy SSE session (initialized through its
// endpoint).
func openMCPStream(t *testing.T, tg *testGateway, h2 *http.Client, proto string, session string) droppedStream {
	t.Helper()
	legacy := session == ""
	path, first := "/mcp", ": stream open"
	if legacy {
		path, first = "/sse", "data: "
	}
	var s droppedStream
	var line string
	if proto == "HTTP/1.1" {
		s, line = openH1Stream(t, tg.addr(3000), path, session, first)
	} else {
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, tg.url(3000)+path, nil)
		req.Header.Set("Accept", "text/event-stream")
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
			req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
		}
		resp, err := h2.Do(req)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %v %v", path, resp, err)
		}
		br := bufio.NewReader(resp.Body)
		for !strings.HasPrefix(line, first) {
			if line, err = br.ReadString('\n'); err != nil {
				t.Fatalf("GET %s: %v", path, err)
			}
		}
		s = &h2MCPStream{cancel: cancel, body: resp.Body}
	}
	if legacy {
		postLegacyInitialize(t, tg.url(3000)+strings.TrimSpace(strings.TrimPrefix(line, "data: ")))
	}
	return s
}

// postLegacyInitialize initializes a legacy SSE session at its endpoint
// (the answer goes on its stream).
func postLegacyInitialize(t *testing.T, endpoint string) {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	req, _ := http.NewRequest(http.MethodPost, endpoint, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := testClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("legacy initialize: %d", resp.StatusCode)
	}
}

package server

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"strings"
	"testing"
	"time"

	procv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/relaygate/gateway/policy/extproc/extproctest"
)

// trailerOutcome is one request a trailerUpstream read: its head and
// body, and the fields of its trailer section.
type trailerOutcome struct {
	req     message
	trailer headerFields
	err     error
}

// trailerUpstream reads requests one after another on each connection,
// chunked bodies with their trailer section, answers each 200 "ok" and
// reports it. heads gets a signal (when it has room) as each request's
// head has been read.
func trailerUpstream(t *testing.T) (addr string, out <-chan trailerOutcome, heads <-chan struct{}) {
	t.Helper()
	outc, headc := make(chan trailerOutcome, 16), make(chan struct{}, 1)
	addr = rawUpstream(t, func(c net.Conn) {
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(15 * time.Second))
		br := bufio.NewReader(c)
		for {
			o := readTrailed(br, headc)
			outc <- o
			if o.err != nil {
				return
			}
			if _, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"); err != nil {
				return
			}
		}
	})
	return addr, outc, headc
}

func readTrailed(br *bufio.Reader, heads chan<- struct{}) trailerOutcome {
	var o trailerOutcome
	if o.req, o.err = readHead(br); o.err != nil {
		return o
	}
	signal(heads)
	if !strings.Contains(strings.ToLower(o.req.fields.get("Transfer-Encoding")), "chunked") {
		o.req.body, o.err = readBody(br, o.req.fields, false)
		return o
	}
	if o.req.body, o.err = io.ReadAll(httputil.NewChunkedReader(br)); o.err != nil {
		return o
	}
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			o.err = err
			return o
		}
		line = strings.TrimRight(line, "\r\n")
		if line == "" {
			return o
		}
		name, value, _ := strings.Cut(line, ":")
		o.trailer = append(o.trailer, [2]string{name, strings.TrimSpace(value)})
	}
}

func nextTrailed(t *testing.T, out <-chan trailerOutcome) trailerOutcome {
	t.Helper()
	select {
	case o := <-out:
		return o
	case <-time.After(10 * time.Second):
		t.Fatal("the upstream got no request")
		return trailerOutcome{}
	}
}

// signal sends on ch unless a signal is already waiting there.
func signal(ch chan<- struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

func awaitSignal(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// sendUntil writes chunk to c again and again until ch has a signal,
// within a bound.
func sendUntil(t *testing.T, c net.Conn, chunk string, ch <-chan struct{}, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := io.WriteString(c, chunk); err != nil {
			t.Fatal(err)
		}
		select {
		case <-ch:
			return
		case <-time.After(5 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func drain(ch <-chan struct{}) {
	select {
	case <-ch:
	default:
	}
}

// TestExtProcChunkedBodyEndsAtHeaderAnswer: a chunked request body whose
// last chunk (with or without trailer fields) arrives while a full-duplex
// service's answer to the headers is applied, or while the request goes
// upstream. fasthttp reads the trailer section into the request's header
// as the pump reads the last chunk, on the pump's goroutine, while the
// request's goroutine edits that header and writes it upstream: under
// -race this failed in every run before the two were ordered. The body's
// end is sent when the service has the headers (its answer on its way),
// when it has the first chunk (the answer gone out before it), or once the
// upstream has the request's head (the body being sent on; one-byte chunks
// go until then); or through a transformation that reads the processed
// body.
// The trailer fields reach the upstream as through a route without
// extProc, and the connection stays usable.
func TestExtProcChunkedBodyEndsAtHeaderAnswer(t *testing.T) {
	atHeaders, atFirstChunk := make(chan struct{}, 1), make(chan struct{}, 1)
	service := func(atChunk bool, ch chan<- struct{}) *extproctest.Server {
		return &extproctest.Server{Answer: func(st *extproctest.Stream, m *procv3.ProcessingRequest) []*procv3.ProcessingResponse {
			switch r := m.Request.(type) {
			case *procv3.ProcessingRequest_RequestHeaders:
				if !atChunk {
					signal(ch)
				}
				return []*procv3.ProcessingResponse{extproctest.Reply(st, m, extproctest.Set(map[string]string{"x-processed": "yes"}, "x-drop"), nil)}
			case *procv3.ProcessingRequest_RequestBody:
				if atChunk && len(st.Received()) == 0 && len(r.RequestBody.GetBody()) > 0 {
					signal(ch)
				}
			}
			return []*procv3.ProcessingResponse{upper(st, m, true)}
		}}
	}
	vars := map[string]string{
		"AT":    extproctest.Start(t, service(false, atHeaders)),
		"AFTER": extproctest.Start(t, service(true, atFirstChunk)),
	}
	for _, tr := range e2eTransports {
		t.Run(string(tr), func(t *testing.T) {
			addr, out, heads := trailerUpstream(t)
			vars["UP"] = addr
			tg := startGatewayWith(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - matches: [{path: {pathPrefix: /at-headers}}, {path: {pathPrefix: /while-sent}}]
      policies:
        extProc: {host: '${AT}'}
      backends: [{host: '${UP}'}]
    - matches: [{path: {pathPrefix: /after-answer}}]
      policies:
        extProc: {host: '${AFTER}'}
      backends: [{host: '${UP}'}]
    - matches: [{path: {pathPrefix: /then-transform}}]
      policies:
        extProc: {host: '${AT}'}
        transformations: {request: {set: {x-body-size: 'string(size(request.body))'}}}
      backends: [{host: '${UP}'}]
    - matches: [{path: {pathPrefix: /plain}}]
      backends: [{host: '${UP}'}]
`, vars, tr)
			for _, route := range []struct {
				path    string
				release <-chan struct{} // nil: the body goes at once
				// more: after release, one-byte chunks ("x") go until the
				// upstream has the head, then the body's end.
				more     bool
				wantBody string
			}{
				{path: "at-headers", release: atHeaders, wantBody: "HELLO"},
				{path: "after-answer", release: atFirstChunk, wantBody: "HELLO"},
				{path: "while-sent", release: atHeaders, more: true, wantBody: "HELLO"},
				{path: "then-transform", release: atHeaders, wantBody: "HELLO"},
				{path: "plain", wantBody: "hello"},
			} {
				for _, tc := range []struct {
					name, announce, end string
					want                headerFields
				}{
					{"no trailer fields", "", "0\r\n\r\n", nil},
					{"announced trailer fields", "Trailer: X-Sum, X-Count\r\n", "0\r\nX-Sum: 42\r\nX-Count: 2\r\n\r\n", headerFields{{"X-Sum", "42"}, {"X-Count", "2"}}},
					{"a trailer field not announced", "", "0\r\nX-Late: 1\r\n\r\n", headerFields{{"X-Late", "1"}}},
				} {
					t.Run(route.path+"/"+tc.name, func(t *testing.T) {
						for _, ch := range []<-chan struct{}{atHeaders, atFirstChunk, heads} {
							drain(ch) // signals of earlier requests
						}
						c, br := dialRaw(t, tg.addr(3000))
						head := "POST /" + route.path + " HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nX-Drop: 1\r\n" + tc.announce + "\r\n"
						if _, err := io.WriteString(c, head+"5\r\nhello\r\n"); err != nil {
							t.Fatal(err)
						}
						if route.release != nil {
							awaitSignal(t, route.release, "the service to release the body's end")
						}
						if route.more {
							// The head goes upstream once the pump's read in
							// progress at the answer has returned: the client
							// sends on until it has.
							sendUntil(t, c, "1\r\nx\r\n", heads, "the upstream to get the request's head")
						}
						if _, err := io.WriteString(c, tc.end); err != nil {
							t.Fatal(err)
						}
						m, err := readReply(br, "POST")
						if err != nil || m.status() != 200 {
							t.Fatalf("status %d %q (%v), want 200", m.status(), m.body, err)
						}
						o := nextTrailed(t, out)
						if o.err != nil || strings.TrimRight(string(o.req.body), "X") != route.wantBody {
							t.Fatalf("the upstream got %q (%v), want %q", o.req.body, o.err, route.wantBody)
						}
						if route.release != nil && (o.req.fields.get("X-Processed") != "yes" || o.req.fields.has("X-Drop")) {
							t.Errorf("the service's header answer was not applied: %v", o.req.fields)
						}
						if route.path == "then-transform" && o.req.fields.get("X-Body-Size") != "5" {
							t.Errorf("the transformation saw a body of %q bytes, want 5", o.req.fields.get("X-Body-Size"))
						}
						if !sameFields(o.trailer, tc.want) {
							t.Errorf("the upstream got trailer fields %v, want %v", o.trailer, tc.want)
						}
						// The connection goes on: the body was read to its end.
						m = roundTripRaw(t, c, br, "POST", "POST /plain HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi")
						if m.status() != 200 {
							t.Fatalf("next request on the connection: status %d", m.status())
						}
						if o := nextTrailed(t, out); string(o.req.body) != "hi" {
							t.Fatalf("the upstream got %q for the next request", o.req.body)
						}
					})
				}
			}
		})
	}
}

// sameFields reports whether a and b hold the same fields in the same
// order, names compared without case.
func sameFields(a, b headerFields) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !strings.EqualFold(a[i][0], b[i][0]) || a[i][1] != b[i][1] {
			return false
		}
	}
	return true
}

// TestExtProcRequestTrailersForwarded: request trailer fields go through a
// full-duplex extProc route as through a plain one (TestTrailersBothWays),
// from HTTP/1.1 and HTTP/2 clients to HTTP/1.1 and HTTP/2 upstreams; the
// service sees the body, not the trailer section.
func TestExtProcRequestTrailersForwarded(t *testing.T) {
	proc := &extproctest.Server{Answer: func(st *extproctest.Stream, m *procv3.ProcessingRequest) []*procv3.ProcessingResponse {
		return []*procv3.ProcessingResponse{upper(st, m, true)}
	}}
	procAddr := extproctest.Start(t, proc)
	up := upstreamH2C(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Upstream-Proto", r.Proto)
		w.Header().Set("X-Got-Trailer", r.Trailer.Get("X-Req-Trailer"))
		_, _ = w.Write(b)
	}))
	for _, version := range []string{"HTTP1", "HTTP2"} {
		tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - policies:
        extProc: {host: '`+procAddr+`'}
      backends:
      - host: '`+up+`'
        policies: {http: {version: `+version+`}}
`, nil)
		for _, client := range bothClients() {
			t.Run(client.name+" to "+version, func(t *testing.T) {
				req, _ := http.NewRequest(http.MethodPost, tg.url(3000)+"/t", io.NopCloser(strings.NewReader("body")))
				req.ContentLength = -1
				req.Trailer = http.Header{"X-Req-Trailer": {"v"}}
				resp, err := client.client.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				wantProto := map[string]string{"HTTP1": "HTTP/1.1", "HTTP2": "HTTP/2.0"}[version]
				if string(b) != "BODY" || resp.Header.Get("X-Upstream-Proto") != wantProto {
					t.Fatalf("%d %q %v", resp.StatusCode, b, resp.Header)
				}
				if got := resp.Header.Get("X-Got-Trailer"); got != "v" {
					t.Fatalf("the upstream got trailer %q; want v", got)
				}
			})
		}
	}
}

// TestExtProcUpstreamGoneMidBody: the upstream goes away while a chunked
// request body streams to it through a full-duplex service. The service
// is mid-body, so the response is not processed: the client gets the
// failure (500, failClosed) and the connection closes, its body unread.
func TestExtProcUpstreamGoneMidBody(t *testing.T) {
	proc := &extproctest.Server{Answer: func(st *extproctest.Stream, m *procv3.ProcessingRequest) []*procv3.ProcessingResponse {
		return []*procv3.ProcessingResponse{upper(st, m, true)}
	}}
	up := rawUpstream(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		if _, err := readHead(br); err == nil {
			// The first chunk, then a reset.
			_, _ = io.ReadAll(io.LimitReader(httputil.NewChunkedReader(br), 5))
		}
		_ = c.(*net.TCPConn).SetLinger(0)
		c.Close()
	})
	for _, tr := range e2eTransports {
		t.Run(string(tr), func(t *testing.T) {
			if raceEnabled && tr == TransportNetpoll {
				// The pump's read in progress is interrupted with a read
				// deadline; netpoll's SetReadDeadline is a plain store that
				// its blocked Read does not synchronize with (nor wake on),
				// which the race detector reports. Not this test's subject.
				t.Skip("netpoll: a read deadline set during a read races with it (-race)")
			}
			tg := startGatewayWith(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - policies:
        extProc: {host: '`+extproctest.Start(t, proc)+`'}
      backends: [{host: '`+up+`'}]
`, nil, tr)
			c, br := dialRaw(t, tg.addr(3000))
			if _, err := io.WriteString(c, "POST /p HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n"); err != nil {
				t.Fatal(err)
			}
			answered := make(chan struct{})
			var m message
			var err error
			go func() {
				defer close(answered)
				m, err = readReply(br, "POST")
			}()
			// The body goes on until the gateway answers.
			deadline := time.Now().Add(10 * time.Second)
		send:
			for {
				if _, werr := io.WriteString(c, "1\r\nx\r\n"); werr != nil {
					break // the gateway closed the connection
				}
				select {
				case <-answered:
					break send
				case <-time.After(5 * time.Millisecond):
				}
				if time.Now().After(deadline) {
					t.Fatal("no answer")
				}
			}
			<-answered
			if err != nil || m.status() != 500 || string(m.body) != "external processing failed\n" {
				t.Fatalf("status %d %q (%v), want 500", m.status(), m.body, err)
			}
			if _, err := br.ReadByte(); err == nil {
				t.Fatal("the connection went on after a body cut short")
			}
		})
	}
}

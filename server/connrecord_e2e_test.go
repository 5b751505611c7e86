package server

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/relaygate/gateway/backend/tcpproxy"
)

// loggedConns waits until want connection records were logged and returns
// their fields, failing if there are more.
func loggedConns(t *testing.T, tg *testGateway, want int) []map[string]any {
	t.Helper()
	eventually(t, 10*time.Second, strconv.Itoa(want)+" connection records", func() bool {
		return tg.accessLogs().FilterMessage("connection").Len() >= want
	})
	entries := tg.accessLogs().FilterMessage("connection").All()
	if len(entries) != want {
		t.Fatalf("%d connection records, want %d", len(entries), want)
	}
	out := make([]map[string]any, len(entries))
	for i, e := range entries {
		out[i] = e.ContextMap()
	}
	return out
}

// requireFields fails unless rec has each of want's fields with its value.
func requireFields(t *testing.T, rec map[string]any, want map[string]any) {
	t.Helper()
	for k, v := range want {
		if got, ok := rec[k]; !ok || got != v {
			t.Errorf("%s = %#v, want %#v (record %v)", k, got, v, rec)
		}
	}
}

// requireAbsent fails if rec has any of the fields.
func requireAbsent(t *testing.T, rec map[string]any, fields ...string) {
	t.Helper()
	for _, k := range fields {
		if v, ok := rec[k]; ok {
			t.Errorf("%s = %#v is in the record %v", k, v, rec)
		}
	}
}

// exchange sends msg on c, half-closes, and returns all that comes back.
func exchange(t *testing.T, c net.Conn, msg []byte) []byte {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write(msg); err != nil {
		t.Fatal(err)
	}
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		if err := cw.CloseWrite(); err != nil {
			t.Fatal(err)
		}
	}
	got, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("read after %d bytes: %v", len(got), err)
	}
	return got
}

// doublingUpstream reads what a connection sends until it half-closes,
// answers with twice as many bytes, and closes.
func doublingUpstream(t *testing.T) string {
	t.Helper()
	return rawUpstream(t, func(c net.Conn) {
		defer c.Close()
		n, _ := io.Copy(io.Discard, c)
		_, _ = c.Write(bytes.Repeat([]byte("y"), int(2*n)))
	})
}

// TestConnRecordTCP: every forwarded TCP connection gets one record, with
// its names, client, upstream, the bytes each way of a known exchange, its
// duration and a clean end.
func TestConnRecordTCP(t *testing.T) {
	up := doublingUpstream(t)
	tg := startGateway(t, `
backends:
- name: doubler
  host: ${UP}
binds:
- port: 1
  listeners:
  - name: raw
    protocol: TCP
    tcpRoutes:
    - name: double
      backends: [{backend: doubler}]
`, map[string]string{"UP": up})
	var clients []string
	for i, size := range []int{1, 1000, 300_000} {
		c, err := net.Dial("tcp", tg.addr(1))
		if err != nil {
			t.Fatal(err)
		}
		clients = append(clients, c.LocalAddr().String())
		if got := exchange(t, c, bytes.Repeat([]byte("x"), size)); len(got) != 2*size {
			t.Fatalf("connection %d: %d bytes back, want %d", i, len(got), 2*size)
		}
		c.Close()
		rec := loggedConns(t, tg, i+1)[i]
		requireFields(t, rec, map[string]any{
			"protocol": "tcp", "bind": "bind/1", "listener": "raw", "route": "double", "backend": "doubler",
			"endpoint": up, "src": clients[i], "bytes_in": int64(size), "bytes_out": int64(2 * size), "end": "closed",
		})
		if d, _ := rec["duration"].(time.Duration); d <= 0 {
			t.Errorf("duration %v", rec["duration"])
		}
		requireAbsent(t, rec, "tls.sni", "destination", "upstream_error", "method", "status")
	}
	// A client that resets its connection.
	c, err := net.Dial("tcp", tg.addr(1))
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(c, "abc")
	_ = c.(*net.TCPConn).SetLinger(0)
	c.Close()
	requireFields(t, loggedConns(t, tg, 4)[3], map[string]any{"end": "client_reset"})
}

// TestConnRecordTLS: a passthrough connection's record and a terminated
// one's carry the server name; the passthrough one counts the TLS bytes,
// the terminated one the decrypted bytes.
func TestConnRecordTLS(t *testing.T) {
	pki := newTestPKI(t, "connrecord")
	pass := tlsEchoUpstream(t, pki.Server("a.test", "a.test").TLS)
	echo := tcpEchoUpstream(t)
	srv := pki.Server("db.test", "db.test")
	tg := startGateway(t, `
binds:
- port: 1
  listeners:
  - name: pass
    protocol: TLS
    tcpRoutes:
    - name: a
      hostnames: [a.test]
      backends: [{host: ${PASS}}]
- port: 2
  listeners:
  - name: term
    protocol: TLS
    hostname: db.test
    tls: {cert: ${CERT}, key: ${KEY}}
    tcpRoutes:
    - name: db
      hostnames: [db.test]
      backends: [{host: ${ECHO}}]
`, map[string]string{"PASS": pass, "ECHO": echo, "CERT": srv.CertFile, "KEY": srv.KeyFile})

	for i, tc := range []struct {
		desc  string
		port  int
		sni   string
		route string
		up    string
	}{
		{"passthrough", 1, "a.test", "a", pass},
		{"terminated", 2, "db.test", "db", echo},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			c, err := tls.Dial("tcp", tg.addr(tc.port), &tls.Config{ServerName: tc.sni, RootCAs: pki.Pool})
			if err != nil {
				t.Fatal(err)
			}
			if got := exchange(t, c, []byte("ping")); string(got) != "ping" {
				t.Fatalf("echo %q", got)
			}
			c.Close()
			rec := loggedConns(t, tg, i+1)[i]
			requireFields(t, rec, map[string]any{
				"protocol": "tls", "bind": "bind/" + strconv.Itoa(tc.port), "route": tc.route, "tls.sni": tc.sni,
				"endpoint": tc.up, "end": "closed",
			})
			in, out := rec["bytes_in"].(int64), rec["bytes_out"].(int64)
			if tc.desc == "terminated" && (in != 4 || out != 4) || tc.desc == "passthrough" && (in < 100 || out < 100) {
				t.Errorf("bytes in %d, out %d", in, out)
			}
		})
	}
}

// TestConnRecordUnforwarded: a connection closed before any byte went
// upstream says why: refused by networkAuthorization (a TLS name, a plain
// HTTP connection), no route for its server name, or a backend that could
// not be reached.
func TestConnRecordUnforwarded(t *testing.T) {
	pki := newTestPKI(t, "unforwarded")
	srv := pki.Server("a.test", "a.test")
	pass := tlsEchoUpstream(t, srv.TLS)
	closed := closedAddr(t)
	tg := startGateway(t, `
frontendPolicies:
  networkAuthorization:
    rules:
    - deny: 'destination.hostname == "blocked.test"'
    - deny: 'destination.port == 3'
    - deny: 'destination.port == 4'
binds:
- port: 1
  listeners:
  - name: pass
    protocol: TLS
    tcpRoutes:
    - hostnames: [a.test, blocked.test]
      backends: [{host: ${PASS}}]
- port: 2
  listeners:
  - protocol: TCP
    tcpRoutes:
    - name: gone
      backends: [{host: ${CLOSED}}]
- port: 3
  listeners:
  - routes:
    - backends: [{host: ${PASS}}]
- port: 4
  listeners:
  - name: secure
    protocol: HTTPS
    tls: {cert: ${CERT}, key: ${KEY}}
    routes:
    - backends: [{host: ${PASS}}]
  - name: plain
    routes:
    - backends: [{host: ${PASS}}]
`, map[string]string{"PASS": pass, "CLOSED": closed, "CERT": srv.CertFile, "KEY": srv.KeyFile})
	insecure := &tls.Config{InsecureSkipVerify: true}
	dialTLS := func(sni string) {
		cfg := insecure.Clone()
		cfg.ServerName = sni
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", tg.addr(1), cfg)
		if err == nil {
			c.Close()
			t.Fatalf("%s: handshake succeeded", sni)
		}
	}
	tests := []struct {
		desc   string
		do     func() string // returns the client's address
		fields map[string]any
		absent []string
	}{
		{"a denied server name", func() string { dialTLS("blocked.test"); return "" },
			map[string]any{"protocol": "tls", "bind": "bind/1", "tls.sni": "blocked.test", "end": "denied", "bytes_in": int64(0)},
			[]string{"endpoint"}},
		{"a server name no route takes", func() string { dialTLS("other.test"); return "" },
			map[string]any{"protocol": "tls", "bind": "bind/1", "tls.sni": "other.test", "end": "no_route"},
			[]string{"endpoint"}},
		{"an unreachable backend", func() string {
			c := dialTest(t, tg.addr(2))
			if n, err := c.Read(make([]byte, 1)); n != 0 || err == nil {
				t.Fatalf("read %d bytes, %v; want the connection closed", n, err)
			}
			return c.LocalAddr().String()
		}, map[string]any{"protocol": "tcp", "bind": "bind/2", "route": "gone", "endpoint": closed, "end": "connect_failed"},
			nil},
		{"a denied plain HTTP connection", func() string {
			c := dialTest(t, tg.addr(3))
			io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
			if n, _ := c.Read(make([]byte, 1)); n != 0 {
				t.Fatal("a denied connection was answered")
			}
			return c.LocalAddr().String()
		}, map[string]any{"protocol": "http", "bind": "bind/3", "end": "denied"}, []string{"tls.sni"}},
		// A port with TLS listeners serves plain HTTP to its HTTP ones:
		// networkAuthorization holds for those connections too.
		{"a denied plain HTTP connection to a port with TLS listeners", func() string {
			c := dialTest(t, tg.addr(4))
			io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
			if n, _ := c.Read(make([]byte, 1)); n != 0 {
				t.Fatal("a denied connection was answered")
			}
			return c.LocalAddr().String()
		}, map[string]any{"protocol": "http", "bind": "bind/4", "end": "denied"}, []string{"tls.sni"}},
	}
	for i, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			client := tc.do()
			rec := loggedConns(t, tg, i+1)[i]
			requireFields(t, rec, tc.fields)
			requireAbsent(t, rec, tc.absent...)
			if client != "" && rec["src"] != client {
				t.Errorf("src %v, want %s", rec["src"], client)
			}
		})
	}
	if rec := loggedConns(t, tg, len(tests))[2]; rec["upstream_error"] == nil || !strings.Contains(rec["upstream_error"].(string), "refused") {
		t.Errorf("upstream_error %v", rec["upstream_error"])
	}
}

// TestConnRecordConnectTunnel: a CONNECT tunnel's stream, forwarded by the
// bind of its port, logs where the tunnel went.
func TestConnRecordConnectTunnel(t *testing.T) {
	echo := tcpEchoUpstream(t)
	tg := startGateway(t, `
binds:
- port: 1
  tunnelProtocol: connect
  listeners: []
- port: 7001
  mode: internal
  listeners:
  - name: inner
    protocol: TCP
    tcpRoutes:
    - backends: [{host: ${ECHO}}]
`, map[string]string{"ECHO": echo})
	c, br, status := connectRaw(t, tg.addr(1), "echo.test:7001")
	if status != 200 {
		t.Fatalf("CONNECT: %d", status)
	}
	io.WriteString(c, "through")
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if got, err := io.ReadAll(br); string(got) != "through" {
		t.Fatalf("echo %q, %v", got, err)
	}
	c.Close()
	rec := loggedConns(t, tg, 1)[0]
	requireFields(t, rec, map[string]any{
		"protocol": "tcp", "bind": "bind/7001", "listener": "inner", "destination": "echo.test:7001",
		"endpoint": echo, "src": c.LocalAddr().String(), "bytes_in": int64(7), "bytes_out": int64(7), "end": "closed",
	})
}

// TestConnRecordAccessLogPolicy: frontendPolicies.accessLog applies to
// connection records: its filter drops one, its added fields see source,
// destination and backend (one that reads the request is left out, as is
// its filter's failure harmless), its removals apply, and the record is
// exported over OTLP.
func TestConnRecordAccessLogPolicy(t *testing.T) {
	echo := tcpEchoUpstream(t)
	recv := &otlpReceiver{}
	collector := upstream(t, recv)
	tg := startGateway(t, `
frontendPolicies:
  accessLog:
    filter: 'backend.name != "quiet" && request.path != "/x"'
    add:
      dst.port: 'string(destination.port)'
      client: source.address
      backend.type: backend.type
      req.path: request.path
      resp.code: string(response.code)
    remove: [endpoint, method]
    otlp: {host: '${COLLECTOR}', protocol: http}
backends:
- name: quiet
  host: ${ECHO}
binds:
- port: 1
  listeners:
  - protocol: TCP
    tcpRoutes:
    - backends: [{backend: quiet}]
- port: 2
  listeners:
  - protocol: TCP
    tcpRoutes:
    - name: loud
      backends: [{host: ${ECHO}}]
`, map[string]string{"ECHO": echo, "COLLECTOR": collector})
	for _, port := range []int{1, 2} {
		c, err := net.Dial("tcp", tg.addr(port))
		if err != nil {
			t.Fatal(err)
		}
		if got := exchange(t, c, []byte("hi")); string(got) != "hi" {
			t.Fatalf("echo %q", got)
		}
		c.Close()
		// The bind counts the connection closed after its record.
		eventually(t, 10*time.Second, "the connection closed", func() bool { return tg.openConns(port) == 0 })
	}
	rec := loggedConns(t, tg, 1)[0]
	requireFields(t, rec, map[string]any{
		"route": "loud", "dst.port": "2", "client": "127.0.0.1", "backend.type": "static", "bytes_in": int64(2),
	})
	requireAbsent(t, rec, "endpoint", "req.path", "resp.code")
	var exported map[string]string
	eventually(t, 10*time.Second, "the connection's OTLP record", func() bool {
		for _, r := range recv.logRecords() {
			if r.GetBody().GetStringValue() == "connection" {
				exported = attrMap(r.GetAttributes())
				return true
			}
		}
		return false
	})
	if exported["route"] != "loud" || exported["client"] != "127.0.0.1" || exported["end"] != "closed" {
		t.Errorf("exported %v", exported)
	}
	if _, ok := exported["endpoint"]; ok {
		t.Errorf("removed field exported: %v", exported)
	}
	for _, r := range recv.logRecords() {
		if attrMap(r.GetAttributes())["backend"] == "quiet" {
			t.Errorf("the filtered connection was exported: %v", attrMap(r.GetAttributes()))
		}
	}
}

// TestConnRecordShutdown: a forwarded connection that outlives a drain's
// time is cut, and its record says so.
func TestConnRecordShutdown(t *testing.T) {
	echo := tcpEchoUpstream(t)
	tg := startGateway(t, `
binds:
- port: 1
  listeners:
  - protocol: TCP
    tcpRoutes:
    - backends: [{host: ${ECHO}}]
`, map[string]string{"ECHO": echo})
	c := dialTest(t, tg.addr(1))
	io.WriteString(c, "hold")
	if _, err := io.ReadFull(c, make([]byte, 4)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	tg.gw.Shutdown(ctx)
	requireFields(t, loggedConns(t, tg, 1)[0], map[string]any{"end": "shutdown", "bytes_in": int64(4), "bytes_out": int64(4)})
}

// TestPipeEnd: how a pipe ended names the connection's end: the first
// failure, not the orderly close before it, and the upstream's error.
func TestPipeEnd(t *testing.T) {
	reset := errors.New("connection reset by peer")
	eof := func(s tcpproxy.Side) tcpproxy.End { return tcpproxy.End{Side: s, Reason: tcpproxy.ReasonEOF} }
	tests := []struct {
		desc        string
		first, last tcpproxy.End
		want        string
		err         error
	}{
		{"both closed in order", eof(tcpproxy.SideClient), eof(tcpproxy.SideUpstream), "closed", nil},
		{"the client reset", tcpproxy.End{Side: tcpproxy.SideClient, Reason: tcpproxy.ReasonReset, Err: reset}, tcpproxy.End{}, "client_reset", nil},
		{"the upstream reset after the client's close", eof(tcpproxy.SideClient), tcpproxy.End{Side: tcpproxy.SideUpstream, Reason: tcpproxy.ReasonReset, Err: reset}, "upstream_reset", reset},
		{"the upstream failed", tcpproxy.End{Side: tcpproxy.SideUpstream, Reason: tcpproxy.ReasonError, Err: reset}, eof(tcpproxy.SideClient), "upstream_error", reset},
		{"the client failed", tcpproxy.End{Side: tcpproxy.SideClient, Reason: tcpproxy.ReasonError, Err: reset}, tcpproxy.End{}, "client_error", nil},
		{"the bind closed the client", tcpproxy.End{Side: tcpproxy.SideClient, Reason: tcpproxy.ReasonError, Err: &net.OpError{Op: "read", Err: net.ErrClosed}}, tcpproxy.End{}, "shutdown", nil},
		{"idle", tcpproxy.End{Reason: tcpproxy.ReasonIdle}, tcpproxy.End{Reason: tcpproxy.ReasonIdle}, "idle_timeout", nil},
		{"too long", tcpproxy.End{Reason: tcpproxy.ReasonMaxDuration}, tcpproxy.End{Reason: tcpproxy.ReasonMaxDuration}, "max_duration", nil},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			end, err := pipeEnd(&tcpproxy.Result{First: tc.first, Last: tc.last})
			if end != tc.want || err != tc.err {
				t.Fatalf("%s, %v; want %s, %v", end, err, tc.want, tc.err)
			}
		})
	}
}

// TestNetworkAuthorizationSeesClientCertificate: on a listener that
// terminates TLS with client certificates (TLS forwarded, HTTPS),
// networkAuthorization runs after the handshake and its rules see the
// client's identity in source (subjectCn, spiffeId, identity): the
// client the rule names is served, another of the same CA is refused
// (closed after its handshake, record end: denied). (The rules ran before
// the handshake, saw no identity, and a rule on it refused everyone.)
func TestNetworkAuthorizationSeesClientCertificate(t *testing.T) {
	pki := newTestPKI(t, "netauthz")
	srv := pki.Server("a.test", "a.test")
	good := pki.Client("client", "spiffe://test/ns/default/sa/good")
	other := pki.Client("other", "spiffe://test/ns/default/sa/other")
	echo := tcpEchoUpstream(t)
	up := upstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	tg := startGateway(t, `
frontendPolicies:
  networkAuthorization:
    rules:
    - 'has(source.subjectCn) && source.subjectCn == "client" && source.spiffeId == "spiffe://test/ns/default/sa/good" && source.identity.serviceAccount == "good"'
binds:
- port: 1
  listeners:
  - name: tls
    protocol: TLS
    hostname: a.test
    tls: {cert: ${CERT}, key: ${KEY}, root: ${CA}}
    tcpRoutes: [{backends: [{host: ${ECHO}}]}]
- port: 2
  listeners:
  - name: https
    protocol: HTTPS
    hostname: a.test
    tls: {cert: ${CERT}, key: ${KEY}, root: ${CA}}
    routes: [{backends: [{host: ${UP}}]}]
`, map[string]string{"CERT": srv.CertFile, "KEY": srv.KeyFile, "CA": pki.CAFile, "ECHO": echo, "UP": up})
	// exchange opens a connection to port with the client certificate
	// cert, sends a request (HTTPS) or a line (TLS), and returns what came
	// back and the client's address.
	exchange := func(port int, cert tls.Certificate) (answer, client string) {
		raw := dialTest(t, tg.addr(port))
		cfg := &tls.Config{ServerName: "a.test", RootCAs: pki.Pool, Certificates: []tls.Certificate{cert}, NextProtos: []string{"http/1.1"}}
		c := tls.Client(raw, cfg)
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if port == 1 {
			io.WriteString(c, "ping\n")
			line, _ := bufio.NewReader(c).ReadString('\n')
			return line, raw.LocalAddr().String()
		}
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: a.test\r\nConnection: close\r\n\r\n")
		b, _ := io.ReadAll(c)
		return string(b), raw.LocalAddr().String()
	}
	cases := []struct {
		desc   string
		port   int
		cert   tls.Certificate
		served bool
	}{
		{"TLS forwarded, the client the rule names", 1, good.TLS, true},
		{"TLS forwarded, another client", 1, other.TLS, false},
		{"HTTPS, the client the rule names", 2, good.TLS, true},
		{"HTTPS, another client", 2, other.TLS, false},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			got, client := exchange(tc.port, tc.cert)
			want := "ping\n"
			if tc.port == 2 {
				want = "HTTP/1.1 200"
			}
			if served := strings.HasPrefix(got, want); served != tc.served {
				t.Fatalf("answer %q; want served %v", got, tc.served)
			}
			if tc.served {
				return
			}
			var rec map[string]any
			eventually(t, 5*time.Second, "the refused connection's record", func() bool {
				for _, e := range tg.accessLogs().FilterMessage("connection").All() {
					if m := e.ContextMap(); m["src"] == client {
						rec = m
						return true
					}
				}
				return false
			})
			requireFields(t, rec, map[string]any{"end": "denied", "bind": "bind/" + itoa(tc.port), "tls.sni": "a.test"})
		})
	}
}

package server

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/relaygate/gateway/config"
)

// FuzzServeConn: whatever bytes a client sends, on either transport, the
// gateway answers and closes the connection once the client half-closes its
// side (at the latest at the head's deadline, here 300 ms), never hangs and
// never crashes; what it sends back starts with an HTTP/1.1 status line.
func FuzzServeConn(f *testing.F) {
	for _, s := range []string{
		"GET / HTTP/1.1\r\nHost: a\r\n\r\n",
		"GET / HTTP/1.1\nHost: a\n\n",
		"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc",
		"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\n\r\nGET /2 HTTP/1.1\r\nHost: a\r\n\r\n",
		"GET / HTTP/1.0\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\nx",
		"GET / HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: x\r\n\r\n",
		"\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n",
	} {
		f.Add([]byte(s), uint8(0))
	}
	old := headTimeout.Swap(int64(300 * time.Millisecond))
	f.Cleanup(func() { headTimeout.Store(old) })
	up := requestUpstream(f, answerOK)
	addrs := map[Transport]string{}
	for _, tr := range e2eTransports {
		addrs[tr] = fuzzGateway(f, tr, oneRoute(up)).Addrs()[3000].String()
	}
	f.Fuzz(func(t *testing.T, raw []byte, cut uint8) {
		for _, tr := range e2eTransports {
			c, err := net.Dial("tcp", addrs[tr])
			if err != nil {
				t.Fatal(err)
			}
			c.SetDeadline(time.Now().Add(10 * time.Second))
			// In two writes, split at cut: heads and bodies arrive in pieces.
			at := min(int(cut), len(raw))
			c.Write(raw[:at])
			c.Write(raw[at:])
			// The client half-closes: a keep-alive connection ends once what
			// it sent is answered.
			c.(*net.TCPConn).CloseWrite()
			got, err := io.ReadAll(c)
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatalf("%s: no answer and no close within 10 s for %q (got %q)", tr, raw, got)
			}
			if len(got) > 0 && !bytes.HasPrefix(got, []byte("HTTP/1.1 ")) {
				t.Fatalf("%s: answer %q to %q is not an HTTP/1.1 response", tr, got, raw)
			}
			c.Close()
		}
	})
}

// fuzzGateway starts a gateway for a fuzz target on yaml (its binds on
// ports the system picks), shut down when the target ends.
func fuzzGateway(f *testing.F, tr Transport, yaml string) *Gateway {
	f.Helper()
	gw := New(Options{Logger: zap.NewNop(), Transport: tr, ListenAddr: func(int) string { return "127.0.0.1:0" }})
	cfg, err := config.Parse([]byte(yaml), os.LookupEnv)
	if err != nil {
		f.Fatal(err)
	}
	if err := gw.Apply(cfg); err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		gw.Shutdown(ctx)
	})
	return gw
}

// answerOK answers every request 200 "ok": the fuzz target's upstream only
// needs to keep the gateway's requests moving, without recording them.
func answerOK(c net.Conn, _ *bufio.Reader, _ message) bool {
	_, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
	return err == nil
}

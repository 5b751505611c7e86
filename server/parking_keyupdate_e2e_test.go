package server

import (
	"bufio"
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// A parked HTTPS connection woken by a TLS record that carries no request
// bytes (a TLS 1.3 KeyUpdate from OpenSSL's s_client, which Go's client
// cannot send) waits for its request as idle, parked again, not under the
// request head's deadline: it is not closed when that deadline passes, and
// its next request, under the updated keys, is answered.
func TestParkedHTTPSConnectionWokenByAKeyUpdate(t *testing.T) {
	openssl, err := exec.LookPath("openssl")
	if err != nil {
		t.Fatal("no openssl command: make test installs Debian's openssl (make openssl-deps)")
	}
	shortParking(t)
	old := headTimeout.Swap(int64(300 * time.Millisecond))
	t.Cleanup(func() { headTimeout.Store(old) })
	up, _ := rawHTTPUpstream(t, okAnswer)
	pki := newTestPKI(t, "keyupdate")
	srv := pki.Server("a.test", "a.test", "127.0.0.1")
	tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - protocol: HTTPS
    tls: {cert: ${CERT}, key: ${KEY}}
    routes:
    - backends: [{host: ${UP}}]
`, map[string]string{"UP": up, "CERT": srv.CertFile, "KEY": srv.KeyFile})
	m := tg.bindMetrics(3000)

	// s_client reads commands from its input while not quiet: a line "k"
	// sends a KeyUpdate. -crlf ends the request's lines with CRLF.
	cmd := exec.Command(openssl, "s_client", "-connect", tg.addr(3000), "-servername", "a.test",
		"-CAfile", pki.CAFile, "-verify_return_error", "-tls1_3", "-crlf")
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close(); _ = cmd.Process.Kill(); _ = cmd.Wait() })
	lines := make(chan string, 256)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	// answered waits for the n-th response status line from the gateway.
	statuses := 0
	answered := func(n int) {
		t.Helper()
		deadline := time.After(10 * time.Second)
		for statuses < n {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("s_client ended after %d answers; want %d", statuses, n)
				}
				// The answer's body (ok) has no line end: the next status
				// line follows it on the same line.
				if strings.Contains(l, "HTTP/1.1 ") {
					if !strings.Contains(l, "HTTP/1.1 200") {
						t.Fatalf("answer %q", l)
					}
					statuses += strings.Count(l, "HTTP/1.1 200")
				}
			case <-deadline:
				t.Fatalf("no answer %d", n)
			}
		}
	}
	request := "GET / HTTP/1.1\nHost: a.test\n\n"
	if _, err := io.WriteString(in, request); err != nil {
		t.Fatal(err)
	}
	answered(1)
	eventually(t, 5*time.Second, "the idle connection parked", func() bool { return m.Parked() == 1 })
	if _, err := io.WriteString(in, "k\n"); err != nil {
		t.Fatal(err)
	}
	sent := time.Now()
	// Well past the head's deadline, the connection is parked again (a
	// connection woken into the head's wait would be closed by now).
	eventually(t, 10*time.Second, "parked again, past the head's deadline", func() bool {
		return time.Since(sent) > 3*time.Duration(headTimeout.Load()) && m.Parked() == 1
	})
	if _, err := io.WriteString(in, request); err != nil {
		t.Fatal(err)
	}
	answered(2)
	if n := tg.openConns(3000); n != 1 {
		t.Fatalf("open connections %d, want 1", n)
	}
}

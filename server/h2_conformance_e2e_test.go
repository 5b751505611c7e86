package server

import (
	"context"
	"encoding/xml"
	"fmt"
	"go/build"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// h2specBinary is h2spec (github.com/summerwind/h2spec): the file $H2SPEC
// names (`make test` sets it, so that a missing h2spec fails the test),
// else from PATH or GOPATH/bin; "" when it is not installed.
func h2specBinary() string {
	if p := os.Getenv("H2SPEC"); p != "" {
		return p
	}
	if p, err := exec.LookPath("h2spec"); err == nil {
		return p
	}
	p := filepath.Join(build.Default.GOPATH, "bin", "h2spec")
	if _, err := os.Stat(p); err == nil {
		return p
	}
	return ""
}

// h2specExpected are the h2spec cases the gateway fails by design, with
// why. In cleartext the port serves HTTP/1.1 too: a connection whose first
// bytes are not the HTTP/2 preface is an HTTP/1.1 one, and h2spec's
// "invalid preface" (INVALID CONNECTION PREFACE\r\n\r\n) gets HTTP/1.1's
// 400, not a silent close. Over TLS, ALPN says h2 and the same bytes close
// the connection.
var h2specExpected = map[string]map[string]bool{
	"cleartext": {"http2/3.5: Sends invalid connection preface": true},
	"TLS":       {},
}

// TestH2Spec runs h2spec, every case including the strict ones, against
// the gateway in cleartext (prior knowledge) and over TLS: no case may
// fail but those h2specExpected names.
func TestH2Spec(t *testing.T) {
	bin := h2specBinary()
	if bin == "" {
		t.Skip("h2spec is not installed (make h2spec-deps)")
	}
	pki := newTestPKI(t, "h2spec")
	srv := pki.Server("h2.test", "h2.test", "127.0.0.1")
	// An upstream that answers every request with a body, as h2spec's
	// cases expect DATA back.
	up := upstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		fmt.Fprintf(w, "%s %s %d\n", r.Method, r.URL.Path, n)
	}))
	tg := startGateway(t, `
binds:
- port: 1
  listeners:
  - protocol: HTTP
    routes:
    - backends: [{host: ${UP}, policies: {http: {version: HTTP1}}}]
- port: 2
  listeners:
  - protocol: HTTPS
    tls: {cert: ${CERT}, key: ${KEY}}
    routes:
    - backends: [{host: ${UP}}]
`, map[string]string{"UP": up, "CERT": srv.CertFile, "KEY": srv.KeyFile})
	for _, mode := range []struct {
		name string
		port int
		args []string
	}{
		{"cleartext", 1, nil},
		{"TLS", 2, []string{"-t", "-k"}},
	} {
		t.Run(mode.name, func(t *testing.T) {
			report := filepath.Join(t.TempDir(), "h2spec.xml")
			_, port, _ := strings.Cut(tg.addr(mode.port), ":")
			args := append([]string{"-S", "-h", "127.0.0.1", "-p", port, "-P", "/spec", "-o", "2", "-j", report}, mode.args...)
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
			if ctx.Err() != nil {
				t.Fatalf("h2spec did not finish: %v\n%s", ctx.Err(), out)
			}
			// h2spec exits non-zero when a case fails; the report says which.
			cases, failed, err2 := readH2specReport(report)
			if err2 != nil {
				t.Fatalf("h2spec (%v): %v\n%s", err, err2, out)
			}
			if cases < 140 {
				t.Fatalf("h2spec ran %d cases\n%s", cases, out)
			}
			var unexpected []string
			for _, f := range failed {
				if !h2specExpected[mode.name][f] {
					unexpected = append(unexpected, f)
				}
			}
			if len(unexpected) > 0 {
				t.Fatalf("h2spec: %d of %d cases failed unexpectedly: %s\n%s", len(unexpected), cases, strings.Join(unexpected, "; "), out)
			}
			t.Logf("h2spec: %d cases, failed as expected: %v", cases, failed)
		})
	}
}

// readH2specReport reads h2spec's JUnit report: how many cases ran, and
// the failed ones ("package: case").
func readH2specReport(path string) (cases int, failed []string, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, nil, err
	}
	var r struct {
		Suites []struct {
			Cases []struct {
				Package string   `xml:"package,attr"`
				Name    string   `xml:"classname,attr"`
				Errors  []string `xml:"error"`
				Fails   []string `xml:"failure"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(b, &r); err != nil {
		return 0, nil, err
	}
	for _, s := range r.Suites {
		for _, c := range s.Cases {
			cases++
			if len(c.Errors)+len(c.Fails) > 0 {
				failed = append(failed, c.Package+": "+c.Name)
			}
		}
	}
	sort.Strings(failed)
	return cases, failed, nil
}

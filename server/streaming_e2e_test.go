package server

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The streaming tests prove that bodies flow through the gateway as they
// arrive: one side holds back the rest of a body until the other side has
// seen its beginning. A gateway that buffered whole bodies would deadlock
// there; a context bounds every test so that shows as a clear failure.

const (
	streamTotal = 8 << 20 // body size
	streamFirst = 1 << 20 // what must arrive before the rest is sent
	streamBound = 30 * time.Second
)

// streamClient has no overall timeout: every request carries a context.
var streamClient = &http.Client{Transport: &http.Transport{DisableCompression: true}}

func shaHex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// TestStreamingUpload: the upstream receives the first MiB of an 8 MiB upload
// while the client still holds back the second half.
func TestStreamingUpload(t *testing.T) {
	want := payload(streamTotal, 11)
	for _, tr := range e2eTransports {
		for _, chunked := range []bool{false, true} {
			name := string(tr) + "/content-length"
			if chunked {
				name = string(tr) + "/chunked"
			}
			t.Run(name, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), streamBound)
				defer cancel()
				gotFirst := make(chan struct{})
				received := make(chan string, 1)
				up := upstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					h := sha256.New()
					if _, err := io.CopyN(h, r.Body, streamFirst); err != nil {
						received <- "reading the first MiB: " + err.Error()
						return
					}
					close(gotFirst)
					n, err := io.Copy(h, r.Body)
					if err != nil {
						received <- "reading the rest: " + err.Error()
						return
					}
					received <- strconv.FormatInt(n+streamFirst, 10) + " " + hex.EncodeToString(h.Sum(nil))
					io.WriteString(w, "stored")
				}))
				tg := startGatewayWith(t, oneRoute(up), nil, tr)

				pr, pw := io.Pipe()
				go func() {
					if _, err := pw.Write(want[:streamTotal/2]); err != nil {
						return
					}
					select {
					case <-gotFirst:
					case <-ctx.Done():
						pw.CloseWithError(errors.New("upstream never got the first MiB"))
						return
					}
					if _, err := pw.Write(want[streamTotal/2:]); err != nil {
						return
					}
					pw.Close()
				}()
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, tg.url(3000)+"/upload", pr)
				req.ContentLength = streamTotal
				if chunked {
					req.ContentLength = -1
				}
				resp, err := streamClient.Do(req)
				if ctx.Err() != nil {
					t.Fatalf("upload deadlocked: the upstream did not receive the first MiB while the client held back the second half, so the gateway buffers request bodies (%v)", err)
				}
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || string(body) != "stored" {
					t.Fatalf("status %d %q", resp.StatusCode, body)
				}
				if got, wantGot := <-received, strconv.Itoa(streamTotal)+" "+shaHex(want); got != wantGot {
					t.Fatalf("upstream received %q, want %q", got, wantGot)
				}
			})
		}
	}
}

// TestStreamingDownload: the client reads the first MiB of an 8 MiB response
// while the upstream still holds back the rest.
func TestStreamingDownload(t *testing.T) {
	want := payload(streamTotal, 12)
	for _, tr := range e2eTransports {
		for _, chunked := range []bool{false, true} {
			name := string(tr) + "/content-length"
			if chunked {
				name = string(tr) + "/chunked"
			}
			t.Run(name, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), streamBound)
				defer cancel()
				clientGotFirst := make(chan struct{})
				up := upstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if !chunked {
						w.Header().Set("Content-Length", strconv.Itoa(streamTotal))
					}
					// Exactly what the client waits for: the gateway must pass on
					// every byte it has, holding back no tail.
					w.Write(want[:streamFirst])
					w.(http.Flusher).Flush()
					select {
					case <-clientGotFirst:
					case <-ctx.Done():
						return
					}
					w.Write(want[streamFirst:])
				}))
				tg := startGatewayWith(t, oneRoute(up), nil, tr)
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, tg.url(3000)+"/download", nil)
				resp, err := streamClient.Do(req)
				if ctx.Err() != nil {
					t.Fatalf("download deadlocked before the response head: the gateway buffers response bodies (%v)", err)
				}
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				if chunked != (resp.ContentLength < 0) {
					t.Errorf("response Content-Length %d, chunked upstream %v", resp.ContentLength, chunked)
				}
				got := make([]byte, streamTotal)
				if _, err := io.ReadFull(resp.Body, got[:streamFirst]); err != nil {
					if ctx.Err() != nil {
						t.Fatalf("download deadlocked: the client did not get the first MiB while the upstream held back the second half, so the gateway buffers response bodies")
					}
					t.Fatalf("reading the first MiB: %v", err)
				}
				close(clientGotFirst)
				n, err := io.ReadFull(resp.Body, got[streamFirst:])
				if err != nil {
					t.Fatalf("reading the rest: %v after %d bytes", err, streamFirst+n)
				}
				if extra, _ := resp.Body.Read(make([]byte, 1)); extra != 0 {
					t.Fatal("more bytes than the upstream sent")
				}
				if d := sameBytes(got, want); d != "" {
					t.Fatal(d)
				}
			})
		}
	}
}

// TestStreamingServerSentEvents: the response head reaches the client before
// the first event exists, and each event before the upstream sends the next.
func TestStreamingServerSentEvents(t *testing.T) {
	events := []string{"id: 1\ndata: one\n\n", "id: 2\ndata: two\nevent: x\n\n", "id: 3\ndata: three\n\n"}
	for _, tr := range e2eTransports {
		t.Run(string(tr), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), streamBound)
			defer cancel()
			acks := make(chan struct{})
			headSeen := make(chan struct{})
			up := upstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				w.Header().Set("Cache-Control", "no-cache")
				// The stream opens before any event exists: the client must
				// see the response head without one.
				w.WriteHeader(http.StatusOK)
				w.(http.Flusher).Flush()
				select {
				case <-headSeen:
				case <-ctx.Done():
					return
				}
				for _, ev := range events {
					io.WriteString(w, ev)
					w.(http.Flusher).Flush()
					select {
					case <-acks:
					case <-ctx.Done():
						return
					}
				}
			}))
			tg := startGatewayWith(t, oneRoute(up), nil, tr)
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, tg.url(3000)+"/events", nil)
			req.Header.Set("Accept", "text/event-stream")
			resp, err := streamClient.Do(req)
			if ctx.Err() != nil {
				t.Fatalf("no response head before the first event: the gateway holds a streamed response's head until body bytes come (%v)", err)
			}
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			close(headSeen)
			if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
				t.Errorf("Content-Type %q", ct)
			}
			br := bufio.NewReader(resp.Body)
			for i, want := range events {
				var ev strings.Builder
				for {
					line, err := br.ReadString('\n')
					if err != nil {
						if ctx.Err() != nil {
							t.Fatalf("event %d did not arrive before the client acknowledged it: the gateway does not flush events one by one", i+1)
						}
						t.Fatalf("event %d: %v (got %q)", i+1, err, ev.String())
					}
					ev.WriteString(line)
					if line == "\n" {
						break
					}
				}
				if ev.String() != want {
					t.Fatalf("event %d is %q, want %q", i+1, ev.String(), want)
				}
				select {
				case acks <- struct{}{}:
				case <-ctx.Done():
					t.Fatalf("the upstream stopped waiting after event %d", i+1)
				}
			}
			if rest, err := io.ReadAll(br); err != nil || len(rest) != 0 {
				t.Fatalf("after the last event: %q %v", rest, err)
			}
		})
	}
}

package backend

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// refusingH2Upstream is an h2c server (prior knowledge) that refuses its
// first `refuse` streams once their request ended, with RST_STREAM
// (REFUSED_STREAM) or, when goAway, with a GOAWAY that leaves them
// unprocessed and the connection closed; it answers later ones with 200
// and the request body. Every stream's body as it arrived is recorded.
type refusingH2Upstream struct {
	refuse int
	goAway bool
	// atHeaders refuses at the request's head, before its body; refused
	// is closed, when not nil, once it did.
	atHeaders bool
	refused   chan struct{}
	mu        sync.Mutex
	bodies    []string
}

func (s *refusingH2Upstream) seen() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.bodies...)
}

func (s *refusingH2Upstream) start(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go s.serve(c)
		}
	}()
	return ln.Addr().String()
}

func (s *refusingH2Upstream) serve(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	preface := make([]byte, len(http2.ClientPreface))
	if _, err := io.ReadFull(br, preface); err != nil || string(preface) != http2.ClientPreface {
		return
	}
	fr := http2.NewFramer(c, br)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	if fr.WriteSettings() != nil {
		return
	}
	bodies := map[uint32]*bytes.Buffer{}
	var hbuf bytes.Buffer
	enc := hpack.NewEncoder(&hbuf)
	end := func(id uint32) error {
		body := bodies[id].String()
		s.mu.Lock()
		s.bodies = append(s.bodies, body)
		refuse := !s.atHeaders && len(s.bodies) <= s.refuse
		s.mu.Unlock()
		if refuse && s.goAway {
			fr.WriteGoAway(0, http2.ErrCodeNo, nil) //nolint:errcheck
			return errors.New("gone away")
		}
		if refuse {
			return fr.WriteRSTStream(id, http2.ErrCodeRefusedStream)
		}
		hbuf.Reset()
		enc.WriteField(hpack.HeaderField{Name: ":status", Value: "200"}) //nolint:errcheck
		if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hbuf.Bytes(), EndHeaders: true}); err != nil {
			return err
		}
		return fr.WriteData(id, true, []byte(body))
	}
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				err = fr.WriteSettingsAck()
			}
		case *http2.MetaHeadersFrame:
			bodies[f.StreamID] = new(bytes.Buffer)
			if s.atHeaders && !f.StreamEnded() {
				s.mu.Lock()
				refuse := s.refuse > 0
				s.refuse--
				s.mu.Unlock()
				if refuse {
					delete(bodies, f.StreamID)
					err = fr.WriteRSTStream(f.StreamID, http2.ErrCodeRefusedStream)
					if s.refused != nil {
						close(s.refused)
					}
					break
				}
			}
			if f.StreamEnded() {
				err = end(f.StreamID)
			}
		case *http2.DataFrame:
			if b := bodies[f.StreamID]; b != nil {
				b.Write(f.Data())
				if n := uint32(len(f.Data())); n > 0 {
					err = fr.WriteWindowUpdate(0, n)
					if err == nil && !f.StreamEnded() {
						err = fr.WriteWindowUpdate(f.StreamID, n)
					}
				}
				if err == nil && f.StreamEnded() {
					err = end(f.StreamID)
				}
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				err = fr.WritePing(true, f.Data)
			}
		}
		if err != nil {
			return
		}
	}
}

// postTo is a POST /svc.Echo/Say to up: its pool, request and response,
// released when the test ends.
func postTo(t *testing.T, up *refusingH2Upstream) (*Upstream, *fasthttp.Request, *fasthttp.Response) {
	t.Helper()
	u := NewUpstream(up.start(t), PoolSettings{})
	t.Cleanup(u.Close)
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	t.Cleanup(func() {
		fasthttp.ReleaseRequest(req)
		fasthttp.ReleaseResponse(resp)
	})
	req.Header.SetMethod("POST")
	req.SetRequestURI("/svc.Echo/Say")
	return u, req, resp
}

// A stream the upstream refused (RST_STREAM REFUSED_STREAM) or left
// unprocessed by a GOAWAY was not processed (RFC 9113 8.7), so it is sent
// again, body and all, whether the body was read whole before the exchange
// or streams from the client.
func TestExchangeH2RefusedStreamIsSentAgain(t *testing.T) {
	const body = "the request body, sent twice"
	for _, tc := range []struct {
		name             string
		streamed, goAway bool
	}{
		{"buffered body", false, false}, {"streamed body", true, false},
		{"buffered body, GOAWAY", false, true}, {"streamed body, GOAWAY", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := &refusingH2Upstream{refuse: 1, goAway: tc.goAway}
			u, req, resp := postTo(t, up)
			if tc.streamed {
				req.SetBodyStream(strings.NewReader(body), -1)
			} else {
				req.SetBodyString(body)
			}
			if err := u.ExchangeH2(context.Background(), req, resp, time.Now().Add(10*time.Second), nil, false); err != nil {
				t.Fatalf("exchange: %v (upstream saw %q)", err, up.seen())
			}
			got, err := io.ReadAll(resp.BodyStream())
			_ = resp.CloseBodyStream()
			if err != nil || resp.StatusCode() != 200 || string(got) != body {
				t.Fatalf("status %d, body %q, %v", resp.StatusCode(), got, err)
			}
			if seen := up.seen(); len(seen) != 2 || seen[0] != body || seen[1] != body {
				t.Fatalf("upstream saw %q; want the body twice", seen)
			}
		})
	}
}

// A streamed body longer than what is kept for sending again cannot be
// sent again: the refusal is the exchange's error, and the upstream saw
// the request once.
func TestExchangeH2RefusedStreamPastTheReplayBound(t *testing.T) {
	up := &refusingH2Upstream{refuse: 1}
	u := NewUpstream(up.start(t), PoolSettings{})
	t.Cleanup(u.Close)
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.Header.SetMethod("POST")
	req.SetRequestURI("/")
	big := strings.Repeat("x", 64<<10+1)
	req.SetBodyStream(strings.NewReader(big), -1)
	err := u.ExchangeH2(context.Background(), req, resp, time.Now().Add(10*time.Second), nil, false)
	if err == nil {
		t.Fatalf("exchange succeeded (status %d); want the refusal", resp.StatusCode())
	}
	if seen := up.seen(); len(seen) != 1 || len(seen[0]) != len(big) {
		t.Fatalf("upstream saw %d requests; want one whole", len(seen))
	}
}

// A refusal that comes while the body's next bytes are still on their way
// from the client: the read the refused stream had under way ends with
// those bytes, and they go with the request sent again.
func TestExchangeH2RefusedWhileTheBodyIsOnItsWay(t *testing.T) {
	up := &refusingH2Upstream{refuse: 1, atHeaders: true, refused: make(chan struct{})}
	u := NewUpstream(up.start(t), PoolSettings{})
	t.Cleanup(u.Close)
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.Header.SetMethod("POST")
	req.SetRequestURI("/")
	pr, pw := io.Pipe()
	req.SetBodyStream(pr, -1)
	go func() {
		// The body comes once the upstream refused the stream that had
		// only its head.
		select {
		case <-up.refused:
		case <-time.After(10 * time.Second):
		}
		pw.Write([]byte("first half, ")) //nolint:errcheck
		pw.Write([]byte("second half"))  //nolint:errcheck
		pw.Close()
	}()
	if err := u.ExchangeH2(context.Background(), req, resp, time.Now().Add(10*time.Second), nil, false); err != nil {
		t.Fatalf("exchange: %v", err)
	}
	got, err := io.ReadAll(resp.BodyStream())
	_ = resp.CloseBodyStream()
	if err != nil || string(got) != "first half, second half" {
		t.Fatalf("body %q, %v", got, err)
	}
	if seen := up.seen(); len(seen) != 1 || seen[0] != "first half, second half" {
		t.Fatalf("upstream saw %q", seen)
	}
}

// An upstream that refuses every stream (RST_STREAM REFUSED_STREAM or a
// GOAWAY that leaves it out) gets the request h2Attempts times, at once,
// and the exchange then fails with ErrStreamRefused (a 503): x/net's own
// retries waited 1, 2, 4 ... 32 s between seven more tries, so a client
// waited over a minute, here until the exchange's deadline.
func TestExchangeH2UpstreamRefusingEveryStream(t *testing.T) {
	for _, tc := range []struct {
		name             string
		streamed, goAway bool
	}{
		{"no body", false, false}, {"buffered body", false, false}, {"streamed body", true, false},
		{"no body, GOAWAY", false, true}, {"streamed body, GOAWAY", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := &refusingH2Upstream{refuse: 1 << 20, goAway: tc.goAway}
			u, req, resp := postTo(t, up)
			switch {
			case tc.streamed:
				req.SetBodyStream(strings.NewReader("body"), -1)
			case strings.HasPrefix(tc.name, "buffered"):
				req.SetBodyString("body")
			default:
				req.Header.SetMethod("GET")
			}
			err := u.ExchangeH2(context.Background(), req, resp, time.Now().Add(30*time.Second), nil, false)
			if !errors.Is(err, ErrStreamRefused) {
				t.Fatalf("exchange: %v; want ErrStreamRefused", err)
			}
			if f := Classify(err); f.Status() != 503 {
				t.Fatalf("classified %v, status %d; want 503", f, f.Status())
			}
			if seen := up.seen(); len(seen) != h2Attempts {
				t.Fatalf("upstream saw %d requests; want %d", len(seen), h2Attempts)
			}
		})
	}
}

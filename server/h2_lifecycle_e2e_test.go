package server

import (
	"context"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// TestH2DrainGoAway: a drain tells an HTTP/2 client GOAWAY (NO_ERROR,
// naming the last stream it serves); the stream in flight gets its answer,
// a stream opened after the GOAWAY gets none, and the connection closes
// once the answer went, which lets Shutdown return.
func TestH2DrainGoAway(t *testing.T) {
	blocked := newBlockingBackend(t)
	tg := startGateway(t, oneRouteVersion(blocked.addr, "HTTP1"), nil)
	t.Cleanup(blocked.unblock)
	h := dialH2Raw(t, tg.addr(3000))
	if err := h.request(1, "GET", "/slow", true); err != nil {
		t.Fatal(err)
	}
	blocked.waitEntered(t)
	shutdownDone := make(chan struct{})
	go func() {
		defer close(shutdownDone)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		tg.gw.Shutdown(ctx)
	}()
	answers := map[uint32]*h2Answer{}
	f, err := h.readUntil(10*time.Second, answers, func(f http2.Frame) bool { _, ok := f.(*http2.GoAwayFrame); return ok })
	if err != nil {
		t.Fatalf("no GOAWAY: %v", err)
	}
	if ga := f.(*http2.GoAwayFrame); ga.ErrCode != http2.ErrCodeNo || ga.LastStreamID != 1 {
		t.Fatalf("GOAWAY %v, last stream %d; want NO_ERROR, 1", ga.ErrCode, ga.LastStreamID)
	}
	// Past the GOAWAY's last stream: not served.
	if err := h.request(3, "GET", "/late", true); err != nil {
		t.Fatal(err)
	}
	blocked.unblock()
	if _, err := h.readUntil(10*time.Second, answers, func(http2.Frame) bool { return answers[1] != nil && answers[1].done }); err != nil {
		t.Fatalf("the stream in flight got no answer: %v", err)
	}
	if a := answers[1]; a.status != "200" || string(a.body) != "released" {
		t.Fatalf("stream 1: %q %q", a.status, a.body)
	}
	if _, err := h.readUntil(10*time.Second, answers, func(http2.Frame) bool { return false }); err == nil || isTimeout(err) {
		t.Fatalf("connection still open after its last stream: %v", err)
	}
	if answers[3] != nil {
		t.Fatalf("stream 3, opened after GOAWAY, was answered: %+v", answers[3])
	}
	select {
	case <-shutdownDone:
	case <-time.After(10 * time.Second):
		t.Fatal("Shutdown did not return after the connection closed")
	}
}

// TestH2ConnectionLimits: maxConnectionDuration and the idle timeout end an
// HTTP/2 connection with GOAWAY (NO_ERROR), even one that is idle.
func TestH2ConnectionLimits(t *testing.T) {
	up := echoProtoUpstream(t)
	for _, tc := range []struct{ desc, policy string }{
		{"maxConnectionDuration", "maxConnectionDuration: 300ms"},
		{"http1IdleTimeout", "http1IdleTimeout: 300ms"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			tg := startGateway(t, "frontendPolicies:\n  http: {"+tc.policy+"}\n"+oneRoute(up), nil)
			h := dialH2Raw(t, tg.addr(3000))
			if err := h.request(1, "GET", "/x", true); err != nil {
				t.Fatal(err)
			}
			answers := map[uint32]*h2Answer{}
			f, err := h.readUntil(10*time.Second, answers, func(f http2.Frame) bool { _, ok := f.(*http2.GoAwayFrame); return ok })
			if err != nil {
				t.Fatalf("no GOAWAY: %v", err)
			}
			if a := answers[1]; a == nil || !a.done || a.status != "200" {
				t.Fatalf("stream 1 before the GOAWAY: %+v", a)
			}
			if ga := f.(*http2.GoAwayFrame); ga.ErrCode != http2.ErrCodeNo || ga.LastStreamID != 1 {
				t.Fatalf("GOAWAY %v, last stream %d; want NO_ERROR, 1", ga.ErrCode, ga.LastStreamID)
			}
			if _, err := h.readUntil(10*time.Second, nil, func(http2.Frame) bool { return false }); err == nil || isTimeout(err) {
				t.Fatalf("connection still open: %v", err)
			}
		})
	}
}

// TestH2KeepalivePings: http2KeepaliveInterval pings a silent client; one
// that answers stays connected, one that does not is closed after
// http2KeepaliveTimeout.
func TestH2KeepalivePings(t *testing.T) {
	tg := startGateway(t, "frontendPolicies:\n  http: {http2KeepaliveInterval: 100ms, http2KeepaliveTimeout: 300ms}\n"+oneRoute(closedAddr(t)), nil)
	t.Run("answered", func(t *testing.T) {
		h := dialH2Raw(t, tg.addr(3000))
		pings := 0
		_, err := h.readUntil(10*time.Second, nil, func(f http2.Frame) bool {
			if p, ok := f.(*http2.PingFrame); ok && !p.IsAck() {
				pings++ // readUntil answers it
			}
			if _, ok := f.(*http2.GoAwayFrame); ok {
				t.Fatal("GOAWAY to a client that answers its pings")
			}
			return pings == 5
		})
		if err != nil {
			t.Fatalf("after %d pings: %v", pings, err)
		}
	})
	t.Run("unanswered", func(t *testing.T) {
		h := dialH2Raw(t, tg.addr(3000))
		closedAfterUnansweredPing(t, h)
	})
}

// closedAfterUnansweredPing reads h's connection, answering its SETTINGS
// but no PING, until the gateway closes it, which must come after a PING.
func closedAfterUnansweredPing(t *testing.T, h *h2Raw) {
	t.Helper()
	_ = h.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	pinged := false
	for {
		f, err := h.fr.ReadFrame()
		if err != nil {
			if isTimeout(err) || !pinged {
				t.Fatalf("pinged %v, then: %v", pinged, err)
			}
			return // closed
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				_ = h.write(func(fr *http2.Framer) error { return fr.WriteSettingsAck() })
			}
		case *http2.PingFrame:
			pinged = pinged || !f.IsAck() // and not answered
		}
	}
}

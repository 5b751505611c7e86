package server

import (
	"bytes"
	"crypto/tls"
	"testing"
	"time"
)

// TestSessionTicketsSurviveReloads: a client that resumes its TLS session
// on a new connection still resumes it after a reload that kept the
// listener's TLS settings (a route changed), over TLS 1.3 and 1.2; after a
// reload that changed them, its ticket no longer opens a session.
func TestSessionTicketsSurviveReloads(t *testing.T) {
	v := newRetireVars(t)
	root := ", root: " + v.ca1File
	cases := []struct {
		desc          string
		before, after [2]string // listeners a's and b's extra tls fields
		resumed       bool
	}{
		{desc: "settings unchanged", before: [2]string{root}, after: [2]string{root}, resumed: true},
		{desc: "another listener's settings changed", after: [2]string{"", root}, resumed: true},
		{desc: "cipher suites narrowed", after: [2]string{", cipherSuites: [TLS13_AES_128_GCM_SHA256, TLS13_AES_256_GCM_SHA384, TLS13_CHACHA20_POLY1305_SHA256, TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256]"}},
		{desc: "client CA file rewritten with another CA", before: [2]string{root}, after: [2]string{", root: " + v.ca2File}},
	}
	for _, version := range []uint16{tls.VersionTLS13, tls.VersionTLS12} {
		for _, tc := range cases {
			t.Run(tls.VersionName(version)+"/"+tc.desc, func(t *testing.T) {
				tg := startGatewayWith(t, v.config(tc.before[0], tc.before[1], 1), nil, TransportStd)
				addr := tg.addr(3000)
				cfg := v.clientTLS("http/1.1", true, version)
				cfg.ClientSessionCache = tls.NewLRUClientSessionCache(4)
				// The first connection gets a ticket (TLS 1.3 sends it
				// after the handshake: the response's read takes it in);
				// the second resumes with it.
				for i, wantResumed := range []bool{false, true} {
					h := newH1Conn(t, dialTLSConn(t, addr, cfg))
					h.get("/", 1)
					if got := h.c.(*tls.Conn).ConnectionState().DidResume; got != wantResumed {
						t.Fatalf("connection %d before the reload: resumed %v, want %v", i+1, got, wantResumed)
					}
					h.c.Close()
				}

				tg.apply(v.config(tc.after[0], tc.after[1], 2), nil)
				c, err := tls.Dial("tcp", addr, cfg)
				if err != nil {
					if tc.resumed {
						t.Fatalf("a new connection after the reload: %v", err)
					}
					return // refused: no session resumed either
				}
				defer c.Close()
				if got := c.ConnectionState().DidResume; got != tc.resumed {
					t.Fatalf("a new connection after the reload: resumed %v, want %v", got, tc.resumed)
				}
			})
		}
	}
}

// TestTicketKeysRotateDaily: each day's keys start with a new one, and keep
// the previous days' (within a ticket's lifetime) for decryption; a
// listener's keys are its own.
func TestTicketKeysRotateDaily(t *testing.T) {
	today := ticketKeys("a", 100)
	tomorrow := ticketKeys("a", 101)
	if len(today) != 7 {
		t.Fatalf("%d keys, want a week's (7)", len(today))
	}
	if today[0] == tomorrow[0] {
		t.Fatal("tomorrow's tickets are encrypted with today's key")
	}
	for i := 1; i < len(today); i++ {
		if tomorrow[i] != today[i-1] {
			t.Fatalf("tomorrow's key %d is not today's key %d", i, i-1)
		}
	}
	if other := ticketKeys("b", 100); bytes.Equal(other[0][:], today[0][:]) {
		t.Fatal("two listeners' settings share a ticket key")
	}

	cfg := &tls.Config{}
	st := newSessionTickets(cfg, "a", time.Unix(100*86400+5, 0))
	if st.epoch.Load() != 100 {
		t.Fatalf("keys for day %d, want 100", st.epoch.Load())
	}
	st.refresh(time.Unix(101*86400, 0))
	if st.epoch.Load() != 101 {
		t.Fatalf("keys for day %d after midnight, want 101", st.epoch.Load())
	}
}

package server

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"encoding/binary"
	"sync"
	"sync/atomic"
	"time"
)

// Session ticket keys. crypto/tls gives each tls.Config random keys of its
// own, so every reload, which compiles new configurations, made every
// client's session ticket worthless: after each config push, each
// reconnecting client paid a full handshake. A terminating listener's keys
// are derived instead, from a secret the process draws once and from the
// listener's tlsDigest and the day: a reload that keeps a listener's TLS
// settings keeps its keys, one that changes them (a client CA rotated, a
// certificate replaced) makes the old tickets undecryptable, as the
// connections handshaken under the old settings are retired (retire.go).
// Keys rotate as crypto/tls's own do: a new one encrypts each day, and a
// ticket decrypts for a week.
const (
	ticketKeyRotation = 24 * time.Hour
	ticketKeyLifetime = 7 * 24 * time.Hour
)

// ticketSecret is the process's secret behind every listener's ticket keys.
var ticketSecret = sync.OnceValue(func() []byte {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return b
})

// sessionTickets keeps a terminating listener's tls.Config on the ticket
// keys of the current day.
type sessionTickets struct {
	cfg    *tls.Config
	digest string
	epoch  atomic.Int64 // the day the keys set are for
}

// newSessionTickets sets cfg's ticket keys for digest, now.
func newSessionTickets(cfg *tls.Config, digest string, now time.Time) *sessionTickets {
	t := &sessionTickets{cfg: cfg, digest: digest}
	t.epoch.Store(-1)
	t.refresh(now)
	return t
}

// refresh moves the keys on when the day changed since they were set: a
// comparison per handshake, a derivation once a day.
func (t *sessionTickets) refresh(now time.Time) {
	epoch := now.Unix() / int64(ticketKeyRotation/time.Second)
	old := t.epoch.Load()
	if old == epoch || !t.epoch.CompareAndSwap(old, epoch) {
		return
	}
	t.cfg.SetSessionTicketKeys(ticketKeys(t.digest, epoch))
}

// ticketKeys are the keys for digest on day epoch: that day's first (it
// encrypts new tickets), then the earlier days' within a ticket's lifetime
// (they decrypt the tickets issued then).
func ticketKeys(digest string, epoch int64) [][32]byte {
	keys := make([][32]byte, ticketKeyLifetime/ticketKeyRotation)
	var day [8]byte
	for i := range keys {
		m := hmac.New(sha256.New, ticketSecret())
		m.Write([]byte(digest))
		binary.BigEndian.PutUint64(day[:], uint64(epoch-int64(i)))
		m.Write(day[:])
		m.Sum(keys[i][:0])
	}
	return keys
}

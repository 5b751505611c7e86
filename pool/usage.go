// Package pool owns what the gateway keeps beyond one request or one
// configuration: Usage, the registry of long-lived runtime state
// (connection pools, MCP backends, provider health, rate-limit buckets,
// remote key sets) that a reload hands from one snapshot to the next.
package pool

import (
	"fmt"
	"sync"
)

// Usage holds runtime state by key, with a reference count per value, as
// Caddy's UsagePool does. Each compiled snapshot takes its state through
// a Lease: asking for a key that any lease holds returns the same value,
// so state whose key (everything it was built from) is unchanged survives
// a reload, and a reload that changes nothing creates nothing. A value no
// lease holds any more is closed.
//
// Keys are namespaced by their user ("ratelimit\x00...", "mcp\x00...");
// one key always holds values of one type.
type Usage struct {
	mu      sync.Mutex
	entries map[string]*usageEntry
}

type usageEntry struct {
	value   any
	refs    int
	started bool
}

// Starter is state that does work of its own once it serves (a key set's
// background fetches). Start is called once, when the first lease holding
// it starts; state built only to validate a config is never started.
type Starter interface{ Start() }

// NewUsage returns an empty registry.
func NewUsage() *Usage { return &Usage{entries: map[string]*usageEntry{}} }

// Len is the number of values held.
func (u *Usage) Len() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.entries)
}

// Lease is one snapshot's hold on values of a Usage. It is used by one
// goroutine while the snapshot compiles; Start and Release may come from
// another after that.
type Lease struct {
	u        *Usage
	mu       sync.Mutex
	held     map[string]bool
	released bool
}

// Lease returns an empty lease.
func (u *Usage) Lease() *Lease { return &Lease{u: u, held: map[string]bool{}} }

// LoadOrNew returns the value under key: the one some lease holds, else a
// new one from build, which is kept only when it returns no error. The
// lease holds a reference to it until Release (one reference, however often
// it asks for the key).
func LoadOrNew[T any](l *Lease, key string, build func() (T, error)) (T, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.released {
		panic("pool: LoadOrNew on a released lease")
	}
	u := l.u
	u.mu.Lock()
	if e, ok := u.entries[key]; ok {
		v, ok := e.value.(T)
		if !ok {
			u.mu.Unlock()
			panic(fmt.Sprintf("pool: key %q holds a %T, not a %T", key, e.value, v))
		}
		if !l.held[key] {
			e.refs++
			l.held[key] = true
		}
		u.mu.Unlock()
		return v, nil
	}
	u.mu.Unlock()
	// Built outside the registry's lock: building may be slow (a stdio MCP
	// server starting) and other leases must not wait for it. Leases are
	// built one at a time (Apply is serialised), so no other lease races to
	// build the same key.
	v, err := build()
	if err != nil {
		return v, err
	}
	u.mu.Lock()
	if e, ok := u.entries[key]; ok {
		// Another lease built it meanwhile: use that one, drop ours.
		w := e.value.(T)
		e.refs++
		l.held[key] = true
		u.mu.Unlock()
		closeValue(v)
		return w, nil
	}
	u.entries[key] = &usageEntry{value: v, refs: 1}
	l.held[key] = true
	u.mu.Unlock()
	return v, nil
}

// Start starts the lease's values that are Starters and were not started.
func (l *Lease) Start() {
	l.mu.Lock()
	defer l.mu.Unlock()
	var start []Starter
	l.u.mu.Lock()
	for key := range l.held {
		e := l.u.entries[key]
		if s, ok := e.value.(Starter); ok && !e.started {
			e.started = true
			start = append(start, s)
		}
	}
	l.u.mu.Unlock()
	for _, s := range start {
		s.Start()
	}
}

// Release gives up the lease's references and closes the values no lease
// holds any more (those with a Close method). Releasing twice is a no-op.
func (l *Lease) Release() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.released {
		return
	}
	l.released = true
	var done []any
	l.u.mu.Lock()
	for key := range l.held {
		e := l.u.entries[key]
		if e.refs--; e.refs == 0 {
			delete(l.u.entries, key)
			done = append(done, e.value)
		}
	}
	l.u.mu.Unlock()
	for _, v := range done {
		closeValue(v)
	}
}

// Holds reports whether the lease holds key.
func (l *Lease) Holds(key string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.held[key]
}

func closeValue(v any) {
	switch c := v.(type) {
	case interface{ Close() error }:
		_ = c.Close()
	case interface{ Close() }:
		c.Close()
	}
}

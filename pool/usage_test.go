package pool

import (
	"errors"
	"sync"
	"testing"
)

type state struct {
	name           string
	starts, closes int
}

func (s *state) Start() { s.starts++ }
func (s *state) Close() { s.closes++ }

func TestUsageAcrossLeases(t *testing.T) {
	u := NewUsage()
	builds := 0
	build := func(name string) func() (*state, error) {
		return func() (*state, error) { builds++; return &state{name: name}, nil }
	}
	// Snapshot 1 takes a and b; asking twice holds one reference.
	l1 := u.Lease()
	a, _ := LoadOrNew(l1, "a", build("a"))
	b, _ := LoadOrNew(l1, "b", build("b"))
	if again, _ := LoadOrNew(l1, "a", build("a")); again != a || builds != 2 {
		t.Fatalf("second ask built anew (%d builds)", builds)
	}
	l1.Start()
	if a.starts != 1 || b.starts != 1 {
		t.Fatalf("starts a=%d b=%d", a.starts, b.starts)
	}
	// Snapshot 2 keeps a, drops b, adds c: only c is built and started.
	l2 := u.Lease()
	a2, _ := LoadOrNew(l2, "a", build("a"))
	c, _ := LoadOrNew(l2, "c", build("c"))
	if a2 != a || builds != 3 {
		t.Fatalf("a not reused (%d builds)", builds)
	}
	l2.Start()
	if a.starts != 1 || c.starts != 1 {
		t.Fatalf("starts a=%d c=%d", a.starts, c.starts)
	}
	l1.Release()
	if a.closes != 0 || b.closes != 1 || c.closes != 0 {
		t.Fatalf("closes a=%d b=%d c=%d", a.closes, b.closes, c.closes)
	}
	l1.Release() // a no-op
	if b.closes != 1 || u.Len() != 2 {
		t.Fatalf("second release: b closes %d, %d held", b.closes, u.Len())
	}
	l2.Release()
	if a.closes != 1 || c.closes != 1 || u.Len() != 0 {
		t.Fatalf("after the last lease: a=%d c=%d, %d held", a.closes, c.closes, u.Len())
	}
}

func TestUsageValidateOnly(t *testing.T) {
	// A lease that is never started (validating a config) starts nothing
	// and closes what it built.
	u := NewUsage()
	l := u.Lease()
	s, _ := LoadOrNew(l, "k", func() (*state, error) { return &state{}, nil })
	l.Release()
	if s.starts != 0 || s.closes != 1 {
		t.Fatalf("starts %d closes %d", s.starts, s.closes)
	}
}

func TestUsageBuildError(t *testing.T) {
	u := NewUsage()
	l := u.Lease()
	if _, err := LoadOrNew(l, "k", func() (*state, error) { return nil, errors.New("no") }); err == nil {
		t.Fatal("no error")
	}
	if u.Len() != 0 || l.Holds("k") {
		t.Fatal("a failed build is held")
	}
	l.Release()
}

func TestUsageTypeMismatchPanics(t *testing.T) {
	u := NewUsage()
	l := u.Lease()
	LoadOrNew(l, "k", func() (*state, error) { return &state{}, nil })
	defer func() {
		if recover() == nil {
			t.Fatal("no panic")
		}
	}()
	LoadOrNew(l, "k", func() (int, error) { return 1, nil })
}

func TestUsageConcurrentLeases(t *testing.T) {
	u := NewUsage()
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 200 {
				l := u.Lease()
				LoadOrNew(l, "shared", func() (*state, error) { return &state{}, nil })
				l.Release()
			}
		}()
	}
	wg.Wait()
	if u.Len() != 0 {
		t.Fatalf("%d held after every lease was released", u.Len())
	}
}

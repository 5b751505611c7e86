package logline

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// gateWriter records writes; while its gate is closed, writes wait.
type gateWriter struct {
	mu     sync.Mutex
	out    bytes.Buffer
	writes int
	gate   chan struct{} // nil: open
	synced int
}

func (g *gateWriter) Write(p []byte) (int, error) {
	if g.gate != nil {
		<-g.gate
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.writes++
	return g.out.Write(p)
}

func (g *gateWriter) Sync() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.synced++
	return nil
}

func (g *gateWriter) String() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.out.String()
}

// TestLineSinkKeepsOrder: lines of every length, shorter and longer than a
// buffer, come out whole and in order after Stop, in fewer writes than
// lines; after Stop a line is written at once.
func TestLineSinkKeepsOrder(t *testing.T) {
	var out gateWriter
	s := newLineSink(&out, 64, time.Hour)
	var want strings.Builder
	for i := range 200 {
		line := fmt.Sprintf("%d:%s\n", i, strings.Repeat("x", i%97))
		want.WriteString(line)
		s.write([]byte(line))
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); got != want.String() {
		t.Fatalf("lines out of order or lost:\n got %q\nwant %q", got, want.String())
	}
	if out.writes >= 200 || out.synced == 0 {
		t.Fatalf("%d writes for 200 lines, %d syncs", out.writes, out.synced)
	}
	writes := out.writes
	s.write([]byte("after\n"))
	if out.writes != writes+1 || !strings.HasSuffix(out.String(), "after\n") {
		t.Fatal("a line after Stop was not written at once")
	}
	if err := s.Stop(); err != nil { // a second Stop only syncs
		t.Fatal(err)
	}
}

// TestLineSinkBackPressure: while the output is stuck, lines gather in the
// two buffers, then the next line waits; none is lost once the output
// moves again.
func TestLineSinkBackPressure(t *testing.T) {
	out := gateWriter{gate: make(chan struct{})}
	s := newLineSink(&out, 100, time.Hour)
	line := []byte(strings.Repeat("y", 49) + "\n") // two fill a buffer
	for range 4 {
		s.write(line) // first buffer handed over (its write stuck), second filled
	}
	blocked := make(chan struct{})
	go func() {
		s.write(line) // both buffers full: waits for the writer
		close(blocked)
	}()
	select {
	case <-blocked:
		t.Fatal("a line went through with both buffers full")
	case <-time.After(50 * time.Millisecond): // a bound on how long it stays blocked, not a wait for work
	}
	close(out.gate)
	<-blocked
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if got, want := out.String(), strings.Repeat(string(line), 5); got != want {
		t.Fatalf("got %d bytes, want %d", len(got), len(want))
	}
}

// TestLineSinkFlushesEveryInterval: a line reaches the output within about
// an interval without Sync or Stop; Sync writes the rest at once.
func TestLineSinkFlushesEveryInterval(t *testing.T) {
	var out gateWriter
	s := newLineSink(&out, 1<<10, 20*time.Millisecond)
	defer s.Stop()
	s.write([]byte("first\n"))
	deadline := time.Now().Add(5 * time.Second)
	for out.String() != "first\n" {
		if time.Now().After(deadline) {
			t.Fatal("the line was not written within 5s of a 20ms interval")
		}
		time.Sleep(5 * time.Millisecond)
	}
	s.write([]byte("second\n"))
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); got != "first\nsecond\n" {
		t.Fatalf("after Sync: %q", got)
	}
}

// TestLineSinkConcurrentLines: lines from many goroutines come out whole.
func TestLineSinkConcurrentLines(t *testing.T) {
	var out gateWriter
	s := newLineSink(&out, 512, time.Hour)
	const workers, each = 8, 500
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				s.write(fmt.Appendf(nil, "w%d-%d-%s\n", w, i, strings.Repeat("z", i%40)))
			}
		})
	}
	wg.Wait()
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	next := make(map[int]int)
	n := 0
	for line := range strings.Lines(out.String()) {
		var w, i int
		var pad string
		if _, err := fmt.Sscanf(line, "w%d-%d-%s\n", &w, &i, &pad); err != nil && i%40 != 0 {
			t.Fatalf("torn line %q", line)
		}
		if i != next[w] || len(pad) != i%40 {
			t.Fatalf("line %q out of order or torn (want i=%d)", line, next[w])
		}
		next[w]++
		n++
	}
	if n != workers*each {
		t.Fatalf("%d lines, want %d", n, workers*each)
	}
}

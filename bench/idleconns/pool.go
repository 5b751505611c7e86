package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// newRequest builds the one request sent on every connection.
func newRequest(addr, path string) []byte {
	return []byte("GET " + path + " HTTP/1.1\r\nHost: " + addr + "\r\nUser-Agent: idleconns\r\n\r\n")
}

// opener dials connections and completes one request on each.
type opener struct {
	addr     string
	request  []byte
	parallel int
}

// pool holds the idle connections and counts how many the server still keeps.
type pool struct {
	mu      sync.Mutex
	conns   []net.Conn
	open    atomic.Int64
	closing atomic.Bool
	watched sync.WaitGroup
}

// open tries n connections, at most o.parallel at a time. It returns the pool
// of those that completed their request and the first error met, if any.
func (o opener) open(ctx context.Context, n int) (*pool, error) {
	p := &pool{}
	var (
		firstErr error
		errOnce  sync.Once
		wg       sync.WaitGroup
	)
	sem := make(chan struct{}, o.parallel)
	var d net.Dialer
	for range n {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			errOnce.Do(func() { firstErr = ctx.Err() })
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			c, err := o.openOne(ctx, &d)
			if err != nil {
				errOnce.Do(func() { firstErr = err })
				return
			}
			p.add(c)
		}()
	}
	wg.Wait()
	return p, firstErr
}

// openOne dials and completes one keep-alive request.
func (o opener) openOne(ctx context.Context, d *net.Dialer) (net.Conn, error) {
	c, err := d.DialContext(ctx, "tcp", o.addr)
	if err != nil {
		return nil, err
	}
	if deadline, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(deadline)
	}
	if err := roundTrip(c, o.request); err != nil {
		_ = c.Close()
		return nil, err
	}
	_ = c.SetDeadline(time.Time{})
	return c, nil
}

// roundTrip writes req and reads one complete response, which must be a
// success that leaves the connection open.
func roundTrip(c net.Conn, req []byte) error {
	if _, err := c.Write(req); err != nil {
		return fmt.Errorf("write request: %w", err)
	}
	br := bufio.NewReaderSize(c, 4096)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return fmt.Errorf("read response: %w", err)
	}
	_, err = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return fmt.Errorf("read response body: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("response status %d", resp.StatusCode)
	}
	if resp.Close {
		return errors.New("server asked to close the connection")
	}
	if br.Buffered() != 0 {
		return fmt.Errorf("%d unexpected bytes after the response", br.Buffered())
	}
	return nil
}

// add takes c into the pool and watches it: a read returns only when the
// server closes the connection (or sends something unexpected).
func (p *pool) add(c net.Conn) {
	p.mu.Lock()
	p.conns = append(p.conns, c)
	p.mu.Unlock()
	p.open.Add(1)
	p.watched.Add(1)
	go func() {
		defer p.watched.Done()
		var b [1]byte
		_, _ = c.Read(b[:])
		if !p.closing.Load() {
			p.open.Add(-1)
		}
	}()
}

// opened is how many connections completed their request.
func (p *pool) opened() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns)
}

// stillOpen is how many of them the server has not closed.
func (p *pool) stillOpen() int { return int(p.open.Load()) }

// close closes every connection and waits for the watchers to finish.
func (p *pool) close() {
	p.closing.Store(true)
	p.mu.Lock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.watched.Wait()
}

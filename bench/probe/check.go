package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

// expectation is what a successful answer looks like.
type expectation struct {
	status int
	length int64 // -1: any length
}

// check performs one GET and compares the answer with e.
func (e expectation) check(ctx context.Context, client *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	n, err := io.Copy(io.Discard, resp.Body)
	if err != nil {
		return fmt.Errorf("reading body: %w", err)
	}
	if resp.StatusCode != e.status {
		return fmt.Errorf("status %d, want %d", resp.StatusCode, e.status)
	}
	if e.length >= 0 && n != e.length {
		return fmt.Errorf("body is %d bytes, want %d", n, e.length)
	}
	return nil
}

// poll calls try until it succeeds, fails with errExited, or ctx ends,
// waiting interval between attempts. On timeout it returns the last
// attempt's error.
func poll(ctx context.Context, interval time.Duration, try func() error) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		err := try()
		if err == nil || errors.Is(err, errExited) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not ready: %w (gave up: %v)", err, ctx.Err())
		case <-t.C:
		}
	}
}

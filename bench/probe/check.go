package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

// expectation is what a successful answer looks like, and what request
// asks for it (a GET, unless method says otherwise).
type expectation struct {
	status int
	length int64 // -1: any length
	method string
	body   []byte      // sent when not nil
	header http.Header // added to the request
}

// check performs one request and compares the answer with e.
func (e expectation) check(ctx context.Context, client *http.Client, url string) error {
	method := e.method
	if method == "" {
		method = http.MethodGet
	}
	var body io.Reader
	if e.body != nil {
		body = bytes.NewReader(e.body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		return err
	}
	for k, vs := range e.header {
		req.Header[k] = vs
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

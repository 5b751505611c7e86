package provider

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/relaygate/gateway/policy/credential"
	"golang.org/x/oauth2"
)

// Token refresh: a cached token is replaced refreshMargin before it
// expires (half its lifetime when that is shorter), so that no request
// carries a token that expires on the way.
const (
	refreshMargin = time.Minute
	// untimedTokenLifetime is how long a token that names no expiry is
	// used.
	untimedTokenLifetime = 5 * time.Minute
	// tokenFetchTimeout bounds a fetch whose context has no deadline.
	tokenFetchTimeout = 10 * time.Second
)

// tokenCache keeps one access token and replaces it near its expiry. One
// fetch runs at a time; requests that need a token meanwhile wait for it
// (within their context), and those that still hold a valid one go on
// with it.
type tokenCache struct {
	// what names the token in errors ("gcp access token").
	what  string
	fetch func(ctx context.Context) (*oauth2.Token, error)
	now   func() time.Time

	cur    atomic.Pointer[cachedToken]
	mu     sync.Mutex
	flight *tokenFlight // the fetch under way, if any
}

// cachedToken is a token as the Authorization header carries it.
type cachedToken struct {
	header    []byte // "Bearer <token>"
	refreshAt time.Time
	expiry    time.Time
}

// tokenFlight is one fetch; done closes when err and the cache are set.
type tokenFlight struct {
	done chan struct{}
	err  error
}

// header is "Bearer <token>" with a token that is not about to expire.
func (c *tokenCache) header(ctx context.Context) ([]byte, error) {
	if t := c.cur.Load(); t != nil && c.now().Before(t.refreshAt) {
		return t.header, nil
	}
	return c.refresh(ctx)
}

func (c *tokenCache) refresh(ctx context.Context) ([]byte, error) {
	for {
		c.mu.Lock()
		now := c.now()
		t := c.cur.Load()
		if t != nil && now.Before(t.refreshAt) {
			c.mu.Unlock()
			return t.header, nil
		}
		if f := c.flight; f != nil {
			c.mu.Unlock()
			if t != nil && now.Before(t.expiry) {
				return t.header, nil // still valid while another request refreshes it
			}
			select {
			case <-f.done:
			case <-ctx.Done():
				return nil, fmt.Errorf("%s: %w", c.what, ctx.Err())
			}
			if f.err != nil && !isContextError(f.err) {
				return nil, f.err
			}
			continue // refreshed, or the fetching request went away: look again
		}
		f := &tokenFlight{done: make(chan struct{})}
		c.flight = f
		c.mu.Unlock()
		return c.run(ctx, f, t)
	}
}

// run fetches a token for f; a failed fetch leaves a token still valid in
// use.
func (c *tokenCache) run(ctx context.Context, f *tokenFlight, prev *cachedToken) ([]byte, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, tokenFetchTimeout)
		defer cancel()
	}
	tok, err := c.fetch(ctx)
	var next *cachedToken
	if err == nil {
		next, err = c.cached(tok)
	}
	c.mu.Lock()
	if next != nil {
		c.cur.Store(next)
	}
	c.flight, f.err = nil, err
	c.mu.Unlock()
	close(f.done)
	if err != nil {
		if prev != nil && c.now().Before(prev.expiry) {
			return prev.header, nil
		}
		return nil, err
	}
	return next.header, nil
}

// cached is tok as the cache keeps it.
func (c *tokenCache) cached(tok *oauth2.Token) (*cachedToken, error) {
	if tok == nil || tok.AccessToken == "" {
		return nil, errors.New(c.what + ": the token endpoint sent none")
	}
	header, err := credential.HeaderValue("Bearer ", []byte(tok.AccessToken))
	if err != nil {
		return nil, errors.New(c.what + ": " + err.Error())
	}
	now := c.now()
	expiry := tok.Expiry
	if expiry.IsZero() {
		expiry = now.Add(untimedTokenLifetime)
	}
	margin := min(refreshMargin, expiry.Sub(now)/2)
	return &cachedToken{header: header, refreshAt: expiry.Add(-margin), expiry: expiry}, nil
}

func isContextError(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

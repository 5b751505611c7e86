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
)

// tokenFetchTimeout bounds a fetch, whatever the requests waiting for it
// allow (a var: tests shorten it).
var tokenFetchTimeout = 10 * time.Second

// tokenCache keeps one access token and replaces it near its expiry.
//
// One fetch runs at a time, on its own goroutine and bounded by
// tokenFetchTimeout alone: no request's end (its client hanging up, its
// deadline) ends it, since others may be waiting for it. Requests that
// still hold a valid token go on with it while it runs; the others wait
// for it within their own context, and stop waiting when that ends. A
// request that joined a fetch already under way and saw it fail asks
// again once: the failure may be older than the request (a token
// endpoint that hung, then recovered), so it is handed only to the
// request that started the fetch and to those that retried.
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

// tokenFlight is one fetch; done closes when header or err is set.
type tokenFlight struct {
	done   chan struct{}
	header []byte
	err    error
}

// header is "Bearer <token>" with a token that is not about to expire.
func (c *tokenCache) header(ctx context.Context) ([]byte, error) {
	if t := c.cur.Load(); t != nil && c.now().Before(t.refreshAt) {
		return t.header, nil
	}
	return c.refresh(ctx)
}

func (c *tokenCache) refresh(ctx context.Context) ([]byte, error) {
	retried := false
	for {
		c.mu.Lock()
		now := c.now()
		t := c.cur.Load()
		if t != nil && now.Before(t.refreshAt) {
			c.mu.Unlock()
			return t.header, nil
		}
		f, joined := c.flight, true
		if f == nil {
			f, joined = &tokenFlight{done: make(chan struct{})}, false
			c.flight = f
			go c.run(f)
		}
		c.mu.Unlock()
		if t != nil && now.Before(t.expiry) {
			return t.header, nil // still valid while the fetch replaces it
		}
		select {
		case <-f.done:
		case <-ctx.Done():
			return nil, fmt.Errorf("%s: %w", c.what, ctx.Err())
		}
		if f.err == nil {
			return f.header, nil
		}
		if joined && !retried {
			retried = true
			continue // a failure that may predate this request: ask again
		}
		return nil, f.err
	}
}

// run makes the fetch of f and caches its token.
func (c *tokenCache) run(f *tokenFlight) {
	ctx, cancel := context.WithTimeout(context.Background(), tokenFetchTimeout)
	defer cancel()
	tok, err := c.fetch(ctx)
	var next *cachedToken
	if err == nil {
		next, err = c.cached(tok)
	} else if ctx.Err() != nil {
		err = fmt.Errorf("%s: no token within %v: %w", c.what, tokenFetchTimeout, ctx.Err())
	}
	c.mu.Lock()
	if next != nil {
		c.cur.Store(next)
		f.header = next.header
	}
	c.flight, f.err = nil, err
	c.mu.Unlock()
	close(f.done)
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

package backend

//lint:file-ignore SA1019 see h2.go: x/net's http2.Transport and its ClientConnPool are what speaks HTTP/2 over connections the pool dials.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
)

// An upstream's HTTP/2 connections are kept here rather than in x/net's
// own pool, so that the exchange, not x/net's RoundTrip, decides how often
// a request the upstream did not process is sent again. x/net sends such a
// request (a stream refused with REFUSED_STREAM, or left behind by a
// GOAWAY) up to seven more times, waiting 1, 2, 4 ... 32 s between tries:
// behind an upstream that refuses every stream a client waited over a
// minute for its 503. The exchange sends it h2Attempts times in all, at
// once, then answers.

// h2Attempts is how many times in all a request the upstream left
// unprocessed is sent: the first time and two more. A refusal is cheap to
// get (one round trip), so a few more tries cost little; more than a few
// against an upstream that refuses them all only delay the answer.
const h2Attempts = 3

// h2Dials is how many connections one request dials at most to find a
// stream: a new connection is shared, and others may take its streams
// first, or the upstream may allow none (SETTINGS_MAX_CONCURRENT_STREAMS
// 0).
const h2Dials = 3

// ErrStreamRefused is the failure of a request the upstream refused to
// process each time it was sent (RST_STREAM REFUSED_STREAM, or a GOAWAY
// that left it out): nothing was processed, so it is a 503 as a refused
// connection is, and a retry policy may send it again.
var ErrStreamRefused = errors.New("the upstream refused the HTTP/2 stream without processing it")

// errNoStream is a request that found no connection with a stream free
// after dialing h2Dials connections.
var errNoStream = errors.New("no HTTP/2 connection to the upstream has a stream free")

// h2Conns is an upstream's HTTP/2 connections: the ClientConnPool of its
// transport (x/net tells it about a connection that died, MarkDead), from
// which ExchangeH2 takes a connection per attempt. Dials are shared: the
// requests that find no stream free while one is under way wait for it.
//
// A connection is dialled only when no open one has a stream free, and no
// more than the pool's limit (Upstream.maxConns, as on the HTTP/1.1 side):
// an upstream that allows few streams per connection would otherwise have
// a connection opened per few requests, without bound. At the limit a
// request waits for a stream to end (streamEnded) for up to the pool's
// connection wait, then fails with ErrPoolFull.
type h2Conns struct {
	u     *Upstream
	t     *http2.Transport
	mu    sync.Mutex
	conns []*http2.ClientConn
	dial  *h2Dial
	// waiting counts the requests waiting at the limit; wake, made by the
	// first of them, is closed (and forgotten) when a stream ends or a
	// connection dies, for them to look again.
	waiting atomic.Int32
	wake    chan struct{}
}

// h2Dial is a dial under way; done is closed when cc or err is set.
type h2Dial struct {
	done chan struct{}
	cc   *http2.ClientConn
	err  error
}

// GetClientConn returns a connection with a stream reserved for req: one
// already open, else a new one, else (at the limit) the first with a
// stream free once one ends. A dial outlives a request that stops waiting
// for it (its client left): the connection serves the next.
func (p *h2Conns) GetClientConn(req *http.Request, _ string) (*http2.ClientConn, error) {
	ctx := req.Context()
	waiting := false
	var bound *time.Timer // the wait at the limit, from its start
	defer func() {
		if waiting {
			p.waiting.Add(-1)
		}
		if bound != nil {
			bound.Stop()
		}
	}()
	for dials := 0; ; {
		p.mu.Lock()
		for _, cc := range p.conns {
			if cc.ReserveNewRequest() {
				p.mu.Unlock()
				return cc, nil
			}
		}
		d := p.dial
		if d == nil && len(p.conns) >= p.u.maxConns {
			if !waiting {
				// Counted before the connections are looked at again, so
				// that any stream ending from here on wakes this request.
				waiting = true
				p.waiting.Add(1)
				p.mu.Unlock()
				continue
			}
			if p.wake == nil {
				p.wake = make(chan struct{})
			}
			wake := p.wake
			p.mu.Unlock()
			if bound == nil {
				bound = time.NewTimer(p.u.connWait)
			}
			select {
			case <-wake:
			case <-bound.C:
				return nil, ErrPoolFull
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			continue
		}
		if dials == h2Dials {
			p.mu.Unlock()
			return nil, fmt.Errorf("%w: %w", ErrBackendUnreachable, errNoStream)
		}
		dials++
		if d == nil {
			d = &h2Dial{done: make(chan struct{})}
			p.dial = d
			go p.dialOne(d)
		}
		p.mu.Unlock()
		select {
		case <-d.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if d.err != nil {
			return nil, d.err
		}
		if d.cc.ReserveNewRequest() {
			return d.cc, nil
		}
	}
}

// streamEnded wakes the requests waiting at the limit, if any: a stream
// of the pool ended (its slot is free by now: x/net's RoundTrip and body
// Close return after it forgot the stream), or a connection died.
func (p *h2Conns) streamEnded() {
	if p.waiting.Load() == 0 {
		return
	}
	p.mu.Lock()
	if p.wake != nil {
		close(p.wake)
		p.wake = nil
	}
	p.mu.Unlock()
}

// dialOne opens a connection for d and, when it is up, adds it to the
// pool. Its context is its own: the dialer's and the handshake's timeouts
// bound it.
func (p *h2Conns) dialOne(d *h2Dial) {
	c, err := p.u.dialH2(context.Background(), p.u.dialing.netDialer(), p.u.dialing.network())
	if err == nil {
		d.cc, err = p.t.NewClientConn(c)
		if err != nil {
			c.Close()
			err = fmt.Errorf("%w: %w", ErrBackendUnreachable, err)
		}
	}
	d.err = err
	p.mu.Lock()
	p.dial = nil
	if err == nil {
		p.conns = append(p.conns, d.cc)
	}
	p.mu.Unlock()
	close(d.done)
}

// MarkDead forgets cc: x/net calls it when the connection closed.
func (p *h2Conns) MarkDead(cc *http2.ClientConn) {
	p.mu.Lock()
	for i, c := range p.conns {
		if c == cc {
			p.conns = slices.Delete(p.conns, i, i+1)
			break
		}
	}
	p.mu.Unlock()
	p.streamEnded()
}

// closeIdle retires every connection: none takes a new request, the idle
// ones close now and the others when their last stream ends. Requests in
// flight finish; later ones dial anew.
func (p *h2Conns) closeIdle() {
	p.mu.Lock()
	conns := p.conns
	p.conns = nil
	p.mu.Unlock()
	for _, cc := range conns {
		cc.SetDoNotReuse()
		if st := cc.State(); st.StreamsActive == 0 && st.StreamsReserved == 0 && st.StreamsPending == 0 {
			cc.Close()
		}
	}
}

// roundTrip sends hr on a connection of the pool and returns the upstream's
// answer. A request the upstream left unprocessed is sent again on another
// stream, at once, up to h2Attempts times in all, when its body can start
// over (GetBody); then it fails with ErrStreamRefused.
func (p *h2Conns) roundTrip(hr *http.Request) (*http.Response, error) {
	for attempt := 1; ; attempt++ {
		cc, err := p.GetClientConn(hr, "")
		if err != nil {
			return nil, err
		}
		res, err := cc.RoundTrip(hr)
		if err == nil {
			return res, nil // the stream ends with the body (h2Body.release)
		}
		p.streamEnded()
		if h2NotEstablished(err) {
			p.MarkDead(cc)
		}
		if !h2Unprocessed(err) {
			return nil, err
		}
		if attempt == h2Attempts || hr.Context().Err() != nil {
			return nil, fmt.Errorf("%w (%d times): %w", ErrStreamRefused, attempt, err)
		}
		if hr.Body != nil && hr.Body != http.NoBody {
			if hr.GetBody == nil {
				return nil, fmt.Errorf("%w: %w", ErrStreamRefused, err)
			}
			body, berr := hr.GetBody()
			if berr != nil {
				// The body was more than what is kept to send again.
				return nil, fmt.Errorf("%w: %w", ErrStreamRefused, err)
			}
			again := *hr
			again.Body = body
			hr = &again
		}
	}
}

// x/net keeps these failures unexported; their texts are how they are
// told apart (TestExchangeH2RefusedStreamIsSentAgain and its GOAWAY cases
// fail if x/net renames them).
const (
	h2ErrGotGoAway      = "http2: Transport received Server's graceful shutdown GOAWAY"
	h2ErrUnusable       = "http2: client conn not usable"
	h2ErrNotEstablished = "http2: client conn could not be established"
)

// h2Unprocessed reports whether err says the upstream did not process the
// request (RFC 9113 8.7), as x/net's own retry test does: a refused
// stream, a stream a GOAWAY left out, a connection that could not take it.
func h2Unprocessed(err error) bool {
	var se http2.StreamError
	if errors.As(err, &se) {
		return se.Code == http2.ErrCodeRefusedStream
	}
	s := err.Error()
	return s == h2ErrGotGoAway || s == h2ErrUnusable
}

// h2NotEstablished reports whether err says a new connection was closed
// before its first request: it is no use to the next one.
func h2NotEstablished(err error) bool { return err.Error() == h2ErrNotEstablished }

package policy

// Chain is the compiled, ordered policy pipeline of a route. Build it with a
// ChainBuilder, which puts policies in Order; a Chain is immutable once built
// and shared by every request of the route.
type Chain struct {
	// Request runs in order before the backend is called.
	Request []Request
	// Response runs in reverse order of Request registration, so the policy
	// that saw the request first sees the response last.
	Response []Response
	// ReadsBody is set when a request policy reads the request's body
	// (BodyReader): the server runs the chain only once the body can be
	// read (not while a client waits for 100 Continue).
	ReadsBody bool
	// Waits is set when a request policy waits (Waiter): the server gives
	// it the route's deadline (Ctx.Deadline), which other chains need not
	// pay for.
	Waits bool

	// ranks are the Order positions of Request's policies, for Before.
	ranks []int
}

// BodyReader is a request policy that may read the request's body.
type BodyReader interface {
	ReadsRequestBody() bool
}

// Waiter is a request policy that waits before the request goes on (a
// fault's delay), bounded by Ctx.Deadline.
type Waiter interface {
	WaitsForDeadline()
}

// RunRequest runs the request policies in order and stops at the first that
// returns Done (it answered the request itself); it returns that result.
func (ch *Chain) RunRequest(c *Ctx) Result {
	return ch.RunRequestRange(c, 0, len(ch.Request))
}

// RunRequestRange is RunRequest for Request[from:to]: a server that applies
// a kind of Order itself runs the chain in two parts around it (Before).
func (ch *Chain) RunRequestRange(c *Ctx, from, to int) Result {
	for _, p := range ch.Request[from:to] {
		if p.OnRequest(c) == Done {
			return Done
		}
	}
	return Continue
}

// Before is how many of Request run before kind k in Order: where a kind
// the server applies itself rather than as a chain policy (localRateLimit,
// whose decision the response's headers and LLM token charges need) runs,
// between RunRequestRange(c, 0, i) and RunRequestRange(c, i, len(Request)).
// It panics when k is not in Order, a programming error.
func (ch *Chain) Before(k Kind) int {
	rank := k.rank()
	if rank < 0 {
		panic("policy: kind " + string(k) + " is not in policy.Order")
	}
	n := 0
	for _, r := range ch.ranks {
		if r < rank {
			n++
		}
	}
	return n
}

// RunResponse runs every response policy, last registered first. It runs on
// backend responses and on answers made by request policies alike.
func (ch *Chain) RunResponse(c *Ctx) {
	c.Responding = true
	for i := len(ch.Response) - 1; i >= 0; i-- {
		ch.Response[i].OnResponse(c)
	}
}

// ChainBuilder collects a route's policies in any order and builds the Chain
// in Order.
type ChainBuilder struct {
	entries []chainEntry
}

type chainEntry struct {
	rank int
	p    any
}

// NewChainBuilder returns an empty builder.
func NewChainBuilder() *ChainBuilder { return &ChainBuilder{} }

// Add registers policy p of kind k. p implements Request, Response or both
// (CORS does both); policies of the same kind keep the order they were added
// in. Add panics when k is not in Order or p implements neither interface:
// both are programming errors, not configuration errors.
func (b *ChainBuilder) Add(k Kind, p any) {
	rank := k.rank()
	if rank < 0 {
		panic("policy: kind " + string(k) + " is not in policy.Order")
	}
	_, isReq := p.(Request)
	_, isResp := p.(Response)
	if !isReq && !isResp {
		panic("policy: a " + string(k) + " policy must implement policy.Request or policy.Response")
	}
	b.entries = append(b.entries, chainEntry{rank: rank, p: p})
}

// Build returns the chain: request policies in Order, response policies
// registered in Order (so they run in reverse of it).
func (b *ChainBuilder) Build() Chain {
	var ch Chain
	for rank := range Order {
		for _, e := range b.entries {
			if e.rank != rank {
				continue
			}
			if r, ok := e.p.(Request); ok {
				ch.Request = append(ch.Request, r)
				ch.ranks = append(ch.ranks, rank)
			}
			if br, ok := e.p.(BodyReader); ok && br.ReadsRequestBody() {
				ch.ReadsBody = true
			}
			if _, ok := e.p.(Waiter); ok {
				ch.Waits = true
			}
			if r, ok := e.p.(Response); ok {
				ch.Response = append(ch.Response, r)
			}
		}
	}
	return ch
}

package extauthz

import (
	"crypto/sha256"
	"math"
	"strconv"
	"sync"
	"time"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"

	"github.com/relaygate/gateway/config"
	"github.com/relaygate/gateway/policy"
	"github.com/relaygate/gateway/policy/celrules"
)

// DefaultCacheEntries is cache.maxEntries' default (agentgateway's).
const DefaultCacheEntries = 10000

// decisionCache remembers the service's decisions by a key computed from
// the request (cache.key), for as long as cache.ttl says. Its safety rests
// on the key naming everything the service decides on; the README says so.
type decisionCache struct {
	keys []cel.Program
	ttl  cel.Program
	max  int
	now  func() time.Time

	mu      sync.Mutex
	entries map[[sha256.Size]byte]cachedDecision
}

type cachedDecision struct {
	d     *decision
	until time.Time
}

func newDecisionCache(cfg *config.ExtAuthzCache) (*decisionCache, error) {
	c := &decisionCache{max: DefaultCacheEntries, now: time.Now, entries: map[[sha256.Size]byte]cachedDecision{}}
	if cfg.MaxEntries != nil {
		c.max = *cfg.MaxEntries
	}
	for i, k := range cfg.Key {
		p, err := config.CompileValueExpression(string(k), false)
		if err != nil {
			return nil, &policy.FieldError{Field: "cache.key[" + strconv.Itoa(i) + "]", Msg: err.Error()}
		}
		c.keys = append(c.keys, p)
	}
	p, err := config.CompileValueExpression(string(cfg.TTL), false)
	if err != nil {
		return nil, &policy.FieldError{Field: "cache.ttl", Msg: err.Error()}
	}
	c.ttl = p
	return c, nil
}

// key is the cache key of what in shows (a request, or a connection); ok
// is false when a key expression fails or there are none (no caching then).
func (c *decisionCache) key(in *celrules.Input) (k [sha256.Size]byte, ok bool) {
	if len(c.keys) == 0 || c.max == 0 {
		return k, false
	}
	h := sha256.New()
	for _, p := range c.keys {
		v, err := celrules.EvalLLM(p, in, nil)
		if err != nil {
			return k, false
		}
		part := []byte(celrules.Text(v))
		h.Write([]byte(strconv.Itoa(len(part)) + ":")) // unambiguous joins
		h.Write(part)
	}
	copy(k[:], h.Sum(nil))
	return k, true
}

func (c *decisionCache) get(k [sha256.Size]byte) *decision {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[k]
	if !ok {
		return nil
	}
	if !c.now().Before(e.until) {
		delete(c.entries, k)
		return nil
	}
	return e.d
}

// put keeps a decision for cache.ttl, evaluated against in once the
// decision is applied (extauthz set): a duration, or a Unix time (a
// timestamp or a number of seconds). A ttl that fails or is not in the
// future keeps nothing.
func (c *decisionCache) put(k [sha256.Size]byte, d *decision, in *celrules.Input) {
	v, err := celrules.EvalLLM(c.ttl, in, nil)
	if err != nil {
		return
	}
	now := c.now()
	var until time.Time
	switch x := v.(type) {
	case types.Duration:
		until = now.Add(x.Duration)
	case types.Timestamp:
		until = x.Time
	case types.Int:
		until = time.Unix(int64(x), 0)
	case types.Uint:
		if uint64(x) <= math.MaxInt64 {
			until = time.Unix(int64(x), 0)
		}
	case types.Double:
		if !math.IsNaN(float64(x)) && math.Abs(float64(x)) < 1e15 {
			until = time.Unix(0, int64(float64(x)*1e9))
		}
	}
	if !until.After(now) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) >= c.max {
		// Full: drop the expired, and then any one, to make room.
		for key, e := range c.entries {
			if !now.Before(e.until) {
				delete(c.entries, key)
			}
		}
		for key := range c.entries {
			if len(c.entries) < c.max {
				break
			}
			delete(c.entries, key)
		}
	}
	c.entries[k] = cachedDecision{d: d, until: until}
}

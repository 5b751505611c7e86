// Package balance owns the selection and health state of an ai backend's
// LLM providers: which provider a request tries first, which next, and how
// each attempt's outcome moves a provider's health. It holds no network
// code; the server makes the attempts and reports how each ended.
//
// # Order of attempts
//
// A [Set] holds the providers in groups, in priority order. For one request,
// [Set.Attempts] yields every provider exactly once:
//
//  1. the live providers of group 0, each picked at random with a weight
//     that follows its health score, among those not tried yet;
//  2. the live providers of group 1 the same way, and so on;
//  3. then every evicted provider, group by group, the one whose eviction
//     ends first first, so that a request is still tried when every provider
//     is evicted rather than failing without an attempt.
//
// Liveness is read at each step, not once per request: a provider evicted
// by another request while this one was failing over moves to the tail.
//
// # Health
//
// A provider's score is an exponentially weighted moving average of its
// attempts' success (1 for an answer, 0 for a failure; each attempt moves
// the score a quarter of the way), starting at 1. Its weight is the score,
// at least 0.05, so a provider that returns from an eviction gets a smaller
// share of the traffic until its answers raise the score again, and is never
// starved while live.
//
// A failure (429, 5xx, timeout, connect failure) evicts the provider for a
// backoff: [Options.BaseEviction] (1 s) the first time, doubling with each
// further eviction up to [Options.MaxEviction] (5 min). Any answer (a
// success, or a 4xx that is the client's fault) ends the eviction and resets
// the backoff, so a single failure among many successes costs one base
// eviction, while a provider that fails every time it returns stays out for
// longer and longer. Failures reported while the provider is already evicted
// (attempts that started before the eviction) count in its score but do not
// double the backoff again: a burst of concurrent failures is one episode.
// A Retry-After sets the eviction at least that long, bounded by
// MaxEviction.
//
// # Concurrency
//
// Attempts, Next and a Report on a healthy provider use atomics only and do
// not allocate; a failure, and the first success after failures, take the
// provider's own mutex to move its eviction state in one step. A Set is safe
// to share between goroutines and across config reloads.
package balance

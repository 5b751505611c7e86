package balance

// Outcome is how an attempt at a provider ended.
type Outcome uint8

const (
	// Success is an answer from the provider: 1xx-3xx.
	Success Outcome = iota
	// ClientError is a 4xx other than 408 and 429: the request was at fault,
	// not the provider, and for health it counts as a success (the provider
	// answered).
	ClientError
	// RateLimited is a 429.
	RateLimited
	// ServerError is a 5xx (529 "overloaded" included), or an attempt that
	// ended without a status for a reason other than a timeout or a failed
	// connect (a reset or malformed response).
	ServerError
	// Timeout is an attempt that ran out of time, or a 408.
	Timeout
	// ConnectFailure is an attempt that could not reach the provider.
	ConnectFailure
)

// OutcomeOf classifies an attempt by its response status (0 when there was
// none) and whether it failed to connect or timed out; those two take
// precedence over the status.
//
// Every 4xx except 408 and 429 is [ClientError], 401 and 403 included.
// With passthrough auth those are the client's own key, and counting them
// against the provider would let any client evict every provider by sending
// a bad key. A 401 for a key the gateway itself holds is the provider's
// problem (revoked, expired): the server, which knows which key it sent, may
// report [ServerError] for it instead. A 408 is the provider giving up on
// the request while receiving it, which the gateway (sending a body it holds
// whole) did not cause: [Timeout].
func OutcomeOf(status int, connectFailed, timedOut bool) Outcome {
	switch {
	case connectFailed:
		return ConnectFailure
	case timedOut:
		return Timeout
	case status == 408:
		return Timeout
	case status == 429:
		return RateLimited
	case status >= 100 && status < 400:
		return Success
	case status >= 400 && status < 500:
		return ClientError
	default: // 5xx, no status, or a status outside any class
		return ServerError
	}
}

// healthy reports whether the outcome counts as a success for health.
func (o Outcome) healthy() bool {
	return o == Success || o == ClientError
}

var outcomeNames = [...]string{
	Success:        "success",
	ClientError:    "client_error",
	RateLimited:    "rate_limited",
	ServerError:    "server_error",
	Timeout:        "timeout",
	ConnectFailure: "connect_failure",
}

// String is the outcome's name as a metric label: "success",
// "client_error", "rate_limited", "server_error", "timeout",
// "connect_failure".
func (o Outcome) String() string {
	if int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return "unknown"
}

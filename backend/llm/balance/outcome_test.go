package balance

import "testing"

func TestOutcomeOf(t *testing.T) {
	tests := []struct {
		desc          string
		status        int
		connectFailed bool
		timedOut      bool
		want          Outcome
	}{
		{desc: "200", status: 200, want: Success},
		{desc: "204", status: 204, want: Success},
		{desc: "304", status: 304, want: Success},
		{desc: "400 bad request", status: 400, want: ClientError},
		{desc: "401 is the client's key under passthrough", status: 401, want: ClientError},
		{desc: "403", status: 403, want: ClientError},
		{desc: "404 unknown model", status: 404, want: ClientError},
		{desc: "413 too large", status: 413, want: ClientError},
		{desc: "422", status: 422, want: ClientError},
		{desc: "408 provider gave up receiving", status: 408, want: Timeout},
		{desc: "429", status: 429, want: RateLimited},
		{desc: "500", status: 500, want: ServerError},
		{desc: "503", status: 503, want: ServerError},
		{desc: "529 overloaded", status: 529, want: ServerError},
		{desc: "no status, no cause: reset or bad response", status: 0, want: ServerError},
		{desc: "status out of range", status: 700, want: ServerError},
		{desc: "connect failure", connectFailed: true, want: ConnectFailure},
		{desc: "connect failure wins over a status", status: 200, connectFailed: true, want: ConnectFailure},
		{desc: "timeout", timedOut: true, want: Timeout},
		{desc: "timeout wins over a status", status: 200, timedOut: true, want: Timeout},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			if got := OutcomeOf(tt.status, tt.connectFailed, tt.timedOut); got != tt.want {
				t.Errorf("OutcomeOf(%d, %v, %v) = %v, want %v", tt.status, tt.connectFailed, tt.timedOut, got, tt.want)
			}
		})
	}
}

func TestOutcomeString(t *testing.T) {
	tests := []struct {
		o    Outcome
		want string
	}{
		{Success, "success"},
		{ClientError, "client_error"},
		{RateLimited, "rate_limited"},
		{ServerError, "server_error"},
		{Timeout, "timeout"},
		{ConnectFailure, "connect_failure"},
		{Outcome(99), "unknown"},
	}
	for _, tt := range tests {
		if got := tt.o.String(); got != tt.want {
			t.Errorf("Outcome(%d).String() = %q, want %q", tt.o, got, tt.want)
		}
	}
}

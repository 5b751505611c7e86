package sock_test

import (
	"testing"

	"github.com/relaygate/gateway/backend/sock"
)

// ackingSocket is a socket that took written bytes, whose peer acknowledges
// step more of them before each count is read, as acknowledgements arriving
// between two system calls do.
type ackingSocket struct {
	written, acked, step int64
	failAt               int // the call that fails (0: none)
	calls                int
}

func (s *ackingSocket) tick() bool {
	s.calls++
	s.acked = min(s.acked+s.step, s.written)
	return s.calls != s.failAt
}

func (s *ackingSocket) ackedCount() (int64, bool) {
	ok := s.tick()
	return s.acked, ok
}

func (s *ackingSocket) queuedCount() (int64, bool) {
	ok := s.tick()
	return s.written - s.acked, ok
}

// TestSentCountIsOfOneMoment: the socket's two counts, read while
// acknowledgements arrive, add up to what it took, never to less (which
// made a netpoll connection's writer send bytes twice after its peer's
// half-close).
func TestSentCountIsOfOneMoment(t *testing.T) {
	tests := []struct {
		name   string
		sock   ackingSocket
		want   int64
		wantOK bool
	}{
		{"quiet", ackingSocket{written: 1000, acked: 1000}, 1000, true},
		{"acks arriving", ackingSocket{written: 1 << 20, acked: 0, step: 64 << 10}, 1 << 20, true},
		{"one ack arriving", ackingSocket{written: 5000, acked: 4000, step: 1000}, 5000, true},
		{"never quiet", ackingSocket{written: 1 << 40, step: 1}, 0, false},
		{"the ack count fails", ackingSocket{written: 1000, acked: 1000, failAt: 1}, 0, false},
		{"the queue count fails", ackingSocket{written: 1000, acked: 1000, failAt: 2}, 0, false},
		{"the second ack count fails", ackingSocket{written: 1000, acked: 1000, failAt: 3}, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.sock
			got, ok := sock.SentCount(s.ackedCount, s.queuedCount)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("got %d, %v; want %d, %v", got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

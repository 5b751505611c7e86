package server

import (
	"testing"
	"time"

	"github.com/relaygate/gateway/backend"
	"github.com/relaygate/gateway/config"
)

// TestBackendTCPDialing: a backend's tcp policy replaces config.backend's
// keepalive settings as a whole; fields it leaves out take the keepalive
// defaults, not config.backend's.
func TestBackendTCPDialing(t *testing.T) {
	off, on := false, true
	retries := 3
	global := backend.Dialing{
		ConnectTimeout: time.Second,
		Keepalive:      backend.Keepalive{Enabled: false, Time: time.Minute, Interval: time.Minute, Retries: 2},
		IPv4Only:       true,
	}
	dur := func(d time.Duration) *config.Duration { return &config.Duration{Duration: d} }
	tests := []struct {
		desc string
		tcp  config.BackendTCP
		want backend.Dialing
	}{
		{
			desc: "empty keepalives: the defaults",
			tcp:  config.BackendTCP{Keepalives: &config.Keepalive{}, ConnectTimeout: dur(2 * time.Second)},
			want: backend.Dialing{ConnectTimeout: 2 * time.Second, Keepalive: backend.DefaultKeepalive, IPv4Only: true},
		},
		{
			desc: "fields given win over the defaults",
			tcp:  config.BackendTCP{Keepalives: &config.Keepalive{Enabled: &on, Time: dur(30 * time.Second), Retries: &retries}, ConnectTimeout: dur(time.Second)},
			want: backend.Dialing{ConnectTimeout: time.Second, Keepalive: backend.Keepalive{Enabled: true, Time: 30 * time.Second, Interval: backend.DefaultKeepalive.Interval, Retries: 3}, IPv4Only: true},
		},
		{
			desc: "disabled",
			tcp:  config.BackendTCP{Keepalives: &config.Keepalive{Enabled: &off}, ConnectTimeout: dur(time.Second)},
			want: backend.Dialing{ConnectTimeout: time.Second, Keepalive: backend.Keepalive{Enabled: false, Time: backend.DefaultKeepalive.Time, Interval: backend.DefaultKeepalive.Interval, Retries: backend.DefaultKeepalive.Retries}, IPv4Only: true},
		},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			if got := backendTCPDialing(&tc.tcp, global); got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

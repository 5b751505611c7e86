package main

import (
	"testing"
	"time"

	"github.com/relaygate/gateway/config"
)

// TestTerminationDeadlines: the drain deadlines' sources and precedence
// (environment, then file, then the Kubernetes grace period less a margin).
func TestTerminationDeadlines(t *testing.T) {
	withFile := &config.File{Config: &config.Settings{
		ConnectionMinTerminationDeadline: &config.Duration{Duration: 2 * time.Second},
		ConnectionTerminationDeadline:    &config.Duration{Duration: 7 * time.Second},
	}}
	tests := []struct {
		desc               string
		file               *config.File
		env                map[string]string
		wantMin, wantGrace time.Duration
	}{
		{desc: "defaults", file: &config.File{}, wantGrace: 5 * time.Second},
		{desc: "file", file: withFile, wantMin: 2 * time.Second, wantGrace: 7 * time.Second},
		{desc: "file wins over the grace period", file: withFile, env: map[string]string{"TERMINATION_GRACE_PERIOD_SECONDS": "30"}, wantMin: 2 * time.Second, wantGrace: 7 * time.Second},
		{desc: "environment wins over the file", file: withFile, env: map[string]string{"CONNECTION_TERMINATION_DEADLINE": "9s", "CONNECTION_MIN_TERMINATION_DEADLINE": "1"}, wantMin: time.Second, wantGrace: 9 * time.Second},
		{desc: "long grace period less 5 s", file: &config.File{}, env: map[string]string{"TERMINATION_GRACE_PERIOD_SECONDS": "30"}, wantGrace: 25 * time.Second},
		{desc: "short grace period less 1 s", file: &config.File{}, env: map[string]string{"TERMINATION_GRACE_PERIOD_SECONDS": "10"}, wantGrace: 9 * time.Second},
		{desc: "at least 1 s", file: &config.File{}, env: map[string]string{"TERMINATION_GRACE_PERIOD_SECONDS": "1"}, wantGrace: time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			for _, name := range []string{"CONNECTION_MIN_TERMINATION_DEADLINE", "CONNECTION_TERMINATION_DEADLINE", "TERMINATION_GRACE_PERIOD_SECONDS"} {
				t.Setenv(name, tc.env[name])
			}
			gotMin, gotGrace := terminationDeadlines(tc.file)
			if gotMin != tc.wantMin || gotGrace != tc.wantGrace {
				t.Errorf("got (%v, %v), want (%v, %v)", gotMin, gotGrace, tc.wantMin, tc.wantGrace)
			}
		})
	}
}

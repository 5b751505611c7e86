package main

import (
	"slices"
	"strings"

	"github.com/relaygate/gateway/config"
)

// secretFlags are the flags whose values may hold secrets: the inline
// config (-c, --config) holds whatever the config file would, such as
// config.session.key and header values set for backends.
var secretFlags = []string{"c", "config"}

// redactArgs returns the command line as the admin server's
// /debug/pprof/cmdline shows it: the value of each secret flag replaced by
// config.Redacted, in every form the flag package reads ("-c v", "--c v",
// "-c=v", "--config=v", ...).
func redactArgs(args []string) []string {
	out := slices.Clone(args)
	for i := 1; i < len(out); i++ {
		a := out[i]
		if a == "--" {
			break // the rest are not flags
		}
		name, ok := strings.CutPrefix(a, "-")
		if !ok {
			continue
		}
		name = strings.TrimPrefix(name, "-")
		name, _, hasValue := strings.Cut(name, "=")
		if !slices.Contains(secretFlags, name) {
			continue
		}
		if hasValue {
			out[i] = a[:strings.IndexByte(a, '=')+1] + config.Redacted
		} else if i+1 < len(out) {
			i++
			out[i] = config.Redacted
		}
	}
	return out
}

// Package examples holds the example configs; the quickstart is embedded in the
// gateway binary as its default config.
package examples

import _ "embed"

// Quickstart is examples/quickstart.yaml, the config `gateway` runs when given
// no -f or -c.
//
//go:embed quickstart.yaml
var Quickstart []byte

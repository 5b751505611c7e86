package admin

import (
	"io"

	"go.uber.org/zap"
)

// Options configures the side servers. Each address is "host:port",
// "unix:/path", or "off" (or "") to disable that server. Nil callbacks are
// allowed: a nil ConfigDump or UIPage leaves its endpoint out (404), a nil
// Metrics serves an empty exposition, and a nil Ready reports ready as soon
// as the readiness server is listening.
type Options struct {
	AdminAddr, StatsAddr, ReadinessAddr string
	Logger                              *zap.Logger

	ConfigDump func() ([]byte, error) // the effective config as JSON, for /config_dump
	UIPage     func() ([]byte, error) // HTML for /ui/
	// LLMProviders is the health of the LLM providers as JSON, for
	// /llm/providers.
	LLMProviders func() ([]byte, error)
	// EvalCEL evaluates the expression of a JSON sample request, for
	// POST /cel (operators trying a rule); nil leaves the endpoint out.
	EvalCEL func(sample []byte) (any, error)
	Metrics func(w io.Writer) // writes Prometheus text for /metrics
	Ready   func() bool       // readiness

	// Cmdline is what /debug/pprof/cmdline shows, one argument per item,
	// in place of the process's whole command line (os.Args, which pprof's
	// own handler shows): the caller hides the values of arguments that
	// may hold secrets, such as an inline config. Nil shows the program
	// name alone.
	Cmdline []string
}

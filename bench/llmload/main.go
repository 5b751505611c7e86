// Command llmload drives the LLM case of bench/run.sh. `llmload check`
// sends one chat completion through a target and asks the emulated provider
// (bench/llmupstream) what reached it, so a run measures a proxy only once
// it is known to do its LLM work (for the gateway: alias, defaults, masking,
// backend key). `llmload rate` sends chat completions at a constant rate
// (open loop, vegeta as a library: wrk2, which does this, is not packaged by
// Debian) and writes the latency percentiles as key=value lines for
// bench/report.
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: llmload check -url URL -upstream URL -body FILE [-key KEY] -expect raw|gateway\n"+
			"       llmload rate -url URL -body FILE [-key KEY] -rate N -duration D [-out FILE]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "check":
		err = runCheck(os.Args[2:])
	case "rate":
		err = runRate(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "llmload:", err)
		os.Exit(1)
	}
}

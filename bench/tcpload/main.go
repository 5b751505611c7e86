// Command tcpload is the load generator of bench/run.sh's connection-layer
// cases.
//
//	tcpload bulk -addr A -bytes N -conns C
//
// opens C connections to A (bench/tcpsink's sink, directly or through a
// proxy) and writes N bytes in all over them as fast as it can, then
// half-closes each and waits for the sink's count of what it read: the run
// lasts from the first dial to the last count, and fails if a count differs
// from what was written.
//
//	tcpload tls -addr A -sni NAME -ca FILE -conns C -duration D
//
// runs C workers for D, each opening connections one after another: a full
// TLS 1.3 handshake with NAME (X25519, no session resumption, the server's
// certificate verified against FILE), then the server's "ok" read to its
// end, then close. It reports the connections completed per second and the
// latency of each (dial to close).
//
// Both print a key=value summary (bench/report reads it).
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: tcpload bulk|tls [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "bulk":
		err = runBulk(os.Args[2:])
	case "tls":
		err = runTLS(os.Args[2:])
	default:
		fmt.Fprintf(os.Stderr, "tcpload: unknown command %q (want bulk or tls)\n", os.Args[1])
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "tcpload: %v\n", err)
		os.Exit(1)
	}
}

// output writes a summary to file, or to standard output if file is "".
func output(file, summary string) error {
	if file == "" {
		_, err := os.Stdout.WriteString(summary)
		return err
	}
	return os.WriteFile(file, []byte(summary), 0o644)
}

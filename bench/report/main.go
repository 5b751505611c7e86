// Command report turns the raw output of one bench/run.sh run (wrk logs,
// RSS samples, machine facts) into the markdown of bench/RESULTS.md.
package main

import (
	"flag"
	"fmt"
	"os"
)

func main() {
	dir := flag.String("dir", "", "run output directory written by bench/run.sh (required)")
	out := flag.String("out", "", "markdown file to write; stdout if empty")
	flag.Parse()
	if *dir == "" {
		fmt.Fprintln(os.Stderr, "report: -dir is required")
		os.Exit(2)
	}
	r, err := loadResults(*dir)
	if err != nil {
		fmt.Fprintf(os.Stderr, "report: %v\n", err)
		os.Exit(1)
	}
	md := r.render()
	if *out == "" {
		_, err = os.Stdout.WriteString(md)
	} else {
		err = os.WriteFile(*out, []byte(md), 0o644)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "report: %v\n", err)
		os.Exit(1)
	}
}

// Command freeport prints free TCP ports on 127.0.0.1, one per line, for the
// benchmark harness (bench/run.sh) to hand to the servers it starts.
package main

import (
	"flag"
	"fmt"
	"os"
)

func main() {
	n := flag.Int("n", 1, "how many distinct ports to print")
	flag.Parse()
	ports, err := freePorts(*n)
	if err != nil {
		fmt.Fprintf(os.Stderr, "freeport: %v\n", err)
		os.Exit(1)
	}
	for _, p := range ports {
		fmt.Println(p)
	}
}

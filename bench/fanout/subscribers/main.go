// Command subscribers is the fan-out benchmarks' load generator: it attaches
// N subscribers to a stream (SSE or WebSocket) and measures what they
// receive, in a process of its own so that the server's CPU is measured
// apart from its clients'. The harness (bench/fanout) runs it and drives it
// over stdin; see fanout.SubscriberMain for the protocol.
package main

import (
	"fmt"
	"os"

	"github.com/getorrery/orrery/bench/fanout"
)

func main() {
	if err := fanout.SubscriberMain(os.Args[1:], os.Stdin, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "fanout-subscribers: %v\n", err)
		os.Exit(1)
	}
}

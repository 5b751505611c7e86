// Command demo-upstream is the small HTTP server `make run` puts behind the
// gateway: it answers every request with a JSON description of what it
// received, so the effect of the gateway (headers added, paths rewritten) is
// visible. GET /events streams a few server-sent events.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"time"

	"github.com/valyala/fasthttp"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:3001", "listen address")
	flag.Parse()
	log.Printf("demo upstream listening on http://%s", *addr)
	if err := fasthttp.ListenAndServe(*addr, handle); err != nil {
		log.Fatal(err)
	}
}

func handle(ctx *fasthttp.RequestCtx) {
	if string(ctx.Path()) == "/events" {
		ctx.SetContentType("text/event-stream")
		ctx.SetBodyStreamWriter(func(w *bufio.Writer) {
			for i := 1; i <= 5; i++ {
				fmt.Fprintf(w, "id: %d\ndata: tick %d\n\n", i, i)
				if w.Flush() != nil {
					return
				}
				time.Sleep(500 * time.Millisecond)
			}
		})
		return
	}
	headers := map[string]string{}
	for k, v := range ctx.Request.Header.All() {
		headers[string(k)] = string(v)
	}
	body, _ := json.MarshalIndent(map[string]any{
		"upstream": "demo",
		"method":   string(ctx.Method()),
		"uri":      string(ctx.RequestURI()),
		"headers":  headers,
		"body":     string(ctx.PostBody()),
	}, "", "  ")
	ctx.Response.Header.Set("X-Demo", "yes")
	ctx.SetContentType("application/json")
	ctx.SetBody(append(body, '\n'))
}

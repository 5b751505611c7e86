package admin

import (
	"io"
	"net/http"
)

// metricsContentType is the Prometheus text exposition format, version 0.0.4.
const metricsContentType = "text/plain; version=0.0.4; charset=utf-8"

// statsHandler routes the stats server: GET /metrics only.
func statsHandler(write func(io.Writer)) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Type", metricsContentType)
		h.Set("Cache-Control", "no-store")
		if write != nil {
			write(w)
		}
	})
	return mux
}

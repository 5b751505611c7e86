package admin

import "net/http"

// readinessHandler routes the readiness server: GET /healthz/ready answers
// 200 "ready" when ready() is true (or ready is nil), else 503 "not ready".
func readinessHandler(ready func() bool) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz/ready", func(w http.ResponseWriter, r *http.Request) {
		if ready == nil || ready() {
			writeBody(w, http.StatusOK, "text/plain; charset=utf-8", []byte("ready"))
			return
		}
		writeBody(w, http.StatusServiceUnavailable, "text/plain; charset=utf-8", []byte("not ready"))
	})
	return mux
}

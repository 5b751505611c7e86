package mcptest

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"
)

// PingingTarget is a hand-written streamable HTTP MCP target (an
// http.Handler) whose standalone GET stream sends a comment every 10 ms,
// as a target's pings do. It counts the GET streams open and ever opened,
// and the DELETEs; it answers initialize with a session id of its own and
// every other request with an empty result.
type PingingTarget struct {
	Open, Opened, Deletes atomic.Int64
	sessions              atomic.Int64
}

func (f *PingingTarget) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet:
		f.Open.Add(1)
		f.Opened.Add(1)
		defer f.Open.Add(-1)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-r.Context().Done():
				return
			case <-tick.C:
				if _, err := io.WriteString(w, ": ping\n\n"); err != nil {
					return
				}
				w.(http.Flusher).Flush()
			}
		}
	case http.MethodDelete:
		f.Deletes.Add(1)
		return
	}
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	data, _ := io.ReadAll(r.Body)
	if json.Unmarshal(data, &msg) != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	if len(msg.ID) == 0 {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	result := any(map[string]any{})
	if msg.Method == "initialize" {
		w.Header().Set("Mcp-Session-Id", "s"+strconv.FormatInt(f.sessions.Add(1), 10))
		result = map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{"tools": map[string]any{}}, "serverInfo": map[string]any{"name": "stream", "version": "1"}}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": msg.ID, "result": result})
}

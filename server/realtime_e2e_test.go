package server

import (
	"bytes"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// realtimeProvider is an OpenAI Realtime API stand-in: it checks the key,
// answers each client event with a long delta and a response.done with
// usage, written in small fragments.
func realtimeProvider(t *testing.T, key string) (addr string, got chan http.Header) {
	got = make(chan http.Header, 4)
	up := websocket.Upgrader{WriteBufferSize: 256}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/realtime" || r.Header.Get("Authorization") != "Bearer "+key {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		got <- r.Header.Clone()
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer c.Close()
		for {
			if _, _, err := c.ReadMessage(); err != nil {
				return
			}
			delta := `{"type":"response.output_text.delta","delta":"` + strings.Repeat("word ", 400) + `"}`
			_ = c.WriteMessage(websocket.TextMessage, []byte(delta))
			_ = c.WriteMessage(websocket.PingMessage, nil)
			done := `{"type":"response.done","response":{"usage":{"input_tokens":40,"output_tokens":12,"input_token_details":{"cached_tokens":8}},"padding":"` + strings.Repeat("x", 600) + `"}}`
			_ = c.WriteMessage(websocket.TextMessage, []byte(done))
		}
	})
	return strings.TrimPrefix(upstream(t, h), "http://"), got
}

// TestLLMRealtime: a realtime WebSocket is tunnelled to the provider with
// the provider's key (the client's is replaced, no compression is
// negotiated), events pass unchanged, and the usage of response.done
// events becomes token metrics.
func TestLLMRealtime(t *testing.T) {
	addr, got := realtimeProvider(t, "provider-key")
	cfg := `
binds:
- port: 8080
  listeners:
  - routes:
    - policies:
        ai: {routes: {/v1/realtime: realtime}}
      backends:
      - ai:
          name: rt
          hostOverride: "` + addr + `"
          provider: {openAI: {}}
          policies: {backendAuth: {key: provider-key}}
`
	tg := startGateway(t, cfg, nil)
	d := websocket.Dialer{EnableCompression: true, HandshakeTimeout: 5 * time.Second}
	hdr := http.Header{"Authorization": {"Bearer client-key"}}
	c, resp, err := d.Dial(strings.Replace(tg.url(8080), "http", "ws", 1)+"/v1/realtime?model=gpt-realtime", hdr)
	if err != nil {
		t.Fatalf("dial: %v (%v)", err, resp)
	}
	defer c.Close()
	seen := <-got
	if seen.Get("Sec-WebSocket-Extensions") != "" {
		t.Errorf("compression offered upstream: %q", seen.Get("Sec-WebSocket-Extensions"))
	}
	for i := 0; i < 2; i++ {
		if err := c.WriteMessage(websocket.TextMessage, []byte(`{"type":"response.create"}`)); err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"response.output_text.delta", "response.done"} {
			_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
			_, msg, err := c.ReadMessage()
			if err != nil || !bytes.Contains(msg, []byte(want)) {
				t.Fatalf("read %d: %v %.80s", i, err, msg)
			}
		}
	}
	c.Close()
	eventually(t, 5*time.Second, "realtime token metrics", func() bool {
		var m bytes.Buffer
		tg.metrics().WritePrometheus(&m)
		for _, line := range strings.Split(m.String(), "\n") {
			if strings.HasPrefix(line, "agentgateway_gen_ai_client_token_usage_sum{") && strings.Contains(line, `gen_ai_operation_name="realtime"`) &&
				strings.Contains(line, `gen_ai_token_type="output"`) && strings.HasSuffix(line, " 24") {
				return true
			}
		}
		return false
	})
}

// TestRealtimeObserverSplits: frames split anywhere give the same usage.
func TestRealtimeObserverSplits(t *testing.T) {
	var frames []byte
	frame := func(fin bool, op byte, payload string) {
		b0 := op
		if fin {
			b0 |= 0x80
		}
		frames = append(frames, b0)
		switch n := len(payload); {
		case n < 126:
			frames = append(frames, byte(n))
		case n < 1<<16:
			frames = append(frames, 126, byte(n>>8), byte(n))
		default:
			frames = append(frames, 127, 0, 0, 0, 0, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
		}
		frames = append(frames, payload...)
	}
	done := `{"type":"response.done","response":{"usage":{"input_tokens":7,"output_tokens":3}}}`
	frame(true, 0x1, `{"type":"session.created"}`)
	frame(false, 0x1, done[:20])
	frame(true, 0x9, "ping") // a control frame inside a fragmented message
	frame(true, 0x0, done[20:])
	frame(true, 0x2, strings.Repeat("\x00", 70000))
	frame(true, 0x1, done)
	for _, step := range []int{1, 2, 3, 7, 64, 1000, len(frames)} {
		acct := &realtimeAccount{}
		o := &realtimeObserver{acct: acct}
		for i := 0; i < len(frames); i += step {
			_, _ = o.Write(frames[i:min(i+step, len(frames))])
		}
		if acct.usage.InputTokens != 14 || acct.usage.OutputTokens != 6 {
			t.Errorf("step %d: usage %+v, want 14 in and 6 out", step, acct.usage)
		}
	}
}

// FuzzRealtimeObserver: any bytes pass through the observer without a
// panic or unbounded growth.
func FuzzRealtimeObserver(f *testing.F) {
	f.Add([]byte{0x81, 0x05, 'h', 'e', 'l', 'l', 'o'}, 3)
	f.Add([]byte{0x81, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 'x'}, 1)
	f.Fuzz(func(t *testing.T, data []byte, step int) {
		if step <= 0 {
			step = 1
		}
		o := &realtimeObserver{acct: &realtimeAccount{}}
		for i := 0; i < len(data); i += step {
			n, _ := o.Write(data[i:min(i+step, len(data))])
			if n != min(step, len(data)-i) {
				t.Fatalf("wrote %d", n)
			}
		}
		if len(o.msg) > maxRealtimeMessage || len(o.head) > 14 {
			t.Fatalf("observer holds %d message bytes, %d header bytes", len(o.msg), len(o.head))
		}
	})
}

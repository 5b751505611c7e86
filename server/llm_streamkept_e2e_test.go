package server

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/relaygate/gateway/backend/llm/convert"
	"github.com/relaygate/gateway/backend/llm/llmtest"
)

// TestLLMResponsesStreamKeepsBoundedAnswer: a Responses client's stream
// repeats the answer in its last event (response.completed carries the
// whole output, as OpenAI's does), so the gateway keeps what it streamed;
// an answer past convert.MaxKeptBytes (32 MiB, the bound on an answer read
// whole) ends with an error event instead of growing the gateway's memory
// with whatever an endless provider stream sends (it used to keep all of
// it: 1.2 GB for 243 MB streamed). A Chat client of the same answer keeps
// nothing and gets it whole.
func TestLLMResponsesStreamKeepsBoundedAnswer(t *testing.T) {
	if testing.Short() {
		t.Skip("streams 33 MiB")
	}
	b := llmtest.NewBedrock(t)
	chunk := strings.Repeat("all work and no play ", 12<<10) // 252 KiB a delta
	chunks := make([]string, convert.MaxKeptBytes/len(chunk)+2)
	for i := range chunks {
		chunks[i] = chunk
	}
	b.SetDefault(llmtest.Reply{Chunks: chunks})
	provider := `bedrock: {region: ` + b.Region + `}`
	auth := `backendAuth: {aws: {accessKeyId: ` + b.AccessKeyID + `, secretAccessKey: ` + b.SecretAccessKey + `}}`
	tg := startGateway(t, llmConfig(provider, b.Addr(), auth, ""), nil)

	for _, tc := range []struct {
		path, body string
		// last is how the client's stream ends.
		last string
	}{
		{"/v1/responses", `{"model":"m","stream":true,"input":"write"}`, `"type":"error"`},
		{"/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"write"}]}`, `[DONE]`},
	} {
		t.Run(tc.path, func(t *testing.T) {
			// 33 MiB translated event by event takes seconds under -race
			// on a busy machine: the wait is bounded by this context,
			// not by testClient's 10 s for the whole exchange.
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, "POST", tg.url(8080)+tc.path, strings.NewReader(tc.body))
			req.Header.Set("Content-Type", "application/json")
			resp, err := (&http.Client{Transport: testClient.Transport}).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("status %d", resp.StatusCode)
			}
			// Read event by event, keeping only the last data line.
			sc := bufio.NewScanner(resp.Body)
			sc.Buffer(nil, 64<<20)
			var last string
			var n int64
			for sc.Scan() {
				n += int64(len(sc.Bytes())) + 1
				if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
					last = d
				}
			}
			if err := sc.Err(); err != nil {
				t.Fatalf("after %d bytes: %v", n, err)
			}
			if len(last) > 1000 {
				last = last[:200] + "..." + last[len(last)-200:]
			}
			if !strings.Contains(last, tc.last) {
				t.Fatalf("%d bytes; the last event is %s, want %s", n, last, tc.last)
			}
			if tc.last == `"type":"error"` && !strings.Contains(last, "32 MiB") {
				t.Errorf("the error does not say why: %s", last)
			}
		})
	}
}

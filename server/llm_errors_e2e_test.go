package server

import (
	"bytes"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// TestLLMClientErrorsUnderLoad: the gateway's own errors in the client's
// format stay whole when many clients get them at once. The body was once
// a pooled buffer handed back before the response was written, so another
// request could overwrite it mid-write (the race detector sees that too).
func TestLLMClientErrorsUnderLoad(t *testing.T) {
	tg := startGateway(t, llmConfig(`openAI: {}`, closedAddr(t), "", ""), nil)
	const clients, each = 16, 25
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				// Bodies of different lengths make different error texts.
				body := `{"model":"m","messages":` + strings.Repeat("[", 1+(c+i)%3)
				resp, err := http.Post(tg.url(8080)+"/v1/chat/completions", "application/json", strings.NewReader(body))
				if err != nil {
					errs <- err
					return
				}
				got, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusBadRequest || !bytes.HasPrefix(got, []byte(`{"error":`)) || !bytes.HasSuffix(bytes.TrimSpace(got), []byte(`}`)) {
					errs <- fmt.Errorf("status %d, body %q", resp.StatusCode, got)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestLLMPassthroughKeepsContentType: a passthrough route type forwards the
// client's body with its own Content-Type (a multipart upload stays
// multipart); JSON route types send application/json.
func TestLLMPassthroughKeepsContentType(t *testing.T) {
	seen := make(chan string, 4)
	up := upstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.URL.Path + " " + r.Header.Get("Content-Type")
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"text":"hello"}`)
	}))
	cfg := strings.Replace(llmConfig(`openAI: {}`, up, "backendAuth: {key: k}", ""), llmRoutes,
		`{"/v1/audio/transcriptions": passthrough, "/v1/chat/completions": completions}`, 1)
	tg := startGateway(t, cfg, nil)

	var form bytes.Buffer
	mw := multipart.NewWriter(&form)
	fw, _ := mw.CreateFormFile("file", "a.wav")
	fw.Write([]byte("RIFF....WAVE"))
	mw.WriteField("model", "whisper-1")
	mw.Close()
	resp, err := http.Post(tg.url(8080)+"/v1/audio/transcriptions", mw.FormDataContentType(), &form)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	if got, want := <-seen, "/v1/audio/transcriptions "+mw.FormDataContentType(); got != want {
		t.Fatalf("the provider got %q, want %q", got, want)
	}
}

package convert

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

func TestMain(m *testing.M) {
	// Deterministic ids and clocks for the golden files.
	var n uint64
	randUint64 = func() uint64 { n++; return n * 0x9e3779b97f4a7c15 }
	nowUnix = func() int64 { return 1767225600 } // 2026-01-01T00:00:00Z
	os.Exit(m.Run())
}

func resetIDs() {
	var n uint64
	randUint64 = func() uint64 { n++; return n * 0x9e3779b97f4a7c15 }
}

// checkGolden compares got with the golden file (rewriting it with -update).
func checkGolden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (run with -update to accept):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

// indent pretty-prints JSON for a golden file; invalid JSON fails the test.
func indent(t *testing.T, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, b)
	}
	out.WriteByte('\n')
	return out.Bytes()
}

func readFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// errorGolden renders a translation error for a golden file.
func errorGolden(err error) []byte {
	e, ok := err.(*Error)
	if !ok {
		return []byte("error: " + err.Error() + "\n")
	}
	b, _ := json.MarshalIndent(map[string]any{"status": e.Status, "error": e.Message}, "", "  ")
	return append(b, '\n')
}

var clientFormats = []Format{Chat, Messages, Responses}
var providerFormats = []Format{Chat, Messages, Gemini, Bedrock}

func TestRequestGolden(t *testing.T) {
	cases := []struct {
		desc, file string
		opts       Options
	}{
		{desc: "chat: system and one user turn", file: "basic.chat.json"},
		{desc: "chat: tools, parallel calls and results, multi-turn, stream", file: "tools.chat.json"},
		{desc: "chat: images as data URL", file: "image-data.chat.json"},
		{desc: "chat: image URL (Bedrock refuses it)", file: "image-url.chat.json"},
		{desc: "chat: reasoning effort, named tool, no parallel calls", file: "reasoning.chat.json", opts: Options{Model: "alias-target"}},
		{desc: "chat: audio part is refused", file: "audio.chat.json"},
		{desc: "messages: system string, defaults", file: "basic.messages.json"},
		{desc: "messages: cache control, tool use and results, thinking, images", file: "tools.messages.json"},
		{desc: "messages: server tool is refused", file: "server-tool.messages.json"},
		{desc: "messages: a tool result with an image (Chat and Gemini refuse it)", file: "tool-result-image.messages.json"},
		{desc: "responses: instructions and input string", file: "basic.responses.json"},
		{desc: "responses: items, calls, outputs, images, stream", file: "tools.responses.json"},
		{desc: "responses: previous_response_id is refused", file: "previous.responses.json"},
		{desc: "responses: a function output with an image (Chat and Gemini refuse it)", file: "tool-result-image.responses.json"},
		{desc: "chat: a Gemini signature in a tool call's extra_content goes to Gemini only", file: "gemini-sigs.chat.json"},
		{desc: "messages: Gemini signatures in thinking blocks go to Gemini only", file: "gemini-sigs.messages.json"},
		{desc: "responses: a Gemini signature in a call_id goes to Gemini only", file: "gemini-sigs.responses.json"},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			in := readFile(t, filepath.Join("testdata/requests", tc.file))
			base := strings.TrimSuffix(tc.file, ".json")
			client, _ := ParseFormat(base[strings.LastIndexByte(base, '.')+1:])
			for _, provider := range providerFormats {
				if provider == client {
					continue
				}
				resetIDs()
				opts := tc.opts
				out, info, err := Request(nil, client, provider, in, &opts)
				var got []byte
				if err != nil {
					got = errorGolden(err)
				} else {
					got = indent(t, out)
					got = append(got, []byte("// info: model="+info.Model+" stream="+boolText(info.Stream)+" include_usage="+boolText(info.IncludeUsage)+" max_tokens="+itoa(info.MaxTokens)+"\n")...)
				}
				checkGolden(t, filepath.Join("testdata/requests", base+"."+provider.String()+".golden"), got)
			}
		})
	}
}

func boolText(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

func itoa(n int) string { return string(appendInt(nil, int64(n))) }

func readFileF(path string) ([]byte, error) { return os.ReadFile(path) }

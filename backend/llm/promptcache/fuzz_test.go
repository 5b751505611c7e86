package promptcache

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/relaygate/gateway/backend/llm/convert"
	"github.com/relaygate/gateway/config"
)

// FuzzApply: whatever the body, Apply does not panic; on a JSON body it
// writes JSON, adds no point beyond the four a request may hold, and a
// second Apply adds nothing.
func FuzzApply(f *testing.F) {
	inputs, _ := filepath.Glob(filepath.Join("testdata", "*.json"))
	for _, path := range inputs {
		body, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(body, formatOf(filepath.Base(path)) == convert.Bedrock, uint8(0x07))
		f.Add(body, formatOf(filepath.Base(path)) == convert.Bedrock, uint8(0x1b))
	}
	f.Add([]byte(`{"system":"s","messages":[{"role":"user","content":"a"},{"content":[]}]}`), false, uint8(0x0f))
	f.Fuzz(func(t *testing.T, body []byte, isBedrock bool, opts uint8) {
		format := convert.Messages
		if isBedrock {
			format = convert.Bedrock
		}
		p := New(&config.PromptCaching{
			CacheSystem: ptr(opts&1 != 0), CacheMessages: ptr(opts&2 != 0), CacheTools: ptr(opts&4 != 0),
			CacheMessageOffset: ptr(int(opts>>3) & 3), MinTokens: ptr(0),
		})
		out, err := p.Apply(nil, body, format)
		if err != nil || !json.Valid(body) {
			return
		}
		if !json.Valid(out) {
			t.Fatalf("output is not JSON:\n%s\nfrom\n%s", out, body)
		}
		before, after := points(body, format), points(out, format)
		if after > max(before, maxBreakpoints) {
			t.Fatalf("%d points after Apply (%d before):\n%s", after, before, out)
		}
		again, err := p.Apply(nil, out, format)
		if err != nil || string(again) != string(out) {
			t.Fatalf("a second Apply changed the body (%v):\n%s\nto\n%s", err, out, again)
		}
	})
}

// points counts a body's cache points as Apply does (0 for a body that
// names a section twice).
func points(body []byte, f convert.Format) int {
	var d dialect = anthropic{}
	if f == convert.Bedrock {
		d = bedrock{}
	}
	var r request
	if unique, err := r.read(body, d); err != nil || !unique {
		return 0
	}
	s := tally(r.system, d.mark(), 0).marks
	m := tally(r.messages, d.mark(), 0).marks
	tl := tally(r.toolsSection, d.mark(), 0).marks
	return s + m + tl + r.marks
}

package promptcache

import (
	"strconv"
	"strings"
	"testing"

	"github.com/relaygate/gateway/backend/llm/convert"
	"github.com/relaygate/gateway/config"
)

// conversationBody is a request of format f: a system prompt, two tools
// and turns user/assistant messages, about 5 KB for 6 turns.
func conversationBody(f convert.Format, turns int) []byte {
	var b strings.Builder
	text := func(s string) string {
		if f == convert.Bedrock {
			return `[{"text":"` + s + `"}]`
		}
		return `[{"type":"text","text":"` + s + `"}]`
	}
	if f == convert.Bedrock {
		b.WriteString(`{"inferenceConfig":{"maxTokens":1024},"system":` + text(words(300)) + `,"toolConfig":{"tools":[`)
		b.WriteString(`{"toolSpec":{"name":"search","description":"Searches the web","inputSchema":{"json":{"type":"object","properties":{"q":{"type":"string"}}}}}},`)
		b.WriteString(`{"toolSpec":{"name":"fetch","description":"Fetches a page","inputSchema":{"json":{"type":"object"}}}}]},"messages":[`)
	} else {
		b.WriteString(`{"model":"claude-sonnet-4-5","max_tokens":1024,"system":` + text(words(300)) + `,"tools":[`)
		b.WriteString(`{"name":"search","description":"Searches the web","input_schema":{"type":"object","properties":{"q":{"type":"string"}}}},`)
		b.WriteString(`{"name":"fetch","description":"Fetches a page","input_schema":{"type":"object"}}],"messages":[`)
	}
	for i := range turns {
		if i > 0 {
			b.WriteByte(',')
		}
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		b.WriteString(`{"role":"` + role + `","content":` + text(words(40)) + `}`)
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}

// TestApplyAllocations: Apply allocates nothing, whether it leaves the
// body alone (another format, a prompt under minTokens) or adds points into
// a buffer that has room.
func TestApplyAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	for _, f := range []convert.Format{convert.Messages, convert.Bedrock} {
		body := conversationBody(f, 6)
		tests := []struct {
			desc   string
			policy *Policy
			f      convert.Format
			grows  bool
		}{
			{"another format", New(nil), convert.Chat, false},
			{"under minTokens", New(nil), f, false},
			{"points added", New(&config.PromptCaching{CacheTools: ptr(true), MinTokens: ptr(0)}), f, true},
		}
		for _, tt := range tests {
			t.Run(f.String()+"/"+tt.desc, func(t *testing.T) {
				dst := make([]byte, 0, len(body)+256)
				out, err := tt.policy.Apply(dst, body, tt.f)
				if err != nil || (len(out) > len(body)) != tt.grows {
					t.Fatalf("Apply: %d bytes from %d, %v", len(out), len(body), err)
				}
				if n := testing.AllocsPerRun(100, func() { _, _ = tt.policy.Apply(dst, body, tt.f) }); n != 0 {
					t.Errorf("%v allocations, want 0", n)
				}
			})
		}
	}
}

func BenchmarkApply(b *testing.B) {
	under, over := New(nil), New(&config.PromptCaching{CacheTools: ptr(true), MinTokens: ptr(0)})
	for _, f := range []convert.Format{convert.Messages, convert.Bedrock} {
		for _, turns := range []int{6, 60} {
			body := conversationBody(f, turns)
			dst := make([]byte, 0, len(body)+256)
			for _, bc := range []struct {
				name string
				p    *Policy
				f    convert.Format
			}{{"other-format", under, convert.Chat}, {"unchanged", under, f}, {"added", over, f}} {
				if bc.name == "unchanged" && turns > 6 {
					continue // that prompt is over minTokens
				}
				b.Run(f.String()+"/"+bc.name+"/"+sizeName(len(body)), func(b *testing.B) {
					b.ReportAllocs()
					b.SetBytes(int64(len(body)))
					for b.Loop() {
						if _, err := bc.p.Apply(dst, body, bc.f); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		}
	}
}

func sizeName(n int) string { return strconv.Itoa(n>>10) + "KB" }

// BenchmarkCountWords: the estimate's word count, over a string token's
// inner text with a few escapes.
func BenchmarkCountWords(b *testing.B) {
	s := []byte(words(400) + `\nand more text\twith escapes \u00e9`)
	b.SetBytes(int64(len(s)))
	b.ReportAllocs()
	for b.Loop() {
		_ = countWords(s)
	}
}

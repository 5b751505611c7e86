package convert

import (
	"encoding/json"
	"testing"

	"github.com/relaygate/gateway/backend/llm/guard"
)

// TestJSONMaskPieces: a tool call's arguments cut anywhere (inside a
// string, an escape, a surrogate pair, a UTF-8 sequence) mask to the same
// JSON as whole, valid, with every string's text masked as Mask does.
func TestJSONMaskPieces(t *testing.T) {
	g := testGuard(t)
	docs := []struct{ in, want string }{
		{`{"to":"bob@example.com","card":"4111 1111 1111 1111"}`,
			`{"to":"<EMAIL_ADDRESS>","card":"<CREDIT_CARD>"}`},
		{`{"n": 4111111111111111, "a": ["x\nbob@example.com\"", "\u0034111111111111111"], "bob@example.com": {"é": "\ud83d\ude00 123-45-6789"}}`,
			`{"n": 4111111111111111, "a": ["x\n<EMAIL_ADDRESS>\"", "<CREDIT_CARD>"], "<EMAIL_ADDRESS>": {"é": "😀 <SSN>"}}`},
		{`{"lone":"\ud83d x","bad":"\q","s":"\/"}`, `{"lone":"� x","bad":"\\q","s":"/"}`},
	}
	for _, d := range docs {
		whole := pieces(g, d.in, len(d.in), len(d.in))
		if whole != d.want {
			t.Errorf("whole %s\n got %s\nwant %s", d.in, whole, d.want)
		}
		if !json.Valid([]byte(whole)) {
			t.Errorf("%s: not JSON", whole)
		}
		for i := 0; i <= len(d.in); i++ {
			for j := i; j <= len(d.in); j++ {
				if got := pieces(g, d.in, i, j); got != whole {
					t.Fatalf("%s cut at %d and %d:\n got %s\nwant %s", d.in, i, j, got, whole)
				}
			}
		}
	}
}

func pieces(g *guard.Guard, doc string, i, j int) string {
	sm := g.NewStreamMasker()
	var out []byte
	var js jsonMask
	sc := jsonScratch{m: sm, out: &out}
	var got []byte
	for _, p := range []string{doc[:i], doc[i:j], doc[j:]} {
		got = js.write(got, sc, []byte(p))
	}
	return string(js.finish(got, sc))
}

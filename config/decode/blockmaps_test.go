package decode

import (
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/lexer"
	"github.com/goccy/go-yaml/parser"
	"github.com/goccy/go-yaml/token"
)

// blockMapSeeds are documents whose block mappings checkBlockMaps must
// follow as the parser does: keys after their mapping's values on later
// lines, anchors, tags, aliases and ? keys, flow collections around and
// inside block mappings.
var blockMapSeeds = []string{
	"a: 1\nb: 2\nc: 3\n",
	"a:\n  b: 1\n  c: 2\nd: 3\ne:\n- f: 1\n  g: 2\n- h: 3\n",
	"- a: 1\n  b: 2\n- a: 1\n  b: 2\n",
	"a: [1,\n2]\nb: {c: 1,\n  d: 2}\ne: 3\n",
	"a: [\n ]\nb: 1\n",
	"[\na: 1\nb: 2\n]\n",
	"{x:\n  a: 1\n  b: 2\n}\n",
	"&x a: 1\n!!str b: 2\nc: 3\n*x : 4\n",
	"!!str &y a: 1\n&z !!str b: 2\n",
	"? a\n: 1\n? b\n: 2\nc: 3\n",
	"? a\n? b\nc: 3\n",
	"a: &x\nb: 1\nc: *x\n",
	"p:\n  a: &x\nq: 1\n",
	"p:\n  - &x\nq: 1\n",
	"a: |\n  text: 1\n  more: 2\nb: >\n  x\nc: 3\n",
	"a: !!map\n  b: 1\n  c: 2\nd: 3\n",
	"a: \"x\n  y\"\nb: 'p\n  q'\nc: 3\n",
	"a: 1 # c\n# d\nb: 2\n",
	"--- \na: 1\nb: 2\n---\nc: 3\n",
	"a:\n- 1\nb:\n- 2\nc: 3\n",
	"a:\n  b: 1\n c: 2\n",
	"  a: !!map\nb: 1\n  c: 2\n",
	"{\"a\": 1,\n \"b\": 2,\n \"c\": {\"d\": [1, 2]}}\n",
	"a: 1\n<<: {b: 2}\nc: 3\n",
}

// TestBlockMapChains checks checkBlockMaps against the parser: the keys of
// each block mapping the parser builds were counted in one mapping. Beyond
// the seeds it tries documents made of random lines of YAML's pieces at
// random indentation, most of which the parser reads.
func TestBlockMapChains(t *testing.T) {
	for _, doc := range blockMapSeeds {
		checkChains(t, doc)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	pick := func(xs ...string) string { return xs[rng.IntN(len(xs))] }
	n := 50000
	if testing.Short() {
		n = 5000
	}
	for range n {
		var b strings.Builder
		indent := 0
		for range 2 + rng.IntN(10) {
			if rng.IntN(3) == 0 {
				indent = rng.IntN(7)
			}
			b.WriteString(strings.Repeat(" ", indent))
			switch rng.IntN(10) {
			case 0:
				b.WriteString(pick("- ", "- - ", "-") + pick("", "1", "&a", "!!map", "*a", "[1,", "{x: 1}", "|", "k: v"))
			case 1:
				b.WriteString(pick("# c", "---", "2]", "}", "text: 1", "]", "...", "x"))
			default:
				b.WriteString(pick("", "", "- ", "&a ", "!!str ", "? ", "!t ", "*a ", "&b !!str "))
				b.WriteString(pick("a", "b", "c", "\"q\"", "<<"))
				b.WriteString(pick(":", ":", ": ", "\n:"))
				b.WriteString(pick("", "", " 1", " &a", " !!map", " *a", " [1,", " {x: 1}", " |", " >", " \"q\"", " &a !!map", " # c", " {", " ["))
			}
			b.WriteByte('\n')
		}
		checkChains(t, b.String())
	}
}

// FuzzBlockMapChains: on any input the parser reads, every block mapping's
// keys were counted in one mapping of checkBlockMaps, so that no document
// makes the parser recurse deeper than counted.
func FuzzBlockMapChains(f *testing.F) {
	for _, doc := range blockMapSeeds {
		f.Add(doc)
	}
	f.Fuzz(func(t *testing.T, doc string) {
		if len(doc) > 4096 {
			return
		}
		checkChains(t, doc)
	})
}

func checkChains(t *testing.T, doc string) {
	t.Helper()
	tks := lexer.Tokenize(doc)
	if tks.InvalidToken() != nil {
		return
	}
	type pos struct{ line, col int }
	ids := map[pos]int{}
	fe := checkBlockMaps(tks, func(tk *token.Token, id int) {
		ids[pos{tk.Position.Line, tk.Position.Column}] = id
	})
	f, err := parse2(doc)
	if err != nil || fe != nil {
		return
	}
	var v chainVisitor
	for _, d := range f.Docs {
		if d.Body != nil {
			ast.Walk(&v, d.Body)
		}
	}
	for _, m := range v.maps {
		first := -1
		for _, mv := range m.Values {
			p := mv.Key.GetToken().Position
			id, ok := ids[pos{p.Line, p.Column}]
			if !ok {
				t.Fatalf("%q: key at %d:%d of the mapping at %d:%d not counted", doc, p.Line, p.Column, m.GetToken().Position.Line, m.GetToken().Position.Column)
			}
			if first == -1 {
				first = id
			} else if id != first {
				t.Fatalf("%q: key at %d:%d counted apart from the first of its mapping", doc, p.Line, p.Column)
			}
		}
	}
}

// parse2 parses doc as parse does, without the bounds, from fresh tokens.
func parse2(doc string) (f *ast.File, err error) {
	defer func() {
		if r := recover(); r != nil {
			f, err = nil, errPanic
		}
	}()
	return parser.Parse(lexer.Tokenize(doc), 0, parser.AllowDuplicateMapKey())
}

var errPanic = &FieldError{Msg: "panic"}

// chainVisitor collects the block mappings of more than one key.
type chainVisitor struct{ maps []*ast.MappingNode }

func (v *chainVisitor) Visit(n ast.Node) ast.Visitor {
	if m, ok := n.(*ast.MappingNode); ok && !m.IsFlowStyle && len(m.Values) > 1 {
		v.maps = append(v.maps, m)
	}
	return v
}

// TestBlockMapBounds: the keys past the first bigMapFrom of block
// mappings are bounded over the document; flow mappings are not.
func TestBlockMapBounds(t *testing.T) {
	keys := func(n int, indent string) string {
		var b strings.Builder
		for i := range n {
			b.WriteString(indent + "k" + strconv.Itoa(i) + ": 1\n")
		}
		return b.String()
	}
	for _, tc := range []struct {
		desc, doc string
		want      string // "" when accepted
	}{
		{"one mapping at the bound", keys(bigMapFrom+maxBigMapKeys, ""), ""},
		{"one mapping past the bound", keys(bigMapFrom+maxBigMapKeys+1, ""), "block mappings too large"},
		{"many mappings of bigMapFrom keys", strings.Repeat("- "+strings.TrimPrefix(keys(bigMapFrom, "  "), "  "), 200), ""},
		{"mappings past bigMapFrom add up", strings.Repeat("- "+strings.TrimPrefix(keys(bigMapFrom+maxBigMapKeys/4+1, "  "), "  "), 4), "block mappings too large"},
		{"a flow mapping is not a block mapping", "{" + strings.ReplaceAll(strings.TrimSuffix(keys(3*maxBigMapKeys, ""), "\n"), "\n", ",\n") + "}\n", ""},
		{"a tag's node left of its mapping", "a:\n  b: !!map\nc: 1\n", "syntax error: value indented less than the mapping it is in"},
		{"an anchored null", "a:\n  b: &x\nc: 1\n", ""},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			fe := checkBlockMaps(lexer.Tokenize(tc.doc), nil)
			switch {
			case tc.want == "" && fe != nil:
				t.Fatalf("refused: %v", fe)
			case tc.want != "" && (fe == nil || !strings.Contains(fe.Msg, tc.want)):
				t.Fatalf("got %v, want %q", fe, tc.want)
			}
		})
	}
}

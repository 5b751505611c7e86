package decode_test

import (
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/relaygate/gateway/config/decode"
)

// capture keeps the node it is decoded from.
type capture struct{ n *decode.Node }

func (c *capture) DecodeNode(n *decode.Node) { c.n = n }

func parseNode(t *testing.T, doc string) *decode.Node {
	t.Helper()
	var c capture
	if errs := decode.YAML([]byte(doc), &c); errs != nil {
		t.Fatalf("decode: %v", errs)
	}
	return c.n
}

func TestNodeAccessors(t *testing.T) {
	root := parseNode(t, "base: &b {x: 1, y: 2}\nm:\n  z: 0\n  <<: *b\n  y: 3\nl: [a, 2, 2.5, true, ~, 99999999999999999999]\nbig: 18446744073709551615\n")
	cases := []struct {
		desc string
		got  any
		want any
	}{
		{"root kind", root.Kind(), decode.Map},
		{"root path", root.Path(), ""},
		{"keys in document order", root.Keys(), []string{"base", "m", "l", "big"}},
		{"merged keys at the position of <<, explicit keys win", root.Get("m").Keys(), []string{"z", "x", "y"}},
		{"explicit value over merged", root.Get("m").Get("y").Value(), int64(3)},
		{"merged value path", root.Get("m").Get("x").Path(), "m.x"},
		{"merged value position is its definition", [2]int{root.Get("m").Get("x").Line(), root.Get("m").Get("x").Col()}, [2]int{1, 14}},
		{"missing key", root.Get("nope") == nil, true},
		{"Get on a non-map", root.Get("l").Get("x") == nil, true},
		{"list length", root.Get("l").Len(), 6},
		{"item path", root.Get("l").Items()[1].Path(), "l[1]"},
		{"item kinds", kinds(root.Get("l").Items()), []decode.Kind{decode.String, decode.Int, decode.Float, decode.Bool, decode.Null, decode.Float}},
		{"Describe", describe(root.Get("l").Items()), []string{`string "a"`, "integer 2", "number 2.5", "boolean true", "null", "number 99999999999999999999"}},
		{"big integer value", root.Get("big").Value(), uint64(math.MaxUint64)},
		{"big integer does not fit Int", second(root.Get("big").Int()), false},
		{"big integer as Float", first(root.Get("big").Float()), float64(math.MaxUint64)},
		{"String on a string", first(root.Get("l").Items()[0].String()), "a"},
		{"String on an int", second(root.Get("l").Items()[1].String()), false},
		{"Int", first(root.Get("l").Items()[1].Int()), int64(2)},
		{"Float from an int", first(root.Get("l").Items()[1].Float()), 2.0},
		{"Bool", first(root.Get("l").Items()[3].Bool()), true},
		{"Items on a map", root.Items() == nil, true},
		{"Keys on a list", root.Get("l").Keys() == nil, true},
		{"generic value", root.Get("base").Value(), map[string]any{"x": int64(1), "y": int64(2)}},
		{"Kind.String", []string{decode.Null.String(), decode.Float.String(), decode.List.String()}, []string{"null", "number", "list"}},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			if !reflect.DeepEqual(tc.got, tc.want) {
				t.Errorf("got %#v, want %#v", tc.got, tc.want)
			}
		})
	}
}

func first[A, B any](a A, _ B) A  { return a }
func second[A, B any](_ A, b B) B { return b }

func kinds(ns []*decode.Node) []decode.Kind {
	var ks []decode.Kind
	for _, n := range ns {
		ks = append(ks, n.Kind())
	}
	return ks
}

func describe(ns []*decode.Node) []string {
	var ds []string
	for _, n := range ns {
		ds = append(ds, n.Describe())
	}
	return ds
}

func TestNilNode(t *testing.T) {
	var n *decode.Node
	if n.Kind() != decode.Null || n.Path() != "" || n.Line() != 0 || n.Col() != 0 || n.Len() != 0 ||
		n.Get("x") != nil || n.Items() != nil || n.Keys() != nil || n.Value() != nil || n.Describe() != "null" {
		t.Error("nil node accessors")
	}
	if _, ok := n.String(); ok {
		t.Error("nil node String ok")
	}
	var out int
	if !n.Decode(&out) || out != 0 {
		t.Error("nil node Decode")
	}
	n.Errorf("ignored")
	n.ErrorfAt("x", "ignored")
}

// helpersUser exercises the error helpers from a DecodeNode method.
type helpersUser struct{}

func (h *helpersUser) DecodeNode(n *decode.Node) {
	n.ErrorfAt("a.b[1]", "deep")
	n.ErrorfAt("a.missing.x", "missing")
	n.ErrorfAt(`a["k.y"]`, "quoted")
	n.ErrorfAt("", "self")
	n.Get("a").Errorf("at a %d", 1)
	n.Get("a").Expect(decode.String, decode.List)
	n.Get("n").Expect(decode.Float)
	n.Get("a").OneOf("b", "k.y")
	var notPtr int
	n.Get("n").Decode(notPtr)
}

func TestNodeErrorHelpers(t *testing.T) {
	doc := "a:\n  b: [x, y]\n  k.y: 1\nn: 5\n"
	errs := decode.YAML([]byte(doc), new(helpersUser))
	want := []string{
		`(root): self (line 1:1)`,
		`a: at a 1 (line 2:3)`,
		`a: expected string or list, got map (line 2:3)`,
		`a: exactly one of b, k.y is required, got b, k.y (line 2:3)`,
		`a.missing.x: missing (line 2:3)`,
		`a.b[1]: deep (line 2:10)`,
		`a["k.y"]: quoted (line 3:8)`,
		`n: decode: out must be a non-nil pointer, got int (line 4:4)`,
	}
	var got []string
	for _, e := range errs {
		got = append(got, e.Error())
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestFieldErrorFormat(t *testing.T) {
	cases := []struct {
		desc string
		err  *decode.FieldError
		want string
	}{
		{"root without position", &decode.FieldError{Msg: "m"}, "(root): m"},
		{"path with position", &decode.FieldError{Path: "a[0]", Msg: "m", Line: 3, Col: 7}, "a[0]: m (line 3:7)"},
		{"line without column", &decode.FieldError{Path: "a", Msg: "m", Line: 3}, "a: m (line 3)"},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			if got := tc.err.Error(); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
	var none decode.Errors
	if none.Err() != nil {
		t.Error("empty Errors.Err() is not nil")
	}
	two := decode.Errors{{Path: "a", Msg: "x", Line: 1}, {Path: "b", Msg: "y"}}
	if two.Err() == nil || two.Error() != "a: x (line 1)\nb: y" {
		t.Errorf("Errors.Error() = %q", two.Error())
	}
}

func TestErrorLimit(t *testing.T) {
	var b strings.Builder
	b.WriteString("l:\n")
	for range 1500 {
		b.WriteString("- x\n")
	}
	errs := decode.YAML([]byte(b.String()), new(scalars))
	if len(errs) != 1001 {
		t.Fatalf("got %d errors, want 1000 and a summary", len(errs))
	}
	if got := errs[1000].Error(); got != "(root): too many errors; 500 more not shown" {
		t.Errorf("summary = %q", got)
	}
	if got := errs[999].Path; got != "l[999]" {
		t.Errorf("last listed error at %q", got)
	}
}

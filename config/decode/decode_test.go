package decode_test

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/relaygate/gateway/config/decode"
)

type scalars struct {
	I    int             `json:"i,omitempty"`
	I8   int8            `json:"i8,omitempty"`
	U8   uint8           `json:"u8,omitempty"`
	U    uint            `json:"u,omitempty"`
	I64  int64           `json:"i64,omitempty"`
	U64  uint64          `json:"u64,omitempty"`
	F    float64         `json:"f,omitempty"`
	F32  float32         `json:"f32,omitempty"`
	B    bool            `json:"b,omitempty"`
	S    string          `json:"s,omitempty"`
	D    time.Duration   `json:"d,omitempty"`
	P    *int            `json:"p,omitempty"`
	L    []int           `json:"l,omitempty"`
	A    [2]int          `json:"a,omitempty"`
	M    map[string]int  `json:"m,omitempty"`
	Any  any             `json:"any,omitempty"`
	Addr netip.Addr      `json:"addr,omitempty"`
	Raw  json.RawMessage `json:"raw,omitempty"`
	Skip string          `json:"-"`
	Go   string          // no tag: the Go name is the key
}

type ruled struct {
	Req   string         `json:"req" cfg:"required"`
	Min   int            `json:"min" cfg:"min=1"`
	Max   uint16         `json:"max" cfg:"max=1000"`
	Ratio *float64       `json:"ratio" cfg:"min=0.5, max=1.5"`
	Name  string         `json:"name" cfg:"minLen=2,maxLen=4"`
	Items []string       `json:"items" cfg:"minItems=1,maxItems=2"`
	Set   map[string]int `json:"set" cfg:"maxItems=1"`
	Mode  string         `json:"mode" cfg:"enum=fast|slow|auto,later=warp"`
	ID    string         `json:"id" cfg:"pattern=^[a-z]{2,3}$"`
	Wait  time.Duration  `json:"wait" cfg:"min=1s,max=1m"`
	Ptr   *int           `json:"ptr" cfg:"required,max=5"`
}

type badTag struct {
	A string `json:"a" cfg:"min=1"`
}

// looping decodes its own node into its own type: a programming error the
// decoder must survive.
type looping struct{}

func (l *looping) DecodeNode(n *decode.Node) { n.Decode(l) }

// hinted explains its key "timeout" (decode.FieldHinter).
type hinted struct {
	Retry int `json:"retry,omitempty"`
}

func (*hinted) UnknownFieldHint(key string) string {
	if key == "timeout" {
		return `"timeout" belongs elsewhere`
	}
	return ""
}

type hintedOuter struct {
	Inner hinted `json:"inner"`
}

type hintedEmbedding struct {
	Name string `json:"name"`
	hinted
}

func TestErrors(t *testing.T) {
	cases := []struct {
		desc string
		doc  string
		into func() any
		want []string
	}{
		// Unknown fields.
		{
			desc: "unknown field with suggestion",
			doc:  "binds:\n- port: 80\n  listeners:\n  - hostnmes: [a]\n",
			into: func() any { return new(gwConfig) },
			want: []string{`binds[0].listeners[0].hostnmes: unknown field "hostnmes" (did you mean "hostnames"?) (line 4:5)`},
		},
		{
			desc: "unknown field differing in case suggests the right case",
			doc:  "Binds: []\n",
			into: func() any { return new(gwConfig) },
			want: []string{`Binds: unknown field "Binds" (did you mean "binds"?) (line 1:1)`},
		},
		{
			desc: "unknown field without a close name",
			doc:  "completelydifferent: 1\n",
			into: func() any { return new(gwConfig) },
			want: []string{`completelydifferent: unknown field "completelydifferent" (line 1:1)`},
		},
		{
			desc: "json:\"-\" field is unknown",
			doc:  "Skip: x\n",
			into: func() any { return new(scalars) },
			want: []string{`Skip: unknown field "Skip" (line 1:1)`},
		},
		{
			desc: "a FieldHinter explains a key",
			doc:  "inner: {timeout: 1}\n",
			into: func() any { return new(hintedOuter) },
			want: []string{`inner.timeout: "timeout" belongs elsewhere (line 1:9)`},
		},
		{
			desc: "a FieldHinter's promoted method explains a key of the embedding struct",
			doc:  "name: a\ntimeout: 1\n",
			into: func() any { return new(hintedEmbedding) },
			want: []string{`timeout: "timeout" belongs elsewhere (line 2:1)`},
		},
		{
			desc: "a key a FieldHinter does not explain is an unknown field",
			doc:  "inner: {retyr: 1}\n",
			into: func() any { return new(hintedOuter) },
			want: []string{`inner.retyr: unknown field "retyr" (did you mean "retry"?) (line 1:9)`},
		},
		// Kinds.
		{
			desc: "string for integer",
			doc:  "i: abc\n",
			into: func() any { return new(scalars) },
			want: []string{`i: expected integer, got string "abc" (line 1:4)`},
		},
		{
			desc: "quoted digits are not an integer",
			doc:  `i: "123"`,
			into: func() any { return new(scalars) },
			want: []string{`i: expected integer, got string "123" (line 1:4)`},
		},
		{
			desc: "float with fraction for integer",
			doc:  "i: 1.5\n",
			into: func() any { return new(scalars) },
			want: []string{`i: expected integer, got number 1.5 (line 1:4)`},
		},
		{
			desc: "a number of 100,000 digits is shown cut",
			doc:  "i: " + strings.Repeat("9", 100000) + "\n",
			into: func() any { return new(scalars) },
			want: []string{`i: expected integer, got number ` + strings.Repeat("9", 128) + `... (100000 bytes) (line 1:4)`},
		},
		{
			desc: "integer out of range for int8",
			doc:  "i8: 300\n",
			into: func() any { return new(scalars) },
			want: []string{`i8: integer 300 is out of range [-128, 127] (line 1:5)`},
		},
		{
			desc: "negative for unsigned",
			doc:  "u8: -1\n",
			into: func() any { return new(scalars) },
			want: []string{`u8: integer -1 is out of range [0, 255] (line 1:5)`},
		},
		{
			desc: "beyond int64",
			doc:  "i64: 9223372036854775808\n",
			into: func() any { return new(scalars) },
			want: []string{`i64: integer 9223372036854775808 is out of range [-9223372036854775808, 9223372036854775807] (line 1:6)`},
		},
		{
			desc: "beyond uint64",
			doc:  "u64: 18446744073709551616\n",
			into: func() any { return new(scalars) },
			want: []string{`u64: number 18446744073709551616 is out of range [0, 18446744073709551615] (line 1:6)`},
		},
		{
			desc: "integral float beyond int range",
			doc:  "i8: 1e3\n",
			into: func() any { return new(scalars) },
			want: []string{`i8: number 1e3 is out of range [-128, 127] (line 1:5)`},
		},
		{
			desc: "infinity for integer",
			doc:  "i: .inf\n",
			into: func() any { return new(scalars) },
			want: []string{`i: expected integer, got number .inf (line 1:4)`},
		},
		{
			desc: "leading zero integer is ambiguous",
			doc:  "i: 0755\n",
			into: func() any { return new(scalars) },
			want: []string{`i: integer 0755 has a leading zero; write 755 (decimal) or 0o755 (octal) (line 1:4)`},
		},
		{
			desc: "float32 overflow",
			doc:  "f32: 1e39\n",
			into: func() any { return new(scalars) },
			want: []string{`f32: number 1e39 is out of range for a 32-bit float (line 1:6)`},
		},
		{
			desc: "string for float",
			doc:  "f: '1.5'\n",
			into: func() any { return new(scalars) },
			want: []string{`f: expected number, got string "1.5" (line 1:4)`},
		},
		{
			desc: "yes is not a boolean",
			doc:  "b: yes\n",
			into: func() any { return new(scalars) },
			want: []string{`b: expected boolean, got string "yes" (line 1:4)`},
		},
		{
			desc: "integer for boolean",
			doc:  "b: 1\n",
			into: func() any { return new(scalars) },
			want: []string{`b: expected boolean, got integer 1 (line 1:4)`},
		},
		{
			desc: "integer for string",
			doc:  "s: 80\n",
			into: func() any { return new(scalars) },
			want: []string{`s: expected string, got integer 80 (line 1:4)`},
		},
		{
			desc: "boolean for string",
			doc:  "s: true\n",
			into: func() any { return new(scalars) },
			want: []string{`s: expected string, got boolean true (line 1:4)`},
		},
		{
			desc: "long strings are shortened in messages",
			doc:  "i: " + strings.Repeat("x", 50) + "\n",
			into: func() any { return new(scalars) },
			want: []string{`i: expected integer, got string "` + strings.Repeat("x", 37) + `..." (line 1:4)`},
		},
		{
			desc: "map for list",
			doc:  "l: {a: 1}\n",
			into: func() any { return new(scalars) },
			want: []string{`l: expected list, got map (line 1:4)`},
		},
		{
			desc: "list for map",
			doc:  "m: [1]\n",
			into: func() any { return new(scalars) },
			want: []string{`m: expected map, got list (line 1:4)`},
		},
		{
			desc: "top level must be a map for a struct",
			doc:  "- a\n- b\n",
			into: func() any { return new(gwConfig) },
			want: []string{`(root): expected map, got list (line 1:1)`},
		},
		{
			desc: "top level scalar for a struct",
			doc:  "hello\n",
			into: func() any { return new(gwConfig) },
			want: []string{`(root): expected map, got string "hello" (line 1:1)`},
		},
		{
			desc: "array length",
			doc:  "a: [1, 2, 3]\n",
			into: func() any { return new(scalars) },
			want: []string{`a: expected a list of 2 items, got 3 (line 1:4)`},
		},
		{
			desc: "errors inside list and map values",
			doc:  "l: [1, x, 3, y]\nm:\n  a: 1\n  b.c: z\n",
			into: func() any { return new(scalars) },
			want: []string{
				`l[1]: expected integer, got string "x" (line 1:8)`,
				`l[3]: expected integer, got string "y" (line 1:14)`,
				`m["b.c"]: expected integer, got string "z" (line 4:8)`,
			},
		},
		{
			desc: "duration needs a unit",
			doc:  "d: 10\n",
			into: func() any { return new(scalars) },
			want: []string{`d: expected duration such as "10s" or "1m30s", got integer 10 (line 1:4)`},
		},
		{
			desc: "bad duration string",
			doc:  "d: 10 parsecs\n",
			into: func() any { return new(scalars) },
			want: []string{`d: expected duration such as "10s" or "1m30s", got string "10 parsecs" (line 1:4)`},
		},
		{
			desc: "text unmarshaler error",
			doc:  "addr: 300.1.1.1\n",
			into: func() any { return new(scalars) },
			want: []string{`addr: invalid value "300.1.1.1": ParseAddr("300.1.1.1"): IPv4 field has value >255 (line 1:7)`},
		},
		// Rules.
		{
			desc: "required fields absent",
			doc:  "min: 1\n",
			into: func() any { return new(ruled) },
			want: []string{`ptr: required (line 1:1)`, `req: required (line 1:1)`},
		},
		{
			desc: "null list items and map values only where the type can be nil",
			doc:  "binds: [null, {port: 1, listeners: [~]}]\nlabels: {a: null}\nany: [null, {x: null}]\nptrs: [null]\n",
			into: func() any {
				return new(struct {
					Binds  []gwBind          `json:"binds"`
					Labels map[string]string `json:"labels"`
					Any    []any             `json:"any"`
					Ptrs   []*gwBind         `json:"ptrs"`
				})
			},
			want: []string{`binds[0]: must not be null (line 1:9)`, `binds[1].listeners[0]: must not be null (line 1:37)`, `labels.a: must not be null (line 2:13)`},
		},
		{
			desc: "required field null",
			doc:  "req: null\nptr: ~\n",
			into: func() any { return new(ruled) },
			want: []string{`req: required (line 1:6)`, `ptr: required (line 2:6)`},
		},
		{
			desc: "every rule violated",
			doc: strings.Join([]string{
				"req: x",
				"ptr: 6",
				"min: 0",
				"max: 1001",
				"ratio: 2",
				"name: ééééé",
				"items: []",
				"set: {a: 1, b: 2}",
				"mode: fats",
				"id: ABC",
				"wait: 500ms",
			}, "\n"),
			into: func() any { return new(ruled) },
			want: []string{
				`ptr: must be <= 5 (line 2:6)`,
				`min: must be >= 1 (line 3:6)`,
				`max: must be <= 1000 (line 4:6)`,
				`ratio: must be <= 1.5 (line 5:8)`,
				`name: must be at most 4 characters (line 6:7)`,
				`items: must have at least 1 item (line 7:8)`,
				`set: must have at most 1 item (line 8:6)`,
				`mode: must be one of: fast, slow, auto (did you mean "fast"?) (line 9:7)`,
				`id: does not match pattern ^[a-z]{2,3}$ (line 10:5)`,
				`wait: must be >= 1s (line 11:7)`,
			},
		},
		{
			desc: "lower bounds of lengths and items, upper bound of items",
			doc:  "req: x\nptr: 1\nname: a\nitems: [a, b, c]\nratio: 0.1\nmode: other\nwait: 2m\n",
			into: func() any { return new(ruled) },
			want: []string{
				`name: must be at least 2 characters (line 3:7)`,
				`items: must have at most 2 items (line 4:8)`,
				`ratio: must be >= 0.5 (line 5:8)`,
				`mode: must be one of: fast, slow, auto (line 6:7)`,
				`wait: must be <= 1m (line 7:7)`,
			},
		},
		{
			desc: "a known value whose feature is not built",
			doc:  "req: x\nptr: 1\nmode: warp\n",
			into: func() any { return new(ruled) },
			want: []string{`mode: "warp" is not supported yet (line 3:7)`},
		},
		{
			desc: "NaN fails min/max",
			doc:  "req: x\nptr: 1\nratio: .nan\n",
			into: func() any { return new(ruled) },
			want: []string{`ratio: must be a number, not NaN (line 3:8)`},
		},
		{
			desc: "rules are not checked on a value with a type error",
			doc:  "req: x\nptr: 1\nmin: zero\n",
			into: func() any { return new(ruled) },
			want: []string{`min: expected integer, got string "zero" (line 3:6)`},
		},
		{
			desc: "malformed cfg tag is reported",
			doc:  "a: x\n",
			into: func() any { return new(badTag) },
			want: []string{`(root): invalid cfg tag on field decode_test.badTag.A: min/max need a number field, not string (line 1:1)`},
		},
		// Structure.
		{
			desc: "duplicate key",
			doc:  "i: 1\ns: a\ni: 2\n",
			into: func() any { return new(scalars) },
			want: []string{`i: duplicate key "i", first defined on line 1 (line 3:1)`},
		},
		{
			desc: "duplicate key in nested flow map",
			doc:  "m: {a: 1, b: 2, a: 3}\n",
			into: func() any { return new(scalars) },
			want: []string{`m.a: duplicate key "a", first defined on line 1 (line 1:17)`},
		},
		{
			desc: "multiple documents",
			doc:  "i: 1\n---\ni: 2\n",
			into: func() any { return new(scalars) },
			want: []string{`(root): multiple YAML documents are not supported (line 3:2)`},
		},
		{
			desc: "syntax error",
			doc:  "a: [1, 2\n",
			into: func() any { return new(scalars) },
			want: []string{`(root): syntax error: sequence end token ']' not found (line 1:4)`},
		},
		{
			desc: "unknown anchor",
			doc:  "i: *nope\n",
			into: func() any { return new(scalars) },
			want: []string{`i: unknown anchor "nope" (line 1:4)`},
		},
		{
			desc: "alias cannot refer to the value enclosing it",
			doc:  "l: &x [*x]\n",
			into: func() any { return new(scalars) },
			want: []string{`l[0]: unknown anchor "x" (line 1:8)`},
		},
		{
			desc: "merge value must be a map",
			doc:  "m:\n  <<: 5\n  a: 1\n",
			into: func() any { return new(scalars) },
			want: []string{`m: merge key (<<) value must be a map or a list of maps, got integer 5 (line 2:7)`},
		},
		{
			desc: "unsupported tag",
			doc:  "s: !env HOME\n",
			into: func() any { return new(scalars) },
			want: []string{`s: unsupported tag "!env" (line 1:4)`},
		},
		{
			desc: "tag must match the value",
			doc:  "i: !!int abc\n",
			into: func() any { return new(scalars) },
			want: []string{`i: value tagged !!int cannot be string "abc" (line 1:4)`},
		},
		{
			desc: "complex map keys are rejected by the parser",
			doc:  "m:\n  ? [1, 2]\n  : 2\n",
			into: func() any { return new(scalars) },
			want: []string{`(root): syntax error: found an invalid key for this map (line 3:3)`},
		},
		{
			desc: "nesting deeper than 64 levels",
			doc:  strings.Repeat("[", 65) + strings.Repeat("]", 65),
			into: func() any { return new(any) },
			want: []string{`[0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0]: nesting too deep (more than 64 levels) (line 1:65)`},
		},
		{
			desc: "pathological nesting is rejected before parsing",
			doc:  strings.Repeat("[", 100000),
			into: func() any { return new(any) },
			want: []string{`(root): nesting too deep (more than 256 open brackets) (line 1:257)`},
		},
		{
			desc: "pathological compact nesting is rejected before parsing",
			doc:  strings.Repeat("- ", 100000) + "x",
			into: func() any { return new(any) },
			want: []string{`(root): nesting too deep (more than 256 entries on one line) (line 1:513)`},
		},
		// The parser recurses once per key of a block mapping and copies
		// the keys parsed so far at each level (quadratic time; a few
		// million keys overflow the stack); each token costs it time and
		// memory. Such documents are refused before it runs.
		{
			desc: "a block mapping of a few thousand keys parses",
			doc:  blockMap(5000, ""),
			into: func() any { return new(map[string]int) },
		},
		{
			desc: "a block mapping of 20,000 keys is refused before parsing",
			doc:  blockMap(20000, ""),
			into: func() any { return new(map[string]int) },
			want: []string{`(root): block mappings too large: more than 10000 keys past the first 100 of their mapping (write a large map as a flow mapping {...}, or split it) (line 10101:1)`},
		},
		{
			desc: "block mappings past their first 100 keys add up",
			doc:  strings.Repeat("- "+strings.TrimPrefix(blockMap(2600, "  "), "  "), 5),
			into: func() any { return new([]map[string]int) },
			want: []string{`(root): block mappings too large: more than 10000 keys past the first 100 of their mapping (write a large map as a flow mapping {...}, or split it) (line 10501:3)`},
		},
		{
			desc: "a flow mapping of 20,000 keys parses",
			doc:  "{" + strings.ReplaceAll(strings.TrimSuffix(blockMap(20000, ""), "\n"), "\n", ", ") + "}",
			into: func() any { return new(map[string]int) },
		},
		{
			desc: "3,000,000 one-line keys are refused before parsing",
			doc:  strings.Repeat("a: 1\n", 3_000_000),
			into: func() any { return new(any) },
			want: []string{`(root): document too large: more than 500000 YAML tokens (keys, list entries, brackets, commas, quoted strings, anchors, aliases, tags, comments) (line 500001:2)`},
		},
		{
			desc: "a flow sequence of 600,000 items is refused before parsing",
			doc:  "[" + strings.Repeat("1,", 600_000) + "1]",
			into: func() any { return new(any) },
			want: []string{`(root): document too large: more than 500000 YAML tokens (keys, list entries, brackets, commas, quoted strings, anchors, aliases, tags, comments) (line 1:1000001)`},
		},
		{
			desc: "a tag whose node is left of the mapping it is in",
			doc:  "a:\n  b: !!map\nc: 1\n",
			into: func() any { return new(any) },
			want: []string{`(root): syntax error: value indented less than the mapping it is in (line 3:1)`},
		},
		{
			desc: "alias expansion bomb",
			doc: "a: &a [x, x, x, x, x, x, x, x, x, x]\n" +
				"b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n" +
				"c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\n" +
				"d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n" +
				"e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\n" +
				"f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\n",
			into: func() any { return new(map[string]any) },
			want: []string{`e[7][0][7][5][2]: alias expansion too large (more than 100000 values) (line 1:14)`},
		},
		{
			desc: "decoding into a non-pointer",
			doc:  "a: 1\n",
			into: func() any { return scalars{} },
			want: []string{`(root): decode: out must be a non-nil pointer, got decode_test.scalars`},
		},
		{
			desc: "unsupported Go type",
			doc:  "a: 1\n",
			into: func() any { return new(map[string]chan int) },
			want: []string{`a: cannot decode into Go type chan int (line 1:4)`},
		},
		{
			desc: "non-string map keys in Go type",
			doc:  "a: 1\n",
			into: func() any { return new(map[int]int) },
			want: []string{`(root): cannot decode into Go type map[int]int (map keys must be strings) (line 1:1)`},
		},
		{
			desc: "a DecodeNode decoding its own type is stopped",
			doc:  "a: 1\n",
			into: func() any { return new(looping) },
			want: []string{`(root): decoding nested too deeply (a DecodeNode method may be decoding its own type) (line 1:1)`},
		},
		// Unions, string-or-object forms and validators inside the gateway tree.
		{
			desc: "union with none of its keys",
			doc:  "binds:\n- port: 80\n  listeners:\n  - routes:\n    - backends: [a:1]\n      matches:\n      - path: {}\n",
			into: func() any { return new(gwConfig) },
			want: []string{`binds[0].listeners[0].routes[0].matches[0].path: exactly one of exact, pathPrefix, regex is required (line 7:15)`},
		},
		{
			desc: "union with two of its keys",
			doc:  "binds:\n- port: 80\n  listeners:\n  - routes:\n    - backends: [a:1]\n      matches:\n      - path:\n          exact: /a\n          regex: ^/b\n",
			into: func() any { return new(gwConfig) },
			want: []string{`binds[0].listeners[0].routes[0].matches[0].path: exactly one of exact, pathPrefix, regex is required, got exact, regex (line 8:11)`},
		},
		{
			desc: "union rejects unknown keys and bad kinds (and skips the one-of check then)",
			doc:  "binds:\n- port: 80\n  listeners:\n  - routes:\n    - backends: [a:1]\n      matches:\n      - path: {prefix: /a, exact: 5}\n",
			into: func() any { return new(gwConfig) },
			want: []string{
				`binds[0].listeners[0].routes[0].matches[0].path.prefix: unknown field "prefix" (line 7:16)`,
				`binds[0].listeners[0].routes[0].matches[0].path.exact: expected string, got integer 5 (line 7:35)`,
			},
		},
		{
			desc: "string form of backend invalid",
			doc:  "binds:\n- port: 80\n  listeners:\n  - routes:\n    - backends: [nohost]\n",
			into: func() any { return new(gwConfig) },
			want: []string{`binds[0].listeners[0].routes[0].backends[0]: invalid backend "nohost": want host:port (line 5:18)`},
		},
		{
			desc: "object form of backend checked strictly",
			doc:  "binds:\n- port: 80\n  listeners:\n  - routes:\n    - backends:\n      - {host: a, port: 0, wieght: 1}\n      - 7\n",
			into: func() any { return new(gwConfig) },
			want: []string{
				`binds[0].listeners[0].routes[0].backends[0].port: must be >= 1 (line 6:25)`,
				`binds[0].listeners[0].routes[0].backends[0].wieght: unknown field "wieght" (did you mean "weight"?) (line 6:28)`,
				`binds[0].listeners[0].routes[0].backends[1]: expected string or map, got integer 7 (line 7:9)`,
			},
		},
		{
			desc: "validator cross-field error positioned at the nearest node",
			doc:  "binds:\n- port: 443\n  listeners:\n  - name: web\n    protocol: HTTPS\n",
			into: func() any { return new(gwConfig) },
			want: []string{`binds[0].listeners[0].tls: required when protocol is HTTPS (line 4:5)`},
		},
		{
			desc: "validator not called when the value has errors",
			doc:  "binds:\n- port: 443\n  listeners:\n  - name: Web\n    protocol: HTTPS\n",
			into: func() any { return new(gwConfig) },
			want: []string{`binds[0].listeners[0].name: does not match pattern ^[a-z0-9]([-a-z0-9]*[a-z0-9])?$ (line 4:11)`},
		},
		{
			desc: "embedded struct fields are inlined with their rules",
			doc:  "binds:\n- port: 80\n  listeners:\n  - routes:\n    - description: much too long\n      backends: [a:1]\n",
			into: func() any { return new(gwConfig) },
			want: []string{`binds[0].listeners[0].routes[0].description: must be at most 10 characters (line 5:20)`},
		},
		{
			desc: "map keys with dots are quoted in paths",
			doc:  "binds:\n- port: 80\n  listeners:\n  - routes:\n    - backends: [a:1]\n      matches:\n      - headers: {X-Foo: 1, a.b: [x]}\n",
			into: func() any { return new(gwConfig) },
			want: []string{
				`binds[0].listeners[0].routes[0].matches[0].headers.X-Foo: expected string, got integer 1 (line 7:26)`,
				`binds[0].listeners[0].routes[0].matches[0].headers["a.b"]: expected string, got list (line 7:34)`,
			},
		},
		{
			desc: "JSON input",
			doc:  "{\n\t\"binds\": [\n\t\t{\"port\": \"80\", \"listeners\": [{\"protocol\": \"UDP\"}]}\n\t]\n}\n",
			into: func() any { return new(gwConfig) },
			want: []string{
				// goccy's columns are approximate after tabs (the quote is at 3:12).
				`binds[0].port: expected integer, got string "80" (line 3:11)`,
				`binds[0].listeners[0].protocol: must be one of: HTTP, HTTPS, TCP (line 3:44)`,
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			errs := decode.YAML([]byte(tc.doc), tc.into())
			var got []string
			for _, e := range errs {
				got = append(got, e.Error())
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("errors:\n got: %s\nwant: %s", strings.Join(got, "\n      "), strings.Join(tc.want, "\n      "))
			}
		})
	}
}

// blockMap returns a block mapping of n keys k0, k1, ..., one per line,
// each line indented by indent.
func blockMap(n int, indent string) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "%sk%d: %d\n", indent, i, i)
	}
	return b.String()
}

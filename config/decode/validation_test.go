package decode_test

import (
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/relaygate/gateway/config/decode"
)

type window struct {
	Min int `json:"min"`
	Max int `json:"max"`
}

func (w *window) Validate(v *decode.Validation) {
	if w.Min > w.Max {
		v.Errorf("min", "must not exceed max (%d)", w.Max)
	}
	if w.Max > 100 {
		v.Errorf("", "window at %s is too wide", v.Path())
	}
	if v.Node().Get("max") == nil {
		v.Errorf("max", "must be set explicitly")
	}
}

// peers validates with a value receiver on a map type.
type peers map[string]string

func (p peers) Validate(v *decode.Validation) {
	for _, k := range v.Node().Keys() {
		if p[k] == "" {
			v.Errorf(k, "empty address")
		}
	}
}

// codes has rules that each concern one field (decode.FieldRules).
type codes struct {
	Limit int   `json:"limit"`
	Codes []int `json:"codes"`
	Max   int   `json:"max"`
}

func (*codes) FieldRules() {}

func (c *codes) Validate(v *decode.Validation) {
	for i, n := range c.Codes {
		if n < 100 {
			v.Errorf("codes["+strconv.Itoa(i)+"]", "too small")
		}
	}
	if c.Limit == 0 {
		v.Errorf("limit", "must not be zero")
	}
}

type validated struct {
	Codes   *codes            `json:"codes"`
	Windows []window          `json:"windows"`
	ByName  map[string]window `json:"byName"`
	Peers   peers             `json:"peers"`
	Opt     *window           `json:"opt"`
}

func TestValidator(t *testing.T) {
	cases := []struct {
		desc string
		doc  string
		want []string
	}{
		{
			desc: "cross-field error at a list item's field",
			doc:  "windows:\n- {min: 1, max: 2}\n- {min: 5, max: 2}\n",
			want: []string{`windows[1].min: must not exceed max (2) (line 3:9)`},
		},
		{
			desc: "error at the value itself, inside a map",
			doc:  "byName:\n  wide: {min: 0, max: 500}\n",
			want: []string{`byName.wide: window at byName.wide is too wide (line 2:9)`},
		},
		{
			desc: "error at an absent field is placed at the value",
			doc:  "opt: {min: -1}\n",
			want: []string{`opt.max: must be set explicitly (line 1:6)`},
		},
		{
			desc: "value receiver on a named map type",
			doc:  "peers:\n  a: x\n  b: ''\n",
			want: []string{`peers.b: empty address (line 3:6)`},
		},
		{
			desc: "not called for null",
			doc:  "opt: null\npeers: ~\n",
		},
		{
			desc: "not called after a decoding error",
			doc:  "windows:\n- {min: 9, max: x}\n",
			want: []string{`windows[0].max: expected integer, got string "x" (line 2:17)`},
		},
		{
			desc: "field rules run after another field's decoding error",
			doc:  "codes: {limit: 1, codes: [7], max: x}\n",
			want: []string{
				`codes.codes[0]: too small (line 1:27)`,
				`codes.max: expected integer, got string "x" (line 1:36)`,
			},
		},
		{
			desc: "field rules drop their errors about a field that failed",
			doc:  "codes: {limit: zero, codes: [700]}\n",
			want: []string{`codes.limit: expected integer, got string "zero" (line 1:16)`},
		},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			var got []string
			for _, e := range decode.YAML([]byte(tc.doc), new(validated)) {
				got = append(got, e.Error())
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

type tagMistakes struct {
	Unknown  string            `json:"unknown" cfg:"mandatory"`
	MinOnStr string            `json:"minOnStr" cfg:"min=1"`
	BadBound int               `json:"badBound" cfg:"max=ten"`
	LenOnInt int               `json:"lenOnInt" cfg:"minLen=1"`
	Pattern  string            `json:"pattern" cfg:"pattern=(["`
	Enum     int               `json:"enum" cfg:"enum=a|b"`
	Ch       chan int          `json:"ch"`
	IntKeys  map[int]string    `json:"intKeys"`
	Iface    interface{ M() }  `json:"iface"`
	Nested   []map[string]bool `json:"nested" cfg:"required,minItems=1"`
}

func TestCheckType(t *testing.T) {
	if err := decode.CheckType(new(gwConfig)); err != nil {
		t.Errorf("gwConfig: %v", err)
	}
	if err := decode.CheckType(reflect.TypeFor[scalars]()); err != nil {
		t.Errorf("scalars: %v", err)
	}
	err := decode.CheckType(new(tagMistakes))
	if err == nil {
		t.Fatal("no error for tagMistakes")
	}
	want := []string{
		`decode: invalid cfg tag on field decode_test.tagMistakes.Unknown: unknown rule "mandatory"`,
		`decode: invalid cfg tag on field decode_test.tagMistakes.MinOnStr: min/max need a number field, not string`,
		`decode: invalid cfg tag on field decode_test.tagMistakes.BadBound: bad bound "ten" for int`,
		`decode: invalid cfg tag on field decode_test.tagMistakes.LenOnInt: minLen does not apply to int`,
		"decode: invalid cfg tag on field decode_test.tagMistakes.Pattern: pattern: error parsing regexp: missing closing ]: `[`",
		`decode: invalid cfg tag on field decode_test.tagMistakes.Enum: enum needs a string field, not int`,
		`decode: cannot decode into Go type chan int`,
		`decode: map[int]string: map keys must be strings`,
		`decode: cannot decode into Go type interface { M() }`,
	}
	if got := strings.Split(err.Error(), "\n"); !reflect.DeepEqual(got, want) {
		t.Errorf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if decode.CheckType(nil) == nil {
		t.Error("CheckType(nil) = nil")
	}
}

// portBind requires a port in Validate, as config.Bind does.
type portBind struct {
	Port  *int `json:"port"`
	Other *int `json:"other"`
}

func (b *portBind) Validate(v *decode.Validation) {
	if b.Port == nil {
		v.Errorf("port", "required")
	}
}

// TestFailedValuesAreAbsent: a value that failed to decode brings no
// further error: its struct's Validate does not run, whether the value
// failed when decoded (a string for an integer) or when the document was
// read (an unknown tag, an integer with a leading zero); and a scalar
// behind a pointer that failed is left nil, not zero, for the checks that
// read the decoded values.
func TestFailedValuesAreAbsent(t *testing.T) {
	for _, tc := range []struct {
		yaml, want string
	}{
		{"port: '8080'", `port: expected integer, got string "8080" (line 1:7)`},
		{"port: 012", "port: integer 012 has a leading zero; write 12 (decimal) or 0o12 (octal) (line 1:7)"},
		{"port: !ENV X", `port: unsupported tag "!ENV" (line 1:7)`},
		{"port: 1\nother: x", `other: expected integer, got string "x" (line 2:8)`},
	} {
		var b portBind
		errs := decode.YAML([]byte(tc.yaml), &b)
		if len(errs) != 1 || errs[0].Error() != tc.want {
			t.Errorf("%q: %v, want only %s", tc.yaml, errs, tc.want)
		}
		if b.Other != nil || (b.Port != nil) != strings.HasPrefix(tc.yaml, "port: 1\n") {
			t.Errorf("%q: decoded port %v, other %v", tc.yaml, b.Port, b.Other)
		}
	}
}

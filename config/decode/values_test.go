package decode_test

import (
	"encoding/json"
	"math"
	"net/netip"
	"reflect"
	"testing"
	"time"

	"github.com/relaygate/gateway/config/decode"
)

type embeddedPtr struct {
	*Inner
	Outer string `json:"outer"`
}

type Inner struct {
	In    string `json:"in"`
	Outer string `json:"outer"` // shadowed by embeddedPtr.Outer
}

type withDefaults struct {
	Port  int      `json:"port"`
	Name  string   `json:"name"`
	Ptr   *int     `json:"ptr"`
	List  []string `json:"list"`
	Other string   `json:"other"`
}

func intp(i int) *int { return &i }

func TestValues(t *testing.T) {
	cases := []struct {
		desc  string
		doc   string
		into  any
		check func(t *testing.T, v any)
	}{
		{
			desc: "gateway tree with union, string-or-object, embedded, durations and raw",
			doc: `
config:
  workers: 4
  drainTimeout: 1m30s
  tracing: {sampler: ratio, args: [0.5, true, null, 7]}
  Labels: {team: edge}
binds:
- port: 8080
  listeners:
  - name: web
    protocol: HTTPS
    tls: {cert: c.pem, key: k.pem}
    hostnames: [example.com]
    routes:
    - description: main
      matches:
      - path: {pathPrefix: /api}
        method: GET
        headers: {X-Env: prod}
      backends:
      - svc:9000
      - {host: other, port: 81, weight: 0}
      policies:
        timeout: 250ms
        retries: 0
        ratio: 1
        enabled: false
        extra: {any: [shape]}
`,
			into: new(gwConfig),
			check: func(t *testing.T, v any) {
				retries, weight, enabled := 0, 0, false
				want := &gwConfig{
					Config: &gwGlobal{
						Workers:      4,
						DrainTimeout: 90 * time.Second,
						Tracing:      decode.Raw{Value: map[string]any{"sampler": "ratio", "args": []any{0.5, true, nil, int64(7)}}},
						Labels:       map[string]string{"team": "edge"},
					},
					Binds: []gwBind{{
						Port: 8080,
						Listeners: []gwListener{{
							Name: "web", Protocol: "HTTPS", TLS: &gwTLS{Cert: "c.pem", Key: "k.pem"},
							Hostnames: []string{"example.com"},
							Routes: []gwRoute{{
								gwMeta: gwMeta{Description: "main"},
								Matches: []gwMatch{{
									Path:    &gwPathMatch{PathPrefix: "/api"},
									Method:  "GET",
									Headers: map[string]string{"X-Env": "prod"},
								}},
								Backends: []gwBackend{{Host: "svc", Port: 9000}, {Host: "other", Port: 81, Weight: &weight}},
								Policies: &gwPolicies{
									Timeout: 250 * time.Millisecond, Retries: &retries, Ratio: 1, Enabled: &enabled,
									Extra: decode.Raw{Value: map[string]any{"any": []any{"shape"}}},
								},
							}},
						}},
					}},
				}
				got := v.(*gwConfig)
				if got.Config.Tracing.Node == nil || got.Config.Tracing.Node.Path() != "config.tracing" || got.Config.Tracing.Node.Line() != 5 {
					t.Errorf("tracing node = %+v", got.Config.Tracing.Node)
				}
				// Nodes are compared separately.
				got.Config.Tracing.Node = nil
				got.Binds[0].Listeners[0].Routes[0].Policies.Extra.Node = nil
				if !reflect.DeepEqual(got, want) {
					gj, _ := json.Marshal(got)
					wj, _ := json.Marshal(want)
					t.Errorf("got  %s\nwant %s", gj, wj)
				}
			},
		},
		{
			desc: "scalars of every kind",
			doc: `
i: 1e3
i8: -128
u8: 255
u: 0x1F
i64: -9223372036854775808
u64: 18446744073709551615
f: 2
f32: 1.5
b: true
s: "007"
d: 1h
p: 0
l: [1, 2.0, -3]
a: [4, 5]
m: {"200": 1, 404: 2}
any: {k: [1, x, 1.5, false, ~]}
addr: 10.0.0.1
raw: {a: [1, "two"]}
Go: named by Go name
`,
			into: new(scalars),
			check: func(t *testing.T, v any) {
				want := &scalars{
					I: 1000, I8: -128, U8: 255, U: 31, I64: math.MinInt64, U64: math.MaxUint64,
					F: 2, F32: 1.5, B: true, S: "007", D: time.Hour, P: intp(0),
					L: []int{1, 2, -3}, A: [2]int{4, 5}, M: map[string]int{"200": 1, "404": 2},
					Any:  map[string]any{"k": []any{int64(1), "x", 1.5, false, nil}},
					Addr: netip.MustParseAddr("10.0.0.1"),
					Raw:  json.RawMessage(`{"a":[1,"two"]}`),
					Go:   "named by Go name",
				}
				if got := v.(*scalars); !reflect.DeepEqual(got, want) {
					t.Errorf("got  %+v\nwant %+v", got, want)
				}
			},
		},
		{
			desc: "JSON with tabs, exponents and nested lists",
			doc:  "{\n\t\"i\": -1E+2,\n\t\"f\": -1.5e-3,\n\t\"l\": [\n\t\t1,\n\t\t2\n\t],\n\t\"any\": {\"a\": [[]]}\n}\n",
			into: new(scalars),
			check: func(t *testing.T, v any) {
				got := v.(*scalars)
				if got.I != -100 || got.F != -1.5e-3 || !reflect.DeepEqual(got.L, []int{1, 2}) ||
					!reflect.DeepEqual(got.Any, map[string]any{"a": []any{[]any{}}}) {
					t.Errorf("got %+v", got)
				}
			},
		},
		{
			desc: "null and absent keep defaults of plain values and clear nillable ones",
			doc:  "name: ~\nptr: null\nlist:\nother: set\n",
			into: &withDefaults{Port: 80, Name: "default", Ptr: intp(1), List: []string{"x"}},
			check: func(t *testing.T, v any) {
				want := &withDefaults{Port: 80, Name: "default", Other: "set"}
				if got := v.(*withDefaults); !reflect.DeepEqual(got, want) {
					t.Errorf("got %+v, want %+v", got, want)
				}
			},
		},
		{
			desc: "empty document leaves the value unchanged",
			doc:  "\n# nothing here\n",
			into: &withDefaults{Port: 80},
			check: func(t *testing.T, v any) {
				if got := v.(*withDefaults); !reflect.DeepEqual(got, &withDefaults{Port: 80}) {
					t.Errorf("got %+v", got)
				}
			},
		},
		{
			desc: "null document is empty, even with required fields",
			doc:  "---\nnull\n...\n",
			into: new(ruled),
			check: func(t *testing.T, v any) {
				if got := v.(*ruled); !reflect.DeepEqual(got, new(ruled)) {
					t.Errorf("got %+v", got)
				}
			},
		},
		{
			desc: "document markers and a trailing empty document",
			doc:  "%YAML 1.2\n---\nport: 1\n---\n",
			into: new(withDefaults),
			check: func(t *testing.T, v any) {
				if got := v.(*withDefaults); got.Port != 1 {
					t.Errorf("got %+v", got)
				}
			},
		},
		{
			desc: "anchors and aliases are resolved",
			doc:  "binds:\n- port: 1\n  listeners: &ls\n  - name: a\n    protocol: HTTP\n- port: 2\n  listeners: *ls\n",
			into: new(gwConfig),
			check: func(t *testing.T, v any) {
				got := v.(*gwConfig)
				if len(got.Binds) != 2 || !reflect.DeepEqual(got.Binds[0].Listeners, got.Binds[1].Listeners) ||
					got.Binds[1].Listeners[0].Name != "a" {
					t.Errorf("got %+v", got)
				}
			},
		},
		{
			desc: "an anchor redefined later is used from then on",
			doc:  "l: [&x 1, *x, &x 2, *x]\n",
			into: new(scalars),
			check: func(t *testing.T, v any) {
				if got := v.(*scalars).L; !reflect.DeepEqual(got, []int{1, 1, 2, 2}) {
					t.Errorf("got %v", got)
				}
			},
		},
		{
			desc: "merge keys: explicit keys win, first merged map wins",
			doc:  "base: &base {a: 1, b: 1, c: 1}\nover: &over {b: 2, d: 2}\nm:\n  <<: [*over, *base]\n  c: 3\n",
			into: new(map[string]map[string]int),
			check: func(t *testing.T, v any) {
				got := (*v.(*map[string]map[string]int))["m"]
				if want := map[string]int{"a": 1, "b": 2, "c": 3, "d": 2}; !reflect.DeepEqual(got, want) {
					t.Errorf("got %v, want %v", got, want)
				}
			},
		},
		{
			desc: "merge into a struct",
			doc:  "binds:\n- port: 1\n  listeners:\n  - tls: &t {cert: a, key: b}\n  - tls:\n      <<: *t\n      key: c\n",
			into: new(gwConfig),
			check: func(t *testing.T, v any) {
				if got := v.(*gwConfig).Binds[0].Listeners[1].TLS; !reflect.DeepEqual(got, &gwTLS{Cert: "a", Key: "c"}) {
					t.Errorf("got %+v", got)
				}
			},
		},
		{
			desc: "a quoted << is a plain key",
			doc:  "m: {\"<<\": 1}\n",
			into: new(scalars),
			check: func(t *testing.T, v any) {
				if got := v.(*scalars).M; !reflect.DeepEqual(got, map[string]int{"<<": 1}) {
					t.Errorf("got %v", got)
				}
			},
		},
		{
			desc: "standard tags",
			doc:  "s: !!str 123\nf: !!float 1\nl: !!seq [1]\n",
			into: new(scalars),
			check: func(t *testing.T, v any) {
				if got := v.(*scalars); got.S != "123" || got.F != 1 || !reflect.DeepEqual(got.L, []int{1}) {
					t.Errorf("got %+v", got)
				}
			},
		},
		{
			desc: "embedded pointer struct is allocated, shallower field wins a name clash",
			doc:  "in: x\nouter: y\n",
			into: new(embeddedPtr),
			check: func(t *testing.T, v any) {
				got := v.(*embeddedPtr)
				if got.Inner == nil || got.In != "x" || got.Outer != "y" || got.Inner.Outer != "" {
					t.Errorf("got %+v inner %+v", got, got.Inner)
				}
			},
		},
		{
			desc: "embedded pointer struct stays nil when none of its keys is present",
			doc:  "outer: y\n",
			into: new(embeddedPtr),
			check: func(t *testing.T, v any) {
				if got := v.(*embeddedPtr); got.Inner != nil {
					t.Errorf("inner allocated: %+v", got.Inner)
				}
			},
		},
		{
			desc: "raw: absent, null and present",
			doc:  "config:\n  tracing: null\n",
			into: new(gwConfig),
			check: func(t *testing.T, v any) {
				got := v.(*gwConfig).Config.Tracing
				if !got.IsSet() || got.Value != nil || got.Node.Kind() != decode.Null {
					t.Errorf("null raw: %+v", got)
				}
				var absent gwGlobal
				if absent.Tracing.IsSet() {
					t.Error("zero Raw reports set")
				}
				if b, err := json.Marshal(decode.Raw{Value: []any{int64(1)}}); err != nil || string(b) != "[1]" {
					t.Errorf("MarshalJSON = %s, %v", b, err)
				}
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			if errs := decode.YAML([]byte(tc.doc), tc.into); errs != nil {
				t.Fatalf("unexpected errors:\n%v", errs)
			}
			tc.check(t, tc.into)
		})
	}
}

func TestMergeAnchoredList(t *testing.T) {
	doc := "a: &a {x: 1}\nb: &b {y: 2}\nm:\n  <<: &both [*a, *b]\n  z: 3\nn:\n  <<: *both\n"
	var got map[string]map[string]int
	if errs := decode.YAML([]byte(doc), &got); errs != nil {
		t.Fatal(errs)
	}
	want := map[string]int{"x": 1, "y": 2}
	if !reflect.DeepEqual(got["n"], want) || got["m"]["z"] != 3 || got["m"]["x"] != 1 {
		t.Errorf("got %v", got)
	}
}

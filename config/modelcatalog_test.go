package config

import (
	"encoding/json"
	"math/big"
	"strings"
	"testing"

	"github.com/relaygate/gateway/config/decode"
)

func catalogYAML(sources string) string { return "config:\n  modelCatalog: " + sources + "\n" }

func TestModelCatalogTypesDecodable(t *testing.T) {
	if err := decode.CheckType(&CatalogSources{}); err != nil {
		t.Fatal(err)
	}
}

// TestModelCatalogErrorsGolden: one file with many mistakes in the model
// catalog reports all of them at once, each at its field path.
func TestModelCatalogErrorsGolden(t *testing.T) {
	checkErrorsGolden(t, "modelcatalog_invalid.yaml", "modelcatalog_invalid.golden")
}

func TestModelCatalogRules(t *testing.T) {
	const src = "config.modelCatalog[0]"
	tests := []struct {
		desc    string
		sources string
		wantErr string // substring; empty means valid
	}{
		{"file", `[{file: prices.yaml}]`, ""},
		{"inline map", `[{inline: {providers: {openai: {models: {gpt-4o: {rates: {input: "2.5", output: "10"}}}}}}}]`, ""},
		{"inline yaml string", `[{inline: "providers: {openai: {models: {gpt-4o: {rates: {input: '2.5'}}}}}"}]`, ""},
		{"inline json string", `[{inline: '{"providers": {"openai": {"models": {"m": {"tiers": [{"contextOver": 10, "rates": {}}]}}}}}'}]`, ""},
		{"empty catalog", `[{inline: {}}, {inline: ""}]`, ""},
		{"no sources", `[]`, ""},
		{"null list", `null`, ""},
		{"every rate", `[{inline: {providers: {p: {models: {m: {rates: {input: "1", output: "2", cacheRead: "0.1", cacheWrite: "1.25", reasoning: "3", inputAudio: "4", outputAudio: "5"}}}}}}}]`, ""},
		{"tags", `[{inline: {providers: {p: {models: {m: {tags: [a, b]}}}}}}]`, ""},
		{"not a list", `{file: a}`, "config.modelCatalog: expected list"},
		{"null source", `[null]`, src + ": must not be null"},
		{"neither kind", `[{}]`, src + ": exactly one of file, inline is required"},
		{"both kinds", `[{file: a, inline: {}}]`, src + ".inline: only one of file, inline may be set"},
		{"unknown kind", `[{url: a}]`, src + `.url: unknown field "url" (expected one of: file, inline)`},
		{"source as a string", `[a.yaml]`, src + ": expected a map with exactly one of: file, inline"},
		{"empty file", `[{file: ""}]`, src + ".file: must not be empty"},
		{"file not a string", `[{file: 3}]`, src + ".file: expected a file path, got integer 3"},
		{"inline list", `[{inline: [a]}]`, src + ".inline: expected a catalog as a map or as a YAML or JSON string, got list"},
		{"unknown catalog field", `[{inline: {models: {}}}]`, src + `.inline.models: unknown field "models"`},
		{"unknown rate", `[{inline: {providers: {p: {models: {m: {rates: {inputCacheRead: "1"}}}}}}}]`, src + `.inline.providers.p.models.m.rates.inputCacheRead: unknown field`},
		{"limits are not in the schema", `[{inline: {providers: {p: {models: {m: {limits: {contextWindow: 1}}}}}}}]`, `models.m.limits: unknown field "limits"`},
		{"price as a number", `[{inline: {providers: {p: {models: {m: {rates: {input: 0.15}}}}}}}]`, `rates.input: expected a price as a decimal string such as "0.15" (quote it), got number 0.15`},
		{"price as a list", `[{inline: {providers: {p: {models: {m: {rates: {input: []}}}}}}}]`, `rates.input: expected a price as a decimal string such as "0.15", got list`},
		{"negative price", `[{inline: {providers: {p: {models: {m: {rates: {output: "-1"}}}}}}}]`, `rates.output: must not be negative, got "-1"`},
		{"seven fractional digits", `[{inline: {providers: {p: {models: {m: {rates: {cacheRead: "0.1234567"}}}}}}}]`, `rates.cacheRead: more than 6 fractional digits: "0.1234567"`},
		{"exponent", `[{inline: {providers: {p: {models: {m: {rates: {input: "1e3"}}}}}}}]`, `rates.input: invalid decimal "1e3"`},
		{"price too large", `[{inline: {providers: {p: {models: {m: {rates: {input: "1000000000.000001"}}}}}}}]`, `rates.input: must be at most 1000000000`},
		{"null price", `[{inline: {providers: {p: {models: {m: {rates: {input: null}}}}}}}]`, ""},
		{"null model", `[{inline: {providers: {p: {models: {m: null}}}}}]`, `models.m: must not be null`},
		{"tier needs contextOver", `[{inline: {providers: {p: {models: {m: {tiers: [{rates: {}}]}}}}}}]`, `models.m.tiers[0].contextOver: required`},
		{"tier needs rates", `[{inline: {providers: {p: {models: {m: {tiers: [{contextOver: 1}]}}}}}}]`, `models.m.tiers[0].rates: required`},
		{"negative contextOver", `[{inline: {providers: {p: {models: {m: {tiers: [{contextOver: -1, rates: {}}]}}}}}}]`, `tiers[0].contextOver: `},
		{"tiers out of order", `[{inline: {providers: {p: {models: {m: {tiers: [{contextOver: 5, rates: {}}, {contextOver: 5, rates: {}}]}}}}}}]`, `models.m.tiers[1].contextOver: must be greater than the previous tier's 5`},
		{"duplicate tag", `[{inline: {providers: {p: {models: {m: {tags: [a, b, a]}}}}}}]`, `models.m.tags[2]: tag "a" is already listed at tags[0]`},
		{"error inside an inline string", `[{inline: "providers:\n  p:\n    models:\n      m: {rates: {input: x}}"}]`, src + `.inline.providers.p.models.m.rates.input: invalid decimal "x" (want digits with an optional fraction, such as "0.15") (line 4:26 of the inline catalog)`},
		{"syntax error in an inline string", `[{inline: "{providers: "}]`, src + `.inline: syntax error`},
		{"second source's error names its index", `[{file: a}, {inline: {providers: {p: {models: {m: {rates: {input: "-2"}}}}}}}]`, `config.modelCatalog[1].inline.providers.p.models.m.rates.input: must not be negative`},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			checkParse(t, catalogYAML(tc.sources), tc.wantErr)
		})
	}
}

// TestModelCatalogDecodedValues: both inline forms give the same catalog,
// and prices keep every digit.
func TestModelCatalogDecodedValues(t *testing.T) {
	yaml := `config:
  modelCatalog:
  - file: /etc/gateway/prices.json
  - inline:
      providers:
        gcp.gemini:
          models:
            gemini-2.5-pro:
              rates: {input: "1.25", output: "10", cacheRead: "0.125"}
              tiers: [{contextOver: 200000, rates: {input: "2.5", output: "15"}}]
              tags: [long-context]
  - inline: |
      {"providers": {"gcp.gemini": {"models": {"gemini-2.5-pro": {
        "rates": {"input": "1.25", "output": "10", "cacheRead": "0.125"},
        "tiers": [{"contextOver": 200000, "rates": {"input": "2.5", "output": "15"}}],
        "tags": ["long-context"]}}}}}
`
	f, err := Parse([]byte(yaml), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	sources := f.Config.ModelCatalog
	if len(sources) != 3 || sources[0].File != "/etc/gateway/prices.json" || sources[0].Inline != nil {
		t.Fatalf("sources: %+v", sources)
	}
	structured, text := sources[1].Inline, sources[2].Inline
	if structured == nil || text == nil {
		t.Fatalf("inline catalogs missing: %+v", sources)
	}
	a, _ := json.Marshal(structured)
	b, _ := json.Marshal(text)
	if string(a) != string(b) {
		t.Errorf("the two inline forms differ:\n%s\n%s", a, b)
	}
	m := structured.Providers["gcp.gemini"].Models["gemini-2.5-pro"]
	checks := []struct {
		desc string
		got  any
		want any
	}{
		{"input", m.Rates.Input.Micros(), int64(1_250_000)},
		{"cacheRead", m.Rates.CacheRead.Micros(), int64(125_000)},
		{"unset rate", m.Rates.Reasoning, (*Money)(nil)},
		{"tier bound", m.Tiers[0].ContextOver, uint64(200000)},
		{"tier rate", m.Tiers[0].Rates.Output.Micros(), int64(15_000_000)},
		{"tier leaves cacheRead unset", m.Tiers[0].Rates.CacheRead, (*Money)(nil)},
		{"tags", strings.Join(m.Tags, ","), "long-context"},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.desc, c.got, c.want)
		}
	}
}

// TestModelCatalogDumpRoundTrip: /config_dump writes the catalog in the
// file format, and it parses back into the same catalog.
func TestModelCatalogDumpRoundTrip(t *testing.T) {
	yaml := `config:
  modelCatalog:
  - file: prices.yaml
  - inline:
      providers:
        openai:
          models:
            gpt-4o: {rates: {input: "2.50", output: "10.000000", cacheRead: "1.25", reasoning: "0.000001"}}
            free: {rates: {input: "0", output: "000"}}
        anthropic:
          models:
            claude: {rates: {cacheWrite: "3.75", inputAudio: "1", outputAudio: "2"}, tiers: [{contextOver: 0, rates: {}}, {contextOver: 1, rates: {input: "9"}}], tags: [x]}
  - inline: "providers: {p: {models: {m: {rates: {input: '1000000000'}}}}}"
`
	dump := string(roundTrip(t, "modelCatalog", []byte(yaml)))
	for _, want := range []string{`"file": "prices.yaml"`, `"input": "2.5"`, `"output": "10"`, `"reasoning": "0.000001"`, `"output": "0"`, `"input": "1000000000"`} {
		if !strings.Contains(dump, want) {
			t.Errorf("dump lacks %s:\n%s", want, dump)
		}
	}
}

func TestMoney(t *testing.T) {
	tests := []struct {
		in      string
		micros  int64
		text    string // String(); "" when in must be refused
		wantErr string
	}{
		{"0", 0, "0", ""},
		{"3", 3_000_000, "3", ""},
		{"0.15", 150_000, "0.15", ""},
		{"0.000001", 1, "0.000001", ""},
		{"007.50", 7_500_000, "7.5", ""},
		{"1000000000", 1_000_000_000_000_000, "1000000000", ""},
		{"1000000000.000000", 1_000_000_000_000_000, "1000000000", ""},
		{"1000000000.000001", 0, "", "must be at most"},
		{"99999999999", 0, "", "must be at most"},
		{"-0.5", 0, "", "must not be negative"},
		{"0.1234567", 0, "", "more than 6 fractional digits"},
		{"", 0, "", "invalid decimal"},
		{".5", 0, "", "invalid decimal"},
		{"5.", 0, "", "invalid decimal"},
		{"+1", 0, "", "invalid decimal"},
		{"1e3", 0, "", "invalid decimal"},
		{" 1", 0, "", "invalid decimal"},
		{"1,5", 0, "", "invalid decimal"},
		{"١", 0, "", "invalid decimal"},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			micros, msg := parseMoney(tc.in)
			switch {
			case tc.wantErr != "":
				if !strings.Contains(msg, tc.wantErr) {
					t.Errorf("parseMoney(%q) = %d, %q; want an error containing %q", tc.in, micros, msg, tc.wantErr)
				}
			case msg != "" || micros != tc.micros:
				t.Errorf("parseMoney(%q) = %d, %q; want %d", tc.in, micros, msg, tc.micros)
			case MoneyFromMicros(micros).String() != tc.text:
				t.Errorf("String() = %q, want %q", MoneyFromMicros(micros).String(), tc.text)
			}
		})
	}
}

// FuzzParseMoney holds parseMoney to exact rational arithmetic: what it
// accepts is a plain decimal of at most six fractional digits whose value
// times a million is its result, what it refuses is not such a decimal or
// is out of range, and String gives back the same value.
func FuzzParseMoney(f *testing.F) {
	for _, s := range []string{"0", "0.15", "1000000000", "1000000000.1", "-1", "1e3", "0.1234567", "00.000100", ".5", "5."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		micros, msg := parseMoney(s)
		plain := plainDecimal(s)
		if !plain {
			if msg == "" {
				t.Fatalf("parseMoney(%q) accepted a string that is not a plain decimal", s)
			}
			return
		}
		// More than six fractional digits are refused even when they are
		// zeros, as agentgateway refuses a decimal of scale 7.
		_, frac, _ := strings.Cut(s, ".")
		r, _ := new(big.Rat).SetString(s)
		scaled := new(big.Rat).Mul(r, big.NewRat(1_000_000, 1))
		inRange := len(frac) <= moneyDigits && r.Cmp(big.NewRat(MaxMoney, 1)) <= 0
		if inRange != (msg == "") {
			t.Fatalf("parseMoney(%q) = %d, %q; exact value %s, in range %v", s, micros, msg, r.RatString(), inRange)
		}
		if msg != "" {
			return
		}
		if scaled.Num().Int64() != micros {
			t.Fatalf("parseMoney(%q) = %d, want %s", s, micros, scaled.RatString())
		}
		back, msg := parseMoney(MoneyFromMicros(micros).String())
		if msg != "" || back != micros {
			t.Fatalf("String() of %d parses back as %d, %q", micros, back, msg)
		}
	})
}

// plainDecimal reports whether s is digits, optionally a point and more
// digits: the form a price takes.
func plainDecimal(s string) bool {
	whole, frac, point := strings.Cut(s, ".")
	digits := func(x string) bool {
		return x != "" && strings.Trim(x, "0123456789") == ""
	}
	return digits(whole) && (!point || digits(frac))
}

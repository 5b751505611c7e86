package guard

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
)

// naiveCheck is the baseline: every builtin's regexp over the whole text, as
// a straightforward port would run them.
func naiveCheck(res []*regexp.Regexp, text []byte) bool {
	for _, re := range res {
		if re.Match(text) {
			return true
		}
	}
	return false
}

func builtinRegexps() []*regexp.Regexp {
	res := make([]*regexp.Regexp, len(builtins))
	for i, b := range builtins {
		res[i] = b.re
	}
	return res
}

// withPII is cleanPrompt with an email, a phone number and a card in it.
var withPII = func() []byte {
	b := bytes.Clone(cleanPrompt)
	copy(b[1000:], " jane.doe@example.com ")
	copy(b[2000:], " (555) 123-4567 ")
	copy(b[3000:], " 4111 1111 1111 1111 ")
	return b
}()

// Digit-dense texts: every byte is numeric, so every builtin runs on
// every run.
var dense = map[string][]byte{
	"cards":      []byte(strings.Repeat("4111 ", 820)[:4096]),
	"ssnShapes":  []byte(strings.Repeat("123-45-678 ", 373)[:4096]),
	"digits":     bytes.Repeat([]byte("1"), 4096),
	"plusGroups": []byte(strings.Repeat("+1 2 ", 820)[:4096]),
	"numberList": []byte(strings.Repeat("12, 345, 6789, ", 274)[:4096]),
}

func BenchmarkCheck(b *testing.B) {
	g := mustNew(b, Spec{Builtins: allBuiltins})
	naive := builtinRegexps()
	b.Run("clean4KB/guard", func(b *testing.B) {
		b.SetBytes(int64(len(cleanPrompt)))
		b.ReportAllocs()
		for b.Loop() {
			if v, _ := g.Check(cleanPrompt); v != Clean {
				b.Fatal(v)
			}
		}
	})
	b.Run("clean4KB/regexpEach", func(b *testing.B) {
		b.SetBytes(int64(len(cleanPrompt)))
		b.ReportAllocs()
		for b.Loop() {
			if naiveCheck(naive, cleanPrompt) {
				b.Fatal("match")
			}
		}
	})
	b.Run("pii4KB/guard", func(b *testing.B) {
		b.SetBytes(int64(len(withPII)))
		b.ReportAllocs()
		for b.Loop() {
			if v, _ := g.Check(withPII); v != Masked {
				b.Fatal(v)
			}
		}
	})
	for _, name := range []string{"cards", "ssnShapes", "digits", "plusGroups", "numberList"} {
		text := dense[name]
		b.Run("dense4KB/"+name, func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			b.ReportAllocs()
			for b.Loop() {
				g.Check(text)
			}
		})
	}
}

func BenchmarkCheckReject(b *testing.B) {
	g := mustNew(b, Spec{Builtins: allBuiltins, Action: ActionReject})
	b.SetBytes(int64(len(cleanPrompt)))
	b.ReportAllocs()
	for b.Loop() {
		g.Check(cleanPrompt)
	}
}

// BenchmarkCheckUserPattern shows what a user pattern adds: regexp over the
// whole text, fast with a literal prefix, slower without.
func BenchmarkCheckUserPattern(b *testing.B) {
	for _, tc := range []struct{ name, pattern string }{
		{"literalPrefix", `Project Falcon\b`},
		{"caseFolded", `(?i)project\s+falcon`},
	} {
		g := mustNew(b, Spec{Builtins: allBuiltins, Patterns: []string{tc.pattern}})
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(int64(len(cleanPrompt)))
			b.ReportAllocs()
			for b.Loop() {
				g.Check(cleanPrompt)
			}
		})
	}
}

// BenchmarkStreamDelta is one 50-byte delta of a streamed response through
// all builtins, in steady state.
func BenchmarkStreamDelta(b *testing.B) {
	for _, tc := range []struct {
		name string
		spec Spec
	}{
		{"builtins", Spec{Builtins: allBuiltins}},
		{"builtinsAndBoundedPattern", Spec{Builtins: allBuiltins, Patterns: []string{`secret-[0-9a-f]{8}`}}},
		{"builtinsAndUnboundedPattern", Spec{Builtins: allBuiltins, Patterns: []string{`secret-[0-9a-f]+`}}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			m := mustNew(b, tc.spec).NewStreamMasker()
			var out []byte
			i := 0
			b.SetBytes(50)
			b.ReportAllocs()
			for b.Loop() {
				out = m.Write(out[:0], cleanPrompt[i:i+50])
				i = (i + 50) % (len(cleanPrompt) - 50)
			}
		})
	}
}

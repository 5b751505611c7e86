package guard

import (
	"bytes"
	"math/rand/v2"
	"regexp"
	"regexp/syntax"
	"slices"
	"strings"
	"testing"
)

var allBuiltins = []string{"ssn", "creditCard", "phoneNumber", "email", "caSin"}

func mustNew(t testing.TB, spec Spec) *Guard {
	t.Helper()
	g, err := New(spec)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// maskString masks in with g; a clean text comes back unchanged.
func maskString(g *Guard, in string) string {
	if m := g.Mask([]byte(in)); m != nil {
		return string(m)
	}
	return in
}

func TestBuiltins(t *testing.T) {
	cases := []struct {
		desc    string
		builtin string
		in      string
		want    string // the masked text; "" means unchanged
	}{
		// ssn
		{"ssn with hyphens", "ssn", "SSN: 123-45-6789.", "SSN: <SSN>."},
		{"ssn with spaces", "ssn", "ssn 123 45 6789", "ssn <SSN>"},
		{"ssn with dots", "ssn", "123.45.6789", "<SSN>"},
		{"ssn with mixed separators", "ssn", "123-45 6789", "<SSN>"},
		{"ssn bare", "ssn", "is 123456789 valid", "is <SSN> valid"},
		{"ssn area 9xx (ITIN) is masked", "ssn", "912-70-1234", "<SSN>"},
		{"two ssns", "ssn", "123-45-6789 or 987-65-4321", "<SSN> or <SSN>"},
		{"ssn area 000 is never issued", "ssn", "000-12-3456", ""},
		{"ssn area 666 is never issued", "ssn", "666-12-3456", ""},
		{"ssn group 00 is never issued", "ssn", "123-00-4567", ""},
		{"ssn serial 0000 is never issued", "ssn", "123-45-0000", ""},
		{"ZIP+4 is not an ssn", "ssn", "San Francisco, CA 94105-1234", ""},
		{"3-6 grouping is not an ssn", "ssn", "123-456789", ""},
		{"ssn inside a longer number", "ssn", "1234-56-7890 and 123-45-67890", ""},
		{"ssn glued to a letter", "ssn", "a123-45-6789", ""},
		{"ten digits are not an ssn", "ssn", "1234567890", ""},

		// creditCard
		{"visa in groups of four", "creditCard", "Card number: 4111 1111 1111 1111, exp 12/29", "Card number: <CREDIT_CARD>, exp 12/29"},
		{"visa with hyphens", "creditCard", "4111-1111-1111-1111", "<CREDIT_CARD>"},
		{"visa bare", "creditCard", "4111111111111111", "<CREDIT_CARD>"},
		{"mastercard", "creditCard", "5555 5555 5555 4444", "<CREDIT_CARD>"},
		{"mastercard 2-series", "creditCard", "2223 0031 2200 3222", "<CREDIT_CARD>"},
		{"amex 4-6-5", "creditCard", "amex 3782 822463 10005", "amex <CREDIT_CARD>"},
		{"amex bare", "creditCard", "378282246310005", "<CREDIT_CARD>"},
		{"diners 4-6-4", "creditCard", "3056 930902 5904", "<CREDIT_CARD>"},
		{"discover", "creditCard", "6011 0009 9013 9424", "<CREDIT_CARD>"},
		{"13 digits", "creditCard", "4111111111119", "<CREDIT_CARD>"},
		{"19 digits", "creditCard", "4000 0000 0000 0000 006", "<CREDIT_CARD>"},
		{"fails the luhn check", "creditCard", "4111 1111 1111 1112", ""},
		{"first digit 1 (13-digit millisecond time)", "creditCard", "at 1700000000004 ms", ""},
		{"first digit 7", "creditCard", "7111111111111114", ""},
		{"20 digits", "creditCard", "41111111111111111115", ""},
		{"12 digits", "creditCard", "4111 1111 1111", ""},

		// phoneNumber
		{"north american with parentheses", "phoneNumber", "call (555) 123-4567 now", "call <PHONE_NUMBER> now"},
		{"north american with hyphens", "phoneNumber", "555-123-4567", "<PHONE_NUMBER>"},
		{"north american with dots", "phoneNumber", "555.123.4567", "<PHONE_NUMBER>"},
		{"north american without space after parenthesis", "phoneNumber", "(555)123-4567", "<PHONE_NUMBER>"},
		{"+1 with spaces", "phoneNumber", "+1 555 123 4567", "<PHONE_NUMBER>"},
		{"+1 with hyphens", "phoneNumber", "+1-800-555-1234", "<PHONE_NUMBER>"},
		{"+1 and parentheses", "phoneNumber", "+1 (800) 555-1234", "<PHONE_NUMBER>"},
		{"1-800", "phoneNumber", "1-800-555-1234", "<PHONE_NUMBER>"},
		{"north american bare", "phoneNumber", "2125551234", "<PHONE_NUMBER>"},
		{"north american bare with 1", "phoneNumber", "12125551234", "<PHONE_NUMBER>"},
		{"international bare", "phoneNumber", "+15551234567", "<PHONE_NUMBER>"},
		{"united kingdom international", "phoneNumber", "+44 20 7946 0958", "<PHONE_NUMBER>"},
		{"germany international with (0)", "phoneNumber", "+49 (0)30 1234567", "<PHONE_NUMBER>"},
		{"india international", "phoneNumber", "+91 98765 43210", "<PHONE_NUMBER>"},
		{"united kingdom national", "phoneNumber", "020 7946 0958", "<PHONE_NUMBER>"},
		{"germany national", "phoneNumber", "030 1234567", "<PHONE_NUMBER>"},
		{"germany national with parentheses", "phoneNumber", "(030) 123 4567", "<PHONE_NUMBER>"},
		{"israel mobile", "phoneNumber", "050-1234567", "<PHONE_NUMBER>"},
		{"brazil", "phoneNumber", "(11) 91234-5678", "<PHONE_NUMBER>"},
		{"unix time is not a phone number", "phoneNumber", "ts=1712345678", ""},
		{"seven digits", "phoneNumber", "123-4567", ""},
		{"date", "phoneNumber", "2023-10-15 12:30", ""},
		{"ip address", "phoneNumber", "192.168.1.100", ""},
		{"too short international", "phoneNumber", "+1 23", ""},
		{"too long international", "phoneNumber", "+123456789012345678", ""},
		{"ssn shape", "phoneNumber", "123-45-6789", ""},
		{"card shape", "phoneNumber", "4111 1111 1111 1111", ""},

		// email
		{"email", "email", "Contact john.doe@example.com", "Contact <EMAIL_ADDRESS>"},
		{"email with tag and subdomains", "email", "a+tag@sub.example.co.uk", "<EMAIL_ADDRESS>"},
		{"email keeps the full stop after it", "email", "Mail x_y@ex-ample.org.", "Mail <EMAIL_ADDRESS>."},
		{"two emails", "email", "test@example.com or support@domain.org", "<EMAIL_ADDRESS> or <EMAIL_ADDRESS>"},
		{"emails separated by a comma", "email", "a@b.co,c@d.co", "<EMAIL_ADDRESS>,<EMAIL_ADDRESS>"},
		{"email in angle brackets", "email", "Jane <jane@example.com>", "Jane <<EMAIL_ADDRESS>>"},
		{"no dot in the domain", "email", "user@localhost", ""},
		{"no local part", "email", "@example.com", ""},
		{"no domain", "email", "foo@ bar", ""},
		{"empty label", "email", "a@b..c", ""},

		// caSin
		{"sin with spaces", "caSin", "SIN: 046 454 286", "SIN: <CA_SIN>"},
		{"sin with hyphens", "caSin", "046-454-286", "<CA_SIN>"},
		{"sin bare", "caSin", "046454286", "<CA_SIN>"},
		{"sin failing the luhn check", "caSin", "123 456 789", ""},
		{"all zeros", "caSin", "000 000 000", ""},
		{"sin inside a longer number", "caSin", "046 454 2861", ""},
		{"sin with one separator", "caSin", "046-454286", ""},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			g := mustNew(t, Spec{Builtins: []string{tc.builtin}})
			want := tc.want
			if want == "" {
				want = tc.in
			}
			if got := maskString(g, tc.in); got != want {
				t.Errorf("%s on %q:\n got %q\nwant %q", tc.builtin, tc.in, got, want)
			}
			// Every builtin also behaves the same next to all the others
			// when nothing else matches.
			v, _ := g.Check([]byte(tc.in))
			if (v == Masked) != (tc.want != "") {
				t.Errorf("verdict %v", v)
			}
		})
	}
}

func TestMask(t *testing.T) {
	cases := []struct {
		desc string
		spec Spec
		in   string
		want string // "" means unchanged
	}{
		{"agentgateway's mixed example", Spec{Builtins: allBuiltins},
			"User: john.doe@example.com, Phone: (555) 123-4567, Website: https://example.com, Card: 4111-1111-1111-1111, SSN: 123-45-6789",
			"User: <EMAIL_ADDRESS>, Phone: <PHONE_NUMBER>, Website: https://example.com, Card: <CREDIT_CARD>, SSN: <SSN>"},
		{"nothing to mask", Spec{Builtins: allBuiltins},
			"In 2023 we shipped 1,234 units to 56 stores for $7,890.12 (up 3.4%).", ""},
		{"same span: the rule listed first labels it", Spec{Builtins: []string{"ssn", "caSin"}},
			"046454286", "<SSN>"},
		{"same span, other order", Spec{Builtins: []string{"caSin", "ssn"}},
			"046454286", "<CA_SIN>"},
		{"overlapping builtins are masked as one", Spec{Builtins: allBuiltins},
			"id 123-45-6789@example.com end", "id <SSN> end"},
		{"overlap labelled by the first start", Spec{Builtins: []string{"email", "ssn"}},
			"x123-45-6789@example.com", "<EMAIL_ADDRESS>"},
		{"adjacent matches stay two", Spec{Builtins: allBuiltins},
			"123-45-6789 4111111111111111", "<SSN> <CREDIT_CARD>"},
		{"a builtin listed twice", Spec{Builtins: []string{"email", "email"}},
			"a@b.co", "<EMAIL_ADDRESS>"},
		{"user pattern", Spec{Patterns: []string{`(?i)project\s+falcon`}},
			"Tell me about Project  Falcon today", "Tell me about <masked> today"},
		{"user pattern, every match", Spec{Patterns: []string{`secret-[0-9a-f]+`}},
			"secret-abc and secret-123", "<masked> and <masked>"},
		{"overlapping user patterns", Spec{Patterns: []string{`foo bar`, `bar baz`}},
			"x foo bar baz y", "x <masked> y"},
		{"user pattern and builtin overlap", Spec{Builtins: []string{"email"}, Patterns: []string{`example\.com/\w+`}},
			"me@example.com/path", "<EMAIL_ADDRESS>"},
		{"user pattern over a label's text is applied to the original", Spec{Builtins: []string{"ssn"}, Patterns: []string{`SSN`}},
			"SSN 123-45-6789", "<masked> <SSN>"},
		{"zero-width matches mask nothing", Spec{Patterns: []string{`x*`}},
			"abc", ""},
		{"zero-width and real matches", Spec{Patterns: []string{`x*`}},
			"axxb", "a<masked>b"},
		{"word boundary in a user pattern", Spec{Patterns: []string{`\bkey\b`}},
			"key monkey keys key.", "<masked> monkey keys <masked>."},
		{"multiline anchor", Spec{Patterns: []string{`(?m)^password:.*$`}},
			"user: a\npassword: hunter2\nok", "user: a\n<masked>\nok"},

		// unicode
		{"accents around a phone number", Spec{Builtins: allBuiltins},
			"Mon numéro: 555-123-4567 — merci", "Mon numéro: <PHONE_NUMBER> — merci"},
		{"emoji glued to a phone number", Spec{Builtins: allBuiltins},
			"📞555-123-4567📞", "📞<PHONE_NUMBER>📞"},
		{"\\b is ASCII: a non-ASCII letter is a boundary", Spec{Builtins: []string{"ssn"}},
			"é123-45-6789", "é<SSN>"},
		{"fullwidth digits are not digits", Spec{Builtins: allBuiltins},
			"５５５-１２３-４５６７ ４１１１１１１１１１１１１１１１", ""},
		{"cyrillic text with an email", Spec{Builtins: allBuiltins},
			"электронная почта: ivan@example.ru, спасибо", "электронная почта: <EMAIL_ADDRESS>, спасибо"},
		{"unicode user pattern", Spec{Patterns: []string{`(?i)пароль:\s*\S+`}},
			"Мой ПАРОЛЬ: секрет!", "Мой <masked>"},
		{"invalid utf-8 around a match", Spec{Builtins: allBuiltins},
			"\xff123-45-6789\xfe", "\xff<SSN>\xfe"},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			g := mustNew(t, tc.spec)
			want := tc.want
			if want == "" {
				want = tc.in
			}
			if got := maskString(g, tc.in); got != want {
				t.Errorf("on %q:\n got %q\nwant %q", tc.in, got, want)
			}
			v, masked := g.Check([]byte(tc.in))
			switch {
			case tc.want == "" && (v != Clean || masked != nil):
				t.Errorf("Check: %v %q, want clean", v, masked)
			case tc.want != "" && (v != Masked || string(masked) != want):
				t.Errorf("Check: %v %q, want masked %q", v, masked, want)
			}
		})
	}
}

func TestReject(t *testing.T) {
	cases := []struct {
		desc string
		spec Spec
		in   string
		want Verdict
	}{
		{"email rejected", Spec{Builtins: []string{"email"}, Action: ActionReject}, "My email is test@example.com", Rejected},
		{"clean text passes", Spec{Builtins: []string{"email"}, Action: ActionReject}, "My email is secret", Clean},
		{"pattern rejected", Spec{Patterns: []string{"SSN", "Social Security"}, Action: ActionReject}, "Is this my Social Security number", Rejected},
		{"a card failing its check is no match", Spec{Builtins: []string{"creditCard"}, Action: ActionReject}, "4111 1111 1111 1112", Clean},
		{"after a failing candidate", Spec{Builtins: []string{"creditCard"}, Action: ActionReject}, "4111 1111 1111 1112 and 4111 1111 1111 1111", Rejected},
		{"only an empty match", Spec{Patterns: []string{`z*`}, Action: ActionReject}, "abc", Clean},
		{"mask is the default", Spec{Builtins: []string{"ssn"}}, "123-45-6789", Masked},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			g := mustNew(t, tc.spec)
			v, masked := g.Check([]byte(tc.in))
			if v != tc.want {
				t.Fatalf("verdict %v, want %v", v, tc.want)
			}
			if v != Masked && masked != nil {
				t.Errorf("masked %q with verdict %v", masked, v)
			}
			// Responses always mask, whatever the action.
			if (g.Mask([]byte(tc.in)) != nil) != (tc.want != Clean) {
				t.Errorf("Mask disagrees with the verdict")
			}
		})
	}
}

func TestNewErrors(t *testing.T) {
	cases := []struct {
		desc string
		spec Spec
		want string
	}{
		{"unknown builtin", Spec{Builtins: []string{"ssn", "ssnn"}},
			`builtins[1]: unknown builtin "ssnn" (known: ssn, creditCard, phoneNumber, email, caSin)`},
		{"builtin names are case-sensitive", Spec{Builtins: []string{"SSN"}}, `builtins[0]: unknown builtin "SSN"`},
		{"invalid pattern", Spec{Patterns: []string{"ok", "a(b"}},
			"patterns[1]: invalid regular expression \"a(b\": error parsing regexp: missing closing ): `a(b`"},
		{"perl lookahead", Spec{Patterns: []string{`a(?=b)`}}, `patterns[0]: invalid regular expression "a(?=b)"`},
		{"empty pattern", Spec{Patterns: []string{""}}, "patterns[0]: empty pattern"},
		{"unknown action", Spec{Action: "block"}, `action: unknown action "block" (want "mask" or "reject")`},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			_, err := New(tc.spec)
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("error %v, want one starting %q", err, tc.want)
			}
		})
	}
}

func TestMaxMatchLen(t *testing.T) {
	cases := []struct {
		desc    string
		pattern string
		want    int
	}{
		{"literal", `abc`, 3},
		{"bounded repeat", `a{2,5}`, 5},
		{"optional", `ab?`, 2},
		{"alternation", `ab|cdef`, 4},
		{"class with wide runes", `[a-é]`, 2},
		{"any rune", `.`, 4},
		{"case folding widens k to the kelvin sign", `(?i)k`, 3},
		{"assertions are empty", `\bfoo\b$`, 3},
		{"star", `a*`, -1},
		{"plus", `a+b`, -1},
		{"open repeat", `a{2,}`, -1},
		{"star of empty", `(?:)*x`, 1},
		{"capture", `(ab){3}`, 6},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			re, err := syntax.Parse(tc.pattern, syntax.Perl)
			if err != nil {
				t.Fatal(err)
			}
			if got := maxMatchLen(re); got != tc.want {
				t.Errorf("maxMatchLen(%q) = %d, want %d", tc.pattern, got, tc.want)
			}
		})
	}
}

func TestIndexDigitOrAt(t *testing.T) {
	cases := []struct {
		desc       string
		in         string
		from       int
		digits, at bool
		want       int
	}{
		{"nothing", "hello world, how are you today?", 0, true, true, -1},
		{"digit in the second word", "abcdefgh1", 0, true, true, 8},
		{"at sign", "abcdefghij@", 0, true, true, 10},
		{"digits only", "ab@cdefghij5", 0, true, false, 11},
		{"at only", "ab5cdefghij@", 0, false, true, 11},
		{"neither wanted", "12@", 0, false, false, -1},
		{"from", "1bcdefghij2", 1, true, true, 10},
		{"bytes around digits", "/:\x80\xff0", 0, true, true, 4},
		{"high bytes are not digits", "\xb0\xb9\xc0\xc0\xb0\xb9\xb0\xb9", 0, true, true, -1},
		// Sixteen bytes a turn: a find in either word of a pair, and after.
		{"first word of a pair", "abc4efghijklmnopq", 0, true, true, 3},
		{"second word of a pair", "abcdefghijk@mnopq", 0, true, true, 11},
		{"both words: the first wins", "abcdefg7ijklmn@pq", 0, true, true, 7},
		{"after two pairs", "abcdefghijklmnopabcdefghijklmnop" + "abcdefgh9", 0, true, true, 40},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			if got := indexDigitOrAt([]byte(tc.in), tc.from, tc.digits, tc.at); got != tc.want {
				t.Errorf("got %d, want %d", got, tc.want)
			}
		})
	}
}

// cleanPrompt is a 4 KiB chat prompt without anything to mask: prose with
// years, prices, percentages, versions and short numbers, as users write.
var cleanPrompt = func() []byte {
	para := "You are a helpful assistant. In 2023 our team shipped 1,234 units across 56 stores, " +
		"and revenue grew 3.4% to $7,890.12 per store. Version 2.10.3 fixed 17 bugs; the 4 remaining ones " +
		"are tracked in issue #512. Please summarize the quarterly report below in 5 bullet points, " +
		"keep each under 20 words, and suggest 3 follow-up questions for the meeting on March 14. "
	var b bytes.Buffer
	for b.Len() < 4096 {
		b.WriteString(para)
	}
	return b.Bytes()[:4096]
}()

func TestCheckAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	g := mustNew(t, Spec{Builtins: allBuiltins})
	if v, _ := g.Check(cleanPrompt); v != Clean {
		t.Fatalf("the clean prompt is %v", v)
	}
	if n := testing.AllocsPerRun(100, func() { g.Check(cleanPrompt) }); n != 0 {
		t.Errorf("Check of a clean prompt: %v allocations, want 0", n)
	}
	r := mustNew(t, Spec{Builtins: allBuiltins, Action: ActionReject})
	if n := testing.AllocsPerRun(100, func() { r.Check(cleanPrompt) }); n != 0 {
		t.Errorf("rejecting Check of a clean prompt: %v allocations, want 0", n)
	}
}

// TestFindEmailMatchesRegexp: the email builtin's own matcher finds what
// its pattern finds, from every offset, on random strings over the bytes
// the pattern cares about.
func TestFindEmailMatchesRegexp(t *testing.T) {
	re := regexp.MustCompile(emailPattern)
	rng := rand.New(rand.NewPCG(1, 2))
	const alphabet = "ab9-_.+@ @.éZ"
	for range 50000 {
		b := make([]byte, rng.IntN(24))
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		for pos := 0; pos <= len(b); pos++ {
			start, end := findEmail(b, pos)
			want := []int{-1, -1}
			if loc := re.FindIndex(b[pos:]); loc != nil {
				want = []int{loc[0] + pos, loc[1] + pos}
			}
			if start != want[0] || end != want[1] {
				t.Fatalf("findEmail(%q, %d) = %d, %d; regexp: %v", b, pos, start, end, want)
			}
		}
	}
}

// TestAppendMaskParts: the parts of one text are masked as the text joined
// and each part alone would be, each part keeping its own text.
func TestAppendMaskParts(t *testing.T) {
	g, err := New(Spec{Builtins: []string{"ssn", "creditCard"}, Patterns: []string{"forbidden"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		parts, want []string
	}{
		{[]string{"no ", "match"}, nil},
		{[]string{"ssn 123-45-", "6789 ok"}, []string{"ssn <SSN>", " ok"}},
		{[]string{"card 4111 1111 ", "1111", " 1111 end"}, []string{"card <CREDIT_CARD>", "", " end"}},
		{[]string{"forbid", "den"}, []string{"<masked>", ""}},
		// A part's edge bounds a match the joined text does not see.
		{[]string{"123-45-6789", "123-45-6789"}, []string{"<SSN>", "<SSN>"}},
	} {
		text := []byte(strings.Join(tc.parts, ""))
		var ends []int
		n := 0
		for _, p := range tc.parts {
			n += len(p)
			ends = append(ends, n)
		}
		cuts := make([]int, len(ends))
		out, ok := g.AppendMaskParts([]byte("x"), text, ends, cuts)
		if !ok {
			if tc.want != nil {
				t.Errorf("%q: nothing masked", tc.parts)
			}
			continue
		}
		var got []string
		from := 1
		for _, c := range cuts {
			got = append(got, string(out[from:c]))
			from = c
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%q: %q, want %q", tc.parts, got, tc.want)
		}
	}
}

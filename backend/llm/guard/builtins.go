package guard

import (
	"bytes"
	"regexp"
	"regexp/syntax"
	"strings"
)

// The builtins, as agentgateway names them in `promptGuard.*.regex.rules[].builtin`.
// Each is a regular expression (RE2 syntax, ASCII \d and \b) plus, where the
// number has one, a validity check run on every match. A match that fails it
// is cut to its longest prefix that the regexp matches in full and that
// passes ("4111 1111 1111 1111 2" starts with a card); failing that, it is not
// masked and the search goes on one character after its start, so a long
// candidate that fails (digit groups run together) hides no number inside it.
// Presidio, and so agentgateway, search on after a failed match's end.
//
// agentgateway (crates/agentgateway/src/llm/policy/pii) ports Presidio's
// recognizers without their validators and masks every match of every pattern,
// whatever its score. The differences below are deliberate; each removes false
// positives that no real number of the kind can produce, or adds real formats
// it missed:
//
//   - ssn: agentgateway's strong forms (3-2-4 digits with '-', ' ' or '.'
//     between the groups, or 9 digits bare). Presidio's "very weak" 5-4 and 3-6
//     forms are dropped: 5-4 is a ZIP+4 code ("94105-1234") and no SSN is
//     written 3-6. Checked: area not 000 or 666, group not 00, serial not 0000
//     (the SSA never issues those). Areas 900-999 are kept: they are ITINs,
//     taxpayer numbers that are as sensitive.
//   - creditCard: 13-19 digits, first digit 2-6 (Mastercard 2-series and 5,
//     Amex/Diners/JCB 3, Visa 4, Discover/UnionPay/Maestro/RuPay 6), grouped
//     as printed: 4-4-4-4 with an optional 1-3 tail (up to 19 digits), Amex
//     4-6-5, Diners 4-6-4, or bare. Every match must pass the Luhn check: all
//     these networks issue Luhn-valid numbers, while 9 in 10 random digit
//     runs fail it. agentgateway has no check (Presidio's Luhn validator is
//     commented out) and allows first digit 1 ("diners", really UATP airline
//     cards); 1 is dropped because 13-digit millisecond timestamps start with
//     1 until 2033. agentgateway's groups miss Amex 4-6-5 and Mastercard's
//     2-series; these are added.
//   - phoneNumber: agentgateway parses candidates with libphonenumber for US,
//     CA, GB, DE, IL, IN and BR. A regular expression cannot validate numbers
//     per region, so the builtin takes the written shapes: North American
//     (optional +1/1, area code in parentheses or followed by a separator,
//     then 3 and 4 digits with separators; or 10-11 digits bare with a valid
//     NANP area code and exchange, which no 10-digit Unix time before 2033
//     has), international (+ country code, groups, optional "(0)"), national
//     with a trunk 0 ("020 7946 0958", "030 1234567", "(030) 123 4567",
//     "050-1234567") and Brazilian "(11) 91234-5678". Checked: 8 to 15 digits
//     (E.164's maximum). A digit starts a number only after a word boundary;
//     '(' and '+' start one anywhere, so that a label masked just before
//     them cannot make a match that was not there.
//   - email: agentgateway's local part and domain, except that the domain
//     ends with a label, so a sentence's full stop after an address is kept.
//   - caSin: agentgateway's forms (3-3-3 digits with '-' or ' ', or 9 bare).
//     Checked: the Luhn check, which every SIN passes, and not all zeros.
//
// Labels are agentgateway's: "<" + entity type + ">", and "<masked>" for a
// user pattern.
type builtin struct {
	name  string // the name in the config file
	label string // what a match is replaced with
	re    *regexp.Regexp
	// resume matches one rune and then re: it finds the next match at or
	// after an offset while reading the rune before it as context.
	resume *regexp.Regexp
	// whole matches all of a text that re matches (refining a match that
	// failed its check).
	whole *regexp.Regexp
	// contextFree: re never looks before a match.
	contextFree bool
	// findPlain, when set, finds what re finds on text[pos:] (as offsets
	// into text, -1 for none) without regexp's search and its allocation.
	findPlain func(text []byte, pos int) (start, end int)
	// alternatives are the top-level alternatives of a numeric builtin's
	// pattern, tried at each place a match can start.
	alternatives []alternative
	group        group
	// minDigits is the fewest ASCII digits a valid match has; a run of
	// candidate bytes with fewer is not searched.
	minDigits int
	check     func(match []byte) bool
}

// group is the set of bytes a builtin's matches are made of: a match lies
// within one maximal run of its group's bytes.
type group uint8

const (
	// numeric bytes: digits and the separators "-. ()+".
	numeric group = iota
	// address bytes: letters, digits and "_.+-@".
	address
)

// alternative is one top-level alternative of a numeric builtin's pattern.
// Trying them in order at one place is what the alternation does there. gate
// is a necessary condition at text[p], where a digit group of g digits starts
// (g is 0 when text[p] is not a digit), that skips an alternative cheaply.
// An alternative with a fixed shape is matched by hand (match, checked
// against the pattern by FuzzMask); the others by their regexp.
type alternative struct {
	pattern string
	gate    func(text []byte, p, g int) bool
	match   func(text []byte, p int) int // the end of the match at p, or -1
	// at matches the pattern at the start of a text, atAfter after one rune
	// of context.
	at, atAfter *regexp.Regexp
	maxLen      int // the longest match
}

var (
	ssnAlternatives = []alternative{
		{pattern: `\b\d{3}(?:[- .]\d{2}[- .]|\d{2})\d{4}\b`, match: matchSSN},
	}
	creditCardAlternatives = []alternative{
		{pattern: `\b[2-6]\d{3}(?:[- ]?\d{4}){2,3}(?:[- ]?\d{1,3})?\b`,
			gate: func(t []byte, p, g int) bool { return t[p] >= '2' && t[p] <= '6' && g >= 4 }},
		{pattern: `\b3\d{3}[- ]?\d{6}[- ]?\d{4,5}\b`,
			gate: func(t []byte, p, g int) bool { return t[p] == '3' && g >= 4 }},
	}
	// A digit must start a word (\b), but '(' and '+' may follow anything: a
	// mask put before them must not turn a non-match into a match.
	phoneAlternatives = []alternative{
		// North American, written with separators. Starting with a digit, it
		// is 1 and a prefix, or a 3-3-4 shape.
		{pattern: `(?:(?:\+|\b)1[-. ]?)?(?:\(\d{3}\)[-. ]?|\b\d{3}[-. ])\d{3}[-. ]\d{4}\b`,
			gate: func(t []byte, p, g int) bool {
				return g == 0 || g == 1 && t[p] == '1' ||
					g == 3 && sepAt(t, p+3, "-. ") && digitsAt(t, p+4) == 3 && sepAt(t, p+7, "-. ") && digitsAt(t, p+8) == 4
			}},
		// North American, bare.
		{pattern: `\b1?[2-9]\d{2}[2-9]\d{6}\b`,
			gate: func(t []byte, p, g int) bool { return g == 10 && t[p] >= '2' || g == 11 && t[p] == '1' }},
		// International.
		{pattern: `\+[1-9]\d{0,2}(?:[-. ]?(?:\(\d{1,4}\)[-. ]?)?\d{1,6}){1,6}\b`,
			gate: func(t []byte, p, _ int) bool { return t[p] == '+' }},
		// National, with trunk prefix 0.
		{pattern: `(?:\(0\d{1,4}\)[-. ]?|\b0\d{1,4}[-. ])\d{3,4}[-. ]?\d{3,4}\b`,
			gate: func(t []byte, p, g int) bool {
				return t[p] == '(' || t[p] == '0' && g >= 2 && g <= 5 && sepAt(t, p+g, "-. ")
			}},
		// Brazilian.
		{pattern: `\(\d{2}\) ?\d{4,5}-\d{4}\b`,
			gate: func(t []byte, p, _ int) bool { return t[p] == '(' }},
	}
	caSinAlternatives = []alternative{
		{pattern: `\b\d{3}(?:[- ]\d{3}[- ]|\d{3})\d{3}\b`, match: matchSIN},
	}

	emailPattern = `[A-Za-z0-9_.+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+`
)

// findEmail finds emailPattern's leftmost-first match in text[pos:]:
// `[A-Za-z0-9_.+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+`. Neither class holds
// '@', so a match is the run of local-part bytes just before some '@' (from
// its start: the leftmost start) and the greedy domain after it; the first
// '@' that has both is the leftmost match, since every later '@”s run
// starts after it. FuzzMask checks it against the regexp.
func findEmail(text []byte, pos int) (start, end int) {
	for {
		i := bytes.IndexByte(text[pos:], '@')
		if i < 0 {
			return -1, -1
		}
		at := pos + i
		start = at
		for start > pos && emailLocal(text[start-1]) {
			start--
		}
		if start < at {
			if end = emailDomainEnd(text, at+1); end >= 0 {
				return start, end
			}
		}
		pos = at + 1
	}
}

// emailDomainEnd returns the end of `[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+` at
// text[i:], taken greedily, or -1.
func emailDomainEnd(text []byte, i int) int {
	j := i
	for j < len(text) && emailLabel(text[j]) {
		j++
	}
	if j == i {
		return -1
	}
	end := -1
	for j < len(text) && text[j] == '.' {
		k := j + 1
		for k < len(text) && emailLabel(text[k]) {
			k++
		}
		if k == j+1 {
			break
		}
		end, j = k, k
	}
	return end
}

func emailLabel(c byte) bool {
	return c-'a' < 26 || c-'A' < 26 || c-'0' < 10 || c == '-'
}

func emailLocal(c byte) bool { return emailLabel(c) || c == '_' || c == '.' || c == '+' }

// matchSSN matches `\d{3}(?:[- .]\d{2}[- .]|\d{2})\d{4}\b` at p (the caller
// saw the \b before it).
func matchSSN(t []byte, p int) int { return matchNineDigits(t, p, 2, "- .") }

// matchSIN matches `\d{3}(?:[- ]\d{3}[- ]|\d{3})\d{3}\b` at p (the caller
// saw the \b before it).
func matchSIN(t []byte, p int) int { return matchNineDigits(t, p, 3, "- ") }

// matchNineDigits matches nine digits at p, bare or in groups of 3, mid and
// 6-mid separated by one of seps: `\d{3}(?:[seps]\d{mid}[seps]|\d{mid})\d{6-mid}\b`.
func matchNineDigits(t []byte, p, mid int, seps string) int {
	q := p + 3
	switch g := digitsAt(t, p); {
	case g == 9:
		q = p + 9
	case g == 3 && sepAt(t, q, seps) && digitsAt(t, q+1) == mid && sepAt(t, q+1+mid, seps) && digitsAt(t, q+2+mid) >= 6-mid:
		q += 8 // separator, mid digits, separator, 6-mid digits
	default:
		return -1
	}
	if q < len(t) && isWordByte(t[q]) {
		return -1
	}
	return q
}

// digitsAt counts the ASCII digits from t[q] on.
func digitsAt(t []byte, q int) int {
	n := 0
	for q+n < len(t) && t[q+n]-'0' <= 9 {
		n++
	}
	return n
}

func sepAt(t []byte, q int, seps string) bool {
	return q < len(t) && strings.IndexByte(seps, t[q]) >= 0
}

// builtins in the order of agentgateway's Builtin enum.
var builtins = []*builtin{
	numericBuiltin(builtin{name: "ssn", label: "<SSN>", minDigits: 9, check: validSSN}, ssnAlternatives),
	numericBuiltin(builtin{name: "creditCard", label: "<CREDIT_CARD>", minDigits: 13, check: validCard}, creditCardAlternatives),
	numericBuiltin(builtin{name: "phoneNumber", label: "<PHONE_NUMBER>", minDigits: 8, check: validPhone}, phoneAlternatives),
	newBuiltin(builtin{name: "email", label: "<EMAIL_ADDRESS>", group: address, findPlain: findEmail}, emailPattern),
	numericBuiltin(builtin{name: "caSin", label: "<CA_SIN>", minDigits: 9, check: validSIN}, caSinAlternatives),
}

func newBuiltin(b builtin, pattern string) *builtin {
	b.re = regexp.MustCompile(pattern)
	b.resume = regexp.MustCompile(resumeSource(pattern))
	b.whole = regexp.MustCompile(`^(?:` + pattern + `)$`)
	parsed, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		panic(err)
	}
	b.contextFree = !readsBefore(parsed)
	return &b
}

// numericBuiltin joins the alternatives into the builtin's pattern. Its
// matches are bounded, and every alternative that can start with a digit
// starts with \b.
func numericBuiltin(b builtin, alts []alternative) *builtin {
	b.group = numeric
	b.alternatives = alts
	var pattern strings.Builder
	for i := range alts {
		a := &alts[i]
		if i > 0 {
			pattern.WriteByte('|')
		}
		pattern.WriteString(a.pattern)
		a.at = regexp.MustCompile(`^(?:` + a.pattern + `)`)
		a.atAfter = regexp.MustCompile(`^(?s:.)(?:` + a.pattern + `)`)
		parsed, err := syntax.Parse(a.pattern, syntax.Perl)
		if err != nil {
			panic(err)
		}
		if a.maxLen = maxMatchLen(parsed); a.maxLen < 0 {
			panic("guard: builtin " + b.name + " has no bound on its matches")
		}
	}
	return newBuiltin(b, pattern.String())
}

// userLabel replaces a match of a user pattern (agentgateway's "<masked>").
const userLabel = "<masked>"

// resumeSource is the pattern that matches one rune of context and then p.
func resumeSource(p string) string { return `(?s:.)(?:` + p + `)` }

// validSSN refuses the numbers the SSA never issues: area 000 or 666, group
// 00, serial 0000.
func validSSN(m []byte) bool {
	var d [9]byte
	if collectDigits(d[:], m) != 9 {
		return false
	}
	area := string(d[0:3])
	return area != "000" && area != "666" && string(d[3:5]) != "00" && string(d[5:9]) != "0000"
}

// validCard takes 13 to 19 digits that pass the Luhn check.
func validCard(m []byte) bool {
	ok, n := luhn(m)
	return ok && n >= 13 && n <= 19
}

// validPhone takes 8 to 15 digits, country code included.
func validPhone(m []byte) bool {
	n := 0
	for _, c := range m {
		if c >= '0' && c <= '9' {
			n++
		}
	}
	return n >= 8 && n <= 15
}

// validSIN takes 9 digits, not all zeros, that pass the Luhn check (the SIN's
// own check digit scheme).
func validSIN(m []byte) bool {
	ok, n := luhn(m)
	if !ok || n != 9 {
		return false
	}
	for _, c := range m {
		if c >= '1' && c <= '9' {
			return true
		}
	}
	return false
}

// luhn runs the Luhn check over the ASCII digits of m (other bytes are
// skipped) and counts them.
func luhn(m []byte) (ok bool, digits int) {
	sum := 0
	for i := len(m) - 1; i >= 0; i-- {
		c := m[i]
		if c < '0' || c > '9' {
			continue
		}
		d := int(c - '0')
		if digits&1 == 1 {
			d *= 2
			if d > 9 {
				d -= 9
			}
		}
		sum += d
		digits++
	}
	return digits > 0 && sum%10 == 0, digits
}

// collectDigits copies the ASCII digits of m into dst and returns how many m
// has (more than len(dst) means dst holds the first len(dst)).
func collectDigits(dst, m []byte) int {
	n := 0
	for _, c := range m {
		if c >= '0' && c <= '9' {
			if n < len(dst) {
				dst[n] = c
			}
			n++
		}
	}
	return n
}

// byteClass marks the bytes of each group.
var byteClass = func() (t [256]uint8) {
	for c := '0'; c <= '9'; c++ {
		t[c] |= 1<<numeric | 1<<address
	}
	for _, c := range "-. ()+" {
		t[c] |= 1 << numeric
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c] |= 1 << address
		t[c-'a'+'A'] |= 1 << address
	}
	for _, c := range "_.+-@" {
		t[c] |= 1 << address
	}
	return t
}()

func inGroup(c byte, g group) bool { return byteClass[c]&(1<<g) != 0 }

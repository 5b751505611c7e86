// Package guard owns the content guards on LLM prompts and responses: the
// regex kind here (agentgateway's `promptGuard` `regex` rules: builtin
// sensitive-data recognizers and user patterns, masked or rejected); webhook
// and cloud guardrails come later. It depends on the standard library only and
// knows nothing of the config package: the caller builds a Spec.
//
// A Guard is compiled once and is safe for concurrent use. Check applies it to
// one text (a message's content) and allocates nothing when nothing matches;
// StreamMasker applies it to a stream of deltas, masking matches split across
// them. The builtins' definitions and their departures from agentgateway are
// in builtins.go, the stream's hold-back rule in stream.go.
//
// Matching. Every rule searches the whole text on its own, leftmost-first
// and non-overlapping as regexp's FindAll does; empty matches are ignored. A
// builtin's match that fails its check is cut to its longest prefix that
// passes, or else dropped, and the search then goes on one character after
// its start, not its end, so a failed candidate hides nothing (builtins.go).
// The matches of all rules are then merged: matches that overlap (share at
// least one byte) become one masked span, labelled by the match that starts
// first, or among those that start together by the rule listed first
// (builtins in Spec order, then patterns in Spec order). agentgateway applies
// its rules one after the other, each on the text the previous ones masked,
// so there a later rule can match a label or miss a number an earlier mask
// cut in two; here every rule reads the original text, and overlapping
// matches are masked whole.
//
// Masking the builtins' matches leaves no match behind (FuzzMask): no
// builtin's match begins or ends where a label could change a word boundary.
// A user pattern with \b, or one beside a builtin's digits, can see a
// boundary a label made ("0000KEY=0" with key=\S+: once "KEY=0" is masked the
// digits end a word), so a second pass may find more.
package guard

import (
	"fmt"
	"regexp"
	"regexp/syntax"
	"slices"
	"strings"
	"unicode/utf8"
)

// Action is what a guard does with text that matches: agentgateway's
// `action`. The zero value masks, as agentgateway's default does.
type Action string

const (
	// ActionMask replaces every match with its label.
	ActionMask Action = "mask"
	// ActionReject refuses the whole text when anything matches.
	ActionReject Action = "reject"
)

// Spec is a regex guard as configured.
type Spec struct {
	// Builtins names builtin recognizers: ssn, creditCard, phoneNumber,
	// email, caSin.
	Builtins []string
	// Patterns are regular expressions in Go's RE2 syntax (\d, \w and \b are
	// ASCII; agentgateway's Rust regex makes them Unicode-aware).
	Patterns []string
	// Action is ActionMask (or empty) or ActionReject.
	Action Action
}

// Verdict is the outcome of Check.
type Verdict uint8

const (
	// Clean: nothing matched; the text goes on unchanged.
	Clean Verdict = iota
	// Masked: something matched and the masked text replaces the original.
	Masked
	// Rejected: something matched and the action is ActionReject.
	Rejected
)

func (v Verdict) String() string {
	switch v {
	case Clean:
		return "clean"
	case Masked:
		return "masked"
	case Rejected:
		return "rejected"
	}
	return "unknown"
}

// Guard is a compiled regex guard.
type Guard struct {
	rules  []rule
	action Action
	// numeric and address are the indexes in rules of the builtins whose
	// matches are runs of those bytes.
	numeric []int
	address []int
	// numericMinDigits is the smallest minDigits among numeric.
	numericMinDigits int
	// patterns is the index of the first user pattern in rules.
	patterns int
	// hold is how many bytes at the end of a stream's buffer the user
	// patterns need kept back (stream.go).
	hold int
	// plainLabels: every label is printable ASCII without '"' or '\\',
	// text a JSON string holds as is (PlainLabels).
	plainLabels bool
}

// PlainLabels reports whether every label the guard masks with is
// printable ASCII without '"' or '\\': masking a JSON string's text that
// needed no escapes then leaves text that needs none.
func (g *Guard) PlainLabels() bool { return g.plainLabels }

// jsonPlain reports whether s is printable ASCII without '"' or '\\'.
func jsonPlain(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// rule is one builtin or user pattern.
type rule struct {
	label  string
	re     *regexp.Regexp
	resume *regexp.Regexp
	// contextFree: the pattern never looks before a match (no \b, \B, ^),
	// so a search from an offset runs re on a slice.
	contextFree bool
	check       func([]byte) bool
	b           *builtin // nil for a user pattern
}

// span is a match: text[start:end] is replaced by rules[rule].label.
type span struct {
	start, end int
	rule       int
}

// New compiles a guard. Its errors name the offending entry as
// "builtins[i]" or "patterns[i]".
func New(spec Spec) (*Guard, error) {
	g := &Guard{action: spec.Action}
	switch spec.Action {
	case "":
		g.action = ActionMask
	case ActionMask, ActionReject:
	default:
		return nil, fmt.Errorf("action: unknown action %q (want %q or %q)", spec.Action, ActionMask, ActionReject)
	}
	for i, name := range spec.Builtins {
		b := builtinNamed(name)
		if b == nil {
			return nil, fmt.Errorf("builtins[%d]: unknown builtin %q (known: %s)", i, name, builtinNames())
		}
		if slices.ContainsFunc(g.rules, func(r rule) bool { return r.b == b }) {
			continue // listed twice: one rule does it
		}
		idx := len(g.rules)
		g.rules = append(g.rules, rule{label: b.label, re: b.re, resume: b.resume, contextFree: b.contextFree, check: b.check, b: b})
		switch b.group {
		case numeric:
			if len(g.numeric) == 0 || b.minDigits < g.numericMinDigits {
				g.numericMinDigits = b.minDigits
			}
			g.numeric = append(g.numeric, idx)
		case address:
			g.address = append(g.address, idx)
		}
	}
	g.patterns = len(g.rules)
	longest := 0
	for i, p := range spec.Patterns {
		if p == "" {
			return nil, fmt.Errorf("patterns[%d]: empty pattern (it would match nothing but empty text)", i)
		}
		re, err := regexp.Compile(p)
		if err != nil {
			return nil, fmt.Errorf("patterns[%d]: invalid regular expression %q: %w", i, p, err)
		}
		resume, err := regexp.Compile(resumeSource(p))
		if err != nil {
			return nil, fmt.Errorf("patterns[%d]: regular expression %q: %w", i, p, err)
		}
		parsed, err := syntax.Parse(p, syntax.Perl)
		if err != nil {
			return nil, fmt.Errorf("patterns[%d]: invalid regular expression %q: %w", i, p, err)
		}
		n := maxMatchLen(parsed)
		if n < 0 || n > StreamWindow {
			n = StreamWindow
		}
		longest = max(longest, n)
		g.rules = append(g.rules, rule{label: userLabel, re: re, resume: resume, contextFree: !readsBefore(parsed)})
	}
	if g.patterns < len(g.rules) {
		g.hold = longest + utf8.UTFMax
	}
	g.plainLabels = true
	for _, r := range g.rules {
		g.plainLabels = g.plainLabels && jsonPlain(r.label)
	}
	return g, nil
}

func builtinNamed(name string) *builtin {
	for _, b := range builtins {
		if b.name == name {
			return b
		}
	}
	return nil
}

func builtinNames() string {
	names := make([]string, len(builtins))
	for i, b := range builtins {
		names[i] = b.name
	}
	return strings.Join(names, ", ")
}

// Action reports the guard's action.
func (g *Guard) Action() Action { return g.action }

// Check applies the guard to text. With ActionMask it returns Masked and a
// new masked copy when anything matched; with ActionReject it returns
// Rejected and nil. When nothing matched it returns Clean and nil, and
// allocates nothing.
func (g *Guard) Check(text []byte) (Verdict, []byte) {
	if g.action == ActionReject {
		var buf [1]span
		if len(g.matches(text, 0, buf[:0], true)) > 0 {
			return Rejected, nil
		}
		return Clean, nil
	}
	masked, ok := g.AppendMask(nil, text)
	if !ok {
		return Clean, nil
	}
	return Masked, masked
}

// Mask masks text whatever the guard's action (response guards always
// mask): it returns a new masked copy, or nil when nothing matched.
func (g *Guard) Mask(text []byte) []byte {
	masked, _ := g.AppendMask(nil, text)
	return masked
}

// AppendMask appends text with every match masked to dst. When nothing
// matched it returns dst unchanged and false, without copying text.
func (g *Guard) AppendMask(dst, text []byte) ([]byte, bool) {
	var buf [8]span // most texts have few matches: no allocation for them
	spans := g.matches(text, 0, buf[:0], false)
	if len(spans) == 0 {
		return dst, false
	}
	return g.appendMasked(dst, text, 0, len(text), merge(spans)), true
}

// AppendMaskParts masks text that is parts joined, for parts kept apart
// (the text blocks of one message): part i is text[ends[i-1]:ends[i]],
// ends ascending and the last len(text). It appends each part's masked
// text to dst in turn and sets cuts[i] (len(cuts) >= len(ends)) to where
// part i's ends in dst. The matches are those of each part read alone
// and those of the joined text (which finds what is split across parts,
// and misses what a part's edge bounds: "123-45-6789" then "x" joined is
// no SSN). A match inside a part is its label there; a match across parts
// is its label in the part it starts in, and its rest is dropped from the
// parts it reaches, so that the parts joined read as text masked whole.
// When nothing matched it returns dst unchanged and false.
func (g *Guard) AppendMaskParts(dst, text []byte, ends, cuts []int) ([]byte, bool) {
	var buf [8]span
	spans := g.partMatches(text, ends, buf[:0], false)
	if len(spans) == 0 {
		return dst, false
	}
	spans = merge(spans)
	from := 0
	for i, to := range ends {
		at := from
		for _, s := range spans {
			if s.start >= to {
				break
			}
			if s.end <= at {
				continue
			}
			if s.start >= at {
				dst = append(dst, text[at:s.start]...)
				dst = append(dst, g.rules[s.rule].label...)
			} // else the match began in an earlier part, its label there
			at = min(s.end, to)
		}
		dst = append(dst, text[at:to]...)
		cuts[i] = len(dst)
		from = to
	}
	return dst, true
}

// CheckParts is Check of text that is parts joined (AppendMaskParts), for
// a guard that rejects: Rejected when a part alone or the joined text
// matches.
func (g *Guard) CheckParts(text []byte, ends []int) Verdict {
	var buf [1]span
	if len(g.partMatches(text, ends, buf[:0], true)) > 0 {
		return Rejected
	}
	return Clean
}

// partMatches appends the matches of each part of text alone (at their
// places in text) and of text whole; with first it stops at the first.
func (g *Guard) partMatches(text []byte, ends []int, dst []span, first bool) []span {
	from := 0
	for _, to := range ends {
		n := len(dst)
		dst = g.matches(text[from:to], 0, dst, first)
		for i := n; i < len(dst); i++ {
			dst[i].start += from
			dst[i].end += from
		}
		if first && len(dst) > 0 {
			return dst
		}
		from = to
	}
	return g.matches(text, 0, dst, first)
}

// appendMasked appends text[from:to] to dst with the (merged, sorted) spans
// replaced by their labels; a span crossing to is masked up to it.
func (g *Guard) appendMasked(dst, text []byte, from, to int, spans []span) []byte {
	at := from
	for _, s := range spans {
		if s.start >= to {
			break
		}
		if s.end <= at {
			continue
		}
		dst = append(dst, text[at:s.start]...)
		dst = append(dst, g.rules[s.rule].label...)
		at = min(s.end, to)
	}
	return append(dst, text[at:to]...)
}

// matches appends to dst the checked matches of every rule that start at or
// after from, reading text[:from] as what came before them (the rune just
// before from is the only part any rule looks at). With first it stops at
// the first match found. The result is unsorted and unmerged.
func (g *Guard) matches(text []byte, from int, dst []span, first bool) []span {
	n0 := len(dst)
	if len(g.numeric) > 0 || len(g.address) > 0 {
		dst = g.builtinMatches(text, from, dst, first)
		if first && len(dst) > n0 {
			return dst
		}
	}
	for i := g.patterns; i < len(g.rules); i++ {
		dst = g.rules[i].find(text, from, len(text), false, dst, i, first)
		if first && len(dst) > n0 {
			return dst
		}
	}
	return dst
}

// merge sorts spans by start (then rule) and joins those that overlap; the
// joined span keeps the label of its first member.
func merge(spans []span) []span {
	if len(spans) < 2 {
		return spans
	}
	slices.SortFunc(spans, func(a, b span) int {
		if a.start != b.start {
			return a.start - b.start
		}
		return a.rule - b.rule
	})
	out := spans[:1]
	for _, s := range spans[1:] {
		last := &out[len(out)-1]
		if s.start < last.end {
			last.end = max(last.end, s.end)
			continue
		}
		out = append(out, s)
	}
	return out
}

package aipolicy

import (
	"cmp"
	"slices"
	"strings"
)

// wildcard is a modelAliases key holding "*": its literal pieces between
// the stars, and the model it maps to.
type wildcard struct {
	key    string
	pieces []string // len = stars + 1; the first and last may be empty
	target string
	// literal is the length of the key's text other than stars: the more of
	// it, the more specific the key.
	literal int
}

// compileAliases splits modelAliases into exact names and wildcards, the
// wildcards most specific first (most literal text), ties by key order.
// agentgateway sorts by the key's length, stars included, and leaves ties
// to its map's order.
func compileAliases(aliases map[string]string) (map[string]string, []wildcard) {
	exact := make(map[string]string)
	var wild []wildcard
	for k, v := range aliases {
		if !strings.Contains(k, "*") {
			exact[k] = v
			continue
		}
		pieces := strings.Split(k, "*")
		wild = append(wild, wildcard{key: k, pieces: pieces, target: v, literal: len(k) - (len(pieces) - 1)})
	}
	slices.SortFunc(wild, func(a, b wildcard) int {
		if c := cmp.Compare(b.literal, a.literal); c != 0 {
			return c
		}
		return strings.Compare(a.key, b.key)
	})
	return exact, wild
}

// Alias maps the client's model through modelAliases: an exact key first,
// then wildcard keys ("*" matches any run of characters, the empty one
// too) with the most specific (longest literal text) winning, ties broken
// by key order. ok is false when none matches. agentgateway applies the
// alias after the body mutations (Request), to the model they leave; the
// result is the model asked of the provider (convert.Options.Model).
func (p *Policy) Alias(model string) (string, bool) {
	if t, ok := p.exactAliases[model]; ok {
		return t, true
	}
	for i := range p.wildcards {
		if p.wildcards[i].matches(model) {
			return p.wildcards[i].target, true
		}
	}
	return "", false
}

// matches reports whether s is the key's pieces in order with anything
// between them. Taking each middle piece at its first occurrence is enough:
// a later occurrence leaves less room for the pieces after it.
func (w *wildcard) matches(s string) bool {
	first, last := w.pieces[0], w.pieces[len(w.pieces)-1]
	if len(s) < w.literal || !strings.HasPrefix(s, first) || !strings.HasSuffix(s, last) {
		return false
	}
	rest := s[len(first) : len(s)-len(last)]
	for _, piece := range w.pieces[1 : len(w.pieces)-1] {
		i := strings.Index(rest, piece)
		if i < 0 {
			return false
		}
		rest = rest[i+len(piece):]
	}
	return true
}

package decode

import (
	"fmt"

	"github.com/goccy/go-yaml/token"
)

// The YAML parser (goccy/go-yaml v1.19.2, parser.parseMap) parses a block
// mapping, one key per line, by recursing once per key and copying the
// entries parsed so far at each level: a mapping of n keys costs it n stack
// frames and n²/2 copies. 20,000 keys take seconds and a few million
// overflow the stack, which kills the process (no recover). Flow mappings
// ({a: 1, b: 2}, JSON objects) and sequences are parsed in a loop.
//
// checkBlockMaps bounds that work before the parser runs: the keys of a
// block mapping past its first bigMapFrom are counted over the whole
// document, and at most maxBigMapKeys are let through (one mapping of
// 10,100 keys, or a hundred of 200). The configuration schema has no map
// that needs more than a few hundred keys.
const (
	bigMapFrom    = 100
	maxBigMapKeys = 10_000
)

// mapFrame is a block mapping open at a column, or (barrier) a flow
// collection, whose contents are framed apart from what surrounds it.
type mapFrame struct {
	col, keys int
	barrier   bool
	id        int // for tests: which keys checkBlockMaps took for one mapping
}

// checkBlockMaps walks the tokens as the parser will group them into block
// mappings, counting the keys of each: a key at the column of the open
// mapping is its next key (the parser's rule: a map token at the key
// column), a token left of that column closes it. It over-counts rather
// than under-counts: keys it cannot place are taken as the next key of the
// mapping at their column. The one input whose structure it cannot follow,
// a tag, anchor or ? whose node starts on a later line left of the mapping
// it is in (the parser takes that node whatever its column, a mapping left
// of its parent), is refused as the syntax error it is. onKey, for tests,
// learns the mapping each key was counted in.
func checkBlockMaps(tks token.Tokens, onKey func(tk *token.Token, id int)) *FieldError {
	var (
		stack    []mapFrame
		ids      int
		excess   int
		prev     *token.Token // the previous token, comments left out
		keyStart *token.Token // the first token of the last key: ':' or '?' lines
		// skip is set when the next token belongs to the previous one
		// whatever its place: an anchor's or alias's name, a block
		// scalar's text.
		skip bool
		// prefix is the tag, anchor name or ? the next token is the node
		// of; nullAnchor when the parser takes an anchor that ends its line
		// after "key:" or "-" as anchoring null.
		prefix     *token.Token
		nullAnchor bool
		anchorNext bool // the next token is an anchor's name
	)
	// top is the innermost block mapping, nil when a flow collection or
	// nothing is open.
	top := func() *mapFrame {
		if n := len(stack); n > 0 && !stack[n-1].barrier {
			return &stack[n-1]
		}
		return nil
	}
	closeRightOf := func(col int) {
		for n := len(stack); n > 0 && !stack[n-1].barrier && stack[n-1].col > col; n-- {
			stack = stack[:n-1]
		}
	}
	// key counts a key starting at tk; newChain when the parser starts a
	// new mapping there whatever came before (after ',' or '{').
	key := func(tk *token.Token, newChain bool) *FieldError {
		col := tk.Position.Column
		closeRightOf(col)
		f := top()
		if f == nil || f.col != col || newChain {
			if f != nil && f.col == col {
				stack = stack[:len(stack)-1]
			}
			ids++
			stack = append(stack, mapFrame{col: col, id: ids})
			f = &stack[len(stack)-1]
		}
		f.keys++
		if onKey != nil {
			onKey(tk, f.id)
		}
		if f.keys > bigMapFrom {
			excess++
			if excess > maxBigMapKeys {
				return &FieldError{
					Msg:  fmt.Sprintf("block mappings too large: more than %d keys past the first %d of their mapping (write a large map as a flow mapping {...}, or split it)", maxBigMapKeys, bigMapFrom),
					Line: tk.Position.Line, Col: col,
				}
			}
		}
		return nil
	}
	for i, tk := range tks {
		if tk.Type == token.CommentType {
			continue
		}
		pv := prev
		prev = tk
		if skip {
			skip = false
			if anchorNext {
				anchorNext = false
				prefix = tk
				// parser.parseMapValue, parseSequenceValue: "key: &a" or
				// "- &a" with nothing after on the line is an anchored null
				// when what follows is left of the key or entry.
				amp := prevToken(tks, i)
				before := prevToken(tks, indexOf(tks, i, amp))
				nullAnchor = before != nil && before.Position.Line == amp.Position.Line &&
					(before.Type == token.SequenceEntryType ||
						before.Type == token.MappingValueType && keyStart != nil && keyStart.Position.Line == amp.Position.Line)
			}
			continue
		}
		if p := prefix; p != nil {
			prefix = nil
			if f := top(); f != nil && tk.Position.Line > p.Position.Line && tk.Position.Column < f.col && !nullAnchor {
				return &FieldError{Msg: "syntax error: value indented less than the mapping it is in", Line: tk.Position.Line, Col: tk.Position.Column}
			}
		}
		switch tk.Type {
		case token.DocumentHeaderType, token.DocumentEndType:
			stack, prefix = stack[:0], nil
			continue
		case token.SequenceStartType, token.MappingStartType:
			closeRightOf(tk.Position.Column)
			stack = append(stack, mapFrame{barrier: true})
			continue
		case token.SequenceEndType, token.MappingEndType:
			// The end of a flow collection belongs to it, wherever it is.
			for n := len(stack); n > 0; n-- {
				if stack[n-1].barrier {
					stack = stack[:n-1]
					break
				}
			}
			continue
		}
		if tk.Type != token.MappingValueType {
			// A ':' belongs to its key (the parser groups them), wherever
			// it is: "? key" then ": value" on a line of its own.
			closeRightOf(tk.Position.Column)
		}
		switch tk.Type {
		case token.AnchorType:
			skip, anchorNext = true, true
		case token.AliasType, token.LiteralType, token.FoldedType:
			skip = true
		case token.TagType:
			prefix, nullAnchor = tk, false
		case token.MappingKeyType:
			prefix, nullAnchor = tk, false
			keyStart = tk
			if fe := key(tk, newChain(pv)); fe != nil {
				return fe
			}
		case token.MappingValueType:
			start := keyStartOf(tks, i)
			if start == nil || start.Type == token.MappingKeyType {
				// "? key" then ": value": counted at the ?.
				continue
			}
			keyStart = start
			if fe := key(start, newChain(prevToken(tks, indexOf(tks, i, start)))); fe != nil {
				return fe
			}
		}
	}
	return nil
}

// newChain reports whether a key after tk starts a mapping of its own
// whatever is open at its column: the parser's flow collections take each
// entry after a comma or an opening bracket by itself.
func newChain(tk *token.Token) bool {
	if tk == nil {
		return true
	}
	switch tk.Type {
	case token.CollectEntryType, token.MappingStartType, token.SequenceStartType:
		return true
	}
	return false
}

// prevToken returns the token before tks[i], comments left out; nil at the
// start.
func prevToken(tks token.Tokens, i int) *token.Token {
	for i--; i >= 0; i-- {
		if tks[i].Type != token.CommentType {
			return tks[i]
		}
	}
	return nil
}

// indexOf returns the index of tk, a token at or before tks[i].
func indexOf(tks token.Tokens, i int, tk *token.Token) int {
	for ; i >= 0; i-- {
		if tks[i] == tk {
			return i
		}
	}
	return 0
}

// keyStartOf returns the first token of the key that the ':' at tks[i]
// ends, as the parser groups it: the scalar before the ':' with the tags
// and anchors before it on its line, an alias with its '*', or a '?' with
// the token after it. nil when nothing comes before.
func keyStartOf(tks token.Tokens, i int) *token.Token {
	j := i - 1
	for j >= 0 && tks[j].Type == token.CommentType {
		j--
	}
	if j < 0 {
		return nil
	}
	for {
		k := j - 1
		for k >= 0 && tks[k].Type == token.CommentType {
			k--
		}
		if k < 0 {
			return tks[j]
		}
		cur, p := tks[j], tks[k]
		switch {
		case p.Type == token.AnchorType, p.Type == token.AliasType, p.Type == token.MappingKeyType,
			p.Type == token.LiteralType, p.Type == token.FoldedType:
			// & or * and its name, whatever token that is
			j = k
		case p.Type == token.TagType && p.Position.Line == cur.Position.Line:
			j = k
		case k > 0 && tks[k-1].Type == token.AnchorType && tks[k-1].Position.Line == cur.Position.Line:
			// & name value
			j = k - 1
		default:
			return tks[j]
		}
	}
}

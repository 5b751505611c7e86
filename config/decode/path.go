package decode

import (
	"strconv"
	"strings"
)

// Path syntax
//
// A path is built from the document root: a map key or struct field is
// appended as ".key" (no dot at the start of the path), a list index as
// "[i]". A key that is empty or holds anything but ASCII letters, digits,
// '_' and '-' is written in brackets as a Go-quoted string instead:
// headers.X-Foo, headers["a.b"], routes["/v1"].

// joinKey appends a map key or field name to a path.
func joinKey(parent, key string) string {
	if !bareKey(key) {
		return parent + "[" + strconv.Quote(key) + "]"
	}
	if parent == "" {
		return key
	}
	return parent + "." + key
}

// JoinKey appends a map key to a relative path, for Validation.Errorf and
// Node.ErrorfAt: JoinKey("set", ":authority") is `set[":authority"]`.
func JoinKey(parent, key string) string { return joinKey(parent, key) }

// joinIndex appends a list index to a path.
func joinIndex(parent string, i int) string {
	return parent + "[" + strconv.Itoa(i) + "]"
}

// joinRel appends a relative path (in the same syntax) to a path.
func joinRel(base, rel string) string {
	switch {
	case rel == "":
		return base
	case base == "" || rel[0] == '[':
		return base + rel
	default:
		return base + "." + rel
	}
}

// bareKey reports whether key can be written without quoting.
func bareKey(key string) bool {
	if key == "" {
		return false
	}
	for i := 0; i < len(key); i++ {
		c := key[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// segment is one step of a relative path: a key, or an index when isIndex.
type segment struct {
	key     string
	index   int
	isIndex bool
}

// parseRel splits a relative path into segments. It reports false when
// rel is not well formed.
func parseRel(rel string) ([]segment, bool) {
	var segs []segment
	for i := 0; i < len(rel); {
		switch rel[i] {
		case '.':
			if i == 0 || i == len(rel)-1 {
				return nil, false
			}
			i++
		case '[':
			end := strings.IndexByte(rel[i:], ']')
			if end < 0 {
				return nil, false
			}
			if i+1 < len(rel) && rel[i+1] == '"' {
				// A quoted key; the closing quote is followed by ']'.
				q, err := strconv.QuotedPrefix(rel[i+1:])
				if err != nil || !strings.HasPrefix(rel[i+1+len(q):], "]") {
					return nil, false
				}
				key, _ := strconv.Unquote(q)
				segs = append(segs, segment{key: key})
				i += 1 + len(q) + 1
				continue
			}
			idx, err := strconv.Atoi(rel[i+1 : i+end])
			if err != nil || idx < 0 {
				return nil, false
			}
			segs = append(segs, segment{index: idx, isIndex: true})
			i += end + 1
		default:
			j := i
			for j < len(rel) && rel[j] != '.' && rel[j] != '[' {
				j++
			}
			segs = append(segs, segment{key: rel[i:j]})
			i = j
		}
	}
	return segs, true
}

// locate walks rel from n as far as the document goes and returns the
// deepest node reached, for positioning errors about values that may be
// absent.
func locate(n *Node, rel string) *Node {
	segs, ok := parseRel(rel)
	if !ok {
		return n
	}
	cur := n
	for _, s := range segs {
		var next *Node
		switch {
		case s.isIndex && cur.kind == List && s.index < len(cur.items):
			next = cur.items[s.index]
		case !s.isIndex && cur.kind == Map:
			next = cur.Get(s.key)
		}
		if next == nil {
			break
		}
		cur = next
	}
	return cur
}

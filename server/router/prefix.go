package router

import (
	"bytes"
	"slices"
	"strings"
)

// smallFanout is the child count up to which a trie node scans its children
// instead of using a map.
const smallFanout = 8

// prefixNode is a node of a trie of path segments. The node reached by the
// segments of a prefix with its trailing slashes removed holds that
// prefix's rules; the root holds the rules of "/" (and "//"...).
//
// Every node whose prefix matches a path is an ancestor of (or is) the
// deepest such node, so a lookup walks down once and then follows next.
type prefixNode struct {
	keys   []string // children, scanned while few
	kids   []*prefixNode
	kidMap map[string]*prefixNode // children, when many

	own   []*rule // rules ending here, in precedence order (build only)
	steps []step  // candidates to try at this node
	// next is where to continue when steps have no match: the nearest
	// ancestor with rules when all of own precede all ancestors' rules,
	// else nil because steps already hold the ancestors' rules, merged.
	next *prefixNode
}

func (n *prefixNode) child(seg []byte) *prefixNode {
	if n.kidMap != nil {
		return n.kidMap[string(seg)]
	}
	for i, k := range n.keys {
		if k == string(seg) {
			return n.kids[i]
		}
	}
	return nil
}

func (n *prefixNode) addChild(seg string) *prefixNode {
	if n.kidMap != nil {
		if c := n.kidMap[seg]; c != nil {
			return c
		}
	} else if i := slices.Index(n.keys, seg); i >= 0 {
		return n.kids[i]
	}
	c := &prefixNode{}
	n.keys = append(n.keys, seg)
	n.kids = append(n.kids, c)
	if n.kidMap != nil {
		n.kidMap[seg] = c
	} else if len(n.keys) > smallFanout {
		n.kidMap = make(map[string]*prefixNode, len(n.keys))
		for i, k := range n.keys {
			n.kidMap[k] = n.kids[i]
		}
	}
	return c
}

// insert adds a prefix rule. rules must arrive in precedence order.
func (n *prefixNode) insert(r *rule) {
	trimmed := strings.TrimRight(r.path, "/")
	if trimmed != "" {
		for seg := range strings.SplitSeq(trimmed[1:], "/") {
			n = n.addChild(seg)
		}
	}
	n.own = append(n.own, r)
}

// finish builds steps and next pointers below n. up is the nearest
// ancestor with rules, above the merged, ordered rules of all ancestors;
// pos gives each rule's rank in the bucket's precedence order; minRun is
// passed to buildSteps.
func (n *prefixNode) finish(up *prefixNode, above []*rule, pos map[*rule]int, minRun int) {
	if len(n.own) > 0 {
		last := pos[n.own[len(n.own)-1]]
		if len(above) == 0 || last < pos[above[0]] {
			n.steps, n.next = buildSteps(n.own, minRun), up
		} else {
			// A shallower prefix outranks some rule here (e.g. "/a//"
			// ties with "/a/b" on length): try them merged, in order.
			n.steps = buildSteps(mergeRules(n.own, above, pos), minRun)
		}
		above = mergeRules(n.own, above, pos)
		up = n
		n.own = nil
	}
	for _, c := range n.kids {
		c.finish(up, above, pos, minRun)
	}
	n.keys = slices.Clip(n.keys)
	n.kids = slices.Clip(n.kids)
}

// mergeRules merges two lists ordered by pos into a new list.
func mergeRules(a, b []*rule, pos map[*rule]int) []*rule {
	out := make([]*rule, 0, len(a)+len(b))
	for len(a) > 0 && len(b) > 0 {
		if pos[a[0]] < pos[b[0]] {
			out, a = append(out, a[0]), a[1:]
		} else {
			out, b = append(out, b[0]), b[1:]
		}
	}
	out = append(out, a...)
	return append(out, b...)
}

// deepest returns the deepest node with rules whose prefix matches path,
// or nil. A path that is neither empty nor starts with '/' (such as "*")
// matches no prefix, not even "/", as in agentgateway.
func (n *prefixNode) deepest(path []byte) *prefixNode {
	if len(path) == 0 {
		if len(n.steps) > 0 {
			return n
		}
		return nil
	}
	if path[0] != '/' {
		return nil
	}
	var best *prefixNode
	if len(n.steps) > 0 {
		best = n
	}
	rest := path[1:]
	for {
		i := bytes.IndexByte(rest, '/')
		seg := rest
		if i >= 0 {
			seg = rest[:i]
		}
		if n = n.child(seg); n == nil {
			return best
		}
		if len(n.steps) > 0 {
			best = n
		}
		if i < 0 {
			return best
		}
		rest = rest[i+1:]
	}
}

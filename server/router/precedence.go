package router

import "cmp"

// pathRank orders path kinds: exact before prefix before regex.
func pathRank(k PathKind) int {
	switch k {
	case PathExact:
		return 3
	case PathPrefix:
		return 2
	}
	return 1
}

// compareRules orders rules of one hostname bucket by Gateway API
// precedence, most preferred first. The keys and their order follow
// agentgateway's RouteSet::compare_route (crates/agentgateway/src/types/
// agent.rs): path kind, path length, method, header count, query count,
// then config order. It is a total order on the rules of a bucket.
func compareRules(a, b *rule) int {
	if c := cmp.Compare(pathRank(b.kind), pathRank(a.kind)); c != 0 {
		return c
	}
	if c := cmp.Compare(b.pathLen, a.pathLen); c != 0 {
		return c
	}
	if am, bm := a.method != "", b.method != ""; am != bm {
		if am {
			return -1
		}
		return 1
	}
	if c := cmp.Compare(len(b.headers), len(a.headers)); c != 0 {
		return c
	}
	if c := cmp.Compare(len(b.query), len(a.query)); c != 0 {
		return c
	}
	if c := cmp.Compare(a.route, b.route); c != 0 {
		return c
	}
	return cmp.Compare(a.match, b.match)
}

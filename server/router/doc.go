// Package router owns the HTTP route table of one listener: given the
// compiled routes of that listener it picks the route for a request,
// following Gateway API HTTPRoute precedence as agentgateway implements it
// (crates/agentgateway/src/http/route.rs and the RouteSet / HostnameMatch
// types in crates/agentgateway/src/types/agent.rs).
//
// # Hostnames
//
// Routes are grouped into hostname buckets. A request host is looked up in
// this order, and the first bucket holding a matching rule wins:
//
//  1. the exact hostname ("api.example.com");
//  2. wildcard hostnames, longest suffix first ("*.a.example.com" before
//     "*.example.com" before "*.com");
//  3. the catch-all hostname "*" (agentgateway's RouteSet would take "*"
//     literally; here it serves every host, as on a Gateway listener);
//  4. routes that list no hostnames.
//
// A request falls through: when the most specific bucket has routes for the
// host but none of their rules match the request, the next bucket is tried.
// This is what agentgateway does (select_best_route walks every
// HostnameMatch of the host and keeps going until a rule matches); it is
// more lenient than Envoy-based implementations, which pick a virtual host
// first and never leave it.
//
// Table.Match expects the host already lower-cased and without its port;
// hostname patterns are validated (Gateway API syntax, any case) and
// lower-cased by New.
//
// A wildcard needs at least one character before the dot it starts at:
// "*.example.com" matches "a.example.com" and "a.b.example.com" but neither
// "example.com" nor ".example.com". agentgateway accepts the latter; we
// don't.
//
// # Rules within a bucket
//
// Each (route, match) pair of a bucket is ranked, continuing on ties, by:
//
//  1. path kind: PathExact, then PathPrefix, then PathRegex;
//  2. length of the configured path (the raw prefix, so "/foo/" ranks above
//     "/foo"; for regexes the length of the pattern source);
//  3. a match with a method before one without;
//  4. more header matches first;
//  5. more query matches first;
//  6. config order: the route's index, then the match's index in the route.
//
// The first pair in that order whose conditions all hold is the answer.
//
// # Matching
//
// PathPrefix matches on segment boundaries after trailing slashes of the
// prefix are dropped: "/foo" and "/foo/" both match "/foo", "/foo/" and
// "/foo/bar" but not "/foobar". "/" matches every path that starts with a
// slash, and the empty path; like agentgateway, no prefix matches a path
// such as "*" (OPTIONS *), which only an exact or regex match can route.
// PathExact is byte equality on the raw, undecoded path. PathRegex, header
// and query regexes must match the whole value (they are compiled anchored,
// as `\A(?:pattern)\z`; agentgateway instead takes the leftmost-first match
// and checks it spans the value, which rejects e.g. "a|ab" for "ab").
//
// Header names are case-insensitive: they are compiled to the canonical
// form fasthttp stores parsed names in (this relies on fasthttp's default
// header-name normalization, which a server must not disable). When a
// request carries a header more than once, the first value is matched, as
// fasthttp's Peek returns it. An absent header never matches, not even an
// empty Exact value or a regex that accepts ""; a header sent with an empty
// value is present with the value "". Names must be HTTP tokens, so
// agentgateway's pseudo-headers (":authority" ...) are rejected by New.
//
// Query parameter names are case-sensitive, values are the decoded
// values of fasthttp's QueryArgs, and the first value of a repeated
// parameter is matched, as Gateway API recommends (agentgateway happens to
// use the last one). Within one Match only the first condition for a given
// header (or query) name counts; later duplicates are ignored, as Gateway
// API requires. Methods compare exactly and case-sensitively.
//
// # Cost
//
// A lookup allocates nothing. Exact paths are found with one map lookup,
// prefixes with a walk of a path-segment trie, and runs of rules that differ
// only by an exact method, header or query value are dispatched with a map
// keyed by that value, so a table of a hundred rules is searched in tens of
// nanoseconds. Matching a "Cookie" header allocates inside fasthttp once
// the request's cookies were parsed, and so does a "Trailer" header.
package router

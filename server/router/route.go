package router

import "regexp"

// PathKind says how Match.Path is compared with the request path.
type PathKind uint8

const (
	// PathPrefix matches the path and everything below it on segment
	// boundaries. It is the zero value; an empty Path means "/".
	PathPrefix PathKind = iota
	// PathExact matches the raw path byte for byte.
	PathExact
	// PathRegex matches when Match.PathRegex (or, when that is nil, the
	// regular expression in Match.Path) matches the whole path.
	PathRegex
)

// String returns the Gateway API name of the kind.
func (k PathKind) String() string {
	switch k {
	case PathPrefix:
		return "PathPrefix"
	case PathExact:
		return "Exact"
	case PathRegex:
		return "RegularExpression"
	}
	return "PathKind(invalid)"
}

// ValueMatch compares a header or query value. Regex, when set, must match
// the whole value and Exact must then be empty; otherwise the value must
// equal Exact.
type ValueMatch struct {
	Exact string
	Regex *regexp.Regexp
}

// HeaderMatch requires a request header. Name is case-insensitive. It may
// also be a request pseudo-header, as agentgateway allows: ":method",
// ":scheme", ":authority" (the Host header) or ":path" (the request target,
// query included, as received).
type HeaderMatch struct {
	Name  string
	Value ValueMatch
}

// QueryMatch requires a query parameter. Name is case-sensitive.
type QueryMatch struct {
	Name  string
	Value ValueMatch
}

// Match is one way a request can select a Route. All of its fields must hold.
type Match struct {
	PathKind  PathKind
	Path      string
	PathRegex *regexp.Regexp
	// Method, when not empty, must equal the request method exactly.
	Method  string
	Headers []HeaderMatch
	Query   []QueryMatch
}

// Route is one compiled route rule of a listener. A Route without Hostnames
// serves every host; a Route without Matches has the single match
// PathPrefix "/". Value is returned by Table.Match and is opaque here. The
// order of routes given to New is the config order used to break ties.
type Route struct {
	Hostnames []string
	Matches   []Match
	Value     any
}

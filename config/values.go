package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/relaygate/gateway/config/decode"
)

// Unsupported is a field of the file format whose feature is not built yet. Any
// value is refused with "not supported yet", so a setting is never silently
// ignored.
type Unsupported struct {
	Set bool
}

// DecodeNode records the refusal.
func (u *Unsupported) DecodeNode(n *decode.Node) {
	if n.Kind() == decode.Null {
		return
	}
	u.Set = true
	n.Errorf("not supported yet")
}

// MarshalJSON writes null, which decodes back as the field left out (a set
// field never gets past Parse).
func (u Unsupported) MarshalJSON() ([]byte, error) { return []byte("null"), nil }

// Duration is a duration written as in Go and agentgateway: "10s", "1m30s", "100ms".
type Duration struct {
	time.Duration
}

// DecodeNode parses the duration text.
func (d *Duration) DecodeNode(n *decode.Node) {
	s, ok := n.String()
	if !ok {
		n.Errorf("expected a duration such as \"10s\" or \"1m30s\"")
		return
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		n.Errorf("invalid duration %q (use forms such as \"10s\", \"1m30s\", \"100ms\")", s)
		return
	}
	if v < 0 {
		n.Errorf("must not be negative")
		return
	}
	d.Duration = v
}

// MarshalJSON writes the duration as text, for /config_dump.
func (d Duration) MarshalJSON() ([]byte, error) {
	return jsonString(d.String()), nil
}

// StringMatch is `{exact: ...}` or `{regex: ...}`.
type StringMatch struct {
	Exact *string
	Regex *regexp.Regexp
}

// DecodeNode decodes the exactly-one-of form and compiles the regex.
func (m *StringMatch) DecodeNode(n *decode.Node) {
	key, v := oneKey(n, "exact", "regex")
	switch key {
	case "exact":
		var s string
		v.Decode(&s)
		m.Exact = &s
	case "regex":
		m.Regex = decodeRegex(v)
	}
}

// MarshalJSON writes the match back in file form.
func (m StringMatch) MarshalJSON() ([]byte, error) {
	if m.Regex != nil {
		return jsonObject("regex", m.Regex.String()), nil
	}
	if m.Exact != nil {
		return jsonObject("exact", *m.Exact), nil
	}
	return []byte("null"), nil
}

// PathMatchKind says how a path matches.
type PathMatchKind uint8

// Path match kinds.
const (
	PathPrefix PathMatchKind = iota
	PathExact
	PathRegex
)

// PathMatch is `{exact}`, `{pathPrefix}` or `{regex}`.
type PathMatch struct {
	Kind  PathMatchKind
	Value string
	Regex *regexp.Regexp
}

// DecodeNode decodes the exactly-one-of form.
func (p *PathMatch) DecodeNode(n *decode.Node) {
	key, v := oneKey(n, "exact", "pathPrefix", "regex")
	switch key {
	case "exact", "pathPrefix":
		v.Decode(&p.Value)
		if !strings.HasPrefix(p.Value, "/") {
			v.Errorf("must start with \"/\"")
		}
		p.Kind = PathExact
		if key == "pathPrefix" {
			p.Kind = PathPrefix
		}
	case "regex":
		p.Kind = PathRegex
		p.Regex = decodeRegex(v)
		if p.Regex != nil {
			p.Value = p.Regex.String()
		}
	}
}

// MarshalJSON writes the match back in file form.
func (p PathMatch) MarshalJSON() ([]byte, error) {
	key := [...]string{PathPrefix: "pathPrefix", PathExact: "exact", PathRegex: "regex"}[p.Kind]
	return jsonObject(key, p.Value), nil
}

// PathRewrite is `{full: "/x"}` or `{prefix: "/x"}`.
type PathRewrite struct {
	Full   *string
	Prefix *string
}

// DecodeNode decodes the exactly-one-of form.
func (p *PathRewrite) DecodeNode(n *decode.Node) {
	key, v := oneKey(n, "full", "prefix")
	var s string
	v.Decode(&s)
	if key != "" && s == "" {
		// As in agentgateway: an empty full path is "/", and an empty
		// prefix drops the matched prefix, as "/" does.
		s = "/"
	}
	if key != "" && !strings.HasPrefix(s, "/") {
		v.Errorf("must start with \"/\"")
	}
	switch key {
	case "full":
		p.Full = &s
	case "prefix":
		p.Prefix = &s
	}
}

// MarshalJSON writes the rewrite back in file form.
func (p PathRewrite) MarshalJSON() ([]byte, error) {
	if p.Full != nil {
		return jsonObject("full", *p.Full), nil
	}
	if p.Prefix != nil {
		return jsonObject("prefix", *p.Prefix), nil
	}
	return []byte("null"), nil
}

// HostRewrite is `{full: "host:port"}`, `{host: "h"}`, `{port: 8080}`, "auto" or "none".
type HostRewrite struct {
	Full string
	Host string
	Port int
	Auto bool
	None bool
}

// DecodeNode decodes the union.
func (h *HostRewrite) DecodeNode(n *decode.Node) {
	if s, ok := n.String(); ok {
		switch s {
		case "auto":
			h.Auto = true
		case "none":
			h.None = true
		default:
			n.Errorf("must be \"auto\", \"none\" or a map with one of: full, host, port")
		}
		return
	}
	key, v := oneKey(n, "full", "host", "port")
	switch key {
	case "full":
		v.Decode(&h.Full)
		if h.Full == "" {
			v.Errorf("must not be empty")
		}
	case "host":
		v.Decode(&h.Host)
		if h.Host == "" {
			v.Errorf("must not be empty")
		}
	case "port":
		v.Decode(&h.Port)
		if h.Port < 1 || h.Port > 65535 {
			v.Errorf("must be between 1 and 65535")
		}
	}
}

// MarshalJSON writes the rewrite back in file form.
func (h HostRewrite) MarshalJSON() ([]byte, error) {
	switch {
	case h.Auto:
		return []byte(`"auto"`), nil
	case h.None:
		return []byte(`"none"`), nil
	case h.Full != "":
		return jsonObject("full", h.Full), nil
	case h.Host != "":
		return jsonObject("host", h.Host), nil
	default:
		return []byte(`{"port":` + strconv.Itoa(h.Port) + `}`), nil
	}
}

// Bytes is a body given as a string or as a list of byte values.
type Bytes []byte

// DecodeNode accepts both forms of the schema.
func (b *Bytes) DecodeNode(n *decode.Node) {
	if s, ok := n.String(); ok {
		*b = []byte(s)
		return
	}
	if n.Kind() != decode.List {
		n.Errorf("expected a string or a list of byte values")
		return
	}
	out := make([]byte, 0, len(n.Items()))
	for _, item := range n.Items() {
		var v int
		item.Decode(&v)
		if v < 0 || v > 255 {
			item.Errorf("must be between 0 and 255")
		}
		out = append(out, byte(v))
	}
	*b = out
}

// MarshalJSON writes the body as a string, or as the list of byte values
// when it is not UTF-8 (a JSON string cannot hold it unchanged).
func (b Bytes) MarshalJSON() ([]byte, error) {
	if utf8.Valid(b) {
		return jsonString(string(b)), nil
	}
	out := make([]byte, 0, 2+4*len(b))
	out = append(out, '[')
	for i, c := range b {
		if i > 0 {
			out = append(out, ',')
		}
		out = strconv.AppendUint(out, uint64(c), 10)
	}
	return append(out, ']'), nil
}

// LogLevel is a level ("info") or per-module levels ("info,server=debug" or a list).
type LogLevel struct {
	Default string
	Modules map[string]string
}

var logLevels = []string{"trace", "debug", "info", "warn", "error", "off"}

// DecodeNode parses the level filter.
func (l *LogLevel) DecodeNode(n *decode.Node) {
	var parts []string
	if s, ok := n.String(); ok {
		parts = strings.Split(s, ",")
	} else {
		var list []string
		n.Decode(&list)
		for _, s := range list {
			parts = append(parts, strings.Split(s, ",")...)
		}
	}
	for _, p := range parts {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		module, level, hasModule := strings.Cut(p, "=")
		if !hasModule {
			level, module = module, ""
		}
		level = strings.ToLower(level)
		if !contains(logLevels, level) {
			n.Errorf("unknown log level %q (use one of: %s)", level, strings.Join(logLevels, ", "))
			continue
		}
		if module == "" {
			l.Default = level
			continue
		}
		if l.Modules == nil {
			l.Modules = map[string]string{}
		}
		l.Modules[module] = level
	}
}

// MarshalJSON writes the filter as the decoder reads it and as users write
// it: the default level, then module=level pairs sorted by module
// ("info,access=warn").
func (l LogLevel) MarshalJSON() ([]byte, error) {
	parts := make([]string, 0, 1+len(l.Modules))
	if l.Default != "" {
		parts = append(parts, l.Default)
	}
	for _, m := range slices.Sorted(maps.Keys(l.Modules)) {
		parts = append(parts, m+"="+l.Modules[m])
	}
	return jsonString(strings.Join(parts, ",")), nil
}

// WorkerThreads is a number of threads, a percentage of the CPUs ("50%",
// as agentgateway takes it) or "auto".
type WorkerThreads struct {
	N       int     // 0 means auto, or Percent
	Percent float64 // of the CPUs, when not 0
}

// DecodeNode accepts an integer, a numeric string, a percentage or "auto".
func (w *WorkerThreads) DecodeNode(n *decode.Node) {
	if s, ok := n.String(); ok {
		v, err := parseWorkerThreads(s)
		if err != nil {
			n.Errorf("%v", err)
			return
		}
		*w = v
		return
	}
	n.Decode(&w.N)
	if w.N < 1 {
		n.Errorf("%v", errWorkerThreads)
	}
}

var errWorkerThreads = errors.New(`must be "auto", a positive number or a percentage of the CPUs ("50%")`)

// parseWorkerThreads reads the string form of WorkerThreads (also that of
// WORKER_THREADS).
func parseWorkerThreads(s string) (WorkerThreads, error) {
	if s == "auto" {
		return WorkerThreads{}, nil
	}
	if p, ok := strings.CutSuffix(s, "%"); ok {
		f, err := strconv.ParseFloat(p, 64)
		if err != nil || !(f > 0 && f <= 100) {
			return WorkerThreads{}, errors.New("a percentage must be more than 0 and at most 100")
		}
		return WorkerThreads{Percent: f}, nil
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < 1 {
		return WorkerThreads{}, errWorkerThreads
	}
	return WorkerThreads{N: v}, nil
}

// Threads is the number of threads for a machine of cpus CPUs: 0 for
// auto; a percentage rounds up, to at least 1 (as agentgateway).
func (w WorkerThreads) Threads(cpus int) int {
	if w.Percent > 0 {
		return max(int(math.Ceil(float64(cpus)*w.Percent/100)), 1)
	}
	return w.N
}

// MarshalJSON writes "auto", the number or the percentage.
func (w WorkerThreads) MarshalJSON() ([]byte, error) {
	switch {
	case w.Percent > 0:
		return jsonString(strconv.FormatFloat(w.Percent, 'g', -1, 64) + "%"), nil
	case w.N == 0:
		return []byte(`"auto"`), nil
	}
	return strconv.AppendInt(nil, int64(w.N), 10), nil
}

// jsonString is s as a JSON string. (strconv.Quote is Go syntax: its \x01,
// \a or \U0001f600 escapes are not JSON.)
func jsonString(s string) []byte {
	b, _ := json.Marshal(s) // a string always marshals
	return b
}

// jsonObject is {"key": value} in JSON.
func jsonObject(key, value string) []byte {
	b := append([]byte{'{'}, jsonString(key)...)
	b = append(b, ':')
	b = append(b, jsonString(value)...)
	return append(b, '}')
}

// oneKey returns the single key of a map node that must hold exactly one of keys.
func oneKey(n *decode.Node, keys ...string) (string, *decode.Node) {
	if n.Kind() != decode.Map {
		n.Errorf("expected a map with exactly one of: %s", strings.Join(keys, ", "))
		return "", nil
	}
	found := ""
	for _, k := range n.Keys() {
		if !contains(keys, k) {
			n.Get(k).Errorf("unknown field %q (expected one of: %s)", k, strings.Join(keys, ", "))
			continue
		}
		if found != "" {
			n.Get(k).Errorf("only one of %s may be set", strings.Join(keys, ", "))
			continue
		}
		found = k
	}
	if found == "" {
		n.Errorf("exactly one of %s is required", strings.Join(keys, ", "))
		return "", nil
	}
	return found, n.Get(found)
}

// decodeExactlyOne decodes the map n strictly into plain, a method-less
// view of a union struct whose pointer fields are its kinds, and requires
// exactly one of keys. A union's DecodeNode calls it as
//
//	type plain T
//	decodeExactlyOne(n, (*plain)(t), "a", "b")
func decodeExactlyOne(n *decode.Node, plain any, keys ...string) {
	if !n.Expect(decode.Map) {
		return
	}
	if n.Decode(plain) {
		n.OneOf(keys...)
	}
}

func decodeRegex(v *decode.Node) *regexp.Regexp {
	s, ok := v.String()
	if !ok {
		v.Errorf("expected a regular expression string")
		return nil
	}
	// The user's text is kept; matchers anchor it where the semantics need a full match.
	re, err := regexp.Compile(s)
	if err != nil {
		v.Errorf("invalid regular expression: %v", err)
		return nil
	}
	return re
}

// checkHostPort validates "host:port" with a port of 1..65535.
func checkHostPort(s string) error {
	if strings.HasPrefix(s, "unix:") {
		return errors.New("unix socket backends are not supported yet")
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return errors.New("must be host:port (for example 127.0.0.1:8080)")
	}
	if host == "" {
		return errors.New("host is empty")
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 1 || p > 65535 {
		return errors.New("port must be between 1 and 65535")
	}
	return nil
}

// framingHeader reports whether name is one of the fields the gateway writes
// from the body it sends (Content-Length, Transfer-Encoding), which no header
// edit may set or remove: an edit would make the message's framing disagree
// with its body.
func framingHeader(name string) bool {
	return strings.EqualFold(name, "content-length") || strings.EqualFold(name, "transfer-encoding")
}

// errFraming is the message for a header edit naming a framing header.
const errFraming = "the gateway writes this header from the body it sends; it cannot be set, added or removed"

// validHeaderName reports whether s is an RFC 9110 token.
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func joinOr(list []string) string { return strings.Join(list, ", ") }

func indexPath(field string, i int) string { return field + "[" + strconv.Itoa(i) + "]" }

// ListenNetwork is the network a listening address host:port is opened
// on: "tcp4" for an IPv4 host, since Go opens "tcp" on 0.0.0.0 as a
// dual-stack socket answering on every IPv6 address too; "tcp" otherwise.
func ListenNetwork(addr string) string {
	if host, _, err := net.SplitHostPort(addr); err == nil {
		if ip := net.ParseIP(host); ip != nil && ip.To4() != nil {
			return "tcp4"
		}
	}
	return "tcp"
}

// CheckListenAddr checks the address of an admin, stats or readiness server:
// "host:port" (port 0..65535), "unix:/path", or "off" (or "") for none.
func CheckListenAddr(s string) error {
	if s == "" || strings.EqualFold(s, "off") {
		return nil
	}
	if path, ok := strings.CutPrefix(s, "unix:"); ok {
		if path == "" {
			return fmt.Errorf("address %q: empty unix socket path", s)
		}
		if strings.IndexByte(path, 0) >= 0 {
			return fmt.Errorf("address %q: NUL byte in unix socket path", s)
		}
		return nil
	}
	_, port, err := net.SplitHostPort(s)
	if err != nil {
		return fmt.Errorf("address %q: want host:port, unix:/path or off: %w", s, err)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("address %q: port %q is not a number in 0..65535", s, port)
	}
	return nil
}

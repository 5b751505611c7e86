package celrules

import (
	"net"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/relaygate/gateway/config"
	"github.com/relaygate/gateway/policy"
)

// funcInput is what the function cases see: a request for /id/1234/data
// from 10.1.2.3:4567 with a token.
func funcInput() Input {
	return Input{
		Claims: map[string]any{"sub": "u1", "roles": []any{"dev", "admin"}, "team": "blue", "nothing": nil},
		Request: map[string]any{
			"method": "GET",
			"path":   "/id/1234/data",
			"headers": map[string]any{
				"x-json":    `{"user":"alice","n":1,"tags":["a","b"]}`,
				"x-b64":     "aGVsbG8=",
				"x-pattern": "[0-9]+",
				"x-id":      "  ab-cd  ",
			},
		},
		Source: map[string]any{"address": "10.1.2.3", "port": int64(4567)},
	}
}

// outcome is what a rule evaluates to.
type outcome uint8

const (
	F outcome = iota // false
	T                // true
	E                // an error, which counts as false
)

// funcCases: each function of agentgateway's library, at least one case
// true and one false (or failing), as a rule sees them. fn names the
// function a case is about; TestAgentgatewayFunctionsCovered checks every
// function has both.
var funcCases = []struct {
	fn, expr string
	want     outcome
}{
	// Kubernetes IP/CIDR library (cel-go ext.Network).
	{"cidr", `cidr("10.0.0.0/8").containsIP(source.address)`, T},
	{"cidr", `cidr("127.0.0.1/8").containsIP(source.address)`, F},
	{"containsIP", `cidr("10.1.0.0/16").containsIP(ip(source.address))`, T},
	{"containsIP", `cidr("10.2.0.0/16").containsIP(ip(source.address))`, F},
	{"containsIP", `cidr("::/0").containsIP(source.address)`, F}, // v4 is not in a v6 range
	{"containsCIDR", `cidr("10.0.0.0/8").containsCIDR(cidr("10.1.0.0/16"))`, T},
	{"containsCIDR", `cidr("10.0.0.0/8").containsCIDR("10.1.0.0/16")`, T},
	{"containsCIDR", `cidr("10.1.0.0/16").containsCIDR(cidr("10.0.0.0/8"))`, F},
	{"ip", `ip(source.address) == ip("10.1.2.3")`, T},
	{"ip", `ip(source.address) == ip("10.1.2.4")`, F},
	{"ip", `ip(request.path) == ip("10.1.2.3")`, E}, // not an address: an error, so false
	{"isIP", `isIP(source.address) && isIP("::1")`, T},
	{"isIP", `isIP("10.1.2") || isIP(request.path)`, F},
	{"isCIDR", `isCIDR("10.0.0.1/8")`, T},
	{"isCIDR", `isCIDR("10.0.0.0/33")`, F},
	{"family", `ip(source.address).family() == 4 && ip("::1").family() == 6`, T},
	{"family", `ip("2001:db8::1").family() == 4`, F},
	{"isLoopback", `ip("127.0.0.1").isLoopback() && ip("::1").isLoopback()`, T},
	{"isLoopback", `ip(source.address).isLoopback()`, F},
	{"isUnspecified", `ip("0.0.0.0").isUnspecified() && ip("::").isUnspecified()`, T},
	{"isUnspecified", `ip(source.address).isUnspecified()`, F},
	{"isGlobalUnicast", `ip("8.8.8.8").isGlobalUnicast() && ip(source.address).isGlobalUnicast()`, T},
	{"isGlobalUnicast", `ip("127.0.0.1").isGlobalUnicast() || ip("224.0.0.1").isGlobalUnicast()`, F},
	{"isGlobalUnicast", `ip("2001:db8::1").isGlobalUnicast() && ip("192.168.1.1").isGlobalUnicast()`, T},
	{"isGlobalUnicast", `ip("fd00::1").isGlobalUnicast() || ip("fe80::1").isGlobalUnicast() || ip("::1").isGlobalUnicast()`, F}, // unique local: agentgateway's answer, not Go's
	{"isLinkLocalUnicast", `ip("169.254.1.1").isLinkLocalUnicast() && ip("fe80::1").isLinkLocalUnicast()`, T},
	{"isLinkLocalUnicast", `ip(source.address).isLinkLocalUnicast()`, F},
	{"isLinkLocalMulticast", `ip("224.0.0.251").isLinkLocalMulticast() && ip("ff02::1").isLinkLocalMulticast()`, T},
	{"isLinkLocalMulticast", `ip("239.1.1.1").isLinkLocalMulticast()`, F},
	{"prefixLength", `cidr("10.0.0.0/8").prefixLength() == 8`, T},
	{"prefixLength", `cidr("10.0.0.0/16").prefixLength() == 8`, F},
	{"masked", `cidr("127.0.0.1/8").masked() == cidr("127.0.0.0/8")`, T},
	{"masked", `cidr("127.0.0.1/8") == cidr("127.0.0.0/8")`, F},
	{"cidr.ip", `cidr("192.168.1.5/24").ip() == ip("192.168.1.5")`, T},
	{"cidr.ip", `cidr("192.168.1.5/24").ip() == ip("192.168.1.0")`, F},
	{"isMask", `cidr("192.168.1.0/24").isMask()`, T},
	{"isMask", `cidr("192.168.1.5/24").isMask()`, F},
	{"ip.isCanonical", `ip.isCanonical("2001:db8::1")`, T},
	{"ip.isCanonical", `ip.isCanonical("2001:DB8::1")`, F},
	{"string", `string(ip(source.address)) == "10.1.2.3" && string(cidr("10.0.0.0/8")) == "10.0.0.0/8"`, T},
	{"string", `string(cidr("10.0.0.1/8").masked()) == "10.0.0.1/8"`, F},

	// Strings (cel-go ext.Strings, plus agentgateway's stripPrefix and stripSuffix).
	{"stripPrefix", `request.path.stripPrefix("/id/") == "1234/data"`, T},
	{"stripPrefix", `request.path.stripPrefix("/other") == "1234/data"`, F},
	{"stripSuffix", `request.path.stripSuffix("/data") == "/id/1234"`, T},
	{"stripSuffix", `request.path.stripSuffix("/data") == request.path`, F},
	{"charAt", `jwt.sub.charAt(1) == "1"`, T},
	{"charAt", `jwt.sub.charAt(0) == "1"`, F},
	{"indexOf", `request.path.indexOf("1234") == 4`, T},
	{"indexOf", `request.path.indexOf("5678") >= 0`, F},
	{"lastIndexOf", `"abcabc".lastIndexOf("bc") == 4`, T},
	{"lastIndexOf", `"abcabc".lastIndexOf("bc") == 1`, F},
	{"join", `jwt.roles.join(",") == "dev,admin"`, T},
	{"join", `jwt.roles.join() == "dev,admin"`, F},
	{"lowerAscii", `"TacoCat".lowerAscii() == "tacocat"`, T},
	{"lowerAscii", `"TacoCat".lowerAscii() == "TacoCat"`, F},
	{"upperAscii", `jwt.team.upperAscii() == "BLUE"`, T},
	{"upperAscii", `jwt.team.upperAscii() == "blue"`, F},
	{"replace", `"hello hello".replace("he", "we", 1) == "wello hello"`, T},
	{"replace", `"hello hello".replace("he", "we") == "wello hello"`, F},
	{"split", `request.path.split("/") == ["", "id", "1234", "data"]`, T},
	{"split", `request.path.split("/", 2).size() == 4`, F},
	{"substring", `request.path.substring(4, 8) == "1234"`, T},
	{"substring", `request.path.substring(4) == "1234"`, F},
	{"trim", `request.headers["x-id"].trim() == "ab-cd"`, T},
	{"trim", `request.headers["x-id"] == "ab-cd"`, F},

	// Math (cel-go ext.Math).
	{"math.least", `math.least(3, 1, 2) == 1 && math.least([-42.0, -21.5]) == -42.0`, T},
	{"math.least", `math.least(3, 1, 2) == 3`, F},
	{"math.greatest", `math.greatest(1, 2u, 1.5) == 2u`, T},
	{"math.greatest", `math.greatest([1, 2]) == 1`, F},
	{"math.ceil", `math.ceil(1.2) == 2.0`, T},
	{"math.ceil", `math.ceil(1.2) == 1.0`, F},
	{"math.floor", `math.floor(-1.2) == -2.0`, T},
	{"math.floor", `math.floor(-1.2) == -1.0`, F},
	{"math.round", `math.round(1.5) == 2.0 && math.round(-1.5) == -2.0`, T},
	{"math.round", `math.round(1.4) == 2.0`, F},
	{"math.trunc", `math.trunc(-1.3) == -1.0`, T},
	{"math.trunc", `math.trunc(1.7) == 2.0`, F},
	{"math.abs", `math.abs(-1) == 1 && math.abs(-1.5) == 1.5`, T},
	{"math.abs", `math.abs(-9223372036854775807 - 1) > 0`, E}, // overflow: an error
	{"math.sign", `math.sign(-42) == -1 && math.sign(0.0) == 0.0`, T},
	{"math.sign", `math.sign(42) == -1`, F},
	{"math.isInf", `math.isInf(1.0 / 0.0)`, T},
	{"math.isInf", `math.isInf(1.0)`, F},
	{"math.isNaN", `math.isNaN(0.0 / 0.0)`, T},
	{"math.isNaN", `math.isNaN(1.0)`, F},
	{"math.isFinite", `math.isFinite(1.2)`, T},
	{"math.isFinite", `math.isFinite(0.0 / 0.0)`, F},
	{"math.sqrt", `math.sqrt(81) == 9.0`, T},
	{"math.sqrt", `math.sqrt(82) == 9.0`, F},
	{"math.bitAnd", `math.bitAnd(3u, 2u) == 2u && math.bitAnd(-3, -5) == -7`, T},
	{"math.bitAnd", `math.bitAnd(1, 2) != 0`, F},
	{"math.bitOr", `math.bitOr(1u, 2u) == 3u`, T},
	{"math.bitOr", `math.bitOr(1, 2) == 2`, F},
	{"math.bitXor", `math.bitXor(3u, 5u) == 6u`, T},
	{"math.bitXor", `math.bitXor(1, 3) == 3`, F},
	{"math.bitNot", `math.bitNot(1) == -2`, T},
	{"math.bitNot", `math.bitNot(0) == 0`, F},
	{"math.bitShiftLeft", `math.bitShiftLeft(1, 2) == 4`, T},
	{"math.bitShiftLeft", `math.bitShiftLeft(1, -1) == 0`, E}, // a negative shift is an error
	{"math.bitShiftRight", `math.bitShiftRight(1024, 2) == 256`, T},
	{"math.bitShiftRight", `math.bitShiftRight(1024, 2) == 512`, F},

	// agentgateway's general functions.
	{"base64Encode", `base64Encode("hello") == "aGVsbG8=" && base64Encode(b"hello") == "aGVsbG8="`, T},
	{"base64Encode", `base64Encode("hello") == "aGVsbG8"`, F},
	{"base64Decode", `string(base64Decode(request.headers["x-b64"])) == "hello" && base64Decode("Zg") == b"f"`, T},
	{"base64Decode", `base64Decode("%%%") == b""`, E},
	{"base64.encode", `base64.encode("hello") == "aGVsbG8=" && base64.encode(b"hello") == "aGVsbG8="`, T},
	{"base64.encode", `base64.encode("hello") == "hello"`, F},
	{"base64.decode", `base64.decode("aGVsbG8") == b"hello" && base64.decode(b"Zg==") == b"f"`, T},
	{"base64.decode", `base64.decode("aGVsbG8=") == b"help"`, F},
	{"default", `default(jwt.missing, "x") == "x" && default(jwt.sub, "x") == "u1"`, T},
	{"default", `default(jwt.nothing, "x") == "x" && default(request.headers["absent"], 1) == 1`, T},
	{"default", `default(jwt.sub, "x") == "x"`, F},
	{"default", `default(1 / 0, 2) == 2`, E}, // only a missing value defaults; other errors stay
	{"coalesce", `coalesce(jwt.missing, 1 / 0, "fallback") == "fallback" && coalesce(jwt.sub) == "u1"`, T},
	{"coalesce", `coalesce(null, jwt.missing) == null && coalesce(jwt.nothing, jwt.team, "x") == "blue"`, T},
	{"coalesce", `coalesce(jwt.missing, 1 / 0) == 0`, E}, // all errors: the last error
	{"fail", `coalesce(fail("bad"), true)`, T},
	{"fail", `request.path == "/id/1234/data" && fail("always")`, E},
	{"json", `json(request.headers["x-json"]).user == "alice" && json(b"[1, 2.5]") == [1, 2.5]`, T},
	{"json", `json(request.headers["x-json"]).user == "bob"`, F},
	{"json", `json("{").user == "alice"`, E},
	{"jsonField", `jsonField(request.headers["x-json"], "n") == 1 && jsonField(request.headers["x-json"], "tags")[1] == "b"`, T},
	{"jsonField", `jsonField(request.headers["x-json"], "user") == "bob"`, F},
	{"jsonField", `default(jsonField(request.headers["x-json"], "absent"), "d") == "d"`, T},
	{"toJson", `toJson({"a": [1, true, null], "b": "x"}) in ['{"a":[1,true,null],"b":"x"}', '{"b":"x","a":[1,true,null]}']`, T},
	{"toJson", `toJson(jwt.roles) == '["dev","admin"]' && to_json(1) == "1"`, T},
	{"toJson", `toJson("x") == "x"`, F},
	{"with", `jwt.roles.with(r, "admin" in r && r.size() == 2)`, T},
	{"with", `request.path.split("/").with(p, p[1] == "id" && p[2] == "9")`, F},
	{"mapValues", `{"a": 1, "b": 2}.mapValues(v, v * 2) == {"a": 2, "b": 4}`, T},
	{"mapValues", `request.headers.mapValues(v, v.size())["x-b64"] == 8`, T},
	{"mapValues", `{"a": 1}.mapValues(v, v * 2) == {"a": 1}`, F},
	{"filterKeys", `request.headers.filterKeys(k, k.startsWith("x-j")) == {"x-json": request.headers["x-json"]}`, T},
	{"filterKeys", `{"a": 1, "b": 2}.filterKeys(k, k != "b").size() == 2`, F},
	{"merge", `{"a": 1, "b": 1}.merge({"b": 2, "c": 3}) == {"a": 1, "b": 2, "c": 3}`, T},
	{"merge", `jwt.merge({"sub": "u2"}).sub == "u1"`, F},
	{"regexReplace", `request.path.regexReplace("/id/[0-9]+/", "/id/{id}/") == "/id/{id}/data"`, T},
	{"regexReplace", `"blah id=1234 bar".regexReplace("id=(.+?) ", "[$1] ") == "blah [1234] bar" && "aaa".regexReplace("a", "b") == "baa"`, T},
	{"regexReplace", `request.path.regexReplace(request.headers["x-pattern"], "N") == "/id/N/data"`, T},
	{"regexReplace", `request.path.regexReplace("[a-z]+", "X") == "/X/1234/X"`, F}, // the first match only
	{"regexReplace", `request.path.regexReplace(request.headers["x-id"] + "(", "N") == ""`, E},
	{"url.encode", `url.encode("hello world/?x=1&y=2") == "hello%20world%2F%3Fx%3D1%26y%3D2" && url.encode("abc-._~") == "abc-._~"`, T},
	{"url.encode", `url.encode("a b") == "a+b"`, F},
	{"url.decode", `url.decode("hello%20world%2F%3F") == "hello world/?" && url.decode("a+b%zz") == "a+b%zz"`, T},
	{"url.decode", `url.decode("%FF") == ""`, E}, // not UTF-8: an error
	{"form.decode", `form.decode("client_id=abc&scope=openid+profile&a=1&a=2") == {"client_id": "abc", "scope": "openid profile", "a": ["1", "2"]}`, T},
	{"form.decode", `form.decode(b"x=%41%zz") == {"x": "B%zz"}`, F},
	{"form.encode", `form.encode({"scope": "openid profile", "a": ["1", "2"], "n": null}) == "a=1&a=2&scope=openid+profile"`, T},
	{"form.encode", `form.encode({"bad": {}}) == ""`, E},
	{"sha1.encode", `sha1.encode("hello") == "aaf4c61ddcc5e8a2dabede0f3b482cd9aea9434d"`, T},
	{"sha1.encode", `sha1.encode(b"hello") == "hello"`, F},
	{"sha256.encode", `sha256.encode(jwt.team) == "16477688c0e00699c6cfa4497a3612d7e83c532062b64b250fed8908128ed548"`, T},
	{"sha256.encode", `sha256.encode("hello") == sha256.encode("hello!")`, F},
	{"md5.encode", `md5.encode("hello") == "5d41402abc4b2a76b9719d911017c592"`, T},
	{"md5.encode", `md5.encode("hello") == ""`, F},
	// cel-go's lists, sets, regex and bindings extensions.
	{"lists", `[3, 1, 2].sort() == [1, 2, 3] && jwt.roles.distinct().size() == 2 && [1, [2, 3]].flatten() == [1, 2, 3]`, T},
	{"lists", `jwt.roles.sort()[0] == "dev"`, F},
	{"sets", `sets.contains(jwt.roles, ["admin"]) && sets.intersects(jwt.roles, ["x", "dev"])`, T},
	{"sets", `sets.equivalent(jwt.roles, ["admin"])`, F},
	{"regex", `regex.extract(request.path, "[0-9]+").orValue("") == "1234" && regex.replace(request.path, "[0-9]+", "N") == "/id/N/data"`, T},
	{"regex", `regex.extract(request.path, "z+").hasValue()`, F},
	{"cel.bind", `cel.bind(p, request.path.split("/"), p.size() == 4 && p[2] == "1234")`, T},
	{"cel.bind", `cel.bind(p, request.path, p == "/")`, F},
}

// TestAgentgatewayFunctions compiles each case as the config loader does
// and evaluates it as an `authorization` rule; a false case must be false
// without an error, and an error case must fail.
func TestAgentgatewayFunctions(t *testing.T) {
	for _, tc := range funcCases {
		t.Run(tc.fn+"/"+tc.expr, func(t *testing.T) {
			rs := compile(t, allow(tc.expr))
			in := funcInput()
			if got := rs.Allowed(&in); got != (tc.want == T) {
				t.Fatalf("Allowed = %v, want %v", got, tc.want == T)
			}
			v, _, err := rs.allowAny[0].prog.Eval(&activation{in: &in})
			if (err != nil) != (tc.want == E) {
				t.Fatalf("value %v, error %v", v, err)
			}
		})
	}
}

// TestAgentgatewayFunctionsCovered: every function of agentgateway's
// library the rules accept has a true and a false case above.
func TestAgentgatewayFunctionsCovered(t *testing.T) {
	fns := []string{
		// network
		"cidr", "ip", "isIP", "isCIDR", "containsIP", "containsCIDR", "family", "isLoopback", "isUnspecified",
		"isGlobalUnicast", "isLinkLocalUnicast", "isLinkLocalMulticast", "prefixLength", "masked", "cidr.ip",
		"isMask", "ip.isCanonical", "string",
		// strings
		"stripPrefix", "stripSuffix", "charAt", "indexOf", "lastIndexOf", "join", "lowerAscii", "upperAscii",
		"replace", "split", "substring", "trim",
		// math
		"math.least", "math.greatest", "math.ceil", "math.floor", "math.round", "math.trunc", "math.abs",
		"math.sign", "math.isInf", "math.isNaN", "math.isFinite", "math.sqrt", "math.bitAnd", "math.bitOr",
		"math.bitXor", "math.bitNot", "math.bitShiftLeft", "math.bitShiftRight",
		// general
		"base64Encode", "base64Decode", "base64.encode", "base64.decode", "default", "coalesce", "fail", "json",
		"jsonField", "toJson", "with", "mapValues", "filterKeys", "merge", "regexReplace", "url.encode",
		"url.decode", "form.decode", "form.encode", "sha1.encode", "sha256.encode", "md5.encode",
	}
	seen := map[string][2]bool{}
	for _, tc := range funcCases {
		s := seen[tc.fn]
		if tc.want == T {
			s[1] = true
		} else {
			s[0] = true
		}
		seen[tc.fn] = s
	}
	for _, fn := range fns {
		if s := seen[fn]; !s[0] || !s[1] {
			t.Errorf("%s: false case %v, true case %v", fn, s[0], s[1])
		}
	}
}

// TestDefaultWithoutToken: default() and coalesce() stand in for `jwt`
// itself when the request has no token, as agentgateway's do for an
// undeclared variable.
func TestDefaultWithoutToken(t *testing.T) {
	for _, tc := range []struct {
		expr string
		want bool
	}{
		{`default(jwt.sub, "anonymous") == "anonymous"`, true},
		{`default(jwt, {}).size() == 0`, true},
		{`coalesce(jwt.sub, "anonymous") == "anonymous"`, true},
		{`default(jwt.sub, "anonymous") == "u1"`, false},
		{`jwt.sub == "anonymous"`, false},
	} {
		rs := compile(t, allow(tc.expr))
		in := funcInput()
		in.Claims = nil
		if got := rs.Allowed(&in); got != tc.want {
			t.Errorf("%s = %v, want %v", tc.expr, got, tc.want)
		}
	}
}

// trafficHTTPExample is the `/ips` route of agentgateway's
// examples/traffic-http/config.yaml, its rule as written there.
const trafficHTTPExample = `binds:
- port: 3000
  listeners:
  - protocol: HTTP
    routes:
    - matches:
      - path:
          pathPrefix: /ips
      policies:
        authorization:
          rules:
          - |
            cidr("127.0.0.1/8").containsIP(source.address)
`

// TestTrafficHTTPExample: the example loads, and its rule lets loopback
// clients through and refuses others.
func TestTrafficHTTPExample(t *testing.T) {
	f, err := config.Parse([]byte(trafficHTTPExample), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	rules := f.Binds[0].Listeners[0].Routes[0].Policies.Authorization
	if rules == nil || len(rules.Rules) != 1 || !strings.Contains(rules.Rules[0].Expr, `cidr("127.0.0.1/8")`) {
		t.Fatalf("rules %+v", rules)
	}
	rs, err := Compile(rules)
	if err != nil {
		t.Fatal(err)
	}
	h := HTTP{Rules: rs}
	for _, tc := range []struct {
		ip   net.IP
		want bool
	}{
		{net.IPv4(127, 0, 0, 1), true},
		{net.IPv4(127, 9, 8, 7), true},
		{net.IPv4(10, 1, 2, 3), false},
		{net.IPv6loopback, false},
		{net.ParseIP("::ffff:127.0.0.1"), true}, // an IPv4 client of a dual-stack listener
	} {
		c := httpCtxFrom(&net.TCPAddr{IP: tc.ip, Port: 4567}, "/ips")
		got := h.OnRequest(c) == policy.Continue
		if got != tc.want {
			t.Errorf("from %s: allowed %v, want %v", tc.ip, got, tc.want)
		}
		if !got && c.Fast.Response.StatusCode() != fasthttp.StatusForbidden {
			t.Errorf("from %s: status %d", tc.ip, c.Fast.Response.StatusCode())
		}
	}
}

// httpCtxFrom is httpCtx from another address.
func httpCtxFrom(addr *net.TCPAddr, target string) *policy.Ctx {
	c := httpCtx(target)
	var req fasthttp.Request
	c.Fast.Request.CopyTo(&req)
	c.Fast.Init(&req, addr, nil)
	c.Path = c.Fast.Request.URI().PathOriginal()
	return c
}

// BenchmarkCIDRRule: the example's rule on one request; the range is parsed
// when the rule is compiled, not per request.
func BenchmarkCIDRRule(b *testing.B) {
	h := HTTP{Rules: compile(b, allow(`cidr("127.0.0.1/8").containsIP(source.address)`))}
	c := httpCtxFrom(&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}, "/ips")
	b.ReportAllocs()
	for b.Loop() {
		if h.OnRequest(c) != policy.Continue {
			b.Fatal("denied")
		}
	}
}

// FuzzFunctionInputs: every function case evaluated with fuzzed request
// values (address, path, headers) decides without panicking.
func FuzzFunctionInputs(f *testing.F) {
	rules := make([]*RuleSet, len(funcCases))
	for i, tc := range funcCases {
		rules[i] = compile(f, allow(tc.expr))
	}
	f.Add("10.1.2.3", "/id/1234/data", `{"user":"alice"}`, "aGVsbG8=", "[0-9]+")
	f.Add("::ffff:1.2.3.4", "a=1&a=%zz&b", `[1, {"a": null}]`, "Zg", "(")
	f.Add("fe80::1%eth0", "%FF%", `"\u00e9"`, "%%%", "$1${x}")
	f.Fuzz(func(t *testing.T, addr, path, jsonText, b64, pattern string) {
		in := funcInput()
		in.Source["address"] = addr
		in.Request["path"] = path
		h := in.Request["headers"].(map[string]any)
		h["x-json"], h["x-b64"], h["x-pattern"], h["x-id"] = jsonText, b64, pattern, path
		for _, rs := range rules {
			rs.Allowed(&in)
		}
	})
}

// TestLiteralsPreparedOnce: a literal range or address is parsed, and a
// literal pattern compiled, when the rule is compiled, not per request: a
// rule on literals alone allocates no more than `true`, and a literal
// pattern far less than one read from the request.
func TestLiteralsPreparedOnce(t *testing.T) {
	in := Input{Request: map[string]any{"pattern": "[0-9]+"}, Source: map[string]any{"address": "127.0.0.1"}}
	allocs := func(expr string) float64 {
		rs := compile(t, allow(expr))
		if !rs.Allowed(&in) {
			t.Fatalf("%s is false", expr)
		}
		return testing.AllocsPerRun(200, func() { rs.Allowed(&in) })
	}
	base := allocs(`true`)
	lit := `ip("127.0.0.1").isLoopback() && cidr("127.0.0.0/8").containsCIDR(cidr("127.0.0.0/16")) && cidr("10.0.0.0/8").ip().family() == 4`
	if n := allocs(lit); n > base {
		t.Errorf("%s: %v allocations, want at most %v (those of true)", lit, n, base)
	}
	litRe, dynRe := allocs(`source.address.regexReplace("[0-9]+", "n") == "n.0.0.1"`), allocs(`source.address.regexReplace(request.pattern, "n") == "n.0.0.1"`)
	if litRe+5 > dynRe {
		t.Errorf("regexReplace: %v allocations with a literal pattern, %v with one from the request", litRe, dynRe)
	}
}

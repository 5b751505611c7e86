package tlshello

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"
)

// Builders of synthetic hellos, big-endian as on the wire.

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
func u8(v int) []byte            { return []byte{byte(v)} }
func u16(v int) []byte           { return []byte{byte(v >> 8), byte(v)} }
func u24(v int) []byte           { return []byte{byte(v >> 16), byte(v >> 8), byte(v)} }

// vec8 and vec16 prefix the parts with their total length.
func vec8(parts ...[]byte) []byte  { b := cat(parts...); return cat(u8(len(b)), b) }
func vec16(parts ...[]byte) []byte { b := cat(parts...); return cat(u16(len(b)), b) }

// ext is an extension of type typ holding data.
func ext(typ int, data ...[]byte) []byte { return cat(u16(typ), vec16(data...)) }

// sni is a server_name extension with one host_name entry per name.
func sni(names ...string) []byte {
	var list [][]byte
	for _, n := range names {
		list = append(list, cat(u8(0), vec16([]byte(n))))
	}
	return ext(extServerName, vec16(list...))
}

// alpn is an ALPN extension offering protos.
func alpn(protos ...string) []byte {
	var list [][]byte
	for _, p := range protos {
		list = append(list, vec8([]byte(p)))
	}
	return ext(extALPN, vec16(list...))
}

// versions is a supported_versions extension offering vs.
func versions(vs ...int) []byte {
	var list [][]byte
	for _, v := range vs {
		list = append(list, u16(v))
	}
	return ext(extSupportedVersions, vec8(list...))
}

// fixed is a ClientHello body's fields before its extensions.
var fixed = cat(u16(0x0303), make([]byte, 32), vec8(make([]byte, 32)), vec16(u16(0x1301), u16(0xc02f)), vec8(u8(0)))

// message is a ClientHello handshake message with body.
func message(body ...[]byte) []byte {
	b := cat(body...)
	return cat(u8(typeClientHello), u24(len(b)), b)
}

// hello is a ClientHello handshake message with the fixed fields and exts.
func hello(exts ...[]byte) []byte { return message(fixed, vec16(exts...)) }

// frame puts msg into handshake records: the first payloads of the given
// sizes, the last the rest.
func frame(msg []byte, sizes ...int) []byte {
	var out []byte
	for _, n := range append(sizes, len(msg)-sum(sizes)) {
		out = append(out, cat(u8(typeHandshake), u16(0x0301), u16(n), msg[:n])...)
		msg = msg[n:]
	}
	return out
}

func sum(v []int) int {
	s := 0
	for _, n := range v {
		s += n
	}
	return s
}

// view is what a test compares of a Hello.
type view struct {
	serverName string
	alpn       []string
	maxVersion uint16
	tls13      bool
	ech        bool
}

func viewOf(h *Hello) view {
	v := view{serverName: string(h.ServerName), maxVersion: h.MaxVersion(), tls13: h.Offers(0x0304), ech: h.ECH}
	for p := range h.ALPN() {
		v.alpn = append(v.alpn, string(p))
	}
	return v
}

func (v view) equal(w view) bool {
	return v.serverName == w.serverName && slices.Equal(v.alpn, w.alpn) &&
		v.maxVersion == w.maxVersion && v.tls13 == w.tls13 && v.ech == w.ech
}

// mustParse parses b and checks what every complete hello must satisfy:
// Need says it is complete, and every shorter prefix needs more.
func mustParse(t *testing.T, b []byte) view {
	t.Helper()
	h, err := Parse(b)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	end := Need(b)
	if end > len(b) || end < 9 {
		t.Fatalf("Need = %d of a complete hello in %d bytes", end, len(b))
	}
	for i := range end {
		if _, err := Parse(b[:i]); err != ErrNeedMore {
			t.Fatalf("Parse of the first %d of %d bytes: %v, want ErrNeedMore", i, end, err)
		}
		if n := Need(b[:i]); n <= i || n > end {
			t.Fatalf("Need of the first %d bytes = %d, want in (%d, %d]", i, n, i, end)
		}
	}
	return viewOf(&h)
}

func TestCaptured(t *testing.T) {
	for _, c := range capturedCases() {
		t.Run(c.name, func(t *testing.T) {
			b := c.capture(t)
			want := view{serverName: c.serverName, alpn: c.alpn, maxVersion: c.maxVersion, tls13: c.tls13}
			if got := mustParse(t, b); !got.equal(want) {
				t.Fatalf("got %+v, want %+v", got, want)
			}
			agreeWithCryptoTLS(t, b)
			// With bytes after the hello (a next record, early data).
			if got := mustParse(t, cat(b, []byte{23, 3, 3, 0, 1, 0})); !got.equal(want) {
				t.Fatalf("with bytes after it: got %+v, want %+v", got, want)
			}
			// Split in two records at every byte, in three at some.
			msg := b[5:]
			for i := 1; i < len(msg); i++ {
				if got := mustParseQuick(t, frame(msg, i)); !got.equal(want) {
					t.Fatalf("split at %d: got %+v, want %+v", i, got, want)
				}
			}
			for i := 1; i < len(msg); i += 13 {
				for j := 1; i+j < len(msg); j += 29 {
					if got := mustParseQuick(t, frame(msg, i, j)); !got.equal(want) {
						t.Fatalf("split at %d and %d: got %+v, want %+v", i, i+j, got, want)
					}
				}
			}
			// Prefixes of a few split forms, the 4-byte header split too.
			for _, sizes := range [][]int{{1}, {2}, {3}, {1, 1, 1}, {4}, {40, 100}} {
				if got := mustParse(t, frame(msg, sizes...)); !got.equal(want) {
					t.Fatalf("split in %v: got %+v, want %+v", sizes, got, want)
				}
			}
		})
	}
}

// mustParseQuick is mustParse checking only the prefixes one byte short of
// the hello and one byte into its last record.
func mustParseQuick(t *testing.T, b []byte) view {
	t.Helper()
	h, err := Parse(b)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if Need(b) != len(b) {
		t.Fatalf("Need = %d, want %d", Need(b), len(b))
	}
	if _, err := Parse(b[:len(b)-1]); err != ErrNeedMore {
		t.Fatalf("one byte short: %v, want ErrNeedMore", err)
	}
	return viewOf(&h)
}

func TestSynthetic(t *testing.T) {
	for _, tc := range []struct {
		name string
		msg  []byte
		want view
	}{
		{"no extensions", message(fixed), view{maxVersion: 0x0303}},
		{"empty extensions", hello(), view{maxVersion: 0x0303}},
		{"tls10 without extensions", message(u16(0x0301), fixed[2:]), view{maxVersion: 0x0301}},
		{"legacy 1.3 without supported_versions", message(u16(0x0304), fixed[2:], vec16(sni("a.example"))),
			view{serverName: "a.example", maxVersion: 0x0303}},
		{"grease and drafts skipped", hello(versions(0x7a7a, 0x7f1c, 0x0304, 0x0303)), view{maxVersion: 0x0304, tls13: true}},
		{"no known version", hello(versions(0x7a7a)), view{}},
		{"name and protocols", hello(sni("Api.Example.com"), alpn("h2", "http/1.1")),
			view{serverName: "Api.Example.com", alpn: []string{"h2", "http/1.1"}, maxVersion: 0x0303}},
		{"underscore digits hyphen", hello(sni("_acme-1.x9.example")), view{serverName: "_acme-1.x9.example", maxVersion: 0x0303}},
		{"numeric labels not last", hello(sni("1.2.3.4.example")), view{serverName: "1.2.3.4.example", maxVersion: 0x0303}},
		{"hex-looking name", hello(sni("cafe.be")), view{serverName: "cafe.be", maxVersion: 0x0303}},
		{"longest name", hello(sni(longName)), view{serverName: longName, maxVersion: 0x0303}},
		{"ipv4 literal", hello(sni("192.0.2.1"), alpn("h2")), view{alpn: []string{"h2"}, maxVersion: 0x0303}},
		{"number", hello(sni("3232235777")), view{maxVersion: 0x0303}},
		{"ipv6 literal", hello(sni("2001:db8::1")), view{maxVersion: 0x0303}},
		{"ipv4-mapped ipv6 literal", hello(sni("::ffff:192.0.2.1")), view{maxVersion: 0x0303}},
		{"ech", hello(sni("public.example"), ext(extECH, u8(0), u16(1), u16(1), u8(7), vec16(u8(1)), vec16(u8(2)))),
			view{serverName: "public.example", maxVersion: 0x0303, ech: true}},
		{"unknown extensions kept out", hello(ext(0xaaaa), ext(21, make([]byte, 300)), sni("p.example"), ext(0x1a1a, u8(0))),
			view{serverName: "p.example", maxVersion: 0x0303}},
		{"pre_shared_key last", hello(sni("a.example"), ext(extPreSharedKey, u8(0))), view{serverName: "a.example", maxVersion: 0x0303}},
		{"duplicate protocol names", hello(alpn("h2", "h2")), view{alpn: []string{"h2", "h2"}, maxVersion: 0x0303}},
		{"64 extensions", hello(distinctExts(64)...), view{maxVersion: 0x0303}},
		{"300 extensions", hello(distinctExts(300)...), view{maxVersion: 0x0303}},
		{"largest", hello(sni("big.example"), ext(21, make([]byte, MaxHelloSize-len(fixed)-2-len(sni("big.example"))-4))),
			view{serverName: "big.example", maxVersion: 0x0303}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := frame(tc.msg, splitAt(len(tc.msg))...)
			if got := mustParseQuick(t, b); !got.equal(tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
			agreeWithCryptoTLS(t, b)
		})
	}
}

// splitAt returns record sizes that fit a message of n bytes in records.
func splitAt(n int) []int {
	var sizes []int
	for ; n > maxRecordLen; n -= maxRecordLen {
		sizes = append(sizes, maxRecordLen)
	}
	return sizes
}

// distinctExts returns n empty extensions of distinct types, none that Parse
// looks inside.
func distinctExts(n int) [][]byte {
	var exts [][]byte
	for typ := 1000; len(exts) < n; typ++ {
		exts = append(exts, ext(typ))
	}
	return exts
}

func TestMalformed(t *testing.T) {
	good := hello(sni("example.com"), alpn("h2"))
	long := hello(ext(21, make([]byte, 6000)))
	for _, tc := range []struct {
		name string
		in   []byte
		want error
	}{
		// Not TLS at all.
		{"http", []byte("GET / HTTP/1.1\r\n"), ErrNotTLS},
		{"sslv2 hello", []byte{0x80, 0x2e, 0x01, 0x03, 0x01, 0x00, 0x15}, ErrNotTLS},
		{"record version 2", []byte{22, 2}, ErrNotTLS},
		{"alert first", cat([]byte{21, 3, 1, 0, 2, 1, 0}, frame(good)), ErrNotTLS},
		{"change_cipher_spec first", cat([]byte{20, 3, 3, 0, 1, 1}, frame(good)), ErrNotTLS},
		{"application data", []byte{23, 3, 3, 0, 10}, ErrNotTLS},
		// Records.
		{"empty record", []byte{22, 3, 1, 0, 0}, errRecordEmpty},
		{"empty record inside", cat(frame(good[:10]), []byte{22, 3, 3, 0, 0}), errRecordEmpty},
		{"oversized record", []byte{22, 3, 1, 0x40, 0x01}, errRecordLong},
		{"alert between records", cat(frame(good[:10]), []byte{21, 3, 3, 0, 2, 1, 0}, frame(good[10:])), errRecordType},
		{"application data between records", cat(frame(good[:10]), []byte{23, 3, 3, 0, 1, 0}), errRecordType},
		{"second record version", cat(frame(good[:10]), []byte{22, 4, 0, 0, 1, 0}), errRecordVersion},
		{"server hello", frame(cat(u8(2), good[1:])), errNotClientHello},
		{"server hello alone", []byte{22, 3, 3, 0, 50, 2}, errNotClientHello},
		{"handshake bytes after the hello", frame(cat(good, []byte{20, 0, 0, 0})), errAfterHello},
		{"record longer than the hello", cat([]byte{22, 3, 1, 0x10, 0}, good), errAfterHello},
		{"declared too large", []byte{22, 3, 1, 0x40, 0, 1, 0, 0x40, 1}, ErrTooLarge},
		{"declared too large split", frame([]byte{1, 0, 0x40, 1}, 1, 1, 1), ErrTooLarge},
		{"tiny records", frame(long, ones(len(long)-1)...), ErrTooLarge},
		// The hello's fields.
		{"truncated version", frame(message(u8(3))), errTruncated},
		{"truncated random", frame(message(u16(0x0303), make([]byte, 31))), errTruncated},
		{"session id past the end", frame(message(u16(0x0303), make([]byte, 32), u8(32), make([]byte, 31))), errTruncated},
		{"session id of 33", frame(message(u16(0x0303), make([]byte, 32), vec8(make([]byte, 33)), fixed[67:])), errSessionID},
		{"no cipher suites", frame(message(fixed[:67], vec16(), vec8(u8(0)))), errNoCipherSuites},
		{"odd cipher suites", frame(message(fixed[:67], vec16(u8(0x13)), vec8(u8(0)))), errCipherSuites},
		{"cipher suites past the end", frame(message(fixed[:67], u16(8), u16(0x1301))), errTruncated},
		{"no compression", frame(message(fixed[:len(fixed)-2], vec8())), errCompression},
		{"compression past the end", frame(message(fixed[:len(fixed)-2], u8(2), u8(0))), errTruncated},
		{"extensions length past the end", frame(message(fixed, u16(11), sni("a"))), errTruncated},
		{"extensions length short", frame(message(fixed, u16(3), sni("a"))), errTrailing},
		{"one byte of extensions length", frame(message(fixed, u8(0))), errTruncated},
		{"bytes after the extensions", frame(message(fixed, vec16(sni("a")), u8(0))), errTrailing},
		{"extension header cut", frame(hello(sni("a"))[:len(hello(sni("a")))-1]), ErrNeedMore},
		{"extension data past the end", frame(message(fixed, vec16(u16(0xaaaa), u16(5), u8(0)))), errTruncated},
		{"extension type cut", frame(message(fixed, vec16(u8(0)))), errTruncated},
		{"duplicate extension", frame(hello(sni("a.example"), alpn("h2"), sni("a.example"))), errDuplicate},
		{"duplicate unknown extension", frame(hello(ext(0xaaaa), ext(0xaaaa))), errDuplicate},
		{"duplicate after 64", frame(hello(append(distinctExts(70), ext(1003))...)), errDuplicate},
		{"duplicate at 64", frame(hello(append(distinctExts(64), ext(1000))...)), errDuplicate},
		{"pre_shared_key not last", frame(hello(ext(extPreSharedKey, u8(0)), sni("a.example"))), errPSKNotLast},
		// server_name.
		{"sni empty data", frame(hello(ext(extServerName))), errExtLength},
		{"sni list past the data", frame(hello(ext(extServerName, u16(9), u8(0), vec16([]byte("a"))))), errExtLength},
		{"sni bytes after the list", frame(hello(ext(extServerName, vec16(u8(0), vec16([]byte("a"))), u8(0)))), errExtLength},
		{"sni empty list", frame(hello(ext(extServerName, vec16()))), errSNIEntries},
		{"sni two names", frame(hello(sni("a.example", "b.example"))), errSNIEntries},
		{"sni same name twice", frame(hello(sni("a.example", "a.example"))), errSNIEntries},
		{"sni other name type", frame(hello(ext(extServerName, vec16(u8(1), vec16([]byte("a.example")))))), errSNIEntries},
		{"sni host and other type", frame(hello(ext(extServerName, vec16(u8(0), vec16([]byte("a.example")), u8(1), vec16([]byte("x")))))), errSNIEntries},
		{"sni name past the list", frame(hello(ext(extServerName, vec16(u8(0), u16(9), []byte("a"))))), errExtLength},
		{"sni zero-length name", frame(hello(sni(""))), errSNILength},
		{"sni 254 bytes", frame(hello(sni(longName + "b"))), errSNILength},
		{"sni trailing dot", frame(hello(sni("example.com."))), errSNITrailingDot},
		{"sni dot", frame(hello(sni("."))), errSNITrailingDot},
		{"sni non-ascii", frame(hello(sni("exämple.com"))), errSNIByte},
		{"sni high byte", frame(hello(sni("ex\xffample.com"))), errSNIByte},
		{"sni nul", frame(hello(sni("example.com\x00.evil"))), errSNIByte},
		{"sni space", frame(hello(sni("example .com"))), errSNIByte},
		{"sni wildcard", frame(hello(sni("*.example.com"))), errSNIByte},
		{"sni slash", frame(hello(sni("example.com/x"))), errSNIByte},
		{"sni port", frame(hello(sni("example.com:443"))), errSNIByte},
		{"sni bracketed ipv6", frame(hello(sni("[::1]"))), errSNIByte},
		// ALPN.
		{"alpn empty data", frame(hello(ext(extALPN))), errExtLength},
		{"alpn empty list", frame(hello(ext(extALPN, vec16()))), errALPNEmpty},
		{"alpn empty name", frame(hello(alpn("h2", ""))), errALPNEmpty},
		{"alpn name past the list", frame(hello(ext(extALPN, vec16(u8(3), []byte("h2"))))), errExtLength},
		{"alpn bytes after the list", frame(hello(ext(extALPN, vec16(vec8([]byte("h2"))), u8(0)))), errExtLength},
		// supported_versions.
		{"versions empty", frame(hello(ext(extSupportedVersions, vec8()))), errSupportedVersion},
		{"versions odd", frame(hello(ext(extSupportedVersions, vec8(u16(0x0304), u8(3))))), errSupportedVersion},
		{"versions past the data", frame(hello(ext(extSupportedVersions, u8(4), u16(0x0304)))), errExtLength},
		{"versions bytes after the list", frame(hello(ext(extSupportedVersions, vec8(u16(0x0304)), u8(0)))), errExtLength},
		{"versions no data", frame(hello(ext(extSupportedVersions))), errExtLength},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, err := Parse(tc.in)
			if err != tc.want {
				t.Fatalf("Parse: %v, want %v", err, tc.want)
			}
			if !errors.Is(err, ErrMalformed) && err != ErrNotTLS && err != ErrTooLarge && err != ErrNeedMore {
				t.Fatalf("%v is none of the package's errors", err)
			}
			if !viewOf(&h).equal(view{}) {
				t.Fatalf("Hello not reset on error: %+v", viewOf(&h))
			}
			if n := Need(tc.in); (err == ErrNeedMore) != (n > len(tc.in)) {
				t.Fatalf("Need = %d of %d bytes with %v", n, len(tc.in), err)
			}
			// More input cannot mend an error found in the records.
			if err != ErrNeedMore {
				if _, err2 := Parse(cat(tc.in, make([]byte, 100))); err2 != err {
					t.Fatalf("with more bytes: %v, want %v", err2, err)
				}
			}
			agreeWithCryptoTLS(t, tc.in)
		})
	}
}

func ones(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = 1
	}
	return s
}

func TestErrors(t *testing.T) {
	if !errors.Is(errSNIByte, ErrMalformed) {
		t.Fatal("a malformed error is not ErrMalformed")
	}
	if got := errSNIByte.Error(); !strings.HasPrefix(got, "tlshello: malformed ClientHello: host_name") {
		t.Fatalf("Error() = %q", got)
	}
}

func TestLooksLikeTLS(t *testing.T) {
	if !LooksLikeTLS(0x16) || LooksLikeTLS('G') || LooksLikeTLS(0x80) {
		t.Fatal("LooksLikeTLS")
	}
}

func TestHelpers(t *testing.T) {
	h, err := Parse(frame(hello(sni("WWW.Ex-ample.COM"), alpn("h2", "http/1.1"), versions(0x0303, 0x0302))))
	if err != nil {
		t.Fatal(err)
	}
	if got := string(h.AppendLowerServerName([]byte("x:"))); got != "x:www.ex-ample.com" {
		t.Fatalf("AppendLowerServerName = %q", got)
	}
	if !h.HasALPN("h2") || !h.HasALPN("http/1.1") || h.HasALPN("h") || h.HasALPN("h2c") || h.HasALPN("") {
		t.Fatal("HasALPN")
	}
	for p := range h.ALPN() { // stopping early
		if string(p) != "h2" {
			t.Fatalf("first protocol %q", p)
		}
		break
	}
	if h.MaxVersion() != 0x0303 || !h.Offers(0x0302) || h.Offers(0x0304) || h.Offers(0x0301) {
		t.Fatal("versions")
	}
	// Without supported_versions: 3.x up to the legacy version.
	h, _ = Parse(frame(message(u16(0x0302), fixed[2:])))
	if h.MaxVersion() != 0x0302 || !h.Offers(0x0300) || !h.Offers(0x0302) || h.Offers(0x0303) || h.Offers(0x0200) {
		t.Fatal("legacy versions")
	}
}

// TestReuse parses split hellos into one Hello, each result in its buffer.
func TestReuse(t *testing.T) {
	var h Hello
	for i, name := range []string{"a.example", "b.example", "a-much-longer-name.example"} {
		msg := hello(sni(name), alpn("h2"))
		if err := h.Parse(frame(msg, 7+i, 20)); err != nil {
			t.Fatal(err)
		}
		if string(h.ServerName) != name || !h.HasALPN("h2") {
			t.Fatalf("got %+v", viewOf(&h))
		}
	}
	if err := h.Parse([]byte{22, 3, 1}); err != ErrNeedMore || h.ServerName != nil {
		t.Fatalf("%v, %q", err, h.ServerName)
	}
}

func TestAllocations(t *testing.T) {
	b := captureHello(t, capturedCases()[0].cfg)
	split := frame(b[5:], 100, 300)
	bad := frame(hello(sni("a b")))
	var h Hello
	var dst []byte
	n := 0
	check := func(name string, f func()) {
		t.Helper()
		if a := testing.AllocsPerRun(100, f); a != 0 {
			t.Errorf("%s: %v allocations", name, a)
		}
	}
	check("Parse", func() {
		h, _ := Parse(b)
		n += len(h.ServerName)
	})
	check("Hello.Parse split", func() { _ = h.Parse(split) })
	check("malformed", func() { _, err := Parse(bad); n += len(err.(malformed)) })
	check("Need", func() { n += Need(b[:100]) })
	h, _ = Parse(b)
	check("ALPN", func() {
		for p := range h.ALPN() {
			n += len(p)
		}
	})
	check("HasALPN", func() {
		if h.HasALPN("http/1.1") {
			n++
		}
	})
	dst = make([]byte, 0, 64)
	check("AppendLowerServerName", func() { dst = h.AppendLowerServerName(dst[:0]) })
	check("MaxVersion", func() { n += int(h.MaxVersion()) })
}

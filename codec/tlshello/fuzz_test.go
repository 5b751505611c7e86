package tlshello

import (
	"bytes"
	"crypto/tls"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"
)

// errStop ends a crypto/tls handshake from GetConfigForClient.
var errStop = errors.New("stop")

// tlsSaw is what a crypto/tls server saw of a hello.
type tlsSaw struct {
	reached    bool // GetConfigForClient ran
	serverName string
	protos     []string
	err        error // why the handshake ended before GetConfigForClient
}

// cryptoTLS feeds b to a crypto/tls server, which reads it and then EOF
// (so it returns at once), and says what its GetConfigForClient saw.
func cryptoTLS(b []byte) tlsSaw {
	var saw tlsSaw
	cfg := &tls.Config{GetConfigForClient: func(chi *tls.ClientHelloInfo) (*tls.Config, error) {
		saw = tlsSaw{reached: true, serverName: chi.ServerName, protos: slices.Clone(chi.SupportedProtos)}
		return nil, errStop
	}}
	err := tls.Server(&fakeConn{in: bytes.NewReader(b)}, cfg).Handshake()
	if !saw.reached {
		saw.err = err
	}
	return saw
}

// agreeWithCryptoTLS fails unless Parse and a crypto/tls server read b the
// same way, but for the differences the package comment lists.
func agreeWithCryptoTLS(t testing.TB, b []byte) {
	t.Helper()
	h, err := Parse(b)
	saw := cryptoTLS(b)
	switch {
	case err == nil && saw.reached:
		sameAsCryptoTLS(t, &h, saw)
	case err == nil:
		// crypto/tls refused what is inside an extension Parse does not
		// read: without those extensions, it must take the hello.
		s := stripped(b)
		saw2 := cryptoTLS(s)
		if !saw2.reached {
			t.Fatalf("Parse takes a hello crypto/tls refuses (%v), also without the extensions Parse skips (%v): %x", saw.err, saw2.err, b)
		}
		sameAsCryptoTLS(t, &h, saw2)
	case saw.reached:
		if !stricter(err, b, saw) {
			t.Fatalf("Parse refuses a hello crypto/tls takes (%q, %q): %v: %x", saw.serverName, saw.protos, err, b)
		}
	}
}

func sameAsCryptoTLS(t testing.TB, h *Hello, saw tlsSaw) {
	t.Helper()
	if string(h.ServerName) != saw.serverName && (h.ServerName != nil || !ipLiteral(saw.serverName)) {
		t.Fatalf("server name %q, crypto/tls %q", h.ServerName, saw.serverName)
	}
	if got := viewOf(h).alpn; !slices.Equal(got, saw.protos) {
		t.Fatalf("ALPN %q, crypto/tls %q", got, saw.protos)
	}
}

// ipLiteral reports whether crypto/tls's server name is what the package
// comment calls an IP literal.
func ipLiteral(name string) bool {
	if _, err := netip.ParseAddr(name); err == nil {
		return true
	}
	if strings.Contains(name, ":") {
		return strings.Trim(name, "0123456789abcdefABCDEF:.") == ""
	}
	last := name[strings.LastIndexByte(name, '.')+1:]
	return last != "" && strings.Trim(last, "0123456789") == ""
}

// stricter reports whether err, Parse's refusal of b which crypto/tls takes,
// is one the package comment lists.
func stricter(err error, b []byte, saw tlsSaw) bool {
	switch err {
	case ErrNotTLS: // an alert first, or a record version crypto/tls takes
		return b[0] == 21 || b[1] != 3
	case ErrTooLarge, errRecordType, errRecordVersion, errAfterHello,
		errSessionID, errNoCipherSuites, errCompression, errSNIEntries:
		return true
	case errSNILength:
		return len(saw.serverName) > 253
	case errSNIByte:
		return strings.Trim(saw.serverName, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.") != ""
	}
	return false
}

// stripped returns the hello at the start of b, which Parse takes, with only
// the extensions Parse reads, in as few records as it fits.
func stripped(b []byte) []byte {
	msgLen, _, _, _ := records(b)
	var msg []byte
	for p := 0; len(msg) < msgLen; {
		n := int(b[p+3])<<8 | int(b[p+4])
		msg = append(msg, b[p+5:p+5+n]...)
		p += 5 + n
	}
	body := cursor(msg[4:])
	s := body
	s.bytes(34)
	s.vec8()
	s.vec16()
	s.vec8()
	fixedLen := len(body) - len(s)
	exts, _ := s.vec16()
	var kept [][]byte
	for len(exts) > 0 {
		e := exts
		typ, _ := exts.u16()
		exts.vec16()
		if typ == extServerName || typ == extALPN || typ == extSupportedVersions {
			kept = append(kept, e[:len(e)-len(exts)])
		}
	}
	m := message(body[:fixedLen], vec16(kept...))
	return frame(m, splitAt(len(m))...)
}

// FuzzParse checks that Parse never panics, that ErrNeedMore, Need and
// errors found early are consistent, and that Parse agrees with crypto/tls,
// on the input and on a hello whose extension list is the input.
func FuzzParse(f *testing.F) {
	// Small seeds: the fuzzer minimizes each new input it keeps, in time
	// quadratic in its length, so hellos without the 1,216-byte ML-KEM key
	// share (TestCaptured checks those against crypto/tls).
	for i, c := range capturedCases() {
		c.cfg = c.cfg.Clone()
		c.cfg.CurvePreferences = []tls.CurveID{tls.X25519}
		b := c.capture(f)
		f.Add(b)
		if i < 2 {
			f.Add(frame(b[5:], 3, 100))
		}
	}
	for _, msg := range [][]byte{
		hello(sni("a.example"), alpn("h2", "http/1.1"), versions(0x0304, 0x0303)),
		hello(sni("192.0.2.1"), ext(extPreSharedKey, u8(0))),
		hello(ext(extECH, u8(0)), sni("public.example"), ext(21, make([]byte, 40))),
		message(fixed),
	} {
		f.Add(frame(msg))
		f.Add(frame(msg, 1, 1, 1))
	}
	for _, exts := range [][]byte{ // for the second half of fuzzOne
		cat(sni("a.example"), alpn("h2", "http/1.1"), versions(0x0304, 0x0303)),
		cat(ext(0x0a0a), sni("192.0.2.1"), ext(extPreSharedKey, u8(0))),
		cat(ext(extECH, u8(0)), sni("public.example"), ext(21, make([]byte, 8))),
	} {
		f.Add(exts)
	}
	f.Fuzz(fuzzOne)
}

// fuzzOne is FuzzParse's check of one input.
func fuzzOne(t *testing.T, b []byte) {
	h, err := Parse(b)
	n := Need(b)
	if (err == ErrNeedMore) != (n > len(b)) {
		t.Fatalf("Parse: %v, Need %d of %d bytes", err, n, len(b))
	}
	if err == nil {
		if n < 9 {
			t.Fatalf("Need %d of a complete hello", n)
		}
		if _, err := Parse(b[:n-1]); err != ErrNeedMore {
			t.Fatalf("one byte short of Need: %v", err)
		}
		if h2, err := Parse(b[:n]); err != nil || !viewOf(&h2).equal(viewOf(&h)) {
			t.Fatalf("the first Need bytes: %v, %+v, want %+v", err, viewOf(&h2), viewOf(&h))
		}
	} else if n > MaxInput {
		t.Fatalf("Need %d beyond the bound", n)
	}
	// A prefix's answer, but ErrNeedMore, is final.
	if k := len(b) / 2; k > 0 {
		h1, err1 := Parse(b[:k])
		if err1 != ErrNeedMore && (err1 != err || err == nil && !viewOf(&h1).equal(viewOf(&h))) {
			t.Fatalf("first %d bytes: %v, all %d: %v", k, err1, len(b), err)
		}
	}
	agreeWithCryptoTLS(t, b)
	// b as the extension list of a well-framed hello too, where most of
	// Parse's rules are, and most of the mutations of a whole hello break
	// the framing.
	if len(b) <= 4096 {
		agreeWithCryptoTLS(t, frame(message(fixed, vec16(b))))
	}
}

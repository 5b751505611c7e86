package tlshello

import "testing"

// browserHello is a ClientHello laid out as a current browser's (Chrome's,
// without its post-quantum key share): GREASE values, 16 cipher suites, 17
// extensions, padded to 512 bytes of message.
func browserHello() []byte {
	suites := [][]byte{u16(0x3a3a)}
	for _, s := range []int{0x1301, 0x1302, 0x1303, 0xc02b, 0xc02f, 0xc02c, 0xc030, 0xcca9, 0xcca8, 0xc013, 0xc014, 0x009c, 0x009d, 0x002f, 0x0035} {
		suites = append(suites, u16(s))
	}
	var sigAlgs [][]byte
	for _, s := range []int{0x0403, 0x0804, 0x0401, 0x0503, 0x0805, 0x0501, 0x0806, 0x0601} {
		sigAlgs = append(sigAlgs, u16(s))
	}
	exts := [][]byte{
		ext(0x2a2a),
		sni("www.example.com"),
		ext(23),           // extended_master_secret
		ext(65281, u8(0)), // renegotiation_info
		ext(10, vec16(u16(0x1a1a), u16(29), u16(23), u16(24))), // supported_groups
		ext(11, vec8(u8(0))), // ec_point_formats
		ext(35),              // session_ticket
		alpn("h2", "http/1.1"),
		ext(5, u8(1), u16(0), u16(0)), // status_request
		ext(13, vec16(sigAlgs...)),    // signature_algorithms
		ext(18),                       // signed_certificate_timestamp
		ext(51, vec16(u16(0x1a1a), vec16(u8(0)), u16(29), vec16(make([]byte, 32)))), // key_share
		ext(45, vec8(u8(1))), // psk_key_exchange_modes
		versions(0x6a6a, 0x0304, 0x0303),
		ext(27, vec8(u16(2))),                 // compress_certificate
		ext(17513, vec16(vec8([]byte("h2")))), // application_settings
		ext(0x4a4a, u8(0)),
	}
	body := cat(u16(0x0303), make([]byte, 32), vec8(make([]byte, 32)), vec16(suites...), vec8(u8(0)))
	n := 4 + len(body) + 2 + len(cat(exts...)) + 4 // with an empty padding extension
	exts = append(exts, ext(21, make([]byte, 512-n)))
	return frame(message(body, vec16(exts...)))
}

func TestBrowserHello(t *testing.T) {
	b := browserHello()
	if len(b) != 5+512 {
		t.Fatalf("%d bytes", len(b))
	}
	want := view{serverName: "www.example.com", alpn: []string{"h2", "http/1.1"}, maxVersion: 0x0304, tls13: true}
	if got := mustParse(t, b); !got.equal(want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	agreeWithCryptoTLS(t, b)
}

func BenchmarkParse(b *testing.B) {
	browser := browserHello()
	goClient := captureHello(b, capturedCases()[0].cfg)
	for _, bc := range []struct {
		name string
		in   []byte
	}{
		{"browser", browser},
		{"go-client", goClient},
		{"browser-split", frame(browser[5:], 200)},
		{"need-more", browser[:300]},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var h Hello
			want := h.Parse(bc.in)
			b.SetBytes(int64(len(bc.in)))
			b.ReportAllocs()
			for b.Loop() {
				if err := h.Parse(bc.in); err != want {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("package-func", func(b *testing.B) {
		b.SetBytes(int64(len(browser)))
		b.ReportAllocs()
		for b.Loop() {
			if h, err := Parse(browser); err != nil || !h.HasALPN("h2") {
				b.Fatal(err)
			}
		}
	})
}

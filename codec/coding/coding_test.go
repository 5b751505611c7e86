package coding

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/valyala/fasthttp"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Coding
		err  error
	}{
		{"", Identity, nil},
		{"identity", Identity, nil},
		{" , identity ,", Identity, nil},
		{"gzip", Gzip, nil},
		{"GZip", Gzip, nil},
		{"x-gzip", Gzip, nil},
		{"identity, gzip", Gzip, nil},
		{" gzip\t", Gzip, nil},
		{"deflate", Deflate, nil},
		{"br", Brotli, nil},
		{"zstd", Zstd, nil},
		{"gzip, br", Identity, ErrUnsupported},
		{"gzip, gzip", Identity, ErrUnsupported},
		{"compress", Identity, ErrUnsupported},
		{"gzip;q=1", Identity, ErrUnsupported},
		{"aes128gcm", Identity, ErrUnsupported},
	} {
		got, err := Parse([]byte(tc.in))
		if got != tc.want || !errors.Is(err, tc.err) {
			t.Errorf("Parse(%q) = %v, %v; want %v, %v", tc.in, got, err, tc.want, tc.err)
		}
	}
}

// encoders are fasthttp's, so the decoders are held to what another
// implementation wrote.
var encoders = map[Coding]func(dst, src []byte) []byte{
	Gzip:    fasthttp.AppendGzipBytes,
	Deflate: fasthttp.AppendDeflateBytes,
	Brotli:  fasthttp.AppendBrotliBytes,
	Zstd:    fasthttp.AppendZstdBytes,
}

func TestDecode(t *testing.T) {
	body := bytes.Repeat([]byte(`{"model":"m","messages":[{"role":"user","content":"hello"}]}`), 50)
	for c, enc := range encoders {
		t.Run(c.String(), func(t *testing.T) {
			packed := enc(nil, body)
			got, err := Decode([]byte("prefix:"), packed, c, len(body))
			if err != nil || string(got) != "prefix:"+string(body) {
				t.Fatalf("Decode = %.40q…, %v", got, err)
			}
			// One byte under the decoded size: refused, not truncated.
			if got, err := Decode(nil, packed, c, len(body)-1); !errors.Is(err, ErrTooLarge) {
				t.Fatalf("under the limit: %d bytes, %v; want ErrTooLarge", len(got), err)
			}
			// A bomb: 64 MiB of zeros packed small, against a 1 MiB limit.
			bomb := enc(nil, make([]byte, 64<<20))
			if got, err := Decode(nil, bomb, c, 1<<20); !errors.Is(err, ErrTooLarge) {
				t.Fatalf("bomb of %d bytes: %d bytes out, %v; want ErrTooLarge", len(bomb), len(got), err)
			}
			// Not that coding at all: an error, never the bytes as they are.
			if got, err := Decode(nil, body, c, 1<<20); err == nil {
				t.Fatalf("plain text decoded as %s: %.40q", c, got)
			}
			// Cut short.
			if got, err := Decode(nil, packed[:len(packed)/2], c, 1<<20); err == nil && len(got) == len(body) {
				t.Fatalf("half the %s stream decoded whole", c)
			}
		})
	}
	if got, err := Decode(nil, body, Identity, len(body)); err != nil || !bytes.Equal(got, body) {
		t.Fatalf("identity: %v", err)
	}
	if _, err := Decode(nil, body, Identity, len(body)-1); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("identity past the limit: %v", err)
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"", "gzip", "identity, br", "gzip, zstd", "X-GZIP", ",,", "deflate\t"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, v []byte) {
		c, err := Parse(v)
		if err != nil && c != Identity {
			t.Fatalf("Parse(%q) = %v with %v", v, c, err)
		}
		if err == nil && c != Identity {
			// The coding named is one of the tokens.
			if !bytes.Contains(bytes.ToLower(v), []byte(c.String())) {
				t.Fatalf("Parse(%q) = %v, not among its tokens", v, c)
			}
		}
	})
}

func FuzzDecode(f *testing.F) {
	for c, enc := range encoders {
		f.Add(uint8(c), enc(nil, []byte(`{"a":"b"}`)))
	}
	f.Fuzz(func(t *testing.T, c uint8, src []byte) {
		const limit = 1 << 16
		out, err := Decode(nil, src, Coding(c%5), limit)
		if err == nil && len(out) > limit {
			t.Fatalf("%d bytes out past the %d limit", len(out), limit)
		}
	})
}

// pieces is a reader that hands out b a few bytes at a time, as a stream
// arrives, and counts its reads.
type pieces struct {
	b     []byte
	reads int
}

func (p *pieces) Read(dst []byte) (int, error) {
	p.reads++
	if len(p.b) == 0 {
		return 0, io.EOF
	}
	n := copy(dst[:min(len(dst), 7)], p.b)
	p.b = p.b[n:]
	return n, nil
}

func TestNewReader(t *testing.T) {
	body := bytes.Repeat([]byte("data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\n"), 100)
	for c, enc := range encoders {
		t.Run(c.String(), func(t *testing.T) {
			src := &pieces{b: enc(nil, body)}
			r := NewReader(src, c)
			if src.reads != 0 {
				t.Fatalf("making the reader read the stream %d times", src.reads)
			}
			got, err := io.ReadAll(r)
			if err != nil || !bytes.Equal(got, body) {
				t.Fatalf("read %d bytes, %v; want %d", len(got), err, len(body))
			}
			r.Close()
			if _, err := r.Read(make([]byte, 1)); err == nil {
				t.Fatal("a read after Close succeeded")
			}
			// Cut short: an error, not a clean end.
			packed := enc(nil, body)
			if _, err := io.ReadAll(NewReader(bytes.NewReader(packed[:len(packed)/2]), c)); err == nil {
				t.Fatal("half a stream read to a clean end")
			}
		})
	}
	if r := NewReader(bytes.NewReader(body), Identity); !readsAs(r, body) {
		t.Fatal("identity changed the bytes")
	}
}

func readsAs(r io.Reader, want []byte) bool {
	got, err := io.ReadAll(r)
	return err == nil && bytes.Equal(got, want)
}

// TestNewReaderBoundsZstdWindow: a zstd stream that asks for a window past
// MaxWindow is refused, not given the memory.
func TestNewReaderBoundsZstdWindow(t *testing.T) {
	var b bytes.Buffer
	w, err := zstd.NewWriter(&b, zstd.WithWindowSize(64<<20), zstd.WithEncoderLevel(zstd.SpeedFastest))
	if err != nil {
		t.Fatal(err)
	}
	w.Write(bytes.Repeat([]byte("0123456789abcdef"), 2<<20)) // 32 MiB
	w.Close()
	if _, err := io.Copy(io.Discard, NewReader(&b, Zstd)); err == nil {
		t.Fatal("a 64 MiB window was decoded")
	}
}

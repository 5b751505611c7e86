// Package coding owns HTTP content codings of whole message bodies: which
// coding a Content-Encoding field value names, and decoding a body from it
// within a size limit. The decoders are fasthttp's bounded ones (gzip,
// deflate, br, zstd; zstd's window is capped by the limit too), so a small
// compressed body cannot expand past what the caller would have buffered.
package coding

import (
	"bytes"
	"errors"
	"io"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zlib"
	"github.com/klauspost/compress/zstd"
	"github.com/molecule-man/go-brrr"
	"github.com/valyala/fasthttp"
)

// Coding is a content coding the gateway decodes.
type Coding uint8

// The codings: Identity is none.
const (
	Identity Coding = iota
	Gzip
	Deflate
	Brotli
	Zstd
)

// String is the coding's token as Content-Encoding writes it.
func (c Coding) String() string {
	switch c {
	case Gzip:
		return "gzip"
	case Deflate:
		return "deflate"
	case Brotli:
		return "br"
	case Zstd:
		return "zstd"
	}
	return "identity"
}

var (
	// ErrUnsupported: a coding the gateway does not decode, or more than
	// one applied in turn.
	ErrUnsupported = errors.New("unsupported content coding")
	// ErrTooLarge: the decoded body would pass the limit.
	ErrTooLarge = errors.New("decoded body too large")
)

// Parse returns the coding a Content-Encoding field value names (its
// fields joined with commas when it came more than once): Identity for
// none, an empty value or only "identity" (RFC 9110 8.4.1), and
// ErrUnsupported for an unknown coding or two stacked ones. Tokens are
// case-insensitive; "x-gzip" is gzip (RFC 9110 8.4.1.3).
func Parse(v []byte) (Coding, error) {
	c := Identity
	for len(v) > 0 {
		var tok []byte
		if i := bytes.IndexByte(v, ','); i >= 0 {
			tok, v = v[:i], v[i+1:]
		} else {
			tok, v = v, nil
		}
		tok = bytes.Trim(tok, " \t")
		var next Coding
		switch {
		case len(tok) == 0 || bytes.EqualFold(tok, []byte("identity")):
			continue
		case bytes.EqualFold(tok, []byte("gzip")) || bytes.EqualFold(tok, []byte("x-gzip")):
			next = Gzip
		case bytes.EqualFold(tok, []byte("deflate")):
			next = Deflate
		case bytes.EqualFold(tok, []byte("br")):
			next = Brotli
		case bytes.EqualFold(tok, []byte("zstd")):
			next = Zstd
		default:
			return Identity, ErrUnsupported
		}
		if c != Identity {
			return Identity, ErrUnsupported
		}
		c = next
	}
	return c, nil
}

// Decode appends to dst the body src decoded from c, and fails with
// ErrTooLarge when the result would pass limit bytes (limit > 0). A body
// that is not valid in c fails with the decoder's error.
func Decode(dst, src []byte, c Coding, limit int) ([]byte, error) {
	if c == Identity {
		if len(src) > limit {
			return dst, ErrTooLarge
		}
		return append(dst, src...), nil
	}
	if limit <= 0 {
		return dst, ErrTooLarge
	}
	req := fasthttp.AcquireRequest()
	defer fasthttp.ReleaseRequest(req)
	req.SetBodyRaw(src)
	var out []byte
	var err error
	switch c {
	case Gzip:
		out, err = req.BodyGunzipWithLimit(limit)
	case Deflate:
		out, err = req.BodyInflateWithLimit(limit)
	case Brotli:
		out, err = req.BodyUnbrotliWithLimit(limit)
	case Zstd:
		out, err = req.BodyUnzstdWithLimit(limit)
	default:
		return dst, ErrUnsupported
	}
	if errors.Is(err, fasthttp.ErrBodyTooLarge) {
		return dst, ErrTooLarge
	}
	if err != nil {
		return dst, err
	}
	return append(dst, out...), nil
}

// MaxWindow bounds the history a streamed zstd body may ask the decoder to
// keep: 8 MiB, what RFC 9659 asks of HTTP's zstd decoders (a brotli window
// is at most 16 MiB by its format).
const MaxWindow = 8 << 20

// NewReader returns r's bytes decoded from c (r itself for Identity). The
// decoder is made at the first Read, so that making the reader never waits
// on r: a streamed answer's first bytes may come long after its head.
// Close releases the decoder, not r.
func NewReader(r io.Reader, c Coding) io.ReadCloser {
	return &lazyReader{src: r, c: c}
}

type lazyReader struct {
	src io.Reader
	c   Coding
	dec io.Reader
	err error
}

func (l *lazyReader) Read(p []byte) (int, error) {
	if l.dec == nil && l.err == nil {
		l.dec, l.err = newDecoder(l.src, l.c)
	}
	if l.err != nil {
		return 0, l.err
	}
	return l.dec.Read(p)
}

func (l *lazyReader) Close() error {
	switch d := l.dec.(type) {
	case *zstd.Decoder:
		d.Close()
	case io.Closer:
		d.Close()
	}
	l.dec, l.err = nil, errClosed
	return nil
}

var errClosed = errors.New("coding: read after close")

func newDecoder(r io.Reader, c Coding) (io.Reader, error) {
	switch c {
	case Identity:
		return r, nil
	case Gzip:
		return gzip.NewReader(r)
	case Deflate:
		return zlib.NewReader(r)
	case Brotli:
		return brrr.NewReader(r), nil
	case Zstd:
		return zstd.NewReader(r, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true),
			zstd.WithDecoderMaxWindow(MaxWindow))
	}
	return nil, ErrUnsupported
}

package server

import (
	"errors"
	"io"
	"runtime"
	"testing"

	"github.com/valyala/fasthttp"
)

// zeroBody is a body of n bytes of '0', made as it is read.
type zeroBody struct{ n, read int64 }

func (z *zeroBody) Read(p []byte) (int, error) {
	if z.read >= z.n {
		return 0, io.EOF
	}
	k := min(int64(len(p)), z.n-z.read)
	for i := range p[:k] {
		p[i] = '0'
	}
	z.read += k
	return int(k), nil
}

// TestReadWholeBoundsMemory: an answer over llmMaxResponse read whole is
// refused having allocated about twice the limit at most (it used to be
// about five times, through append's growth, and the buffer stayed in the
// pooled exchange: 20 such answers held 1.6 GB), and not kept; one whose
// Content-Length says it is too large is refused unread; one of known
// length under the limit is read into one buffer of its size.
func TestReadWholeBoundsMemory(t *testing.T) {
	cases := []struct {
		desc     string
		n        int64
		length   int // Content-Length, -1: none
		wantErr  error
		maxAlloc uint64
		maxRead  int64
	}{
		{desc: "1 GiB of unknown length", n: 1 << 30, length: -1, wantErr: errResponseTooLarge, maxAlloc: 2*llmMaxResponse + 4<<20, maxRead: llmMaxResponse + 1<<20},
		{desc: "1 GiB announced", n: 1 << 30, length: 1 << 30, wantErr: errResponseTooLarge, maxAlloc: 1 << 20, maxRead: 0},
		{desc: "20 MiB announced", n: 20 << 20, length: 20 << 20, maxAlloc: 20<<20 + 1<<20, maxRead: 20 << 20},
		{desc: "20 MiB of unknown length", n: 20 << 20, length: -1, maxAlloc: 2*32<<20 + 1<<20, maxRead: 20 << 20},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			resp := fasthttp.AcquireResponse()
			defer fasthttp.ReleaseResponse(resp)
			z := &zeroBody{n: tc.n}
			resp.SetBodyStream(z, tc.length)
			var buf []byte
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			body, err := readWhole(resp, &buf)
			runtime.ReadMemStats(&after)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err %v, want %v", err, tc.wantErr)
			}
			if err == nil && int64(len(body)) != tc.n {
				t.Fatalf("read %d bytes, want %d", len(body), tc.n)
			}
			if got := after.TotalAlloc - before.TotalAlloc; got > tc.maxAlloc {
				t.Errorf("allocated %d MiB, want at most %d MiB", got>>20, tc.maxAlloc>>20)
			}
			if z.read > tc.maxRead {
				t.Errorf("read %d bytes of the body, want at most %d", z.read, tc.maxRead)
			}
			if err != nil && cap(buf) > maxKeptLLMBuf {
				t.Errorf("a failed read keeps a buffer of %d MiB", cap(buf)>>20)
			}
		})
	}
}

package policy

import (
	"errors"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

// clientErr stands for the server's guard's error.
type clientErr struct{ err error }

func (e *clientErr) Error() string { return e.err.Error() }
func (e *clientErr) Unwrap() error { return e.err }
func (e *clientErr) ClientBody()   {}

// failing gives some bytes, then err.
type failing struct {
	data string
	err  error
}

func (f *failing) Read(p []byte) (int, error) {
	if f.data == "" {
		return 0, f.err
	}
	n := copy(p, f.data)
	f.data = f.data[n:]
	return n, nil
}

// TestReadRequestBody: the body read whole is kept for the backend; what
// cannot be read is answered by why.
func TestReadRequestBody(t *testing.T) {
	for _, tc := range []struct {
		name   string
		src    io.Reader
		length int
		status int // 0: read
	}{
		{"declared", strings.NewReader("hello"), 5, 0},
		{"chunked", strings.NewReader("hello"), -1, 0},
		{"empty", strings.NewReader(""), 0, 0},
		{"declared too large", strings.NewReader("0123456789"), 10, 413},
		{"chunked too large", strings.NewReader("0123456789"), -1, 413},
		{"longer than declared", strings.NewReader("hello!"), 5, 400},
		{"shorter than declared", strings.NewReader("hell"), 5, 400},
		{"client cut it", &failing{"he", &clientErr{io.ErrUnexpectedEOF}}, -1, 400},
		{"client too slow", &failing{"he", &clientErr{os.ErrDeadlineExceeded}}, -1, 408},
		{"a policy's stream failed", &failing{"he", errors.New("processing failed")}, -1, 500},
	} {
		var fctx fasthttp.RequestCtx
		fctx.Request.SetBodyStream(tc.src, tc.length)
		c := &Ctx{Fast: &fctx}
		body, err := ReadRequestBody(c, 8)
		if tc.status == 0 {
			if err != nil || string(body) != "hello"[:len(body)] || fctx.Request.IsBodyStream() || !c.RequestBodyRead ||
				fctx.Request.Header.ContentLength() != len(body) {
				t.Errorf("%s: %q %v", tc.name, body, err)
			}
			// Read again: the same body, nothing more read.
			if again, err := ReadRequestBody(c, 8); err != nil || string(again) != string(body) {
				t.Errorf("%s: read again %q %v", tc.name, again, err)
			}
			continue
		}
		if err == nil || c.RequestBodyRead {
			t.Errorf("%s: read %q", tc.name, body)
			continue
		}
		RespondRequestBodyError(c, err)
		if got := fctx.Response.StatusCode(); got != tc.status || !fctx.Response.ConnectionClose() {
			t.Errorf("%s: %d (%v), want %d with the connection closing", tc.name, got, err, tc.status)
		}
	}
}

// TestReadResponseBody: a streamed response body is read whole and kept;
// a buffered one is taken as it is.
func TestReadResponseBody(t *testing.T) {
	var fctx fasthttp.RequestCtx
	fctx.Response.SetBodyStream(strings.NewReader("answer"), -1)
	c := &Ctx{Fast: &fctx}
	if body, err := ReadResponseBody(c, 6); err != nil || string(body) != "answer" || fctx.Response.IsBodyStream() ||
		fctx.Response.Header.ContentLength() != 6 || !c.ResponseBodyRead {
		t.Errorf("%q %v", body, err)
	}
	fctx.Response.SetBodyString("made here")
	if _, err := ReadResponseBody(c, 6); err != ErrBodyTooLarge {
		t.Errorf("a buffered body over the limit: %v", err)
	}
}

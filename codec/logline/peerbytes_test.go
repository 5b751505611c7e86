package logline

import (
	"errors"
	"testing"
)

// TestWithoutPeerBytes: fasthttp's parse errors quote the upstream's
// bytes (a malformed field's value, a head too large's first and last 200
// bytes); what reaches the access log keeps what the fault was and drops
// the bytes, which may hold cookies or tokens. The chain stays whole.
func TestWithoutPeerBytes(t *testing.T) {
	big := errors.New(`error when reading response headers: fasthttp: small read buffer. increase readbuffersize: buffer size=8192, contents: "HTTP/1.1 200 OK\r\nSet-Cookie: session=SECRET"..."x"`)
	for _, tc := range []struct {
		err  error
		want string
	}{
		{big, "error when reading response headers: fasthttp: small read buffer. increase readbuffersize: buffer size=8192"},
		{errors.New(`error when reading response headers: invalid header value "session=SECRET\x01"`), "error when reading response headers: invalid header value"},
		{errors.New(`invalid response status code "2x0": response "HTTP/1.1 2x0 SECRET"`), "invalid response status code"},
		{errors.New("unexpected EOF"), "unexpected EOF"},
	} {
		got := WithoutPeerBytes(tc.err)
		if got.Error() != tc.want {
			t.Errorf("%q: got %q, want %q", tc.err, got, tc.want)
		}
		if !errors.Is(got, tc.err) {
			t.Errorf("%q: the original error left the chain", tc.err)
		}
	}
	if WithoutPeerBytes(nil) != nil {
		t.Error("nil became an error")
	}
}

// Package tlshello owns the reading of a TLS ClientHello from the first
// bytes of a connection, before any TLS stack sees them: the gateway routes
// a TLS connection by its server name (SNI passthrough without terminating,
// or picking the listener and certificate) and looks at its ALPN protocols
// (h2 or http/1.1), then hands the bytes on unchanged.
//
// Parse is bounded (a handshake message of at most MaxHelloSize bytes, in
// records taking at most MaxInput bytes), never allocates for a hello in one
// record, and reassembles a hello split across records into a buffer that a
// reused Hello keeps. What it returns aliases its input: it copies nothing
// and changes nothing. Parse is meant to be called again on the longer input
// after each read while it returns ErrNeedMore; Need says how many bytes are
// worth waiting for.
//
// Parse follows RFC 8446, 6066 and 7301 and refuses what crypto/tls's
// server refuses in the parts it reads: the record layer, the ClientHello's
// fixed fields, the extension list (no duplicate, pre_shared_key last) and
// the server_name, application_layer_protocol_negotiation and
// supported_versions extensions. FuzzParse holds it to crypto/tls: where
// both accept a hello they see the same server name and protocols. The
// differences, none of which a crypto/tls, browser or curl client produces:
//
//   - Stricter. Parse refuses an alert record before or among the hello's
//     records (crypto/tls skips warning alerts), record versions other than
//     3.x (crypto/tls takes anything below 0x1000), handshake bytes after the
//     ClientHello in its last record (RFC 8446 5.1 makes the hello end its
//     record; crypto/tls only notices later), a message over MaxHelloSize
//     (crypto/tls: 64 KiB), a legacy_session_id over 32 bytes and empty
//     cipher_suites or compression_methods (RFC 8446 4.1.2 bounds), and a
//     server_name extension other than exactly one host_name entry of 1 to
//     253 letters, digits, '-', '_' and '.' (and ':' in an IPv6 literal),
//     without a trailing dot (OpenSSL too takes only one host_name;
//     crypto/tls skips entries of other name types and takes any bytes as
//     the name).
//   - More lenient. Parse does not look inside the other extensions (key
//     shares, signature algorithms, encrypted_client_hello, ...), whose
//     malformations crypto/tls refuses. They cannot change where the
//     connection goes: a terminating crypto/tls refuses them in turn, and a
//     passthrough backend sees the same bytes.
//   - An IP literal as host_name (RFC 6066 forbids it; old clients sent it,
//     crypto/tls reports it) is taken as no server name, so the connection
//     routes as it would from a client that follows the RFC. An IP literal is
//     a name whose last label is all digits, or of hex digits, ':' and '.'
//     with at least one ':'.
package tlshello

import (
	"errors"
	"iter"
	"slices"
)

const (
	// MaxHelloSize bounds the ClientHello's body (its handshake message
	// without the 4-byte header); crypto/tls allows 64 KiB, real hellos
	// take under 2 KiB.
	MaxHelloSize = 16 << 10
	// MaxInput bounds the bytes the hello's records take, headers included,
	// so that a hello cut into tiny records is bounded too: a caller never
	// needs to buffer more than this.
	MaxInput = 2 * MaxHelloSize

	recordHeaderLen = 5
	maxRecordLen    = 1 << 14 // RFC 8446 5.1: TLSPlaintext.length
	typeHandshake   = 22
	typeClientHello = 1
)

var (
	// ErrNeedMore means the input ends before the hello does: read more and
	// call Parse again with all the bytes read so far.
	ErrNeedMore = errors.New("tlshello: need more bytes")
	// ErrNotTLS means the input does not start with a TLS handshake record
	// (type 22, version 3.x): plain text, an SSLv2 hello, or another
	// protocol. It is reported from the first two bytes.
	ErrNotTLS = errors.New("tlshello: not a TLS handshake")
	// ErrTooLarge means the hello's body is longer than MaxHelloSize bytes
	// or its records take more than MaxInput bytes.
	ErrTooLarge = errors.New("tlshello: ClientHello too large")
	// ErrMalformed means the records or the hello break the protocol. The
	// errors Parse returns wrap it with the rule broken: test with
	// errors.Is.
	ErrMalformed = errors.New("tlshello: malformed ClientHello")
)

// malformed is an ErrMalformed saying which rule the input broke. Its values
// are constants, so returning one does not allocate.
type malformed string

func (m malformed) Error() string { return ErrMalformed.Error() + ": " + string(m) }
func (malformed) Unwrap() error   { return ErrMalformed }

// The rules Parse checks.
const (
	errRecordType       = malformed("record of another content type among the hello's records")
	errRecordVersion    = malformed("record version is not 3.x")
	errRecordEmpty      = malformed("empty handshake record")
	errRecordLong       = malformed("record longer than 2^14 bytes")
	errNotClientHello   = malformed("first handshake message is not a ClientHello")
	errAfterHello       = malformed("handshake bytes after the ClientHello in its last record")
	errTruncated        = malformed("length runs past the end of the ClientHello")
	errSessionID        = malformed("legacy_session_id longer than 32 bytes")
	errNoCipherSuites   = malformed("cipher_suites empty")
	errCipherSuites     = malformed("cipher_suites of odd length")
	errCompression      = malformed("legacy_compression_methods empty")
	errTrailing         = malformed("bytes after the extensions")
	errDuplicate        = malformed("duplicate extension")
	errPSKNotLast       = malformed("pre_shared_key is not the last extension")
	errExtLength        = malformed("extension data longer or shorter than its content")
	errSNIEntries       = malformed("server_name does not hold exactly one host_name")
	errSNILength        = malformed("host_name empty or longer than 253 bytes")
	errSNIByte          = malformed("host_name has a byte other than a letter, digit, '-', '_' or '.'")
	errSNITrailingDot   = malformed("host_name ends with a dot")
	errALPNEmpty        = malformed("ALPN list or protocol name empty")
	errSupportedVersion = malformed("supported_versions empty or of odd length")
)

// LooksLikeTLS reports whether a connection's first byte can start a TLS
// ClientHello (a handshake record, 0x16). Plain HTTP starts with a method's
// letter, an SSLv2 hello with 0x80.
func LooksLikeTLS(first byte) bool { return first == typeHandshake }

// MaxServerName is the longest ServerName Parse accepts (a DNS name's
// limit).
const MaxServerName = 253

// Hello is what the gateway reads of a ClientHello. Its slices alias the
// input given to Parse, or, for a hello split across records, the Hello's own
// reassembly buffer, which the next Parse into the same Hello overwrites:
// copy what outlives either.
type Hello struct {
	// Version is the legacy_version field (0x0303 for TLS 1.2 and 1.3
	// clients). MaxVersion is the version to act on.
	Version uint16
	// ServerName is the host_name of the server_name extension as the
	// client sent it, in letters, digits, '-', '_' and '.': nil when the
	// extension is absent or names an IP literal. DNS names compare without
	// regard to case: use AppendLowerServerName for a lower-case key.
	ServerName []byte
	// ECH is set when the hello carries an encrypted_client_hello
	// extension: ServerName is then the client-facing server's public name,
	// and the name the client wants is encrypted.
	ECH bool

	alpn     []byte // protocol_name_list, without its length; nil: absent
	versions []byte // supported_versions list, without its length; nil: absent
	buf      []byte // reassembly of a hello split across records
}

// Parse parses the ClientHello at the start of b, the bytes read so far from
// a connection. Bytes after the hello's records are not looked at. The
// returned Hello aliases b; a hello split across records is copied into a
// buffer allocated for it (Hello.Parse reuses one).
func Parse(b []byte) (Hello, error) {
	var h Hello
	err := h.Parse(b)
	return h, err
}

// Parse is the package's Parse into h, reusing h's reassembly buffer: a
// pooled Hello parses without allocating once its buffer has grown to the
// largest split hello it has seen. It resets h first; on error h holds no
// server name, protocols or versions.
func (h *Hello) Parse(b []byte) error {
	*h = Hello{buf: h.buf}
	msgLen, nrec, _, err := records(b)
	if err != nil {
		return err
	}
	msg := b[recordHeaderLen : recordHeaderLen+msgLen]
	if nrec > 1 {
		msg = slices.Grow(h.buf[:0], msgLen)
		for p := 0; len(msg) < msgLen; {
			n := int(b[p+3])<<8 | int(b[p+4])
			msg = append(msg, b[p+recordHeaderLen:p+recordHeaderLen+n]...)
			p += recordHeaderLen + n
		}
		h.buf = msg
	}
	if err := h.parseMessage(msg[4:]); err != nil {
		*h = Hello{buf: h.buf}
		return err
	}
	return nil
}

// Need returns the number of bytes of b that the ClientHello's records take
// when b holds them all. When it does not, Need returns a lower bound for
// that number, greater than len(b) and at most MaxInput: read at least the
// difference before calling Parse again. It returns 0 when the records are
// already wrong (Parse says why). Need(b) > len(b) exactly when Parse(b)
// returns ErrNeedMore.
func Need(b []byte) int {
	_, _, end, err := records(b)
	if err != nil && err != ErrNeedMore {
		return 0
	}
	return end
}

// records checks the records at the start of b that carry the ClientHello
// and finds the hello's handshake message in them. It returns the message's
// length with its header, how many records carry it, and the bytes of b they
// take. When b ends before they do, it returns ErrNeedMore and, as end, a
// lower bound for the bytes they take. Each rule is checked as soon as the
// bytes it needs are in, so that an error is final: more input cannot mend
// it.
func records(b []byte) (msgLen, nrec, end int, err error) {
	var hdr [4]byte // the message header, which may itself be split
	got := 0        // message bytes in the records before p
	msgLen = -1     // until the header is in
	for p := 0; ; nrec++ {
		r := b[p:]
		if len(r) > 0 && r[0] != typeHandshake {
			if p == 0 {
				return 0, 0, 0, ErrNotTLS
			}
			return 0, 0, 0, errRecordType
		}
		if len(r) > 1 && r[1] != 3 {
			if p == 0 {
				return 0, 0, 0, ErrNotTLS
			}
			return 0, 0, 0, errRecordVersion
		}
		if len(r) < recordHeaderLen {
			rest := len(hdr) - got // at least the rest of the header
			if msgLen >= 0 {
				rest = msgLen - got
			}
			return needMore(p + recordHeaderLen + rest)
		}
		n := int(r[3])<<8 | int(r[4])
		switch {
		case n == 0:
			return 0, 0, 0, errRecordEmpty
		case n > maxRecordLen:
			return 0, 0, 0, errRecordLong
		case p+recordHeaderLen+n > MaxInput:
			return 0, 0, 0, ErrTooLarge
		}
		payload := r[recordHeaderLen:min(len(r), recordHeaderLen+n)]
		for i := 0; i < len(payload) && got+i < len(hdr); i++ {
			hdr[got+i] = payload[i]
		}
		if have := got + len(payload); have > 0 && hdr[0] != typeClientHello {
			return 0, 0, 0, errNotClientHello
		} else if have >= len(hdr) && msgLen < 0 {
			body := int(hdr[1])<<16 | int(hdr[2])<<8 | int(hdr[3])
			if body > MaxHelloSize {
				return 0, 0, 0, ErrTooLarge
			}
			msgLen = len(hdr) + body
		}
		if msgLen >= 0 && got+n > msgLen {
			return 0, 0, 0, errAfterHello
		}
		end = p + recordHeaderLen + n
		if len(payload) < n {
			rest := len(hdr) - (got + n) // at least the rest of the header
			if msgLen >= 0 {
				rest = msgLen - (got + n)
			}
			if rest > 0 { // in further records
				end += recordHeaderLen + rest
			}
			return needMore(end)
		}
		got += n
		if got == msgLen {
			return msgLen, nrec + 1, end, nil
		}
		p = end
	}
}

// needMore is records' answer for input that ends before the hello's
// records, which take at least end bytes.
func needMore(end int) (int, int, int, error) {
	if end > MaxInput {
		return 0, 0, 0, ErrTooLarge
	}
	return 0, 0, end, ErrNeedMore
}

// ALPN returns the protocols of the client's ALPN extension, in its order,
// each aliasing the hello; none when the extension is absent. Ranging over it
// does not allocate.
func (h *Hello) ALPN() iter.Seq[[]byte] {
	list := h.alpn
	return func(yield func([]byte) bool) {
		for l := list; len(l) > 0; {
			n := 1 + int(l[0])
			if !yield(l[1:n]) {
				return
			}
			l = l[n:]
		}
	}
}

// HasALPN reports whether the client offers protocol p through ALPN.
func (h *Hello) HasALPN(p string) bool {
	for l := h.alpn; len(l) > 0; {
		n := 1 + int(l[0])
		if string(l[1:n]) == p {
			return true
		}
		l = l[n:]
	}
	return false
}

// MaxVersion returns the highest TLS version the client offers: the highest
// 3.x value of its supported_versions extension (GREASE and draft values are
// skipped; 0 when none is left), or without the extension Version, capped at
// TLS 1.2 as RFC 8446 4.2.1 requires. The gateway refuses to terminate
// below TLS 1.2 (0x0303).
func (h *Hello) MaxVersion() uint16 {
	if h.versions == nil {
		return min(h.Version, 0x0303)
	}
	var highest uint16
	for l := h.versions; len(l) >= 2; l = l[2:] {
		if v := uint16(l[0])<<8 | uint16(l[1]); l[0] == 3 && v > highest {
			highest = v
		}
	}
	return highest
}

// Offers reports whether the client offers TLS version v (0x0304 for
// TLS 1.3): listed in its supported_versions extension, or without the
// extension a 3.x version up to MaxVersion.
func (h *Hello) Offers(v uint16) bool {
	if h.versions == nil {
		return v>>8 == 3 && v <= h.MaxVersion()
	}
	for l := h.versions; len(l) >= 2; l = l[2:] {
		if uint16(l[0])<<8|uint16(l[1]) == v {
			return true
		}
	}
	return false
}

// AppendLowerServerName appends ServerName in lower case to dst, the form
// server/router's Table.Match expects.
func (h *Hello) AppendLowerServerName(dst []byte) []byte {
	for _, c := range h.ServerName {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		dst = append(dst, c)
	}
	return dst
}

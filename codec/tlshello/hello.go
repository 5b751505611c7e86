package tlshello

import "slices"

// Extension types (IANA TLS ExtensionType values) Parse looks at.
const (
	extServerName        = 0
	extALPN              = 16
	extPreSharedKey      = 41
	extSupportedVersions = 43
	extECH               = 0xfe0d
)

// cursor reads a ClientHello's big-endian fields from the front.
type cursor []byte

func (c *cursor) u8() (int, bool) {
	if len(*c) < 1 {
		return 0, false
	}
	v := int((*c)[0])
	*c = (*c)[1:]
	return v, true
}

func (c *cursor) u16() (int, bool) {
	if len(*c) < 2 {
		return 0, false
	}
	v := int((*c)[0])<<8 | int((*c)[1])
	*c = (*c)[2:]
	return v, true
}

// bytes reads n bytes.
func (c *cursor) bytes(n int) (cursor, bool) {
	if len(*c) < n {
		return nil, false
	}
	v := (*c)[:n:n]
	*c = (*c)[n:]
	return v, true
}

// vec8 reads a vector with a 1-byte length.
func (c *cursor) vec8() (cursor, bool) {
	n, ok := c.u8()
	if !ok {
		return nil, false
	}
	return c.bytes(n)
}

// vec16 reads a vector with a 2-byte length.
func (c *cursor) vec16() (cursor, bool) {
	n, ok := c.u16()
	if !ok {
		return nil, false
	}
	return c.bytes(n)
}

// parseMessage parses the body of a ClientHello handshake message (RFC 8446
// 4.1.2) into h.
func (h *Hello) parseMessage(s cursor) error {
	v, ok := s.u16()
	if !ok {
		return errTruncated
	}
	if _, ok := s.bytes(32); !ok { // random
		return errTruncated
	}
	sessionID, ok := s.vec8()
	if !ok {
		return errTruncated
	}
	if len(sessionID) > 32 {
		return errSessionID
	}
	suites, ok := s.vec16()
	if !ok {
		return errTruncated
	}
	if len(suites) == 0 {
		return errNoCipherSuites
	}
	if len(suites)%2 != 0 {
		return errCipherSuites
	}
	compression, ok := s.vec8()
	if !ok {
		return errTruncated
	}
	if len(compression) == 0 {
		return errCompression
	}
	h.Version = uint16(v)
	if len(s) == 0 { // no extensions: a TLS 1.0-era hello
		return nil
	}
	exts, ok := s.vec16()
	if !ok {
		return errTruncated
	}
	if len(s) != 0 {
		return errTrailing
	}
	var seen extSet
	for i := 0; i < len(exts); {
		if len(exts)-i < 4 {
			return errTruncated
		}
		typ := uint16(exts[i])<<8 | uint16(exts[i+1])
		n := int(exts[i+2])<<8 | int(exts[i+3])
		i += 4
		if n > len(exts)-i {
			return errTruncated
		}
		data := exts[i : i+n : i+n]
		i += n
		if seen.add(typ, exts) {
			return errDuplicate
		}
		var err error
		switch typ {
		case extServerName:
			err = h.serverName(data)
		case extALPN:
			err = h.alpnList(data)
		case extSupportedVersions:
			err = h.supportedVersions(data)
		case extPreSharedKey:
			if i != len(exts) {
				err = errPSKNotLast
			}
		case extECH:
			h.ECH = true
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// serverName parses the server_name extension (RFC 6066 3): exactly one
// entry, a host_name.
func (h *Hello) serverName(data cursor) error {
	list, ok := data.vec16()
	if !ok || len(data) != 0 {
		return errExtLength
	}
	typ, ok := list.u8()
	if !ok {
		return errSNIEntries
	}
	name, ok := list.vec16()
	if !ok {
		return errExtLength
	}
	if typ != 0 || len(list) != 0 {
		return errSNIEntries
	}
	ip, err := hostName(name)
	if err != nil {
		return err
	}
	if !ip {
		h.ServerName = name
	}
	return nil
}

// hostName checks a host_name and reports whether it is an IP literal (see
// the package comment).
func hostName(name []byte) (ip bool, err error) {
	if len(name) == 0 || len(name) > MaxServerName {
		return false, errSNILength
	}
	if name[len(name)-1] == '.' {
		return false, errSNITrailingDot
	}
	colon, nonHex := false, false
	lastLabel := 0
	for i, c := range name {
		switch {
		case '0' <= c && c <= '9', 'a' <= c && c <= 'f', 'A' <= c && c <= 'F':
		case 'g' <= c && c <= 'z', 'G' <= c && c <= 'Z', c == '-', c == '_':
			nonHex = true
		case c == '.':
			lastLabel = i + 1
		case c == ':':
			colon = true
		default:
			return false, errSNIByte
		}
	}
	if colon {
		if nonHex {
			return false, errSNIByte
		}
		return true, nil // IPv6
	}
	for _, c := range name[lastLabel:] {
		if c < '0' || c > '9' {
			return false, nil
		}
	}
	return true, nil // IPv4, or a number
}

// alpnList parses the application_layer_protocol_negotiation extension
// (RFC 7301 3.1): a non-empty list of non-empty names.
func (h *Hello) alpnList(data cursor) error {
	list, ok := data.vec16()
	if !ok || len(data) != 0 {
		return errExtLength
	}
	if len(list) == 0 {
		return errALPNEmpty
	}
	for l := list; len(l) > 0; {
		p, ok := l.vec8()
		if !ok {
			return errExtLength
		}
		if len(p) == 0 {
			return errALPNEmpty
		}
	}
	h.alpn = list
	return nil
}

// supportedVersions parses the supported_versions extension (RFC 8446
// 4.2.1): a list of 1 to 127 versions.
func (h *Hello) supportedVersions(data cursor) error {
	list, ok := data.vec8()
	if !ok || len(data) != 0 {
		return errExtLength
	}
	if len(list) == 0 || len(list)%2 != 0 {
		return errSupportedVersion
	}
	h.versions = list
	return nil
}

// extSet is the set of the extension types seen so far in a hello, which
// must not repeat one (RFC 8446 4.2). It compares the first 64 one by one
// (real hellos carry about 20) when a hash of the type was seen before; past
// them it checks the whole list at once with a bit per type.
type extSet struct {
	n      int
	types  [64]uint16
	filter [4]uint64 // a bit per hash of the types: most adds skip the comparisons
}

// add adds typ, the type of an extension of the list exts, and reports
// whether it is there already, or, for the 65th extension, whether exts
// repeats a type anywhere.
func (s *extSet) add(typ uint16, exts []byte) (dup bool) {
	switch {
	case s.n < len(s.types):
		h := uint8(uint32(typ) * 0x9e3779b1 >> 24)
		w, bit := h/64, uint64(1)<<(h%64)
		if s.filter[w]&bit != 0 && slices.Contains(s.types[:s.n], typ) {
			return true
		}
		s.filter[w] |= bit
		s.types[s.n] = typ
		s.n++
	case s.n == len(s.types):
		s.n++
		return repeatsType(exts)
	}
	return false
}

// repeatsType reports whether the extension list exts holds a type twice.
// It stops at the first framing error, which the caller reports.
func repeatsType(exts []byte) bool {
	var seen [(1 << 16) / 64]uint64
	for i := 0; len(exts)-i >= 4; {
		typ := int(exts[i])<<8 | int(exts[i+1])
		i += 4 + (int(exts[i+2])<<8 | int(exts[i+3]))
		w, bit := typ/64, uint64(1)<<(typ%64)
		if seen[w]&bit != 0 {
			return true
		}
		seen[w] |= bit
	}
	return false
}

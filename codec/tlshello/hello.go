package tlshello

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
func (h *Hello) parseMessage(body cursor) error {
	s := body
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
	if len(suites) == 0 || len(suites)%2 != 0 {
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
	if err := checkDuplicates(exts); err != nil {
		return err
	}
	for len(exts) > 0 {
		typ, ok := exts.u16()
		if !ok {
			return errTruncated
		}
		data, ok := exts.vec16()
		if !ok {
			return errTruncated
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
			if len(exts) != 0 {
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
	if !ok || typ != 0 {
		return errSNIEntries
	}
	name, ok := list.vec16()
	if !ok || len(list) != 0 {
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
	if len(name) == 0 || len(name) > 253 {
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

// smallExtensions is how many extensions checkDuplicates compares pairwise;
// real hellos carry about 20.
const smallExtensions = 64

// checkDuplicates refuses an extension list that holds a type twice (RFC
// 8446 4.2). It stops at the first framing error, which the caller reports.
func checkDuplicates(exts cursor) error {
	var seen [smallExtensions]uint16
	all := exts
	for n := 0; len(exts) > 0; n++ {
		typ, ok := exts.u16()
		if !ok {
			return nil
		}
		if _, ok := exts.vec16(); !ok {
			return nil
		}
		if n == len(seen) {
			return checkManyDuplicates(all)
		}
		for _, t := range seen[:n] {
			if t == uint16(typ) {
				return errDuplicate
			}
		}
		seen[n] = uint16(typ)
	}
	return nil
}

// checkManyDuplicates is checkDuplicates for a long list: one bit per type.
func checkManyDuplicates(exts cursor) error {
	var seen [(1 << 16) / 64]uint64
	for len(exts) > 0 {
		typ, ok := exts.u16()
		if !ok {
			return nil
		}
		if _, ok := exts.vec16(); !ok {
			return nil
		}
		w, bit := typ/64, uint64(1)<<(typ%64)
		if seen[w]&bit != 0 {
			return errDuplicate
		}
		seen[w] |= bit
	}
	return nil
}

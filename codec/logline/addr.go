package logline

import (
	"bytes"
	"net"
	"net/netip"
	"strconv"
)

// appendTCPAddr appends what a.String() returns, without its two
// allocations: "host:port", the host in brackets when it holds a colon
// (IPv6, or a zone that does), "<nil>" for a nil address.
func appendTCPAddr(bs []byte, a *net.TCPAddr) []byte {
	if a == nil {
		return append(bs, "<nil>"...)
	}
	var hostText [48]byte
	host := appendIP(hostText[:0], a.IP)
	if a.Zone != "" {
		host = append(host, '%')
		host = append(host, a.Zone...)
	}
	if bytes.IndexByte(host, ':') >= 0 {
		bs = append(bs, '[')
		bs = append(bs, host...)
		bs = append(bs, ']')
	} else {
		bs = append(bs, host...)
	}
	bs = append(bs, ':')
	return strconv.AppendInt(bs, int64(a.Port), 10)
}

// appendIP appends what net.IP.String returns, except that an empty IP
// appends nothing (a TCPAddr without an IP prints as ":port"): dotted
// decimal for IPv4 (also in its 16-byte form), RFC 5952 text for IPv6, and
// "?" and hex for a slice of any other length.
func appendIP(bs []byte, ip net.IP) []byte {
	switch len(ip) {
	case 0:
		return bs
	case net.IPv4len, net.IPv6len:
		if v4 := ip.To4(); v4 != nil {
			return appendIPv4(bs, v4)
		}
		addr, _ := netip.AddrFromSlice(ip)
		return addr.AppendTo(bs)
	}
	bs = append(bs, '?')
	for _, b := range ip {
		bs = append(bs, hexDigits[b>>4], hexDigits[b&0xf])
	}
	return bs
}

// appendIPv4 appends the dotted decimal form of a 4-byte IP.
func appendIPv4(bs []byte, ip net.IP) []byte {
	for i, b := range ip[:net.IPv4len] {
		if i > 0 {
			bs = append(bs, '.')
		}
		switch {
		case b >= 100:
			bs = append(bs, '0'+b/100, '0'+b/10%10, '0'+b%10)
		case b >= 10:
			bs = append(bs, '0'+b/10, '0'+b%10)
		default:
			bs = append(bs, '0'+b)
		}
	}
	return bs
}

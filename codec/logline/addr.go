package logline

import (
	"bytes"
	"net"
	"net/netip"
	"slices"
	"sync/atomic"
	"unsafe"
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
	return appendInt(bs, int64(a.Port))
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

// addrTexts remembers the quoted text of recent client addresses, so that
// the requests of a keep-alive connection, which all carry the same
// *net.TCPAddr (the connection's), format it once. A direct-mapped table
// keyed by the pointer: a slot holds one address and its text, and a new
// address takes the slot over. Slots keep their address alive; the table
// holds at most addrSlots of them.
type addrTexts struct {
	slots [addrSlots]atomic.Pointer[addrText]
}

const addrSlots = 256

type addrText struct {
	addr   *net.TCPAddr
	quoted []byte // `"127.0.0.1:51234"`, escaped as a JSON string
}

// appendQuoted appends the quoted text of addr, as appendQuoted of
// appendTCPAddr would.
func (t *addrTexts) appendQuoted(bs []byte, addr *net.TCPAddr) []byte {
	slot := &t.slots[uint64(uintptr(unsafe.Pointer(addr)))*0x9E3779B97F4A7C15>>56]
	if e := slot.Load(); e != nil && e.addr == addr {
		return append(bs, e.quoted...)
	}
	var text [64]byte
	start := len(bs)
	bs = appendQuoted(bs, appendTCPAddr(text[:0], addr))
	if addr != nil {
		slot.Store(&addrText{addr: addr, quoted: slices.Clone(bs[start:])})
	}
	return bs
}

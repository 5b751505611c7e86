package server

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	proxyproto "github.com/pires/go-proxyproto"
	"go.uber.org/zap"

	"github.com/relaygate/gateway/backend/sock"
	"github.com/relaygate/gateway/config"
)

// PROXY protocol headers (frontendPolicies.proxy, tunnelProtocol: proxy):
// a load balancer in front of the gateway starts each connection with a
// header naming the client's and the destination's addresses. The header
// is framed here, from bytes peeked without consuming them (so nothing
// that follows it is read ahead), parsed by go-proxyproto, and consumed
// whole; the connection then goes on as any other, with the header's
// addresses in place of the socket's (source.address, X-Forwarded-For,
// the access log, destination.port).

// proxyPolicy is what a bind's connections must begin with.
type proxyPolicy struct {
	v1, v2 bool // the versions accepted
	strict bool // a connection without a header is refused
}

// newProxyPolicy compiles the policy; nil for none.
func newProxyPolicy(p *config.ProxyProtocol) *proxyPolicy {
	if p == nil {
		return nil
	}
	out := &proxyPolicy{v2: true, strict: p.Mode != "optional"}
	switch p.Version {
	case "v1":
		out.v1, out.v2 = true, false
	case "all":
		out.v1 = true
	}
	return out
}

// bindProxyPolicy is the PROXY protocol policy of a bind's connections:
// frontendPolicies.proxy's, else the defaults (v2, strict) when the bind's
// tunnelProtocol is proxy. An internal bind has no socket: none.
func bindProxyPolicy(f *config.File, b *config.Bind) *proxyPolicy {
	if b.Mode == "internal" {
		return nil
	}
	if p := f.FrontendPolicies.PROXYHeader(); p != nil {
		return newProxyPolicy(p)
	}
	if b.TunnelProtocol == "proxy" {
		return newProxyPolicy(&config.ProxyProtocol{})
	}
	return nil
}

// takeProxyHeader reads the PROXY protocol header a connection begins
// with and gives the connection its addresses; false when the connection
// was refused (and closed): no header where one is required, a malformed
// one, one of a version not accepted, or none in time.
func (b *bind) takeProxyHeader(c net.Conn, bc *bindConfig, pol *proxyPolicy) bool {
	f := sock.ServerFields(c)
	src, dst, err := readProxyHeader(c, pol)
	if err == nil && f == nil {
		// Every accepted connection is a data-path one; one that is not
		// could not carry the addresses, and is refused rather than
		// served as the load balancer.
		err = errors.New("the connection cannot take the header's addresses")
	}
	if err != nil {
		b.gw.log.Debug("connection refused: PROXY protocol", zap.Stringer("client", c.RemoteAddr()), zap.Error(err))
		b.closeLogged(c, c, bc, nil, "", endProxyHeader)
		return false
	}
	if src != nil {
		f.Peer, f.Local = src, dst
	}
	// What follows the header is the connection's first byte, with the
	// time a new connection has for it (the TLS and TCP paths set their
	// own).
	_ = c.SetReadDeadline(deadlineAfter(b.firstByte()))
	return true
}

// Header bounds. A v1 header is at most 107 bytes (the specification's);
// a v2 header's address block and TLVs are bounded well below the 64 KiB
// its length field allows, as agentgateway bounds them (512 bytes; load
// balancers' TLVs, such as a VPC endpoint's identity, are tens of bytes).
const (
	proxyV1Max     = 107
	proxyV2Fixed   = 16
	proxyV2BodyMax = 1024
	// proxyHeaderMax is the most a header can take: what is peeked.
	proxyHeaderMax = proxyV2Fixed + proxyV2BodyMax
)

// proxyHeaderBufs hold the bytes of a PROXY header being peeked at.
var proxyHeaderBufs = sync.Pool{New: func() any { b := make([]byte, proxyHeaderMax); return &b }}

// proxyHeaderTimeout bounds the wait for a whole header, as agentgateway
// does: it is small and sent at once.
var proxyHeaderTimeout = 5 * time.Second // a variable for the tests

var (
	proxyV1Prefix = []byte("PROXY")
	proxyV2Sig    = []byte("\r\n\r\n\x00\r\nQUIT\n")
)

// proxyFrame is what the first bytes of a connection are.
type proxyFrame uint8

const (
	proxyFrameMore  proxyFrame = iota // too few bytes to tell
	proxyFrameNone                    // no header
	proxyFrameWhole                   // a header of the length returned
	proxyFrameBad                     // a header too long, or a v1 line without its end
)

// frameProxyHeader tells what b, the bytes a connection began with, hold:
// a whole header (and its length), the start of one, or none.
func frameProxyHeader(b []byte) (int, proxyFrame) {
	switch {
	case len(b) < len(proxyV2Sig) && bytes.HasPrefix(proxyV2Sig, b),
		len(b) < len(proxyV1Prefix) && bytes.HasPrefix(proxyV1Prefix, b):
		return 0, proxyFrameMore
	case bytes.HasPrefix(b, proxyV2Sig):
		if len(b) < proxyV2Fixed {
			return 0, proxyFrameMore
		}
		body := int(binary.BigEndian.Uint16(b[14:16]))
		if body > proxyV2BodyMax {
			return 0, proxyFrameBad
		}
		if len(b) < proxyV2Fixed+body {
			return 0, proxyFrameMore
		}
		return proxyV2Fixed + body, proxyFrameWhole
	case bytes.HasPrefix(b, proxyV1Prefix):
		if i := bytes.Index(b[:min(len(b), proxyV1Max)], crlf); i >= 0 {
			return i + len(crlf), proxyFrameWhole
		}
		if len(b) >= proxyV1Max {
			return 0, proxyFrameBad
		}
		return 0, proxyFrameMore
	}
	return 0, proxyFrameNone
}

var crlf = []byte("\r\n")

// errNoProxyHeader is a strict policy's refusal of a connection without a
// header.
var errNoProxyHeader = errors.New("no PROXY protocol header")

// parseProxyHeader parses a whole header (frameProxyHeader's) against the
// policy: the addresses it gives, or none for a header that keeps the
// socket's (a LOCAL command, as a load balancer's health check sends, or
// an unknown address family).
func parseProxyHeader(b []byte, pol *proxyPolicy) (src, dst net.Addr, err error) {
	r := bufio.NewReaderSize(bytes.NewReader(b), len(b))
	h, err := proxyproto.Read(r)
	if err != nil {
		return nil, nil, fmt.Errorf("malformed PROXY protocol header: %w", err)
	}
	if r.Buffered() != 0 {
		// The library read less than the frame: the two disagree on where
		// the header ends, so nothing after it can be trusted.
		return nil, nil, errors.New("malformed PROXY protocol header: its length does not add up")
	}
	switch {
	case h.Version == 1 && !pol.v1, h.Version == 2 && !pol.v2:
		return nil, nil, fmt.Errorf("PROXY protocol v%d header, not accepted here", h.Version)
	case h.Command.IsLocal(), h.TransportProtocol.IsUnspec():
		return nil, nil, nil
	case h.TransportProtocol.IsUnix():
		return nil, nil, errors.New("PROXY protocol header of a Unix socket: not supported")
	case h.TransportProtocol.IsDatagram():
		return nil, nil, errors.New("PROXY protocol header of a datagram connection: not a stream")
	}
	return h.SourceAddr, h.DestinationAddr, nil
}

// readProxyHeader takes the header a connection begins with, within the
// policy's timeout, leaving the connection at the first byte after it. It
// returns the header's addresses (none: keep the socket's).
func readProxyHeader(c net.Conn, pol *proxyPolicy) (src, dst net.Addr, err error) {
	p, ok := c.(peeker)
	if !ok {
		return nil, nil, errors.New("the connection cannot be peeked at")
	}
	bp := proxyHeaderBufs.Get().(*[]byte)
	defer proxyHeaderBufs.Put(bp)
	buf := *bp
	_ = c.SetReadDeadline(time.Now().Add(proxyHeaderTimeout))
	n, err := p.Peek(buf, func(b []byte) bool {
		_, f := frameProxyHeader(b)
		return f != proxyFrameMore
	})
	length, frame := frameProxyHeader(buf[:n])
	switch {
	case frame == proxyFrameWhole:
	case frame == proxyFrameBad:
		return nil, nil, errors.New("malformed PROXY protocol header: too long")
	case frame == proxyFrameNone && err == nil:
		if pol.strict {
			return nil, nil, errNoProxyHeader
		}
		return nil, nil, nil
	case err != nil:
		return nil, nil, fmt.Errorf("reading the PROXY protocol header: %w", err)
	default:
		return nil, nil, errors.New("the connection ended inside its PROXY protocol header")
	}
	if src, dst, err = parseProxyHeader(buf[:length], pol); err != nil {
		return nil, nil, err
	}
	if _, err := io.ReadFull(c, buf[:length]); err != nil {
		return nil, nil, fmt.Errorf("reading the PROXY protocol header: %w", err)
	}
	return src, dst, nil
}

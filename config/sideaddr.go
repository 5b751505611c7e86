package config

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"github.com/relaygate/gateway/config/decode"
)

// SideAddr is the address a side server (admin, stats, readiness) listens
// on, as the process resolved it (environment, then config, then default),
// and what set it, for CheckSideAddrs's errors.
type SideAddr struct {
	// Name says where the address comes from: the field path
	// ("config.adminAddr"), the environment variable ("ADMIN_ADDR"), or,
	// for a default, the field ("config.adminAddr") with Default set.
	Name string
	Addr string
	// InFile is set when Name is a field the file holds; Default when the
	// address is the field's default.
	InFile, Default bool
}

// what names the address in a message about another.
func (a SideAddr) what() string {
	if a.Default {
		return fmt.Sprintf("%s (default %s)", a.Name, a.Addr)
	}
	return fmt.Sprintf("%s (%s)", a.Name, a.Addr)
}

// CheckSideAddrs reports the addresses that cannot all be listened on at
// start: two side servers on one address (one port of overlapping hosts, or
// one unix socket), and a bind whose port a side server has (binds listen on
// every interface). Each error names the field (or variable) to change: the
// later side server, or the bind's port. Without it the process failed to
// start with "address already in use", though --validate-only passed the
// file.
func (f *File) CheckSideAddrs(addrs []SideAddr) Errors {
	var errs Errors
	report := func(at SideAddr, msg string) {
		if at.InFile {
			errs = append(errs, f.Position(&decode.FieldError{Path: at.Name, Msg: msg}))
			return
		}
		errs = append(errs, fmt.Errorf("%s: %s", at.Name, msg))
	}
	for j := range addrs {
		for i := range j {
			first, at := addrs[i], addrs[j]
			if !listenAddrsOverlap(first.Addr, at.Addr) {
				continue
			}
			// Reported at the one set (a default was not chosen).
			if at.Default && !first.Default {
				first, at = at, first
			}
			report(at, fmt.Sprintf("address %q is also used by %s", at.Addr, first.what()))
			break // one error for each: the first it clashes with
		}
	}
	port := func(path string, port int) {
		for _, a := range addrs {
			if listenAddrsOverlap(a.Addr, ":"+strconv.Itoa(port)) {
				errs = append(errs, f.Position(&decode.FieldError{Path: path,
					Msg: fmt.Sprintf("port %d is also used by %s", port, a.what())}))
				return
			}
		}
	}
	for i, bind := range f.Binds {
		if bind.Port != nil && bind.Mode != "internal" { // an internal bind opens no socket
			port(bind.path(i)+".port", *bind.Port)
		}
	}
	if f.LLM != nil && !f.LLM.attached {
		// A bind of its own, compiled from the section.
		port("llm.port", f.LLM.PortOrDefault())
	}
	return errs
}

// listenAddrsOverlap reports whether two listen addresses (CheckListenAddr's
// forms) cannot both be listened on: one unix socket path, or one port (not
// 0, which the system chooses) on hosts that overlap.
func listenAddrsOverlap(a, b string) bool {
	if a == "" || b == "" || strings.EqualFold(a, "off") || strings.EqualFold(b, "off") {
		return false
	}
	pa, unixA := strings.CutPrefix(a, "unix:")
	pb, unixB := strings.CutPrefix(b, "unix:")
	if unixA || unixB {
		return unixA && unixB && pa == pb
	}
	ha, porta, err := net.SplitHostPort(a)
	if err != nil {
		return false
	}
	hb, portb, err := net.SplitHostPort(b)
	if err != nil {
		return false
	}
	na, errA := strconv.ParseUint(porta, 10, 16)
	nb, errB := strconv.ParseUint(portb, 10, 16)
	if errA != nil || errB != nil || na != nb || na == 0 {
		return false
	}
	return hostsOverlap(ha, hb)
}

// hostsOverlap reports whether two listen hosts share an address: "" and
// "::" are every address (Go listens on both families), 0.0.0.0 every IPv4
// one, localhost the loopback ones; other names are compared as written,
// and overlap a wildcard.
func hostsOverlap(a, b string) bool {
	ka, kb := listenHost(a), listenHost(b)
	switch {
	case ka.all || kb.all:
		return true
	case ka.any4 && kb.any4:
		return true
	case ka.any4 || kb.any4:
		other := kb
		if kb.any4 {
			other = ka
		}
		if other.name != "" {
			return true // most likely an IPv4 address
		}
		for _, ip := range other.ips {
			if ip.Is4() {
				return true
			}
		}
		return false
	case ka.name != "" || kb.name != "":
		return strings.EqualFold(ka.name, kb.name)
	}
	for _, x := range ka.ips {
		for _, y := range kb.ips {
			if x == y {
				return true
			}
		}
	}
	return false
}

// listenKind is a listen host classified for hostsOverlap.
type listenKind struct {
	all, any4 bool
	ips       []netip.Addr
	name      string // a host name other than localhost
}

func listenHost(h string) listenKind {
	if strings.EqualFold(h, "localhost") {
		return listenKind{ips: []netip.Addr{netip.AddrFrom4([4]byte{127, 0, 0, 1}), netip.IPv6Loopback()}}
	}
	if h == "" {
		return listenKind{all: true}
	}
	ip, err := netip.ParseAddr(h)
	if err != nil {
		return listenKind{name: h}
	}
	ip = ip.Unmap()
	switch {
	case ip == netip.IPv6Unspecified():
		return listenKind{all: true}
	case ip == netip.IPv4Unspecified():
		return listenKind{any4: true}
	}
	return listenKind{ips: []netip.Addr{ip.WithZone("")}}
}

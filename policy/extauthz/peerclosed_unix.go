//go:build unix

package extauthz

import (
	"net"
	"syscall"
)

// peerClosed reports whether an idle connection's peer has closed it or
// sent what nobody asked for: a read would not find it empty. It looks
// without waiting or consuming anything (recv with MSG_PEEK|MSG_DONTWAIT).
func peerClosed(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return true
	}
	var b [1]byte
	pending := false
	err = rc.Read(func(fd uintptr) bool {
		for {
			_, _, e := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
			if e == syscall.EINTR {
				continue
			}
			pending = e != syscall.EAGAIN
			return true // never wait
		}
	})
	return err != nil || pending
}

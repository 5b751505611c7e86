//go:build unix

package sockpeek

import (
	"net"
	"syscall"
	"unsafe"
)

// Peek copies into b what waits on the socket fd, without waiting or
// consuming anything, and returns the recv's count and error: EAGAIN when
// nothing waits, 0 bytes and no error at the end of the stream. b must not
// be empty. The call never blocks, so it is made without telling the
// scheduler.
func Peek(fd uintptr, b []byte) (int, syscall.Errno) {
	for {
		n, _, e := syscall.RawSyscall6(syscall.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)),
			syscall.MSG_PEEK|syscall.MSG_DONTWAIT, 0, 0)
		if e != syscall.EINTR {
			return int(n), e
		}
	}
}

// Pending reports whether a read of fd would not find it empty: bytes, the
// end of the stream or an error wait there.
func Pending(fd uintptr) bool {
	var b [1]byte
	_, e := Peek(fd, b[:])
	return e != syscall.EAGAIN
}

// PeerClosed reports whether an idle connection's peer has closed it or
// sent what nobody asked for: a read would not find it empty. A connection
// that is not a socket is taken as open.
func PeerClosed(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return true
	}
	pending := false
	err = rc.Read(func(fd uintptr) bool {
		pending = Pending(fd)
		return true // never wait
	})
	return err != nil || pending
}

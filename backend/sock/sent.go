package sock

import "golang.org/x/sys/unix"

// SocketSent is how many bytes the TCP socket fd took from its writers
// since it was opened: those its peer acknowledged (TCP_INFO) and those
// still in its send queue (SIOCOUTQ). A library that gives up on a write
// half done (netpoll, once its peer half-closed) leaves no other record of
// how much of it went out; the caller writes the rest itself. It is exact
// only while nothing writes to the socket.
func SocketSent(fd int) (int64, bool) {
	return sentCount(func() (int64, bool) {
		info, err := unix.GetsockoptTCPInfo(fd, unix.IPPROTO_TCP, unix.TCP_INFO)
		if err != nil {
			return 0, false
		}
		return int64(info.Bytes_acked), true
	}, func() (int64, bool) {
		n, err := unix.IoctlGetInt(fd, unix.SIOCOUTQ)
		return int64(n), err == nil
	})
}

// sentCount adds a socket's acknowledged bytes (acked) and queued ones
// (queued). The two come from two calls, and an acknowledgement arriving
// between them moves bytes from one count to the other: read the other way
// round, the sum would miss them, and a caller that writes what the socket
// seems not to have taken would send them twice. So the queue is read
// between two reads of the acknowledged count until the two agree, and the
// sum is of one moment. It gives up (false) after sentCountTries.
func sentCount(acked, queued func() (int64, bool)) (int64, bool) {
	for range sentCountTries {
		a1, ok1 := acked()
		q, ok2 := queued()
		a2, ok3 := acked()
		if !ok1 || !ok2 || !ok3 {
			return 0, false
		}
		if a1 == a2 {
			return a1 + q, true
		}
	}
	return 0, false
}

// sentCountTries bounds sentCount's attempts at a quiet moment: it is
// called once the socket's writer stopped, so acknowledgements catch up
// with what was sent.
const sentCountTries = 100

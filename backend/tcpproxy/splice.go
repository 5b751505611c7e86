package tcpproxy

import "io"

// splice moves bytes with splice(2): net.TCPConn.ReadFrom from another
// TCPConn splices through a pipe (on Linux), in the kernel. The TCPConns are
// the ones under the given connections (a sock.Conn's ReadFrom is its own
// copy, so the embedded TCPConn's is called).
//
// ReadFrom returns only at the end, so the bytes moved are counted then;
// the idle check reads the sockets' own counts (limits).
func (d *dir) splice() {
	n, err := d.dst.tcp.ReadFrom(d.src.tcp)
	d.n.Add(n)
	if err == nil {
		d.ended(io.EOF)
		return
	}
	// ReadFrom's error does not say which socket failed; the one that was
	// reset says. Failing that, a write error would be EPIPE or ECONNRESET
	// on the destination after its RST, which wasReset sees, so the rest is
	// the source's.
	if !d.src.wasReset() && d.dst.wasReset() {
		d.writeFailed(err)
		return
	}
	d.ended(err)
}

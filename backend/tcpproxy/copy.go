package tcpproxy

import "sync"

// copyBuffer is the size of Copy's buffer. It is a little under 64 KiB for
// the reason sock's bulk buffer is: loopback's MSS is 65,483 bytes, and a
// 64 KiB write would be a full segment and a tiny one.
const copyBuffer = 63 << 10

var copyBuffers = sync.Pool{New: func() any {
	b := make([]byte, copyBuffer)
	return &b
}}

// copy moves bytes with the connections' Read and Write through a pooled
// buffer.
func (d *dir) copy() {
	bp := copyBuffers.Get().(*[]byte)
	defer copyBuffers.Put(bp)
	buf := *bp
	for {
		if _, done := d.copyOnce(buf); done {
			return
		}
	}
}

// copyOnce reads once into buf and writes what came to the destination;
// done reports that the direction ended (a failed write, or the source's
// end or failure), which it has handled.
func (d *dir) copyOnce(buf []byte) (n int, done bool) {
	n, err := d.src.io.Read(buf)
	if n > 0 {
		m, werr := d.dst.write(buf[:n])
		d.n.Add(int64(m))
		if werr != nil {
			d.writeFailed(werr)
			return n, true
		}
	}
	if err != nil {
		d.ended(d.src.readErr(err))
		return n, true
	}
	return n, false
}

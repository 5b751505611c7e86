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
		n, err := d.src.io.Read(buf)
		if n > 0 {
			m, werr := d.dst.write(buf[:n])
			d.n.Add(int64(m))
			if werr != nil {
				d.writeFailed(werr)
				return
			}
		}
		if err != nil {
			d.ended(d.src.readErr(err))
			return
		}
	}
}

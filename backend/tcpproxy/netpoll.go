package tcpproxy

// netpoll forwards between two netpoll connections through netpoll's nocopy
// API: the source's buffered bytes are taken with Next (a slice of its input
// buffer when they lie in one node, as they do when each read takes all
// there is) and handed to the destination's writer with WriteBinary (which
// links a slice over 4 KiB instead of copying it), and Flush sends them with
// sendmsg; the input buffer is released once they are sent. (A Slice of the
// input cannot be Appended to the output: netpoll's sliced buffers are read
// only.) end.npWrite handles a destination whose peer half-closed.
func (d *dir) netpoll() {
	r := d.src.np.Reader()
	for {
		if _, err := r.Peek(1); err != nil {
			d.ended(d.src.readErr(err))
			return
		}
		p, err := r.Next(min(r.Len(), netpollChunk))
		if err != nil {
			_ = r.Release()
			d.ended(err)
			return
		}
		n, err := d.dst.npWrite(p, true)
		d.n.Add(int64(n))
		_ = r.Release()
		if err != nil {
			d.writeFailed(err)
			return
		}
	}
}

// netpollChunk bounds what one Next takes. Next copies what spans two
// nodes of the input buffer into a new buffer, and the poller appends to the
// input while a write is under way, so taking all there is would copy most
// of a busy stream; a piece this size rarely spans two nodes (netpoll's
// nodes grow to 8 MiB).
const netpollChunk = 64 << 10

package backend

import (
	"io"
	"net"
	"sync"
)

// PromptConn is a connection whose ReadFrom writes every piece of what it
// reads as soon as it is read, through a pooled buffer. bufio.Writer hands a
// streamed body of known length to its connection's ReadFrom once its buffer
// is empty: net.TCPConn's allocates on every call (and 32 KiB for a body that
// is not a file or socket), and a connection without one (netpoll's) leaves
// the tail of what arrived in the write buffer until more comes. Upstream
// connections are PromptConns, and the gateway wraps accepted ones.
type PromptConn struct {
	net.Conn
}

// ReadFrom copies r to the connection until io.EOF.
func (c *PromptConn) ReadFrom(r io.Reader) (int64, error) {
	bp := copyBuffers.Get().(*[]byte)
	defer copyBuffers.Put(bp)
	buf := *bp
	var total int64
	for {
		n, err := r.Read(buf)
		if n > 0 {
			m, werr := c.Conn.Write(buf[:n])
			total += int64(m)
			if werr == nil && m != n {
				werr = io.ErrShortWrite
			}
			if werr != nil {
				return total, werr
			}
		}
		if err == io.EOF {
			return total, nil
		}
		if err != nil {
			return total, err
		}
	}
}

var copyBuffers = sync.Pool{New: func() any {
	b := make([]byte, 32<<10)
	return &b
}}

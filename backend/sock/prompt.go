package sock

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
)

// PromptConn is a connection whose ReadFrom writes every piece of what it
// reads as soon as it is read, through a pooled buffer: bufio.Writer hands a
// streamed body of known length to its connection's ReadFrom once its buffer
// is empty, and a connection without one (netpoll's) would leave the tail of
// what arrived in the write buffer until more came. Connections that are
// not TCP (netpoll's) are wrapped in it; TCP ones are Conns, whose ReadFrom
// is the same.
type PromptConn struct {
	net.Conn
	// ServerState is the owner's, as Conn.ServerState is.
	ServerState atomic.Int32
}

// ReadFrom copies r to the connection until io.EOF.
func (c *PromptConn) ReadFrom(r io.Reader) (int64, error) { return copyPromptly(c.Conn, r) }

// copyPromptly copies r to w until io.EOF, writing each piece as soon as it
// is read.
func copyPromptly(w io.Writer, r io.Reader) (int64, error) {
	bp := copyBuffers.Get().(*[]byte)
	defer copyBuffers.Put(bp)
	buf := *bp
	var total int64
	for {
		n, err := r.Read(buf)
		if n > 0 {
			m, werr := w.Write(buf[:n])
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

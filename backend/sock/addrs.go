package sock

import "net"

// RemoteAddr is the client's address: a PROXY protocol header's
// (Server.Peer), else the socket's peer.
func (c *Conn) RemoteAddr() net.Addr {
	if c.Peer != nil {
		return c.Peer
	}
	return c.TCPConn.RemoteAddr()
}

// LocalAddr is the address the client reached: a PROXY protocol header's
// (Server.Local), else the socket's.
func (c *Conn) LocalAddr() net.Addr {
	if c.Local != nil {
		return c.Local
	}
	return c.TCPConn.LocalAddr()
}

// RemoteAddr is Conn's, for a connection of another library.
func (c *PromptConn) RemoteAddr() net.Addr {
	if c.Peer != nil {
		return c.Peer
	}
	return c.Conn.RemoteAddr()
}

// LocalAddr is Conn's, for a connection of another library.
func (c *PromptConn) LocalAddr() net.Addr {
	if c.Local != nil {
		return c.Local
	}
	return c.Conn.LocalAddr()
}

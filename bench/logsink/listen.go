package main

import (
	"net"
)

// recvBuffer is the socket receive buffer asked for: room for tens of
// thousands of log datagrams, so that a burst while the receiver waits for
// its CPU is queued, not dropped (HAProxy drops a log line rather than
// wait). The kernel caps it at net.core.rmem_max.
const recvBuffer = 16 << 20

// listen opens the UDP socket logs arrive on.
func listen(addr string) (*net.UDPConn, error) {
	ua, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, err
	}
	conn, err := net.ListenUDP("udp", ua)
	if err != nil {
		return nil, err
	}
	if err := conn.SetReadBuffer(recvBuffer); err != nil {
		_ = conn.Close()
		return nil, err
	}
	return conn, nil
}

package main

import (
	"errors"
	"fmt"
	"net"
)

// freePorts asks the kernel for n ports on 127.0.0.1. All listeners are held
// open until every port is known, so the ports are distinct; they are closed
// before returning, so a caller can bind them (a race with other programs
// taking the same port remains possible, as with any such scheme).
func freePorts(n int) ([]int, error) {
	if n < 1 || n > 1000 {
		return nil, fmt.Errorf("port count %d out of range 1..1000", n)
	}
	listeners := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range listeners {
			_ = l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("listen on 127.0.0.1:0: %w", err)
		}
		listeners = append(listeners, l)
		addr, ok := l.Addr().(*net.TCPAddr)
		if !ok {
			return nil, errors.New("listener address is not TCP")
		}
		ports = append(ports, addr.Port)
	}
	return ports, nil
}

// Package tcpproxytest stands up tcpproxy pipes on loopback for tests and
// benchmarks: a proxy that accepts clients the way the gateway's acceptors
// do (std net.Listen with sock.Conn, plain *net.TCPConn, terminated TLS, or
// a netpoll event loop) and dials its upstream (sock.Conn, *net.TCPConn or
// netpoll), plus the servers behind it (echo, sink) and a source.
package tcpproxytest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"math/big"
	"net"
	"sync"
	"time"

	"github.com/cloudwego/netpoll"

	"github.com/relaygate/gateway/backend/sock"
	"github.com/relaygate/gateway/backend/tcpproxy"
)

// Transport is how the proxy holds one of its connections.
type Transport uint8

// Transports.
const (
	// Sock: accepted by net.Listen or dialed by net.Dial, wrapped in
	// sock.Conn (the gateway's data path).
	Sock Transport = iota
	// TCP: a plain *net.TCPConn.
	TCP
	// TLS: terminated TLS over a sock.Conn (client side only).
	TLS
	// Netpoll: accepted by a netpoll event loop (its OnConnect) or dialed
	// with netpoll.DialConnection.
	Netpoll
)

// Kind is one way of standing up a pipe.
type Kind struct {
	Name             string
	Method           tcpproxy.Method // what the proxy asks for
	Want             tcpproxy.Method // what should run
	Client, Upstream Transport
}

// Kinds are the pipes the tests run: every method, over the connection
// types the gateway hands over.
var Kinds = []Kind{
	{Name: "copy", Method: tcpproxy.Copy, Want: tcpproxy.Copy, Client: Sock, Upstream: Sock},
	{Name: "copy-tcpconn", Method: tcpproxy.Copy, Want: tcpproxy.Copy, Client: TCP, Upstream: TCP},
	{Name: "splice", Method: tcpproxy.Splice, Want: tcpproxy.Splice, Client: Sock, Upstream: Sock},
	{Name: "splice-tcpconn", Method: tcpproxy.Splice, Want: tcpproxy.Splice, Client: TCP, Upstream: TCP},
	{Name: "hybrid", Method: tcpproxy.Hybrid, Want: tcpproxy.Hybrid, Client: Sock, Upstream: Sock},
	{Name: "hybrid-tcpconn", Method: tcpproxy.Hybrid, Want: tcpproxy.Hybrid, Client: TCP, Upstream: TCP},
	{Name: "auto", Method: tcpproxy.Auto, Want: tcpproxy.Hybrid, Client: Sock, Upstream: Sock},
	{Name: "netpoll", Method: tcpproxy.Netpoll, Want: tcpproxy.Netpoll, Client: Netpoll, Upstream: Netpoll},
	{Name: "auto-netpoll", Method: tcpproxy.Auto, Want: tcpproxy.Netpoll, Client: Netpoll, Upstream: Netpoll},
	{Name: "netpoll-copy", Method: tcpproxy.Copy, Want: tcpproxy.Copy, Client: Netpoll, Upstream: Netpoll},
	{Name: "netpoll-client-sock-upstream", Method: tcpproxy.Auto, Want: tcpproxy.Copy, Client: Netpoll, Upstream: Sock},
	{Name: "tls-terminated", Method: tcpproxy.Auto, Want: tcpproxy.Copy, Client: TLS, Upstream: Sock},
	{Name: "tls-asks-splice", Method: tcpproxy.Splice, Want: tcpproxy.Copy, Client: TLS, Upstream: Sock},
}

// KindByName returns the kind of that name.
func KindByName(name string) (Kind, bool) {
	for _, k := range Kinds {
		if k.Name == name {
			return k, true
		}
	}
	return Kind{}, false
}

// Proxy is a listener whose every connection is piped to one upstream
// address.
type Proxy struct {
	Addr string
	// Results receives every pipe's result (it holds 1024; a full
	// channel drops them).
	Results chan tcpproxy.Result

	kind     Kind
	upstream string
	opts     tcpproxy.Options
	// Prefix, when set, is read from each client before its pipe starts
	// and handed over as Options.ClientPrefix.
	prefix int

	ln    net.Listener
	loop  netpoll.EventLoop
	pipes sync.WaitGroup
	done  chan struct{}
}

// StartOptions are Start's extras.
type StartOptions struct {
	// Prefix bytes are read from each client before its pipe starts and
	// passed as Options.ClientPrefix (what TLS passthrough does with the
	// ClientHello).
	Prefix int
}

// Start listens on a loopback port and pipes every connection to upstream.
func Start(k Kind, upstream string, opts tcpproxy.Options, so StartOptions) (*Proxy, error) {
	p := &Proxy{
		Results:  make(chan tcpproxy.Result, 1024),
		kind:     k,
		upstream: upstream,
		opts:     opts,
		prefix:   so.Prefix,
		done:     make(chan struct{}),
	}
	if k.Client == Netpoll {
		ln, err := netpoll.CreateListener("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		// The pipe runs in OnConnect, which netpoll calls at accept: a
		// protocol whose server speaks first would never reach OnRequest,
		// which waits for the client's first bytes. netpoll runs
		// OnRequest only after OnConnect returned, and closes the
		// connection's descriptor only then.
		onConnect := func(ctx context.Context, c netpoll.Connection) context.Context {
			p.pipes.Add(1)
			defer p.pipes.Done()
			p.serve(c)
			return ctx
		}
		loop, err := netpoll.NewEventLoop(nil, netpoll.WithOnConnect(onConnect))
		if err != nil {
			ln.Close()
			return nil, err
		}
		p.ln, p.loop, p.Addr = ln, loop, ln.Addr().String()
		go func() {
			defer close(p.done)
			_ = loop.Serve(ln)
		}()
		return p, nil
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p.ln, p.Addr = ln, ln.Addr().String()
	go func() {
		defer close(p.done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.pipes.Add(1)
			go func() {
				defer p.pipes.Done()
				p.serve(c)
			}()
		}
	}()
	return p, nil
}

func (p *Proxy) serve(c net.Conn) {
	switch p.kind.Client {
	case Sock:
		c = sock.Wrap(c)
	case TLS:
		tc := tls.Server(sock.Wrap(c), serverTLS())
		if err := tc.Handshake(); err != nil {
			c.Close()
			return
		}
		c = tc
	}
	var prefix []byte
	if p.prefix > 0 {
		prefix = make([]byte, p.prefix)
		if _, err := readFull(c, prefix); err != nil {
			c.Close()
			return
		}
	}
	up, err := Dial(p.kind.Upstream, p.upstream)
	if err != nil {
		sock.Abort(c)
		return
	}
	opts := p.opts
	opts.Method = p.kind.Method
	opts.ClientPrefix = prefix
	r := tcpproxy.Pipe(c, up, opts)
	select {
	case p.Results <- r:
	default:
	}
}

func readFull(c net.Conn, p []byte) (int, error) {
	n := 0
	for n < len(p) {
		m, err := c.Read(p[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// Dial connects to addr the way t says.
func Dial(t Transport, addr string) (net.Conn, error) {
	if t == Netpoll {
		return netpoll.DialConnection("tcp", addr, 5*time.Second)
	}
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	if t == Sock {
		return sock.Wrap(c), nil
	}
	return c, nil
}

// Close stops accepting and waits for the pipes under way to end.
func (p *Proxy) Close() error {
	var err error
	if p.loop != nil {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		for {
			err = p.loop.Shutdown(ctx)
			select {
			case <-p.done:
			case <-time.After(time.Millisecond):
				continue // Shutdown does nothing before Serve started
			}
			break
		}
		if errors.Is(err, context.Canceled) {
			err = nil
		}
	} else {
		err = p.ln.Close()
		<-p.done
	}
	p.pipes.Wait()
	return err
}

var (
	tlsOnce sync.Once
	tlsCert tls.Certificate
	tlsPool *x509.CertPool
)

func makeCert() {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "tcpproxy.test"},
		DNSNames:     []string{"tcpproxy.test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		panic(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		panic(err)
	}
	tlsCert = tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: cert}
	tlsPool = x509.NewCertPool()
	tlsPool.AddCert(cert)
}

func serverTLS() *tls.Config {
	tlsOnce.Do(makeCert)
	return &tls.Config{Certificates: []tls.Certificate{tlsCert}}
}

// DialClient connects a test client to the proxy: over TLS if the proxy
// terminates it.
func (p *Proxy) DialClient() (net.Conn, error) {
	c, err := net.DialTimeout("tcp", p.Addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	if p.kind.Client != TLS {
		return c, nil
	}
	tlsOnce.Do(makeCert)
	tc := tls.Client(c, &tls.Config{RootCAs: tlsPool, ServerName: "tcpproxy.test"})
	if err := tc.Handshake(); err != nil {
		c.Close()
		return nil, err
	}
	return tc, nil
}

package admin

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Timeouts shared by the side servers. WriteTimeout is per server (see
// Start); pprof's profile and trace handlers extend their own write
// deadline by the requested duration.
const (
	readHeaderTimeout = 5 * time.Second
	readTimeout       = 10 * time.Second
	idleTimeout       = 60 * time.Second
	maxHeaderBytes    = 32 << 10
)

// Servers are the running side servers. Create them with Start.
type Servers struct {
	logger    *zap.Logger
	admin     *sideServer
	stats     *sideServer
	readiness *sideServer

	shutdownOnce sync.Once
	shutdownErr  error
}

// sideServer is one listener and the http.Server serving it.
type sideServer struct {
	name  string
	bound string // bound address: host:port or unix:/path
	ln    net.Listener
	srv   *http.Server
	done  chan struct{} // closed when Serve returns
}

// Start binds every enabled listener and then serves them in the
// background. If any address is invalid or cannot be bound, it closes what
// it had opened and returns the error, naming the server.
func Start(opts Options) (*Servers, error) {
	logger := opts.Logger
	if logger == nil {
		logger = zap.NewNop()
	}
	s := &Servers{logger: logger}
	specs := []struct {
		name         string
		addr         string
		handler      http.Handler
		writeTimeout time.Duration
		slot         **sideServer
	}{
		{"admin", opts.AdminAddr, adminHandler(opts), 60 * time.Second, &s.admin},
		{"stats", opts.StatsAddr, statsHandler(opts.Metrics), 30 * time.Second, &s.stats},
		{"readiness", opts.ReadinessAddr, readinessHandler(opts.Ready), 5 * time.Second, &s.readiness},
	}

	var opened []*sideServer
	for _, sp := range specs {
		ln, err := bind(sp.addr)
		if err != nil {
			for _, o := range opened {
				_ = o.ln.Close()
			}
			return nil, fmt.Errorf("%s server: %w", sp.name, err)
		}
		if ln == nil {
			continue // off
		}
		h := sp.handler
		if sp.slot == &s.admin {
			h = sameOriginWrites(h)
			if loopbackListener(ln) {
				h = localHostsOnly(h)
			}
		}
		ss := &sideServer{
			name:  sp.name,
			bound: boundAddr(ln),
			ln:    ln,
			srv:   newHTTPServer(h, sp.writeTimeout, logger.With(zap.String("component", sp.name))),
			done:  make(chan struct{}),
		}
		*sp.slot = ss
		opened = append(opened, ss)
	}
	for _, ss := range opened {
		logger.Info("listener established", zap.String("address", ss.bound), zap.String("component", ss.name))
		go ss.serve(logger)
	}
	return s, nil
}

// bind listens on addr, or returns a nil listener when addr turns the server
// off.
func bind(addr string) (net.Listener, error) {
	a, err := parseAddr(addr)
	if errors.Is(err, errDisabled) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return a.listen()
}

func newHTTPServer(h http.Handler, writeTimeout time.Duration, logger *zap.Logger) *http.Server {
	errorLog, _ := zap.NewStdLogAt(logger, zapcore.WarnLevel) // the level is valid, so no error
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          errorLog,
	}
}

func (ss *sideServer) serve(logger *zap.Logger) {
	defer close(ss.done)
	if err := ss.srv.Serve(ss.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		logger.Error("side server stopped", zap.String("component", ss.name), zap.Error(err))
	}
}

// AdminURL is the URL of the UI on the admin server, such as
// "http://127.0.0.1:15000/ui/", built from the bound address (a wildcard
// host becomes loopback). It is "" when the admin server is off or listens
// on a unix socket (see AdminAddr).
func (s *Servers) AdminURL() string { return browserURL(s.admin.addr(), "/ui/") }

// AdminAddr is the admin server's bound address (host:port or
// unix:/path), or "" when it is off.
func (s *Servers) AdminAddr() string { return s.admin.addr() }

// StatsAddr is the stats server's bound address, or "" when it is off.
func (s *Servers) StatsAddr() string { return s.stats.addr() }

// ReadinessAddr is the readiness server's bound address, or "" when it is
// off.
func (s *Servers) ReadinessAddr() string { return s.readiness.addr() }

func (ss *sideServer) addr() string {
	if ss == nil {
		return ""
	}
	return ss.bound
}

// Shutdown stops the servers: it closes their listeners, waits for active
// requests until ctx is done, then closes whatever is left. It returns
// ctx's error if it had to cut requests short. Later calls return the first
// call's result.
func (s *Servers) Shutdown(ctx context.Context) error {
	s.shutdownOnce.Do(func() {
		var errs []error
		for _, ss := range []*sideServer{s.admin, s.stats, s.readiness} {
			if ss == nil {
				continue
			}
			if err := ss.srv.Shutdown(ctx); err != nil {
				s.logger.Warn("closing side server with requests in flight", zap.String("component", ss.name), zap.Error(err))
				_ = ss.srv.Close()
				errs = append(errs, fmt.Errorf("%s server: %w", ss.name, err))
			}
			<-ss.done
		}
		s.shutdownErr = errors.Join(errs...)
	})
	return s.shutdownErr
}

package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
	"go.uber.org/zap"

	"github.com/relaygate/gateway/config"
	"github.com/relaygate/gateway/examples"
	"github.com/relaygate/gateway/server"
	"github.com/relaygate/gateway/server/admin"
)

// source is where the config comes from.
type source struct {
	o     options
	stdin io.Reader
}

func newSource(o options, stdin io.Reader) *source { return &source{o: o, stdin: stdin} }

func (s *source) name() string {
	switch {
	case s.o.file == "-":
		return "<stdin>"
	case s.o.file != "":
		return s.o.file
	case s.o.inline != "":
		return "<inline config>"
	}
	return "<embedded quickstart>"
}

// maxConfigSize bounds a config file.
const maxConfigSize = 64 << 20

func (s *source) read() ([]byte, error) {
	switch {
	case s.o.file == "-":
		return io.ReadAll(io.LimitReader(s.stdin, maxConfigSize))
	case s.o.file != "":
		f, err := os.Open(s.o.file)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		return io.ReadAll(io.LimitReader(f, maxConfigSize))
	case s.o.inline != "":
		return []byte(s.o.inline), nil
	}
	return examples.Quickstart, nil
}

// process is the running gateway with its side servers.
type process struct {
	log   *zap.Logger
	src   *source
	gw    *server.Gateway
	side  *admin.Servers
	first *config.File
}

// addr resolves one side-server address: environment first, then config, then
// the default.
func addr(env string, v *string, def string) string {
	if e, ok := os.LookupEnv(env); ok && e != "" {
		return e
	}
	if v != nil && *v != "" {
		return *v
	}
	return def
}

func (p *process) start(f *config.File) error {
	p.first = f
	settings := f.Config
	if settings == nil {
		settings = &config.Settings{}
	}
	side, err := admin.Start(admin.Options{
		AdminAddr:     addr("ADMIN_ADDR", settings.AdminAddr, "localhost:15000"),
		StatsAddr:     addr("STATS_ADDR", settings.StatsAddr, "0.0.0.0:15020"),
		ReadinessAddr: addr("READINESS_ADDR", settings.ReadinessAddr, "0.0.0.0:15021"),
		Logger:        p.log,
		ConfigDump:    p.gw.ConfigDump,
		UIPage:        p.gw.UIPage,
		Metrics:       p.gw.Metrics().WritePrometheus,
		Ready:         p.gw.Ready,
	})
	if err != nil {
		return err
	}
	p.side = side
	if err := p.gw.Apply(f); err != nil {
		_ = side.Shutdown(context.Background())
		return err
	}
	if u := side.AdminURL(); u != "" {
		p.log.Info("admin UI available at " + uiURL(u))
	}
	return nil
}

// uiURL shows a loopback admin address as localhost, as agentgateway does.
func uiURL(u string) string {
	return strings.Replace(u, "127.0.0.1", "localhost", 1)
}

// watch reloads the config file when it changes, until the returned function
// is called. Editors and orchestrators replace files by rename, so the
// directory is watched.
func (p *process) watch() func() {
	if p.src.o.file == "" || p.src.o.file == "-" {
		return func() {}
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		p.log.Warn("config reload disabled", zap.Error(err))
		return func() {}
	}
	path, _ := filepath.Abs(p.src.o.file)
	if err := w.Add(filepath.Dir(path)); err != nil {
		p.log.Warn("config reload disabled", zap.Error(err))
		w.Close()
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		var timer *time.Timer
		var fire <-chan time.Time
		for {
			select {
			case <-done:
				return
			case ev, ok := <-w.Events:
				if !ok {
					return
				}
				if filepath.Clean(ev.Name) != path || ev.Op&(fsnotify.Write|fsnotify.Create|fsnotify.Rename) == 0 {
					continue
				}
				// Coalesce the burst of events one save produces.
				if timer == nil {
					timer = time.NewTimer(reloadSettle)
				} else {
					timer.Reset(reloadSettle)
				}
				fire = timer.C
			case err, ok := <-w.Errors:
				if !ok {
					return
				}
				p.log.Warn("config watch", zap.Error(err))
			case <-fire:
				fire = nil
				p.reload()
			}
		}
	}()
	return func() {
		close(done)
		w.Close()
	}
}

// reloadSettle is how long the watcher waits after the last file event.
const reloadSettle = 100 * time.Millisecond

func (p *process) reload() {
	data, err := p.src.read()
	if err != nil {
		p.log.Error("config reload failed; keeping the running config", zap.Error(err))
		return
	}
	f, err := config.Parse(data, os.LookupEnv)
	if err == nil {
		err = p.gw.Apply(f)
	}
	if err != nil {
		p.log.Error("config reload failed; keeping the running config", zap.String("file", p.src.name()), zap.String("errors", err.Error()))
		return
	}
	p.log.Info("config reloaded", zap.String("file", p.src.name()))
}

// shutdown drains: readiness fails at once, listeners keep accepting for the
// minimum termination deadline, then close, and in-flight requests get up to
// the termination grace period.
func (p *process) shutdown(ctx context.Context) {
	p.gw.StartDraining()
	minWait, grace := terminationDeadlines(p.first)
	if minWait > 0 {
		t := time.NewTimer(minWait)
		<-t.C
	}
	sctx, cancel := context.WithTimeout(ctx, grace)
	defer cancel()
	p.gw.Shutdown(sctx)
	_ = p.side.Shutdown(sctx)
	p.log.Info("stopped")
}

// Default drain deadlines.
const (
	defaultGracePeriod = 5 * time.Second
)

// terminationDeadlines returns how long listeners keep accepting after the
// signal, and how long in-flight requests then get. As in agentgateway, an
// environment variable wins over the file, and for the latter the file wins
// over TERMINATION_GRACE_PERIOD_SECONDS:
//
//   - minWait: CONNECTION_MIN_TERMINATION_DEADLINE, else
//     config.connectionMinTerminationDeadline, else 0;
//   - grace: CONNECTION_TERMINATION_DEADLINE, else
//     config.connectionTerminationDeadline, else Kubernetes' grace period
//     less a margin (graceBeforeKill), else 5 s.
func terminationDeadlines(f *config.File) (minWait, grace time.Duration) {
	var fromFile *time.Duration
	if f.Config != nil {
		if f.Config.ConnectionMinTerminationDeadline != nil {
			minWait = f.Config.ConnectionMinTerminationDeadline.Duration
		}
		if f.Config.ConnectionTerminationDeadline != nil {
			fromFile = &f.Config.ConnectionTerminationDeadline.Duration
		}
	}
	if v, ok := envDuration("CONNECTION_MIN_TERMINATION_DEADLINE"); ok {
		minWait = v
	}
	if v, ok := envDuration("CONNECTION_TERMINATION_DEADLINE"); ok {
		return minWait, v
	}
	if fromFile != nil {
		return minWait, *fromFile
	}
	if v, ok := envDuration("TERMINATION_GRACE_PERIOD_SECONDS"); ok {
		return minWait, graceBeforeKill(v)
	}
	return minWait, defaultGracePeriod
}

// graceBeforeKill is the drain time within a Kubernetes termination grace
// period: Kubernetes kills the process when the period ends, so the drain
// ends 5 s before (1 s for periods of 10 s or less), and takes at least 1 s.
// Connections still open are then closed by the gateway, not cut by the
// kill.
func graceBeforeKill(period time.Duration) time.Duration {
	margin := time.Second
	if period > 10*time.Second {
		margin = 5 * time.Second
	}
	return max(period-margin, time.Second)
}

// envDuration reads a duration given as seconds ("5") or Go text ("5s").
func envDuration(name string) (time.Duration, bool) {
	v := os.Getenv(name)
	if v == "" {
		return 0, false
	}
	if n, err := strconv.Atoi(v); err == nil && n >= 0 {
		return time.Duration(n) * time.Second, true
	}
	if d, err := time.ParseDuration(v); err == nil && d >= 0 {
		return d, true
	}
	fmt.Fprintf(os.Stderr, "gateway: ignoring %s=%q: not a number of seconds or a duration\n", name, v)
	return 0, false
}

package main

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
	"go.uber.org/zap"

	"github.com/relaygate/gateway/config"
	"github.com/relaygate/gateway/examples"
	"github.com/relaygate/gateway/policy/celrules"
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

// errConfigTooLarge refuses a config over maxConfigSize: cut off there, it
// could still parse, missing what followed.
var errConfigTooLarge = fmt.Errorf("config file larger than %d MiB", maxConfigSize>>20)

// readConfig reads r whole, refusing more than maxConfigSize bytes.
func readConfig(r io.Reader) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxConfigSize+1))
	if err == nil && len(data) > maxConfigSize {
		return nil, errConfigTooLarge
	}
	return data, err
}

func (s *source) read() ([]byte, error) {
	switch {
	case s.o.file == "-":
		return readConfig(s.stdin)
	case s.o.file != "":
		f, err := os.Open(s.o.file)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		return readConfig(f)
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
	// loaded identifies what the config file held when last read, with
	// the files it reads (certificates, keys, credentials): their SHA-256,
	// or the read error. Only the watch uses it after start.
	loaded string
	// files are the files the running config reads (config.File.FilesRead).
	files []string
	// hup asks the watch for a reload (SIGHUP), when it runs.
	hup      chan struct{}
	watching bool
}

// requestReload reads the config again and applies it (SIGHUP), as the
// watch does on a change: through the watch's goroutine when it runs (it
// owns the reload state), else here. A config that was not read from a
// file (inline, stdin, the embedded one) has nothing to read again.
func (p *process) requestReload() {
	switch {
	case p.src.o.file == "" || p.src.o.file == "-":
		p.log.Info("reload requested; the config does not come from a file, so there is nothing to read again", zap.String("source", p.src.name()))
	case p.watching:
		p.log.Info("reload requested", zap.String("file", p.src.name()))
		select {
		case p.hup <- struct{}{}:
		default: // one already waits
		}
	default:
		p.log.Info("reload requested", zap.String("file", p.src.name()))
		data, err := p.src.read()
		p.reload(data, err)
	}
}

// contentState is the process's loaded value for data read from the config
// and the files it reads.
func contentState(data []byte, files []string) string {
	h := sha256.New()
	h.Write(data)
	for _, f := range files {
		b, err := os.ReadFile(f)
		fmt.Fprintf(h, "\x00%s\x00%d\x00%v\x00", f, len(b), err)
		h.Write(b)
	}
	return string(h.Sum(nil))
}

// sideAddrs are the admin, stats and readiness servers' addresses, and
// what set each (for config.File.CheckSideAddrs).
type sideAddrs struct {
	admin, stats, readiness string
	sources                 []config.SideAddr
}

// The side servers' default addresses.
const (
	defaultAdminAddr     = "localhost:15000"
	defaultStatsAddr     = "0.0.0.0:15020"
	defaultReadinessAddr = "0.0.0.0:15021"
)

// resolveSideAddrs resolves each side-server address: environment first,
// then config, then the default. The file's addresses are checked when it is
// parsed; one from the environment is checked here, and an invalid one is an
// error naming the variable, so that --validate-only finds it too.
func resolveSideAddrs(f *config.File) (sideAddrs, error) {
	settings := f.Config
	if settings == nil {
		settings = &config.Settings{}
	}
	var errs []error
	var sources []config.SideAddr
	addr := func(env, field string, v *string, def string) string {
		if e, ok := os.LookupEnv(env); ok && e != "" {
			if err := config.CheckListenAddr(e); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", env, err))
			}
			sources = append(sources, config.SideAddr{Name: env, Addr: e})
			return e
		}
		if v != nil && *v != "" {
			sources = append(sources, config.SideAddr{Name: "config." + field, Addr: *v, InFile: true})
			return *v
		}
		sources = append(sources, config.SideAddr{Name: "config." + field, Addr: def, Default: true})
		return def
	}
	a := sideAddrs{
		admin:     addr("ADMIN_ADDR", "adminAddr", settings.AdminAddr, defaultAdminAddr),
		stats:     addr("STATS_ADDR", "statsAddr", settings.StatsAddr, defaultStatsAddr),
		readiness: addr("READINESS_ADDR", "readinessAddr", settings.ReadinessAddr, defaultReadinessAddr),
	}
	a.sources = sources
	return a, errors.Join(errs...)
}

func (p *process) start(f *config.File) error {
	p.first = f
	addrs, err := resolveSideAddrs(f)
	if err != nil {
		return err
	}
	if errs := f.CheckSideAddrs(addrs.sources); len(errs) > 0 {
		return errs
	}
	side, err := admin.Start(admin.Options{
		AdminAddr:     addrs.admin,
		StatsAddr:     addrs.stats,
		ReadinessAddr: addrs.readiness,
		Logger:        p.log,
		ConfigDump:    p.gw.ConfigDump,
		LLMProviders:  p.gw.LLMProviders,
		UIPage:        p.gw.UIPage,
		EvalCEL:       celrules.EvalSample,
		Metrics:       p.gw.Metrics().WritePrometheus,
		Ready:         p.gw.Ready,
		Cmdline:       redactArgs(os.Args),
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
// is called.
//
// Directories are watched, not the file: editors and orchestrators replace
// files by rename, and Kubernetes updates a mounted ConfigMap by re-pointing
// a symlink beside the file (c.yaml -> ..data/c.yaml, ..data -> ..<version>),
// which changes what the path resolves to without any event naming it. So
// the file's directory and the directory of the file it resolves to are
// watched; an event naming the file (or its resolved target) reloads it, and
// any other event there reloads it when its content changed.
//
// A directory deleted or moved away loses its watch (inotify drops it): one
// that cannot be watched is polled for, with a backoff up to watchRetryMax,
// and warned of while it lasts (follow), and watched again once it exists.
// A directory watched anew is read again after it is (recheck): what was
// written there before its watch began made no event.
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
	cw := &configWatch{p: p, w: w, path: path, dirs: map[string]bool{}, targets: map[string]string{}, retry: watchRetryMin}
	if err := w.Add(filepath.Dir(path)); err != nil {
		p.log.Warn("config reload disabled", zap.Error(err))
		w.Close()
		return func() {}
	}
	cw.dirs[filepath.Dir(path)] = true
	cw.follow()
	cw.recheck = false // the first check below reads after these watches began
	done := make(chan struct{})
	p.hup, p.watching = make(chan struct{}, 1), true
	go func() {
		// The file may have changed between the first read and the watch.
		timer := time.NewTimer(0)
		fire := timer.C
		direct := false
		var burst time.Time // the first event of the burst being coalesced
		// settle (re)arms the reload for the burst being coalesced, but
		// for no longer than reloadSettleMax from its first event: a file
		// written without pause beside the config (a log) must not put its
		// reload off for ever.
		settle := func() {
			now := time.Now()
			if fire == nil {
				burst = now
			}
			if fire == nil || now.Sub(burst) < reloadSettleMax {
				timer.Reset(reloadSettle)
				fire = timer.C
			}
		}
		// poll fires while a directory to watch cannot be.
		pollTimer := time.NewTimer(time.Hour)
		pollTimer.Stop()
		var poll <-chan time.Time
		// after follows a call that may have run follow: a directory
		// watched anew is read again, one missing is polled for.
		after := func() {
			if cw.recheck {
				cw.recheck = false
				settle()
			}
			if len(cw.missing) > 0 && poll == nil {
				pollTimer.Reset(cw.retry)
				poll = pollTimer.C
			}
		}
		for {
			select {
			case <-done:
				timer.Stop()
				pollTimer.Stop()
				return
			case ev, ok := <-w.Events:
				if !ok {
					return
				}
				switch name := filepath.Clean(ev.Name); {
				case name == cw.path || name == cw.target:
					if ev.Op&(fsnotify.Write|fsnotify.Create|fsnotify.Rename) == 0 {
						continue
					}
					direct = true
				case ev.Op&(fsnotify.Write|fsnotify.Create|fsnotify.Rename|fsnotify.Remove) == 0:
					continue
				}
				// Coalesce the burst of events one save produces.
				settle()
			case err, ok := <-w.Errors:
				if !ok {
					return
				}
				p.log.Warn("config watch", zap.Error(err))
			case <-fire:
				fire = nil
				cw.check(direct)
				direct = false
				after()
			case <-poll:
				poll = nil
				cw.follow()
				if len(cw.missing) > 0 {
					cw.retry = min(2*cw.retry, watchRetryMax)
				}
				after()
			case <-p.hup:
				cw.check(true)
				after()
			}
		}
	}()
	return func() {
		close(done)
		w.Close()
	}
}

// reloadSettle is how long the watcher waits after the last file event;
// reloadSettleMax bounds the wait from a burst's first event.
const (
	reloadSettle    = 100 * time.Millisecond
	reloadSettleMax = time.Second
)

// A directory to watch that cannot be (deleted, not created yet) is tried
// again after watchRetryMin, then at doubling intervals up to watchRetryMax;
// the warning that it is not watched is repeated every watchWarnEvery while
// one is not.
const (
	watchRetryMin  = 100 * time.Millisecond
	watchRetryMax  = 2 * time.Second
	watchWarnEvery = time.Minute
)

// configWatch is the state of the config file's watch; only its goroutine
// uses it.
type configWatch struct {
	p      *process
	w      *fsnotify.Watcher
	path   string          // the config file, absolute
	target string          // what path resolves to through symlinks
	dirs   map[string]bool // the directories watched
	// targets are what the config file and the files it reads (absolute)
	// last resolved to: while one does not resolve (its target's
	// directory deleted), the directory it resolved into is still wanted.
	targets map[string]string
	// missing are the directories wanted that could not be watched, with
	// why; polled for every retry, and warned of (warned is when last).
	missing map[string]error
	retry   time.Duration
	warned  time.Time
	// recheck is set when follow watched a directory anew: what it holds
	// is read again.
	recheck bool
}

// check reloads the file: always after an event naming it, else only when
// what it reads differs from the last read. Then it watches the directory
// of the file's current target.
func (cw *configWatch) check(direct bool) {
	defer cw.follow()
	data, err := cw.p.src.read()
	state := "error: " + fmt.Sprint(err)
	if err == nil {
		state = contentState(data, cw.p.files)
	}
	if !direct && state == cw.p.loaded {
		return
	}
	// A config refused is not read again until something changes; one
	// applied sets loaded to what it read (reload).
	cw.p.loaded = state
	cw.p.reload(data, err)
}

// follow watches the directories of the config file and of the files the
// running config reads, and of the files they now resolve to, and stops
// watching those no longer wanted (a former target's). A directory the
// watcher dropped (deleted or moved away: inotify ends its watch) is
// watched again once it exists; until then it is missing, polled for and
// warned of.
func (cw *configWatch) follow() {
	live := map[string]bool{}
	for _, d := range cw.w.WatchList() {
		live[filepath.Clean(d)] = true
	}
	for d := range cw.dirs {
		if !live[d] {
			delete(cw.dirs, d)
		}
	}
	// The directories of the files the config reads (certificates,
	// credentials) are watched too, and those of the files they resolve to,
	// for the same reasons as the config's.
	paths := []string{cw.path}
	for _, f := range cw.p.files {
		if abs, err := filepath.Abs(f); err == nil {
			paths = append(paths, abs)
		}
	}
	keep := map[string]bool{}
	targets := make(map[string]string, len(paths))
	for _, f := range paths {
		keep[filepath.Dir(f)] = true
		target := cw.targets[f] // missing for now: it comes back there, or the path changes
		if t, err := filepath.EvalSymlinks(f); err == nil {
			if t, err = filepath.Abs(t); err == nil {
				target = t
			}
		}
		if target != "" {
			targets[f] = target
			keep[filepath.Dir(target)] = true
		}
	}
	cw.targets, cw.target = targets, targets[cw.path]
	for d := range cw.dirs {
		if !keep[d] {
			_ = cw.w.Remove(d) // it may be gone already: Kubernetes deletes old versions
			delete(cw.dirs, d)
		}
	}
	var missing map[string]error
	for d := range keep {
		if cw.dirs[d] {
			continue
		}
		if err := cw.w.Add(d); err != nil {
			if missing == nil {
				missing = map[string]error{}
			}
			missing[d] = err
			continue
		}
		cw.dirs[d] = true
		cw.recheck = true
	}
	cw.noteMissing(missing)
}

// noteMissing records the directories follow could not watch: the first
// time one is not watched it warns, then every watchWarnEvery while one is
// not, and says when all are watched again.
func (cw *configWatch) noteMissing(missing map[string]error) {
	was := len(cw.missing) > 0
	cw.missing = missing
	if len(missing) == 0 {
		cw.retry = watchRetryMin
		if was {
			cw.p.log.Info("config watch resumed: every directory it needs is watched again", zap.String("file", cw.p.src.name()))
		}
		return
	}
	now := time.Now()
	if was && now.Sub(cw.warned) < watchWarnEvery {
		return
	}
	cw.warned = now
	dirs := make([]string, 0, len(missing))
	for d := range missing {
		dirs = append(dirs, d)
	}
	slices.Sort(dirs)
	for _, d := range dirs {
		cw.p.log.Warn("config watch: cannot watch a directory (deleted or not created yet?); changes to the config or the files it reads there go unnoticed until it exists: polling for it", zap.String("dir", d), zap.Error(missing[d]))
	}
}

// reload applies the config read from the file, or logs why it cannot,
// and reports whether it applied it. Applied, the files it reads become
// the ones watched, and loaded what the config and they held.
func (p *process) reload(data []byte, err error) bool {
	if err != nil {
		p.gw.NoteReload(p.src.name(), err)
		p.log.Error("config reload failed; keeping the running config", zap.Error(err))
		return false
	}
	f, err := config.Parse(data, os.LookupEnv)
	if err == nil && f.Blank() {
		// Mid-write (an editor or a tool that truncates, then writes) or a
		// mistake: applied, it would stop every listener until the next
		// change.
		err = errBlank
	}
	var files, changed []string
	var state string
	if err == nil {
		// What the new config reads, taken before applying it: a file
		// changed while it is applied then differs from loaded and is
		// read again. Taken after, such a change would look applied.
		files = f.FilesRead()
		state = contentState(data, files)
		changed = startOnlyChanges(p.first, f)
		keepStartOnly(p.first, f)
		err = p.gw.Apply(f)
	}
	p.gw.NoteReload(p.src.name(), err)
	if err != nil {
		p.log.Error("config reload failed; keeping the running config", zap.String("file", p.src.name()), zap.String("errors", err.Error()))
		return false
	}
	p.files, p.loaded = files, state
	p.log.Info("config reloaded", zap.String("file", p.src.name()))
	for _, field := range changed {
		p.log.Warn("config reloaded, but this setting is read only at start: restart the gateway to apply it", zap.String("field", field))
	}
	return true
}

// startOnly are the settings the process reads only at start (the side
// servers, logging, GOMAXPROCS) or from the config it started with (the
// drain deadlines), each as the process reads it from a file, with the
// environment variable that overrides it, if any.
//
// keep sets a setting of dst to src's (keepStartOnly).
var startOnly = []struct {
	field, env string
	get        func(*config.Settings) any
	keep       func(dst, src *config.Settings)
}{
	{
		field: "config.adminAddr", env: "ADMIN_ADDR",
		get:  func(s *config.Settings) any { return addrOr(s.AdminAddr, defaultAdminAddr) },
		keep: func(dst, src *config.Settings) { dst.AdminAddr = src.AdminAddr },
	},
	{
		field: "config.statsAddr", env: "STATS_ADDR",
		get:  func(s *config.Settings) any { return addrOr(s.StatsAddr, defaultStatsAddr) },
		keep: func(dst, src *config.Settings) { dst.StatsAddr = src.StatsAddr },
	},
	{
		field: "config.readinessAddr", env: "READINESS_ADDR",
		get:  func(s *config.Settings) any { return addrOr(s.ReadinessAddr, defaultReadinessAddr) },
		keep: func(dst, src *config.Settings) { dst.ReadinessAddr = src.ReadinessAddr },
	},
	{
		field: "config.logging",
		get:   func(s *config.Settings) any { return logSettingsOf(&config.File{Config: s}) },
		keep:  func(dst, src *config.Settings) { dst.Logging = src.Logging },
	},
	{
		field: "config.workerThreads", env: "WORKER_THREADS",
		get:  func(s *config.Settings) any { return s.WorkerThreads },
		keep: func(dst, src *config.Settings) { dst.WorkerThreads = src.WorkerThreads },
	},
	{
		field: "config.connectionTerminationDeadline", env: "CONNECTION_TERMINATION_DEADLINE",
		get:  func(s *config.Settings) any { return s.ConnectionTerminationDeadline },
		keep: func(dst, src *config.Settings) { dst.ConnectionTerminationDeadline = src.ConnectionTerminationDeadline },
	},
	{
		field: "config.connectionMinTerminationDeadline", env: "CONNECTION_MIN_TERMINATION_DEADLINE",
		get: func(s *config.Settings) any { return s.ConnectionMinTerminationDeadline },
		keep: func(dst, src *config.Settings) {
			dst.ConnectionMinTerminationDeadline = src.ConnectionMinTerminationDeadline
		},
	},
}

// keepStartOnly gives next, a config about to be applied by a reload, the
// start-only settings (startOnly) of first, the config the process started
// with and still runs them from: the snapshot, and /config_dump with it,
// holds the values in effect, not ones waiting for a restart (which
// startOnlyChanges warns of). The gateway reads none of them from the
// snapshot.
func keepStartOnly(first, next *config.File) {
	if next.Config == nil {
		if first == nil || first.Config == nil {
			return
		}
		next.Config = &config.Settings{}
	}
	src := settingsOf(first)
	for _, s := range startOnly {
		s.keep(next.Config, src)
	}
}

// settingsOf is f's config section, empty when it has none.
func settingsOf(f *config.File) *config.Settings {
	if f == nil || f.Config == nil {
		return &config.Settings{}
	}
	return f.Config
}

// addrOr is a side server's address from the file, or def.
func addrOr(v *string, def string) string {
	if v != nil && *v != "" {
		return *v
	}
	return def
}

// startOnlyChanges returns the start-only settings (startOnly) that next
// sets otherwise than first, the config the process started with: a reload
// applies the rest, and these wait for a restart. One its environment
// variable overrides is left out: a restart would not apply it either.
func startOnlyChanges(first, next *config.File) []string {
	a, b := settingsOf(first), settingsOf(next)
	var changed []string
	for _, s := range startOnly {
		if s.env != "" && os.Getenv(s.env) != "" {
			continue
		}
		if !reflect.DeepEqual(s.get(a), s.get(b)) {
			changed = append(changed, s.field)
		}
	}
	return changed
}

// errBlank refuses a config that holds nothing (config.File.Blank), at
// start and on reload.
var errBlank = errors.New("the config holds nothing (being written?): an empty or null document, or `binds:` with no value, would run no listener; write `binds: []` to run none")

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

// Command gateway runs the gateway data plane on a standalone config file.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"

	"go.opentelemetry.io/otel"
	"go.uber.org/zap"

	"github.com/relaygate/gateway/config"
	"github.com/relaygate/gateway/server"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

type options struct {
	file         string
	inline       string
	validateOnly bool
	version      bool
	transport    string
}

// usageLine is the command's synopsis, as the README has it.
const usageLine = "gateway [-f FILE | -c CONFIG] [--validate-only] [--version] [--transport std|netpoll]"

// flagGroups are the flags in the order usage lists them, each with its
// aliases on one line and the name of its argument.
var flagGroups = []struct {
	names []string
	arg   string
}{
	{[]string{"f", "file"}, "FILE"},
	{[]string{"c", "config"}, "CONFIG"},
	{[]string{"validate-only"}, ""},
	{[]string{"version"}, ""},
	{[]string{"transport"}, "std|netpoll"},
}

// errPrinted is a command line error that parseFlags printed already, with
// the usage.
var errPrinted = errors.New("command line error printed")

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("gateway", flag.ContinueOnError)
	// Left to the flag package, a parse error would be printed, then the
	// usage, then the error again by run: parseFlags prints each once.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	const fileUsage = "read the config from FILE (YAML or JSON, in UTF-8); - reads standard input"
	const inlineUsage = "the config itself, inline"
	fs.StringVar(&o.file, "f", "", fileUsage)
	fs.StringVar(&o.file, "file", "", fileUsage)
	fs.StringVar(&o.inline, "c", "", inlineUsage)
	fs.StringVar(&o.inline, "config", "", inlineUsage)
	fs.BoolVar(&o.validateOnly, "validate-only", false, "validate the config, print the result and exit")
	fs.BoolVar(&o.version, "version", false, "print the version and exit")
	fs.StringVar(&o.transport, "transport", string(server.TransportStd), "how connections are accepted: std or netpoll")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printUsage(fs, stderr)
			return o, err
		}
		fmt.Fprintf(stderr, "gateway: %v\n\n", err)
		printUsage(fs, stderr)
		return o, errPrinted
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	// An empty -f or -c is most likely an unset variable in a script: refuse
	// it rather than fall back to the embedded quickstart, which only runs
	// when neither flag is given.
	var emptyErr error
	fs.Visit(func(f *flag.Flag) {
		if emptyErr != nil || f.Value.String() != "" {
			return
		}
		switch f.Name {
		case "f", "file":
			emptyErr = fmt.Errorf("%s: empty file name (an unset variable?); give a path, - for standard input, or neither -f nor -c for the embedded quickstart", flagName(f.Name))
		case "c", "config":
			emptyErr = fmt.Errorf("%s: empty config (an unset variable?); give the config text, or neither -f nor -c for the embedded quickstart", flagName(f.Name))
		}
	})
	if emptyErr != nil {
		return o, emptyErr
	}
	if o.file != "" && o.inline != "" {
		return o, errors.New("-f and -c are mutually exclusive")
	}
	if o.transport != string(server.TransportNetpoll) && o.transport != string(server.TransportStd) {
		return o, fmt.Errorf("--transport must be std or netpoll, not %q", o.transport)
	}
	return o, nil
}

// printUsage writes the synopsis and each flag with its aliases
// (flagGroups): "-f, --file FILE".
func printUsage(fs *flag.FlagSet, w io.Writer) {
	fmt.Fprintf(w, "Usage: %s\n\nWith neither -f nor -c the embedded quickstart config runs.\n\n", usageLine)
	for _, g := range flagGroups {
		f := fs.Lookup(g.names[0])
		spelled := make([]string, len(g.names))
		for i, n := range g.names {
			spelled[i] = flagName(n)
		}
		line := "  " + strings.Join(spelled, ", ")
		if g.arg != "" {
			line += " " + g.arg
		}
		usage := f.Usage
		if g.arg != "" && f.DefValue != "" {
			usage += " (default " + f.DefValue + ")"
		}
		fmt.Fprintf(w, "%s\n    \t%s\n", line, usage)
	}
}

// flagName spells a flag as it is written on the command line.
func flagName(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	o, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if errors.Is(err, errPrinted) {
		return 2
	}
	if err != nil {
		fmt.Fprintln(stderr, "gateway:", err)
		return 2
	}
	if o.version {
		fmt.Fprintln(stdout, "gateway", version)
		return 0
	}
	src := newSource(o, stdin)
	data, err := src.read()
	if err != nil {
		fmt.Fprintln(stderr, "gateway:", err)
		return 1
	}
	f, err := config.Parse(data, os.LookupEnv)
	if err != nil {
		if o.validateOnly {
			// Every error at once: what only compiling finds, too, in the
			// parts of the file that decoded cleanly.
			if partial, _ := config.ParsePartial(data, os.LookupEnv); partial != nil {
				if many, ok := err.(config.Errors); ok {
					err = append(many, server.ValidatePartial(partial, err)...)
				}
			}
		}
		fmt.Fprintf(stderr, "%s: invalid configuration:\n%s\n", src.name(), err)
		return 1
	}
	if f.Blank() {
		// Refused at start as on reload: a file caught mid-write, or
		// emptied by mistake, would run nothing.
		fmt.Fprintf(stderr, "%s: invalid configuration:\n%s\n", src.name(), errBlank)
		return 1
	}
	if o.validateOnly {
		// The errors starting would refuse the file with, settings not
		// served yet among them: a file is valid when the gateway runs it.
		if err := server.Validate(f); err != nil {
			fmt.Fprintf(stderr, "%s: invalid configuration:\n%s\n", src.name(), err)
			return 1
		}
		addrs, err := resolveSideAddrs(f)
		if err != nil {
			fmt.Fprintf(stderr, "gateway: invalid environment:\n%s\n", err)
			return 1
		}
		// Addresses that cannot all be listened on: starting would fail.
		if errs := f.CheckSideAddrs(addrs.sources); len(errs) > 0 {
			fmt.Fprintf(stderr, "%s: invalid configuration:\n%s\n", src.name(), errs)
			return 1
		}
		fmt.Fprintf(stdout, "%s: configuration is valid\n", src.name())
		return 0
	}
	log, accessLog, flushAccessLog, err := newLoggers(f, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "gateway:", err)
		return 1
	}
	defer log.Sync() //nolint:errcheck
	// The OpenTelemetry SDK's errors (an unreachable collector) go to the
	// gateway's log, not to stderr through the standard log package.
	otel.SetErrorHandler(server.NewOTelErrors(log))
	// Runs after shutdown has drained the last requests.
	defer flushAccessLog()
	// config.workerThreads, or WORKER_THREADS (config.Parse applies it); a
	// percentage is of Go's default, which follows the container's CPU
	// limit.
	if f.Config != nil && f.Config.WorkerThreads != nil {
		if n := f.Config.WorkerThreads.Threads(runtime.GOMAXPROCS(0)); n > 0 {
			runtime.GOMAXPROCS(n)
		}
	}
	log.Info("starting", zap.String("version", version), zap.Int("worker_threads", runtime.GOMAXPROCS(0)))
	if o.transport == string(server.TransportNetpoll) {
		log.Warn("transport netpoll reads every connection into memory as fast as its client sends, with no bound and no backpressure (netpoll has none): a client that sends faster than the gateway forwards grows its memory; serve untrusted clients with the default transport, std")
	}
	files := f.FilesRead()
	p := &process{log: log, src: src, files: files, loaded: contentState(data, files), gw: server.New(server.Options{
		Logger:    log,
		AccessLog: accessLog,
		Transport: server.Transport(o.transport),
	})}
	// Registered before starting, so that a signal while the binds open
	// waits for them: SIGHUP reloads, as for nginx and HAProxy, where the
	// file watch cannot (a file system without inotify); unhandled, it
	// would end the process.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	if err := p.start(f); err != nil {
		log.Error("failed to start", zap.Error(err))
		return 1
	}
	stopWatch := p.watch()
	sig := <-sigs
	for sig == syscall.SIGHUP {
		p.requestReload()
		sig = <-sigs
	}
	stopWatch()
	log.Info("shutting down", zap.String("signal", sig.String()))
	p.shutdown(context.Background())
	return 0
}

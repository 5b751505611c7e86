// Command tcpfwd measures backend/tcpproxy's forwarding methods on loopback,
// each in a proxy process of its own (GOMAXPROCS=1) whose CPU time it reports
// (the CPU seconds per GiB are steadier than wall time on a shared machine):
//
//   - bulk: a source writes -size bytes through the proxy to a sink;
//   - echo: -size bytes each way through an echo server, both at once;
//   - pingpong: -conns connections exchange -msg byte requests for answers
//     of the same size for -duration;
//   - idle: -idle connections held open through the proxy, one exchange
//     each: the proxy's memory and descriptors per idle pipe.
//
// Every case runs -rounds rounds, every method once per round (interleaved);
// the table gives each method's median round and the range. "direct" is the
// client talking to the server without a proxy.
//
//	go run ./bench/tcpfwd                      # 1 GiB, 3 rounds
//	go run ./bench/tcpfwd -rounds 5 -methods direct,copy,splice,hybrid,netpoll,netpoll-copy
//
// docs/ARCHITECTURE.md, "TCP forwarding", has its numbers.
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/relaygate/gateway/backend/tcpproxy"
	"github.com/relaygate/gateway/backend/tcpproxy/tcpproxytest"
)

func main() {
	proxyKind := flag.String("proxy", "", "internal: run as the proxy of this kind (tcpproxytest.Kinds)")
	upstreams := flag.String("upstreams", "", "internal: the proxy's upstream addresses, comma-separated")
	methods := flag.String("methods", "direct,copy,splice,hybrid,netpoll", "kinds to measure (tcpproxytest.Kinds names, and direct)")
	size := flag.Int64("size", 1<<30, "bytes per bulk and echo run")
	rounds := flag.Int("rounds", 3, "rounds per case")
	conns := flag.Int("conns", 50, "ping-pong connections")
	msg := flag.Int("msg", 1024, "ping-pong message size")
	duration := flag.Duration("duration", 3*time.Second, "ping-pong run length")
	idle := flag.Int("idle", 2000, "idle pipes for the memory case (0: skip)")
	cases := flag.String("cases", "bulk,echo,pingpong,idle", "cases to run")
	flag.Parse()
	if *proxyKind != "" {
		if err := serveProxy(*proxyKind, strings.Split(*upstreams, ",")); err != nil {
			fmt.Fprintln(os.Stderr, "tcpfwd proxy:", err)
			os.Exit(1)
		}
		return
	}
	b := &bench{size: *size, rounds: *rounds, conns: *conns, msg: *msg, duration: *duration, idle: *idle}
	if err := b.run(strings.Split(*methods, ","), strings.Split(*cases, ",")); err != nil {
		fmt.Fprintln(os.Stderr, "tcpfwd:", err)
		os.Exit(1)
	}
}

// serveProxy is the proxy process: one listener per upstream, its
// addresses on stdout, and on every line read from stdin its CPU time (ns),
// peak RSS (KiB), current RSS (KiB) and open descriptors (after garbage
// collection if the line is "gc").
func serveProxy(kind string, upstreams []string) error {
	k, ok := tcpproxytest.KindByName(kind)
	if !ok {
		return fmt.Errorf("no kind %q", kind)
	}
	var addrs []string
	for _, up := range upstreams {
		p, err := tcpproxytest.Start(k, up, tcpproxy.Options{Idle: 5 * time.Minute}, tcpproxytest.StartOptions{})
		if err != nil {
			return err
		}
		go func() {
			for range p.Results {
			}
		}()
		addrs = append(addrs, p.Addr)
	}
	fmt.Println(strings.Join(addrs, ","))
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		if sc.Text() == "gc" {
			// Two collections empty the sync.Pools, Go's pool of splice
			// pipes among them (their descriptors close with them).
			runtime.GC()
			runtime.GC()
		}
		rss, fds := currentRSS(), openFDs()
		fmt.Printf("%d %d %d %d\n", tcpproxytest.CPU().Nanoseconds(), tcpproxytest.MaxRSS(), rss, fds)
	}
	return nil
}

// currentRSS reads VmRSS (KiB) from /proc/self/status.
func currentRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return n
		}
	}
	return 0
}

func openFDs() int {
	es, _ := os.ReadDir("/proc/self/fd")
	return len(es)
}

// proxyProc is a running proxy process.
type proxyProc struct {
	cmd   *exec.Cmd
	in    io.WriteCloser
	out   *bufio.Reader
	addrs []string
}

// sample is what the proxy process reports about itself.
type sample struct {
	cpu         time.Duration
	maxRSS, rss int64
	fds         int
}

func startProxy(kind string, upstreams []string) (*proxyProc, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, "-proxy", kind, "-upstreams", strings.Join(upstreams, ","))
	cmd.Env = append(os.Environ(), "GOMAXPROCS=1")
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	outp, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &proxyProc{cmd: cmd, in: in, out: bufio.NewReader(outp)}
	line, err := p.out.ReadString('\n')
	if err != nil {
		p.stop()
		return nil, fmt.Errorf("proxy %s: %v", kind, err)
	}
	p.addrs = strings.Split(strings.TrimSpace(line), ",")
	return p, nil
}

func (p *proxyProc) sample() (sample, error) { return p.ask("") }

// ask asks the proxy for a sample; "gc" collects garbage first.
func (p *proxyProc) ask(what string) (sample, error) {
	if p == nil {
		return sample{}, nil
	}
	if _, err := io.WriteString(p.in, what+"\n"); err != nil {
		return sample{}, err
	}
	line, err := p.out.ReadString('\n')
	if err != nil {
		return sample{}, err
	}
	var cpu int64
	var s sample
	if _, err := fmt.Sscan(line, &cpu, &s.maxRSS, &s.rss, &s.fds); err != nil {
		return sample{}, err
	}
	s.cpu = time.Duration(cpu)
	return s, nil
}

func (p *proxyProc) stop() {
	if p == nil {
		return
	}
	p.in.Close()
	_ = p.cmd.Wait()
}

type bench struct {
	size     int64
	rounds   int
	conns    int
	msg      int
	duration time.Duration
	idle     int

	sinkAddr, echoAddr string
	counts             chan tcpproxytest.SinkCount
	block              []byte
}

// target is one method under test: its proxy process, or none (direct).
type target struct {
	name   string
	proxy  *proxyProc
	maxRSS int64 // the proxy's peak RSS (KiB) so far
}

func (t *target) addr(b *bench, upstream int) string {
	if t.proxy == nil {
		return []string{b.sinkAddr, b.echoAddr}[upstream]
	}
	return t.proxy.addrs[upstream]
}

// measure runs f, returning the proxy's CPU and the wall time it took.
func (t *target) measure(f func() error) (cpu, wall time.Duration, err error) {
	s0, err := t.proxy.sample()
	if err != nil {
		return 0, 0, err
	}
	t0 := time.Now()
	if err := f(); err != nil {
		return 0, 0, err
	}
	wall = time.Since(t0)
	s1, err := t.proxy.sample()
	t.maxRSS = s1.maxRSS
	return s1.cpu - s0.cpu, wall, err
}

func (b *bench) run(methods, cases []string) error {
	b.counts = make(chan tcpproxytest.SinkCount, 1)
	sink, err := tcpproxytest.Serve(tcpproxytest.Sink(b.counts))
	if err != nil {
		return err
	}
	defer sink.Close()
	echo, err := tcpproxytest.Serve(tcpproxytest.Echo)
	if err != nil {
		return err
	}
	defer echo.Close()
	b.sinkAddr, b.echoAddr = sink.Addr, echo.Addr
	b.block = make([]byte, 1<<20)
	for i := range b.block {
		b.block[i] = byte(i * 7)
	}

	var targets []*target
	defer func() {
		for _, t := range targets {
			t.proxy.stop()
		}
	}()
	for _, m := range methods {
		t := &target{name: m}
		if m != "direct" {
			if t.proxy, err = startProxy(m, []string{sink.Addr, echo.Addr}); err != nil {
				return err
			}
		}
		targets = append(targets, t)
	}
	fmt.Printf("# tcpfwd %s, GOMAXPROCS=1 proxy, %d CPUs, %s, load %s\n\n", time.Now().Format("2006-01-02"), runtime.NumCPU(), runtime.Version(), loadAvg())
	for _, c := range cases {
		var err error
		switch c {
		case "bulk":
			err = b.bulkCase(targets)
		case "echo":
			err = b.echoCase(targets)
		case "pingpong":
			err = b.pingPongCase(targets)
		case "idle":
			err = b.idleCase(targets)
		default:
			err = fmt.Errorf("no case %q", c)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", c, err)
		}
	}
	return nil
}

func loadAvg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// runs is a method's measurements over the rounds.
type runs struct {
	wall, cpu []time.Duration
	extra     map[string][]float64
}

func (r *runs) add(wall, cpu time.Duration) {
	r.wall = append(r.wall, wall)
	r.cpu = append(r.cpu, cpu)
}

func median[T int64 | float64 | time.Duration](v []T) (med, lo, hi T) {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2], s[0], s[len(s)-1]
}

func gib(n int64) float64 { return float64(n) / (1 << 30) }

// rounds runs f for every target, round by round.
func (b *bench) roundsOf(targets []*target, f func(t *target) (wall, cpu time.Duration, extra map[string]float64, err error)) (map[string]*runs, error) {
	res := map[string]*runs{}
	for _, t := range targets {
		res[t.name] = &runs{extra: map[string][]float64{}}
	}
	for range b.rounds {
		for _, t := range targets {
			wall, cpu, extra, err := f(t)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", t.name, err)
			}
			r := res[t.name]
			r.add(wall, cpu)
			for k, v := range extra {
				r.extra[k] = append(r.extra[k], v)
			}
		}
	}
	return res, nil
}

func (b *bench) bulkCase(targets []*target) error {
	res, err := b.roundsOf(targets, func(t *target) (time.Duration, time.Duration, map[string]float64, error) {
		c, err := net.Dial("tcp", t.addr(b, 0))
		if err != nil {
			return 0, 0, nil, err
		}
		defer c.Close()
		cpu, wall, err := t.measure(func() error {
			if err := tcpproxytest.Source(c, b.block, b.size); err != nil {
				return err
			}
			_ = c.(*net.TCPConn).CloseWrite()
			got := <-b.counts
			if got.Bytes != b.size || got.Err != nil {
				return fmt.Errorf("sink read %d bytes, %v", got.Bytes, got.Err)
			}
			return nil
		})
		return wall, cpu, nil, err
	})
	if err != nil {
		return err
	}
	b.throughputTable(fmt.Sprintf("bulk: %.2f GiB client → proxy → sink", gib(b.size)), targets, res, b.size)
	return nil
}

func (b *bench) echoCase(targets []*target) error {
	res, err := b.roundsOf(targets, func(t *target) (time.Duration, time.Duration, map[string]float64, error) {
		c, err := net.Dial("tcp", t.addr(b, 1))
		if err != nil {
			return 0, 0, nil, err
		}
		defer c.Close()
		cpu, wall, err := t.measure(func() error {
			werr := make(chan error, 1)
			go func() {
				err := tcpproxytest.Source(c, b.block, b.size)
				_ = c.(*net.TCPConn).CloseWrite()
				werr <- err
			}()
			n, err := tcpproxytest.Drain(c)
			if err == nil && n != b.size {
				err = fmt.Errorf("read back %d bytes", n)
			}
			return errors.Join(err, <-werr)
		})
		return wall, cpu, nil, err
	})
	if err != nil {
		return err
	}
	b.throughputTable(fmt.Sprintf("echo: %.2f GiB each way through an echo server (2× forwarded)", gib(b.size)), targets, res, 2*b.size)
	return nil
}

func (b *bench) throughputTable(title string, targets []*target, res map[string]*runs, forwarded int64) {
	fmt.Printf("## %s (%d rounds; median [min–max])\n\n", title, b.rounds)
	fmt.Println("| method | wall s | GiB/s | proxy CPU s per GiB forwarded | proxy peak RSS MiB |")
	fmt.Println("|---|---|---|---|---|")
	for _, t := range targets {
		r := res[t.name]
		w, wlo, whi := median(r.wall)
		rate := func(d time.Duration) float64 { return gib(forwarded) / d.Seconds() }
		cpuCol, rssCol := "—", "—"
		if t.proxy != nil {
			c, clo, chi := median(r.cpu)
			per := func(d time.Duration) float64 { return d.Seconds() / gib(forwarded) }
			cpuCol = fmt.Sprintf("%.3f [%.3f–%.3f]", per(c), per(clo), per(chi))
			rssCol = fmt.Sprintf("%.0f", float64(t.maxRSS)/1024)
		}
		fmt.Printf("| %s | %.2f [%.2f–%.2f] | %.2f | %s | %s |\n", t.name, w.Seconds(), wlo.Seconds(), whi.Seconds(), rate(w), cpuCol, rssCol)
	}
	fmt.Println()
}

func (b *bench) pingPongCase(targets []*target) error {
	res, err := b.roundsOf(targets, func(t *target) (time.Duration, time.Duration, map[string]float64, error) {
		cs := make([]net.Conn, b.conns)
		for i := range cs {
			c, err := net.Dial("tcp", t.addr(b, 1))
			if err != nil {
				return 0, 0, nil, err
			}
			defer c.Close()
			cs[i] = c
		}
		lat := make([][]time.Duration, len(cs))
		var exchanges int64
		cpu, wall, err := t.measure(func() error {
			stop := time.Now().Add(b.duration)
			var wg sync.WaitGroup
			errs := make([]error, len(cs))
			for i, c := range cs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					req, resp := make([]byte, b.msg), make([]byte, b.msg)
					l := make([]time.Duration, 0, 1<<14)
					for time.Now().Before(stop) {
						t0 := time.Now()
						if _, err := c.Write(req); err != nil {
							errs[i] = err
							return
						}
						if _, err := io.ReadFull(c, resp); err != nil {
							errs[i] = err
							return
						}
						l = append(l, time.Since(t0))
					}
					lat[i] = l
				}()
			}
			wg.Wait()
			return errors.Join(errs...)
		})
		if err != nil {
			return 0, 0, nil, err
		}
		all := slices.Concat(lat...)
		slices.Sort(all)
		exchanges = int64(len(all))
		if exchanges == 0 {
			return 0, 0, nil, errors.New("no exchange")
		}
		return wall, cpu, map[string]float64{
			"rate": float64(exchanges) / wall.Seconds(),
			"p50":  float64(all[len(all)/2].Microseconds()),
			"p99":  float64(all[len(all)*99/100].Microseconds()),
			"cpu":  float64(cpu.Nanoseconds()) / float64(exchanges) / 1e3,
		}, nil
	})
	if err != nil {
		return err
	}
	fmt.Printf("## ping-pong: %d connections, %d B request → %d B answer (echo), %v runs (%d rounds; median [min–max])\n\n", b.conns, b.msg, b.msg, b.duration, b.rounds)
	fmt.Println("| method | exchanges/s | p50 µs | p99 µs | proxy CPU µs per exchange |")
	fmt.Println("|---|---|---|---|---|")
	for _, t := range targets {
		r := res[t.name]
		col := func(k, f string) string {
			m, lo, hi := median(r.extra[k])
			return fmt.Sprintf(f+" ["+f+"–"+f+"]", m, lo, hi)
		}
		cpuCol := "—"
		if t.proxy != nil {
			cpuCol = col("cpu", "%.2f")
		}
		fmt.Printf("| %s | %s | %s | %s | %s |\n", t.name, col("rate", "%.0f"), col("p50", "%.0f"), col("p99", "%.0f"), cpuCol)
	}
	fmt.Println()
	return nil
}

// idleCase opens b.idle pipes through a new proxy process of each method
// (so that memory freed by the other cases is not reused), one 64 KiB
// exchange on each (so that buffers are written), and reports the proxy's
// resident memory and descriptors per pipe two seconds later. A splice pipe's kernel pipes
// (up to 1 MiB each, pages taken while bytes pass) are not in its RSS.
func (b *bench) idleCase(targets []*target) error {
	if b.idle <= 0 {
		return nil
	}
	const exchange = 64 << 10
	fmt.Printf("## idle: %d pipes open after one %d KiB exchange each (a new proxy process per method)\n\n", b.idle, exchange>>10)
	fmt.Println("| method | RSS KiB per pipe | descriptors per pipe |")
	fmt.Println("|---|---|---|")
	for _, t := range targets {
		if t.proxy == nil {
			continue
		}
		p, err := startProxy(t.name, []string{b.echoAddr})
		if err != nil {
			return err
		}
		s0, err := p.ask("gc")
		if err != nil {
			p.stop()
			return err
		}
		cs := make([]net.Conn, 0, b.idle)
		closeAll := func() {
			for _, c := range cs {
				c.Close()
			}
			p.stop()
		}
		req, resp := make([]byte, exchange), make([]byte, exchange)
		for range b.idle {
			c, err := net.Dial("tcp", p.addrs[0])
			if err != nil {
				closeAll()
				return err
			}
			cs = append(cs, c)
			_, err = c.Write(req)
			if err == nil {
				_, err = io.ReadFull(c, resp)
			}
			if err != nil {
				closeAll()
				return err
			}
		}
		// Let spans that were under way end (Hybrid's wait is a second),
		// and Go's pool of splice pipes drop what they returned.
		time.Sleep(2 * time.Second)
		s1, err := p.ask("gc")
		closeAll()
		if err != nil {
			return err
		}
		fmt.Printf("| %s | %.1f | %.1f |\n", t.name, float64(s1.rss-s0.rss)/float64(b.idle), float64(s1.fds-s0.fds)/float64(b.idle))
	}
	fmt.Println()
	return nil
}

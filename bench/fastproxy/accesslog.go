package main

import (
	"bufio"
	"net/netip"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
)

// Buffering as nginx's `access_log ... buffer=64k flush=1s`, which
// bench/nginx.conf.tmpl gives nginx: lines are written when 64 KiB have
// gathered, or a second after the last write at the latest.
const (
	accessLogBufferSize    = 64 << 10
	accessLogFlushInterval = time.Second
)

// accessLog writes one line per request in nginx's default "combined"
// format, through a buffer, so that the reference proxy does the same
// logging work as the proxies it is measured beside.
type accessLog struct {
	file *os.File

	mu       sync.Mutex
	w        *bufio.Writer
	line     []byte // scratch for one line, reused under mu
	stamp    []byte // "[02/Jan/2006:15:04:05 -0700]" of stampSec
	stampSec int64

	stop chan struct{}
	done chan struct{}
}

// openAccessLog appends to the file at path and starts the flush timer;
// Close stops it.
func openAccessLog(path string) (*accessLog, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	l := &accessLog{
		file: f,
		w:    bufio.NewWriterSize(f, accessLogBufferSize),
		stop: make(chan struct{}),
		done: make(chan struct{}),
	}
	go l.flushEvery(accessLogFlushInterval)
	return l, nil
}

func (l *accessLog) flushEvery(d time.Duration) {
	defer close(l.done)
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			l.mu.Lock()
			_ = l.w.Flush()
			l.mu.Unlock()
		case <-l.stop:
			return
		}
	}
}

// Close stops the flush timer, writes what the buffer holds and closes the
// file.
func (l *accessLog) Close() error {
	close(l.stop)
	<-l.done
	l.mu.Lock()
	defer l.mu.Unlock()
	err := l.w.Flush()
	if cerr := l.file.Close(); err == nil {
		err = cerr
	}
	return err
}

// write logs the request of ctx with its response, as nginx's combined
// format does: `$remote_addr - $remote_user [$time_local] "$request"
// $status $body_bytes_sent "$http_referer" "$http_user_agent"`.
func (l *accessLog) write(ctx *fasthttp.RequestCtx, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.line[:0]
	if ip, ok := netip.AddrFromSlice(ctx.RemoteIP()); ok {
		b = ip.Unmap().AppendTo(b)
	} else {
		b = append(b, '-')
	}
	b = append(b, " - - "...)
	b = append(b, l.timeLocal(now)...)
	b = append(b, " \""...)
	b = appendEscaped(b, ctx.Method())
	b = append(b, ' ')
	b = appendEscaped(b, ctx.RequestURI())
	b = append(b, ' ')
	b = appendEscaped(b, ctx.Request.Header.Protocol())
	b = append(b, "\" "...)
	b = strconv.AppendInt(b, int64(ctx.Response.StatusCode()), 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, int64(len(ctx.Response.Body())), 10)
	b = append(b, " \""...)
	b = appendOrDash(b, ctx.Referer())
	b = append(b, "\" \""...)
	b = appendOrDash(b, ctx.UserAgent())
	b = append(b, "\"\n"...)
	_, _ = l.w.Write(b)
	l.line = b
}

// timeLocal is $time_local in brackets, formatted once per second as
// nginx caches its own.
func (l *accessLog) timeLocal(now time.Time) []byte {
	if sec := now.Unix(); sec != l.stampSec || l.stamp == nil {
		l.stamp = now.AppendFormat(append(l.stamp[:0], '['), "02/Jan/2006:15:04:05 -0700")
		l.stamp = append(l.stamp, ']')
		l.stampSec = sec
	}
	return l.stamp
}

func appendOrDash(b, v []byte) []byte {
	if len(v) == 0 {
		return append(b, '-')
	}
	return appendEscaped(b, v)
}

// appendEscaped appends v with control bytes, bytes above 0x7e, '"' and
// '\' written as \xHH, as nginx escapes variables in its log lines.
func appendEscaped(b, v []byte) []byte {
	const hex = "0123456789ABCDEF"
	for _, c := range v {
		if c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			b = append(b, '\\', 'x', hex[c>>4], hex[c&0xf])
			continue
		}
		b = append(b, c)
	}
	return b
}

package provider

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/relaygate/gateway/config"
)

// maxKeyFile bounds a key file (an inline key has at most 2048
// characters).
const maxKeyFile = 16 << 10

// keyRecheck is how often a key file's modification time is looked at:
// a rotated key is picked up within it, and a request pays no stat.
const keyRecheck = time.Second

// keyCredentials put a static key where the provider takes it.
type keyCredentials struct {
	key *secretKey
	// header is the header the key goes in, normalised as fasthttp keeps
	// names; cookie, when set, the cookie instead.
	header []byte
	cookie []byte
	// name is header's name; removeHeader is set when it is not among the
	// client credential headers already removed.
	name         string
	removeHeader bool
}

// defaultKeyLocation is the header, and the prefix before the key, the
// provider's API takes a key in.
func (p *Provider) defaultKeyLocation() (header, prefix string) {
	switch p.kind {
	case kindAzure:
		return "Api-Key", ""
	case kindAnthropic:
		return "X-Api-Key", ""
	case kindGemini:
		return "X-Goog-Api-Key", ""
	}
	return "Authorization", "Bearer "
}

// compileKey builds key credentials; an inline key is checked now, a key
// file is read on first use.
func (p *Provider) compileKey(k *config.BackendAuthKey) (credentials, error) {
	header, prefix := p.defaultKeyLocation()
	c := &keyCredentials{}
	if loc := k.Location; loc != nil {
		switch {
		case loc.Header != nil:
			header, prefix = loc.Header.Name, ""
			if loc.Header.Prefix != nil {
				prefix = *loc.Header.Prefix
			}
		case loc.Cookie != nil:
			c.cookie, prefix = []byte(loc.Cookie.Name), ""
		case loc.QueryParameter != nil:
			return nil, fieldError(authPath+".key.location.queryParameter", "a key in a query parameter is not supported for LLM providers yet (use a header)")
		}
	}
	// In the form the request's header keeps names, so that apply sets it
	// without normalising it on every request.
	c.header = fasthttp.AppendNormalizedHeaderKey(nil, header)
	c.name, c.removeHeader = header, true
	for _, name := range clientCredentialHeaders {
		if strings.EqualFold(name, header) {
			c.removeHeader = false
		}
	}
	c.key = &secretKey{prefix: prefix, file: k.Value.File}
	if k.Value.IsFile() {
		return c, nil
	}
	value, err := headerValue(prefix, []byte(k.Value.Inline))
	if err != nil {
		path := authPath + ".key"
		if !k.Short {
			path += ".value"
		}
		return nil, fieldError(path, err.Error())
	}
	c.key.cur.Store(&keyValue{header: value})
	return c, nil
}

func (c *keyCredentials) apply(_ context.Context, req *fasthttp.Request) error {
	value, err := c.key.value()
	if err != nil {
		return err
	}
	h := &req.Header
	removeClientCredentials(h)
	if c.cookie != nil {
		h.SetCookieBytesKV(c.cookie, value)
		return nil
	}
	if c.removeHeader {
		h.Del(c.name) // every value the client sent there
	}
	h.SetCanonical(c.header, value)
	return nil
}

// secretKey is a key given inline or read from a file: read on first use,
// and again when the file's modification time or size changes (checked at
// most once per keyRecheck).
type secretKey struct {
	prefix string
	file   string

	cur       atomic.Pointer[keyValue]
	checkedAt atomic.Int64 // UnixNano of the last look at the file
	mu        sync.Mutex   // one reader of the file at a time
}

// keyValue is a key as read: the header value (prefix and key), or why it
// could not be read.
type keyValue struct {
	header []byte
	err    error
	mtime  time.Time
	size   int64
}

// value is the header value.
func (k *secretKey) value() ([]byte, error) {
	v := k.cur.Load()
	if k.file == "" {
		return v.header, nil
	}
	now := time.Now()
	if v != nil && now.UnixNano()-k.checkedAt.Load() < int64(keyRecheck) {
		return v.header, v.err
	}
	return k.reload(now)
}

// reload looks at the file again and reads it when it changed. While one
// goroutine does, the others go on with the key they have.
func (k *secretKey) reload(now time.Time) ([]byte, error) {
	v := k.cur.Load()
	if v == nil {
		k.mu.Lock() // the first read: wait for it
	} else if !k.mu.TryLock() {
		return v.header, v.err
	}
	defer k.mu.Unlock()
	if v = k.cur.Load(); v != nil && now.UnixNano()-k.checkedAt.Load() < int64(keyRecheck) {
		return v.header, v.err
	}
	next := k.read(v)
	k.cur.Store(next)
	k.checkedAt.Store(now.UnixNano())
	return next.header, next.err
}

// read reads the file unless it is unchanged since prev; a failed read
// keeps a key read before (a rotation that is not finished yet).
func (k *secretKey) read(prev *keyValue) *keyValue {
	failed := func(err error) *keyValue {
		if prev != nil && prev.err == nil {
			return prev
		}
		return &keyValue{err: err}
	}
	info, err := os.Stat(k.file)
	if err != nil {
		return failed(keyFileError(err))
	}
	if prev != nil && prev.err == nil && info.ModTime().Equal(prev.mtime) && info.Size() == prev.size {
		return prev
	}
	raw, err := readBounded(k.file, maxKeyFile)
	if err != nil {
		return failed(keyFileError(err))
	}
	value, err := headerValue(k.prefix, raw)
	if err != nil {
		return failed(errors.New("backend auth key file " + k.file + ": " + err.Error()))
	}
	return &keyValue{header: value, mtime: info.ModTime(), size: info.Size()}
}

func keyFileError(err error) error { return errors.New("backend auth key: " + err.Error()) }

// errTooLarge is a credential file over its bound.
var errTooLarge = errors.New("file too large")

// readBounded reads a whole file of at most limit bytes.
func readBounded(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, errors.New(path + ": " + errTooLarge.Error() + " (over " + strconv.FormatInt(limit, 10) + " bytes)")
	}
	return b, nil
}

// headerValue is prefix and the key (spaces around it trimmed) as a
// header value; a key that is empty or holds control characters (which
// would end the header) is refused.
func headerValue(prefix string, key []byte) ([]byte, error) {
	key = bytes.TrimSpace(key)
	if len(key) == 0 {
		return nil, errors.New("the key is empty")
	}
	for _, c := range key {
		if c < 0x20 && c != '\t' || c == 0x7f {
			return nil, errors.New("the key holds control characters")
		}
	}
	out := make([]byte, 0, len(prefix)+len(key))
	return append(append(out, prefix...), key...), nil
}

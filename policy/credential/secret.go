package credential

import (
	"bytes"
	"errors"
	"io"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/relaygate/gateway/config"
	"github.com/relaygate/gateway/config/decode"
)

// MaxSecretFile bounds a secret file (an inline secret has at most 2048
// characters).
const MaxSecretFile = 16 << 10

// secretRecheck is how often a secret file's modification time is looked
// at: a rotated secret is picked up within it, and a request pays no stat.
const secretRecheck = time.Second

// Secret is a credential the gateway sends to a backend (backendAuth key
// and credentials), as the value it goes in with its prefix ("Bearer
// ..."): given inline, or read from a file on first use and again when the
// file's modification time or size changes (looked at most once per
// second). A file that cannot be read keeps the value read before (a
// rotation under way); without one, Value reports why.
type Secret struct {
	prefix string
	file   string

	cur       atomic.Pointer[secretValue]
	checkedAt atomic.Int64 // UnixNano of the last look at the file
	mu        sync.Mutex   // one reader of the file at a time
}

// secretValue is a secret as read: the value (prefix and secret), or why it
// could not be read.
type secretValue struct {
	value []byte
	err   error
	mtime time.Time
	size  int64
}

// NewSecret compiles s with prefix; an inline secret is checked now (the
// error says what is wrong, never the secret), a file is read on first
// use.
func NewSecret(prefix string, s config.Secret) (*Secret, error) {
	k := &Secret{prefix: prefix, file: s.File}
	if s.IsFile() {
		return k, nil
	}
	v, err := HeaderValue(prefix, []byte(s.Inline))
	if err != nil {
		return nil, err
	}
	k.cur.Store(&secretValue{value: v})
	return k, nil
}

// Value is the value to send: the prefix and the secret.
func (k *Secret) Value() ([]byte, error) {
	v := k.cur.Load()
	if k.file == "" {
		return v.value, nil
	}
	now := time.Now()
	if v != nil && now.UnixNano()-k.checkedAt.Load() < int64(secretRecheck) {
		return v.value, v.err
	}
	return k.reload(now)
}

// Recheck makes the next Value look at the file again.
func (k *Secret) Recheck() { k.checkedAt.Store(0) }

// reload looks at the file again and reads it when it changed. While one
// goroutine does, the others go on with the value they have.
func (k *Secret) reload(now time.Time) ([]byte, error) {
	v := k.cur.Load()
	if v == nil {
		k.mu.Lock() // the first read: wait for it
	} else if !k.mu.TryLock() {
		return v.value, v.err
	}
	defer k.mu.Unlock()
	if v = k.cur.Load(); v != nil && now.UnixNano()-k.checkedAt.Load() < int64(secretRecheck) {
		return v.value, v.err
	}
	next := k.read(v)
	k.cur.Store(next)
	k.checkedAt.Store(now.UnixNano())
	return next.value, next.err
}

// read reads the file unless it is unchanged since prev; a failed read
// keeps a value read before.
func (k *Secret) read(prev *secretValue) *secretValue {
	failed := func(err error) *secretValue {
		if prev != nil && prev.err == nil {
			return prev
		}
		return &secretValue{err: err}
	}
	info, err := os.Stat(k.file)
	if err != nil {
		return failed(errors.New("backend auth key: " + config.FileError(err).Error()))
	}
	if prev != nil && prev.err == nil && info.ModTime().Equal(prev.mtime) && info.Size() == prev.size {
		return prev
	}
	raw, err := ReadBounded(k.file, MaxSecretFile)
	if err != nil {
		return failed(errors.New("backend auth key: " + err.Error()))
	}
	value, err := HeaderValue(k.prefix, raw)
	if err != nil {
		return failed(errors.New("backend auth key file " + k.file + ": " + err.Error()))
	}
	return &secretValue{value: value, mtime: info.ModTime(), size: info.Size()}
}

// ErrTooLarge is a credential file over its bound.
var ErrTooLarge = errors.New("file too large")

// ReadBounded reads a whole file of at most limit bytes.
func ReadBounded(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, config.FileError(err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, errors.New(path + ": " + ErrTooLarge.Error() + " (over " + strconv.FormatInt(limit, 10) + " bytes)")
	}
	return b, nil
}

// HeaderValue is prefix and the key (spaces around it trimmed) as a header
// value; a key that is empty or holds control characters (which would end
// the header) is refused.
func HeaderValue(prefix string, key []byte) ([]byte, error) {
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

// Fixed is a secret the gateway sends at a location: backendAuth's key and
// credentials.
type Fixed struct {
	At     Location
	Secret *Secret
}

// CompileCredentials compiles backendAuth's credentials, path being the
// backendAuth's field: an error names ".credentials[i].location" or
// ".credentials[i].key" below it.
func CompileCredentials(path string, cs []config.BackendAuthCredential) ([]Fixed, error) {
	var out []Fixed
	for i := range cs {
		p := path + ".credentials[" + strconv.Itoa(i) + "]"
		loc, err := NewLocation(&cs[i].Location)
		if err != nil {
			return nil, decode.Under(p+".location", err)
		}
		secret, err := NewSecret("", cs[i].Key)
		if err != nil {
			return nil, &decode.FieldError{Path: p + ".key", Msg: err.Error()}
		}
		out = append(out, Fixed{At: loc, Secret: secret})
	}
	return out, nil
}

// InsertAll puts each secret into req at its location, replacing every
// value there (Insert). It fails only when a secret cannot be read (its
// file gone or broken). scratch is a reusable buffer; the grown buffer is
// returned for reuse.
func InsertAll(req *fasthttp.Request, fs []Fixed, scratch []byte) ([]byte, error) {
	for i := range fs {
		v, err := fs[i].Secret.Value()
		if err != nil {
			return scratch, err
		}
		scratch = fs[i].At.Insert(req, v, scratch)
	}
	return scratch, nil
}

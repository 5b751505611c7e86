// Package apikey owns the apiKey policy: a request carries one of a list
// of keys. Keys are held only as SHA-256 digests (a key given as keyHash
// is never known at all), and a presented key is found by its digest, so
// no comparison depends on how much of a key an attacker guessed right.
package apikey

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/relaygate/gateway/config"
	"github.com/relaygate/gateway/policy"
	"github.com/relaygate/gateway/policy/credential"
)

// Mode says what happens to requests without a valid key.
type Mode uint8

// Modes.
const (
	Strict     Mode = iota // a valid key is required
	Optional               // no key passes; an invalid one is refused
	Permissive             // nothing is refused; only a valid key sets apiKey
)

// maxKeyFile bounds a key read from a file, maxKeysFile a file of keys.
const (
	maxKeyFile  = 64 << 10
	maxKeysFile = config.MaxAPIKeyFile
)

// APIKeyAuth is the compiled apiKey policy; immutable and safe for
// concurrent use.
//
// Refusals are 401 with `WWW-Authenticate: <scheme> realm="gateway"` (the
// scheme is the location's prefix, "Bearer" by default, else "APIKey") and
// a one-line text body ("authentication failure: no API key" or "...:
// invalid API key"); a key in Proxy-Authorization is refused with 407 and
// Proxy-Authenticate. An accepted key is removed from the request, as
// jwtAuth removes a token; backendAuth passthrough puts it back.
type APIKeyAuth struct {
	keys map[[sha256.Size]byte]map[string]any // digest -> metadata (never nil)
	mode Mode
	loc  credential.Location

	refusal credential.Refusal
	value   []byte // the challenge
}

var (
	bodyMissing = []byte("authentication failure: no API key\n")
	bodyInvalid = []byte("authentication failure: invalid API key\n")
)

// New compiles an apiKey policy; key files are read now. Errors are
// *policy.FieldError naming the field below apiKey.
func New(cfg *config.APIKeyAuth) (*APIKeyAuth, error) {
	if cfg == nil {
		return nil, &policy.FieldError{Msg: "no configuration"}
	}
	entries := cfg.Keys.List
	if cfg.Keys.File != "" {
		b, err := readFile(cfg.Keys.File, maxKeysFile)
		if err == nil {
			entries, err = config.ParseAPIKeyFile(b)
			if err != nil {
				err = fmt.Errorf("%s: %v", cfg.Keys.File, err)
			}
		}
		if err != nil {
			return nil, &policy.FieldError{Field: "keys.file", Msg: err.Error()}
		}
	}
	p := &APIKeyAuth{keys: make(map[[sha256.Size]byte]map[string]any, len(entries))}
	switch cfg.Mode {
	case "", config.AuthModeStrict:
	case config.AuthModeOptional:
		p.mode = Optional
	case config.AuthModePermissive:
		p.mode = Permissive
	default:
		return nil, &policy.FieldError{Field: "mode", Msg: "must be one of: strict, optional, permissive"}
	}
	l, err := credential.NewLocation(cfg.Location)
	if err != nil {
		return nil, policy.PrefixField("location", err)
	}
	p.loc = l
	p.refusal = l.Refusal()
	p.value = []byte(challengeScheme(cfg.Location) + ` realm="gateway"`)
	for i := range entries {
		e := &entries[i]
		field := "keys[" + strconv.Itoa(i) + "]"
		fail := func(below, msg string) error {
			if cfg.Keys.File != "" {
				return &policy.FieldError{Field: "keys.file", Msg: fmt.Sprintf("%s: entry %d%s: %s", cfg.Keys.File, i, below, msg)}
			}
			return &policy.FieldError{Field: field + below, Msg: msg}
		}
		digest, kerr := keyDigest(e)
		if kerr != nil {
			return nil, fail(kerr.field, kerr.msg)
		}
		if _, dup := p.keys[digest]; dup {
			return nil, fail("", "the same key as an earlier entry")
		}
		meta, _ := e.Metadata.(map[string]any)
		if meta == nil {
			meta = map[string]any{}
		}
		p.keys[digest] = meta
	}
	return p, nil
}

type keyError struct{ field, msg string }

// keyDigest is the SHA-256 of an entry's key, read from its file when it
// has one.
func keyDigest(e *config.APIKeyEntry) ([sha256.Size]byte, *keyError) {
	if e.KeyHash != "" {
		d, ok := e.KeyDigest()
		if !ok {
			return d, &keyError{".keyHash", "must be sha256:<64 hex digits>"}
		}
		return d, nil
	}
	if e.Key == nil {
		return [sha256.Size]byte{}, &keyError{"", "exactly one of key, keyHash is required"}
	}
	key := e.Key.Inline
	if e.Key.IsFile() {
		b, err := readKeyFile(e.Key.File)
		if err != nil {
			return [sha256.Size]byte{}, &keyError{".key.file", err.Error()}
		}
		key = b
	}
	if key == "" {
		return [sha256.Size]byte{}, &keyError{".key", "must not be empty"}
	}
	return sha256.Sum256([]byte(key)), nil
}

func readKeyFile(path string) (string, error) {
	b, err := readFile(path, maxKeyFile)
	// A key file ends with a newline more often than not.
	return strings.TrimRight(string(b), "\r\n"), err
}

// readFile reads at most limit bytes of a file; a larger file is an error.
func readFile(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read %q: %v", path, config.FileError(err))
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("cannot read %q: %v", path, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%q is larger than %d bytes", path, limit)
	}
	return b, nil
}

// challengeScheme is the auth scheme of the refusal's challenge.
func challengeScheme(loc *config.AuthLocation) string {
	if loc == nil {
		return "Bearer"
	}
	if h := loc.Header; h != nil && h.Prefix != nil {
		if s := strings.TrimSpace(*h.Prefix); s != "" && !strings.ContainsAny(s, " \t\"") {
			return s
		}
	}
	return "APIKey"
}

// OnRequest authenticates the request or answers it with a refusal.
func (p *APIKeyAuth) OnRequest(c *policy.Ctx) policy.Result {
	key := bytes.TrimSpace(p.loc.Extract(c))
	if len(key) == 0 {
		if p.mode == Strict {
			return p.refuse(c, bodyMissing)
		}
		return policy.Continue
	}
	meta, ok := p.keys[sha256.Sum256(key)]
	if !ok || p.loc.Repeated(c) {
		if p.mode == Permissive {
			return policy.Continue
		}
		return p.refuse(c, bodyInvalid)
	}
	c.APIKey = meta
	c.Token = append(c.Token[:0], key...)
	p.loc.Remove(c)
	return policy.Continue
}

func (p *APIKeyAuth) refuse(c *policy.Ctx, body []byte) policy.Result {
	return p.refusal.Write(c, p.value, body)
}

// Len is the number of keys.
func (p *APIKeyAuth) Len() int { return len(p.keys) }

var _ policy.Request = (*APIKeyAuth)(nil)

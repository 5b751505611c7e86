// Package basicauth owns the basicAuth policy: HTTP Basic authentication
// (RFC 7617) against an htpasswd user database, hashes checked by
// github.com/tg123/go-htpasswd. A verified credential is remembered, so a
// client that sends the same credential again (every request of a browser
// session) costs a SHA-256, not a bcrypt.
package basicauth

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"

	htpasswd "github.com/tg123/go-htpasswd"

	"github.com/relaygate/gateway/config"
	"github.com/relaygate/gateway/policy"
	"github.com/relaygate/gateway/policy/credential"
)

// DefaultRealm is the realm when the policy names none.
const DefaultRealm = "Restricted"

// maxUsers bounds the user database (a line each).
const maxUsers = 100000

// maxCredential bounds the credential read from a request: longer ones are
// refused without decoding.
const maxCredential = 4096

// BasicAuth is the compiled basicAuth policy; immutable but for its cache
// of verified credentials, and safe for concurrent use.
//
// Refusals are 401 with `WWW-Authenticate: Basic realm="<realm>"` and a
// one-line text body ("authentication failure: no credentials" or
// "...: invalid credentials"); credentials in Proxy-Authorization are
// refused with 407 and Proxy-Authenticate.
type BasicAuth struct {
	users    map[string]htpasswd.EncodedPasswd
	decoy    htpasswd.EncodedPasswd // checked for unknown users
	optional bool
	loc      credential.Location

	refusal credential.Refusal
	value   []byte // the challenge
	cache   verified
}

var (
	bodyMissing = []byte("authentication failure: no credentials\n")
	bodyInvalid = []byte("authentication failure: invalid credentials\n")
	basicPrefix = "Basic "
)

// New compiles a basicAuth policy; an htpasswd file is read now. Errors are
// *policy.FieldError naming the field below basicAuth.
func New(cfg *config.BasicAuth) (*BasicAuth, error) {
	if cfg == nil {
		return nil, &policy.FieldError{Msg: "no configuration"}
	}
	p := &BasicAuth{}
	switch cfg.Mode {
	case "", config.AuthModeStrict:
	case config.AuthModeOptional:
		p.optional = true
	default:
		return nil, &policy.FieldError{Field: "mode", Msg: "must be one of: strict, optional"}
	}
	loc := cfg.AuthorizationLocation
	if loc == nil {
		loc = &config.AuthLocation{Header: &config.HeaderLocation{Name: "Authorization", Prefix: &basicPrefix}}
	}
	l, err := credential.NewLocation(loc)
	if err != nil {
		return nil, policy.PrefixField("authorizationLocation", err)
	}
	p.loc = l
	p.refusal = l.Refusal()
	realm := DefaultRealm
	if cfg.Realm != nil {
		realm = *cfg.Realm
	}
	p.value = []byte(`Basic realm="` + realm + `", charset="UTF-8"`)

	text, field := cfg.Htpasswd.Inline, "htpasswd"
	if cfg.Htpasswd.IsFile() {
		field = "htpasswd.file"
		b, err := os.ReadFile(cfg.Htpasswd.File)
		if err != nil {
			return nil, &policy.FieldError{Field: field, Msg: fmt.Sprintf("cannot read %q: %v", cfg.Htpasswd.File, err)}
		}
		text = string(b)
	}
	users, err := Parse(text)
	if err != nil {
		return nil, &policy.FieldError{Field: field, Msg: err.Error()}
	}
	p.users = users
	for _, h := range users {
		p.decoy = h
		break
	}
	if _, err := rand.Read(p.cache.salt[:]); err != nil {
		return nil, err
	}
	return p, nil
}

// Parse reads an htpasswd database: one `user:hash` line each; blank lines
// and lines starting with # are skipped. A line without a supported hash
// (a raw password among them) is an error naming the line, never the hash.
func Parse(text string) (map[string]htpasswd.EncodedPasswd, error) {
	users := map[string]htpasswd.EncodedPasswd{}
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 0, 4096), 64<<10)
	line := 0
	for sc.Scan() {
		line++
		s := strings.TrimSpace(sc.Text())
		if s == "" || s[0] == '#' {
			continue
		}
		user, hash, ok := strings.Cut(s, ":")
		if !ok || user == "" {
			return nil, fmt.Errorf("line %d: expected user:hash", line)
		}
		if _, dup := users[user]; dup {
			return nil, fmt.Errorf("line %d: user %q is listed twice", line, user)
		}
		h, err := parseHash(hash)
		if err != nil {
			return nil, fmt.Errorf("line %d (user %q): %v", line, user, err)
		}
		users[user] = h
		if len(users) > maxUsers {
			return nil, fmt.Errorf("more than %d users", maxUsers)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("line %d: %v", line+1, err)
	}
	if len(users) == 0 {
		return nil, fmt.Errorf("no users")
	}
	return users, nil
}

// hashParsers are the accepted hash schemes; go-htpasswd's plain-text
// parser is left out, so a raw password is refused.
var hashParsers = []htpasswd.PasswdParser{htpasswd.AcceptBcrypt, htpasswd.AcceptMd5, htpasswd.AcceptCryptSha, htpasswd.AcceptSha}

func parseHash(hash string) (htpasswd.EncodedPasswd, error) {
	for _, parse := range hashParsers {
		h, err := parse(hash)
		if err != nil {
			// go-htpasswd's messages quote the hash: say which scheme only.
			return nil, fmt.Errorf("malformed %s hash", scheme(hash))
		}
		if h != nil {
			return h, nil
		}
	}
	return nil, fmt.Errorf("not a supported password hash (bcrypt, MD5 $apr1$ or $1$, SHA-256/512 crypt $5$ or $6$, SHA-1 {SHA}); raw passwords are refused")
}

func scheme(hash string) string {
	switch {
	case strings.HasPrefix(hash, "$2"):
		return "bcrypt"
	case strings.HasPrefix(hash, "$apr1$"), strings.HasPrefix(hash, "$1$"):
		return "MD5"
	case strings.HasPrefix(hash, "$5$"), strings.HasPrefix(hash, "$6$"):
		return "SHA crypt"
	}
	return "SHA-1"
}

// OnRequest authenticates the request or answers it with a refusal. The
// credentials stay in the request: Basic credentials are the upstream's to
// see as much as the gateway's (nginx and agentgateway forward them too).
func (p *BasicAuth) OnRequest(c *policy.Ctx) policy.Result {
	cred := p.loc.Extract(c)
	if len(cred) == 0 {
		if p.optional {
			return policy.Continue
		}
		return p.refuse(c, bodyMissing)
	}
	if len(cred) > maxCredential || p.loc.Repeated(c) {
		return p.refuse(c, bodyInvalid)
	}
	if user, ok := p.cache.lookup(cred); ok {
		c.BasicAuthUser = user
		return policy.Continue
	}
	user, ok := p.verify(cred)
	if !ok {
		return p.refuse(c, bodyInvalid)
	}
	c.BasicAuthUser = p.cache.store(cred, user)
	return policy.Continue
}

// verify decodes and checks a credential the cache did not know.
func (p *BasicAuth) verify(cred []byte) (string, bool) {
	var buf [maxCredential]byte
	n, err := base64.StdEncoding.Decode(buf[:], bytes.TrimSpace(cred))
	if err != nil {
		return "", false
	}
	user, pass, ok := bytes.Cut(buf[:n], []byte{':'})
	if !ok {
		return "", false
	}
	h, known := p.users[string(user)]
	if !known {
		// Take about as long as a known user would, so that response
		// times do not tell which users exist.
		p.decoy.MatchesPassword(string(pass))
		return "", false
	}
	if !h.MatchesPassword(string(pass)) {
		return "", false
	}
	return string(user), true
}

func (p *BasicAuth) refuse(c *policy.Ctx, body []byte) policy.Result {
	return p.refusal.Write(c, p.value, body)
}

// cacheSlots is how many verified credentials are remembered.
const cacheSlots = 4096

// verified remembers verified credentials: a direct-mapped table keyed by
// a salted SHA-256 of the credential as sent, so that a credential seen
// before is recognised without its hash scheme's cost (bcrypt takes tens of
// milliseconds by design) and without keeping the password. Entries are
// replaced, never changed, and read without locks.
type verified struct {
	salt  [16]byte
	slots [cacheSlots]atomic.Pointer[verifiedEntry]
}

type verifiedEntry struct {
	key  [sha256.Size]byte
	user string
}

func (v *verified) key(cred []byte) [sha256.Size]byte {
	if len(cred) <= 240 {
		// The usual credential: a buffer that is cheap to clear.
		var buf [256]byte
		n := copy(buf[:], v.salt[:])
		n += copy(buf[n:], cred)
		return sha256.Sum256(buf[:n])
	}
	var buf [len(verified{}.salt) + maxCredential]byte
	n := copy(buf[:], v.salt[:])
	n += copy(buf[n:], cred)
	return sha256.Sum256(buf[:n])
}

func (v *verified) lookup(cred []byte) (string, bool) {
	k := v.key(cred)
	e := v.slots[binary.LittleEndian.Uint64(k[:8])%cacheSlots].Load()
	if e == nil || e.key != k {
		return "", false
	}
	return e.user, true
}

func (v *verified) store(cred []byte, user string) string {
	k := v.key(cred)
	v.slots[binary.LittleEndian.Uint64(k[:8])%cacheSlots].Store(&verifiedEntry{key: k, user: user})
	return user
}

// String describes the policy for logs: its user count, never a hash.
func (p *BasicAuth) String() string {
	return "basicAuth(" + strconv.Itoa(len(p.users)) + " users)"
}

var _ policy.Request = (*BasicAuth)(nil)

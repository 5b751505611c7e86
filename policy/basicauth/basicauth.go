// Package basicauth owns the basicAuth policy: HTTP Basic authentication
// (RFC 7617) against an htpasswd user database, hashes checked by
// github.com/tg123/go-htpasswd. A verified credential is remembered, so a
// client that sends the same credential again (every request of a browser
// session) costs a SHA-256, not a bcrypt.
package basicauth

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	htpasswd "github.com/tg123/go-htpasswd"
	"golang.org/x/crypto/bcrypt"

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
	decoy    htpasswd.EncodedPasswd // checked for unknown users (Parse's decoy)
	optional bool
	loc      credential.Location

	refusal credential.Refusal
	value   []byte // the challenge
	// verified remembers the users of credentials verified before: a
	// client sending the same credential again (every request of a browser
	// session) costs a SHA-256, not a bcrypt.
	verified *credential.Memo[string]
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
			return nil, &policy.FieldError{Field: field, Msg: fmt.Sprintf("cannot read %q: %v", cfg.Htpasswd.File, config.FileError(err))}
		}
		text = string(b)
	}
	users, decoy, err := Parse(text)
	if err != nil {
		return nil, &policy.FieldError{Field: field, Msg: err.Error()}
	}
	p.users, p.decoy = users, users[decoy]
	if p.verified, err = credential.NewMemo[string](); err != nil {
		return nil, err
	}
	return p, nil
}

// Parse reads an htpasswd database: one `user:hash` line each; blank lines
// and lines starting with # are skipped. A line without a supported hash
// (a raw password among them) is an error naming the line, never the hash.
//
// decoy is the user whose hash is checked for unknown users, so that they
// take as long as known ones: the one costliest to check (hashCost), the
// first in the file on a tie. Were it any user, an unknown user would
// answer in a microsecond where a bcrypt user takes 100 ms, and which one
// changed from start to start (a map's order).
func Parse(text string) (users map[string]htpasswd.EncodedPasswd, decoy string, err error) {
	users = map[string]htpasswd.EncodedPasswd{}
	decoyCost := int64(-1)
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
			return nil, "", fmt.Errorf("line %d: expected user:hash", line)
		}
		if _, dup := users[user]; dup {
			return nil, "", fmt.Errorf("line %d: user %q is listed twice", line, user)
		}
		h, err := parseHash(hash)
		if err != nil {
			return nil, "", fmt.Errorf("line %d (user %q): %v", line, user, err)
		}
		users[user] = h
		if len(users) > maxUsers {
			return nil, "", fmt.Errorf("more than %d users", maxUsers)
		}
		if c := hashCost(hash); c > decoyCost {
			decoy, decoyCost = user, c
		}
	}
	if err := sc.Err(); err != nil {
		return nil, "", fmt.Errorf("line %d: %v", line+1, err)
	}
	if len(users) == 0 {
		return nil, "", fmt.Errorf("no users")
	}
	return users, decoy, nil
}

// hashCost estimates how long checking a password against a (valid) hash
// takes, in nanoseconds of one current core (measured with go-htpasswd):
// bcrypt about 50 µs × 2^cost, SHA-256 crypt about 110 ns and SHA-512
// crypt 230 ns a round (5000 unless rounds= says), MD5 crypt 100 µs,
// SHA-1 100 ns. Only the order matters: it picks the decoy.
func hashCost(hash string) int64 {
	switch scheme(hash) {
	case "bcrypt":
		cost, err := bcrypt.Cost([]byte(hash))
		if err != nil {
			return 100 // not reached: parseHash refuses such a hash (hashForm)
		}
		return 50_000 << cost
	case "SHA crypt":
		rounds, _ := shaCryptRounds(hash)
		if strings.HasPrefix(hash, "$6$") {
			return 230 * rounds
		}
		return 110 * rounds
	case "MD5":
		return 100_000
	}
	return 100
}

// maxHashCost bounds hashCost: a hash slower to check would let any
// client tie up a core for as long per request (an unknown user is
// checked against the costliest hash), and a mistyped cost or rounds
// (bcrypt's go up to 31, SHA crypt's to 999,999,999: hours a check) would
// make the route unusable. bcrypt cost 15 (about 1.6 s) is the last
// allowed; htpasswd -B writes 5 unless told.
const maxHashCost = 2_000_000_000

// hashParsers are the accepted hash schemes; go-htpasswd's plain-text
// parser is left out, so a raw password is refused.
var hashParsers = []htpasswd.PasswdParser{htpasswd.AcceptBcrypt, htpasswd.AcceptMd5, htpasswd.AcceptCryptSha, htpasswd.AcceptSha}

func parseHash(hash string) (htpasswd.EncodedPasswd, error) {
	if scheme(hash) == "SHA crypt" {
		if _, ok := shaCryptRounds(hash); !ok {
			return nil, errors.New("malformed SHA crypt hash: rounds= must be a number from 1000 to 999999999")
		}
	}
	for _, parse := range hashParsers {
		h, err := parse(hash)
		if err != nil {
			// go-htpasswd's messages quote the hash: say which scheme only.
			return nil, fmt.Errorf("malformed %s hash", scheme(hash))
		}
		if h != nil {
			if err := hashForm(hash); err != nil {
				return nil, err
			}
			if c := hashCost(hash); c > maxHashCost {
				return nil, fmt.Errorf("%s hash too costly to check on every request (about %.1f s a check, for this user and, as the decoy, for unknown ones): use at most bcrypt cost 15 or 5,000,000 SHA crypt rounds", scheme(hash), float64(c)/1e9)
			}
			return h, nil
		}
	}
	if desCrypt(hash) {
		return nil, errors.New("DES crypt hashes are refused as insecure (DES crypt reads only the first 8 characters of a password): hash it with bcrypt (htpasswd -B)")
	}
	return nil, fmt.Errorf("not a supported password hash (bcrypt, MD5 $apr1$ or $1$, SHA-256/512 crypt $5$ or $6$, SHA-1 {SHA}); raw passwords are refused")
}

// cryptAlphabet is the characters of crypt's base 64 (bcrypt's too, in
// another order).
const cryptAlphabet = "./0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// hashForm checks the form of a hash go-htpasswd accepted: it checks only
// the prefix of bcrypt, MD5 and SHA crypt hashes, so a hash cut short,
// with something after it or with a cost bcrypt cannot read would be
// accepted and then match no password, and its user could never log in
// with nothing saying why. The error says what is wrong, never the hash.
func hashForm(hash string) error {
	switch scheme(hash) {
	case "bcrypt":
		// $2y$ (or 2a, 2b, 2x), the cost in two digits, $, then 22
		// characters of salt and 31 of hash: 60 in all.
		const want = "malformed bcrypt hash: expected 60 characters: $2y$ (or $2a$, $2b$), a cost of two digits, $ and 53 characters of ./0-9A-Za-z"
		if len(hash) != 60 || hash[3] != '$' || hash[6] != '$' || !onlyIn(hash[4:6], "0123456789") || !onlyIn(hash[7:], cryptAlphabet) {
			return errors.New(want)
		}
		if cost, _ := strconv.Atoi(hash[4:6]); cost < bcrypt.MinCost || cost > bcrypt.MaxCost {
			return fmt.Errorf("malformed bcrypt hash: cost %d is outside %d to %d", cost, bcrypt.MinCost, bcrypt.MaxCost)
		}
	case "MD5":
		// $apr1$ or $1$, a salt of at most 8 characters (the crypt
		// library reads all it is given: a longer one, which tools cut to
		// 8, never matches), $ and 22 characters of hash.
		prefix := "$1$"
		if strings.HasPrefix(hash, "$apr1$") {
			prefix = "$apr1$"
		}
		salt, sum, ok := strings.Cut(hash[len(prefix):], "$")
		if !ok || len(salt) > 8 || len(sum) != 22 || !onlyIn(sum, cryptAlphabet) {
			return fmt.Errorf("malformed MD5 hash: expected %s, a salt of at most 8 characters, $ and 22 characters of ./0-9A-Za-z", prefix)
		}
	case "SHA crypt":
		// $5$ or $6$, rounds=N$ (shaCryptRounds checked it), a salt
		// (which may be empty, and of which the first 16 characters
		// count), $ and 43 (SHA-256) or 86 (SHA-512) characters of hash.
		prefix, size := hash[:3], 43
		if prefix == "$6$" {
			size = 86
		}
		parts := strings.SplitN(hash[3:], "$", 3)
		if sum := parts[len(parts)-1]; len(parts) < 2 || len(sum) != size || !onlyIn(sum, cryptAlphabet) {
			return fmt.Errorf("malformed SHA crypt hash: expected %s, a salt, $ and %d characters of ./0-9A-Za-z", prefix, size)
		}
	}
	return nil
}

// onlyIn reports whether every byte of s is one of chars.
func onlyIn(s, chars string) bool {
	for i := 0; i < len(s); i++ {
		if strings.IndexByte(chars, s[i]) < 0 {
			return false
		}
	}
	return true
}

// shaCryptRounds returns the rounds of a SHA-256 or SHA-512 crypt hash
// ($5$ or $6$), 5000 when it names none; false when go-htpasswd cannot
// check the hash. It reads the first of three fields ($5$x$salt$hash) as
// the rounds, and the crypt library reads a salt starting "rounds="
// ($5$rounds=x$hash) as rounds too: rounds it cannot read as a number, or
// with no salt after them, made each check of the user panic (on the
// request path, which does not recover); another first field, or rounds
// outside 1000 to 999999999 (clamped, and written back changed), never
// matched. A hash a crypt tool wrote has none of these.
func shaCryptRounds(hash string) (int64, bool) {
	parts := strings.SplitN(hash[3:], "$", 3)
	digits, rounds := strings.CutPrefix(parts[0], "rounds=")
	if len(parts) < 3 {
		// Two fields are salt and hash; a salt starting "rounds=" is
		// read by the crypt library as rounds with no salt (a panic).
		return 5000, !rounds
	}
	if !rounds {
		return 0, false
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || n < 1000 || n > 999_999_999 || strconv.FormatInt(n, 10) != digits {
		return 0, false
	}
	return n, true
}

// desCrypt reports whether hash has the form of a traditional DES crypt
// hash (13 characters of ./0-9A-Za-z: a 2-character salt and the hash) or
// BSDi's extended one (_ and 19 such characters). No maintained Go library
// checks them, and they are weak: they are refused with a message saying
// so (a raw password of that form is refused too, as it should be).
func desCrypt(hash string) bool {
	switch {
	case len(hash) == 13:
	case len(hash) == 20 && hash[0] == '_':
		hash = hash[1:]
	default:
		return false
	}
	for i := 0; i < len(hash); i++ {
		switch c := hash[i]; {
		case c == '.', c == '/', '0' <= c && c <= '9', 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z':
		default:
			return false
		}
	}
	return true
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
	k := p.verified.Key(cred)
	if user, ok := p.verified.Get(k); ok {
		c.BasicAuthUser = user
		return policy.Continue
	}
	user, ok := p.verify(cred)
	if !ok {
		return p.refuse(c, bodyInvalid)
	}
	p.verified.Put(k, user)
	c.BasicAuthUser = user
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

// String describes the policy for logs: its user count, never a hash.
func (p *BasicAuth) String() string {
	return "basicAuth(" + strconv.Itoa(len(p.users)) + " users)"
}

var _ policy.Request = (*BasicAuth)(nil)

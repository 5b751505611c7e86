package basicauth

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"

	"github.com/relaygate/gateway/config"
	"github.com/relaygate/gateway/policy"
	"github.com/relaygate/gateway/policy/policytest"
)

// Hashes made by `openssl passwd` (a tool this project did not write).
const opensslUsers = `# comment, then a blank line

apr1:$apr1$saltsalt$5MCuaE4VxZK/CDugVarlJ.
md5crypt:$1$saltsalt$gj6pO5.kc2.f03C2q5XDg/
sha256:$5$saltsalt$ZfIYlhmI00KtX.OgJ3KQOS7qiwyKs.IsgQL6lLgsnnD
sha512:$6$saltsalt$sJQ//Um8FaXxhPwlNM8HXPv/AOW4xO7O1OfRAAjjcXJ0llh.4e6XQKF9OnCI4ND3Dd6xNcUrwQ//rq6.Wp1HR/
sha1:{SHA}CBdexjHDZ4kfVcYV+41xChABNis=
`

func bcryptLine(t testing.TB, user, pass string) string {
	h, err := bcrypt.GenerateFromPassword([]byte(pass), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	return user + ":" + string(h) + "\n"
}

func basic(user, pass string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
}

func newPolicy(t testing.TB, cfg config.BasicAuth) *BasicAuth {
	t.Helper()
	p, err := New(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestBasicAuth(t *testing.T) {
	// With rounds, made by glibc's crypt (perl -e 'print crypt("secret7", "$5$rounds=6000$saltsalt")').
	users := opensslUsers + bcryptLine(t, "bcrypt", "secret6") + "rounds:$5$rounds=6000$saltsalt$h2w5YXuzHlgzMToG0tBblWTeNF4oa8jJRSfFM32k0v.\n"
	strict := newPolicy(t, config.BasicAuth{Htpasswd: config.Secret{Inline: users}})
	optional := newPolicy(t, config.BasicAuth{Htpasswd: config.Secret{Inline: users}, Mode: config.AuthModeOptional})
	realm := "Staff only"
	realmed := newPolicy(t, config.BasicAuth{Htpasswd: config.Secret{Inline: users}, Realm: &realm})
	tests := []struct {
		desc      string
		p         *BasicAuth
		header    string
		second    string // a second Authorization header
		wantUser  string // "" with wantBody "": passes unauthenticated
		wantBody  string // a refusal's body
		challenge string
	}{
		{desc: "MD5 apr1", p: strict, header: basic("apr1", "secret1"), wantUser: "apr1"},
		{desc: "MD5 crypt", p: strict, header: basic("md5crypt", "secret2"), wantUser: "md5crypt"},
		{desc: "SHA-256 crypt", p: strict, header: basic("sha256", "secret3"), wantUser: "sha256"},
		{desc: "SHA-512 crypt", p: strict, header: basic("sha512", "secret4"), wantUser: "sha512"},
		{desc: "SHA-1", p: strict, header: basic("sha1", "secret5"), wantUser: "sha1"},
		{desc: "bcrypt", p: strict, header: basic("bcrypt", "secret6"), wantUser: "bcrypt"},
		{desc: "SHA-256 crypt with rounds", p: strict, header: basic("rounds", "secret7"), wantUser: "rounds"},
		{desc: "scheme in any case", p: strict, header: "bAsIc " + base64.StdEncoding.EncodeToString([]byte("sha1:secret5")), wantUser: "sha1"},
		{desc: "password with a colon", p: strict, header: basic("sha1", "secret5:x"), wantBody: "authentication failure: invalid credentials\n"},
		{desc: "wrong password", p: strict, header: basic("apr1", "secret2"), wantBody: "authentication failure: invalid credentials\n"},
		{desc: "another user's password", p: strict, header: basic("sha1", "secret1"), wantBody: "authentication failure: invalid credentials\n"},
		{desc: "unknown user", p: strict, header: basic("nobody", "secret1"), wantBody: "authentication failure: invalid credentials\n"},
		{desc: "no colon", p: strict, header: "Basic " + base64.StdEncoding.EncodeToString([]byte("apr1")), wantBody: "authentication failure: invalid credentials\n"},
		{desc: "not base64", p: strict, header: "Basic %%%", wantBody: "authentication failure: invalid credentials\n"},
		{desc: "oversized", p: strict, header: "Basic " + strings.Repeat("A", 5000), wantBody: "authentication failure: invalid credentials\n"},
		{desc: "missing, strict", p: strict, wantBody: "authentication failure: no credentials\n"},
		{desc: "two Authorization headers", p: strict, header: basic("apr1", "secret1"), second: basic("sha1", "secret5"), wantBody: "authentication failure: invalid credentials\n"},
		{desc: "another scheme is no credentials", p: strict, header: "Bearer abc", wantBody: "authentication failure: no credentials\n"},
		{desc: "missing, optional", p: optional},
		{desc: "invalid, optional", p: optional, header: basic("apr1", "nope"), wantBody: "authentication failure: invalid credentials\n"},
		{desc: "valid, optional", p: optional, header: basic("apr1", "secret1"), wantUser: "apr1"},
		{desc: "realm", p: realmed, wantBody: "authentication failure: no credentials\n", challenge: `Basic realm="Staff only", charset="UTF-8"`},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			// Twice: the second time the cache answers.
			for round := range 2 {
				var headers []string
				if tc.header != "" {
					headers = []string{"Authorization", tc.header}
				}
				if tc.second != "" {
					headers = append(headers, "Authorization", tc.second)
				}
				c := policytest.Ctx(policytest.NewRequest("GET", "/", headers...))
				res := tc.p.OnRequest(c)
				if tc.wantBody != "" {
					if res != policy.Done || c.Fast.Response.StatusCode() != 401 {
						t.Fatalf("round %d: result %v status %d, want a 401", round, res, c.Fast.Response.StatusCode())
					}
					if got := string(c.Fast.Response.Body()); got != tc.wantBody {
						t.Errorf("body %q, want %q", got, tc.wantBody)
					}
					want := tc.challenge
					if want == "" {
						want = `Basic realm="Restricted", charset="UTF-8"`
					}
					if got := string(c.Fast.Response.Header.Peek("WWW-Authenticate")); got != want {
						t.Errorf("WWW-Authenticate %q, want %q", got, want)
					}
					continue
				}
				if res != policy.Continue {
					t.Fatalf("round %d: refused (%d %s)", round, c.Fast.Response.StatusCode(), c.Fast.Response.Body())
				}
				if c.BasicAuthUser != tc.wantUser {
					t.Errorf("round %d: user %q, want %q", round, c.BasicAuthUser, tc.wantUser)
				}
				if tc.header != "" && string(c.Fast.Request.Header.Peek("Authorization")) != tc.header {
					t.Error("the credentials were not forwarded as sent")
				}
			}
		})
	}
}

func TestBasicAuthProxyAuthorization(t *testing.T) {
	prefix := "Basic "
	p := newPolicy(t, config.BasicAuth{Htpasswd: config.Secret{Inline: opensslUsers}, AuthorizationLocation: &config.AuthLocation{Header: &config.HeaderLocation{Name: "Proxy-Authorization", Prefix: &prefix}}})
	c := policytest.Ctx(policytest.NewRequest("GET", "/"))
	if p.OnRequest(c) != policy.Done || c.Fast.Response.StatusCode() != 407 || len(c.Fast.Response.Header.Peek("Proxy-Authenticate")) == 0 {
		t.Fatalf("status %d, want 407 with Proxy-Authenticate", c.Fast.Response.StatusCode())
	}
	c = policytest.Ctx(policytest.NewRequest("GET", "/", "Proxy-Authorization", basic("sha1", "secret5")))
	if p.OnRequest(c) != policy.Continue || c.BasicAuthUser != "sha1" {
		t.Fatal("valid Proxy-Authorization refused")
	}
}

func TestBasicAuthConfigErrors(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "htpasswd")
	if err := os.WriteFile(file, []byte(opensslUsers), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := New(&config.BasicAuth{Htpasswd: config.Secret{File: file}}); err != nil {
		t.Fatalf("from a file: %v", err)
	}
	tests := []struct {
		desc      string
		cfg       config.BasicAuth
		wantField string
		wantMsg   string
	}{
		{"raw password", config.BasicAuth{Htpasswd: config.Secret{Inline: "alice:hunter2"}}, "htpasswd", `line 1 (user "alice"): not a supported password hash`},
		{"raw password is not echoed", config.BasicAuth{Htpasswd: config.Secret{Inline: "\n\nbob:$apr1$x"}}, "htpasswd", `line 3 (user "bob"): malformed MD5 hash`},
		{"DES crypt", config.BasicAuth{Htpasswd: config.Secret{Inline: "a:{SHA}CBdexjHDZ4kfVcYV+41xChABNis=\ndes:abNANd1rDfiNc"}}, "htpasswd", `line 2 (user "des"): DES crypt hashes are refused as insecure (DES crypt reads only the first 8 characters of a password): hash it with bcrypt (htpasswd -B)`},
		{"extended DES crypt", config.BasicAuth{Htpasswd: config.Secret{Inline: "bsdi:_J9..saltAbCdEfGhIjK"}}, "htpasswd", `line 1 (user "bsdi"): DES crypt hashes are refused as insecure`},
		{"SHA crypt rounds not a number", config.BasicAuth{Htpasswd: config.Secret{Inline: "r:$5$rounds=abc$saltsalt$ZfIYlhmI00KtX.OgJ3KQOS7qiwyKs.IsgQL6lLgsnnD"}}, "htpasswd", `line 1 (user "r"): malformed SHA crypt hash: rounds= must be a number from 1000 to 999999999`},
		{"SHA crypt rounds beyond int64", config.BasicAuth{Htpasswd: config.Secret{Inline: "r:$6$rounds=99999999999999999999$saltsalt$x"}}, "htpasswd", "malformed SHA crypt hash"},
		{"SHA crypt rounds too few", config.BasicAuth{Htpasswd: config.Secret{Inline: "r:$5$rounds=10$saltsalt$x"}}, "htpasswd", "malformed SHA crypt hash"},
		{"SHA crypt rounds with a sign", config.BasicAuth{Htpasswd: config.Secret{Inline: "r:$5$rounds=+5000$saltsalt$x"}}, "htpasswd", "malformed SHA crypt hash"},
		{"SHA crypt rounds and no salt", config.BasicAuth{Htpasswd: config.Secret{Inline: "r:$5$rounds=5000$ZfIYlhmI00KtX.OgJ3KQOS7qiwyKs.IsgQL6lLgsnnD"}}, "htpasswd", "malformed SHA crypt hash"},
		{"SHA crypt rounds not a number and no salt", config.BasicAuth{Htpasswd: config.Secret{Inline: "r:$6$rounds=abc$x"}}, "htpasswd", "malformed SHA crypt hash"},
		{"SHA crypt three fields without rounds", config.BasicAuth{Htpasswd: config.Secret{Inline: "r:$5$abc$saltsalt$x"}}, "htpasswd", "malformed SHA crypt hash"},
		// A hash that takes seconds a check would let any client tie up a
		// core per request (unknown users are checked against it too).
		{"bcrypt cost too high", config.BasicAuth{Htpasswd: config.Secret{Inline: "a:$2y$05$4bN3S1Ig0j1Yf2Y4rR0n0.BvT5n9n1nOjC2G4n8cK1Oe6V4bG1Xz2\nb:$2y$16$4bN3S1Ig0j1Yf2Y4rR0n0.BvT5n9n1nOjC2G4n8cK1Oe6V4bG1Xz2"}}, "htpasswd", `line 2 (user "b"): bcrypt hash too costly to check on every request (about 3.3 s a check`},
		{"SHA crypt rounds too many", config.BasicAuth{Htpasswd: config.Secret{Inline: "r:$6$rounds=999999999$saltsalt$YRbUDIGoNGrxXtmPVbVXfkKmOQ6JcDprgCaNCdHS8Ri7J8ZRmnIYnFEAxnyXD79EvxOrnN.Nx7Z6eizLZU3n50"}}, "htpasswd", `SHA crypt hash too costly to check on every request`},
		{"no colon", config.BasicAuth{Htpasswd: config.Secret{Inline: "alice"}}, "htpasswd", "line 1: expected user:hash"},
		{"twice", config.BasicAuth{Htpasswd: config.Secret{Inline: "a:{SHA}CBdexjHDZ4kfVcYV+41xChABNis=\na:{SHA}CBdexjHDZ4kfVcYV+41xChABNis="}}, "htpasswd", `line 2: user "a" is listed twice`},
		{"empty", config.BasicAuth{Htpasswd: config.Secret{Inline: "# nobody\n"}}, "htpasswd", "no users"},
		{"missing file", config.BasicAuth{Htpasswd: config.Secret{File: filepath.Join(dir, "nope")}}, "htpasswd.file", "cannot read"},
		{"mode", config.BasicAuth{Htpasswd: config.Secret{Inline: opensslUsers}, Mode: "permissive"}, "mode", "must be one of: strict, optional"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			_, err := New(&tc.cfg)
			fe, ok := err.(*policy.FieldError)
			if !ok {
				t.Fatalf("err = %v, want a FieldError", err)
			}
			if fe.Field != tc.wantField || !strings.Contains(fe.Msg, tc.wantMsg) {
				t.Errorf("got %s: %s, want %s: ...%s...", fe.Field, fe.Msg, tc.wantField, tc.wantMsg)
			}
			if strings.Contains(fe.Msg, "hunter2") || strings.Contains(fe.Msg, "$apr1$x") || strings.Contains(fe.Msg, "abNANd1rDfiNc") || strings.Contains(fe.Msg, "saltAbCd") {
				t.Errorf("the message quotes the password or hash: %s", fe.Msg)
			}
		})
	}
}

// The cached check allocates nothing.
func TestBasicAuthCachedAllocations(t *testing.T) {
	p := newPolicy(t, config.BasicAuth{Htpasswd: config.Secret{Inline: bcryptLine(t, "u", "p")}})
	c := policytest.Ctx(policytest.NewRequest("GET", "/", "Authorization", basic("u", "p")))
	if p.OnRequest(c) != policy.Continue {
		t.Fatal("refused")
	}
	if n := testing.AllocsPerRun(100, func() { p.OnRequest(c) }); n != 0 {
		t.Errorf("%v allocations per cached check", n)
	}
}

func BenchmarkBasicAuthCached(b *testing.B) {
	p := newPolicy(b, config.BasicAuth{Htpasswd: config.Secret{Inline: bcryptLine(b, "u", "p")}})
	c := policytest.Ctx(policytest.NewRequest("GET", "/", "Authorization", basic("u", "p")))
	b.ReportAllocs()
	for b.Loop() {
		if p.OnRequest(c) != policy.Continue {
			b.Fatal("refused")
		}
	}
}

// FuzzParse reads any htpasswd text without panicking, and never names a
// hash in its error.
func FuzzParse(f *testing.F) {
	f.Add(opensslUsers)
	f.Add("a:$2y$05$abc")
	f.Add("a:{SHA}!!\nb")
	f.Fuzz(func(t *testing.T, text string) {
		users, decoy, err := Parse(text)
		if err == nil && (len(users) == 0 || users[decoy] == nil) {
			t.Fatalf("no error and no users (%d) or no decoy (%q)", len(users), decoy)
		}
	})
}

// TestDecoyIsTheCostliestHash: unknown users are checked against the hash
// costliest to check, the first in the file on a tie, whatever the order
// of the users' map.
func TestDecoyIsTheCostliestHash(t *testing.T) {
	hash := func(cost int) string {
		h, err := bcrypt.GenerateFromPassword([]byte("p"), cost)
		if err != nil {
			t.Fatal(err)
		}
		return string(h)
	}
	bcrypt4, bcrypt5, bcrypt11 := hash(bcrypt.MinCost), hash(5), hash(11)
	const (
		sha1      = "{SHA}CBdexjHDZ4kfVcYV+41xChABNis="
		apr1      = "$apr1$saltsalt$5MCuaE4VxZK/CDugVarlJ."
		sha256    = "$5$saltsalt$ZfIYlhmI00KtX.OgJ3KQOS7qiwyKs.IsgQL6lLgsnnD"
		sha512    = "$6$saltsalt$sJQ//Um8FaXxhPwlNM8HXPv/AOW4xO7O1OfRAAjjcXJ0llh.4e6XQKF9OnCI4ND3Dd6xNcUrwQ//rq6.Wp1HR/"
		sha256Big = "$5$rounds=200000$saltsalt$ZfIYlhmI00KtX.OgJ3KQOS7qiwyKs.IsgQL6lLgsnnD"
	)
	tests := []struct {
		desc  string
		users [][2]string // user, hash, in file order
		want  string
	}{
		{"bcrypt before SHA-1", [][2]string{{"slow", bcrypt11}, {"fast", sha1}}, "slow"},
		{"SHA-1 before bcrypt", [][2]string{{"fast", sha1}, {"slow", bcrypt11}}, "slow"},
		{"higher bcrypt cost", [][2]string{{"a", bcrypt4}, {"b", bcrypt5}, {"c", bcrypt4}}, "b"},
		{"SHA-512 crypt over MD5 and SHA-256 crypt", [][2]string{{"a", apr1}, {"b", sha256}, {"c", sha512}, {"d", sha1}}, "c"},
		{"many SHA-256 crypt rounds over bcrypt 4", [][2]string{{"a", bcrypt4}, {"b", sha256Big}}, "b"},
		{"bcrypt 4 over SHA-256 crypt's 5000 rounds", [][2]string{{"a", sha256}, {"b", bcrypt4}}, "b"},
		{"a tie is the first", [][2]string{{"x", sha1}, {"y", sha1}, {"z", sha1}}, "x"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			var text strings.Builder
			for _, u := range tc.users {
				text.WriteString(u[0] + ":" + u[1] + "\n")
			}
			for range 20 { // a map's order would change the pick between runs
				users, decoy, err := Parse(text.String())
				if err != nil {
					t.Fatal(err)
				}
				if decoy != tc.want {
					t.Fatalf("decoy %q, want %q", decoy, tc.want)
				}
				if users[decoy] == nil {
					t.Fatal("the decoy is not a user")
				}
			}
			p := newPolicy(t, config.BasicAuth{Htpasswd: config.Secret{Inline: text.String()}})
			if p.decoy != p.users[tc.want] {
				t.Fatalf("the policy's decoy is not %q's hash", tc.want)
			}
		})
	}
}

// TestMalformedHashesRefused: a hash of a supported scheme whose form is
// wrong (cut short, with something after it, a cost bcrypt cannot read)
// matches no password, so its user could never log in: it is a config
// error naming the user's line, never quoting the hash. Hashes that tools
// write, odd as some are, still load and match.
func TestMalformedHashesRefused(t *testing.T) {
	bc := strings.TrimSpace(strings.TrimPrefix(bcryptLine(t, "u", "pw"), "u:"))
	body := bc[7:] // salt and hash, after "$2a$04$"
	tests := []struct {
		desc    string
		hash    string
		wantErr string // "" for a hash that loads and matches "pw"
	}{
		{"bcrypt", bc, ""},
		{"bcrypt $2y$", "$2y$" + bc[4:], ""},
		{"bcrypt $2b$", "$2b$" + bc[4:], ""},
		{"bcrypt cut short", bc[:len(bc)-2], "malformed bcrypt hash: expected 60 characters"},
		{"bcrypt with something after it", bc + "x", "malformed bcrypt hash: expected 60 characters"},
		{"bcrypt cost 99", "$2y$99$" + body, "malformed bcrypt hash: cost 99 is outside 4 to 31"},
		{"bcrypt cost 3", "$2y$03$" + body, "malformed bcrypt hash: cost 3 is outside 4 to 31"},
		{"bcrypt cost of one digit", "$2y$4$" + body, "malformed bcrypt hash: expected 60 characters"},
		{"bcrypt cost not a number", "$2y$0x$" + body, "malformed bcrypt hash: expected 60 characters"},
		{"bcrypt character outside its alphabet", "$2y$04$" + body[:10] + "+" + body[11:], "malformed bcrypt hash: expected 60 characters"},
		{"apr1 (openssl passwd)", "$apr1$saltsalt$x78Y39ym2RjUNQHTLgwHz/", ""},
		{"MD5 crypt (openssl passwd)", "$1$saltsalt$6SNdNaZLKst2LlSm7oPPL1", ""},
		{"apr1 empty salt (openssl passwd -apr1 -salt '')", "$apr1$$w7neMnnY7ZMxFRIT9tS6m.", ""},
		{"apr1 cut short", "$apr1$saltsalt$5MCuaE4VxZK/CDugVarl", "malformed MD5 hash: expected $apr1$"},
		{"apr1 with something after it", "$apr1$saltsalt$5MCuaE4VxZK/CDugVarlJ.x", "malformed MD5 hash"},
		{"apr1 salt over 8 characters", "$apr1$saltsalt9$5MCuaE4VxZK/CDugVarlJ.", "malformed MD5 hash: expected $apr1$, a salt of at most 8 characters"},
		{"MD5 crypt with a field after it", "$1$saltsalt$gj6pO5.kc2.f03C2q5XDg/$x", "malformed MD5 hash: expected $1$"},
		{"SHA-256 crypt (openssl passwd)", "$5$saltsalt$0rl.MZtoLLPP3X0Rdl8riRnphIcAXJY27/aOAyK2hB5", ""},
		{"SHA-512 crypt (openssl passwd)", "$6$saltsalt$pauPrmdmG4BTE9h2HPmywiw152IFch6BJCEsaY6D.PLTfpV8sqvXwWdyfsgVgozkYH9B80bAip/08R2BPH2xk/", ""},
		// Made by glibc's crypt, which reads 16 characters of salt.
		{"SHA-256 crypt empty salt", "$5$$EPxZX4DoQWu4KoghxUArtr9dmHmQzOXFqq.aJMdG0bA", ""},
		{"SHA-512 crypt rounds and empty salt", "$6$rounds=1000$$Ww46dvdmbJa51Tn2FjNpXolxguszXFYv9Rxe3VazHhtMSHfmYDtk1WRGASHU.A.aIG6LLP4iqYBXgPIOSQrGS0", ""},
		{"SHA-256 crypt salt over 16 characters", "$5$abcdefghijklmnopqrst$gu.71QnGu.GrGbdJF.mj20x/mWJF1VliZRmeYNpAtDB", ""},
		{"SHA-256 crypt with something after it", "$5$saltsalt$ZfIYlhmI00KtX.OgJ3KQOS7qiwyKs.IsgQL6lLgsnnDjunk", "malformed SHA crypt hash: expected $5$, a salt, $ and 43 characters"},
		{"SHA-256 crypt rounds, a field after it", "$5$rounds=6000$saltsalt$h2w5YXuzHlgzMToG0tBblWTeNF4oa8jJRSfFM32k0v.$x", "malformed SHA crypt hash"},
		{"SHA-512 crypt cut short", "$6$saltsalt$sJQ//Um8FaXxhPwlNM8HXPv/AOW4xO7O1OfRAAjjcXJ0llh.4e6XQKF9OnCI4ND3Dd6xNcUrwQ//rq6.Wp1", "malformed SHA crypt hash: expected $6$, a salt, $ and 86 characters"},
		{"SHA-512 crypt with a SHA-256 hash", "$6$saltsalt$ZfIYlhmI00KtX.OgJ3KQOS7qiwyKs.IsgQL6lLgsnnD", "malformed SHA crypt hash: expected $6$"},
		{"SHA crypt character outside its alphabet", "$5$saltsalt$ZfIYlhmI00KtX.OgJ3KQOS7qiwyKs.IsgQL6lLgsnn+", "malformed SHA crypt hash"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			// Another user first: the error names the line and the user.
			text := "ok:{SHA}CBdexjHDZ4kfVcYV+41xChABNis=\nu:" + tc.hash + "\n"
			users, _, err := Parse(text)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if !users["u"].MatchesPassword("pw") {
					t.Fatal("loaded, but does not match its password")
				}
				return
			}
			if err == nil {
				t.Fatalf("loaded; want an error ...%s...", tc.wantErr)
			}
			if want := `line 2 (user "u"): ` + tc.wantErr; !strings.Contains(err.Error(), want) {
				t.Errorf("error %q, want ...%s...", err, want)
			}
			for i := 0; i+8 <= len(tc.hash); i++ {
				if strings.Contains(err.Error(), tc.hash[i:i+8]) {
					t.Fatalf("the error quotes the hash (%q): %s", tc.hash[i:i+8], err)
				}
			}
			// The policy refuses it with the field.
			_, perr := New(&config.BasicAuth{Htpasswd: config.Secret{Inline: text}})
			if fe, ok := perr.(*policy.FieldError); !ok || fe.Field != "htpasswd" {
				t.Errorf("New: %v, want a FieldError on htpasswd", perr)
			}
		})
	}
}

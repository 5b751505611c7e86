package config

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/relaygate/gateway/config/decode"
)

// BasicAuth is `policies.basicAuth`: HTTP Basic authentication (RFC 7617)
// against an htpasswd user database. Unlike agentgateway, whose mode
// defaults to optional, the mode defaults to strict, as the spec requires.
type BasicAuth struct {
	// Htpasswd is the user database, one `user:hash` line each, inline or
	// from a file (read when the config is loaded). Hashes: bcrypt, MD5
	// ($apr1$, $1$), SHA-256 and SHA-512 crypt ($5$, $6$), SHA-1 ({SHA});
	// a raw password is refused.
	Htpasswd Secret `json:"htpasswd" cfg:"required"`
	// Realm is shown in WWW-Authenticate; nil means "Restricted".
	Realm *string `json:"realm,omitempty" cfg:"maxLen=256"`
	// Mode is AuthModeStrict (the default when empty) or AuthModeOptional.
	Mode string `json:"mode,omitempty" cfg:"enum=strict|optional"`
	// AuthorizationLocation is where the credentials travel; nil means the
	// Authorization header with the prefix "Basic ".
	AuthorizationLocation *AuthLocation `json:"authorizationLocation,omitempty"`
}

// Validate checks the realm can go into a quoted header parameter.
func (b *BasicAuth) Validate(v *decode.Validation) {
	if b.Realm != nil {
		for _, c := range []byte(*b.Realm) {
			if c < 0x20 || c == 0x7f || c == '"' || c == '\\' {
				v.Errorf("realm", "must not hold control characters, quotes or backslashes")
				break
			}
		}
	}
}

// APIKeyAuth is `policies.apiKey`: requests carry one of a list of keys.
// The mode defaults to strict, as the spec requires (agentgateway:
// optional).
type APIKeyAuth struct {
	Keys APIKeys `json:"keys" cfg:"required"`
	// Mode is AuthModeStrict (the default when empty), AuthModeOptional or
	// AuthModePermissive.
	Mode string `json:"mode,omitempty" cfg:"enum=strict|optional|permissive"`
	// Location is where the key travels; nil means the Authorization header
	// with the prefix "Bearer ".
	Location *AuthLocation `json:"location,omitempty"`
}

// Validate refuses a key listed twice: which entry's metadata a request
// gets would be undefined.
func (a *APIKeyAuth) Validate(v *decode.Validation) {
	for _, e := range a.Keys.duplicates() {
		v.Errorf("keys"+e.at, "%s", e.msg)
	}
}

// maxAPIKeys bounds a key list, inline or in a file.
const maxAPIKeys = 100000

// MaxAPIKeyFile bounds an apiKey key file (APIKeys.File), in bytes.
const MaxAPIKeyFile = 64 << 20

// APIKeys is the accepted keys: a list written inline (agentgateway's
// form; an item may also be a plain key string), or `{file: path}`, a
// file read when the config is loaded that holds such a list or a map of
// entry names to entries (the spec's key secret: each value a plain key
// or {key, metadata}).
type APIKeys struct {
	List []APIKeyEntry
	File string
}

// DecodeNode decodes the list-or-{file} union.
func (k *APIKeys) DecodeNode(n *decode.Node) {
	if n.Kind() == decode.Map {
		var f struct {
			File string `json:"file" cfg:"required,minLen=1"`
		}
		if n.Decode(&f) {
			k.File = f.File
		}
		return
	}
	if n.Kind() != decode.List {
		n.Errorf("expected a list of keys or {file: path}, got %s", n.Describe())
		return
	}
	switch {
	case n.Len() == 0:
		n.Errorf("must have at least 1 item")
		return
	case n.Len() > maxAPIKeys:
		n.Errorf("must have at most %d items", maxAPIKeys)
		return
	}
	n.Decode(&k.List)
}

// MarshalJSON writes the list, or {"file": path}.
func (k APIKeys) MarshalJSON() ([]byte, error) {
	if k.File != "" {
		return json.Marshal(map[string]string{"file": k.File})
	}
	return json.Marshal(k.List)
}

type keyProblem struct{ at, msg string }

// duplicates lists the entries that repeat an earlier one.
func (k *APIKeys) duplicates() []keyProblem {
	var out []keyProblem
	seen := map[string]int{}
	for i, k := range k.List {
		id := k.identity()
		if id == "" {
			continue
		}
		if prev, dup := seen[id]; dup {
			out = append(out, keyProblem{"[" + strconv.Itoa(i) + "]", "the same key as keys[" + strconv.Itoa(prev) + "]"})
			continue
		}
		seen[id] = i
	}
	return out
}

// APIKeyEntry is one accepted key: `{key, metadata}` with the key inline or
// `{file: path}`, or `{keyHash: "sha256:<hex>", metadata}`.
type APIKeyEntry struct {
	Key *Secret `json:"key,omitempty"`
	// KeyHash is the key's SHA-256 as "sha256:<hex>" (KeyDigest decodes it).
	KeyHash string `json:"keyHash,omitempty"`
	// Metadata is any JSON value, exposed to CEL as the `apiKey` variable's
	// fields when it is an object.
	Metadata      any         `json:"metadata,omitempty"`
	AllowedModels Unsupported `json:"allowedModels,omitzero"`
}

// DecodeNode decodes an entry, or a plain key string.
func (e *APIKeyEntry) DecodeNode(n *decode.Node) {
	if s, ok := n.String(); ok {
		if s == "" {
			n.Errorf("must not be empty")
			return
		}
		e.Key = &Secret{Inline: s}
		return
	}
	type plain APIKeyEntry
	n.Decode((*plain)(e))
}

// ParseAPIKeyFile reads a key file (APIKeys): YAML or JSON holding a list
// of entries, or a map of entry names to entries. Errors name the entry
// and its line.
func ParseAPIKeyFile(data []byte) ([]APIKeyEntry, error) {
	var f apiKeyFile
	if errs := decode.YAML(data, &f); len(errs) > 0 {
		return nil, errs
	}
	if len(f.entries) == 0 {
		return nil, errors.New("no keys")
	}
	keys := APIKeys{List: f.entries}
	if dups := keys.duplicates(); len(dups) > 0 {
		return nil, fmt.Errorf("%s: %s", f.names[dups[0].at], dups[0].msg)
	}
	return f.entries, nil
}

// apiKeyFile is a key file's document.
type apiKeyFile struct {
	entries []APIKeyEntry
	names   map[string]string // "[i]" -> the entry's name in the file
}

func (f *apiKeyFile) DecodeNode(n *decode.Node) {
	if !n.Expect(decode.List, decode.Map) {
		return
	}
	if n.Len() > maxAPIKeys {
		n.Errorf("must have at most %d entries", maxAPIKeys)
		return
	}
	f.names = map[string]string{}
	if n.Kind() == decode.List {
		n.Decode(&f.entries)
		for i := range f.entries {
			f.names["["+strconv.Itoa(i)+"]"] = "[" + strconv.Itoa(i) + "]"
		}
		return
	}
	keys := n.Keys()
	sort.Strings(keys)
	f.entries = make([]APIKeyEntry, len(keys))
	for i, name := range keys {
		v := n.Get(name)
		if v.Kind() == decode.Null {
			v.Errorf("must not be null")
			continue
		}
		v.Decode(&f.entries[i])
		f.names["["+strconv.Itoa(i)+"]"] = name
	}
}

// Validate enforces exactly one of key and keyHash, and the hash's form.
func (e *APIKeyEntry) Validate(v *decode.Validation) {
	switch {
	case e.Key == nil && e.KeyHash == "":
		v.Errorf("", "exactly one of key, keyHash is required")
	case e.Key != nil && e.KeyHash != "":
		v.Errorf("keyHash", "not allowed together with key")
	case e.KeyHash != "":
		if _, ok := e.KeyDigest(); !ok {
			v.Errorf("keyHash", "must be sha256:<64 hex digits>")
		}
	}
}

// KeyDigest decodes KeyHash.
func (e *APIKeyEntry) KeyDigest() (digest [32]byte, ok bool) {
	h, ok := strings.CutPrefix(e.KeyHash, "sha256:")
	if !ok || len(h) != 64 {
		return digest, false
	}
	_, err := hex.Decode(digest[:], []byte(h))
	return digest, err == nil
}

// identity is what makes two entries the same key, for the duplicate
// check ("" when it cannot be told before the key file is read).
func (e *APIKeyEntry) identity() string {
	switch {
	case e.KeyHash != "":
		return "hash:" + strings.ToLower(e.KeyHash)
	case e.Key != nil && !e.Key.IsFile():
		return "key:" + e.Key.Inline
	}
	return ""
}

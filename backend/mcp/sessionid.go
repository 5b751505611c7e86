package mcp

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"sync"
	"time"
)

// sessionState is what a session id carries, so that another replica (or
// this one after the session left its memory) can resume the session: the
// upstream session id of each streamable HTTP target, and what a resume
// needs of the client's initialize params (resumeInit), to initialize the
// other targets again. It also carries
// what limits who may use the id and for how long: the time it was issued
// (a session is resumed only within the session TTL of it) and the
// fingerprint of the identity that opened it.
type sessionState struct {
	Nonce    string            `json:"n"`           // random: two sessions never share an id
	Issued   int64             `json:"t"`           // unix milliseconds
	Subject  string            `json:"s,omitempty"` // fingerprint of the opener's identity
	Upstream map[string]string `json:"u,omitempty"` // target name -> upstream session id
	Version  string            `json:"v,omitempty"` // negotiated protocol version
	Init     json.RawMessage   `json:"i,omitempty"` // the client's initialize params, as resumeInit keeps them
}

// maxSessionIDBytes bounds a session id the gateway issues and accepts:
// ids travel in a header of every request, and Node's HTTP client refuses
// a response head over 16 KiB (the gateway's own request head limit is 32
// KiB). What a session id seals is therefore only what a resume needs
// (resumeInit): a client's icons made its id 1.33 times their size.
const maxSessionIDBytes = 8 << 10

var errBadSessionID = errors.New("malformed session id")

// errSessionIDTooLarge is encodeSessionID's error for a state that does
// not fit in maxSessionIDBytes.
var errSessionIDTooLarge = errors.New("session state too large for a session id")

// resumeInit is what a session keeps of the client's initialize params,
// to initialize targets again (a resume, a restarted process): the
// protocol version, the capabilities and clientInfo's name, title and
// version. The rest (clientInfo's icons, data URIs of any size, its
// description and website, _meta) says nothing a target needs to serve
// the session, and the id that carries these is bounded.
func resumeInit(params json.RawMessage) json.RawMessage {
	var p struct {
		ProtocolVersion json.RawMessage `json:"protocolVersion,omitempty"`
		Capabilities    json.RawMessage `json:"capabilities,omitempty"`
		ClientInfo      json.RawMessage `json:"clientInfo,omitempty"`
	}
	if json.Unmarshal(params, &p) != nil {
		return params // not an object: kept as it is, for the targets to refuse
	}
	var info struct {
		Name    json.RawMessage `json:"name,omitempty"`
		Title   json.RawMessage `json:"title,omitempty"`
		Version json.RawMessage `json:"version,omitempty"`
	}
	if len(p.ClientInfo) > 0 && json.Unmarshal(p.ClientInfo, &info) == nil {
		p.ClientInfo, _ = json.Marshal(info)
	}
	out, err := json.Marshal(p)
	if err != nil {
		return params
	}
	return out
}

// processKey seals session ids when config.session.key is unset: ids stay
// opaque and unforgeable, and resumable within this process (a reload that
// rebuilds a backend), but not by another replica or after a restart.
var processKey = sync.OnceValue(func() []byte {
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		panic("mcp: no randomness for the session key: " + err.Error())
	}
	return k
})

func newAEAD(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// Subject is the fingerprint of an authenticated identity that a session is
// bound to: the JWT's issuer and subject, hashed so that an id shows
// neither. A validated token without a subject is fingerprinted by its
// issuer and the token itself ("t." and the hash, never equal to a
// subject's), so that such tokens do not share sessions with each other or
// with anonymous clients; its session ends with the token. It is empty
// only for a request without a validated token (claims nil).
func Subject(claims map[string]any, token []byte) string {
	if claims == nil {
		return ""
	}
	iss, _ := claims["iss"].(string)
	h := sha256.New()
	h.Write([]byte(iss))
	h.Write([]byte{0})
	if sub, _ := claims["sub"].(string); sub != "" {
		h.Write([]byte(sub))
		return base64.RawURLEncoding.EncodeToString(h.Sum(nil)[:18])
	}
	h.Write(token)
	return "t." + base64.RawURLEncoding.EncodeToString(h.Sum(nil)[:18])
}

// encodeSessionID seals the state into an id with AES-256-GCM, bound to the
// backend's scope (the bind, listener and route it serves), so an id is
// refused by every other route.
func (b *Backend) encodeSessionID(st *sessionState) (string, error) {
	var nonce [16]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return "", err
	}
	st.Nonce = base64.RawURLEncoding.EncodeToString(nonce[:])
	if st.Issued == 0 {
		st.Issued = time.Now().UnixMilli()
	}
	plain, err := json.Marshal(st)
	if err != nil {
		return "", err
	}
	n := make([]byte, b.aead.NonceSize(), b.aead.NonceSize()+len(plain)+b.aead.Overhead())
	if _, err := rand.Read(n); err != nil {
		return "", err
	}
	if base64.RawURLEncoding.EncodedLen(len(n)+len(plain)+b.aead.Overhead()) > maxSessionIDBytes {
		return "", errSessionIDTooLarge
	}
	sealed := b.aead.Seal(n, n, plain, []byte(b.scope))
	return base64.RawURLEncoding.EncodeToString(sealed), nil
}

// decodeSessionID reverses encodeSessionID; ids that were tampered with,
// sealed with another key or for another scope fail.
func (b *Backend) decodeSessionID(id string) (*sessionState, error) {
	if len(id) > maxSessionIDBytes {
		return nil, errBadSessionID
	}
	raw, err := base64.RawURLEncoding.DecodeString(id)
	if err != nil {
		return nil, errBadSessionID
	}
	ns := b.aead.NonceSize()
	if len(raw) < ns+b.aead.Overhead() {
		return nil, errBadSessionID
	}
	raw, err = b.aead.Open(nil, raw[:ns], raw[ns:], []byte(b.scope))
	if err != nil {
		return nil, errBadSessionID
	}
	var st sessionState
	if err := json.Unmarshal(raw, &st); err != nil || st.Nonce == "" || st.Issued <= 0 {
		return nil, errBadSessionID
	}
	return &st, nil
}

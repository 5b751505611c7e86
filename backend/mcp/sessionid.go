package mcp

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
)

// sessionState is what a session id carries, so that another replica (or
// this one after the session left its memory) can resume the session: the
// upstream session id of each streamable HTTP target, and what the client
// sent in initialize, to initialize the other targets again.
type sessionState struct {
	Nonce    string            `json:"n"`           // random: two sessions never share an id
	Upstream map[string]string `json:"u,omitempty"` // target name -> upstream session id
	Version  string            `json:"v,omitempty"` // negotiated protocol version
	Init     json.RawMessage   `json:"i,omitempty"` // the client's initialize params
}

// maxSessionIDBytes bounds a session id the gateway accepts.
const maxSessionIDBytes = 8 << 10

var errBadSessionID = errors.New("malformed session id")

func newAEAD(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// encodeSessionID turns the state into an id; with a key it is sealed with
// AES-256-GCM (bound to the backend's name), otherwise only encoded.
func (b *Backend) encodeSessionID(st *sessionState) (string, error) {
	var nonce [16]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return "", err
	}
	st.Nonce = base64.RawURLEncoding.EncodeToString(nonce[:])
	plain, err := json.Marshal(st)
	if err != nil {
		return "", err
	}
	if b.aead == nil {
		return base64.RawURLEncoding.EncodeToString(plain), nil
	}
	n := make([]byte, b.aead.NonceSize(), b.aead.NonceSize()+len(plain)+b.aead.Overhead())
	if _, err := rand.Read(n); err != nil {
		return "", err
	}
	sealed := b.aead.Seal(n, n, plain, []byte(b.opts.Name))
	return base64.RawURLEncoding.EncodeToString(sealed), nil
}

// decodeSessionID reverses encodeSessionID; ids that were tampered with,
// sealed with another key or for another backend fail.
func (b *Backend) decodeSessionID(id string) (*sessionState, error) {
	if len(id) > maxSessionIDBytes {
		return nil, errBadSessionID
	}
	raw, err := base64.RawURLEncoding.DecodeString(id)
	if err != nil {
		return nil, errBadSessionID
	}
	if b.aead != nil {
		ns := b.aead.NonceSize()
		if len(raw) < ns+b.aead.Overhead() {
			return nil, errBadSessionID
		}
		raw, err = b.aead.Open(nil, raw[:ns], raw[ns:], []byte(b.opts.Name))
		if err != nil {
			return nil, errBadSessionID
		}
	}
	var st sessionState
	if err := json.Unmarshal(raw, &st); err != nil || st.Nonce == "" {
		return nil, errBadSessionID
	}
	return &st, nil
}

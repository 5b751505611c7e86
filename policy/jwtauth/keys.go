package jwtauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/MicahParks/jwkset"
	"go.uber.org/zap"

	"github.com/relaygate/gateway/config"
	"github.com/relaygate/gateway/pool"
)

// Key set limits.
const (
	// MaxKeySetSize bounds a key set file or fetched document.
	MaxKeySetSize = 1 << 20
	// maxKeys bounds the keys kept from one key set.
	maxKeys = 256
)

var (
	// errNoKeys: a remote key set has not been fetched successfully yet.
	errNoKeys = errors.New("no signing keys available yet")
)

// keySnapshot is one immutable version of a key set.
type keySnapshot struct {
	byKID   map[string]jwkset.JWK
	all     []jwkset.JWK
	fetched time.Time
}

// parseKeySet parses a JSON Web Key Set. Strict (inline and file sets,
// checked at load) refuses any key that cannot verify signatures; lenient
// (fetched sets) skips such keys and fails only when none is left. Private
// key material is dropped; symmetric (oct) keys are never used, so HMAC can
// not be forced with a public key's bytes.
func parseKeySet(data []byte, strict bool) (*keySnapshot, error) {
	var doc struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("not a JSON Web Key Set: %v", err)
	}
	if doc.Keys == nil {
		return nil, errors.New(`not a JSON Web Key Set: no "keys" list`)
	}
	if len(doc.Keys) > maxKeys {
		return nil, fmt.Errorf("too many keys: %d (at most %d)", len(doc.Keys), maxKeys)
	}
	s := &keySnapshot{byKID: make(map[string]jwkset.JWK, len(doc.Keys))}
	for i, raw := range doc.Keys {
		k, err := parseKey(raw)
		if err == nil {
			if _, dup := s.byKID[k.Marshal().KID]; dup {
				err = fmt.Errorf("duplicate kid %q", k.Marshal().KID)
			}
		}
		if errors.Is(err, errSkipKey) {
			continue
		}
		if err != nil {
			if strict {
				return nil, fmt.Errorf("keys[%d]: %v", i, err)
			}
			continue
		}
		s.byKID[k.Marshal().KID] = k
		s.all = append(s.all, k)
	}
	if len(s.all) == 0 {
		return nil, errors.New("no usable signing key (RSA, EC P-256/P-384/P-521 or Ed25519 with a kid)")
	}
	return s, nil
}

// errSkipKey marks keys that are valid but not for signatures (use "enc").
var errSkipKey = errors.New("not a signing key")

// parseKey parses one JWK and checks that it can verify an accepted algorithm.
func parseKey(raw json.RawMessage) (jwkset.JWK, error) {
	var m jwkset.JWKMarshal
	if err := json.Unmarshal(raw, &m); err != nil {
		return jwkset.JWK{}, fmt.Errorf("invalid JSON Web Key: %v", err)
	}
	if m.USE != "" && m.USE != jwkset.UseSig {
		return jwkset.JWK{}, errSkipKey
	}
	switch m.KTY {
	case jwkset.KtyRSA, jwkset.KtyEC:
	case jwkset.KtyOKP:
		if m.CRV != jwkset.CrvEd25519 {
			return jwkset.JWK{}, fmt.Errorf("unsupported OKP curve %q (only Ed25519 signs)", m.CRV)
		}
	case jwkset.KtyOct:
		return jwkset.JWK{}, errors.New("symmetric (oct) keys are not accepted: HMAC-signed tokens are refused")
	default:
		return jwkset.JWK{}, fmt.Errorf("unsupported key type %q", m.KTY)
	}
	if m.KID == "" {
		return jwkset.JWK{}, errors.New(`key has no "kid"`)
	}
	if m.ALG != "" && !algFitsKey(string(m.ALG), m.KTY, m.CRV) {
		return jwkset.JWK{}, fmt.Errorf("algorithm %q cannot be used with a %s key", m.ALG, keyDesc(m.KTY, m.CRV))
	}
	k, err := jwkset.NewJWKFromMarshal(m, jwkset.JWKMarshalOptions{}, jwkset.JWKValidateOptions{})
	if err != nil {
		return jwkset.JWK{}, err
	}
	return k, nil
}

func keyDesc(kty jwkset.KTY, crv jwkset.CRV) string {
	if crv != "" {
		return string(kty) + " " + string(crv)
	}
	return string(kty)
}

// algFitsKey reports whether alg is an accepted algorithm for the key type.
func algFitsKey(alg string, kty jwkset.KTY, crv jwkset.CRV) bool {
	switch kty {
	case jwkset.KtyRSA:
		switch alg {
		case "RS256", "RS384", "RS512", "PS256", "PS384", "PS512":
			return true
		}
	case jwkset.KtyEC:
		switch alg {
		case "ES256":
			return crv == jwkset.CrvP256
		case "ES384":
			return crv == jwkset.CrvP384
		case "ES512":
			return crv == jwkset.CrvP521
		}
	case jwkset.KtyOKP:
		return alg == "EdDSA" && crv == jwkset.CrvEd25519
	}
	return false
}

// keySet is the key storage of one provider. It implements jwkset.Storage
// for keyfunc; it is read-only. A static set holds one snapshot forever; a
// remote set is refreshed by its source.
type keySet struct {
	snap   atomic.Pointer[keySnapshot]
	remote *remoteSource
}

var _ jwkset.Storage = (*keySet)(nil)

var errReadOnly = errors.New("jwtauth: key set is read-only")

// KeyRead returns the key with the ID, refreshing a remote set as allowed.
func (s *keySet) KeyRead(_ context.Context, kid string) (jwkset.JWK, error) {
	if s.remote != nil {
		return s.remote.lookup(kid)
	}
	if k, ok := s.snap.Load().byKID[kid]; ok {
		return k, nil
	}
	return jwkset.JWK{}, jwkset.ErrKeyNotFound
}

// KeyReadAll returns every key of the current snapshot.
func (s *keySet) KeyReadAll(context.Context) ([]jwkset.JWK, error) {
	if sn := s.snap.Load(); sn != nil {
		return sn.all, nil
	}
	return nil, nil
}

// KeyDelete is refused: the set is read-only.
func (s *keySet) KeyDelete(context.Context, string) (bool, error) { return false, errReadOnly }

// KeyReplaceAll is refused: the set is read-only.
func (s *keySet) KeyReplaceAll(context.Context, []jwkset.JWK) error { return errReadOnly }

// KeyWrite is refused: the set is read-only.
func (s *keySet) KeyWrite(context.Context, jwkset.JWK) error { return errReadOnly }

func (s *keySet) memory(ctx context.Context) *jwkset.MemoryJWKSet {
	m := jwkset.NewMemoryStorage()
	all, _ := s.KeyReadAll(ctx)
	for _, k := range all {
		_ = m.KeyWrite(ctx, k)
	}
	return m
}

// JSON returns the public key set.
func (s *keySet) JSON(ctx context.Context) (json.RawMessage, error) { return s.memory(ctx).JSON(ctx) }

// JSONPublic returns the public key set.
func (s *keySet) JSONPublic(ctx context.Context) (json.RawMessage, error) {
	return s.memory(ctx).JSONPublic(ctx)
}

// JSONPrivate returns the key set; it holds no private keys.
func (s *keySet) JSONPrivate(ctx context.Context) (json.RawMessage, error) {
	return s.memory(ctx).JSONPublic(ctx)
}

// JSONWithOptions returns the key set with the options.
func (s *keySet) JSONWithOptions(ctx context.Context, m jwkset.JWKMarshalOptions, v jwkset.JWKValidateOptions) (json.RawMessage, error) {
	return s.memory(ctx).JSONWithOptions(ctx, m, v)
}

// Marshal returns the key set in marshal form.
func (s *keySet) Marshal(ctx context.Context) (jwkset.JWKSMarshal, error) {
	return s.memory(ctx).Marshal(ctx)
}

// MarshalWithOptions returns the key set in marshal form with the options.
func (s *keySet) MarshalWithOptions(ctx context.Context, m jwkset.JWKMarshalOptions, v jwkset.JWKValidateOptions) (jwkset.JWKSMarshal, error) {
	return s.memory(ctx).MarshalWithOptions(ctx, m, v)
}

// staticKeySet holds keys parsed once.
func staticKeySet(s *keySnapshot) *keySet {
	ks := &keySet{}
	ks.snap.Store(s)
	return ks
}

// loadKeyFile reads and parses a key set file, bounded by MaxKeySetSize.
func loadKeyFile(path string) (*keySnapshot, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, config.FileError(err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxKeySetSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxKeySetSize {
		return nil, fmt.Errorf("larger than %d bytes", MaxKeySetSize)
	}
	return parseKeySet(data, true)
}

// remoteSource keeps a key set fetched from a URL. It runs no goroutine of
// its own between fetches:
//
//   - the first fetch starts when the policy is built and does not block it;
//     until a fetch succeeds, requests wait for a running fetch (bounded by
//     the fetch timeout) or fail closed;
//   - the keys are cached for ttl; a request after that uses them and starts
//     a refresh in the background; a failed refresh keeps the old keys;
//   - a token with an unknown kid starts a refresh and waits for it, so a
//     rotated key is picked up at once;
//   - fetches start at most once per minGap, whatever the trigger, so a
//     flood of tokens with made-up kids cannot hammer the identity provider.
type remoteSource struct {
	url     string
	logURL  string // url as log lines show it (config.RedactURL)
	client  *http.Client
	ttl     time.Duration
	minGap  time.Duration
	timeout time.Duration
	now     func() time.Time
	log     *zap.Logger
	set     *keySet

	mu          sync.Mutex
	inflight    chan struct{} // closed when the running fetch ends; nil if none
	lastAttempt time.Time
	attempted   bool
	fetches     atomic.Int64 // fetches started, for tests
}

// remoteKeySet is the key set fetched from url. With o.Lease it is the
// lease's: one per URL and fetch settings, shared by every policy naming
// it and kept across reloads, its first fetch starting when the lease
// starts (a config that is only validated fetches nothing). Without a lease
// it is the policy's own, its first fetch starting now.
func remoteKeySet(url string, ttl time.Duration, o *Options) *keySet {
	if o.Lease == nil {
		ks := newRemoteKeySet(url, ttl, o)
		ks.Start()
		return ks
	}
	key := fmt.Sprintf("jwks\x00%s\x00%v\x00%v\x00%v\x00%p", url, ttl, o.FetchTimeout, o.RefetchInterval, o.HTTPClient)
	ks, _ := pool.LoadOrNew(o.Lease, key, func() (*keySet, error) { return newRemoteKeySet(url, ttl, o), nil })
	return ks
}

func newRemoteKeySet(url string, ttl time.Duration, o *Options) *keySet {
	ks := &keySet{}
	ks.remote = &remoteSource{
		url: url, logURL: config.RedactURL(url), client: o.HTTPClient, ttl: ttl, minGap: o.RefetchInterval,
		timeout: o.FetchTimeout, now: o.Now, log: o.Logger, set: ks,
	}
	return ks
}

// Start begins the first fetch of a remote key set (pool.Starter); a
// request that needs the keys before it fetches them itself.
func (s *keySet) Start() {
	if s.remote != nil {
		s.remote.start(s.remote.now(), false)
	}
}

// start begins a fetch unless one is running (it returns that one's
// channel) or, with gap, the last began less than minGap ago (nil).
func (r *remoteSource) start(now time.Time, gap bool) <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.inflight != nil {
		return r.inflight
	}
	if gap && r.attempted && now.Sub(r.lastAttempt) < r.minGap {
		return nil
	}
	ch := make(chan struct{})
	r.inflight, r.lastAttempt, r.attempted = ch, now, true
	r.fetches.Add(1)
	go r.fetch(ch)
	return ch
}

// wait waits for a fetch to end, at most a little longer than its timeout.
func (r *remoteSource) wait(ch <-chan struct{}) {
	if ch == nil {
		return
	}
	t := time.NewTimer(r.timeout + time.Second)
	defer t.Stop()
	select {
	case <-ch:
	case <-t.C:
	}
}

// lookup finds the key with the ID (see remoteSource for the rules).
func (r *remoteSource) lookup(kid string) (jwkset.JWK, error) {
	now := r.now()
	s := r.set.snap.Load()
	switch {
	case s == nil:
		r.wait(r.start(now, true))
	case now.Sub(s.fetched) >= r.ttl:
		if k, ok := s.byKID[kid]; ok {
			r.start(now, true) // refresh in the background; use the cached key
			return k, nil
		}
		r.wait(r.start(now, true))
	default:
		if k, ok := s.byKID[kid]; ok {
			return k, nil
		}
		r.wait(r.start(now, true))
	}
	s = r.set.snap.Load()
	if s == nil {
		return jwkset.JWK{}, errNoKeys
	}
	if k, ok := s.byKID[kid]; ok {
		return k, nil
	}
	return jwkset.JWK{}, jwkset.ErrKeyNotFound
}

// fetch downloads and parses the key set, replacing the snapshot on success.
func (r *remoteSource) fetch(done chan struct{}) {
	defer func() {
		r.mu.Lock()
		r.inflight = nil
		r.mu.Unlock()
		close(done)
	}()
	s, err := r.get()
	if err != nil {
		r.log.Warn("jwtauth: cannot fetch key set", zap.String("url", r.logURL), zap.Error(err))
		return
	}
	s.fetched = r.now()
	r.set.snap.Store(s)
}

func (r *remoteSource) get() (*keySnapshot, error) {
	data, err := fetchJSON(r.client, r.url, "application/json, application/jwk-set+json", r.timeout, MaxKeySetSize)
	if err != nil {
		return nil, err
	}
	return parseKeySet(data, false)
}

// fetchJSON GETs rawURL within timeout and returns its body, refusing any
// status but 200 and bodies over max bytes. Its errors name the URL as log
// lines may show it (redactError).
func fetchJSON(client *http.Client, rawURL, accept string, timeout time.Duration, max int) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return nil, redactError(err)
	}
	req.Header.Set("Accept", accept)
	resp, err := client.Do(req)
	if err != nil {
		return nil, redactError(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("status %d", resp.StatusCode)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, int64(max)+1))
	if err != nil {
		return nil, err
	}
	if len(data) > max {
		return nil, fmt.Errorf("larger than %d bytes", max)
	}
	return data, nil
}

// redactError returns err with the URL of a *url.Error redacted
// (config.RedactURL): net/http's errors name the request's URL, its query
// included (only a password is masked), and they reach the log.
func redactError(err error) error {
	if ue, ok := err.(*url.Error); ok {
		return &url.Error{Op: ue.Op, URL: config.RedactURL(ue.URL), Err: ue.Err}
	}
	return err
}

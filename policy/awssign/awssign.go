// Package awssign owns AWS SigV4 signing of the requests the gateway sends
// to backends (backendAuth aws): Bedrock providers and any host backend
// behind AWS IAM (API Gateway, Lambda function URLs, AgentCore). Signing
// is the AWS SDK's; the package shows it what goes out and keeps the
// credentials: explicit keys, or the SDK's default chain loaded on first
// use.
package awssign

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/valyala/fasthttp"

	"github.com/relaygate/gateway/config"
)

// DefaultService is the service name signed for when the config names
// none (agentgateway's default: Bedrock's runtime).
const DefaultService = "bedrock"

// Signer signs requests for one region and service, with explicit keys or
// the default credential chain (environment, shared files, web identity,
// container and instance roles).
type Signer struct {
	region  string // "": the default config's, found on first use
	service string
	signer  *v4.Signer

	static *aws.Credentials // explicit keys; nil: the default chain
	chain  defaultChain
}

// New signs with a's keys (the default chain when a is nil or names
// none) for a's region, else region ("": the default config's region),
// and a's service, else DefaultService.
func New(a *config.AWSAuth, region string) *Signer {
	s := &Signer{region: region, service: DefaultService, signer: v4.NewSigner()}
	if a == nil {
		return s
	}
	if a.Region != nil {
		s.region = *a.Region
	}
	if a.ServiceName != nil {
		s.service = *a.ServiceName
	}
	if a.Explicit() {
		s.static = &aws.Credentials{
			AccessKeyID:     a.AccessKeyID,
			SecretAccessKey: string(a.SecretAccessKey),
			SessionToken:    string(a.SessionToken),
			Source:          "backendAuth",
		}
	}
	return s
}

// signsHeader reports the headers the signature covers besides Host and
// X-Amz-Date, as agentgateway signs: Content-Type, Date and AWS's own
// (x-amz-*, x-amzn-*). Headers a proxy may change on the way are left out.
func signsHeader(name []byte) bool {
	return equalFoldString(name, "Content-Type") || equalFoldString(name, "Date") ||
		hasPrefixFold(name, "X-Amz-") || hasPrefixFold(name, "X-Amzn-")
}

// signatureHeaders are what signing puts on a request; a client's own are
// removed first, so that only the gateway's signature goes out.
var signatureHeaders = [...]string{"Authorization", "X-Amz-Date", "X-Amz-Security-Token", "X-Amz-Content-Sha256"}

// Sign signs req as it will go out: its method, target, Host, the headers
// signsHeader names and its body (which must be whole, not a stream). It
// replaces any signature the client sent.
func (s *Signer) Sign(ctx context.Context, req *fasthttp.Request) error {
	if req.IsBodyStream() {
		return errors.New("aws sigv4: the body must be read whole before signing")
	}
	creds, err := s.credentials(ctx)
	if err != nil {
		return err
	}
	region, err := s.regionFor(ctx)
	if err != nil {
		return err
	}
	h := &req.Header
	for _, name := range signatureHeaders {
		h.Del(name)
	}
	view, err := signingView(req)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(req.Body())
	if err := s.signer.SignHTTP(ctx, creds, view, hex.EncodeToString(sum[:]), s.service, region, time.Now().UTC()); err != nil {
		return errors.New("aws sigv4: " + err.Error())
	}
	for _, name := range [...]string{"Authorization", "X-Amz-Date", "X-Amz-Security-Token"} {
		if v := view.Header.Get(name); v != "" {
			h.Set(name, v)
		}
	}
	return nil
}

var slash = []byte("/")

// signingView is an *http.Request that shows the signer what goes out:
// the method, the target as sent (its escaped path is what the canonical
// request escapes again, as the AWS SDK's own requests are), the Host and
// the headers to sign. The body is hashed apart.
func signingView(req *fasthttp.Request) (*http.Request, error) {
	target := req.Header.RequestURI()
	if len(target) == 0 {
		target = slash
	}
	u, err := url.ParseRequestURI(string(target))
	if err != nil {
		return nil, errors.New("aws sigv4: the request target does not parse")
	}
	host := string(req.Header.Host())
	u.Scheme, u.Host = "https", host
	view := &http.Request{
		Method: string(req.Header.Method()),
		URL:    u,
		Host:   host,
		Header: make(http.Header, 4),
	}
	for name, value := range req.Header.All() {
		if signsHeader(name) {
			view.Header.Add(string(name), string(value))
		}
	}
	return view, nil
}

// credentials are the explicit keys or the default chain's.
func (s *Signer) credentials(ctx context.Context) (aws.Credentials, error) {
	if s.static != nil {
		return *s.static, nil
	}
	provider, err := s.chain.provider(ctx)
	if err != nil {
		return aws.Credentials{}, err
	}
	creds, err := provider.Retrieve(ctx)
	if err != nil {
		return aws.Credentials{}, errors.New("aws credentials: " + err.Error())
	}
	return creds, nil
}

// regionFor is the configured region, else the default config's.
func (s *Signer) regionFor(ctx context.Context) (string, error) {
	if s.region != "" {
		return s.region, nil
	}
	cfg, err := s.chain.load(ctx)
	if err != nil {
		return "", err
	}
	if cfg.Region == "" {
		return "", errors.New("aws sigv4: no region configured (backendAuth.aws.region, or AWS_REGION)")
	}
	return cfg.Region, nil
}

// defaultChain is the AWS SDK's default config, loaded once (a failed load
// is tried again by the next request), for its credential chain and its
// region. The SDK caches the credentials it finds and refreshes them
// before they expire.
type defaultChain struct {
	loaded atomic.Pointer[loadedConfig]
	mu     sync.Mutex
}

type loadedConfig struct {
	cfg   aws.Config
	cache *aws.CredentialsCache // nil: no credentials configured
}

func (c *defaultChain) load(ctx context.Context) (*aws.Config, error) {
	l, err := c.get(ctx)
	if err != nil {
		return nil, err
	}
	return &l.cfg, nil
}

func (c *defaultChain) provider(ctx context.Context) (aws.CredentialsProvider, error) {
	l, err := c.get(ctx)
	if err != nil {
		return nil, err
	}
	if l.cache == nil {
		return nil, errors.New("aws default credentials: none configured")
	}
	return l.cache, nil
}

func (c *defaultChain) get(ctx context.Context) (*loadedConfig, error) {
	if l := c.loaded.Load(); l != nil {
		return l, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if l := c.loaded.Load(); l != nil {
		return l, nil
	}
	cfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, errors.New("aws default credentials: " + err.Error())
	}
	l := &loadedConfig{cfg: cfg}
	if cfg.Credentials != nil {
		cache, ok := cfg.Credentials.(*aws.CredentialsCache)
		if !ok {
			cache = aws.NewCredentialsCache(cfg.Credentials)
		}
		l.cache = cache
	}
	c.loaded.Store(l)
	return l, nil
}

// equalFoldString reports b == s, ASCII case ignored.
func equalFoldString(b []byte, s string) bool {
	return len(b) == len(s) && hasPrefixFold(b, s)
}

// hasPrefixFold reports whether b starts with s, ASCII case ignored.
func hasPrefixFold(b []byte, s string) bool {
	return len(b) >= len(s) && bytes.EqualFold(b[:len(s)], []byte(s))
}

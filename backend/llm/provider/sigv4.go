package provider

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

// defaultAWSService is the SigV4 service name of Bedrock's runtime.
const defaultAWSService = "bedrock"

// sigv4Credentials sign requests with AWS SigV4, with explicit keys or the
// default credential chain (environment, shared files, web identity,
// container and instance roles), loaded on first use.
type sigv4Credentials struct {
	region  string
	service string
	signer  *v4.Signer

	static *aws.Credentials // explicit keys; nil: the default chain
	chain  defaultAWSChain
}

// newSigV4Credentials signs for region with a's keys, or with the default
// chain when a is nil or names none.
func newSigV4Credentials(a *config.AWSAuth, region string) *sigv4Credentials {
	s := &sigv4Credentials{region: region, service: defaultAWSService, signer: v4.NewSigner()}
	if a == nil {
		return s
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
var signatureHeaders = [...]string{"X-Amz-Date", "X-Amz-Security-Token", "X-Amz-Content-Sha256"}

func (s *sigv4Credentials) apply(ctx context.Context, req *fasthttp.Request) error {
	creds, err := s.credentials(ctx)
	if err != nil {
		return err
	}
	h := &req.Header
	removeClientCredentials(h)
	for _, name := range signatureHeaders {
		h.Del(name)
	}
	view, err := signingView(req)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(req.Body())
	if err := s.signer.SignHTTP(ctx, creds, view, hex.EncodeToString(sum[:]), s.service, s.region, time.Now().UTC()); err != nil {
		return errors.New("aws sigv4: " + err.Error())
	}
	for _, name := range [...]string{"Authorization", "X-Amz-Date", "X-Amz-Security-Token"} {
		if v := view.Header.Get(name); v != "" {
			h.Set(name, v)
		}
	}
	return nil
}

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
func (s *sigv4Credentials) credentials(ctx context.Context) (aws.Credentials, error) {
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

// defaultAWSChain is the AWS SDK's default credential chain, loaded once
// (a failed load is tried again by the next request). The SDK caches the
// credentials it finds and refreshes them before they expire.
type defaultAWSChain struct {
	loaded atomic.Pointer[aws.CredentialsCache]
	mu     sync.Mutex
}

func (c *defaultAWSChain) provider(ctx context.Context) (aws.CredentialsProvider, error) {
	if p := c.loaded.Load(); p != nil {
		return p, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if p := c.loaded.Load(); p != nil {
		return p, nil
	}
	cfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, errors.New("aws default credentials: " + err.Error())
	}
	if cfg.Credentials == nil {
		return nil, errors.New("aws default credentials: none configured")
	}
	cache, ok := cfg.Credentials.(*aws.CredentialsCache)
	if !ok {
		cache = aws.NewCredentialsCache(cfg.Credentials)
	}
	c.loaded.Store(cache)
	return cache, nil
}

// equalFoldString reports b == s, ASCII case ignored.
func equalFoldString(b []byte, s string) bool {
	return len(b) == len(s) && hasPrefixFold(b, s)
}

// hasPrefixFold reports whether b starts with s, ASCII case ignored.
func hasPrefixFold(b []byte, s string) bool {
	return len(b) >= len(s) && bytes.EqualFold(b[:len(s)], []byte(s))
}

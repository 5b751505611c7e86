package provider

import (
	"context"

	"github.com/valyala/fasthttp"

	"github.com/relaygate/gateway/config"
	"github.com/relaygate/gateway/policy/awssign"
)

// sigv4Credentials sign requests with AWS SigV4 (policy/awssign), after
// the client's own credentials are removed.
type sigv4Credentials struct {
	signer *awssign.Signer
}

// newSigV4Credentials signs for region with a's keys, or with the default
// chain when a is nil or names none.
func newSigV4Credentials(a *config.AWSAuth, region string) *sigv4Credentials {
	return &sigv4Credentials{signer: awssign.New(a, region)}
}

func (s *sigv4Credentials) apply(ctx context.Context, req *fasthttp.Request) error {
	removeClientCredentials(&req.Header)
	return s.signer.Sign(ctx, req)
}

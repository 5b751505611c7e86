package llmtest

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// SigV4Check is what an AWS service emulator accepts as a SigV4 signed
// request: one access key (and session token, when set), signing for one
// region and service within a clock skew. Verify recomputes the signature
// with the AWS SDK's signer. The Bedrock emulators here (this package's,
// and guardrailtest's Bedrock Guardrails) check requests with it.
type SigV4Check struct {
	AccessKeyID, SecretAccessKey string
	SessionToken                 string // "" accepts any (or none)
	Region, Service              string
	MaxClockSkew                 time.Duration
	// AllowUnsignedPayload accepts X-Amz-Content-Sha256: UNSIGNED-PAYLOAD.
	AllowUnsignedPayload bool
}

// Verify checks the SigV4 signature of r, whose body is body. reason is ""
// when it holds; otherwise reason says why for the test's log, and typ and
// msg are the AWS exception type and message to answer with.
func (c *SigV4Check) Verify(r *http.Request, body []byte) (reason, typ, msg string) {
	authz := r.Header.Get("Authorization")
	if authz == "" {
		return "no Authorization", "MissingAuthenticationTokenException", "Missing Authentication Token"
	}
	sig, ok := parseSigV4(authz)
	if !ok {
		return "malformed Authorization", "IncompleteSignatureException",
			"Authorization header requires 'Credential', 'Signature' and 'SignedHeaders' parameters."
	}
	if sig.keyID != c.AccessKeyID {
		return "unknown access key " + sig.keyID, "UnrecognizedClientException", "The security token included in the request is invalid."
	}
	if c.SessionToken != "" && subtle.ConstantTimeCompare([]byte(r.Header.Get("X-Amz-Security-Token")), []byte(c.SessionToken)) != 1 {
		return "wrong session token", "UnrecognizedClientException", "The security token included in the request is invalid."
	}
	amzDate := r.Header.Get("X-Amz-Date")
	signed, err := time.Parse("20060102T150405Z", amzDate)
	if err != nil || !slices.Contains(sig.signedHeaders, "x-amz-date") {
		return "no signed X-Amz-Date", "IncompleteSignatureException", "Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header."
	}
	if skew := time.Since(signed); skew > c.MaxClockSkew || -skew > c.MaxClockSkew {
		return "signature expired", "InvalidSignatureException",
			"Signature expired: " + amzDate + " is now earlier than " + time.Now().UTC().Add(-c.MaxClockSkew).Format("20060102T150405Z") + "."
	}
	switch {
	case sig.date != signed.Format("20060102"):
		return "scope date", "InvalidSignatureException", "Date in Credential scope does not match YYYYMMDD from ISO-8601 version of date from HTTP: '" + sig.date + "' != '" + signed.Format("20060102") + "', from '" + amzDate + "'."
	case sig.region != c.Region:
		return "scope region " + sig.region, "InvalidSignatureException", "Credential should be scoped to a valid region. "
	case sig.service != c.Service:
		return "scope service " + sig.service, "InvalidSignatureException", "Credential should be scoped to correct service: '" + c.Service + "'. "
	}
	hash := sha256.Sum256(body)
	payloadHash := hex.EncodeToString(hash[:])
	if h := r.Header.Get("X-Amz-Content-Sha256"); h != "" && h != payloadHash {
		if !c.AllowUnsignedPayload || h != "UNSIGNED-PAYLOAD" {
			return "x-amz-content-sha256 mismatch", "InvalidSignatureException", "The provided 'x-amz-content-sha256' header does not match what was computed."
		}
		payloadHash = h
	}
	if want := c.expectedSignature(r, sig, signed, payloadHash); want == "" || !hmac.Equal([]byte(want), []byte(sig.signature)) {
		return "signature mismatch", "InvalidSignatureException", "The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method. Consult the service documentation for details."
	}
	return "", "", ""
}

// sigv4 is the parsed Authorization header of a SigV4 request.
type sigv4 struct {
	keyID, date, region, service string
	signedHeaders                []string
	signature                    string
}

func parseSigV4(authz string) (sigv4, bool) {
	rest, ok := strings.CutPrefix(authz, "AWS4-HMAC-SHA256 ")
	if !ok {
		return sigv4{}, false
	}
	var s sigv4
	for _, part := range strings.Split(rest, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "Credential":
			scope := strings.Split(v, "/")
			if len(scope) != 5 || scope[4] != "aws4_request" {
				return sigv4{}, false
			}
			s.keyID, s.date, s.region, s.service = scope[0], scope[1], scope[2], scope[3]
		case "SignedHeaders":
			s.signedHeaders = strings.Split(v, ";")
		case "Signature":
			s.signature = v
		}
	}
	return s, s.keyID != "" && len(s.signedHeaders) > 0 && s.signature != ""
}

// expectedSignature signs a copy of r that has only the headers r signed,
// with the AWS SDK's signer, and returns the signature ("" when the signer
// would sign other headers than r did).
func (c *SigV4Check) expectedSignature(r *http.Request, sig sigv4, at time.Time, payloadHash string) string {
	u := *r.URL
	u.Scheme, u.Host = "http", r.Host // neither is part of what is signed
	req := &http.Request{Method: r.Method, URL: &u, Host: r.Host, Header: http.Header{}, ContentLength: -1}
	creds := aws.Credentials{AccessKeyID: c.AccessKeyID, SecretAccessKey: c.SecretAccessKey}
	for _, name := range sig.signedHeaders {
		switch name {
		case "host":
		case "content-length":
			req.ContentLength = r.ContentLength
		case "x-amz-security-token":
			creds.SessionToken = r.Header.Get(name)
			req.Header[http.CanonicalHeaderKey(name)] = r.Header.Values(name)
		default:
			req.Header[http.CanonicalHeaderKey(name)] = r.Header.Values(name)
		}
	}
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, req, payloadHash, sig.service, sig.region, at); err != nil {
		return ""
	}
	mine, ok := parseSigV4(req.Header.Get("Authorization"))
	if !ok || !slices.Equal(mine.signedHeaders, sig.signedHeaders) {
		return ""
	}
	return mine.signature
}

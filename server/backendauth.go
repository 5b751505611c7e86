package server

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/relaygate/gateway/config"
	"github.com/relaygate/gateway/config/decode"
	"github.com/relaygate/gateway/policy"
	"github.com/relaygate/gateway/policy/awssign"
	"github.com/relaygate/gateway/policy/credential"
)

// backendAuth is the backendAuth policy of a backend the gateway proxies
// to itself (host, dynamic and MCP backends; ai backends compile theirs
// per provider, llm_compile.go): the backend's own, else its route's.
// passthrough re-adds the token authentication validated and removed;
// key and credentials put fixed secrets at their locations, on every
// request (agentgateway's order: the kind, then the credentials).
type backendAuth struct {
	passthrough   bool
	passthroughAt credential.Location
	fixed         []credential.Fixed
	// signer signs each request with AWS SigV4 (aws), last, over its whole
	// body (sign).
	signer *awssign.Signer
}

// errBackendCredentials is the client's side of a secret that could not
// be read (its file gone or broken): the request is not sent without it.
var errBackendCredentials = errors.New("backend credentials unavailable")

// compileBackendAuth compiles ba (nil: none), path being the policy's.
// gcp and azure are ai backends' (config/notserved.go refuses them
// elsewhere).
func compileBackendAuth(path string, ba *config.BackendAuth) (*backendAuth, error) {
	if ba == nil {
		return nil, nil
	}
	a := &backendAuth{}
	if ba.Passthrough != nil {
		loc, err := credential.NewLocation(ba.Passthrough.Location)
		if err != nil {
			return nil, decode.Under(path+".passthrough.location", err)
		}
		a.passthrough, a.passthroughAt = true, loc
	}
	if k := ba.Key; k != nil {
		loc, err := credential.NewLocation(k.Location)
		if err != nil {
			return nil, decode.Under(path+".key.location", err)
		}
		secret, err := credential.NewSecret("", k.Value)
		if err != nil {
			p := path + ".key"
			if !k.Short {
				p += ".value"
			}
			return nil, &decode.FieldError{Path: p, Msg: err.Error()}
		}
		a.fixed = append(a.fixed, credential.Fixed{At: loc, Secret: secret})
	}
	creds, err := credential.CompileCredentials(path, ba.Credentials)
	if err != nil {
		return nil, err
	}
	a.fixed = append(a.fixed, creds...)
	if ba.AWS != nil {
		if ba.AWS.AssumeRole != nil {
			return nil, &decode.FieldError{Path: path + ".aws.assumeRole", Msg: "assuming an AWS role is not supported yet"}
		}
		a.signer = awssign.New(ba.AWS, "")
	}
	if !a.passthrough && len(a.fixed) == 0 && a.signer == nil {
		return nil, nil // a kind served elsewhere (ai backends)
	}
	return a, nil
}

// awsSignTimeout bounds fetching the credentials a signature needs (the
// default chain's first load, a refresh), as agentgateway bounds its
// cloud credential fetches.
const awsSignTimeout = 5 * time.Second

// sign signs the upstream request with AWS SigV4, once everything else has
// changed it: its body is read whole first (up to maxBufferSize, 413
// beyond), since the signature covers its hash. ok false means the request
// was answered (status).
func (a *backendAuth) sign(rs *requestState) (status int, ok bool) {
	if a == nil || a.signer == nil {
		return 0, true
	}
	fctx := rs.pc.Fast
	req := &fctx.Request
	if req.IsBodyStream() {
		body, status, ok := readBodyWhole(rs, nil)
		if !ok {
			return status, false
		}
		req.SetBodyRaw(body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), awsSignTimeout)
	defer cancel()
	if err := a.signer.Sign(ctx, req); err != nil {
		rs.upstreamErr = err
		return respondError(fctx, fasthttp.StatusBadGateway, errBackendCredentials.Error()), false
	}
	return 0, true
}

// apply puts the credentials into the upstream request of rs: the
// client's own token (passthrough), then the gateway's secrets, which
// only the upstream sees (hideCredentials; the signature, sign, comes
// later). It fails only when a secret file cannot be read.
func (a *backendAuth) apply(rs *requestState) error {
	if a == nil {
		return nil
	}
	pc := &rs.pc
	req := &pc.Fast.Request
	if a.passthrough && len(pc.Token) > 0 {
		pc.KeepScratch(a.passthroughAt.Insert(req, pc.Token, pc.Scratch()))
	}
	if len(a.fixed) == 0 && a.signer == nil {
		return nil
	}
	rs.hideCredentials()
	buf, err := credential.InsertAll(req, a.fixed, pc.Scratch())
	pc.KeepScratch(buf)
	return err
}

// hideCredentials keeps the request head as it is for the expressions
// that read the request from now on (policy.Ctx.ExprHead): the gateway is
// about to put its own credentials on it, and those go to the upstream
// alone, never to a log line, a span, a response or a guard service.
// agentgateway's expressions see them (its log snapshot is taken after
// backendAuth, sensitive only to `.redacted()`); here a log of
// `request.headers["authorization"]` shows what the client sent, not the
// backend's key. The head's later changes that are not credentials (the
// backend's or provider's header modifier) are made on both
// (applyRequestHeaders). The copy reuses rs's buffers.
func (rs *requestState) hideCredentials() {
	rs.pc.Fast.Request.Header.CopyTo(&rs.exprHead)
	rs.pc.ExprHead = &rs.exprHead
}

// applyRequestHeaders applies a header modifier to the upstream request
// of rs and to the head its expressions read, when that is another.
func (rs *requestState) applyRequestHeaders(m *policy.HeaderModifier) {
	m.ApplyRequest(&rs.pc.Fast.Request.Header)
	if rs.pc.ExprHead != nil {
		m.ApplyRequest(rs.pc.ExprHead)
	}
}

// misfit is the error for a backendAuth on a backend of kind k that cannot
// apply it, or "":
//   - a dynamic backend's destination is the client's to choose (the Host
//     header), so fixed credentials would go wherever the client asks; the
//     client's own token (passthrough) and an AWS signature, which covers
//     the destination's name, may go;
//   - an MCP backend's targets have URLs of their own, so credentials go
//     in headers only, and their requests are the transport's to sign.
func (a *backendAuth) misfit(k config.BackendKind) string {
	if a == nil {
		return ""
	}
	switch k {
	case config.BackendDynamic:
		if len(a.fixed) > 0 {
			return "a dynamic backend's destination is the client's to choose, so key and credentials would go wherever it asks: give the destinations that take them host backends"
		}
	case config.BackendMCP:
		if a.signer != nil {
			return "an MCP backend does not sign its targets' requests (aws applies to host and dynamic backends)"
		}
		if a.passthrough {
			if _, _, ok := a.passthroughAt.Header(); !ok {
				return "an MCP backend takes passthrough in a header only"
			}
		}
		for i := range a.fixed {
			if _, _, ok := a.fixed[i].At.Header(); !ok {
				return "an MCP backend takes credentials in headers only"
			}
		}
	}
	return ""
}

// Header is the credentials as headers of an MCP target's requests, the
// client's validated token being token (mcpgw.Credentials).
func (a *backendAuth) Header(token []byte) (http.Header, error) {
	h := http.Header{}
	if a.passthrough && len(token) > 0 {
		name, prefix, _ := a.passthroughAt.Header()
		h.Set(name, prefix+string(token))
	}
	for i := range a.fixed {
		f := &a.fixed[i]
		v, err := f.Secret.Value()
		if err != nil {
			return nil, err
		}
		name, prefix, _ := f.At.Header()
		h.Set(name, prefix+string(v))
	}
	return h, nil
}

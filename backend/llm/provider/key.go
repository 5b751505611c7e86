package provider

import (
	"context"
	"strings"

	"github.com/valyala/fasthttp"

	"github.com/relaygate/gateway/config"
	"github.com/relaygate/gateway/policy"
	"github.com/relaygate/gateway/policy/credential"
)

// keyCredentials put a static key where the provider takes it.
type keyCredentials struct {
	key *credential.Secret
	// header is the header the key goes in, normalised as fasthttp keeps
	// names; cookie, when set, the cookie instead.
	header []byte
	cookie []byte
	// name is header's name; removeHeader is set when it is not among the
	// client credential headers already removed.
	name         string
	removeHeader bool
}

// defaultKeyLocation is the header, and the prefix before the key, the
// provider's API takes a key in.
func (p *Provider) defaultKeyLocation() (header, prefix string) {
	switch p.kind {
	case kindAzure:
		return "Api-Key", ""
	case kindAnthropic:
		return "X-Api-Key", ""
	case kindGemini:
		return "X-Goog-Api-Key", ""
	}
	return "Authorization", "Bearer "
}

// compileKey builds key credentials; an inline key is checked now, a key
// file is read on first use.
func (p *Provider) compileKey(k *config.BackendAuthKey) (credentials, error) {
	header, prefix := p.defaultKeyLocation()
	c := &keyCredentials{}
	if loc := k.Location; loc != nil {
		switch {
		case loc.Header != nil:
			header, prefix = loc.Header.Name, ""
			if loc.Header.Prefix != nil {
				prefix = *loc.Header.Prefix
			}
		case loc.Cookie != nil:
			c.cookie, prefix = []byte(loc.Cookie.Name), ""
		case loc.QueryParameter != nil:
			return nil, fieldError(authPath+".key.location.queryParameter", "a key in a query parameter is not supported for LLM providers yet (use a header)")
		}
	}
	// In the form the request's header keeps names, so that apply sets it
	// without normalising it on every request.
	c.header = fasthttp.AppendNormalizedHeaderKey(nil, header)
	c.name, c.removeHeader = header, true
	for _, name := range clientCredentialHeaders {
		if strings.EqualFold(name, header) {
			c.removeHeader = false
		}
	}
	key, err := credential.NewSecret(prefix, k.Value)
	if err != nil {
		path := authPath + ".key"
		if !k.Short {
			path += ".value"
		}
		return nil, fieldError(path, err.Error())
	}
	c.key = key
	return c, nil
}

func (c *keyCredentials) apply(_ context.Context, req *fasthttp.Request) error {
	value, err := c.key.Value()
	if err != nil {
		return err
	}
	h := &req.Header
	removeClientCredentials(h)
	if c.cookie != nil {
		h.DelCookieBytes(c.cookie) // every value the client sent there
		h.SetCookieBytesKV(c.cookie, value)
		return nil
	}
	if c.removeHeader {
		policy.DelRequestHeader(h, []byte(c.name)) // every value the client sent there
	}
	h.SetCanonical(c.header, value)
	return nil
}

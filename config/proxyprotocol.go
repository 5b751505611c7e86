package config

import "github.com/relaygate/gateway/config/decode"

// ProxyProtocol is frontendPolicies.proxy (agentgateway also reads it as
// proxyProtocol): every connection a bind accepts begins with a PROXY
// protocol header (HAProxy's, as load balancers send it), which gives the
// client's and the destination's addresses in place of the socket's.
type ProxyProtocol struct {
	// Version is the header version accepted: v1 (text), v2 (binary, the
	// default) or all.
	Version string `json:"version,omitempty" cfg:"enum=v1|v2|all"`
	// Mode strict (the default) refuses a connection without a header;
	// optional serves it with the socket's addresses.
	Mode string `json:"mode,omitempty" cfg:"enum=strict|optional"`
}

// Validate refuses both names of the PROXY protocol policy at once.
func (f *FrontendPolicies) Validate(v *decode.Validation) {
	if f.Proxy != nil && f.ProxyProtocol != nil {
		v.Errorf("proxyProtocol", "set one of proxy and proxyProtocol (the same policy under two names)")
	}
}

// PROXYHeader is the PROXY protocol policy, under either name; nil when
// connections carry no header.
func (f *FrontendPolicies) PROXYHeader() *ProxyProtocol {
	if f == nil {
		return nil
	}
	if f.Proxy != nil {
		return f.Proxy
	}
	return f.ProxyProtocol
}

package config

import "github.com/relaygate/gateway/config/decode"

// NetworkExtAuthz is frontendPolicies.networkExtAuthz: extAuthz's fields
// (the same ExtAuthz type in agentgateway's schema), checked once for each
// downstream connection rather than for each request. The check is an HTTP
// request `GET /` whose expressions see the connection's `source` and
// `destination`; anything but an allow closes the connection.
type NetworkExtAuthz struct {
	ExtAuthz
}

// Validate checks extAuthz's fields, then refuses what a connection check
// cannot do: gRPC (agentgateway refuses it too: "networkExtAuthz only
// supports protocol.http"), the conditional form (not in the schema of
// this field), and the settings that act on a request a connection does
// not have, which would otherwise be silently ignored.
func (n *NetworkExtAuthz) Validate(v *decode.Validation) {
	if n.Conditional != nil {
		v.Errorf("conditional", "networkExtAuthz has no conditional form: it checks each connection once")
		return
	}
	n.ExtAuthz.Validate(v)
	switch {
	case n.Protocol == nil:
		v.Errorf("protocol", "required: networkExtAuthz only supports protocol http (protocol: {http: {}}); the default, grpc, is not supported here")
	case n.Protocol.HTTP == nil:
		v.Errorf("protocol.grpc", "networkExtAuthz only supports protocol http, not grpc")
	}
	const noRequest = "has no effect on a connection check: a connection has no request to take it from"
	if n.IncludeRequestHeaders != nil {
		v.Errorf("includeRequestHeaders", "%s (set headers with protocol.http.addRequestHeaders)", noRequest)
	}
	if n.IncludeRequestBody != nil {
		v.Errorf("includeRequestBody", "%s (set a body with protocol.http.body)", noRequest)
	}
	if h := n.Protocol; h != nil && h.HTTP != nil {
		if h.HTTP.IncludeResponseHeaders != nil {
			v.Errorf("protocol.http.includeResponseHeaders", "has no effect on a connection check: there is no request to copy them into")
		}
		if h.HTTP.Redirect != nil {
			v.Errorf("protocol.http.redirect", "has no effect on a connection check: a refused connection is closed, not redirected")
		}
	}
}

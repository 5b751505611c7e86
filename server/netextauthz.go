package server

import (
	"net"

	"go.uber.org/zap"

	"github.com/relaygate/gateway/policy/celrules"
	"github.com/relaygate/gateway/policy/extauthz"
)

// frontendPolicies.networkExtAuthz: an HTTP authorization service asked
// once for each downstream connection, after networkAuthorization let it
// through and before anything is opened for it (bind.netAllowed). As in
// agentgateway, it runs where a connection enters a bind: an HTTP
// listener's connection before its first request is read, a TCP or TLS
// passthrough one before the upstream is dialed, a terminated TLS one
// after the handshake (its client certificate in source), a CONNECT
// tunnel's stream at the bind of its
// destination port; never for a CONNECT request itself (an HTTP request,
// answered 200 before the tunnel's stream is checked). The check runs on
// the connection's own goroutine, so a slow service holds that connection
// alone, for at most the policy's timeout.

// networkExtAuthz compiles frontendPolicies.networkExtAuthz once per
// snapshot (nil: none). Its connections to the service come from the
// snapshot's lease, shared with the extAuthz policies that use the same
// service, so a reload keeps them.
func (c *compiler) networkExtAuthz() (*extauthz.ExtAuthz, error) {
	fp := c.file.FrontendPolicies
	if fp == nil || fp.NetworkExtAuthz == nil {
		return nil, nil
	}
	const path = "frontendPolicies.networkExtAuthz"
	cfg := &fp.NetworkExtAuthz.ExtAuthz
	addr, err := c.serviceAddr(cfg.Host, cfg.Backend)
	if err != nil {
		return nil, kindError(path, err)
	}
	p, err := extauthz.NewConnectionCheck(cfg, extauthz.Options{Addr: addr, Lease: c.lease, Logger: c.gw.log})
	if err != nil {
		return nil, kindError(path, err)
	}
	return p, nil
}

// netExtAuthzEnd asks networkExtAuthz about connection c, whose
// networkAuthorization input is in: "" when it may be served, else the
// end of its connection record.
func (b *bind) netExtAuthzEnd(bc *bindConfig, c net.Conn, in *celrules.Input) string {
	switch bc.netExtAuthz.CheckConnection(in.Source, in.Destination) {
	case extauthz.Allowed:
		return ""
	case extauthz.Denied:
		b.gw.log.Debug("connection refused by networkExtAuthz", zap.Stringer("client", c.RemoteAddr()), zap.Any("destination", in.Destination))
		return endDenied
	}
	return endExtAuthzFailed
}

// Package sockpeek owns the look at an idle connection's socket that tells
// whether it can still carry a request: what waits there is found without
// waiting and without consuming it (recv with MSG_PEEK|MSG_DONTWAIT). The
// upstream pools (backend/sock) and the HTTP ext_authz client
// (policy/extauthz) both ask it before sending on a connection that sat
// idle, since the peer may have closed it meanwhile.
package sockpeek

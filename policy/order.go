package policy

// Kind names a policy kind by its field name in the configuration's policies.
type Kind string

// Policy kinds built so far.
const (
	KindCORS            Kind = "cors"
	KindCSRF            Kind = "csrf"
	KindTransformations Kind = "transformations"
	KindResponseHeaders Kind = "responseHeaderModifier"
	KindRequestHeaders  Kind = "requestHeaderModifier"
	KindURLRewrite      Kind = "urlRewrite"
	KindRedirect        Kind = "requestRedirect"
	KindDirectResponse  Kind = "directResponse"
	KindDelay           Kind = "delay"

	KindJWTAuth           Kind = "jwtAuth"
	KindMCPAuthentication Kind = "mcpAuthentication"
	KindBasicAuth         Kind = "basicAuth"
	KindAPIKey            Kind = "apiKey"
	KindExtAuthz          Kind = "extAuthz"
	KindAuthorization     Kind = "authorization"
	KindLocalRateLimit    Kind = "localRateLimit"
	KindRemoteRateLimit   Kind = "remoteRateLimit"
	KindExtProc           Kind = "extProc"
)

// Order is the fixed order in which a route's policies run, the one place a
// new kind is plugged in. It is agentgateway's order (proxy/httpproxy.rs,
// apply_request_policies):
//
//  1. cors — first, so preflights are answered before any authentication and
//     CORS headers decorate every later rejection, letting browsers read it;
//  2. authentication (jwtAuth, mcpAuthentication, basicAuth, apiKey; oidc
//     to come), extAuthz (which sees what they authenticated), authorization
//     (which sees what extAuthz answered), then localRateLimit and
//     remoteRateLimit, in that order;
//  3. extProc — the external processor sees the request once it is let
//     in, before the gateway's own edits, and on the way back sees the
//     response after them, as in agentgateway;
//  4. csrf — after authentication in agentgateway, so an unauthenticated
//     cross-site request is answered 401 rather than 403;
//  5. transformations — after authentication and authorization, so its
//     expressions see jwt, apiKey and extauthz; on the way back it runs
//     after responseHeaderModifier;
//  6. responseHeaderModifier — response only; placed after cors so that on
//     the way back it runs before cors adds its headers;
//  7. requestHeaderModifier, then urlRewrite — they prepare the forwarded
//     request, and a redirect after them sees their result, as in
//     agentgateway;
//  8. delay — the injected latency, once the request is ready to go;
//  9. requestRedirect, then directResponse — they answer the request.
//
// Response policies run in the reverse of this order.
var Order = []Kind{
	KindCORS,
	KindJWTAuth,
	KindMCPAuthentication,
	KindBasicAuth,
	KindAPIKey,
	KindExtAuthz,
	KindAuthorization,
	// localRateLimit is no policy of a chain: the server applies it itself
	// at this place (Chain.Before), keeping its decision for the
	// response's x-ratelimit-* headers and an LLM exchange's tokens.
	KindLocalRateLimit,
	KindRemoteRateLimit,
	KindExtProc,
	KindCSRF,
	KindTransformations,
	KindResponseHeaders,
	KindRequestHeaders,
	KindURLRewrite,
	KindDelay,
	KindRedirect,
	KindDirectResponse,
}

// rank is k's position in Order, or -1.
func (k Kind) rank() int {
	for i, o := range Order {
		if o == k {
			return i
		}
	}
	return -1
}

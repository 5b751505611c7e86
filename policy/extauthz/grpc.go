package extauthz

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types/ref"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/relaygate/gateway/codec/logline"
	"github.com/relaygate/gateway/config"
	"github.com/relaygate/gateway/policy"
	"github.com/relaygate/gateway/policy/celrules"
	"github.com/relaygate/gateway/pool"
)

// grpcCheck asks Envoy's Authorization service (envoy.service.auth.v3).
type grpcCheck struct {
	conn     *grpcConn
	addr     string // the service's host:port, for the calls' spans
	context  map[string]string
	metadata []metadataEntry // sorted by key
	// jwtDefault says metadata is unset: the request's verified JWT
	// claims go as Envoy's jwt_authn filter leaves them (jwtMetadata).
	jwtDefault bool
	// notMapLog throttles the warning about a metadata value that is not
	// a map (notMap).
	notMapLog throttle
}

// throttle lets a warning out at most once per throttleEvery, counting
// the ones held back meanwhile.
type throttle struct {
	next    atomic.Int64 // when the next line may go out (time since throttleStart)
	dropped atomic.Int64
}

const throttleEvery = 10 * time.Second

var throttleStart = time.Now()

// allow reports whether a line may go out now, and how many were held
// back since the last one.
func (t *throttle) allow() (ok bool, dropped int64) {
	now := int64(time.Since(throttleStart))
	next := t.next.Load()
	if now < next || !t.next.CompareAndSwap(next, now+int64(throttleEvery)) {
		t.dropped.Add(1)
		return false, 0
	}
	return true, t.dropped.Swap(0)
}

// notMap says that metadata entry key gave a value that is not a map,
// which is left out of the check (each entry of filter_metadata is an
// object); a type known at load is refused then (config.ExtAuthzGRPC).
func (g *grpcCheck) notMap(log *zap.Logger, key string, v ref.Val) {
	if ok, dropped := g.notMapLog.allow(); ok {
		log.Warn("extAuthz: a protocol.grpc.metadata value is not a map; left out of the check",
			zap.String("key", key), zap.String("type", v.Type().TypeName()), zap.Int64("similar_not_logged", dropped))
	}
}

type metadataEntry struct {
	key  string
	prog cel.Program
}

// grpcConn is a client connection to one service, kept in the lease.
type grpcConn struct {
	cc     *grpc.ClientConn
	client authv3.AuthorizationClient
}

// Close implements io.Closer for the lease.
func (g *grpcConn) Close() error { return g.cc.Close() }

func newGRPCCheck(cfg *config.ExtAuthzGRPC, o Options) (*grpcCheck, error) {
	dial := func() (*grpcConn, error) {
		// Plain HTTP/2 (h2c); connecting is lazy, so an unreachable service
		// is the failure mode's business, per request.
		cc, err := grpc.NewClient("passthrough:///"+o.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()), policy.GRPCReconnect)
		if err != nil {
			return nil, err
		}
		return &grpcConn{cc: cc, client: authv3.NewAuthorizationClient(cc)}, nil
	}
	var conn *grpcConn
	var err error
	if o.Lease != nil {
		conn, err = pool.LoadOrNew(o.Lease, "extauthz-grpc\x00"+o.Addr, dial)
	} else {
		conn, err = dial()
	}
	if err != nil {
		return nil, &policy.FieldError{Msg: fmt.Sprintf("cannot set up a gRPC client for %s: %v", o.Addr, err)}
	}
	g := &grpcCheck{conn: conn, addr: o.Addr, context: cfg.Context, jwtDefault: cfg.Metadata == nil}
	for key, expr := range cfg.Metadata {
		p, err := config.CompileValueExpression(string(expr), false)
		if err != nil {
			return nil, &policy.FieldError{Field: "protocol.grpc.metadata." + key, Msg: err.Error()}
		}
		g.metadata = append(g.metadata, metadataEntry{key: key, prog: p})
	}
	sort.Slice(g.metadata, func(i, j int) bool { return g.metadata[i].key < g.metadata[j].key })
	return g, nil
}

// check asks the service; done reports that the request was answered (a
// denial), err that the service could not decide.
func (g *grpcCheck) check(ctx context.Context, p *ExtAuthz, c *policy.Ctx) (*decision, error) {
	req := &c.Fast.Request
	addr, port := sourceAddr(c)
	uri := req.URI()
	// Every string from the client's bytes is made UTF-8 (protoString):
	// grpc-go refuses to marshal a string that is not, and the check
	// would never leave.
	check := &authv3.CheckRequest{Attributes: &authv3.AttributeContext{
		Source:      peer(addr, port),
		Destination: peer(destinationAddr(c)),
		Request: &authv3.AttributeContext_Request{Http: &authv3.AttributeContext_HttpRequest{
			Method:   protoString(req.Header.Method()),
			Headers:  requestHeaders(&c.Fast.Request, c.Scheme, p.include, true),
			Path:     protoString(req.Header.RequestURI()),
			Host:     protoString(req.Header.Host()),
			Scheme:   protoString(c.Scheme),
			Query:    protoString(uri.QueryString()),
			Protocol: policy.ProtoString(protocol(c)),
			Size:     requestSize(c),
		}},
		ContextExtensions: g.context,
	}}
	if b, ok := bodyOf(ctx); ok {
		h := check.Attributes.Request.Http
		if p.body.raw {
			h.RawBody = b.body
		} else {
			// A body that is not UTF-8 (a binary upload) goes with
			// U+FFFD for its invalid bytes: packAsBytes sends it as it is.
			h.Body = protoString(b.body)
		}
		if b.partial {
			h.Headers["x-envoy-auth-partial-body"] = "true"
		}
	}
	if len(g.metadata) > 0 {
		md := &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{}}
		in := celrules.LiveInput(c)
		for _, m := range g.metadata {
			v, err := celrules.EvalLLM(m.prog, &in, nil)
			if err != nil {
				continue // a field that cannot be computed is left out
			}
			s, err := toStruct(v.ConvertToNative(reflect.TypeFor[*structpb.Struct]()))
			if err != nil {
				g.notMap(p.log, m.key, v)
				continue
			}
			validStruct(s) // it may hold the client's bytes (request.headers)
			md.FilterMetadata[m.key] = s
		}
		check.Attributes.MetadataContext = md
	} else if g.jwtDefault {
		check.Attributes.MetadataContext = jwtMetadata(c.Claims)
	}
	ctx, call := c.Trace.StartGRPC(ctx, policy.KindExtAuthz, authv3.Authorization_Check_FullMethodName, g.addr)
	resp, err := g.conn.client.Check(ctx, check)
	err = logline.BoundError(err)
	call.EndGRPC(err)
	if err != nil {
		return nil, err
	}
	d := &decision{}
	if md := resp.GetDynamicMetadata(); md != nil {
		d.metadata = wholeNumbers(md.AsMap()).(map[string]any)
	}
	if code := resp.GetStatus().GetCode(); code != int32(codes.OK) {
		d.deny, d.denied = true, resp.GetDeniedResponse()
		if d.denied == nil {
			d.denied = &authv3.DeniedHttpResponse{}
		}
		return d, nil
	}
	d.ok = resp.GetOkResponse()
	return d, nil
}

// peer is an attribute context's peer at address and port.
func peer(addr string, port uint32) *authv3.AttributeContext_Peer {
	return &authv3.AttributeContext_Peer{Address: &corev3.Address{Address: &corev3.Address_SocketAddress{
		SocketAddress: &corev3.SocketAddress{Address: addr, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: port}},
	}}}
}

// jwtAuthnFilter is the filter metadata key Envoy's JWT filter
// (jwt_authn) puts a verified token's payload under, as jwt_payload.
const jwtAuthnFilter = "envoy.filters.http.jwt_authn"

// jwtMetadata is the metadata context sent when the policy sets no
// metadata (the spec's default, agentgateway's and Envoy's): the claims of
// the request's verified JWT under jwtAuthnFilter, or no filter metadata
// when the request has none.
func jwtMetadata(claims map[string]any) *corev3.Metadata {
	md := &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{}}
	if claims == nil {
		return md
	}
	payload, err := structpb.NewValue(claims)
	if err != nil {
		return md // claims JSON decoding made cannot fail; left out if they did
	}
	md.FilterMetadata[jwtAuthnFilter] = &structpb.Struct{Fields: map[string]*structpb.Value{"jwt_payload": payload}}
	return md
}

// protocol is the client's protocol as Envoy names it: HTTP/1.0, HTTP/1.1
// or HTTP/2.
func protocol(c *policy.Ctx) string {
	if c.HTTP2 {
		return "HTTP/2"
	}
	return string(c.Fast.Request.Header.Protocol())
}

// requestSize is the request's size for the check (attribute_context's
// size): its body's length once read whole, else its Content-Length; 0
// without a body (fasthttp's -2, a request with neither Content-Length
// nor Transfer-Encoding), -1 when unknown (a chunked body, or an HTTP/2
// one without Content-Length, not read).
func requestSize(c *policy.Ctx) int64 {
	req := &c.Fast.Request
	if c.RequestBodyRead {
		return int64(len(req.Body()))
	}
	switch n := req.Header.ContentLength(); {
	case n >= 0:
		return int64(n)
	case n == -2:
		return 0
	}
	return -1
}

// protoString is b as a protobuf string (policy.ProtoString). A valid b
// costs only its conversion.
func protoString(b []byte) string { return policy.ProtoString(string(b)) }

// validStruct makes every string of s, keys included, UTF-8
// (protoString), in place: CEL hands strings over as they are, and a
// request's header may have any bytes.
func validStruct(s *structpb.Struct) {
	for k, v := range s.GetFields() {
		if !utf8.ValidString(k) {
			delete(s.Fields, k)
			s.Fields[policy.ProtoString(k)] = v
		}
		validValue(v)
	}
}

func validValue(v *structpb.Value) {
	switch k := v.GetKind().(type) {
	case *structpb.Value_StringValue:
		k.StringValue = policy.ProtoString(k.StringValue)
	case *structpb.Value_StructValue:
		validStruct(k.StructValue)
	case *structpb.Value_ListValue:
		for _, e := range k.ListValue.GetValues() {
			validValue(e)
		}
	}
}

func toStruct(v any, err error) (*structpb.Struct, error) {
	if err != nil {
		return nil, err
	}
	s, ok := v.(*structpb.Struct)
	if !ok {
		return nil, errors.New("not an object")
	}
	return s, nil
}

// deny answers the request as the service's denied response says
// (status 403 unless it names one).
func deny(p *ExtAuthz, c *policy.Ctx, d *authv3.DeniedHttpResponse) {
	resp := &c.Fast.Response
	resp.Reset()
	status := 403
	if code := int(d.GetStatus().GetCode()); code >= 200 && code <= 599 {
		status = code
	}
	resp.SetStatusCode(status)
	var budget policy.HeaderBudget
	for _, h := range d.GetHeaders() {
		if e, ok := headerEdit(h); ok && p.fits(&budget, e) {
			e.Apply(&resp.Header)
		}
	}
	if body := d.GetBody(); body != "" {
		resp.SetBodyString(body)
	} else if d.GetStatus() == nil && len(d.GetHeaders()) == 0 {
		resp.Header.SetContentTypeBytes(contentTypeText)
		resp.SetBody(bodyForbidden)
	}
}

// headerEdit reads one header option as Envoy does for ext_authz: append
// when asked (the deprecated append flag or append_action), else
// overwrite. ok is false for an option that would break the message (an
// invalid field) or touch the gateway's own fields (framing, hop-by-hop:
// policy.ReservedHeader), which is never applied.
func headerEdit(o *corev3.HeaderValueOption) (e policy.HeaderEdit, ok bool) {
	hv := o.GetHeader()
	if hv == nil || hv.GetKey() == "" {
		return e, false
	}
	key, value := hv.GetKey(), hv.GetValue()
	if raw := hv.GetRawValue(); len(raw) > 0 {
		value = string(raw)
	}
	if !policy.ValidHeader(key, value) || policy.ReservedHeader(key) {
		return e, false
	}
	e = policy.HeaderEdit{Name: key, Value: value, Action: policy.HeaderSet}
	//lint:ignore SA1019 servers written before append_action still send append, and Envoy honours it
	appendFlag := o.GetAppend()
	switch {
	case appendFlag != nil:
		if appendFlag.GetValue() {
			e.Action = policy.HeaderAppend
		}
	case o.GetAppendAction() == corev3.HeaderValueOption_ADD_IF_ABSENT:
		e.Action = policy.HeaderAddIfAbsent
	case o.GetAppendAction() == corev3.HeaderValueOption_OVERWRITE_IF_EXISTS:
		e.Action = policy.HeaderSetIfPresent
	}
	return e, true
}

// fits reports whether the service's header edit e fits in what is left
// of an answer's budget (policy.MaxServiceHeaderBytes); one that does not
// is dropped, as an invalid one is, and said.
func (p *ExtAuthz) fits(b *policy.HeaderBudget, e policy.HeaderEdit) bool {
	if b.Take(e.Name, e.Value) {
		return true
	}
	p.log.Warn("extAuthz: the service's headers exceed 32 KiB; header dropped",
		zap.String("header", logline.BoundValue(e.Name)), zap.Int("bytes", len(e.Name)+len(e.Value)))
	return false
}

// applyOK edits the request the service allowed: headers set, added and
// removed, query parameters set and removed; and keeps the headers it
// wants on the response for p's response side (OnResponse).
func applyOK(p *ExtAuthz, c *policy.Ctx, ok *authv3.OkHttpResponse) {
	req := &c.Fast.Request
	var reqBudget, respBudget policy.HeaderBudget
	for _, h := range ok.GetHeaders() {
		if name := h.GetHeader().GetKey(); routingHeader(name) || policy.ReservedHeader(name) {
			p.log.Debug("extAuthz: the service's edit of a routing, framing or hop-by-hop header ignored", zap.String("header", name))
			continue
		}
		if e, valid := headerEdit(h); valid && p.fits(&reqBudget, e) {
			e.Apply(&req.Header)
		}
	}
	for _, h := range ok.GetResponseHeadersToAdd() {
		if e, valid := headerEdit(h); valid && p.fits(&respBudget, e) {
			c.KeepResponseEdit(p, e)
		}
	}
	for _, name := range ok.GetHeadersToRemove() {
		// Envoy refuses to remove pseudo-headers and Host; framing and
		// hop-by-hop fields are the gateway's.
		if name == "" || routingHeader(name) || policy.ReservedHeader(name) {
			continue
		}
		policy.DelRequestHeader(&req.Header, []byte(name))
	}
	set, remove := ok.GetQueryParametersToSet(), ok.GetQueryParametersToRemove()
	if len(set) == 0 && len(remove) == 0 {
		return
	}
	args := req.URI().QueryArgs()
	for _, name := range remove {
		args.Del(name)
	}
	for _, q := range set {
		if q.GetKey() != "" {
			args.Set(q.GetKey(), q.GetValue())
		}
	}
	req.SetRequestURIBytes(req.URI().RequestURI())
}

// routingHeader reports whether name is Host or a pseudo-header, which
// the service may not set or remove on the request it allows: the
// upstream's authority is the route's (Envoy's default header mutation
// rules refuse them from ext_authz).
func routingHeader(name string) bool {
	return name != "" && name[0] == ':' || equalFold(name, "host")
}

func equalFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i]|0x20, b[i]|0x20
		if x != y {
			return false
		}
	}
	return true
}

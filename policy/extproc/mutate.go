package extproc

import (
	"bytes"
	"net/http"
	"strconv"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	procv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/valyala/fasthttp"
	"go.uber.org/zap"

	"github.com/relaygate/gateway/policy"
)

// requestHeaderMap is the request's header as the service sees it: the
// pseudo-headers :method, :path, :authority and :scheme, then each field
// with its name in lower case and its value as raw bytes (as Envoy sends
// them).
func requestHeaderMap(c *policy.Ctx) *corev3.HeaderMap {
	req := &c.Fast.Request
	h := &corev3.HeaderMap{Headers: make([]*corev3.HeaderValue, 0, req.Header.Len()+4)}
	add := func(k string, v []byte) {
		h.Headers = append(h.Headers, &corev3.HeaderValue{Key: k, RawValue: bytes.Clone(v)})
	}
	add(":method", req.Header.Method())
	add(":path", req.Header.RequestURI())
	add(":authority", req.Header.Host())
	add(":scheme", c.Scheme)
	for k, v := range req.Header.All() {
		if bytes.EqualFold(k, []byte("Host")) {
			continue // it is :authority
		}
		add(strings.ToLower(string(k)), v)
	}
	return h
}

// responseHeaderMap is the response's header: :status, then each field.
func responseHeaderMap(resp *fasthttp.Response) *corev3.HeaderMap {
	h := &corev3.HeaderMap{Headers: make([]*corev3.HeaderValue, 0, resp.Header.Len()+1)}
	h.Headers = append(h.Headers, &corev3.HeaderValue{Key: ":status", RawValue: strconv.AppendInt(nil, int64(resp.StatusCode()), 10)})
	for k, v := range resp.Header.All() {
		h.Headers = append(h.Headers, &corev3.HeaderValue{Key: strings.ToLower(string(k)), RawValue: bytes.Clone(v)})
	}
	return h
}

// headerEdit is one set_headers entry, checked.
type headerEdit struct {
	name, value string
	action      corev3.HeaderValueOption_HeaderAppendAction
}

// edits checks a mutation's set_headers: a name or value that is not valid
// HTTP fails the whole mutation, and so do headers over
// policy.MaxServiceHeaderBytes in all. The deprecated `append` flag is
// read as Envoy reads it: unset or false overwrites, true appends.
func edits(m *procv3.HeaderMutation) ([]headerEdit, error) {
	out := make([]headerEdit, 0, len(m.GetSetHeaders()))
	var budget policy.HeaderBudget
	for _, o := range m.GetSetHeaders() {
		if o.GetHeader() == nil {
			continue
		}
		e, err := edit(o)
		if err != nil {
			return nil, err
		}
		if !budget.Take(e.name, e.value) {
			return nil, errHeadersTooLarge
		}
		out = append(out, e)
	}
	return out, nil
}

// errHeadersTooLarge is the error of a mutation whose headers exceed
// policy.MaxServiceHeaderBytes.
var errHeadersTooLarge = &errService{"the external processing service set headers over 32 KiB"}

// edit checks one set_headers entry (o.Header not nil).
func edit(o *corev3.HeaderValueOption) (headerEdit, error) {
	h := o.GetHeader()
	name := strings.ToLower(h.GetKey())
	value := string(h.GetRawValue())
	if len(h.GetRawValue()) == 0 {
		value = h.GetValue()
	}
	if !strings.HasPrefix(name, ":") && !policy.ValidHeaderName(name) || !policy.ValidHeaderValue(value) {
		return headerEdit{}, &errService{"the external processing service set an invalid header " + strconv.Quote(h.GetKey())}
	}
	action := o.GetAppendAction()
	if _, known := corev3.HeaderValueOption_HeaderAppendAction_name[int32(action)]; !known {
		// Envoy's validation refuses a value its enum does not define
		// (defined_only): guessing one would apply an edit the service
		// did not mean.
		return headerEdit{}, &errService{"the external processing service sent an unknown append_action " + strconv.Itoa(int(action)) + " for header " + strconv.Quote(h.GetKey())}
	}
	if action == corev3.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD {
		action = corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD
		//lint:ignore SA1019 ext_proc services still send the deprecated flag, and Envoy honours it
		if o.GetAppend().GetValue() {
			action = corev3.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD
		}
	}
	return headerEdit{name: name, value: value, action: action}, nil
}

// fields is what an edit needs of a request or a response header:
// replace sets a name replacing every value it had (policy.SetRequestHeader),
// so that a client's or an upstream's second line never stays beside the
// service's value.
type fields interface {
	Peek(key string) []byte
	Add(key, value string)
	replace(key, value string)
}

type requestFields struct{ *fasthttp.RequestHeader }

func (f requestFields) replace(k, v string) { policy.SetRequestHeader(f.RequestHeader, k, v) }

type responseFields struct{ *fasthttp.ResponseHeader }

func (f responseFields) replace(k, v string) { policy.SetResponseHeader(f.ResponseHeader, k, v) }

// applyEdit applies one set_headers entry as Envoy's HeaderValueOption
// reads its append_action: APPEND_IF_EXISTS_OR_ADD adds a line,
// ADD_IF_ABSENT sets a name not there, OVERWRITE_IF_EXISTS replaces every
// value of a name that is there, OVERWRITE_IF_EXISTS_OR_ADD replaces every
// value or adds the name.
func applyEdit(h fields, e headerEdit) {
	switch e.action {
	case corev3.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD:
		h.Add(e.name, e.value)
	case corev3.HeaderValueOption_ADD_IF_ABSENT:
		if h.Peek(e.name) == nil {
			h.Add(e.name, e.value)
		}
	case corev3.HeaderValueOption_OVERWRITE_IF_EXISTS:
		if h.Peek(e.name) != nil {
			h.replace(e.name, e.value)
		}
	default:
		h.replace(e.name, e.value)
	}
}

// applyRequestMutation applies a header mutation to the request. :path
// changes the request's target. As Envoy's default header mutation rules
// have it (no allow_all_routing), the service may not change :method,
// :authority (or host) or :scheme: such an edit is ignored and logged at
// debug, as extAuthz and remoteRateLimit ignore it. The upstream's
// authority is the route's (on a dynamic backend, Host is the
// destination), and the method is the client's. Removing a pseudo-header
// or host does nothing. Unless rawPaths, a :path is normalized as a
// client's is before routing ("/a/../admin" goes as "/admin", not for the
// upstream to resolve past what the route's policies saw).
func applyRequestMutation(c *policy.Ctx, m *procv3.HeaderMutation, rawPaths bool, log *zap.Logger) error {
	if m == nil {
		return nil
	}
	es, err := edits(m)
	if err != nil {
		return err
	}
	req := &c.Fast.Request
	for _, name := range m.GetRemoveHeaders() {
		name = strings.ToLower(name)
		if strings.HasPrefix(name, ":") || name == "host" || policy.ReservedHeader(name) {
			continue
		}
		policy.DelRequestHeader(&req.Header, []byte(name))
	}
	for _, e := range es {
		switch e.name {
		case ":path":
			if !policy.ValidOriginForm(e.value) {
				return &errService{"the external processing service set :path to a value that is not a path"}
			}
			target := e.value
			if !rawPaths {
				var ok bool
				if target, ok = policy.NormalizeTarget(target); !ok {
					return &errService{"the external processing service set :path to a path that does not normalize (an encoded \"/\", a broken escape)"}
				}
			}
			req.Header.SetRequestURI(target)
			c.PathFromTarget()
		case ":method", ":authority", "host", ":scheme":
			log.Debug("extProc: the service's edit of a routing header ignored", zap.String("header", e.name))
		default:
			if strings.HasPrefix(e.name, ":") {
				return &errService{"the external processing service set an unknown pseudo-header " + strconv.Quote(e.name)}
			}
			if policy.ReservedHeader(e.name) {
				continue
			}
			applyEdit(requestFields{&req.Header}, e)
		}
	}
	return nil
}

// applyResponseMutation applies a header mutation to the response;
// :status changes its status.
func applyResponseMutation(resp *fasthttp.Response, m *procv3.HeaderMutation) error {
	if m == nil {
		return nil
	}
	es, err := edits(m)
	if err != nil {
		return err
	}
	for _, name := range m.GetRemoveHeaders() {
		name = strings.ToLower(name)
		if strings.HasPrefix(name, ":") || policy.ReservedHeader(name) {
			continue
		}
		policy.DelResponseHeader(&resp.Header, []byte(name))
	}
	for _, e := range es {
		switch {
		case e.name == ":status":
			code, err := strconv.Atoi(e.value)
			if err != nil || code < 200 || code > 599 {
				return &errService{"the external processing service set an invalid :status"}
			}
			resp.SetStatusCode(code)
			resp.Header.SetStatusMessage(nil) // the upstream's phrase was its status's
		case strings.HasPrefix(e.name, ":"):
			return &errService{"the external processing service set an unknown pseudo-header " + strconv.Quote(e.name)}
		case policy.ReservedHeader(e.name):
		default:
			applyEdit(responseFields{&resp.Header}, e)
		}
	}
	return nil
}

// respondImmediate answers the request with the service's immediate
// response: its status (200 when unset; 500 for one outside 200..599), its
// headers (each invalid one, framing and hop-by-hop ones, and those past
// policy.MaxServiceHeaderBytes left out, as extAuthz leaves them out of a
// refusal: the rest go, so that one bad header does not take a 401's
// WWW-Authenticate with it), its body, and
// grpc-status when it gave one (replacing any its headers gave).
func respondImmediate(c *policy.Ctx, ir *procv3.ImmediateResponse) {
	resp := &c.Fast.Response
	resp.Reset()
	code := int(ir.GetStatus().GetCode())
	switch {
	case code == 0:
		code = http.StatusOK
	case code < 200 || code > 599:
		code = http.StatusInternalServerError
	}
	resp.SetStatusCode(code)
	var budget policy.HeaderBudget
	for _, o := range ir.GetHeaders().GetSetHeaders() {
		if o.GetHeader() == nil {
			continue
		}
		if e, err := edit(o); err == nil && !strings.HasPrefix(e.name, ":") && !policy.ReservedHeader(e.name) && budget.Take(e.name, e.value) {
			applyEdit(responseFields{&resp.Header}, e)
		}
	}
	if gs := ir.GetGrpcStatus(); gs != nil {
		policy.SetResponseHeader(&resp.Header, "grpc-status", strconv.FormatUint(uint64(gs.GetStatus()), 10))
	}
	resp.SetBody(ir.GetBody())
}

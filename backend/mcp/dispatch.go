package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// ItemKind is the kind of item an authorization rule is asked about.
type ItemKind uint8

// Item kinds.
const (
	Tool ItemKind = iota + 1
	Prompt
	Resource
)

// Authorizer decides whether the request may see or use an item (by its
// name as the target knows it, and the target's name). A nil Authorizer
// allows everything.
type Authorizer func(kind ItemKind, name, target string) bool

func (a Authorizer) allowed(kind ItemKind, name, target string) bool {
	return a == nil || a(kind, name, target)
}

// Version is the serverInfo.version of a merged initialize result.
var Version = "dev"

// initialize connects every target (concurrently), initializes it with the
// client's params and merges the results. With failClosed one failure fails
// the whole; with failOpen the targets that worked stay, unless none did.
func (s *Session) initialize(ctx context.Context, clientID jsonrpc.ID, params json.RawMessage, o connectOptions) *jsonrpc.Response {
	n := len(s.b.targets)
	s.mu.Lock()
	s.init = params
	s.opts = connectOptions{header: o.header}
	s.mu.Unlock()
	results := make([]*jsonrpc.Response, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o := o // this target's own copy: resuming may fall back to a new session
			name := s.b.targets[i].Name
			if o.resume[name] != "" {
				// A resumed upstream session is initialized already, if the
				// target still holds it: a ping tells.
				if conn, err := s.dial(ctx, i, o); err == nil && s.attach(i, conn) != nil {
					pingID, _ := jsonrpc.MakeID("resume-ping")
					if r := s.forward(ctx, i, pingID, "ping", json.RawMessage(`{}`), nil); r.Error == nil {
						results[i] = &jsonrpc.Response{ID: clientID, Result: json.RawMessage(`{}`)}
						return
					}
					s.disconnect(i)
				}
				o.resume = nil // start a new upstream session instead
			}
			conn, err := s.dial(ctx, i, o)
			if err != nil {
				results[i] = errorResponse(clientID, jsonrpc.CodeInternalError, fmt.Sprintf("target %s: %v", name, err))
				return
			}
			if s.attach(i, conn) == nil {
				results[i] = errorResponse(clientID, jsonrpc.CodeInternalError, "session closed")
				return
			}
			s.mu.Lock()
			s.fresh[i] = true
			s.mu.Unlock()
			results[i] = s.forward(ctx, i, clientID, "initialize", params, nil)
		}()
	}
	wg.Wait()
	var ok []int
	var firstErr *jsonrpc.Response
	for i, r := range results {
		if r.Error != nil {
			if firstErr == nil {
				firstErr = r
			}
			s.disconnect(i)
			continue
		}
		ok = append(ok, i)
	}
	if firstErr != nil && (!s.b.failOpen || len(ok) == 0) {
		return firstErr
	}
	if len(ok) == 1 && n == 1 {
		s.noteVersion(results[ok[0]].Result)
		return results[ok[0]]
	}
	merged := mergeInitialize(results, ok)
	s.noteVersion(merged)
	return &jsonrpc.Response{ID: clientID, Result: merged}
}

func (s *Session) noteVersion(result json.RawMessage) {
	var r struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	if json.Unmarshal(result, &r) == nil && r.ProtocolVersion != "" {
		s.mu.Lock()
		s.version = r.ProtocolVersion
		s.mu.Unlock()
	}
}

// disconnect closes a target that failed to initialize.
func (s *Session) disconnect(i int) {
	s.mu.Lock()
	u := s.ups[i]
	s.ups[i] = nil
	s.mu.Unlock()
	if u != nil {
		go u.conn.Close()
	}
}

// mergeInitialize merges the targets' initialize results: the oldest
// protocol version, the union of capabilities, the instructions joined.
func mergeInitialize(results []*jsonrpc.Response, ok []int) json.RawMessage {
	version := ""
	caps := map[string]map[string]any{}
	var instructions []string
	for _, i := range ok {
		var r struct {
			ProtocolVersion string                    `json:"protocolVersion"`
			Capabilities    map[string]map[string]any `json:"capabilities"`
			Instructions    string                    `json:"instructions"`
		}
		if json.Unmarshal(results[i].Result, &r) != nil {
			continue
		}
		if r.ProtocolVersion != "" && (version == "" || r.ProtocolVersion < version) {
			version = r.ProtocolVersion
		}
		for name, c := range r.Capabilities {
			m := caps[name]
			if m == nil {
				m = map[string]any{}
				caps[name] = m
			}
			for k, v := range c {
				if b, isBool := v.(bool); isBool {
					prev, _ := m[k].(bool)
					m[k] = prev || b
				} else if _, set := m[k]; !set {
					m[k] = v
				}
			}
		}
		if r.Instructions != "" {
			instructions = append(instructions, r.Instructions)
		}
	}
	out := map[string]any{
		"protocolVersion": version,
		"capabilities":    caps,
		"serverInfo":      map[string]any{"name": "relaygate", "version": Version},
	}
	if len(instructions) > 0 {
		out["instructions"] = strings.Join(instructions, "\n\n")
	}
	data, _ := json.Marshal(out)
	return data
}

// listSpec describes one list method.
type listSpec struct {
	key   string   // result field holding the items
	kind  ItemKind // for authorization
	field string   // item field naming it ("name", "uri", "uriTemplate")
}

var lists = map[string]listSpec{
	"tools/list":               {"tools", Tool, "name"},
	"prompts/list":             {"prompts", Prompt, "name"},
	"resources/list":           {"resources", Resource, "uri"},
	"resources/templates/list": {"resourceTemplates", Resource, "uriTemplate"},
}

// maxPages bounds the pages read from one target for one list call.
const maxPages = 100

// list fans a list call out to every target, reads all pages, keeps the
// items the request may see and prefixes their names when multiplexing.
func (s *Session) list(ctx context.Context, clientID jsonrpc.ID, method string, spec listSpec, authz Authorizer) *jsonrpc.Response {
	ups := s.live()
	type part struct {
		items []map[string]json.RawMessage
		err   *jsonrpc.Response
	}
	parts := make([]part, len(ups))
	var wg sync.WaitGroup
	for pi, u := range ups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cursor := ""
			for range maxPages {
				params := json.RawMessage(`{}`)
				if cursor != "" {
					params, _ = json.Marshal(map[string]string{"cursor": cursor})
				}
				r := s.forward(ctx, u.idx, clientID, method, params, nil)
				if r.Error != nil {
					parts[pi].err = r
					return
				}
				var page map[string]json.RawMessage
				if json.Unmarshal(r.Result, &page) != nil {
					parts[pi].err = errorResponse(clientID, jsonrpc.CodeInternalError, fmt.Sprintf("target %s: malformed %s result", u.name, method))
					return
				}
				var items []map[string]json.RawMessage
				_ = json.Unmarshal(page[spec.key], &items)
				parts[pi].items = append(parts[pi].items, items...)
				cursor = ""
				_ = json.Unmarshal(page["nextCursor"], &cursor)
				if cursor == "" {
					return
				}
			}
		}()
	}
	wg.Wait()
	var out []map[string]json.RawMessage
	failed := 0
	names := map[string]int{}
	for pi, p := range parts {
		if p.err != nil {
			failed++
			if !s.b.failOpen {
				return p.err
			}
			continue
		}
		u := ups[pi]
		for _, item := range p.items {
			var name string
			if json.Unmarshal(item[spec.field], &name) != nil || name == "" {
				continue
			}
			if !authz.allowed(spec.kind, name, u.name) {
				continue
			}
			if s.b.never && spec.kind != Resource {
				names[listKey(spec.kind, name)] = u.idx
			}
			if s.b.prefix {
				item[spec.field], _ = json.Marshal(s.prefixed(spec.kind, u.name, name))
			}
			out = append(out, item)
		}
	}
	if failed > 0 && failed == len(parts) {
		return errorResponse(clientID, jsonrpc.CodeInternalError, "no MCP target answered")
	}
	if len(names) > 0 {
		s.mu.Lock()
		for k, v := range names {
			s.names[k] = v
		}
		s.mu.Unlock()
	}
	if out == nil {
		out = []map[string]json.RawMessage{}
	}
	data, err := json.Marshal(map[string]any{spec.key: out})
	if err != nil {
		return errorResponse(clientID, jsonrpc.CodeInternalError, err.Error())
	}
	return &jsonrpc.Response{ID: clientID, Result: data}
}

func listKey(kind ItemKind, name string) string { return string(rune('0'+kind)) + name }

// prefixed is the client's name of a target's item.
func (s *Session) prefixed(kind ItemKind, target, name string) string {
	if kind == Resource {
		return target + "+" + name
	}
	return target + "_" + name
}

// resolve finds the target and the target's own name for a client's item
// name; ok is false when no target serves it.
func (s *Session) resolve(ctx context.Context, kind ItemKind, name string, authz Authorizer) (int, string, bool) {
	switch {
	case s.b.prefix:
		sep := "_"
		if kind == Resource {
			sep = "+"
		}
		target, rest, found := strings.Cut(name, sep)
		if !found {
			return 0, "", false
		}
		i, known := s.b.byName[target]
		return i, rest, known && rest != ""
	case s.b.never && kind != Resource:
		key := listKey(kind, name)
		s.mu.Lock()
		i, found := s.names[key]
		s.mu.Unlock()
		if !found {
			// Learn the names with a list call, then look again.
			method := map[ItemKind]string{Tool: "tools/list", Prompt: "prompts/list"}[kind]
			id, _ := jsonrpc.MakeID("resolve")
			s.list(ctx, id, method, lists[method], authz)
			s.mu.Lock()
			i, found = s.names[key]
			s.mu.Unlock()
		}
		return i, name, found
	case s.b.never:
		// Resources under prefixMode never: the first live target.
		for _, u := range s.live() {
			return u.idx, name, true
		}
		return 0, "", false
	default:
		return 0, name, len(s.b.targets) == 1
	}
}

// unknown is the answer for an item that does not exist or that the request
// may not use: both look the same, so a denied item's existence is hidden.
func unknown(id jsonrpc.ID, what, name string) *jsonrpc.Response {
	return errorResponse(id, jsonrpc.CodeInvalidParams, fmt.Sprintf("Unknown %s: %s", what, name))
}

// routed handles a call on one named item (tools/call, prompts/get,
// resources/read, resources/subscribe, resources/unsubscribe): authorize,
// strip the prefix, forward.
func (s *Session) routed(ctx context.Context, clientID jsonrpc.ID, method string, params json.RawMessage, authz Authorizer, k *sink, info *Outcome) *jsonrpc.Response {
	kind, field, what := Tool, "name", "tool"
	switch method {
	case "prompts/get":
		kind, what = Prompt, "prompt"
	case "resources/read", "resources/subscribe", "resources/unsubscribe":
		kind, field, what = Resource, "uri", "resource"
	}
	var p map[string]json.RawMessage
	if json.Unmarshal(params, &p) != nil {
		return errorResponse(clientID, jsonrpc.CodeInvalidParams, "params must be an object")
	}
	var name string
	if json.Unmarshal(p[field], &name) != nil || name == "" {
		return errorResponse(clientID, jsonrpc.CodeInvalidParams, fmt.Sprintf("params.%s is required", field))
	}
	i, own, ok := s.resolve(ctx, kind, name, authz)
	if !ok {
		return unknown(clientID, what, name)
	}
	target := s.b.targets[i].Name
	info.Target = target
	if kind == Tool {
		info.Tool = own
	}
	if !authz.allowed(kind, own, target) {
		info.Denied = true
		return unknown(clientID, what, name)
	}
	// The params go on re-encoded from what was checked, never as received:
	// a duplicate "name" key must not let the target read another name than
	// the rule saw.
	p[field], _ = json.Marshal(own)
	params, err := json.Marshal(p)
	if err != nil {
		return errorResponse(clientID, jsonrpc.CodeInvalidParams, "invalid params")
	}
	return s.forward(ctx, i, clientID, method, params, k)
}

// complete routes completion/complete by the prompt or resource it refers
// to.
func (s *Session) complete(ctx context.Context, clientID jsonrpc.ID, params json.RawMessage, authz Authorizer) *jsonrpc.Response {
	var p struct {
		Ref map[string]json.RawMessage `json:"ref"`
	}
	if json.Unmarshal(params, &p) != nil || p.Ref == nil {
		return errorResponse(clientID, jsonrpc.CodeInvalidParams, "params.ref is required")
	}
	var typ string
	_ = json.Unmarshal(p.Ref["type"], &typ)
	kind, field := Prompt, "name"
	if typ == "ref/resource" {
		kind, field = Resource, "uri"
	}
	var name string
	if json.Unmarshal(p.Ref[field], &name) != nil || name == "" {
		return errorResponse(clientID, jsonrpc.CodeInvalidParams, "params.ref."+field+" is required")
	}
	i, own, ok := s.resolve(ctx, kind, name, authz)
	if !ok || !authz.allowed(kind, own, s.b.targets[i].Name) {
		return unknown(clientID, map[ItemKind]string{Prompt: "prompt", Resource: "resource"}[kind], name)
	}
	// Re-encoded from what was checked (see routed).
	p.Ref[field], _ = json.Marshal(own)
	var all map[string]json.RawMessage
	_ = json.Unmarshal(params, &all)
	all["ref"], _ = json.Marshal(p.Ref)
	params, _ = json.Marshal(all)
	return s.forward(ctx, i, clientID, "completion/complete", params, nil)
}

// broadcast sends a call to every target and answers with an empty result
// (logging/setLevel).
func (s *Session) broadcast(ctx context.Context, clientID jsonrpc.ID, method string, params json.RawMessage) *jsonrpc.Response {
	ups := s.live()
	errs := make([]*jsonrpc.Response, len(ups))
	var wg sync.WaitGroup
	for pi, u := range ups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if r := s.forward(ctx, u.idx, clientID, method, params, nil); r.Error != nil {
				errs[pi] = r
			}
		}()
	}
	wg.Wait()
	for _, e := range errs {
		if e != nil && !s.b.failOpen {
			return e
		}
	}
	return &jsonrpc.Response{ID: clientID, Result: json.RawMessage(`{}`)}
}

// dispatch answers one call of the client.
func (s *Session) dispatch(ctx context.Context, r *jsonrpc.Request, authz Authorizer, k *sink, info *Outcome) *jsonrpc.Response {
	if spec, ok := lists[r.Method]; ok {
		return s.list(ctx, r.ID, r.Method, spec, authz)
	}
	switch r.Method {
	case "ping":
		return &jsonrpc.Response{ID: r.ID, Result: json.RawMessage(`{}`)}
	case "tools/call", "prompts/get", "resources/read", "resources/subscribe", "resources/unsubscribe":
		return s.routed(ctx, r.ID, r.Method, r.Params, authz, k, info)
	case "completion/complete":
		return s.complete(ctx, r.ID, r.Params, authz)
	case "logging/setLevel":
		return s.broadcast(ctx, r.ID, r.Method, r.Params)
	}
	// Anything else goes to a single target as it is; with several there is
	// no telling which.
	if ups := s.live(); len(s.b.targets) == 1 && len(ups) == 1 {
		info.Target = ups[0].name
		return s.forward(ctx, ups[0].idx, r.ID, r.Method, r.Params, k)
	}
	return errorResponse(r.ID, jsonrpc.CodeMethodNotFound, "method not found: "+r.Method)
}

// upstreamSessions lists the targets' session ids, for the client's id.
func (s *Session) upstreamSessions() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]string{}
	for _, u := range s.ups {
		if u != nil {
			if id := u.conn.SessionID(); id != "" {
				out[u.name] = id
			}
		}
	}
	return out
}

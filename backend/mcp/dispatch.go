package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"go.uber.org/zap"

	"github.com/relaygate/gateway/backend/mcp/transport"
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
//
// When o.resume names upstream sessions (a session resumed from its id),
// those are continued instead, and each must still be alive: a target that
// no longer knows its session means the session ended (deleted or expired
// on another replica), so the resume fails. Only then are the other targets
// initialized again, so a dead session starts no process.
func (s *Session) initialize(ctx context.Context, clientID jsonrpc.ID, params json.RawMessage, o connectOptions) *jsonrpc.Response {
	n := len(s.b.targets)
	params, version := negotiable(params)
	s.mu.Lock()
	s.init = resumeInit(params)
	s.opts = connectOptions{headers: o.headers}
	s.mu.Unlock()
	results := make([]*jsonrpc.Response, n)
	if len(o.resume) > 0 {
		if r := s.continueUpstreams(ctx, clientID, o, results); r != nil {
			return r
		}
		if o.proceed != nil && !o.proceed() {
			return errorResponse(clientID, jsonrpc.CodeInternalError, errSessionEnded.Error())
		}
	}
	var wg sync.WaitGroup
	starts := make([]time.Time, n)
	for i := range n {
		if results[i] != nil {
			continue // continued above
		}
		wg.Add(1)
		starts[i] = time.Now()
		go func() {
			defer wg.Done()
			// Each target has its own bound: one that never answers must
			// not hold up the others' session.
			ctx, cancel := context.WithTimeout(ctx, s.b.initTimeout)
			defer cancel()
			o := o
			o.resume = nil
			name := s.b.targets[i].Name
			conn, err := s.dial(ctx, i, o)
			if err != nil {
				results[i] = failureResponse(clientID, name, err)
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
			if results[i].Error == nil {
				s.noteCaps(i, results[i].Result)
			}
		}()
	}
	wg.Wait()
	var ok, failed []int
	var firstErr *jsonrpc.Response
	for i, r := range results {
		if r.Error != nil {
			if firstErr == nil {
				firstErr = r
			}
			s.disconnect(i)
			failed = append(failed, i)
			if !errors.Is(ctx.Err(), context.Canceled) { // not the client's going
				s.b.targetInitFailed(i, r.Error, starts[i])
			}
			continue
		}
		ok = append(ok, i)
	}
	if firstErr != nil && (!s.b.failOpen || len(ok) == 0) {
		return firstErr
	}
	for _, i := range failed {
		s.leaveOut(i) // failOpen: initialized again on a later use
	}
	if len(ok) == 1 && n == 1 {
		r := results[ok[0]]
		r.Result = withKnownVersion(r.Result, version)
		s.noteVersion(r.Result)
		return r
	}
	merged := mergeInitialize(results, ok, version)
	s.noteVersion(merged)
	return &jsonrpc.Response{ID: clientID, Result: merged}
}

// negotiable returns a client's initialize params with a protocol version
// the gateway knows: the client's, or initializeVersion in place of one it
// does not know. The targets then negotiate among versions the gateway
// accepts afterwards in Mcp-Protocol-Version: a target that took the
// client's "2024-10-07" had the client's next request refused with 400.
// version is the one the params name ("" when they are not an object).
func negotiable(params json.RawMessage) (json.RawMessage, string) {
	p, ok := object(params)
	if !ok {
		return params, ""
	}
	var version string
	if json.Unmarshal(p["protocolVersion"], &version) == nil && knownVersion(version) {
		return params, version
	}
	p["protocolVersion"], _ = json.Marshal(initializeVersion)
	return encode(p, params), initializeVersion
}

// withKnownVersion returns a target's initialize result with version in
// place of a protocol version the gateway does not know (a target's "1.0"):
// the gateway speaks to the client only versions it accepts afterwards.
func withKnownVersion(result json.RawMessage, version string) json.RawMessage {
	var r struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	if version == "" || json.Unmarshal(result, &r) != nil || r.ProtocolVersion == "" || knownVersion(r.ProtocolVersion) {
		return result
	}
	p, ok := object(result)
	if !ok {
		return result
	}
	p["protocolVersion"], _ = json.Marshal(version)
	return encode(p, result)
}

// errSessionEnded is the error of a resume whose upstream sessions are gone.
var errSessionEnded = errors.New("session ended")

// continueUpstreams reconnects to the upstream sessions a resumed id names
// and pings each; it fills results for them, and returns an error response
// when any is gone.
func (s *Session) continueUpstreams(ctx context.Context, clientID jsonrpc.ID, o connectOptions, results []*jsonrpc.Response) *jsonrpc.Response {
	var wg sync.WaitGroup
	var gone atomic.Bool
	for i, t := range s.b.targets {
		if o.resume[t.Name] == "" {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := s.dial(ctx, i, o)
			if err == nil && s.attach(i, conn) != nil {
				pingID, _ := jsonrpc.MakeID("resume-ping")
				if r, _ := s.forwardOnce(ctx, i, pingID, "ping", json.RawMessage(`{}`), nil); r.Error == nil {
					results[i] = &jsonrpc.Response{ID: clientID, Result: json.RawMessage(`{}`)}
					return
				}
			}
			gone.Store(true)
		}()
	}
	wg.Wait()
	if gone.Load() {
		return errorResponse(clientID, jsonrpc.CodeInternalError, errSessionEnded.Error())
	}
	return nil
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
// protocol version the gateway knows (fallback when none answered one: a
// target's "1.0" must not become the session's), the union of
// capabilities, the instructions joined.
func mergeInitialize(results []*jsonrpc.Response, ok []int, fallback string) json.RawMessage {
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
		if knownVersion(r.ProtocolVersion) && (version == "" || r.ProtocolVersion < version) {
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
	if version == "" {
		version = fallback
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

// Bounds of one list request (the four list methods, tasks/list, and the
// lookups of prefixMode never), which reads every page of every target
// and answers with one merged message. Without them a target's pages were
// all kept: 20 pages of 13.5 MB took the gateway from 41 MB to 3.3 GB.
const (
	// maxPages bounds the pages read from one target.
	maxPages = 100
	// maxListBytes bounds the page results read, over all targets: the
	// merged answer is then about one message as large as the gateway
	// accepts from a target (transport.DefaultMaxMessageBytes).
	maxListBytes = transport.DefaultMaxMessageBytes
	// maxListItems bounds the items kept, over all targets: small items
	// cost more kept (a map each) than their bytes say.
	maxListItems = 100_000
)

// list fans a list call out to every target that serves it, reads all
// pages, keeps the items the request may see and prefixes their names when
// multiplexing.
func (s *Session) list(ctx context.Context, clientID jsonrpc.ID, method string, spec listSpec, authz Authorizer) *jsonrpc.Response {
	targets := s.serving(method)
	if len(targets) == 0 {
		return s.notServed(clientID, method)
	}
	parts, tooMuch := s.collect(ctx, clientID, targets, method, spec.key)
	if tooMuch != nil {
		return tooMuch
	}
	var out []map[string]json.RawMessage
	failed := 0
	names := map[string]int{}
	owners := s.owners(parts, targets, spec)
	for pi, p := range parts {
		if p.err != nil {
			failed++
			if !s.b.failOpen {
				return p.err
			}
			continue
		}
		i := targets[pi]
		target := s.b.targets[i].Name
		for _, item := range p.items {
			var name string
			if json.Unmarshal(item[spec.field], &name) != nil || name == "" {
				continue
			}
			if owners != nil && len(owners[listKey(spec.kind, name)]) > 1 {
				continue // prefixMode never: no telling which target a call means
			}
			if !authz.allowed(spec.kind, name, target) {
				continue
			}
			if owners != nil {
				names[listKey(spec.kind, name)] = i
			}
			if s.b.prefix {
				item[spec.field], _ = json.Marshal(s.prefixed(spec.kind, target, name))
			}
			out = append(out, item)
		}
	}
	if failed > 0 && failed == len(parts) {
		return errorResponse(clientID, jsonrpc.CodeInternalError, "no MCP target answered")
	}
	if len(names) > 0 || len(owners) > 0 {
		s.noteNames(method, names, owners)
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

// owners maps each tool or prompt name the targets listed to the targets
// that list it, under prefixMode never (nil otherwise): a name that
// several list is ambiguous, since no prefix says which one a call means.
// As agentgateway does, such a name is left out of the list and a call
// to it refused; the count is over every item, before the authorization
// rules, so that a rule's reach does not decide where a name routes.
func (s *Session) owners(parts []listPart, targets []int, spec listSpec) map[string][]int {
	if !s.b.never || spec.kind == Resource {
		return nil
	}
	owners := map[string][]int{}
	for pi, p := range parts {
		if p.err != nil {
			continue
		}
		for _, item := range p.items {
			var name string
			if json.Unmarshal(item[spec.field], &name) != nil || name == "" {
				continue
			}
			k := listKey(spec.kind, name)
			if t := owners[k]; len(t) == 0 || t[len(t)-1] != targets[pi] {
				owners[k] = append(t, targets[pi])
			}
		}
	}
	return owners
}

// noteNames remembers where prefixMode never routes names (routes, from
// a list), and which names several targets serve; the first list of a
// session that finds such names logs a warning naming them.
func (s *Session) noteNames(method string, routes map[string]int, owners map[string][]int) {
	var shadowed []string
	s.mu.Lock()
	for k, v := range routes {
		s.names[k] = v
		delete(s.shadowed, k)
	}
	for k, t := range owners {
		if len(t) > 1 {
			s.names[k] = -1
			s.shadowed[k] = t
			shadowed = append(shadowed, k[1:]+" ("+s.targetNames(t)+")")
		}
	}
	warn := len(shadowed) > 0 && !s.shadowWarned
	if warn {
		s.shadowWarned = true
	}
	s.mu.Unlock()
	if !warn {
		return
	}
	slices.Sort(shadowed)
	n := len(shadowed)
	shadowed = shadowed[:min(n, maxShadowedLogged)]
	s.b.log.Warn("mcp names served by several targets left out: prefixMode never cannot route them",
		zap.String("backend", s.b.opts.Name), zap.String("method", method), zap.Int("count", n), zap.Strings("names", shadowed))
}

// maxShadowedLogged bounds the names the warning of noteNames lists.
const maxShadowedLogged = 20

// targetNames joins the names of targets.
func (s *Session) targetNames(targets []int) string {
	names := make([]string, len(targets))
	for j, i := range targets {
		names[j] = s.b.targets[i].Name
	}
	return strings.Join(names, ", ")
}

// ambiguous answers a call to a name that several targets serve under
// prefixMode never, when the request may use it on one of them; nil
// otherwise (the name is unknown, or hidden from the request).
func (s *Session) ambiguous(id jsonrpc.ID, kind ItemKind, what, name string, authz Authorizer) *jsonrpc.Response {
	s.mu.Lock()
	targets := s.shadowed[listKey(kind, name)]
	s.mu.Unlock()
	for _, i := range targets {
		if authz.allowed(kind, name, s.b.targets[i].Name) {
			return errorResponse(id, jsonrpc.CodeInvalidParams, fmt.Sprintf(
				"%s %s is served by several targets (%s): with prefixMode never, a call to it cannot be routed", what, name, s.targetNames(targets)))
		}
	}
	return nil
}

// listPart is what one target answered to a list call.
type listPart struct {
	items []map[string]json.RawMessage
	err   *jsonrpc.Response
}

// listBudget is what one list request may still read, shared by its
// targets' goroutines; the first to exceed it cancels the others.
type listBudget struct {
	bytes, items atomic.Int64
	over         atomic.Bool
	cancel       context.CancelFunc
}

// spend counts what a page brings; false (and the others cancelled) once
// the request is past a bound.
func (lb *listBudget) spend(bytes, items int) bool {
	if lb.over.Load() || lb.bytes.Add(int64(bytes)) > maxListBytes || lb.items.Add(int64(items)) > maxListItems {
		if lb.over.CompareAndSwap(false, true) {
			lb.cancel()
		}
		return false
	}
	return true
}

// collect sends a list method to each target concurrently and reads every
// page of its answer. A target that answers "method not found" lists
// nothing: it did not declare its capabilities, or declared them wrongly.
// A target with more than maxPages pages fails; a request whose targets
// together list more than maxListBytes or maxListItems fails as a whole
// (the error response), so a list is never cut short silently.
func (s *Session) collect(ctx context.Context, clientID jsonrpc.ID, targets []int, method, key string) ([]listPart, *jsonrpc.Response) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	budget := &listBudget{cancel: cancel}
	parts := make([]listPart, len(targets))
	var wg sync.WaitGroup
	for pi, i := range targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := s.b.targets[i].Name
			malformed := func() {
				parts[pi].err = errorResponse(clientID, jsonrpc.CodeInternalError, fmt.Sprintf("target %s: malformed %s result", name, method))
			}
			cursor := ""
			for range maxPages {
				params := json.RawMessage(`{}`)
				if cursor != "" {
					params, _ = json.Marshal(map[string]string{"cursor": cursor})
				}
				r := s.forward(ctx, i, clientID, method, params, nil)
				if budget.over.Load() {
					return
				}
				if isMethodNotFound(r) {
					return
				}
				if r.Error != nil {
					parts[pi].err = r
					return
				}
				if !budget.spend(len(r.Result), 0) {
					return
				}
				var page map[string]json.RawMessage
				if json.Unmarshal(r.Result, &page) != nil {
					malformed()
					return
				}
				items, ok := pageItems(page[key], budget)
				if budget.over.Load() {
					return
				}
				if !ok {
					malformed()
					return
				}
				parts[pi].items = append(parts[pi].items, items...)
				cursor = ""
				_ = json.Unmarshal(page["nextCursor"], &cursor)
				if cursor == "" {
					return
				}
			}
			parts[pi].err = errorResponse(clientID, jsonrpc.CodeInternalError,
				fmt.Sprintf("target %s: %s has more than %d pages, the gateway's bound for one list request", name, method, maxPages))
		}()
	}
	wg.Wait()
	if budget.over.Load() {
		return nil, errorResponse(clientID, jsonrpc.CodeInternalError,
			fmt.Sprintf("%s: the targets list more than the gateway's bound for one list request (%d MiB, %d items)", method, maxListBytes>>20, maxListItems))
	}
	return parts, nil
}

// pageItems decodes a page's array of items one at a time, each counted
// against the budget before it is kept, so that a page of tiny items
// cannot build millions of maps. Absent or null is no items; anything but
// an array of objects is malformed (false).
func pageItems(raw json.RawMessage, budget *listBudget) ([]map[string]json.RawMessage, bool) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, true
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
		return nil, false
	}
	var items []map[string]json.RawMessage
	for dec.More() {
		if !budget.spend(0, 1) {
			return nil, false
		}
		var item map[string]json.RawMessage
		if err := dec.Decode(&item); err != nil || item == nil {
			return nil, false
		}
		items = append(items, item)
	}
	return items, true
}

func isMethodNotFound(r *jsonrpc.Response) bool {
	var we *jsonrpc.Error
	return r.Error != nil && errors.As(r.Error, &we) && we.Code == jsonrpc.CodeMethodNotFound
}

// methodNotFound is the gateway's own answer for a method no target
// serves.
func methodNotFound(id jsonrpc.ID, method string) *jsonrpc.Response {
	return errorResponse(id, jsonrpc.CodeMethodNotFound, "Method not found: "+method)
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
		return i, name, found && i >= 0 // -1: several targets serve it
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
		if r := s.ambiguous(clientID, kind, what, name, authz); r != nil {
			return r
		}
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
	if !s.capsOf(i).supports(method) {
		return methodNotFound(clientID, method)
	}
	// The params go on re-encoded from what was checked, never as received:
	// a duplicate "name" key must not let the target read another name than
	// the rule saw.
	p[field], _ = json.Marshal(own)
	params, err := json.Marshal(p)
	if err != nil {
		return errorResponse(clientID, jsonrpc.CodeInvalidParams, "invalid params")
	}
	return s.fromTarget(i, method, s.forward(ctx, i, clientID, method, params, k))
}

// fromTarget puts the client's prefixes on the URIs and task ids in a
// target's result.
func (s *Session) fromTarget(i int, method string, r *jsonrpc.Response) *jsonrpc.Response {
	if r.Error != nil || len(r.Result) == 0 {
		return r
	}
	target := s.b.targets[i].Name
	if s.b.prefix {
		r.Result = prefixContentURIs(r.Result, method, target)
	}
	if s.b.multi() && (method == "tools/call" || strings.HasPrefix(method, "tasks/")) {
		r.Result = prefixTaskIDs(r.Result, target)
	}
	return r
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
	what := map[ItemKind]string{Prompt: "prompt", Resource: "resource"}[kind]
	i, own, ok := s.resolve(ctx, kind, name, authz)
	if !ok {
		if r := s.ambiguous(clientID, kind, what, name, authz); r != nil {
			return r
		}
	}
	if !ok || !authz.allowed(kind, own, s.b.targets[i].Name) {
		return unknown(clientID, what, name)
	}
	if !s.capsOf(i).supports("completion/complete") {
		return methodNotFound(clientID, "completion/complete")
	}
	// Re-encoded from what was checked (see routed).
	p.Ref[field], _ = json.Marshal(own)
	var all map[string]json.RawMessage
	_ = json.Unmarshal(params, &all)
	all["ref"], _ = json.Marshal(p.Ref)
	params, _ = json.Marshal(all)
	return s.forward(ctx, i, clientID, "completion/complete", params, nil)
}

// broadcast sends a call to every target that serves it and answers with
// an empty result (logging/setLevel).
func (s *Session) broadcast(ctx context.Context, clientID jsonrpc.ID, method string, params json.RawMessage) *jsonrpc.Response {
	targets := s.serving(method)
	if len(targets) == 0 {
		return s.notServed(clientID, method)
	}
	errs := make([]*jsonrpc.Response, len(targets))
	var wg sync.WaitGroup
	for pi, i := range targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if r := s.forward(ctx, i, clientID, method, params, nil); r.Error != nil && !isMethodNotFound(r) {
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
	if s.b.multi() {
		switch r.Method {
		case "tasks/list":
			return s.listTasks(ctx, r.ID)
		case "tasks/get", "tasks/result", "tasks/cancel":
			return s.taskCall(ctx, r, k, info)
		}
	}
	if !clientRequests[r.Method] {
		// Not a method MCP defines: it reaches no target.
		return methodNotFound(r.ID, r.Method)
	}
	// Anything else goes to a single target as it is; with several there is
	// no telling which.
	if !s.b.multi() {
		if targets := s.serving(r.Method); len(targets) == 1 {
			info.Target = s.b.targets[targets[0]].Name
			return s.forward(ctx, targets[0], r.ID, r.Method, r.Params, k)
		}
		return s.notServed(r.ID, r.Method)
	}
	return methodNotFound(r.ID, r.Method)
}

// clientRequests are the requests MCP defines from client to server, up
// to the newest protocol version the SDK speaks (server/discover and
// subscriptions/listen). dispatch interprets most; the rest go to a single
// target as they are. Any other method answers -32601 and reaches no
// target: a relay must not become a way to send targets what no client
// may (a "Tools/call" or "tools/call\x00" the rules never saw).
var clientRequests = map[string]bool{
	"initialize": true, "ping": true,
	"tools/list": true, "tools/call": true,
	"prompts/list": true, "prompts/get": true,
	"resources/list": true, "resources/templates/list": true, "resources/read": true,
	"resources/subscribe": true, "resources/unsubscribe": true,
	"completion/complete": true, "logging/setLevel": true,
	"tasks/get": true, "tasks/result": true, "tasks/list": true, "tasks/cancel": true,
	"server/discover": true, "subscriptions/listen": true,
}

// clientNotifications are the notifications MCP defines from client to
// server (notifications/tasks/status goes both ways); others are dropped.
var clientNotifications = map[string]bool{
	"notifications/initialized":        true,
	"notifications/cancelled":          true,
	"notifications/progress":           true,
	"notifications/roots/list_changed": true,
	"notifications/tasks/status":       true,
}

// multi reports whether several targets are multiplexed.
func (b *Backend) multi() bool { return len(b.targets) > 1 }

// taskCall routes tasks/get, tasks/result and tasks/cancel by the target
// prefix of the task id, which the gateway put there when the task was
// created.
func (s *Session) taskCall(ctx context.Context, r *jsonrpc.Request, k *sink, info *Outcome) *jsonrpc.Response {
	p, ok := object(r.Params)
	if !ok {
		return errorResponse(r.ID, jsonrpc.CodeInvalidParams, "params must be an object")
	}
	var id string
	if json.Unmarshal(p["taskId"], &id) != nil || id == "" {
		return errorResponse(r.ID, jsonrpc.CodeInvalidParams, "params.taskId is required")
	}
	i, own, found := s.b.splitTaskID(id)
	if !found {
		return errorResponse(r.ID, jsonrpc.CodeInvalidParams, "Unknown task: "+id)
	}
	if !s.capsOf(i).supports(r.Method) {
		return methodNotFound(r.ID, r.Method)
	}
	info.Target = s.b.targets[i].Name
	p["taskId"], _ = json.Marshal(own)
	params, err := json.Marshal(p)
	if err != nil {
		return errorResponse(r.ID, jsonrpc.CodeInvalidParams, "invalid params")
	}
	return s.fromTarget(i, r.Method, s.forward(ctx, i, r.ID, r.Method, params, k))
}

// listTasks merges tasks/list across the targets that list tasks.
func (s *Session) listTasks(ctx context.Context, clientID jsonrpc.ID) *jsonrpc.Response {
	targets := s.serving("tasks/list")
	if len(targets) == 0 {
		return s.notServed(clientID, "tasks/list")
	}
	parts, tooMuch := s.collect(ctx, clientID, targets, "tasks/list", "tasks")
	if tooMuch != nil {
		return tooMuch
	}
	out := []map[string]json.RawMessage{}
	for pi, p := range parts {
		if p.err != nil {
			if !s.b.failOpen {
				return p.err
			}
			continue
		}
		prefix := s.b.targets[targets[pi]].Name + "+"
		for _, t := range p.items {
			if prefixString(t, "taskId", prefix) {
				out = append(out, t)
			}
		}
	}
	data, err := json.Marshal(map[string]any{"tasks": out})
	if err != nil {
		return errorResponse(clientID, jsonrpc.CodeInternalError, err.Error())
	}
	return &jsonrpc.Response{ID: clientID, Result: data}
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

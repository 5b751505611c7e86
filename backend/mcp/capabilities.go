package mcp

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// targetCaps is what a target declared in its initialize result: which
// capabilities, and within resources and tasks the sub-features that
// decide whether a method reaches it.
type targetCaps struct {
	has       map[string]bool // top-level capability names
	subscribe bool            // resources.subscribe
	taskList  bool            // tasks.list
	taskStop  bool            // tasks.cancel
}

// parseCaps reads the capabilities of an initialize result; nil when the
// result has none the gateway can read (then every method is tried).
func parseCaps(result json.RawMessage) *targetCaps {
	var r struct {
		Capabilities map[string]json.RawMessage `json:"capabilities"`
	}
	if json.Unmarshal(result, &r) != nil || r.Capabilities == nil {
		return nil
	}
	c := &targetCaps{has: map[string]bool{}}
	for name, v := range r.Capabilities {
		if string(v) != "null" {
			c.has[name] = true
		}
	}
	var res struct {
		Subscribe bool `json:"subscribe"`
	}
	_ = json.Unmarshal(r.Capabilities["resources"], &res)
	c.subscribe = res.Subscribe
	var tasks struct {
		List   json.RawMessage `json:"list"`
		Cancel json.RawMessage `json:"cancel"`
	}
	_ = json.Unmarshal(r.Capabilities["tasks"], &tasks)
	c.taskList = declared(tasks.List)
	c.taskStop = declared(tasks.Cancel)
	return c
}

func declared(v json.RawMessage) bool {
	return len(v) > 0 && string(v) != "null" && string(v) != "false"
}

// capabilityOf names the capability a client method needs from a target,
// or "" when it needs none (ping, notifications, anything unknown).
func capabilityOf(method string) string {
	switch method {
	case "tools/list", "tools/call":
		return "tools"
	case "prompts/list", "prompts/get":
		return "prompts"
	case "resources/list", "resources/templates/list", "resources/read", "resources/subscribe", "resources/unsubscribe":
		return "resources"
	case "logging/setLevel":
		return "logging"
	case "completion/complete":
		return "completions"
	}
	if strings.HasPrefix(method, "tasks/") {
		return "tasks"
	}
	return ""
}

// supports reports whether a target with these capabilities serves method.
// Unknown capabilities (nil) support everything: the target answers.
func (c *targetCaps) supports(method string) bool {
	if c == nil {
		return true
	}
	name := capabilityOf(method)
	if name == "" {
		return true
	}
	if !c.has[name] {
		return false
	}
	switch method {
	case "resources/subscribe", "resources/unsubscribe":
		return c.subscribe
	case "tasks/list":
		return c.taskList
	case "tasks/cancel":
		return c.taskStop
	}
	return true
}

// capabilitySet remembers, per target, the capabilities it declared the
// last time any session initialized it. A session resumed from its id (its
// targets not initialized again) routes by these.
type capabilitySet struct {
	byTarget []atomic.Pointer[targetCaps]
}

func newCapabilitySet(n int) *capabilitySet {
	return &capabilitySet{byTarget: make([]atomic.Pointer[targetCaps], n)}
}

func (cs *capabilitySet) learn(i int, c *targetCaps) {
	if c != nil {
		cs.byTarget[i].Store(c)
	}
}

func (cs *capabilitySet) of(i int) *targetCaps { return cs.byTarget[i].Load() }

// capsOf is what the session knows of target i's capabilities.
func (s *Session) capsOf(i int) *targetCaps {
	s.mu.Lock()
	c := s.caps[i]
	s.mu.Unlock()
	if c == nil {
		c = s.b.caps.of(i)
	}
	return c
}

// noteCaps records a target's initialize result.
func (s *Session) noteCaps(i int, result json.RawMessage) {
	c := parseCaps(result)
	if c == nil {
		return
	}
	s.mu.Lock()
	s.caps[i] = c
	s.mu.Unlock()
	s.b.caps.learn(i, c)
}

// notServed answers a method that no live target serves: with the
// failure of a target that declared it and has failed since (a client
// should hear that the target is gone, not that the method does not
// exist), else Method not found.
func (s *Session) notServed(id jsonrpc.ID, method string) *jsonrpc.Response {
	now := time.Now()
	s.mu.Lock()
	var failed []int
	var failures []error
	for i, u := range s.ups {
		if u == nil {
			if s.parked[i] && s.drops[i].waiting(now) {
				failed, failures = append(failed, i), append(failures, fmt.Errorf("target %s %w", s.b.targets[i].Name, errNotInitialized))
			}
			continue
		}
		if f := u.dead.Load(); f != nil {
			failed, failures = append(failed, i), append(failures, *f)
		}
	}
	s.mu.Unlock()
	for k, i := range failed {
		if s.capsOf(i).supports(method) {
			return errorResponse(id, jsonrpc.CodeInternalError, failures[k].Error())
		}
	}
	return methodNotFound(id, method)
}

// serving lists the targets a client method may go to: connected and not
// failed, or parked (started again on use), and declaring the capability
// the method needs.
func (s *Session) serving(method string) []int {
	now := time.Now()
	s.mu.Lock()
	var out []int
	for i, u := range s.ups {
		// A dropped target waiting for its next try is left out (failOpen).
		if (u != nil && u.dead.Load() == nil) || s.parked[i] && !s.drops[i].waiting(now) {
			out = append(out, i)
		}
	}
	s.mu.Unlock()
	kept := out[:0]
	for _, i := range out {
		if s.capsOf(i).supports(method) {
			kept = append(kept, i)
		}
	}
	return kept
}

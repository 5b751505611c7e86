package mcp

import (
	"bytes"
	"encoding/json"
	"strings"
)

// The client sees every item of a multiplexed target under a prefix: tools
// and prompts as "<target>_<name>", resources as "<target>+<uri>" and
// tasks as "<target>+<taskId>". The functions here put that prefix on what
// targets send back, so a URI or task id the client reads from any result
// can be used again as it is.

// relatedTaskMeta is the _meta key that ties a message to a task.
const relatedTaskMeta = "io.modelcontextprotocol/related-task"

// prefixContentURIs prefixes the resource URIs inside a result's content
// (resource links and embedded resources) for method's result shape. It
// returns the result unchanged when nothing needed a prefix.
func prefixContentURIs(result json.RawMessage, method, target string) json.RawMessage {
	obj, ok := object(result)
	if !ok {
		return result
	}
	changed := false
	switch method {
	case "resources/read":
		changed = editList(obj, "contents", func(item map[string]json.RawMessage) bool {
			return prefixString(item, "uri", target+"+")
		})
	case "tools/call", "tasks/result":
		changed = editList(obj, "content", func(item map[string]json.RawMessage) bool {
			return prefixContentBlock(item, target)
		})
	case "prompts/get":
		changed = editList(obj, "messages", func(msg map[string]json.RawMessage) bool {
			return editObject(msg, "content", func(block map[string]json.RawMessage) bool {
				return prefixContentBlock(block, target)
			})
		})
	}
	if !changed {
		return result
	}
	return encode(obj, result)
}

// prefixContentBlock prefixes the URI of a resource link or an embedded
// resource.
func prefixContentBlock(block map[string]json.RawMessage, target string) bool {
	var typ string
	_ = json.Unmarshal(block["type"], &typ)
	switch typ {
	case "resource_link":
		return prefixString(block, "uri", target+"+")
	case "resource":
		return editObject(block, "resource", func(res map[string]json.RawMessage) bool {
			return prefixString(res, "uri", target+"+")
		})
	}
	return false
}

// prefixTaskIDs prefixes the task ids in a target's result: a created task
// (tools/call with a task), a task (tasks/get, tasks/cancel), a list of
// tasks, and the related-task metadata of a task's result.
func prefixTaskIDs(result json.RawMessage, target string) json.RawMessage {
	obj, ok := object(result)
	if !ok {
		return result
	}
	p := target + "+"
	changed := prefixString(obj, "taskId", p)
	changed = editObject(obj, "task", func(t map[string]json.RawMessage) bool { return prefixString(t, "taskId", p) }) || changed
	changed = editList(obj, "tasks", func(t map[string]json.RawMessage) bool { return prefixString(t, "taskId", p) }) || changed
	changed = editObject(obj, "_meta", func(m map[string]json.RawMessage) bool {
		return editObject(m, relatedTaskMeta, func(t map[string]json.RawMessage) bool { return prefixString(t, "taskId", p) })
	}) || changed
	if !changed {
		return result
	}
	return encode(obj, result)
}

// splitTaskID finds the target of a client's task id and the target's own
// id.
func (b *Backend) splitTaskID(id string) (int, string, bool) {
	target, own, found := strings.Cut(id, "+")
	if !found || own == "" {
		return 0, "", false
	}
	i, known := b.byName[target]
	return i, own, known
}

// object decodes a JSON object's members; false for anything else.
func object(raw json.RawMessage) (map[string]json.RawMessage, bool) {
	var obj map[string]json.RawMessage
	trimmed := bytes.TrimLeft(raw, " \t\r\n")
	if len(trimmed) == 0 || trimmed[0] != '{' || json.Unmarshal(trimmed, &obj) != nil {
		return nil, false
	}
	return obj, true
}

func encode(obj map[string]json.RawMessage, fallback json.RawMessage) json.RawMessage {
	out, err := json.Marshal(obj)
	if err != nil {
		return fallback
	}
	return out
}

// prefixString puts prefix before the string field of obj.
func prefixString(obj map[string]json.RawMessage, field, prefix string) bool {
	var v string
	if json.Unmarshal(obj[field], &v) != nil || v == "" {
		return false
	}
	data, err := json.Marshal(prefix + v)
	if err != nil {
		return false
	}
	obj[field] = data
	return true
}

// editObject applies edit to the object field of obj, writing it back when
// edit changed it.
func editObject(obj map[string]json.RawMessage, field string, edit func(map[string]json.RawMessage) bool) bool {
	inner, ok := object(obj[field])
	if !ok || !edit(inner) {
		return false
	}
	data, err := json.Marshal(inner)
	if err != nil {
		return false
	}
	obj[field] = data
	return true
}

// editList applies edit to each object of the list field of obj.
func editList(obj map[string]json.RawMessage, field string, edit func(map[string]json.RawMessage) bool) bool {
	var items []json.RawMessage
	if json.Unmarshal(obj[field], &items) != nil {
		return false
	}
	changed := false
	for i, raw := range items {
		item, ok := object(raw)
		if !ok || !edit(item) {
			continue
		}
		if data, err := json.Marshal(item); err == nil {
			items[i] = data
			changed = true
		}
	}
	if !changed {
		return false
	}
	data, err := json.Marshal(items)
	if err != nil {
		return false
	}
	obj[field] = data
	return true
}

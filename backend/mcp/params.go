package mcp

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/valyala/fasthttp"

	codec "github.com/relaygate/gateway/codec/jsonrpc"
)

// maxSafeInteger is the largest integer a JSON number carries exactly in
// every implementation (JavaScript's Number.MAX_SAFE_INTEGER, 2^53-1).
const maxSafeInteger = 1<<53 - 1

// paramsProblem says what is wrong, by MCP's schema, with the part of a
// client message's params that every method shares ("" when nothing is):
// params an object when present; its _meta an object when present (never
// null); _meta.progressToken a string or an integer; the related-task
// metadata an object with a string taskId. The gateway checks these
// itself, before any target: the TypeScript SDK refuses such a message as
// a whole, over streamable HTTP with a 400 that is no answer to the call,
// over stdio by dropping it silently (the call then waited for the call
// timeout), and the gateway reads the progress token to route progress.
func paramsProblem(params json.RawMessage) string {
	p := bytes.TrimSpace(params)
	if len(p) == 0 || string(p) == "null" {
		return ""
	}
	if p[0] != '{' {
		return "params must be an object" // the codec checked that it is JSON
	}
	if !bytes.Contains(p, []byte("_meta")) && !bytes.Contains(p, []byte(`\u`)) {
		// No _meta member, spelled out or escaped: nothing to decode (a
		// tool's arguments may be megabytes).
		return ""
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(p, &fields) != nil {
		return "params must be an object"
	}
	raw, ok := fields["_meta"]
	if !ok {
		return ""
	}
	var meta map[string]json.RawMessage
	if b := bytes.TrimSpace(raw); len(b) == 0 || b[0] != '{' || json.Unmarshal(b, &meta) != nil {
		return "params._meta must be an object"
	}
	if tok, ok := meta["progressToken"]; ok && !progressToken(tok) {
		return "params._meta.progressToken must be a string or an integer"
	}
	if rt, ok := meta[relatedTaskMeta]; ok {
		var task map[string]json.RawMessage
		if b := bytes.TrimSpace(rt); len(b) == 0 || b[0] != '{' || json.Unmarshal(b, &task) != nil || !isJSONString(task["taskId"]) {
			return "params._meta[\"" + relatedTaskMeta + "\"] must be an object with a string taskId"
		}
	}
	return ""
}

// progressToken reports a JSON value MCP takes as a progress token: a
// string, or a number with an integer value (1, 1.0, 1e3) that a JSON
// number carries exactly.
func progressToken(raw json.RawMessage) bool {
	b := bytes.TrimSpace(raw)
	if isJSONString(b) {
		return true
	}
	if len(b) == 0 || (b[0] != '-' && (b[0] < '0' || b[0] > '9')) {
		return false // null, true, false, an object or an array
	}
	f, err := strconv.ParseFloat(string(b), 64)
	return err == nil && f == math.Trunc(f) && math.Abs(f) <= maxSafeInteger
}

func isJSONString(raw json.RawMessage) bool {
	b := bytes.TrimSpace(raw)
	return len(b) >= 2 && b[0] == '"'
}

// refuseParams answers a client message whose params paramsProblem
// refused: a call with -32602 (HTTP 200, as other refused calls), a
// notification, which has no answer, with HTTP 400 and the error without
// id, as the MCP transport has a server refuse a message it cannot take.
func refuseParams(fctx *fasthttp.RequestCtx, r *jsonrpc.Request, problem string) {
	if r.ID.IsValid() {
		writeJSON(fctx, errorResponse(r.ID, jsonrpc.CodeInvalidParams, "Invalid params: "+problem))
		return
	}
	fctx.Response.SetStatusCode(fasthttp.StatusBadRequest)
	fctx.Response.Header.SetContentType("application/json")
	body, _ := codec.Encode(codec.ErrorResponse(jsonrpc.ID{}, codec.CodeInvalidParams, "Invalid params: "+problem))
	fctx.Response.SetBody(body)
}

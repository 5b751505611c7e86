package aipolicy

import (
	"unsafe"

	"github.com/relaygate/gateway/backend/llm/convert"
	"github.com/relaygate/gateway/codec/llm"
	"github.com/relaygate/gateway/codec/llm/tokens"
	"github.com/relaygate/gateway/config"
)

// scope is a set of content scopes (config.ContentScope) as bits.
type scope uint8

const (
	scopeSystem scope = 1 << iota
	scopeMessages
	scopeToolOutput
	scopeToolInput
)

// scopeOf turns a guard's configured scope into bits (nil is the default).
func scopeOf(cs []config.ContentScope) scope {
	if cs == nil {
		cs = config.DefaultContentScope
	}
	var s scope
	for _, c := range cs {
		switch c {
		case config.ScopeSystemPrompt:
			s |= scopeSystem
		case config.ScopeMessages:
			s |= scopeMessages
		case config.ScopeToolOutput:
			s |= scopeToolOutput
		case config.ScopeToolInput:
			s |= scopeToolInput
		}
	}
	return s
}

// textSpan is a string token of the body that a guard may read, and its
// text as the guards left it.
type textSpan struct {
	tok
	scope scope
	// The current text is arena[off:off+n] when own is set (decoded from
	// escapes or masked), else the token's inner bytes.
	off, n int
	own    bool
	masked bool
	// escape: the current text must be escaped when written (it was
	// decoded from escapes, or a guard put text in it that may need
	// some). Without it the text is the token's inner bytes with plain
	// labels put in, which a JSON string holds as is.
	escape bool
	// msg numbers the message the text belongs to (texts of one message
	// share it) and role is that message's role: remote guards judge
	// whole messages (guardrail.PerMessage).
	msg  int32
	role string
}

// texts collects the string tokens of a body that hold prompt text, with
// their scopes, in body order. The walkers follow agentgateway's
// visit_text_mut of each request type (crates/llm/src/types): which
// members are text, and which scope each belongs to.
type texts struct {
	tp     *tape
	d      []byte
	want   scope
	spans  []textSpan
	keyBuf []byte // key's decoded text
	msgN   int32  // the message being read
	role   string // its role, when known before its texts
}

// reset starts over on the text tp indexes (to all levels).
func (t *texts) reset(tp *tape, want scope) {
	t.tp, t.d, t.want, t.spans = tp, tp.d, want, t.spans[:0]
	t.msgN, t.role = 0, ""
}

// message starts a new message of the given role ("" when it is read
// later: setRole gives it).
func (t *texts) message(role string) {
	t.msgN++
	t.role = role
}

// setRole gives the texts recorded since mark the role read after them.
func (t *texts) setRole(mark int, role string) {
	for i := mark; i < len(t.spans); i++ {
		t.spans[i].role = role
	}
}

// roleName is a role as a constant string when it is a common one (key's
// text is only valid until the next key), else a copy.
func roleName(r string) string {
	switch r {
	case "system":
		return "system"
	case "developer":
		return "developer"
	case "user":
		return "user"
	case "assistant":
		return "assistant"
	case "tool":
		return "tool"
	case "function":
		return "function"
	case "":
		return ""
	}
	return string([]byte(r))
}

// pending is the scope of a message's text read before its role is known
// (the role may come after the content); settle gives it its scope.
const pending scope = 0

// add records v when it is a string in a wanted scope (or pending).
func (t *texts) add(v tok, s scope) {
	if (s == pending || t.want&s != 0) && v.is(t.d, '"') && v.end-v.start >= 2 {
		t.spans = append(t.spans, textSpan{tok: v, scope: s, msg: t.msgN, role: t.role})
	}
}

// settle gives the pending texts recorded since mark the scope s, and
// drops them if s is not wanted.
func (t *texts) settle(mark int, s scope) {
	kept := t.spans[:mark]
	for _, sp := range t.spans[mark:] {
		if sp.scope == pending {
			sp.scope = s
		}
		if t.want&sp.scope != 0 {
			kept = append(kept, sp)
		}
	}
	t.spans = kept
}

// addAll records every string value within v (member names aside): tool
// inputs and outputs are arbitrary JSON, and agentgateway reads every
// string in them (visit_json_strings).
func (t *texts) addAll(v tok, s scope) {
	if (s != pending && t.want&s == 0) || v.end <= v.start {
		return
	}
	switch t.d[v.start] {
	case '"':
		t.add(v, s)
	case '[':
		it := t.tp.walk(v)
		for e, ok := it.element(); ok; e, ok = it.element() {
			t.addAll(e, s)
		}
	case '{':
		it := t.tp.walk(v)
		for _, m, ok := it.member(); ok; _, m, ok = it.member() {
			t.addAll(m, s)
		}
	}
}

// walk collects the texts of a body in format f; other formats have none.
func (t *texts) walk(f convert.Format) {
	top, ok := t.tp.root()
	if !ok || !top.is(t.d, '{') {
		return
	}
	switch f {
	case convert.Chat:
		t.chat(top)
	case convert.Messages:
		t.messages(top)
	case convert.Responses:
		t.responses(top)
	}
}

// toolDefinitionTokens counts, in encoding e, the tool definitions of a
// body in format f as their JSON text: Chat's "tools" and legacy
// "functions", Messages' and Responses' "tools". Definitions are sent again
// with every turn, so they are counted through tokens.CountCached.
func (t *texts) toolDefinitionTokens(f convert.Format, e tokens.Encoding) int {
	top, ok := t.tp.root()
	if !ok || !top.is(t.d, '{') {
		return 0
	}
	n := 0
	it := t.tp.walk(top)
	for k, v, ok := it.member(); ok; k, v, ok = it.member() {
		if !v.is(t.d, '[') {
			continue
		}
		switch name := t.key(k); {
		case name == "tools" && (f == convert.Chat || f == convert.Messages || f == convert.Responses),
			name == "functions" && f == convert.Chat:
			n += tokens.CountCached(e, t.d[v.start:v.end])
		}
	}
	return n
}

// key is the text of the string token v (a member name, a role, a type):
// its inner bytes when it has no escapes, else decoded into t.keyBuf, so
// valid until the next key. It is "" for anything but a string.
func (t *texts) key(v tok) string {
	if v.end-v.start < 2 || t.d[v.start] != '"' {
		return ""
	}
	in := t.d[v.start+1 : v.end-1]
	for _, c := range in {
		if c == '\\' {
			var err error
			if t.keyBuf, err = llm.AppendUnquoted(t.keyBuf[:0], t.d[v.start:v.end]); err != nil {
				return ""
			}
			return unsafe.String(unsafe.SliceData(t.keyBuf), len(t.keyBuf))
		}
	}
	return unsafe.String(unsafe.SliceData(in), len(in))
}

// Every member of a given name is read, not only the first or the last: a
// body with a duplicate member is read by different parsers differently
// (sonic keeps the last, others the first or refuse it), and a guard must
// see whichever one the provider will.

// chat reads an OpenAI Chat Completions body: each message's content (text
// or text parts), scoped by its role; its tool calls' arguments (and a
// custom tool's input, and the legacy function_call) as tool input.
func (t *texts) chat(top tok) {
	it := t.tp.walk(top)
	for n, v, ok := it.member(); ok; n, v, ok = it.member() {
		if !v.is(t.d, '[') || t.key(n) != "messages" {
			continue
		}
		msgs := t.tp.walk(v)
		for m, ok := msgs.element(); ok; m, ok = msgs.element() {
			if m.is(t.d, '{') {
				t.chatMessage(m)
			}
		}
	}
}

// chatMessage reads one message in one pass: its role may come after its
// content, so the content's scope is settled at the end.
func (t *texts) chatMessage(msg tok) {
	mark := len(t.spans)
	t.message("")
	var s scope
	role := "user"
	it := t.tp.walk(msg)
	for n, v, ok := it.member(); ok; n, v, ok = it.member() {
		switch t.key(n) {
		case "role":
			s |= chatRoleScope(t.key(v)) // two roles: both scopes, so no duplicate hides a text
			role = roleName(t.key(v))
		case "content":
			t.textOrParts(v, pending, anyPart)
		case "tool_calls":
			if !v.is(t.d, '[') {
				continue
			}
			calls := t.tp.walk(v)
			for c, ok := calls.element(); ok; c, ok = calls.element() {
				if c.is(t.d, '{') {
					t.addAt(c, "function", "arguments", scopeToolInput)
					t.addAt(c, "custom", "input", scopeToolInput)
				}
			}
		case "function_call":
			t.addAllOf(v, "arguments", scopeToolInput)
		}
	}
	if s == 0 {
		s = chatRoleScope("")
	}
	t.settle(mark, s)
	t.setRole(mark, role)
}

// chatRoleScope: tool results are tool output, system and developer
// messages the system prompt, the rest messages.
func chatRoleScope(role string) scope {
	switch role {
	case "tool", "function":
		return scopeToolOutput
	case "system", "developer":
		return scopeSystem
	}
	return scopeMessages
}

// responsesRoleScope: system and developer messages are the system prompt.
func responsesRoleScope(role string) scope {
	switch role {
	case "system", "developer":
		return scopeSystem
	}
	return scopeMessages
}

// anyPart: a Chat content part's text is its "text" member, whatever its
// type.
func anyPart(*texts, tok) bool { return true }

// textOrParts records content that is a string, or the "text" of each of
// its parts that isText accepts.
func (t *texts) textOrParts(v tok, s scope, isText func(*texts, tok) bool) {
	if v.is(t.d, '"') {
		t.add(v, s)
		return
	}
	if !v.is(t.d, '[') {
		return
	}
	parts := t.tp.walk(v)
	for p, ok := parts.element(); ok; p, ok = parts.element() {
		if p.is(t.d, '{') && isText(t, p) {
			t.addStringsOf(p, "text", s)
		}
	}
}

// addAllOf records the strings within obj's members called name.
func (t *texts) addAllOf(obj tok, name string, s scope) {
	if !obj.is(t.d, '{') {
		return
	}
	it := t.tp.walk(obj)
	for n, v, ok := it.member(); ok; n, v, ok = it.member() {
		if t.key(n) == name {
			t.addAll(v, s)
		}
	}
}

// addStringsOf records obj's members called name that are strings.
func (t *texts) addStringsOf(obj tok, name string, s scope) {
	it := t.tp.walk(obj)
	for n, v, ok := it.member(); ok; n, v, ok = it.member() {
		if t.key(n) == name {
			t.add(v, s)
		}
	}
}

// addAt records the strings within obj.outer.inner.
func (t *texts) addAt(obj tok, outer, inner string, s scope) {
	it := t.tp.walk(obj)
	for n, v, ok := it.member(); ok; n, v, ok = it.member() {
		if t.key(n) == outer {
			t.addAllOf(v, inner, s)
		}
	}
}

// messages reads an Anthropic Messages body: the system prompt (a string or
// text blocks) and each message's content (text, text blocks, and the
// tool-use and tool-result blocks by type).
func (t *texts) messages(top tok) {
	it := t.tp.walk(top)
	for n, v, ok := it.member(); ok; n, v, ok = it.member() {
		switch t.key(n) {
		case "system":
			t.message("system")
			t.textOrParts(v, scopeSystem, isTextBlock)
		case "messages":
			if !v.is(t.d, '[') {
				continue
			}
			msgs := t.tp.walk(v)
			for m, ok := msgs.element(); ok; m, ok = msgs.element() {
				if m.is(t.d, '{') {
					t.anthropicContent(m)
				}
			}
		}
	}
}

// isTextBlock: agentgateway reads a block as text when it has a string
// "type" and a string "text" (its untagged ContentPart::Text), whatever the
// type says.
func isTextBlock(t *texts, part tok) bool {
	var typ, text bool
	it := t.tp.walk(part)
	for n, v, ok := it.member(); ok; n, v, ok = it.member() {
		if v.is(t.d, '"') {
			switch t.key(n) {
			case "type":
				typ = true
			case "text":
				text = true
			}
		}
	}
	return typ && text
}

// anthropicContent reads one message's content: every message is in the
// messages scope, whatever its role; tool blocks by their type.
func (t *texts) anthropicContent(msg tok) {
	mark := len(t.spans)
	t.message("")
	role := "user"
	it := t.tp.walk(msg)
	for n, v, ok := it.member(); ok; n, v, ok = it.member() {
		if t.key(n) == "role" {
			role = roleName(t.key(v))
			continue
		}
		if t.key(n) != "content" {
			continue
		}
		if v.is(t.d, '"') {
			t.add(v, scopeMessages)
			continue
		}
		if !v.is(t.d, '[') {
			continue
		}
		blocks := t.tp.walk(v)
		for b, ok := blocks.element(); ok; b, ok = blocks.element() {
			if !b.is(t.d, '{') {
				continue
			}
			if isTextBlock(t, b) {
				t.addStringsOf(b, "text", scopeMessages)
				continue
			}
			t.typedMembers(b, anthropicBlockMembers)
		}
	}
	t.setRole(mark, role)
}

// typedMember is a member of a typed block or item that holds text.
type typedMember struct {
	name  string
	scope scope
}

// anthropicBlockMembers are the text members of Anthropic's non-text content
// blocks, by block type (agentgateway's visit_tool_part_text). Types not
// listed (image, thinking, redacted_thinking, web_search_tool_result, ...)
// have none: no readable text, or signed content a mask would break.
var anthropicBlockMembers = map[string][]typedMember{
	"tool_result":                            {{"content", scopeToolOutput}},
	"mcp_tool_result":                        {{"content", scopeToolOutput}},
	"code_execution_tool_result":             {{"content", scopeToolOutput}},
	"bash_code_execution_tool_result":        {{"content", scopeToolOutput}},
	"text_editor_code_execution_tool_result": {{"content", scopeToolOutput}},
	"tool_search_tool_result":                {{"content", scopeToolOutput}},
	"web_fetch_tool_result":                  {{"content", scopeToolOutput}},
	"advisor_tool_result":                    {{"content", scopeToolOutput}},
	"tool_use":                               {{"input", scopeToolInput}},
	"server_tool_use":                        {{"input", scopeToolInput}},
	"mcp_tool_use":                           {{"input", scopeToolInput}},
	"document":                               {{"source", scopeMessages}, {"title", scopeMessages}, {"context", scopeMessages}},
	"search_result":                          {{"title", scopeMessages}, {"content", scopeMessages}},
	"compaction":                             {{"content", scopeMessages}},
	"mid_conv_system":                        {{"content", scopeSystem}},
}

// typedMembers records the text members of a block or item by its "type"
// (read with its escapes decoded, so that "tool\u005fuse" is a tool_use).
func (t *texts) typedMembers(obj tok, table map[string][]typedMember) {
	it := t.tp.walk(obj)
	for n, v, ok := it.member(); ok; n, v, ok = it.member() {
		if t.key(n) != "type" {
			continue
		}
		if want := table[t.key(v)]; len(want) > 0 {
			t.namedMembers(obj, want)
		}
	}
}

// namedMembers records every string within obj's members that want names.
func (t *texts) namedMembers(obj tok, want []typedMember) {
	it := t.tp.walk(obj)
	for n, v, ok := it.member(); ok; n, v, ok = it.member() {
		name := t.key(n)
		for _, w := range want {
			if name == w.name {
				t.addAll(v, w.scope)
			}
		}
	}
}

// responses reads an OpenAI Responses body: the instructions (system
// prompt), a string input, message items by role (text parts and
// refusals), and tool items by type.
func (t *texts) responses(top tok) {
	it := t.tp.walk(top)
	for n, v, ok := it.member(); ok; n, v, ok = it.member() {
		switch t.key(n) {
		case "instructions":
			t.message("system")
			t.add(v, scopeSystem)
		case "input":
			if v.is(t.d, '"') {
				t.message("user")
				t.add(v, scopeMessages)
				continue
			}
			if !v.is(t.d, '[') {
				continue
			}
			items := t.tp.walk(v)
			for item, ok := items.element(); ok; item, ok = items.element() {
				if item.is(t.d, '{') {
					t.responsesItem(item)
				}
			}
		}
	}
}

// responsesItem reads one input item: a message when it has a string role,
// else a tool item by type.
func (t *texts) responsesItem(item tok) {
	mark := len(t.spans)
	t.message("")
	var s scope
	hasRole := false
	role := ""
	it := t.tp.walk(item)
	for n, v, ok := it.member(); ok; n, v, ok = it.member() {
		switch t.key(n) {
		case "role":
			if v.is(t.d, '"') {
				hasRole = true
				s |= responsesRoleScope(t.key(v))
				role = roleName(t.key(v))
			}
		case "content":
			if v.is(t.d, '"') {
				t.add(v, pending)
				continue
			}
			if !v.is(t.d, '[') {
				continue
			}
			parts := t.tp.walk(v)
			for p, ok := parts.element(); ok; p, ok = parts.element() {
				if p.is(t.d, '{') {
					t.responsesPart(p, pending)
				}
			}
		}
	}
	if !hasRole {
		t.spans = t.spans[:mark]
		t.role = "tool"
		t.typedMembers(item, responsesItemMembers)
		return
	}
	t.settle(mark, s)
	t.setRole(mark, role)
}

// responsesPart reads a message's content part: refusals carry prose under
// "refusal", text parts under "text" (read only for the input_text and
// output_text types).
func (t *texts) responsesPart(p tok, s scope) {
	isText := false
	it := t.tp.walk(p)
	for n, v, ok := it.member(); ok; n, v, ok = it.member() {
		if t.key(n) == "type" {
			switch t.key(v) {
			case "input_text", "output_text":
				isText = true
			}
		}
	}
	it = t.tp.walk(p)
	for n, v, ok := it.member(); ok; n, v, ok = it.member() {
		switch t.key(n) {
		case "refusal":
			t.addAll(v, s)
		case "text":
			if isText {
				t.add(v, s)
			}
		}
	}
}

// responsesItemMembers are the text members of the Responses API's tool
// items, by item type (agentgateway's visit_tool_item_text). Types not
// listed (reasoning, compaction, item_reference, image_generation_call,
// additional_tools, ...) have none: no readable text, or content the API
// verifies on replay.
var responsesItemMembers = map[string][]typedMember{
	"function_call_output":    {{"output", scopeToolOutput}},
	"custom_tool_call_output": {{"output", scopeToolOutput}},
	"local_shell_call_output": {{"output", scopeToolOutput}},
	"shell_call_output":       {{"output", scopeToolOutput}},
	"apply_patch_call_output": {{"output", scopeToolOutput}},
	"program_output":          {{"result", scopeToolOutput}},
	"function_call":           {{"arguments", scopeToolInput}, {"output", scopeToolOutput}, {"error", scopeToolOutput}},
	"mcp_call":                {{"arguments", scopeToolInput}, {"output", scopeToolOutput}, {"error", scopeToolOutput}},
	"mcp_approval_request":    {{"arguments", scopeToolInput}, {"output", scopeToolOutput}, {"error", scopeToolOutput}},
	"custom_tool_call":        {{"input", scopeToolInput}},
	"program":                 {{"code", scopeToolInput}},
	"local_shell_call":        {{"action", scopeToolInput}, {"actions", scopeToolInput}, {"pending_safety_checks", scopeToolInput}},
	"shell_call":              {{"action", scopeToolInput}, {"actions", scopeToolInput}, {"pending_safety_checks", scopeToolInput}},
	"computer_call":           {{"action", scopeToolInput}, {"actions", scopeToolInput}, {"pending_safety_checks", scopeToolInput}},
	"web_search_call":         {{"action", scopeToolInput}, {"actions", scopeToolInput}, {"pending_safety_checks", scopeToolInput}},
	"apply_patch_call":        {{"operation", scopeToolInput}},
	"computer_call_output":    {{"acknowledged_safety_checks", scopeToolOutput}},
	"file_search_call":        {{"queries", scopeToolInput}, {"results", scopeToolOutput}},
	"code_interpreter_call":   {{"code", scopeToolInput}, {"outputs", scopeToolOutput}},
	"tool_search_call":        {{"arguments", scopeToolInput}},
	"mcp_list_tools":          {{"tools", scopeToolOutput}, {"error", scopeToolOutput}},
	"tool_search_output":      {{"tools", scopeToolOutput}, {"error", scopeToolOutput}},
	"mcp_approval_response":   {{"reason", scopeToolInput}},
}

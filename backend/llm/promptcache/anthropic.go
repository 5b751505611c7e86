package promptcache

import "github.com/relaygate/gateway/codec/llm"

// anthropic marks Anthropic Messages requests: a cache_control member on a
// block ({"type":"ephemeral"}, the 5-minute cache). A string system prompt
// or message content becomes one text block carrying it.
type anthropic struct{}

// ephemeral is the value of the cache_control member Apply adds.
const ephemeral = `{"type":"ephemeral"}`

func (anthropic) mark() string                   { return "cache_control" }
func (anthropic) toolsMember() string            { return "tools" }
func (anthropic) toolList(section []byte) []byte { return section }

// systemPoint marks the system prompt's last block.
func (anthropic) systemPoint(body, system []byte) point { return textPoint(body, system) }

// messagePoint marks the message's last block that can carry a point.
func (anthropic) messagePoint(body, message []byte) point {
	content, present, once := member(message, "content")
	if !present || !once {
		return none
	}
	return textPoint(body, content)
}

// toolsPoint marks the last tool definition.
func (anthropic) toolsPoint(body, tools []byte) point {
	var e elements
	e.reset(tools)
	var last []byte
	for e.next() {
		last = e.value
	}
	if !e.ok() || len(last) == 0 || last[0] != '{' {
		return none
	}
	b, ok := readBlock(last)
	if !ok {
		return none
	}
	return b.point(body, last)
}

// textPoint marks content that is a string (wrapped into a text block) or
// an array of blocks (its last block that can carry a point).
func textPoint(body, content []byte) point {
	v := llm.Raw(content)
	switch {
	case v.IsString():
		if !hasWord(v.Inner()) {
			return none // Anthropic refuses a cache point on blank text
		}
		at := offsetIn(body, content)
		return point{state: addable, edit: edit{at: at, end: at + len(content), wrap: true}}
	case v.IsArray():
		return lastBlockPoint(body, content)
	}
	return none
}

// lastBlockPoint is the point of the last block in blocks that can carry
// one.
func lastBlockPoint(body, blocks []byte) point {
	var e elements
	e.reset(blocks)
	var last []byte
	var lastInfo block
	for e.next() {
		if len(e.value) == 0 || e.value[0] != '{' {
			continue
		}
		if b, ok := readBlock(e.value); ok && b.markable() {
			last, lastInfo = e.value, b
		}
	}
	if !e.ok() || last == nil {
		return none
	}
	return lastInfo.point(body, last)
}

// block is what decides whether a content block can carry a point.
type block struct {
	typ, text llm.Raw
	// mark is the block's cache_control value (nil: none).
	mark    []byte
	members int
}

// readBlock reads obj's members; ok is false when obj is not an object or
// names cache_control twice.
func readBlock(obj []byte) (b block, ok bool) {
	var m llm.Members
	m.Reset(obj)
	marks := 0
	for m.Next() {
		b.members++
		switch {
		case m.NameIs("type"):
			b.typ = m.Value()
		case m.NameIs("text"):
			b.text = m.Value()
		case m.NameIs("cache_control"):
			b.mark = m.Value()
			marks++
		}
	}
	return b, m.Err() == nil && marks <= 1
}

// markable reports a block Anthropic takes a cache point on: not a
// thinking block (those are cached with the turn but cannot be marked),
// and not a text block whose text is blank.
func (b *block) markable() bool {
	switch string(b.typ) {
	case `"thinking"`, `"redacted_thinking"`:
		return false
	case `"text"`:
		return b.text.IsString() && hasWord(b.text.Inner())
	}
	return true
}

// point marks the block obj (a slice of body): an existing mark is kept, a
// null one replaced, and a missing one added as its last member.
func (b *block) point(body, obj []byte) point {
	switch {
	case b.mark == nil:
		at := offsetIn(body, obj) + len(obj) - 1 // its closing brace
		insert := `,"cache_control":` + ephemeral
		if b.members == 0 {
			insert = insert[1:]
		}
		return point{state: addable, edit: edit{at: at, end: at, insert: insert}}
	case string(b.mark) == "null":
		at := offsetIn(body, b.mark)
		return point{state: addable, edit: edit{at: at, end: at + len(b.mark), insert: ephemeral}}
	}
	return point{state: marked}
}

package promptcache

import (
	"errors"
	"strings"

	"github.com/relaygate/gateway/backend/llm/convert"
	"github.com/relaygate/gateway/codec/llm"
	"github.com/relaygate/gateway/config"
)

// maxBreakpoints is how many cache points one request may hold, the
// client's included: Anthropic refuses a fifth cache_control block ("A
// maximum of 4 blocks with cache_control may be provided") and Bedrock
// allows four cache checkpoints per request.
const maxBreakpoints = 4

// defaultMinTokens is config.PromptCaching's minTokens by default
// (agentgateway's).
const defaultMinTokens = 1024

// ErrNotObject is returned by Apply for a body that is not a JSON object.
var ErrNotObject = errors.New("promptcache: the request body is not a JSON object")

// Policy is a compiled promptCaching policy: immutable, safe for
// concurrent use. A nil *Policy adds nothing.
type Policy struct {
	system, messages, tools bool
	minTokens               int
	offset                  int
}

// New compiles c; nil takes every default (system and messages marked,
// tools not, minTokens 1024, offset 0).
func New(c *config.PromptCaching) *Policy {
	p := &Policy{system: true, messages: true, minTokens: defaultMinTokens}
	if c == nil {
		return p
	}
	if c.CacheSystem != nil {
		p.system = *c.CacheSystem
	}
	if c.CacheMessages != nil {
		p.messages = *c.CacheMessages
	}
	if c.CacheTools != nil {
		p.tools = *c.CacheTools
	}
	if c.MinTokens != nil {
		p.minTokens = max(*c.MinTokens, 0)
	}
	if c.CacheMessageOffset != nil {
		p.offset = max(*c.CacheMessageOffset, 0)
	}
	return p
}

// Apply appends body with cache points added for provider format f
// (convert.Bedrock or convert.Messages); other formats and prompts under
// minTokens return body unchanged. body is a request already in f (what
// convert.Request wrote); every byte of it is kept and the points are
// inserted between (see the package comment for where they go). When
// nothing is added, body itself is returned, not copied; so is a body that
// names system, messages or tools more than once. A body that is not a
// JSON object is an error (ErrNotObject, with body returned).
func (p *Policy) Apply(dst, body []byte, f convert.Format) ([]byte, error) {
	if p == nil || !(p.system || p.messages || p.tools) {
		return body, nil
	}
	var d dialect
	switch f {
	case convert.Messages:
		d = anthropic{}
	case convert.Bedrock:
		d = bedrock{}
	default:
		return body, nil
	}
	var r request
	ok, err := r.read(body, d)
	if err != nil || !ok {
		return body, err
	}
	var pl plan
	p.place(body, &r, d, &pl)
	if pl.n == 0 {
		return body, nil
	}
	return pl.write(dst, body), nil
}

// Supports reports whether a provider format and model take cache points:
// every Claude model on Anthropic's Messages API; on Bedrock, as
// agentgateway decides (bedrock.rs, supports_prompt_caching), Claude
// models other than claude-instant, claude-v1 and claude-v2, Amazon Nova
// models, and application inference profiles (whose model is hidden: the
// operator turns caching off for one that does not cache). Bedrock may
// refuse cache points for a model without prompt caching, so the caller
// asks before Apply.
func Supports(f convert.Format, model string) bool {
	switch f {
	case convert.Messages:
		return true
	case convert.Bedrock:
		m := strings.ToLower(model)
		switch {
		case strings.Contains(m, "anthropic.claude"):
			return !strings.Contains(m, "claude-instant") && !strings.Contains(m, "claude-v1") && !strings.Contains(m, "claude-v2")
		case strings.Contains(m, "amazon.nova"), strings.Contains(m, ":application-inference-profile/"):
			return true
		}
	}
	return false
}

// request is where a body's sections are. Each is a slice of the body
// (nil when absent).
type request struct {
	system   []byte
	messages []byte
	// toolsSection is what holds the tool definitions (Anthropic's tools,
	// Bedrock's toolConfig); tools is their array.
	toolsSection []byte
	tools        []byte
	// marks are the client's cache points outside the sections (Anthropic's
	// request-level cache_control, which marks the prompt's end), and
	// longEnd reports one with a long TTL.
	marks   int
	longEnd bool
}

// read finds the sections; unique is false when one is named twice.
func (r *request) read(body []byte, d dialect) (unique bool, err error) {
	var m llm.Members
	m.Reset(body)
	var seen [3]int
	for m.Next() {
		switch {
		case m.NameIs("system"):
			r.system = m.Value()
			seen[0]++
		case m.NameIs("messages"):
			r.messages = m.Value()
			seen[1]++
		case m.NameIs(d.toolsMember()):
			r.toolsSection = m.Value()
			seen[2]++
		case m.NameIs(d.mark()) && string(m.Value()) != "null":
			r.marks++
			r.longEnd = r.longEnd || longTTL(m.Value())
		}
	}
	if m.Err() != nil {
		return false, ErrNotObject
	}
	if seen[0] > 1 || seen[1] > 1 || seen[2] > 1 {
		return false, nil
	}
	r.tools = d.toolList(r.toolsSection)
	return true, nil
}

// estimate is the words x 1.3 estimate of tokens (tokens.EstimateWords).
func estimate(words int) int { return words * 13 / 10 }

// wordsFor is the fewest words whose estimate reaches tokens.
func wordsFor(tokens int) int {
	w := tokens * 10 / 13
	for estimate(w) < tokens {
		w++
	}
	for w > 0 && estimate(w-1) >= tokens {
		w--
	}
	return w
}

// The ranks of the sections in the order providers read a prompt for
// caching.
const (
	rankTools = iota
	rankSystem
	rankMessages
	// rankEnd is the prompt's end, where a request-level point goes.
	rankEnd
)

// place plans the cache points of r. Each point caches the prompt before
// it, in the order providers read a prompt for caching (tools, system,
// messages), and is placed only where that prefix is estimated at
// minTokens or more. Words are counted only until that is known. With
// fewer free slots than points, the messages' point goes first (it caches
// the most), then the system's, then the tools'.
func (p *Policy) place(body []byte, r *request, d dialect, pl *plan) {
	mark := d.mark()
	need := wordsFor(p.minTokens)
	tools := tally(r.toolsSection, mark, need)
	system := tally(r.system, mark, need-tools.words)
	systemPrefix := tools.words + system.words
	msgs := p.readMessages(body, r.messages, mark, need-systemPrefix)
	if systemPrefix+msgs.words < need {
		return
	}
	rm := room{free: maxBreakpoints - (r.marks + tools.marks + system.marks + msgs.marks), longRank: -1}
	rm.long(rankTools, body, r.toolsSection, tools.longAt)
	rm.long(rankSystem, body, r.system, system.longAt)
	if msgs.longAt >= 0 {
		rm.longRank, rm.longAt = rankMessages, msgs.longAt
	}
	if r.longEnd {
		rm.longRank = rankEnd
	}
	if p.messages && msgs.target != nil && systemPrefix+msgs.prefixWords >= need {
		pl.add(d.messagePoint(body, msgs.target), rankMessages, &rm)
	}
	if p.system && r.system != nil && systemPrefix >= need {
		pl.add(d.systemPoint(body, r.system), rankSystem, &rm)
	}
	if p.tools && r.tools != nil && tools.words >= need {
		pl.add(d.toolsPoint(body, r.tools), rankTools, &rm)
	}
}

// room is what decides whether a request takes one more point: the free
// slots, and the client's last point with a long TTL. Anthropic refuses a
// point with a longer TTL after one with a shorter ("a 1-hour cache entry
// must appear before any 5-minute cache entries"), so the five-minute
// points Apply adds go only after it.
type room struct {
	free int
	// longRank and longAt place that point: its section's rank (-1: none)
	// and its offset in the body.
	longRank, longAt int
}

// long notes a long-TTL point at offset at of section (-1: none).
func (rm *room) long(rank int, body, section []byte, at int) {
	if at >= 0 {
		rm.longRank, rm.longAt = rank, offsetIn(body, section)+at
	}
}

// takes reports room for a point added by e in the section of rank.
func (rm *room) takes(rank int, e edit) bool {
	if rm.free <= 0 {
		return false
	}
	return rank > rm.longRank || rank == rm.longRank && e.at > rm.longAt
}

// conversation is what place needs of the messages.
type conversation struct {
	// words are counted up to the words wanted.
	words, marks int
	// longAt is the offset in the body of the last long-TTL point (-1:
	// none).
	longAt int
	// target is the message the point goes after (nil: none), and
	// prefixWords the words up to its end.
	target      []byte
	prefixWords int
}

// readMessages tallies the messages (words up to wantWords) and picks the
// target, as agentgateway does (insert_message_cache_point): the
// second-to-last message, moved back by the offset and kept at the first;
// none with fewer than two messages. The point so caches the conversation
// before the current turn, which the next request repeats.
func (p *Policy) readMessages(body, messages []byte, mark string, wantWords int) conversation {
	c := conversation{longAt: -1}
	n := count(messages)
	target := -1
	if n >= 2 {
		target = max(n-2-p.offset, 0)
	}
	var e elements
	e.reset(messages)
	for i := 0; e.next(); i++ {
		m := tally(e.value, mark, wantWords-c.words)
		c.words += m.words
		c.marks += m.marks
		if m.longAt >= 0 {
			c.longAt = offsetIn(body, e.value) + m.longAt
		}
		if i == target {
			c.target, c.prefixWords = e.value, c.words
		}
	}
	return c
}

// A dialect is one provider format's way of marking a cache point.
type dialect interface {
	// mark is the member a cache point is.
	mark() string
	// toolsMember is the top-level member holding the tools; toolList its
	// array of tool definitions (nil: none to mark).
	toolsMember() string
	toolList(section []byte) []byte
	// The points after the system prompt, after a message, after the
	// tools; every slice is a slice of body.
	systemPoint(body, system []byte) point
	messagePoint(body, message []byte) point
	toolsPoint(body, tools []byte) point
}

// pointState says what a place holds.
type pointState uint8

const (
	// nowhere: no block there can carry a point.
	nowhere pointState = iota
	// marked: the client's point is already there.
	marked
	// addable: edit adds the point.
	addable
)

// point is where a cache point goes.
type point struct {
	state pointState
	edit  edit
}

// none is a place with no point.
var none = point{state: nowhere}

// edit replaces body[at:end] with insert, or wraps the string token
// body[at:end] into a text block that carries a cache point.
type edit struct {
	at, end int
	insert  string
	wrap    bool
}

// The Anthropic text block a string prompt becomes: wrapOpen, the string
// token, wrapClose.
const (
	wrapOpen  = `[{"type":"text","text":`
	wrapClose = `,"cache_control":{"type":"ephemeral"}}]`
)

// plan is the edits of one request (at most one per section).
type plan struct {
	edits [3]edit
	n     int
}

// add plans pt's edit, in the section of rank, when rm has room for it.
func (pl *plan) add(pt point, rank int, rm *room) {
	if pt.state != addable || !rm.takes(rank, pt.edit) {
		return
	}
	rm.free--
	pl.edits[pl.n] = pt.edit
	pl.n++
}

// write appends body with the edits made, in the order they come in body.
func (pl *plan) write(dst, body []byte) []byte {
	edits := pl.edits[:pl.n]
	for i := 1; i < len(edits); i++ {
		for j := i; j > 0 && edits[j].at < edits[j-1].at; j-- {
			edits[j], edits[j-1] = edits[j-1], edits[j]
		}
	}
	prev := 0
	for _, e := range edits {
		dst = append(dst, body[prev:e.at]...)
		if e.wrap {
			dst = append(dst, wrapOpen...)
			dst = append(dst, body[e.at:e.end]...)
			dst = append(dst, wrapClose...)
		} else {
			dst = append(dst, e.insert...)
		}
		prev = e.end
	}
	return append(dst, body[prev:]...)
}

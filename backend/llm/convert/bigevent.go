package convert

import (
	"strings"

	"github.com/relaygate/gateway/codec/llm"
)

// Events too large to hold. A same-format stream whose bytes reach the
// client as they came, or event by event (Chat's usage chunk stripped),
// does not need to hold an event to pass it on: one past MaxEventBytes (a
// Responses event carrying a generated image in base64, a huge delta) is
// passed on unread (sseFramer.skip: event by event, its start as the
// framer had it, then its bytes as they come) instead of failing the
// stream, and bigScan follows its JSON for the little the accounting
// needs: its usage and its type. The events after it are read as before,
// so the usage a provider sends last is not lost.

// bigKeep bounds each value bigScan keeps (a usage object is a few hundred
// bytes).
const bigKeep = 4 << 10

// Members bigScan knows at the top level.
const (
	memberOther uint8 = iota
	memberType
	memberUsage
	memberParent // "response" or "message": their "usage" is kept too
)

// bigScan follows the JSON data of an event too large to hold, a piece at
// a time, and keeps the tokens of the top-level member "type" and of the
// usage: the top-level "usage" or "usageMetadata" (Chat, Messages'
// message_delta, Gemini), or "usage" in the top-level object "response" or
// "message" (Responses' response.completed, Messages' message_start). The
// last of repeated members counts, as for the decoder. It keeps no other
// byte: strings are skipped to their closing quote.
type bigScan struct {
	depth      int
	inStr, esc bool
	readingKey bool // the string is a key at a depth that is followed
	expectKey  bool // the next string is a key at a depth that is followed
	keyDone    bool // a key was read: its colon and value come next
	key        [16]byte
	keyLen     int   // > len(key): longer than any name followed
	member     uint8 // the top-level member whose value is being read
	topObj     bool  // the top-level value is an object
	inParent   bool  // depth 2 is the object value of a memberParent

	keep     *[]byte // the value being kept, or nil
	keepAt   int     // its depth
	keepOver bool    // it outgrew bigKeep: dropped
	typ      []byte
	usage    []byte
	closed   bool // the top-level value ended
}

func (b *bigScan) reset() {
	*b = bigScan{typ: b.typ[:0], usage: b.usage[:0]}
}

// write follows the next bytes of the event's data.
func (b *bigScan) write(p []byte) {
	for i := 0; i < len(p); i++ {
		c := p[i]
		if b.inStr {
			if b.keep == nil && !b.readingKey && !b.esc {
				// Skip to the next quote or backslash.
				j := i
				for j < len(p) && p[j] != '"' && p[j] != '\\' {
					j++
				}
				if j == len(p) {
					return
				}
				i, c = j, p[j]
			}
			b.keepByte(c)
			switch {
			case b.esc:
				b.esc = false
			case c == '\\':
				b.esc = true
				if b.readingKey {
					b.keyLen = len(b.key) + 1 // escaped: no name followed
				}
			case c == '"':
				b.inStr = false
				if b.readingKey {
					b.readingKey, b.keyDone = false, true
				}
			case b.readingKey:
				if b.keyLen < len(b.key) {
					b.key[b.keyLen] = c
				}
				b.keyLen++
			}
			continue
		}
		switch c {
		case '"':
			b.keepByte(c)
			b.inStr, b.keyDone = true, false
			if b.expectKey {
				b.expectKey, b.readingKey, b.keyLen = false, true, 0
			}
		case ':':
			b.keepByte(c)
			if b.keyDone {
				b.keyDone = false
				b.value()
			}
		case '{', '[':
			b.keepByte(c)
			b.depth++
			b.expectKey, b.keyDone = false, false
			if c == '{' {
				switch {
				case b.depth == 1:
					b.topObj, b.expectKey = true, true
				case b.depth == 2 && b.member == memberParent:
					b.inParent, b.expectKey = true, true
				}
			}
		case '}', ']':
			if b.keep != nil && b.depth == b.keepAt {
				b.endKeep()
			}
			b.keepByte(c)
			b.depth--
			b.expectKey, b.keyDone = false, false
			switch b.depth {
			case 1:
				b.inParent = false
			case 0:
				b.closed = true
			}
		case ',':
			if b.keep != nil && b.depth == b.keepAt {
				b.endKeep()
			}
			b.keepByte(c)
			b.keyDone = false
			switch {
			case b.depth == 1 && b.topObj:
				b.member, b.expectKey = memberOther, true
			case b.depth == 2 && b.inParent:
				b.expectKey = true
			}
		default:
			b.keepByte(c)
		}
	}
}

// value starts the value of the key just read: kept when it is one of the
// members followed.
func (b *bigScan) value() {
	name := ""
	if b.keyLen <= len(b.key) {
		name = string(b.key[:b.keyLen]) // no allocation: compared only
	}
	switch {
	case b.depth == 1:
		switch name {
		case "type":
			b.member = memberType
			b.startKeep(&b.typ)
		case "usage", "usageMetadata":
			b.member = memberUsage
			b.startKeep(&b.usage)
		case "response", "message":
			b.member = memberParent
		default:
			b.member = memberOther
		}
	case b.depth == 2 && b.inParent && name == "usage":
		b.startKeep(&b.usage)
	}
}

func (b *bigScan) startKeep(dst *[]byte) {
	b.keep, b.keepAt, b.keepOver = dst, b.depth, false
	*dst = (*dst)[:0]
}

func (b *bigScan) keepByte(c byte) {
	if b.keep == nil || b.keepOver {
		return
	}
	if len(*b.keep) == bigKeep {
		b.keepOver = true
		*b.keep = (*b.keep)[:0]
		return
	}
	*b.keep = append(*b.keep, c)
}

// endKeep ends the kept value (at the comma or bracket after it).
func (b *bigScan) endKeep() {
	v := trimSpace(*b.keep)
	if b.keepOver {
		v = v[:0]
	}
	*b.keep = append((*b.keep)[:0], v...)
	b.keep = nil
}

func trimSpace(v []byte) []byte {
	for len(v) > 0 && isSpace(v[0]) {
		v = v[1:]
	}
	for len(v) > 0 && isSpace(v[len(v)-1]) {
		v = v[:len(v)-1]
	}
	return v
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// bigEvent reads what bigScan kept of an event too large to hold, which the
// stream passed on unread: its usage, whether it is a delta (counted as one
// for OutputEstimate: its text is not known), and whether it ends the
// stream (Responses' response.completed carries the whole answer). typ is
// the SSE event's type, for an event whose data names none.
func (s *Stream) bigEvent(dst []byte, typ []byte) []byte {
	sc := &s.sse.big.scan
	name := string(typ)
	if t := llm.Raw(sc.typ); t.IsString() && plainToken(t) {
		name = string(t[1 : len(t)-1])
	}
	var u Usage
	if v := llm.Raw(sc.usage); len(v) > 0 && llm.Valid(v) {
		if du, err := decodeUsage(v, s.info.Provider); err == nil {
			u = du
		}
	}
	s.addUsage(u)
	s.rd.bigLast = true
	switch s.info.Provider {
	case Responses:
		switch name {
		case "response.completed", "response.incomplete", "response.failed":
			return s.responsesRead(dst, name, Usage{}, nil)
		}
		if strings.HasSuffix(name, ".delta") {
			s.deltas++
		}
	case Messages:
		switch name {
		case "content_block_start", "content_block_delta":
			s.deltas++
		}
	default:
		s.deltas++
	}
	return dst
}

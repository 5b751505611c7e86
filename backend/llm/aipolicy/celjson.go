package aipolicy

import (
	"encoding/base64"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/common/types/traits"

	"github.com/relaygate/gateway/codec/llm"
)

// decodeObject decodes a validated JSON object (indexed to all levels) into the value CEL reads as
// llmRequest. Numbers follow serde_json, as agentgateway's llmRequest does:
// an integer is an int64 when it fits, else a uint64, else a float64, so
// `llmRequest.max_tokens + 1` is integer arithmetic. A repeated member name
// keeps its last value.
func decodeObject(tp *tape, v tok) map[string]any {
	m := make(map[string]any)
	it := tp.walk(v)
	for n, val, ok := it.member(); ok; n, val, ok = it.member() {
		m[decodeString(tp.d, n)] = decodeValue(tp, val)
	}
	return m
}

func decodeValue(tp *tape, v tok) any {
	d := tp.d
	switch d[v.start] {
	case '"':
		return decodeString(d, v)
	case '{':
		return decodeObject(tp, v)
	case '[':
		var list []any
		it := tp.walk(v)
		for e, ok := it.element(); ok; e, ok = it.element() {
			list = append(list, decodeValue(tp, e))
		}
		if list == nil {
			list = []any{}
		}
		return list
	case 't':
		return true
	case 'f':
		return false
	case 'n':
		return nil
	}
	return decodeNumber(string(d[v.start:v.end]))
}

func decodeString(d []byte, v tok) string {
	text, err := llm.AppendUnquoted(nil, d[v.start:v.end])
	if err != nil {
		return ""
	}
	return string(text)
}

func decodeNumber(s string) any {
	if !strings.ContainsAny(s, ".eE") {
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			return i
		}
		if u, err := strconv.ParseUint(s, 10, 64); err == nil {
			return u
		}
	}
	f, _ := strconv.ParseFloat(s, 64) // beyond float64 (1e400): ±Inf, where serde_json refuses the body
	return f
}

// appendCELJSON appends the JSON form of a CEL value, as agentgateway's
// Value::json makes it: bytes are base64 text, timestamps RFC 3339 text in
// UTC, durations "1.5s", types their name, a non-finite double null, a map's
// keys text (sorted, for a stable body) and a map value that has no JSON
// form null. It reports false for a value with no JSON form (an error,
// unknown, or a list holding one): agentgateway then drops the field.
func appendCELJSON(dst []byte, v ref.Val, depth int) ([]byte, bool) {
	if depth > llm.MaxDepth {
		return dst, false
	}
	switch x := v.(type) {
	case types.Null:
		return append(dst, "null"...), true
	case types.Bool:
		return strconv.AppendBool(dst, bool(x)), true
	case types.Int:
		return strconv.AppendInt(dst, int64(x), 10), true
	case types.Uint:
		return strconv.AppendUint(dst, uint64(x), 10), true
	case types.Double:
		return appendFloat(dst, float64(x)), true
	case types.String:
		return llm.AppendString(dst, string(x)), true
	case types.Bytes:
		return llm.AppendString(dst, base64.StdEncoding.EncodeToString(x)), true
	case types.Timestamp:
		return llm.AppendString(dst, x.Time.UTC().Format(time.RFC3339Nano)), true
	case types.Duration:
		return appendDuration(dst, x.Duration), true
	case ref.Type:
		return llm.AppendString(dst, x.TypeName()), true
	case traits.Mapper:
		return appendCELMap(dst, x, depth)
	case traits.Lister:
		return appendCELList(dst, x, depth)
	}
	return dst, false
}

func appendCELList(dst []byte, l traits.Lister, depth int) ([]byte, bool) {
	start := len(dst)
	dst = append(dst, '[')
	n, ok := l.Size().(types.Int)
	if !ok {
		return dst[:start], false
	}
	for i := types.Int(0); i < n; i++ {
		if i > 0 {
			dst = append(dst, ',')
		}
		var fine bool
		if dst, fine = appendCELJSON(dst, l.Get(i), depth+1); !fine {
			return dst[:start], false
		}
	}
	return append(dst, ']'), true
}

func appendCELMap(dst []byte, m traits.Mapper, depth int) ([]byte, bool) {
	type entry struct {
		key string
		val ref.Val
	}
	var entries []entry
	for it := m.Iterator(); it.HasNext() == types.True; {
		k := it.Next()
		key, ok := mapKeyText(k)
		if !ok {
			return dst, false
		}
		entries = append(entries, entry{key, m.Get(k)})
	}
	slices.SortStableFunc(entries, func(a, b entry) int { return strings.Compare(a.key, b.key) })
	dst = append(dst, '{')
	for i, e := range entries {
		if i > 0 && e.key == entries[i-1].key {
			continue // 1 and "1" both became "1"
		}
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = llm.AppendString(dst, e.key)
		dst = append(dst, ':')
		mark := len(dst)
		var ok bool
		if dst, ok = appendCELJSON(dst, e.val, depth+1); !ok {
			dst = append(dst[:mark], "null"...)
		}
	}
	return append(dst, '}'), true
}

// mapKeyText is a map key as JSON member name text.
func mapKeyText(k ref.Val) (string, bool) {
	switch x := k.(type) {
	case types.String:
		return string(x), true
	case types.Int:
		return strconv.FormatInt(int64(x), 10), true
	case types.Uint:
		return strconv.FormatUint(uint64(x), 10), true
	case types.Bool:
		return strconv.FormatBool(bool(x)), true
	}
	return "", false
}

// appendFloat writes a double as serde_json does: null when not finite, a
// whole number with ".0".
func appendFloat(dst []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(dst, "null"...)
	}
	start := len(dst)
	dst = strconv.AppendFloat(dst, f, 'g', -1, 64)
	for _, c := range dst[start:] {
		if c == '.' || c == 'e' {
			return dst
		}
	}
	return append(dst, ".0"...)
}

// appendDuration writes a duration as CEL's string form: seconds with the
// fraction's trailing zeros dropped ("61.5s", "-2s").
func appendDuration(dst []byte, d time.Duration) []byte {
	dst = append(dst, '"')
	if d < 0 {
		dst = append(dst, '-')
	}
	u := uint64(d)
	if d < 0 {
		u = uint64(-d) // -MinInt64 wraps to itself, and uint64 of that is right
	}
	dst = strconv.AppendUint(dst, u/1e9, 10)
	if frac := u % 1e9; frac != 0 {
		var buf [9]byte
		for i := 8; i >= 0; i-- {
			buf[i] = byte('0' + frac%10)
			frac /= 10
		}
		digits := buf[:]
		for digits[len(digits)-1] == '0' {
			digits = digits[:len(digits)-1]
		}
		dst = append(dst, '.')
		dst = append(dst, digits...)
	}
	return append(dst, 's', '"')
}

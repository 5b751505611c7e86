package convert

import (
	"bytes"
	"hash/maphash"
	"strconv"
	"unsafe"

	"github.com/relaygate/gateway/codec/llm"
)

// passRequest serves a client whose format the provider speaks: the body is
// copied with only what the gateway changes rewritten (model, and for Chat
// the stream's usage option), and read only as far as RequestInfo needs:
// its top-level members are walked without decoding (llm.Members), and only
// the few that RequestInfo reads are parsed. With o.Head (the caller read
// the body already) it is not walked at all unless stream_options is added.
//
// A top-level member given twice is sent once, with its last value: the
// gateway reads the last (routes, authorizes, guards and counts on it, as
// codec/llm's decoder and the CEL inputs do), and a provider whose parser
// takes the first would otherwise serve another request than the one
// checked (another output bound, stream mode, conversation).
func passRequest(dst, body []byte, info *RequestInfo, o *Options) ([]byte, RequestInfo, error) {
	var h Head
	if o.Head != nil && o.Head.size == len(body) {
		h = *o.Head
	} else {
		var err error
		if h, err = ReadHead(body); err != nil {
			return dst, *info, badRequest("invalid " + info.Client.String() + " request: " + err.Error())
		}
	}
	// The model is a string only when asked for: the server gives the
	// model it resolved in o.Model, and info then takes that.
	if o.Model == "" && len(h.model) > 0 {
		model, err := llm.Text(nil, h.model)
		if err != nil {
			return dst, *info, badRequest("invalid " + info.Client.String() + " request: the model is not a valid string")
		}
		info.Model = string(model)
	}
	info.Stream = h.stream
	info.IncludeUsage = info.Client != Chat || h.includeUsage
	info.MaxTokens = h.maxTokens()
	switch info.Client {
	case Chat, Messages, Responses, Gemini, Bedrock:
	default:
		return dst, *info, badRequest(info.Client.String() + " is not a client format")
	}
	start := len(dst)
	out := body
	deduped := false
	if h.repeats {
		var err error
		if dst, deduped, err = lastMembers(dst, body); err != nil {
			return dst[:start], *info, badRequest("invalid request body")
		}
		if deduped {
			out = dst[start:]
		}
	}
	if info.Client == Gemini || info.Client == Bedrock {
		// The model is in the path; streaming is the path's too (the server
		// sets Stream from it).
		if o.Model != "" {
			info.Model = o.Model
		}
		if !deduped {
			dst = append(dst, body...)
		}
		return dst, *info, nil
	}
	if o.Model != "" {
		info.Model = o.Model
		switch {
		case h.models == 1 && modelIs(h.model, o.Model):
			// (Repeated, the model is written once even when the last
			// one is the model: a provider whose parser takes the first
			// would serve another model than the one authorized,
			// routed and accounted.)
		case h.model != nil && h.models == 1 && !deduped:
			// Spliced where the head found it: no second walk.
			at := h.modelEnd - len(h.model)
			dst = append(dst, body[:at]...)
			dst = llm.AppendString(dst, o.Model)
			dst = append(dst, body[h.modelEnd:]...)
			out = dst[start:]
		default:
			var model [128]byte
			next := len(dst)
			var err error
			dst, err = llm.SetMember(dst, out, "model", llm.AppendString(model[:0], o.Model))
			if err != nil {
				return dst[:start], *info, badRequest("invalid request body")
			}
			dst = append(dst[:start], dst[next:]...)
			out = dst[start:]
		}
	}
	if info.Client == Chat && info.Stream && o.StreamUsage && !info.IncludeUsage {
		next := len(dst)
		options := []byte(`{"include_usage":true}`)
		if h.streamOptions {
			// The client's other stream options (include_obfuscation,
			// ...) stay: only include_usage is set.
			if v, _ := llm.LastMember(out, "stream_options"); v.IsObject() {
				var err error
				if options, err = llm.SetMember(nil, v, "include_usage", []byte("true")); err != nil {
					return dst[:start], *info, badRequest("invalid request body")
				}
			}
		}
		var err error
		dst, err = llm.SetMember(dst, out, "stream_options", options)
		if err != nil {
			return dst[:start], *info, badRequest("invalid request body")
		}
		dst = append(dst[:start], dst[next:]...)
	}
	if len(dst) == start {
		dst = append(dst, body...)
	}
	return dst, *info, nil
}

// lastMembers appends the object obj to dst with each top-level member
// once: its last occurrence, byte for byte (names compared decoded);
// deduped is false, and nothing appended, when no name repeats.
// It runs only for a body whose head saw a repeat or many members.
func lastMembers(dst, obj []byte) (_ []byte, deduped bool, _ error) {
	var m llm.Members
	var buf []byte
	last := map[string]int{}
	n := 0
	for m.Reset(obj); m.Next(); n++ {
		last[string(llm.KeyText(buf[:0], m.Name()))] = n
	}
	if m.Err() != nil {
		return dst, false, m.Err()
	}
	if len(last) == n {
		return dst, false, nil
	}
	dst = append(dst, '{')
	i, w := 0, 0
	for m.Reset(obj); m.Next(); i++ {
		if last[string(llm.KeyText(buf[:0], m.Name()))] != i {
			continue
		}
		if w > 0 {
			dst = append(dst, ',')
		}
		w++
		// Copied from its name to its value's end, byte for byte.
		dst = append(dst, obj[cap(obj)-cap(m.Name()):m.ValueEnd()]...)
	}
	return append(dst, '}'), true, nil
}

// Head is what the top level of a request body says that the gateway reads
// before sending it: the model, whether it streams, Chat's
// stream_options.include_usage and the output bound. ReadHead reads it;
// given to Request (Options.Head) for the same body, it spares Request a
// second walk, and lets it rewrite the model in place.
type Head struct {
	model        llm.Raw // the model's string token, nil when absent or null
	modelEnd     int     // where model's token ends in the body
	models       int     // members named model (SetMember drops repeats)
	size         int     // the length of the body read
	stream       bool
	includeUsage bool
	// streamOptions: the last stream_options is an object (its other
	// options are kept when include_usage is set).
	streamOptions bool
	// bounds are the output bounds read, one per member that holds one
	// (max_tokens, max_completion_tokens, max_output_tokens,
	// generationConfig, inferenceConfig): the last of a repeated member.
	bounds [5]int
	// names are hashes of the first top-level member names, and
	// nnames how many were read: repeats reports two names alike (or more
	// than names holds), which passRequest checks and undoes.
	names   [maxHeadNames]uint32
	nnames  int
	repeats bool
}

// maxHeadNames bounds the member names a Head tells apart; a body with
// more top-level members is checked for repeats whole (passRequest).
const maxHeadNames = 24

// maxTokens is the largest of the output bounds.
func (h *Head) maxTokens() int {
	return max(h.bounds[0], h.bounds[1], h.bounds[2], h.bounds[3], h.bounds[4])
}

// RepeatsModel reports whether the body has more than one member named
// model (the last counts, as for codec/llm's decoder).
func (h *Head) RepeatsModel() bool { return h.models > 1 }

// Model is the model the body names, decoded; "" when it names none (or
// an empty one). Without escapes it is a view of the body.
func (h *Head) Model() string {
	if len(h.model) <= 2 {
		return ""
	}
	in := h.model[1 : len(h.model)-1]
	if bytes.IndexByte(in, '\\') < 0 {
		return unsafe.String(&in[0], len(in))
	}
	text, err := llm.AppendUnquoted(nil, h.model)
	if err != nil {
		return ""
	}
	return string(text)
}

// passErr is ReadHead's error: which member has the wrong type.
type passErr string

func (e passErr) Error() string { return string(e) }

// ReadHead reads the members of a request body that RequestInfo
// needs, in any of the formats: model, stream, Chat's
// stream_options.include_usage, and the output bounds (max_tokens,
// max_completion_tokens, max_output_tokens, Gemini's
// generationConfig.maxOutputTokens, Bedrock's inferenceConfig.maxTokens).
// A member of the wrong type is an error, and so is a client's output
// bound below 1 (outputBound); null reads as absent. Names with escapes
// are compared decoded.
func ReadHead(body []byte) (Head, error) {
	h := NewHead(body)
	var m llm.Members
	m.Reset(body)
	for m.Next() {
		if err := h.AddMember(m.Name(), m.Value(), m.ValueEnd()); err != nil {
			return h, err
		}
	}
	if m.Err() != nil {
		return h, m.Err()
	}
	return h, nil
}

// NewHead starts the head of body for a caller that knows body's top-level
// members without walking it (the ai policy, which wrote them): it hands
// each to AddMember, in order.
func NewHead(body []byte) Head { return Head{size: len(body)} }

// AddMember reads one top-level member into the head: its name's string
// token, its value, and where the value ends in the body.
func (h *Head) AddMember(name, v llm.Raw, end int) error {
	var buf [32]byte
	key := llm.KeyText(buf[:0], name)
	h.addName(key)
	switch string(key) {
	case "model":
		h.models++
		if v.IsString() {
			h.model, h.modelEnd = v, end
		} else if isNull(v) {
			h.model = nil // the last member named model counts
		} else {
			return passErr(`"model" is not a string`)
		}
	case "stream":
		var err error
		h.stream, err = rawBool(v, "stream")
		return err
	case "stream_options":
		var err error
		h.includeUsage, err = nestedBool(v, "stream_options", "include_usage")
		h.streamOptions = v.IsObject()
		return err
	case "max_tokens":
		return h.bound(0, key, v)
	case "max_completion_tokens":
		return h.bound(1, key, v)
	case "max_output_tokens":
		return h.bound(2, key, v)
	case "generationConfig":
		return h.nestedBound(3, v, "generationConfig", "maxOutputTokens")
	case "inferenceConfig":
		return h.nestedBound(4, v, "inferenceConfig", "maxTokens")
	}
	return nil
}

// nameSeed seeds the hashes of member names.
var nameSeed = maphash.MakeSeed()

// addName notes a top-level member name (decoded), and whether it may
// repeat one before it: a hash met twice (names that only hash alike
// are told apart by passRequest's check), or too many names to hold.
func (h *Head) addName(key []byte) {
	if h.nnames == len(h.names) {
		h.repeats = true
		return
	}
	x := uint32(maphash.Bytes(nameSeed, key))
	for _, y := range h.names[:h.nnames] {
		if x == y {
			h.repeats = true
		}
	}
	h.names[h.nnames] = x
	h.nnames++
}

// bound reads the client's output bound v, member name, into bounds[i].
func (h *Head) bound(i int, name []byte, v llm.Raw) error {
	n, err := outputBound(name, v)
	h.bounds[i] = n
	return err
}

// outputBound reads a client's output bound, the member name (max_tokens,
// max_completion_tokens, max_output_tokens) of value v: an integer of at
// least 1, or none (absent or null: 0). A bound of 0 or less is refused in
// every format, translated or not: no provider serves it, and a gateway
// that read it as none would send its default or no bound at all.
func outputBound(name []byte, v llm.Raw) (int, error) {
	if len(v) == 0 || isNull(v) {
		return 0, nil
	}
	n, err := strconv.Atoi(string(v)) // no allocation: converted in place
	if err != nil {
		return 0, passErr(`"` + string(name) + `" is not an integer`)
	}
	if n < 1 {
		return 0, passErr(`"` + string(name) + `" must be at least 1`)
	}
	return n, nil
}

// nestedBound reads the output bound of a provider's format, member of the
// object v (named obj), into bounds[i]: an integer, or null; the last of
// a repeated member, as the decoder reads it.
func (h *Head) nestedBound(i int, v llm.Raw, obj, member string) error {
	h.bounds[i] = 0
	if isNull(v) {
		return nil
	}
	if !v.IsObject() {
		return passErr(`"` + obj + `" is not an object`)
	}
	var m llm.Members
	m.Reset(v)
	for m.Next() {
		if !m.NameIs(member) {
			continue
		}
		h.bounds[i] = 0
		if b := m.Value(); !isNull(b) {
			n, err := strconv.Atoi(string(b)) // no allocation: converted in place
			if err != nil {
				return passErr(`"` + obj + "." + member + `" is not an integer`)
			}
			h.bounds[i] = n
		}
	}
	return nil
}

// nestedBool reads the boolean called member of the object v (named obj).
func nestedBool(v llm.Raw, obj, member string) (bool, error) {
	if isNull(v) {
		return false, nil
	}
	if !v.IsObject() {
		return false, passErr(`"` + obj + `" is not an object`)
	}
	var m llm.Members
	m.Reset(v)
	for m.Next() {
		if m.NameIs(member) {
			return rawBool(m.Value(), obj+"."+member)
		}
	}
	return false, nil
}

// rawBool reads a boolean token (null reads as false).
func rawBool(v llm.Raw, name string) (bool, error) {
	switch string(v) {
	case "true":
		return true, nil
	case "false", "null":
		return false, nil
	}
	return false, passErr(`"` + name + `" is not a boolean`)
}

func isNull(v llm.Raw) bool { return string(v) == "null" }

// modelIs reports whether the string token tok is the model name (a token
// with escapes never is: rewriting it is harmless).
func modelIs(tok llm.Raw, model string) bool {
	return len(tok) == len(model)+2 && string(tok[1:len(tok)-1]) == model
}

// passResponse serves an answer in the client's own format: it goes on as
// it came, and only its usage is read (the member that holds it, decoded
// alone). The answer is not rewritten, so its other members are only
// skipped (llm.LastMember: the object's structure is checked, not what is
// inside its strings and scalars), as a proxy passes on what it does not
// read. An answer that is not structurally a JSON object is the provider's
// fault, as when translating.
func passResponse(dst, body []byte, f Format) ([]byte, Usage, error) {
	name := "usage"
	if f == Gemini {
		name = "usageMetadata"
	}
	v, ok := llm.LastMember(body, name)
	if !ok {
		return dst, Usage{}, providerInvalid(llm.ErrSyntax)
	}
	if v == nil || isNull(v) {
		// No usage: an error object, or no answer at all?
		if e := answerError(body, f); e != nil {
			return dst, Usage{}, e
		}
	}
	var u Usage
	if v != nil {
		var err error
		if u, err = decodeUsage(v, f); err != nil {
			return dst, Usage{}, providerInvalid(err)
		}
	}
	return append(dst, body...), u, nil
}

// usages are decodeUsage's targets, kept in the pooled translator so
// that decoding into them does not allocate.
type usages struct {
	chat llm.ChatUsage
	an   llm.AnthropicUsage
	rs   llm.ResponsesUsage
	gm   llm.GeminiUsage
	bd   llm.BedrockUsage
}

// decodeUsage decodes a usage object of format f (null: none).
func decodeUsage(v llm.Raw, f Format) (Usage, error) {
	if isNull(v) {
		return Usage{}, nil
	}
	if u, ok := fastUsage(v, f); ok {
		return u, nil
	}
	t := translators.Get().(*translator)
	defer t.release()
	return t.decodeUsageSlow(v, f)
}

// decodeUsageSlow is decodeUsage through the decoder.
func (t *translator) decodeUsageSlow(v llm.Raw, f Format) (Usage, error) {
	u := &t.usage
	switch f {
	case Chat:
		u.chat = llm.ChatUsage{}
		err := t.dec.DecodeTrusted(v, &u.chat)
		return chatUsage(&u.chat), err
	case Messages:
		u.an = llm.AnthropicUsage{}
		err := t.dec.DecodeTrusted(v, &u.an)
		return anthropicUsage(&u.an), err
	case Responses:
		u.rs = llm.ResponsesUsage{}
		err := t.dec.DecodeTrusted(v, &u.rs)
		return responsesUsage(&u.rs), err
	case Gemini:
		u.gm = llm.GeminiUsage{}
		err := t.dec.DecodeTrusted(v, &u.gm)
		return geminiUsage(&u.gm), err
	case Bedrock:
		u.bd = llm.BedrockUsage{}
		err := t.dec.DecodeTrusted(v, &u.bd)
		return bedrockUsage(&u.bd), err
	}
	return Usage{}, nil
}

// usageMember is a member of a usage object that fastUsage reads: name,
// or member leaf of object member name.
type usageMember struct{ name, leaf string }

// usageMembers are, per format, the members fastUsage reads, in the order
// of its counts.
var usageMembers = [...][4]usageMember{
	Chat:      {{"prompt_tokens", ""}, {"completion_tokens", ""}, {"prompt_tokens_details", "cached_tokens"}, {"completion_tokens_details", "reasoning_tokens"}},
	Responses: {{"input_tokens", ""}, {"output_tokens", ""}, {"input_tokens_details", "cached_tokens"}, {"output_tokens_details", "reasoning_tokens"}},
	Messages:  {{"input_tokens", ""}, {"output_tokens", ""}, {"cache_read_input_tokens", ""}, {"cache_creation_input_tokens", ""}},
}

// fastUsage reads the usage of an answer in the OpenAI or Anthropic formats
// without the decoder: a few integer members, found by walking the object.
// Names and values are what the decoder reads into llm.ChatUsage,
// ResponsesUsage and AnthropicUsage (null changes nothing, the last of
// repeated members counts, other members are skipped); FuzzFastUsage holds
// it to the decoder. ok is false for anything else (a value that is not a
// plain integer, a details member that is not an object, a name or string
// that is not plain ASCII, another format): the decoder then reads v and
// answers as it does.
func fastUsage(v llm.Raw, f Format) (Usage, bool) {
	if f != Chat && f != Responses && f != Messages {
		return Usage{}, false
	}
	members := &usageMembers[f]
	var n [4]int64
	var m llm.Members
	m.Reset(v)
	for m.Next() {
		name := m.Name()
		if !plainToken(name) {
			return Usage{}, false
		}
		name = name[1 : len(name)-1] // no escapes: compared as it is
		read := false
		for i := range members {
			um := &members[i]
			if string(name) != um.name {
				continue
			}
			read = true
			var ok bool
			if um.leaf != "" {
				ok = nestedInt(m.Value(), um.leaf, &n[i])
			} else {
				ok = rawInt(m.Value(), &n[i])
			}
			if !ok {
				return Usage{}, false
			}
		}
		// What is skipped must be what the decoder skips without a
		// complaint: plain scalars, or an object of them.
		if !read && !plainValue(m.Value(), 1) {
			return Usage{}, false
		}
	}
	if m.Err() != nil {
		return Usage{}, false
	}
	if f == Messages {
		return anthropicUsage(&llm.AnthropicUsage{InputTokens: n[0], OutputTokens: n[1], CacheReadInputTokens: n[2], CacheCreationInputTokens: n[3]}), true
	}
	return Usage{InputTokens: n[0], OutputTokens: n[1], CachedInputTokens: n[2], ReasoningTokens: n[3]}, true
}

// nestedInt reads the integer member leaf of the object v (null: nothing)
// into dst, as rawInt does.
func nestedInt(v llm.Raw, leaf string, dst *int64) bool {
	if isNull(v) {
		return true
	}
	if !v.IsObject() {
		return false
	}
	var m llm.Members
	m.Reset(v)
	for m.Next() {
		name := m.Name()
		if !plainToken(name) {
			return false
		}
		if string(name[1:len(name)-1]) == leaf {
			if !rawInt(m.Value(), dst) {
				return false
			}
		} else if !plainValue(m.Value(), 0) {
			return false
		}
	}
	return m.Err() == nil
}

// plainValue reports a value any decoder reads alike: null, a boolean, a
// plain integer (rawInt's), a plainToken string, or, with depth left, an
// object of such members.
func plainValue(v llm.Raw, depth int) bool {
	switch {
	case len(v) == 0:
		return false
	case v[0] == '"':
		return plainToken(v)
	case v[0] == '{':
		if depth == 0 {
			return false
		}
		var m llm.Members
		m.Reset(v)
		for m.Next() {
			if !plainToken(m.Name()) || !plainValue(m.Value(), depth-1) {
				return false
			}
		}
		return m.Err() == nil
	case string(v) == "true" || string(v) == "false":
		return true
	}
	var x int64
	return rawInt(v, &x)
}

// plainToken reports a string token of printable ASCII without escapes.
func plainToken(s llm.Raw) bool {
	if len(s) < 2 {
		return false
	}
	for _, c := range s[1 : len(s)-1] {
		if c < 0x20 || c >= 0x7f || c == '\\' {
			return false
		}
	}
	return true
}

// rawInt reads a plain integer token (an optional minus and up to 18
// digits) into dst, and takes null as nothing; false for any other token.
func rawInt(v llm.Raw, dst *int64) bool {
	if isNull(v) {
		return true
	}
	d := []byte(v)
	neg := len(d) > 0 && d[0] == '-'
	if neg {
		d = d[1:]
	}
	if len(d) == 0 || len(d) > 18 || len(d) > 1 && d[0] == '0' {
		return false
	}
	var x int64
	for _, c := range d {
		if c-'0' > 9 {
			return false
		}
		x = x*10 + int64(c-'0')
	}
	if neg {
		x = -x
	}
	*dst = x
	return true
}

// providerFormat reports a format providers answer in.
func (f Format) providerFormat() bool {
	switch f {
	case Chat, Messages, Responses, Gemini, Bedrock:
		return true
	}
	return false
}

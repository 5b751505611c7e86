package provider

import (
	"bytes"
	"unsafe"

	"github.com/relaygate/gateway/backend/llm/convert"
	"github.com/relaygate/gateway/codec/hexdigit"
)

// defaultBasePath is the base path of OpenAI-style and Anthropic APIs,
// which pathPrefix replaces.
const defaultBasePath = "/v1"

// AppendPath appends the request target (path and query) for the route
// type, the model the provider is asked for (the provider's fixed model
// wins) and streaming: Gemini's ":streamGenerateContent?alt=sse",
// Bedrock's "/converse-stream", Vertex's per publisher. A chat route goes
// to the path of the format Format picks (a Messages request to OpenAI goes
// to /v1/chat/completions). Model names are escaped to stay one path
// segment. AppendPath allocates nothing.
//
// clientPath is the client's request target: its path, with or without its
// query. Passthrough and Models keep it; other route types get the
// provider's path and keep the client's query, as agentgateway does,
// except what the gateway sets itself: "alt" on Gemini paths, which carry
// their own (agentgateway drops it too), and any parameter the provider's
// path already has (Azure's api-version: a second one would contradict
// the configured one). A route type Format refuses keeps the client's
// target. On every route type, a Gemini or Vertex provider whose
// credentials the gateway puts on (any backendAuth but passthrough)
// drops the client's "key" (a Google API key in the query) as it drops
// the client's credential headers, so none of the client's reaches the
// provider beside the gateway's. pathPrefix replaces the provider's
// base path ("/v1" of openAI, anthropic and custom) or, for providers
// without one, goes before the path; on Passthrough and Models it replaces
// a leading "/v1" of openAI and anthropic and goes before other paths. A
// custom format's own path is used as it is. pathOverride replaces the
// whole target.
func (p *Provider) AppendPath(dst []byte, rt RouteType, model string, stream bool, clientPath []byte) []byte {
	if p.hasPathOverride {
		return append(dst, p.pathOverride...)
	}
	path, query := splitQuery(clientPath)
	model = p.effectiveModel(model)
	if rt == Passthrough || rt == Models || !p.servesRoute(rt, model) {
		return p.appendClientPath(dst, path, query)
	}
	start := len(dst)
	dst, gemini := p.appendProviderPath(dst, rt, model, stream)
	if len(query) > 0 {
		// The provider path's own query: dst only grows, so this view of
		// it stays as it is while the client's parameters are appended.
		var ours []byte
		if i := bytes.IndexByte(dst[start:], '?'); i >= 0 {
			ours = dst[start+i+1:]
		}
		dst = appendQuery(dst, ours != nil, query, queryDrops{ours: ours, alt: gemini, key: p.dropsClientKey()})
	}
	return dst
}

// dropsClientKey reports whether the client's "key" query parameter is
// left out: a Google provider's API key in the query, which the gateway's
// own credentials replace.
func (p *Provider) dropsClientKey() bool {
	return (p.kind == kindGemini || p.kind == kindVertex) && p.creds != nil
}

// appendClientPath is the client's target with pathPrefix applied.
func (p *Provider) appendClientPath(dst, path, query []byte) []byte {
	if len(path) == 0 {
		path = slash
	}
	if p.hasPathPrefix {
		if p.kind == kindOpenAI || p.kind == kindAnthropic {
			if rest, ok := cutBase(path, defaultBasePath); ok {
				path = rest
			}
		}
		dst = append(dst, p.pathPrefix...)
	}
	dst = append(dst, path...)
	if len(query) > 0 {
		if p.dropsClientKey() {
			return appendQuery(dst, false, query, queryDrops{key: true})
		}
		dst = append(dst, '?')
		dst = append(dst, query...)
	}
	return dst
}

var slash = []byte("/")

// cutBase removes base from the start of path when it is a whole leading
// segment ("/v1" or "/v1/...").
func cutBase(path []byte, base string) ([]byte, bool) {
	if !bytes.HasPrefix(path, []byte(base)) {
		return path, false
	}
	rest := path[len(base):]
	if len(rest) > 0 && rest[0] != '/' {
		return path, false
	}
	return rest, true
}

// appendProviderPath appends the provider's path for a route type that is
// not passed through; gemini reports a Gemini path, whose query the
// provider's own "alt" decides.
func (p *Provider) appendProviderPath(dst []byte, rt RouteType, model string, stream bool) (_ []byte, gemini bool) {
	// A chat route goes where its upstream format is served.
	up := rt
	var format convert.Format
	if rt.chat() {
		format = p.chatFormat(rt, model)
		up = routeOfFormat(format, rt)
	}
	switch p.kind {
	case kindOpenAI:
		dst = p.appendBase(dst)
		return append(dst, openAISuffix(up)...), false
	case kindAzure:
		dst = append(dst, p.pathPrefix...)
		return p.azure.appendPath(dst, up, model), false
	case kindAnthropic:
		dst = p.appendBase(dst)
		return append(dst, anthropicSuffix(up)...), false
	case kindGemini:
		dst = append(dst, p.pathPrefix...)
		if up == Embeddings {
			return append(dst, "/v1beta/openai/embeddings"...), false
		}
		return appendGeminiPath(dst, model, stream), true
	case kindVertex:
		dst = append(dst, p.pathPrefix...)
		return p.vertex.appendPath(dst, up, format, model, stream), format == convert.Gemini
	case kindBedrock:
		dst = append(dst, p.pathPrefix...)
		return appendBedrockPath(dst, model, stream), false
	case kindCustom:
		return p.appendCustomPath(dst, up), false
	}
	return dst, false
}

// routeOfFormat is the route type whose path serves a chat request that
// goes out in format f.
func routeOfFormat(f convert.Format, rt RouteType) RouteType {
	switch f {
	case convert.Chat:
		return Completions
	case convert.Messages:
		return Messages
	case convert.Responses:
		return Responses
	}
	return rt
}

// appendBase appends pathPrefix, or the default base path "/v1".
func (p *Provider) appendBase(dst []byte) []byte {
	if p.hasPathPrefix {
		return append(dst, p.pathPrefix...)
	}
	return append(dst, defaultBasePath...)
}

func openAISuffix(rt RouteType) string {
	switch rt {
	case Responses:
		return "/responses"
	case Embeddings:
		return "/embeddings"
	}
	return "/chat/completions"
}

func anthropicSuffix(rt RouteType) string {
	if rt == AnthropicTokenCount {
		return "/messages/count_tokens"
	}
	return "/messages"
}

// appendPath appends an Azure path: Foundry's Anthropic endpoint for
// Claude's Messages, its project's v1 API otherwise; an OpenAI resource's
// v1 API, or with a dated version its deployment paths (the Responses API
// has none: /openai/responses).
func (a *azureSettings) appendPath(dst []byte, rt RouteType, model string) []byte {
	suffix := azureSuffix(rt)
	if a.foundry {
		switch rt {
		case Messages:
			return append(dst, "/anthropic/v1/messages"...)
		case AnthropicTokenCount:
			return append(dst, "/anthropic/v1/messages/count_tokens"...)
		}
		dst = append(dst, "/api/projects/"...)
		dst = appendSegment(dst, a.project, "@")
		dst = append(dst, "/openai/v1/"...)
		return append(dst, suffix...)
	}
	switch {
	case a.version == "v1":
		dst = append(dst, "/openai/v1/"...)
		return append(dst, suffix...)
	case a.version == "preview":
		dst = append(dst, "/openai/v1/"...)
		dst = append(dst, suffix...)
		return append(dst, "?api-version=preview"...)
	case rt == Responses:
		dst = append(dst, "/openai/responses?api-version="...)
		return append(dst, a.version...)
	}
	dst = append(dst, "/openai/deployments/"...)
	dst = appendSegment(dst, model, "@")
	dst = append(dst, '/')
	dst = append(dst, suffix...)
	dst = append(dst, "?api-version="...)
	return append(dst, a.version...)
}

func azureSuffix(rt RouteType) string {
	switch rt {
	case Responses:
		return "responses"
	case Embeddings:
		return "embeddings"
	}
	return "chat/completions"
}

// appendGeminiPath appends the Gemini API's generateContent path: the model
// as a resource name (a bare id is under models/; models/ and tunedModels/
// names keep their collection).
func appendGeminiPath(dst []byte, model string, stream bool) []byte {
	dst = append(dst, "/v1beta/"...)
	collection, id := "models", model
	for _, c := range []string{"models/", "tunedModels/"} {
		if len(model) > len(c) && model[:len(c)] == c {
			collection, id = c[:len(c)-1], model[len(c):]
			break
		}
	}
	dst = append(dst, collection...)
	dst = append(dst, '/')
	dst = appendSegment(dst, id, "@")
	return appendGenerateMethod(dst, stream)
}

func appendGenerateMethod(dst []byte, stream bool) []byte {
	if stream {
		return append(dst, ":streamGenerateContent?alt=sse"...)
	}
	return append(dst, ":generateContent"...)
}

// appendPath appends a Vertex AI path under the project and location: the
// Anthropic publisher's rawPredict for Claude (count-tokens too), the
// Google publisher's generateContent for Gemini, the OpenAI-compatible
// endpoint for the rest.
func (v *vertexSettings) appendPath(dst []byte, rt RouteType, format convert.Format, model string, stream bool) []byte {
	dst = append(dst, "/v1/projects/"...)
	dst = appendSegment(dst, v.project, ":@")
	dst = append(dst, "/locations/"...)
	dst = append(dst, v.region...)
	switch {
	case rt == AnthropicTokenCount:
		return append(dst, "/publishers/anthropic/models/count-tokens:rawPredict"...)
	case format == convert.Messages:
		base, date := vertexClaudeVersion(vertexClaudeModel(model))
		dst = append(dst, "/publishers/anthropic/models/"...)
		dst = appendSegment(dst, base, "@")
		if date != "" {
			dst = append(dst, '@')
			dst = append(dst, date...)
		}
		if stream {
			return append(dst, ":streamRawPredict"...)
		}
		return append(dst, ":rawPredict"...)
	case format == convert.Gemini:
		dst = append(dst, "/publishers/google/models/"...)
		dst = appendSegment(dst, vertexGeminiModel(model), "@")
		return appendGenerateMethod(dst, stream)
	}
	return append(dst, "/endpoints/openapi/chat/completions"...)
}

// appendBedrockPath appends the Converse path; the model id (an ARN
// perhaps) is escaped as the AWS SDK escapes it, every byte but the
// unreserved ones.
func appendBedrockPath(dst []byte, model string, stream bool) []byte {
	dst = append(dst, "/model/"...)
	dst = appendSegment(dst, model, "")
	if stream {
		return append(dst, "/converse-stream"...)
	}
	return append(dst, "/converse"...)
}

// appendCustomPath appends a custom provider's path: the format's own when
// configured (pathPrefix does not apply to it), else the usual one under
// pathPrefix or "/v1".
func (p *Provider) appendCustomPath(dst []byte, rt RouteType) []byte {
	var f customFormat
	switch rt {
	case Completions:
		f = formatCompletions
	case Messages:
		f = formatMessages
	case Responses:
		f = formatResponses
	case Embeddings:
		f = formatEmbeddings
	case AnthropicTokenCount:
		f = formatAnthropicTokenCount
	}
	if path := p.custom.path[f]; path != "" {
		return append(dst, path...)
	}
	dst = p.appendBase(dst)
	if rt == Messages || rt == AnthropicTokenCount {
		return append(dst, anthropicSuffix(rt)...)
	}
	return append(dst, openAISuffix(rt)...)
}

// splitQuery splits a request target at its '?'.
func splitQuery(target []byte) (path, query []byte) {
	if i := bytes.IndexByte(target, '?'); i >= 0 {
		return target[:i], target[i+1:]
	}
	return target, nil
}

// queryDrops are the client's query parameters appendQuery leaves out:
// those named in ours (the provider path's own query), "alt" and "key".
type queryDrops struct {
	ours     []byte
	alt, key bool
}

// drops reports whether the client's param is left out. Names are
// compared as the provider reads them, percent-decoded ("k%65y" is key).
func (d *queryDrops) drops(param []byte) bool {
	if d.alt && isParam(param, "alt") || d.key && isParam(param, "key") {
		return true
	}
	for ours := d.ours; len(ours) > 0; {
		var own []byte
		if i := bytes.IndexByte(ours, '&'); i >= 0 {
			own, ours = ours[:i], ours[i+1:]
		} else {
			own, ours = ours, nil
		}
		name := own
		if i := bytes.IndexByte(own, '='); i >= 0 {
			name = own[:i]
		}
		if len(name) > 0 && isParam(param, bytesView(name)) {
			return true
		}
	}
	return false
}

// appendQuery appends the client's query parameters to a path that has a
// query already (hasQuery) or not, leaving out those d drops.
func appendQuery(dst []byte, hasQuery bool, query []byte, d queryDrops) []byte {
	for len(query) > 0 {
		var param []byte
		if i := bytes.IndexByte(query, '&'); i >= 0 {
			param, query = query[:i], query[i+1:]
		} else {
			param, query = query, nil
		}
		if len(param) == 0 || d.drops(param) {
			continue
		}
		if hasQuery {
			dst = append(dst, '&')
		} else {
			dst = append(dst, '?')
			hasQuery = true
		}
		dst = append(dst, param...)
	}
	return dst
}

// isParam reports a query parameter named name ("name" or "name=..."),
// its name percent-decoded (name is plain).
func isParam(param []byte, name string) bool {
	i := 0
	for k := 0; k < len(name); k++ {
		if i >= len(param) {
			return false
		}
		c := param[i]
		i++
		if c == '%' && i+1 < len(param) && hexdigit.Is(param[i]) && hexdigit.Is(param[i+1]) {
			c = hexdigit.Value(param[i])<<4 | hexdigit.Value(param[i+1])
			i += 2
		}
		if c != name[k] {
			return false
		}
	}
	return i == len(param) || param[i] == '='
}

// bytesView is b as a string without a copy, for a callee that keeps no
// part of it.
func bytesView(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// appendSegment appends s escaped as one path segment: every byte but the
// unreserved ones and those in keep is percent-encoded, and a dot segment
// ("." or "..") has its dots encoded, so nothing a client names can reach
// another path.
func appendSegment(dst []byte, s string, keep string) []byte {
	if s == "." || s == ".." {
		for range len(s) {
			dst = append(dst, "%2E"...)
		}
		return dst
	}
	const hex = "0123456789ABCDEF"
	for i := 0; i < len(s); i++ {
		c := s[i]
		if isUnreserved(c) || keepsByte(keep, c) {
			dst = append(dst, c)
			continue
		}
		dst = append(dst, '%', hex[c>>4], hex[c&0xf])
	}
	return dst
}

func keepsByte(keep string, c byte) bool {
	for i := 0; i < len(keep); i++ {
		if keep[i] == c {
			return true
		}
	}
	return false
}

// isUnreserved reports RFC 3986's unreserved characters.
func isUnreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '~'
}

// Package provider owns where and how the gateway sends a request to each
// LLM provider: the host and TLS (Upstream), the wire format a route type
// goes out in (Format), the request target (AppendPath), the last body
// edits a provider needs (PrepareBody: Vertex Claude's version, Bedrock's
// guardrail) and the provider's headers and credentials (Authorize).
// Translation between formats is backend/llm/convert's; this package only
// says which format.
//
// # Per request
//
//	f, ok := p.Format(rt, model)         // !ok: the provider does not serve rt
//	body, info, err := convert.Request(buf[:0], client, f, clientBody, &opts)
//	body = p.PrepareBody(out[:0], body, rt)
//	req.SetRequestURIBytes(p.AppendPath(target[:0], rt, info.Model, info.Stream, clientPath))
//	req.Header.SetHost(host); req.SetBodyRaw(body)
//	err = p.Authorize(ctx, req)          // last: SigV4 signs what is final
//
// # Providers
//
// The facts follow agentgateway (crates/llm/src/*.rs and
// crates/agentgateway/src/llm/mod.rs): hosts, paths per route type and
// API version, Vertex AI's publishers (Claude through rawPredict with
// anthropic_version in the body, Gemini through generateContent, other
// models through the OpenAI-compatible endpoint), Bedrock's Converse, and
// the Gemini "alt" query. Models named by the client are escaped to stay
// one path segment (a Bedrock ARN's ':' and '/' as the AWS SDK escapes
// them).
//
// Departures from agentgateway: a hostOverride does not keep the client's
// path (the provider's path is always used, so that a translated request
// goes where its format is served); the Anthropic provider does not move a
// client's "Authorization: Bearer" key to x-api-key (passthrough leaves
// the client's headers as they are); the Models route keeps the client's
// path where agentgateway answers 501; key locations in a query parameter
// are refused; the client's query, which goes with the provider's path as
// in agentgateway, loses a parameter the provider's path already has
// (Azure's api-version: agentgateway sends both) and, on Gemini and
// Vertex providers whose credentials the gateway puts on, the client's
// "key" (a Google API key beside the gateway's).
//
// # Credentials
//
// Nothing is read or fetched when a Provider is built: key files are read
// on first use and again when their modification time changes (checked at
// most once a second); Google credentials (a JSON key inline or in a file,
// or Application Default Credentials) give access tokens that are cached
// until a minute before they expire; AWS credentials are explicit keys or
// the SDK's default chain, loaded on first use and cached by the SDK;
// Microsoft Entra ID tokens come from the Azure SDK's credential of the
// configured form (client secret, managed identity, workload identity,
// developer tools or the DefaultAzureCredential chain), built on first use,
// and are cached as Google's are. A token is fetched once for all the
// requests that need it, on its own goroutine and within 10 s, whatever
// those requests allow: each stops waiting when its own context ends, and
// a failed fetch is not the answer of the requests that come after it. A
// Provider is immutable once built and safe for concurrent use.
package provider

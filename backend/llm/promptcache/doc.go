// Package promptcache owns prompt caching (the ai policy's promptCaching):
// the cache points the gateway adds to requests for providers that cache
// prompts on request, Bedrock Converse ({"cachePoint":{"type":"default"}}
// blocks) and Anthropic Messages (cache_control {"type":"ephemeral"} on a
// block). It runs on a body already in the provider's format (after
// backend/llm/convert) and writes only the points: every other byte is
// copied as it came.
//
// # Where the points go
//
// The places are agentgateway's (crates/llm/src/conversion/bedrock.rs):
//   - cacheSystem: after the system prompt (Bedrock: a block appended to
//     system; Anthropic: on its last block, a string prompt becoming one
//     text block);
//   - cacheMessages: after the second-to-last message, moved back by
//     cacheMessageOffset messages and kept at the first, so the point
//     caches the conversation before the current turn; none with fewer
//     than two messages (Bedrock: a block appended to its content;
//     Anthropic: on its last block that can carry one, not a thinking
//     block nor blank text);
//   - cacheTools: after the last tool definition (Bedrock: appended to
//     toolConfig.tools; Anthropic: on the last tool).
//
// A place the client already marked keeps its mark and takes no other.
//
// # Limits
//
// A request holds at most four cache points, the client's included
// (Anthropic refuses a fifth cache_control, Bedrock allows four
// checkpoints). Every cache_control member (Anthropic) or cachePoint
// member (Bedrock) that is not null counts, wherever it is in the system
// prompt, messages and tools; one in a tool's schema counts too, which
// only ever leaves a point out. When fewer are free than the policy asks
// for, the messages' point goes first (it caches the most), then the
// system's, then the tools'. The points added have the default
// five-minute TTL, and a longer TTL may not follow a shorter one, so none
// is added before the client's last point with a longer TTL ("ttl": "1h")
// in the order the prompt is cached.
//
// # minTokens
//
// Tokens are estimated as words x 1.3 (codec/llm/tokens.EstimateWords;
// the words of every string value of the tools, system prompt and
// messages, member names aside). A provider caches the prompt up to a
// point, tools first, then the system prompt, then the messages, and
// ignores a point whose prefix is under its minimum; so each point is
// placed only where the prefix before it is estimated at minTokens or
// more, and a prompt under minTokens is returned unchanged.
//
// Departures from agentgateway, which applies the policy only to Bedrock
// requests of Chat and Responses clients and checks minTokens against the
// system prompt's words alone: the policy applies to Anthropic Messages
// providers and to every client format, minTokens holds each point to its
// own prefix, and the four-point limit is kept.
package promptcache

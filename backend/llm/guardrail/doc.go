// Package guardrail owns the remote prompt guards of the `ai` policy's
// promptGuard (and the llm section's guardrails): a guard that asks a
// service whether a prompt or an answer may pass, must be masked or is
// rejected. The kinds are agentgateway's (crates/agentgateway/src/llm/policy):
//
//   - webhook: agentgateway's guardrail webhook protocol, to a host or a
//     top-level backend, with forwarded client headers and CEL-computed
//     ones (webhook.go);
//   - openAIModeration: OpenAI's /v1/moderations, prompts only
//     (moderation.go);
//   - bedrockGuardrails: AWS Bedrock's ApplyGuardrail, signed with SigV4
//     (bedrock.go);
//   - googleModelArmor: Model Armor's sanitizeUserPrompt and
//     sanitizeModelResponse, with a Google access token (modelarmor.go);
//   - azureContentSafety: Azure AI Content Safety's text:analyze and, on
//     prompts, text:detectJailbreak (azure.go).
//
// The regex guards are not here: backend/llm/aipolicy applies them in the
// body it edits.
//
// # Use
//
// The server compiles each guard once per snapshot (NewRequestGuard,
// NewResponseGuard) and, per exchange, gives Check the texts the guard's
// Unit names, in order: a PerMessage guard one Message per message (for an
// answer, one per choice), a PerText guard one per text of its Scope. A
// Verdict passes, masks (Messages replace the texts given, one for one,
// in order) or rejects (Rejection is the answer to send). Guards run in
// the configured order, each on the texts the guards before it left.
//
// # Failures
//
// A call that cannot be made, times out, gets an answer that is not 2xx, is
// larger than Options.MaxAnswer or does not decode is a failure. A
// webhook's failureMode decides what it means (failClosed, the default:
// Reject with the guard's rejection; failOpen: Pass), with Verdict.Failed
// set. The cloud guards return the error, as agentgateway's non-streaming
// path does (it answers 503); agentgateway's streaming and realtime paths
// let a failed cloud guard pass.
//
// # Calls
//
// Every call is bounded by the guard's timeout (policies.http.requestTimeout,
// else Options.Timeout, 10 s as agentgateway), shortened by the context's
// deadline, and its answer by Options.MaxAnswer. Calls go through
// backend.Upstream pools (the server's, through Options.Pool), over TLS to
// the services' real hosts, or over plain HTTP to Options.HostOverride's
// address (tests). Credentials come from the guard's policies.backendAuth,
// applied through an LLM provider compiled for the purpose
// (backend/llm/provider: AWS default chain or keys with the SDK's SigV4
// signer, Google ADC or a credential with cached access tokens, keys read
// again when their file changes); the policies' requestHeaderModifier
// applies before them.
//
// # Departures from agentgateway
//
//   - Answers are read strictly: agentgateway reads any 200..999 answer's
//     JSON whatever its status, and an answer that fits none of its shapes
//     often falls through to a pass (a webhook action {"body": "x"}
//     without status_code is a Pass there; Model Armor's error answer is a
//     sanitize answer without findings there). Here a non-2xx answer, a
//     webhook action with a body that is neither a mask nor a rejection, a
//     rejection status outside 200..599, a mask with another number of
//     texts than were sent, a Model Armor answer without
//     sanitizationResult and a Content Safety answer without
//     categoriesAnalysis (and no blocklist hit) are failures.
//   - A webhook mask replaces the texts one for one; agentgateway rebuilds
//     the conversation from the webhook's messages (dropping tool calls
//     and non-text parts).
//   - Model Armor's CSAM filter is read under the API's name
//     (csamFilterFilterResult) as well as agentgateway's
//     (csamFilterResult), and an overall filterMatchState of MATCH_FOUND
//     rejects too.
//   - A Content Safety key goes in Ocp-Apim-Subscription-Key by default
//     (agentgateway sends "Authorization: Bearer <key>", which the service
//     does not take). OpenAI moderation needs a key (agentgateway sends
//     the call without credentials).
//   - Each guard kind takes the backendAuth kinds its service can use
//     (OpenAI: key; Bedrock: aws or a Bedrock API key; Model Armor: gcp;
//     Content Safety: key or azure; all: passthrough), and refuses others.
//   - A cloud guard given no text (all empty) passes without a call.
//   - forwardHeaderMatches refuses pseudo-headers (agentgateway skips
//     them) and headers that frame the message or belong to a connection.
package guardrail

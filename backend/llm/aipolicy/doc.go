// Package aipolicy owns the `ai` policy applied to LLM requests: model
// aliases, body defaults, overrides and CEL transformations, prompt
// enrichment, the regex request guards (and the merged regex response
// guard the server runs on answers), and the rejection a guarded request
// gets. The server merges the route's and the backend's policies into one
// config.AIPolicy and compiles it with New.
//
// # Order
//
// agentgateway (crates/agentgateway/src/llm/mod.rs) handles a chat request
// in this order, and so does the server with this package:
//
//  1. Body mutations (Request; apply_request_body_mutations): every
//     transformation is evaluated on the client's body (llmRequest), then
//     the overrides are set, then the transformations' results (so a
//     transformation beats an override of the same field), then the
//     defaults fill the fields still absent. A transformation whose
//     expression fails, or whose result has no JSON form, removes its
//     field (a default of that name then fills it); one that gives null
//     sets the field to null.
//  2. The model alias (Alias, applied by the server to Model of the
//     mutated body: an override of "model" is aliased too).
//  3. Prompt enrichment (Request; apply_prompt_enrichment): prepended and
//     appended messages, for Chat, Messages and Responses bodies.
//  4. The request guards in order (Request; apply_prompt_guard), over the
//     texts of their scope, prompts included: a mask rewrites the texts for
//     the guards after it and for the provider; the first guard that
//     refuses a text stops the request with its Rejection. Remote guards
//     (RequestRemote, backend/llm/guardrail) run in the same order on the
//     request's messages; unlike agentgateway they do not see the prompts
//     enrichment added, which regex guards check when the policy compiles.
//  5. Translation to the provider's format (convert.Request, with the
//     alias as Options.Model), then finalTransformations (Final) on the
//     translated body.
//
// # Editing bodies
//
// Bodies are edited the way codec/llm edits them: the body is checked once
// with llm.ValidObject, indexed in one more pass (scan.go: every value's
// span and where each container ends, in a pooled tape, so that walkers
// never read a text twice), and written out once with every change in
// place (rewrite.go): the fields' members, the prompts inserted into the
// conversation, the masked strings; everything else is copied byte for
// byte, and a body nothing changes is not copied at all. Only
// transformations decode the body, once, into the map CEL reads as
// llmRequest. The prompts are configuration, so the guards run on them
// when the policy is compiled, not per request.
//
// The texts a guard reads follow agentgateway's visit_text_mut of each
// request type (texts.go). agentgateway joins adjacent text parts of one
// message into one text (and collapses the parts into one when it masks);
// here a regex guard reads the parts of one message joined and each alone
// (guard.AppendMaskParts), so a match split across parts is found, and
// masks each part in place: the message keeps its parts, a match across
// parts leaving its label in the part it starts in.
//
// Streamed answers (promptGuard.streaming: Enabled) are judged by the remote
// response guards in windows (window.go): StreamWindow gathers the text,
// ResponseWindow judges each window of 1 KiB of new text plus the last
// 256 bytes already judged, as agentgateway does.
package aipolicy

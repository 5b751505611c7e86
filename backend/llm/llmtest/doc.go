// Package llmtest owns the LLM provider emulators the gateway's tests talk to:
// one HTTP server per provider wire format (OpenAI, Azure OpenAI, Anthropic,
// Gemini, Vertex AI with its OAuth token endpoint, Bedrock with SigV4), each on
// 127.0.0.1 at an OS-chosen port, started by a test and stopped by its
// Cleanup. An emulator checks the provider's authentication, records every
// request it receives (method, path, query, headers, body) and answers in the
// provider's own format (field names, stream events, stop reasons, usage,
// error bodies) with a configurable model reply or failure.
//
// A test sets an emulator's exported fields (keys, region, guardrail)
// between requests, never while one is in flight; answers are queued with
// Enqueue (or set with SetDefault), and Hold, Refuse and the Failure and
// Reply fields make the upstream slow, cut or absent.
//
// The formats are proven by this package's tests, which drive each emulator
// with the provider's official Go SDK. Import the package from tests only.
package llmtest

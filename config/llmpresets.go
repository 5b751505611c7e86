package config

import "strings"

// llmPreset is what a provider preset stands for: a custom provider (its
// formats, the paths that differ from the usual ones, its name for costs
// and telemetry) at a known base URL.
type llmPreset struct {
	baseURL string
	formats []ProviderFormat
}

// llmPresets are agentgateway's presets (crates/llm/src/custom.rs): the
// same addresses and formats, so a model naming one reaches the same
// endpoints.
var llmPresets = map[string]llmPreset{
	"cohere": {"https://api.cohere.ai", formats(
		"completions=/compatibility/v1/chat/completions", "embeddings=/compatibility/v1/embeddings", "rerank=/v2/rerank")},
	"ollama":      {"http://localhost:11434/v1", formats("completions", "responses", "embeddings")},
	"baseten":     {"https://inference.baseten.co/v1", formats("completions", "messages")},
	"cerebras":    {"https://api.cerebras.ai/v1", formats("completions")},
	"deepinfra":   {"https://api.deepinfra.com/v1/openai", formats("completions", "messages=/anthropic/v1/messages", "embeddings")},
	"deepseek":    {"https://api.deepseek.com/v1", formats("completions", "messages=/anthropic/v1/messages", "responses")},
	"groq":        {"https://api.groq.com/openai/v1", formats("completions", "responses")},
	"huggingface": {"https://router.huggingface.co/v1", formats("completions", "responses")},
	"mistral":     {"https://api.mistral.ai/v1", formats("completions", "embeddings")},
	"openrouter":  {"https://openrouter.ai/api/v1", formats("completions", "messages", "responses", "embeddings", "rerank")},
	"togetherai":  {"https://api.together.xyz/v1", formats("completions", "embeddings", "rerank")},
	"xai":         {"https://api.x.ai/v1", formats("completions", "responses", "realtime")},
	"fireworks":   {"https://api.fireworks.ai/inference/v1", formats("completions", "messages", "responses", "embeddings", "rerank")},
}

// formats reads "type" or "type=path" entries.
func formats(entries ...string) []ProviderFormat {
	out := make([]ProviderFormat, len(entries))
	for i, e := range entries {
		typ, path, ok := strings.Cut(e, "=")
		out[i].Type = typ
		if ok {
			out[i].Path = &path
		}
	}
	return out
}

// PresetProvider is the custom provider a preset stands for, with its
// default base URL (false for a name that is not a preset). The provider
// is a new value each call: the caller may change it.
func PresetProvider(name string) (p *CustomProvider, baseURL string, ok bool) {
	ps, ok := llmPresets[name]
	if !ok {
		return nil, "", false
	}
	override := name
	return &CustomProvider{ProviderOverride: &override, Formats: append([]ProviderFormat(nil), ps.formats...)}, ps.baseURL, true
}

// llm-client.mjs: the official OpenAI and Anthropic TypeScript SDKs as
// clients of the gateway's LLM routes, for server's TestLLMNodeSDKs.
//
//   node llm-client.mjs '{"base": "http://127.0.0.1:PORT", "model": "gpt-4o-mini"}'
//
// Runs each step in order and prints one JSON object: for every step its
// result ({text, usage, ...}) or {error, status}. Every step asks for the
// model cfg.model; the Go test queues the provider's answers in the same
// order.
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';

const cfg = JSON.parse(process.argv[2]);
const model = cfg.model;
const oai = new OpenAI({ baseURL: cfg.base + '/v1', apiKey: 'client-key', maxRetries: 0, timeout: 15000 });
const ant = new Anthropic({ baseURL: cfg.base, apiKey: 'client-key', maxRetries: 0, timeout: 15000 });
const question = 'What is the capital of France?';
const weather = {
  name: 'get_weather',
  description: 'The weather in a city',
  parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
};

const out = {};
async function step(name, fn) {
  try {
    out[name] = await fn();
  } catch (e) {
    out[name] = { error: String((e && e.message) || e), status: e && e.status };
  }
}

await step('chat', async () => {
  const r = await oai.chat.completions.create({ model, messages: [{ role: 'user', content: question }] });
  return { text: r.choices[0].message.content, usage: r.usage.total_tokens, finish: r.choices[0].finish_reason };
});

await step('chatStream', async () => {
  const s = await oai.chat.completions.create({
    model, messages: [{ role: 'user', content: question }], stream: true, stream_options: { include_usage: true },
  });
  let text = '';
  let usage = null;
  for await (const c of s) {
    if (c.choices[0]?.delta?.content) text += c.choices[0].delta.content;
    if (c.usage) usage = c.usage.total_tokens;
  }
  return { text, usage };
});

await step('chatTool', async () => {
  const r = await oai.chat.completions.create({
    model, messages: [{ role: 'user', content: 'Weather in Paris?' }], tools: [{ type: 'function', function: weather }],
  });
  const call = r.choices[0].message.tool_calls[0];
  return { name: call.function.name, args: JSON.parse(call.function.arguments), finish: r.choices[0].finish_reason };
});

await step('messages', async () => {
  const r = await ant.messages.create({ model, max_tokens: 100, messages: [{ role: 'user', content: question }] });
  return { text: r.content[0].text, usage: r.usage.input_tokens + r.usage.output_tokens, stop: r.stop_reason };
});

await step('messagesStream', async () => {
  const s = ant.messages.stream({ model, max_tokens: 100, messages: [{ role: 'user', content: question }] });
  let text = '';
  s.on('text', (t) => { text += t; });
  const m = await s.finalMessage();
  return { text, usage: m.usage.input_tokens + m.usage.output_tokens, stop: m.stop_reason };
});

await step('messagesTool', async () => {
  const r = await ant.messages.create({
    model, max_tokens: 100, messages: [{ role: 'user', content: 'Weather in Paris?' }],
    tools: [{ name: weather.name, description: weather.description, input_schema: weather.parameters }],
  });
  const use = r.content.find((b) => b.type === 'tool_use');
  return { name: use.name, args: use.input, stop: r.stop_reason };
});

await step('responses', async () => {
  const r = await oai.responses.create({ model, input: question });
  return { text: r.output_text, usage: r.usage.total_tokens };
});

await step('responsesStream', async () => {
  const s = oai.responses.stream({ model, input: question });
  let text = '';
  s.on('response.output_text.delta', (e) => { text += e.delta; });
  const r = await s.finalResponse();
  return { text, usage: r.usage.total_tokens };
});

console.log(JSON.stringify(out));

// Drives ft serve with the official `openai` and `@anthropic-ai/sdk` npm clients
// (scripts/setup-clients.sh). Run by server_clients_test.cpp:
//   node server_clients_test.mjs CLIENTS_NODE_MODULES RANDOM_PORT SCRIPTED_PORT
// RANDOM_PORT serves the tiny random model ("tiny"); SCRIPTED_PORT a model whose output
// is a Qwen3 tool call. Exits non-zero on the first failed check.
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';

const [modules, randomPort, scriptedPort] = process.argv.slice(2);
const require = createRequire(modules + '/');
const OpenAI = require('openai').default;
const Anthropic = require('@anthropic-ai/sdk').default;

const openai = new OpenAI({ baseURL: `http://127.0.0.1:${randomPort}/v1`, apiKey: 'unused', maxRetries: 0 });
const anthropic = new Anthropic({ baseURL: `http://127.0.0.1:${randomPort}`, apiKey: 'unused', maxRetries: 0 });
const openaiTools = new OpenAI({ baseURL: `http://127.0.0.1:${scriptedPort}/v1`, apiKey: 'unused', maxRetries: 0 });
const anthropicTools = new Anthropic({ baseURL: `http://127.0.0.1:${scriptedPort}`, apiKey: 'unused', maxRetries: 0 });
const messages = [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hi there' }];
const checks = [];
const check = async (name, fn) => { await fn(); checks.push(name); };

await check('openai models', async () => {
  const page = await openai.models.list();
  assert.deepEqual(page.data.map((m) => m.id), ['tiny']);
});

let plainText;
await check('openai chat', async () => {
  const r = await openai.chat.completions.create({ model: 'tiny', messages, max_tokens: 6, temperature: 0, ignore_eos: true });
  assert.equal(r.object, 'chat.completion');
  assert.equal(r.choices[0].finish_reason, 'length');
  assert.equal(typeof r.choices[0].message.content, 'string');
  assert.equal(r.usage.completion_tokens, 6);
  plainText = r.choices[0].message.content;
});

await check('openai streaming chat', async () => {
  const stream = await openai.chat.completions.create({
    model: 'tiny', messages, max_tokens: 6, temperature: 0, ignore_eos: true, stream: true,
    stream_options: { include_usage: true },
  });
  let text = '';
  let finish = null;
  let usage = null;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      text += c.delta.content ?? '';
      finish = c.finish_reason ?? finish;
    }
  }
  assert.equal(text, plainText);
  assert.equal(finish, 'length');
  assert.equal(usage.completion_tokens, 6);
});

await check('openai completions', async () => {
  const r = await openai.completions.create({ model: 'tiny', prompt: 'Once upon', max_tokens: 5, temperature: 0, ignore_eos: true });
  assert.equal(r.choices[0].finish_reason, 'length');
  const stream = await openai.completions.create({
    model: 'tiny', prompt: 'Once upon', max_tokens: 5, temperature: 0, ignore_eos: true, stream: true,
  });
  let text = '';
  for await (const chunk of stream) for (const c of chunk.choices) text += c.text;
  assert.equal(text, r.choices[0].text);
});

await check('openai errors', async () => {
  await assert.rejects(openai.chat.completions.create({ model: 'gpt-9', messages }),
    (e) => e instanceof OpenAI.NotFoundError && e.status === 404);
  await assert.rejects(openai.chat.completions.create({ model: 'tiny', messages, temperature: 'hot' }),
    (e) => e instanceof OpenAI.BadRequestError && e.param === 'temperature');
});

const weatherTool = {
  type: 'function',
  function: {
    name: 'get_weather', description: 'Weather of a city',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  },
};
await check('openai tool-call round trip', async () => {
  const ask = [{ role: 'user', content: 'Weather in Paris?' }];
  const r = await openaiTools.chat.completions.create({ model: 'tiny', messages: ask, tools: [weatherTool], temperature: 0 });
  assert.equal(r.choices[0].finish_reason, 'tool_calls');
  const call = r.choices[0].message.tool_calls[0];
  assert.equal(call.function.name, 'get_weather');
  assert.deepEqual(JSON.parse(call.function.arguments), { city: 'Paris' });
  // Send the call and its result back, as an agent does.
  const r2 = await openaiTools.chat.completions.create({
    model: 'tiny', tools: [weatherTool], temperature: 0,
    messages: [...ask, r.choices[0].message, { role: 'tool', tool_call_id: call.id, content: '18C' }],
  });
  assert.ok(r2.usage.prompt_tokens > r.usage.prompt_tokens);
});

await check('anthropic messages', async () => {
  const m = await anthropic.messages.create({
    model: 'tiny', max_tokens: 6, temperature: 0, system: 'Be brief.',
    messages: [{ role: 'user', content: 'Hi there' }], ignore_eos: true,
  });
  assert.equal(m.type, 'message');
  assert.equal(m.stop_reason, 'max_tokens');
  assert.equal(m.content[0].type, 'text');
  assert.equal(m.content[0].text, plainText);
  const stream = anthropic.messages.stream({
    model: 'tiny', max_tokens: 6, temperature: 0, system: 'Be brief.',
    messages: [{ role: 'user', content: 'Hi there' }], ignore_eos: true,
  });
  const fin = await stream.finalMessage();
  assert.equal(fin.content[0].text, plainText);
  assert.equal(fin.stop_reason, 'max_tokens');
  assert.equal(fin.usage.output_tokens, 6);
  const n = await anthropic.messages.countTokens({ model: 'tiny', system: 'Be brief.', messages: [{ role: 'user', content: 'Hi there' }] });
  assert.equal(n.input_tokens, m.usage.input_tokens);
});

await check('anthropic tool use round trip', async () => {
  const tools = [{ name: 'get_weather', description: 'Weather of a city', input_schema: weatherTool.function.parameters }];
  const ask = [{ role: 'user', content: 'Weather in Paris?' }];
  const m = await anthropicTools.messages.create({ model: 'tiny', max_tokens: 200, temperature: 0, tools, messages: ask });
  assert.equal(m.stop_reason, 'tool_use');
  const use = m.content.find((b) => b.type === 'tool_use');
  assert.deepEqual(use.input, { city: 'Paris' });
  const fin = await anthropicTools.messages.stream({ model: 'tiny', max_tokens: 200, temperature: 0, tools, messages: ask }).finalMessage();
  assert.deepEqual(fin.content.find((b) => b.type === 'tool_use').input, { city: 'Paris' });
  const m2 = await anthropicTools.messages.create({
    model: 'tiny', max_tokens: 200, temperature: 0, tools,
    messages: [...ask, { role: 'assistant', content: m.content },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: '18C' }] }],
  });
  assert.ok(m2.usage.input_tokens > m.usage.input_tokens);
});

console.log(`clients ok: ${checks.join(', ')}`);

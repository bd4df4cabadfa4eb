'use strict'
// torch-node serve (lib/serve/), driven by the real clients from npm: the official `openai` client
// and the Vercel AI SDK (`ai` with `@ai-sdk/openai-compatible`).
// - In this process, over scripted models (what a model says is fixed, so tool calls are certain):
//   tool calls whole and streamed, the next turn's tool messages, refusals, limits, the API key,
//   /metrics, QueueFull, and close() within and past its deadline.
// - `torch-node serve` as a child process on port 0, with the tiny models of `npm run models`:
//   chat, completions and embeddings against the models run directly, tools rendered through a
//   chat template that reads them, hostile requests answered at once while it keeps serving, and
//   SIGTERM during a stream.
const { describe, test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const http = require('node:http')
const os = require('node:os')
const path = require('node:path')
const { spawn } = require('node:child_process')
const { createHandler, closer } = require('../lib/serve/app')

const ROOT = path.join(__dirname, '..')
const BIN = path.join(ROOT, 'bin', 'torch-node.js')
const LM_DIR = path.join(ROOT, 'models', 'golden', 'lm', 'llama-tiny')
const ENCODER_DIR = path.join(ROOT, 'models', 'golden', 'text', 'minilm')
const GOLDEN_FILE = path.join(ROOT, 'models', 'golden', 'text', 'minilm.golden.json')
const WEATHER = {
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'The weather in a city',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  },
}
const ASK = [{ role: 'user', content: 'Weather in Paris?' }]

async function openai(url, apiKey = 'unused') {
  const { default: OpenAI } = await import('openai')
  return new OpenAI({ baseURL: `${url}/v1`, apiKey, maxRetries: 0 })
}

async function aiProvider(url, apiKey, options = {}) {
  const { createOpenAICompatible } = await import('@ai-sdk/openai-compatible')
  return createOpenAICompatible({ name: 'torch-node', baseURL: `${url}/v1`, ...(apiKey && { apiKey }), ...options })
}

/** The error a request rejects with. */
async function rejection(promise) {
  try {
    await promise
  } catch (e) {
    return e
  }
  assert.fail('expected the request to fail')
}

/** POSTs JSON (or a string as it is); resolves to {status, headers, body, ms}. */
async function post(url, route, body, headers = {}) {
  const t0 = performance.now()
  const res = await fetch(`${url}${route}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  })
  const text = await res.text()
  let json
  try {
    json = JSON.parse(text)
  } catch {
    json = text
  }
  return { status: res.status, headers: res.headers, body: json, ms: performance.now() - t0 }
}

/**
 * A model that says what `script(messages)` returns, in pieces of 4 characters: the server's
 * side of the contract (lib/serve/chat.js's ChatModel) without weights.
 */
function scripted(name, script, { toolFormat = 'hermes' } = {}) {
  const prompts = []
  return {
    kind: 'chat',
    name,
    toolFormat,
    markers: new Map(),
    prompts,
    async prompt(messages, tools, plain) {
      prompts.push({ messages, tools, plain })
      return messages
    },
    async *generate(input, options) {
      const text = typeof input === 'string' ? input : await script(input, options)
      if (text === null) return { finishReason: 'aborted', usage: { promptTokens: 5, completionTokens: 0 } }
      const pieces = text.match(/[\s\S]{1,4}/g) ?? []
      for (const p of pieces) yield { text: p, tokens: [0] }
      return { finishReason: 'stop', usage: { promptTokens: 5, completionTokens: pieces.length } }
    },
    stats: () => ({ active: 0, queued: 0 }),
    dispose() {},
  }
}

/** Serves `models` (ChatModel/EmbeddingModel objects) on a loopback port. */
async function serveScripted(models, options = {}) {
  const { handle, ctx } = createHandler({ models, ...options })
  const server = http.createServer(handle)
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
  const url = `http://127.0.0.1:${server.address().port}`
  return {
    url,
    ctx,
    server,
    close: () =>
      new Promise((resolve) => {
        server.close(resolve)
        server.closeAllConnections()
      }),
  }
}

const CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'

describe('serve in this process: tool calls with the openai client and the AI SDK', () => {
  let s
  let weather
  before(async () => {
    // Calls the tool until the conversation holds its result, then answers with it.
    weather = scripted('weather', (messages) => {
      const result = messages.find((m) => m.role === 'tool')
      return result ? `It is ${result.content} in Paris.` : `Let me check. ${CALL}`
    })
    const plain = scripted('plain', () => 'hello', { toolFormat: null })
    s = await serveScripted([weather, plain])
  })
  after(() => s?.close())

  test('openai, not streamed: content, tool_calls with a JSON string of arguments, finish_reason tool_calls', async () => {
    const client = await openai(s.url)
    const res = await client.chat.completions.create({ model: 'weather', messages: ASK, tools: [WEATHER] })
    const { message, finish_reason } = res.choices[0]
    assert.equal(finish_reason, 'tool_calls')
    assert.equal(message.content, 'Let me check.')
    assert.equal(message.tool_calls.length, 1)
    assert.match(message.tool_calls[0].id, /^call_[0-9a-f]{24}$/)
    assert.deepEqual(message.tool_calls[0].function, { name: 'get_weather', arguments: '{"city":"Paris"}' })
    // The template got the tools as OpenAI's {type, function} objects, and the chat as sent.
    assert.deepEqual(weather.prompts.at(-1), { messages: ASK, tools: [WEATHER], plain: true })
  })

  test('openai, streamed: the tool-call deltas assemble into the same call (the client own helper)', async () => {
    const client = await openai(s.url)
    const stream = await client.chat.completions.create({
      model: 'weather',
      messages: ASK,
      tools: [WEATHER],
      stream: true,
    })
    const chunks = []
    for await (const c of stream) chunks.push(c.choices[0])
    const calls = chunks.filter((c) => c.delta.tool_calls)
    assert.equal(calls[0].delta.tool_calls[0].function.name, 'get_weather')
    assert.equal(calls[0].delta.tool_calls[0].function.arguments, '')
    assert.equal(chunks.map((c) => c.delta.content ?? '').join(''), 'Let me check.')
    assert.equal(chunks.at(-1).finish_reason, 'tool_calls')

    const final = await client.chat.completions
      .stream({ model: 'weather', messages: ASK, tools: [WEATHER] })
      .finalChatCompletion()
    assert.deepEqual(final.choices[0].message.tool_calls[0].function, {
      name: 'get_weather',
      arguments: '{"city":"Paris"}',
    })
  })

  test('the next turn: the assistant tool call and the tool result reach the template', async () => {
    const client = await openai(s.url)
    const call = { id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }
    const res = await client.chat.completions.create({
      model: 'weather',
      tools: [WEATHER],
      messages: [
        ...ASK,
        { role: 'assistant', content: null, tool_calls: [call] },
        { role: 'tool', tool_call_id: 'call_1', content: 'sunny' },
      ],
    })
    assert.equal(res.choices[0].message.content, 'It is sunny in Paris.')
    assert.equal(res.choices[0].finish_reason, 'stop')
    assert.equal(res.choices[0].message.tool_calls, undefined)
    // transformers' convention: arguments as an object for the template.
    const { messages, plain } = weather.prompts.at(-1)
    assert.equal(plain, false)
    assert.deepEqual(messages[1], {
      role: 'assistant',
      content: '',
      tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: { city: 'Paris' } } }],
    })
    assert.deepEqual(messages[2], { role: 'tool', tool_call_id: 'call_1', content: 'sunny' })
  })

  test('the AI SDK: generateText runs the tool and answers with its result; streamText streams the call', async () => {
    const { generateText, streamText, tool, jsonSchema, stepCountIs } = await import('ai')
    const provider = await aiProvider(s.url)
    const tools = {
      get_weather: tool({
        description: 'The weather in a city',
        inputSchema: jsonSchema(WEATHER.function.parameters),
        execute: async ({ city }) => (city === 'Paris' ? 'sunny' : 'unknown'),
      }),
    }
    const result = await generateText({
      model: provider('weather'),
      prompt: 'Weather in Paris?',
      tools,
      stopWhen: stepCountIs(3),
    })
    assert.equal(result.steps.length, 2)
    assert.deepEqual(
      result.steps[0].toolCalls.map((c) => [c.toolName, c.input]),
      [['get_weather', { city: 'Paris' }]],
    )
    assert.equal(result.steps[0].finishReason, 'tool-calls')
    assert.match(result.text, /sunny/)

    const streamed = streamText({ model: provider('weather'), prompt: 'Weather in Paris?', tools })
    const parts = []
    for await (const part of streamed.fullStream) parts.push(part)
    const call = parts.find((p) => p.type === 'tool-call')
    assert.deepEqual([call.toolName, call.input], ['get_weather', { city: 'Paris' }])
    assert.ok(!parts.some((p) => p.type === 'error'), JSON.stringify(parts.filter((p) => p.type === 'error')))
  })

  test('special marker tokens that decode to nothing are put back before parsing (Mistral [TOOL_CALLS])', async () => {
    // A tokenizer that has [TOOL_CALLS] as a special token (id 7) drops it from the decoded text.
    const mistral = scripted('mistral', () => 'unused', { toolFormat: 'mistral' })
    mistral.markers.set(7, '[TOOL_CALLS]')
    mistral.generate = async function* () {
      yield { text: '', tokens: [7] }
      for (const text of ['[{"name": "get_weather", ', '"arguments": {"city": "Paris"}}]']) yield { text, tokens: [1] }
      return { finishReason: 'stop', usage: { promptTokens: 5, completionTokens: 3 } }
    }
    const t = await serveScripted([mistral])
    try {
      const client = await openai(t.url)
      const res = await client.chat.completions.create({ messages: ASK, tools: [WEATHER] })
      assert.equal(res.choices[0].message.content, null)
      assert.deepEqual(res.choices[0].message.tool_calls[0].function, {
        name: 'get_weather',
        arguments: '{"city":"Paris"}',
      })
      // Mistral's templates take back only ids of 9 letters and digits.
      assert.match(res.choices[0].message.tool_calls[0].id, /^[0-9a-f]{9}$/)
      const final = await client.chat.completions.stream({ messages: ASK, tools: [WEATHER] }).finalChatCompletion()
      assert.equal(final.choices[0].finish_reason, 'tool_calls')
      assert.equal(final.choices[0].message.tool_calls[0].function.name, 'get_weather')
    } finally {
      await t.close()
    }
  })

  test('response_format and a forced tool_choice reach the model as its responseFormat', async () => {
    const seen = []
    const echo = scripted('echo', (messages, options) => {
      seen.push(options.responseFormat)
      return options.responseFormat?.type === 'tool_calls' ? CALL : '{"city": "Paris"}'
    })
    const t = await serveScripted([echo])
    try {
      const client = await openai(t.url)
      const { zodResponseFormat } = await import('openai/helpers/zod')
      const { z } = await import('zod')
      const format = zodResponseFormat(z.object({ city: z.string() }), 'place')
      const parsed = await client.chat.completions.parse({ model: 'echo', messages: ASK, response_format: format })
      assert.deepEqual(parsed.choices[0].message.parsed, { city: 'Paris' })
      const forced = await client.chat.completions.create({
        model: 'echo',
        messages: ASK,
        tools: [WEATHER],
        tool_choice: { type: 'function', function: { name: 'get_weather' } },
        parallel_tool_calls: false,
      })
      assert.equal(forced.choices[0].finish_reason, 'tool_calls')
      await client.chat.completions.create({ model: 'echo', messages: ASK, response_format: { type: 'text' } })
      assert.deepEqual(seen, [
        format,
        {
          type: 'tool_calls',
          tools: [WEATHER],
          toolChoice: { type: 'function', function: { name: 'get_weather' } },
          format: 'hermes',
          parallel: false,
        },
        undefined,
      ])
    } finally {
      await t.close()
    }
  })

  test('chatModel: the chat and its tools go to CausalLM unrendered; max_tokens strict; markers found', async () => {
    const { chatModel } = require('../lib/serve/chat')
    // A Tokenizer's part that chatModel reads at load; special tokens decode to nothing.
    const tokenizer = (chatTemplate, specials = {}) => ({
      chatTemplate,
      tokenToId: (t) => specials[t] ?? null,
      decode: () => '',
    })
    const calls = []
    const lm = {
      async *generate(input, options) {
        calls.push({ input, options })
        if (options.maxNewTokens > 100) {
          const e = new Error("CausalLM.generate: 'maxNewTokens' is too large: 101. This model's maximum context")
          throw Object.assign(e, { code: 'InvalidArg' })
        }
        yield { text: 'x', tokens: [1] }
        return { finishReason: 'stop', usage: { promptTokens: 3, completionTokens: 1 } }
      },
      tokenize: async (input, options) => (calls.push({ input, options }), [1, 2, 3]),
    }
    const qwen = chatModel('q', lm, tokenizer('{%- if tools %}{{ tools | tojson }}{% endif %}<tool_call>'))
    assert.equal(qwen.toolFormat, 'hermes')
    assert.equal(await qwen.prompt(ASK, [WEATHER], true), ASK) // CausalLM renders it, tools and all
    const drain = async (it) => {
      while (!(await it.next()).done);
    }
    await drain(qwen.generate(ASK, { tools: [WEATHER], maxNewTokens: 4 }))
    assert.deepEqual(calls.at(-1), { input: ASK, options: { tools: [WEATHER], maxNewTokens: 4, strictContext: true } })
    await drain(qwen.generate(ASK, { temperature: 0 }))
    assert.deepEqual(calls.at(-1).options, { temperature: 0 }) // no max_tokens: the model's default, cut at the context
    await assert.rejects(drain(qwen.generate(ASK, { maxNewTokens: 101 })), {
      status: 400,
      code: 'InvalidArg',
      message: /^'max_tokens' is too large: 101\. This model's maximum context$/,
    })
    assert.deepEqual(await qwen.tokenize(ASK, [WEATHER]), [1, 2, 3])
    assert.deepEqual(calls.at(-1), { input: ASK, options: { tools: [WEATHER] } })
    const smol3 = chatModel('s', lm, tokenizer('{%- if xml_tools %}{{ xml_tools }}{% endif %}<tool_call>'))
    assert.equal(smol3.toolFormat, 'hermes')
    const mistral = chatModel('m', lm, tokenizer('{% if tools %}{% endif %}[TOOL_CALLS]', { '[TOOL_CALLS]': 9 }))
    assert.equal(mistral.toolFormat, 'mistral')
    assert.deepEqual([...mistral.markers], [[9, '[TOOL_CALLS]']])
    // Text that only mentions tools ("<tools></tools> XML tags") is no variable: no tools read.
    assert.equal(chatModel('c', lm, tokenizer('{{ "<tools></tools> XML tags" }}')).toolFormat, null)
  })

  test('parallel_tool_calls: false keeps the first call', async () => {
    const two = scripted('two', () => `${CALL}\n${CALL.replace('Paris', 'Rome')}`)
    const t = await serveScripted([two])
    try {
      const client = await openai(t.url)
      const all = await client.chat.completions.create({ messages: ASK, tools: [WEATHER] })
      assert.equal(all.choices[0].message.tool_calls.length, 2)
      const one = await client.chat.completions.create({ messages: ASK, tools: [WEATHER], parallel_tool_calls: false })
      assert.equal(one.choices[0].message.tool_calls.length, 1)
      const stream = await client.chat.completions.create({
        messages: ASK,
        tools: [WEATHER],
        parallel_tool_calls: false,
        stream: true,
      })
      const indexes = new Set()
      for await (const c of stream) for (const d of c.choices[0]?.delta.tool_calls ?? []) indexes.add(d.index)
      assert.deepEqual([...indexes], [0])
    } finally {
      await t.close()
    }
  })

  test('refused with 400, within a second, naming what is wrong; the server keeps serving', async () => {
    const call = { id: 'c1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }
    for (const [body, pattern] of [
      [
        { tool_choice: { type: 'function', function: { name: 'nope' } } },
        /tool_choice\.function\.name: no tool named "nope" in tools \(get_weather\)/,
      ],
      [{ tool_choice: 'sometimes' }, /tool_choice: expected "auto", "none", "required" or/],
      [
        { tools: [{ ...WEATHER, function: { ...WEATHER.function, strict: true } }] },
        /tools\[0\]\.function\.strict: true needs tool_choice "required" or a named function/,
      ],
      [
        { tool_choice: 'required', response_format: { type: 'json_object' } },
        /response_format: not with a forced tool_choice/,
      ],
      [{ response_format: { type: 'yaml' } }, /response_format: expected/],
      [
        { tools: [{ type: 'function', function: { name: 'bad name!' } }] },
        /tools\[0\]\.function\.name: expected 1 to 64 letters/,
      ],
      [{ tools: [WEATHER, WEATHER] }, /tools\[1\]\.function\.name: "get_weather" is given twice/],
      [
        { tools: [{ type: 'function', function: { name: 'f', parameters: 'x' } }] },
        /parameters: expected a JSON Schema object/,
      ],
      [{ tools: Array(129).fill(WEATHER) }, /tools: expected an array of 1 to 128 tools/],
      [
        { messages: [...ASK, { role: 'tool', tool_call_id: 'c9', content: 'x' }] },
        /messages\[1\]\.tool_call_id: expected the id of a tool call of an earlier assistant message/,
      ],
      [
        { messages: [...ASK, { role: 'assistant', tool_calls: 'x' }] },
        /messages\[1\]\.tool_calls: expected a non-empty array/,
      ],
      [
        {
          messages: [
            ...ASK,
            { role: 'assistant', tool_calls: [{ ...call, function: { name: 'f', arguments: '{oops' } }] },
          ],
        },
        /messages\[1\]\.tool_calls\[0\]\.function\.arguments: expected a JSON object in a string, got "\{oops"/,
      ],
      [
        { messages: [...ASK, { role: 'assistant', tool_calls: [{ type: 'function', function: call.function }] }] },
        /tool_calls\[0\]\.id: expected a string/,
      ],
      [
        { messages: [{ role: 'tool', content: 'x', tool_call_id: 'c1', extra: 1 }] },
        /messages\[0\]: unsupported key "extra" for role tool/,
      ],
      [
        { messages: [{ role: 'function', content: 'x' }] },
        /messages\[0\]\.role: expected one of system, developer, user, assistant, tool/,
      ],
    ]) {
      const r = await post(s.url, '/v1/chat/completions', {
        model: 'weather',
        messages: ASK,
        tools: [WEATHER],
        ...body,
      })
      assert.equal(r.status, 400, `${JSON.stringify(body).slice(0, 200)}: ${JSON.stringify(r.body)}`)
      assert.equal(r.body.error.code, 'InvalidArg')
      assert.equal(r.body.error.type, 'invalid_request_error')
      assert.match(r.body.error.message, pattern)
      assert.ok(r.ms < 1000, `${r.ms} ms`)
    }
    // A template without tools gets the generic format (its answer a JSON object under a grammar):
    // served, not refused; what does not parse as that JSON is text.
    const r = await post(s.url, '/v1/chat/completions', { model: 'plain', messages: ASK, tools: [WEATHER] })
    assert.equal(r.status, 200)
    assert.equal(r.body.choices[0].message.content, 'hello')
    // tool_choice 'none': the tools are not shown; the answer is text.
    const none = await post(s.url, '/v1/chat/completions', {
      model: 'plain',
      messages: ASK,
      tools: [WEATHER],
      tool_choice: 'none',
    })
    assert.equal(none.status, 200)
    assert.equal(none.body.choices[0].message.content, 'hello')
    const client = await openai(s.url)
    const ok = await client.chat.completions.create({ model: 'weather', messages: ASK, tools: [WEATHER] })
    assert.equal(ok.choices[0].finish_reason, 'tool_calls')
  })
})

describe('serve in this process: routes, limits, API key, metrics, overload, shutdown', () => {
  test('the API key guards /v1/*; /health and /metrics stay open', async () => {
    const s = await serveScripted([scripted('m', () => 'hi')], { apiKey: 'sesame' })
    try {
      const denied = await rejection((await openai(s.url, 'wrong')).chat.completions.create({ messages: ASK }))
      assert.equal(denied.status, 401)
      assert.equal(denied.code, 'Unauthorized')
      assert.equal((await fetch(`${s.url}/v1/models`)).status, 401)
      const res = await (await openai(s.url, 'sesame')).chat.completions.create({ messages: ASK })
      assert.equal(res.choices[0].message.content, 'hi')
      const { generateText } = await import('ai')
      const { text } = await generateText({ model: (await aiProvider(s.url, 'sesame'))('m'), prompt: 'x' })
      assert.equal(text, 'hi')
      assert.deepEqual(await (await fetch(`${s.url}/health`)).json(), { status: 'ok' })
      assert.equal((await fetch(`${s.url}/metrics`)).status, 200)
    } finally {
      await s.close()
    }
  })

  test('404 and 405 in OpenAI shape; a body over the limit is 413 at once and the server keeps serving', async () => {
    const s = await serveScripted([scripted('m', () => 'hi')], { limits: { maxBodyBytes: 1024 } })
    try {
      const missing = await fetch(`${s.url}/v1/nothing`)
      assert.equal(missing.status, 404)
      assert.equal((await missing.json()).error.code, 'NotFound')
      const get = await fetch(`${s.url}/v1/chat/completions`)
      assert.equal(get.status, 405)
      assert.equal((await (await openai(s.url)).models.retrieve('m')).id, 'm')
      assert.equal((await fetch(`${s.url}/v1/models/%E0%A4%A`)).status, 404) // not percent-encoding
      const noEncoder = await post(s.url, '/v1/embeddings', { input: 'a' })
      assert.equal(noEncoder.status, 404)
      assert.match(noEncoder.body.error.message, /no model here serves \/v1\/embeddings/)
      const big = await post(s.url, '/v1/chat/completions', {
        messages: [{ role: 'user', content: 'x'.repeat(5 << 20) }],
      })
      assert.equal(big.status, 413)
      assert.equal(big.body.error.code, 'PayloadTooLarge')
      assert.ok(big.ms < 2000, `${big.ms} ms`)
      // Without a Content-Length (chunked): refused once the bytes pass the limit.
      const chunked = await new Promise((resolve, reject) => {
        const req = http.request(`${s.url}/v1/chat/completions`, { method: 'POST' }, (res) => {
          res.resume()
          resolve(res.statusCode)
        })
        req.on('error', reject)
        for (let i = 0; i < 64; i++) req.write('x'.repeat(100))
        req.end()
      })
      assert.equal(chunked, 413)
      const bad = await post(s.url, '/v1/chat/completions', '{"messages": [')
      assert.equal(bad.status, 400)
      assert.equal(bad.body.error.code, 'InvalidJSON')
      const ok = await post(s.url, '/v1/chat/completions', { messages: ASK })
      assert.equal(ok.status, 200)
    } finally {
      await s.close()
    }
  })

  test('QueueFull from a model is 503 with Retry-After; model lookup by name and kind', async () => {
    const full = Object.assign(new Error('CausalLM.generate: 1 sequences are generating and 0 calls wait'), {
      code: 'QueueFull',
    })
    const busy = scripted('busy', () => Promise.reject(full))
    const encoder = {
      kind: 'embeddings',
      name: 'enc',
      dim: 2,
      encode: () => Promise.reject(full),
      countTokens: async () => 1,
      stats: () => ({ active: 0, queued: 3 }),
    }
    const s = await serveScripted([busy, encoder])
    try {
      for (const [route, body] of [
        ['/v1/chat/completions', { messages: ASK }],
        ['/v1/completions', { prompt: 'x', model: 'busy' }],
        ['/v1/embeddings', { input: 'a' }],
      ]) {
        const r = await post(s.url, route, body)
        if (route === '/v1/completions') {
          assert.equal(r.status, 200) // a prompt string is echoed by the scripted model
          continue
        }
        assert.equal(r.status, 503, route)
        assert.equal(r.headers.get('retry-after'), '1')
        assert.equal(r.body.error.code, 'QueueFull')
        assert.equal(r.body.error.type, 'server_error')
      }
      const wrongKind = await post(s.url, '/v1/embeddings', { input: 'a', model: 'busy' })
      assert.equal(wrongKind.status, 400)
      assert.match(
        wrongKind.body.error.message,
        /model: "busy" serves \/v1\/chat\/completions, \/v1\/completions, \/v1\/responses and \/v1\/messages/,
      )
      const unknown = await post(s.url, '/v1/chat/completions', { messages: ASK, model: 'gpt-4o' })
      assert.equal(unknown.status, 404)
      assert.equal(unknown.body.error.code, 'ModelNotFound')
      const metrics = await (await fetch(`${s.url}/metrics`)).text()
      assert.match(metrics, /^torch_node_requests_total\{route="\/v1\/chat\/completions",status="503"\} 1$/m)
      assert.match(metrics, /^torch_node_queue_depth\{model="enc"\} 3$/m)
      assert.match(metrics, /^# TYPE torch_node_time_to_first_token_seconds histogram$/m)
    } finally {
      await s.close()
    }
  })
})

describe('serve: close() lets streams finish within its deadline and aborts them past it', () => {
  /** A model that says "a", then waits for `release()` (or its abort) to say "done". */
  function held() {
    let release
    const gate = new Promise((resolve) => {
      release = resolve
    })
    const model = scripted('held', () => 'unused')
    model.generate = async function* (input, { signal }) {
      yield { text: 'a', tokens: [0] }
      const aborted = new Promise((resolve) => signal.addEventListener('abort', () => resolve(null), { once: true }))
      if ((await Promise.race([gate, aborted])) === null) {
        return { finishReason: 'aborted', usage: { promptTokens: 5, completionTokens: 1 } }
      }
      yield { text: 'done', tokens: [0] }
      return { finishReason: 'stop', usage: { promptTokens: 5, completionTokens: 2 } }
    }
    return { model, release: () => release('go') }
  }

  async function openStream(url) {
    const client = await openai(url)
    const stream = await client.chat.completions.create({ messages: ASK, stream: true })
    return stream[Symbol.asyncIterator]()
  }

  // serve()'s close (lib/serve/index.js), over a handler of scripted models.
  async function serveHeld(model) {
    const s = await serveScripted([model])
    let disposed = false
    const close = closer(s.server, s.ctx, () => (disposed = true))
    return { ...s, close: (timeoutMs) => close({ timeoutMs }), disposed: () => disposed }
  }

  test('within the deadline the stream ends normally', async () => {
    const { model, release } = held()
    const s = await serveHeld(model)
    const it = await openStream(s.url)
    await it.next() // the role chunk
    const closing = s.close(60_000)
    assert.equal((await fetch(`${s.url}/health`).catch((e) => e)).cause?.code, 'ECONNREFUSED')
    release()
    let text = ''
    for (let r = await it.next(); !r.done; r = await it.next()) text += r.value.choices[0]?.delta.content ?? ''
    assert.equal(text, 'adone')
    await closing
    assert.ok(s.disposed())
  })

  test('past the deadline the stream gets an error event and ends', async () => {
    const { model } = held()
    const s = await serveHeld(model)
    const it = await openStream(s.url)
    await it.next()
    const closing = s.close(50)
    const e = await rejection(
      (async () => {
        for (let r = await it.next(); !r.done; r = await it.next());
      })(),
    )
    assert.match(e.message, /the server is shutting down/)
    await closing
  })
})

// ---- torch-node serve as a child process, with the tiny models ----

const haveModels =
  fs.existsSync(path.join(LM_DIR, 'model.pt2')) && fs.existsSync(path.join(ENCODER_DIR, 'manifest.json'))
const skip = !haveModels && 'no models/golden/lm/llama-tiny or models/golden/text/minilm: run `npm run models`'

/** A chat template that reads tools and writes calls as Qwen2.5's does (<tool_call>), short. */
const TOOLS_TEMPLATE = [
  '{%- if tools %}<|im_start|>system\nTools:',
  '{%- for tool in tools %}\n{{ tool.function.name }}{% endfor %}<|im_end|>\n{% endif %}',
  '{%- for message in messages %}',
  "{%- if message.role == 'assistant' and message.tool_calls %}<|im_start|>assistant",
  '{%- for tc in message.tool_calls %}\n<tool_call>{{ tc.function.arguments | tojson }}</tool_call>{% endfor %}<|im_end|>\n',
  "{%- elif message.role == 'tool' %}<|im_start|>user\n<tool_response>{{ message.content }}</tool_response><|im_end|>\n",
  '{%- else %}<|im_start|>{{ message.role }}\n{{ message.content }}<|im_end|>\n{% endif %}',
  '{%- endfor %}',
  '{%- if add_generation_prompt %}<|im_start|>assistant\n{% endif %}',
].join('')

/** llama-tiny's files, with TOOLS_TEMPLATE as its chat template. */
function toolsModel() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'torch-node-serve-tools-'))
  for (const f of fs.readdirSync(LM_DIR)) {
    if (f === 'tokenizer_config.json' || f === 'chat_template.jinja') continue
    fs.symlinkSync(path.join(LM_DIR, f), path.join(dir, f))
  }
  const config = JSON.parse(fs.readFileSync(path.join(LM_DIR, 'tokenizer_config.json'), 'utf8'))
  config.chat_template = TOOLS_TEMPLATE
  fs.writeFileSync(path.join(dir, 'tokenizer_config.json'), JSON.stringify(config))
  return dir
}

/** Starts `torch-node serve`; resolves once it printed its first line. */
function startServe(args) {
  const child = spawn(process.execPath, [BIN, 'serve', '--port', '0', ...args], { stdio: ['ignore', 'pipe', 'pipe'] })
  let stdout = ''
  let stderr = ''
  child.stderr.on('data', (d) => (stderr += d))
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })))
  const url = new Promise((resolve, reject) => {
    child.stdout.on('data', (d) => {
      stdout += d
      if (stdout.includes('\n')) resolve(stdout.split('\n')[0])
    })
    exited.then((r) => reject(new Error(`torch-node serve exited ${r.code ?? r.signal}: ${stderr}`)))
  })
  return { child, url, exited, output: () => ({ stdout, stderr }) }
}

describe('npx torch-node serve: a child process with a causal LM and a sentence encoder', { skip }, () => {
  let proc
  let url
  let toolsDir
  let torch
  let lm
  const KEY = 'test-key'
  const N = 12
  const MESSAGES = [
    { role: 'system', content: 'You are terse.' },
    { role: 'user', content: 'Hello there!' },
  ]
  before(async () => {
    toolsDir = toolsModel()
    proc = startServe([
      '--model',
      `llama-tiny=${LM_DIR}`,
      '--model',
      `minilm=${ENCODER_DIR}`,
      '--model',
      `tools-tiny=${toolsDir}`,
      '--api-key',
      KEY,
      '--max-sequences',
      '2',
    ])
    const line = await proc.url
    assert.match(line, /^listening on http:\/\/127\.0\.0\.1:\d+$/)
    url = line.slice('listening on '.length)
    torch = require('..')
    lm = await torch.text.CausalLM.load(LM_DIR)
  })
  after(async () => {
    lm?.dispose()
    if (proc && proc.child.exitCode === null) proc.child.kill('SIGKILL')
    if (toolsDir) fs.rmSync(toolsDir, { recursive: true, force: true })
  })

  test("the second line printed is the clients' baseURL; the routes of each model follow", () => {
    const lines = proc.output().stdout.split('\n')
    assert.equal(lines[1], `  (clients: baseURL ${url}/v1)`)
    assert.ok(
      lines.includes('  llama-tiny: /v1/chat/completions, /v1/completions, /v1/responses, /v1/messages'),
      lines.join('\n'),
    )
    assert.ok(lines.includes('  minilm: /v1/embeddings'), lines.join('\n'))
  })

  test('the models; chat and completions equal CausalLM run directly, streamed and not', async () => {
    const client = await openai(url, KEY)
    const ids = []
    for await (const m of client.models.list()) ids.push(m.id)
    assert.deepEqual(ids, ['llama-tiny', 'minilm', 'tools-tiny'])
    const want = await lm.complete(MESSAGES, { temperature: 0, maxNewTokens: N })
    const res = await client.chat.completions.create({
      model: 'llama-tiny',
      messages: MESSAGES,
      max_tokens: N,
      temperature: 0,
    })
    assert.equal(res.choices[0].message.content, want.text)
    assert.equal(res.usage.prompt_tokens, want.usage.promptTokens)
    const stream = await client.chat.completions.create({
      model: 'llama-tiny',
      messages: MESSAGES,
      max_tokens: N,
      temperature: 0,
      stream: true,
      stream_options: { include_usage: true },
    })
    let text = ''
    let usage
    for await (const c of stream) {
      text += c.choices[0]?.delta.content ?? ''
      usage = c.usage ?? usage
    }
    assert.equal(text, want.text)
    assert.equal(usage.completion_tokens, want.usage.completionTokens)
    const direct = await lm.complete('Once upon a time', { temperature: 0, maxNewTokens: N })
    const done = await client.completions.create({
      model: 'llama-tiny',
      prompt: 'Once upon a time',
      max_tokens: N,
      temperature: 0,
    })
    assert.equal(done.choices[0].text, direct.text)
  })

  test('the AI SDK: generateText and streamText give the same greedy text', async () => {
    const { generateText, streamText } = await import('ai')
    const model = (await aiProvider(url, KEY))('llama-tiny')
    const want = await lm.complete([{ role: 'user', content: 'Hello there!' }], { temperature: 0, maxNewTokens: N })
    const opts = { model, prompt: 'Hello there!', maxOutputTokens: N, temperature: 0 }
    const { text, usage } = await generateText(opts)
    assert.equal(text, want.text)
    assert.equal(usage.outputTokens, want.usage.completionTokens)
    const streamed = streamText(opts)
    let joined = ''
    for await (const t of streamed.textStream) joined += t
    assert.equal(joined, want.text)
  })

  test('embeddings: sentence-transformers numbers within 1e-5, float and base64', async () => {
    const golden = JSON.parse(fs.readFileSync(GOLDEN_FILE, 'utf8'))
    const client = await openai(url, KEY)
    const texts = golden.sentences.filter((t) => t)
    const want = golden.embeddings.filter((_, i) => golden.sentences[i])
    for (const encoding_format of ['float', 'base64']) {
      const res = await client.embeddings.create({ model: 'minilm', input: texts, encoding_format })
      res.data.forEach((d, i) => {
        const row =
          typeof d.embedding === 'string'
            ? new Float32Array(Uint8Array.from(Buffer.from(d.embedding, 'base64')).buffer)
            : d.embedding
        const diff = Math.max(...Array.from(row, (x, j) => Math.abs(x - want[i][j])))
        assert.ok(diff < 1e-5, `${encoding_format} row ${i}: ${diff}`)
      })
    }
    const { embedMany } = await import('ai')
    const provider = await aiProvider(url, KEY)
    const { embeddings } = await embedMany({ model: provider.textEmbeddingModel('minilm'), values: texts.slice(0, 2) })
    assert.ok(Math.abs(embeddings[0][0] - want[0][0]) < 1e-5)
  })

  test('tools are rendered through the chat template, and so is the next turn', async () => {
    const tok = torch.text.Tokenizer.fromFile(toolsDir)
    const count = (messages, tools) =>
      tok.encode(tok.applyChatTemplate(messages, { addGenerationPrompt: true, tools }), { addSpecialTokens: false }).ids
        .length
    const client = await openai(url, KEY)
    const tools = [WEATHER]
    const res = await client.chat.completions.create({
      model: 'tools-tiny',
      messages: ASK,
      tools,
      max_tokens: 2,
      temperature: 0,
    })
    assert.equal(res.usage.prompt_tokens, count(ASK, tools))
    assert.ok(res.usage.prompt_tokens > count(ASK, undefined), 'the tools are in the prompt')
    const call = { id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }
    const turn = [
      ...ASK,
      { role: 'assistant', content: null, tool_calls: [call] },
      { role: 'tool', tool_call_id: 'call_1', content: 'sunny' },
    ]
    const next = await client.chat.completions.create({
      model: 'tools-tiny',
      messages: turn,
      tools,
      max_tokens: 2,
      temperature: 0,
    })
    const rendered = [
      ASK[0],
      {
        role: 'assistant',
        content: '',
        tool_calls: [{ ...call, function: { name: 'get_weather', arguments: { city: 'Paris' } } }],
      },
      { role: 'tool', tool_call_id: 'call_1', content: 'sunny' },
    ]
    assert.ok(
      tok
        .applyChatTemplate(rendered, { addGenerationPrompt: true, tools })
        .includes('<tool_call>{"city": "Paris"}</tool_call>'),
    )
    assert.equal(next.usage.prompt_tokens, count(rendered, tools))
    tok.dispose()
    // llama-tiny's template does not read tools: the generic format describes them in the system
    // turn, longer than this tiny model's 256-token context (chat-server.test.js serves it).
    const e = await rejection(client.chat.completions.create({ model: 'llama-tiny', messages: ASK, tools }))
    assert.equal(e.status, 400)
    assert.match(e.message, /the prompt has \d+ tokens; this model serves at most 256 in all/)
  })

  test('structured outputs from the real clients: zodResponseFormat, generateObject, forced tool calls', async () => {
    // The tiny random model writes noise: every answer below is valid only because the mask made it so.
    const { zodResponseFormat } = await import('openai/helpers/zod')
    const { z } = await import('zod')
    const client = await openai(url, KEY)
    const Forecast = z.object({ city: z.string().max(12), days: z.number().int().min(1).max(7) })
    const res = await client.chat.completions.parse({
      model: 'llama-tiny',
      messages: ASK,
      response_format: zodResponseFormat(Forecast, 'forecast'),
      max_tokens: 200,
    })
    assert.equal(res.choices[0].finish_reason, 'stop')
    assert.ok(Forecast.safeParse(res.choices[0].message.parsed).success, res.choices[0].message.content)
    const object = await client.chat.completions.create({
      model: 'llama-tiny',
      messages: ASK,
      response_format: { type: 'json_object' },
      max_tokens: 200,
      temperature: 0,
    })
    if (object.choices[0].finish_reason === 'stop')
      assert.equal(typeof JSON.parse(object.choices[0].message.content), 'object')
    // The AI SDK sends the schema when the provider says it supports structured outputs.
    const { generateObject, streamText, tool } = await import('ai')
    const provider = await aiProvider(url, KEY, { supportsStructuredOutputs: true })
    const { object: forecast } = await generateObject({
      model: provider('llama-tiny'),
      prompt: 'Weather in Paris?',
      schema: Forecast,
      maxOutputTokens: 200,
    })
    assert.ok(Forecast.safeParse(forecast).success, JSON.stringify(forecast))
    // A forced call: arguments valid against the tool's parameters (strict: true is kept).
    // (A city of at most 12 characters: the random model would otherwise write one till max_tokens.)
    const city = {
      type: 'object',
      properties: { city: { type: 'string', maxLength: 12 } },
      required: ['city'],
      additionalProperties: false,
    }
    const strictWeather = { ...WEATHER, function: { ...WEATHER.function, parameters: city, strict: true } }
    for (const tool_choice of ['required', { type: 'function', function: { name: 'get_weather' } }]) {
      const called = await client.chat.completions.create({
        model: 'tools-tiny',
        messages: ASK,
        tools: [strictWeather],
        tool_choice,
        // One call: with parallel calls allowed, a random model may chain calls until max_tokens.
        parallel_tool_calls: false,
        max_tokens: 120,
      })
      assert.equal(called.choices[0].finish_reason, 'tool_calls', JSON.stringify(called.choices[0]))
      const fn = called.choices[0].message.tool_calls[0].function
      assert.equal(fn.name, 'get_weather')
      assert.equal(typeof JSON.parse(fn.arguments).city, 'string')
    }
    const streamed = streamText({
      model: provider('tools-tiny'),
      prompt: 'Weather in Paris?',
      tools: { get_weather: tool({ inputSchema: z.object({ city: z.string().max(12) }) }) },
      toolChoice: 'required',
      maxOutputTokens: 120,
    })
    const parts = []
    for await (const part of streamed.fullStream) parts.push(part)
    const call = parts.find((p) => p.type === 'tool-call')
    assert.ok(call, JSON.stringify(parts.filter((p) => p.type === 'error' || p.type === 'text-delta')))
    assert.equal(call.toolName, 'get_weather')
    assert.equal(typeof call.input.city, 'string')
  })

  test('hostile requests are 4xx within a second or two, and the server keeps serving', async () => {
    const auth = { authorization: `Bearer ${KEY}` }
    const huge = await post(
      url,
      '/v1/chat/completions',
      { messages: [{ role: 'user', content: 'x'.repeat(8 << 20) }] },
      auth,
    )
    assert.equal(huge.status, 413)
    assert.ok(huge.ms < 2000, `${huge.ms} ms`)
    const hugeEmbed = await post(url, '/v1/embeddings', { input: Array(3000).fill('a') }, auth)
    assert.equal(hugeEmbed.status, 400)
    for (const body of [
      {
        model: 'tools-tiny',
        messages: ASK,
        tools: [WEATHER],
        tool_choice: { type: 'function', function: { name: 'rm_rf' } },
      },
      {
        model: 'tools-tiny',
        messages: [...ASK, { role: 'tool', content: 'x', tool_call_id: 'never' }],
        tools: [WEATHER],
      },
      {
        model: 'tools-tiny',
        messages: [...ASK, { role: 'assistant', tool_calls: [{ id: 'a', function: { name: 'f', arguments: '[1' } }] }],
      },
      { model: 'llama-tiny', messages: [{ role: 'user', content: 'x'.repeat(100_000) }], max_tokens: 2 },
      // Schemas that are not JSON Schema, with no finite instance, over the size limit.
      ...[
        { type: 12, properties: [] },
        {
          $ref: '#/$defs/a',
          $defs: { a: { type: 'object', properties: { a: { $ref: '#/$defs/a' } }, required: ['a'] } },
        },
        {
          type: 'object',
          properties: Object.fromEntries(
            Array.from({ length: 40_000 }, (_, i) => [`p${i}`, { type: 'string', description: 'd'.repeat(40) }]),
          ),
        },
      ].map((schema) => ({
        model: 'llama-tiny',
        messages: ASK,
        response_format: { type: 'json_schema', json_schema: { name: 'x', schema } },
      })),
    ]) {
      const r = await post(url, '/v1/chat/completions', body, auth)
      assert.equal(r.status, 400, JSON.stringify(r.body))
      assert.equal(r.body.error.code, 'InvalidArg')
      assert.ok(r.ms < 2000, `${r.ms} ms`)
    }
    // JSON nested 100,000 deep: parsed, then refused by the checks (and the template's depth limit).
    const deep = (n) => '{"a":'.repeat(n) + '1' + '}'.repeat(n)
    for (const body of [
      `{"model":"tools-tiny","messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f","parameters":${deep(100_000)}}}]}`,
      `{"model":"llama-tiny","messages":[{"role":"user","content":[${deep(100_000)}]}]}`,
    ]) {
      const r = await post(url, '/v1/chat/completions', body, auth)
      assert.equal(r.status, 400, JSON.stringify(r.body))
      assert.equal(r.body.error.code, 'InvalidArg')
      assert.ok(r.ms < 2000, `${r.ms} ms`)
    }
    const denied = await post(url, '/v1/chat/completions', { messages: ASK })
    assert.equal(denied.status, 401)
    const ok = await post(url, '/v1/chat/completions', { model: 'llama-tiny', messages: ASK, max_tokens: 2 }, auth)
    assert.equal(ok.status, 200)
    assert.equal(ok.body.usage.completion_tokens, 2)
  })

  test('/health and /metrics (Prometheus text): requests, tokens, queue depth, time to first token', async () => {
    assert.deepEqual(await (await fetch(`${url}/health`)).json(), { status: 'ok' })
    const res = await fetch(`${url}/metrics`)
    assert.match(res.headers.get('content-type'), /^text\/plain; version=0\.0\.4/)
    const text = await res.text()
    const value = (re) => Number(text.match(re)?.[1])
    assert.ok(value(/^torch_node_requests_total\{route="\/v1\/chat\/completions",status="200"\} (\d+)$/m) >= 4)
    assert.ok(value(/^torch_node_requests_total\{route="\/v1\/chat\/completions",status="413"\} (\d+)$/m) >= 1)
    assert.ok(value(/^torch_node_prompt_tokens_total\{model="llama-tiny"\} (\d+)$/m) > 0)
    assert.ok(value(/^torch_node_generated_tokens_total\{model="llama-tiny"\} (\d+)$/m) >= 2 * N)
    assert.ok(value(/^torch_node_prompt_tokens_total\{model="minilm"\} (\d+)$/m) > 0)
    assert.equal(value(/^torch_node_queue_depth\{model="llama-tiny"\} (\d+)$/m), 0)
    assert.equal(value(/^torch_node_running\{model="minilm"\} (\d+)$/m), 0)
    assert.ok(value(/^torch_node_time_to_first_token_seconds_count\{model="llama-tiny"\} (\d+)$/m) >= 4)
    assert.ok(value(/^torch_node_time_to_first_token_seconds_bucket\{model="llama-tiny",le="\+Inf"\} (\d+)$/m) >= 4)
  })

  test('concurrent streams, half of them cut by their clients: every sequence is freed', async () => {
    const client = await openai(url, KEY)
    const runs = Array.from({ length: 8 }, async (_, i) => {
      const stream = await client.chat.completions.create({
        model: 'llama-tiny',
        messages: [{ role: 'user', content: `story ${i}` }],
        max_tokens: 64,
        stream: true,
      })
      let pieces = 0
      for await (const chunk of stream) {
        if (chunk.choices[0]?.delta.content && ++pieces === 2 && i % 2 === 0) {
          stream.controller.abort() // the client hangs up mid-stream
          break
        }
      }
      return pieces
    })
    const pieces = await Promise.all(runs)
    assert.ok(
      pieces.every((n) => n >= 2),
      String(pieces),
    )
    // The server sees the hang-ups as closed sockets: wait for it to count them, then nothing runs.
    const value = async (re) => Number((await (await fetch(`${url}/metrics`)).text()).match(re)?.[1])
    const t0 = Date.now()
    while ((await value(/^torch_node_requests_in_flight (\d+)$/m)) > 1) {
      assert.ok(Date.now() - t0 < 10_000, 'requests still in flight 10 s after their clients left')
      await new Promise((r) => setTimeout(r, 20))
    }
    assert.equal(await value(/^torch_node_running\{model="llama-tiny"\} (\d+)$/m), 0)
    assert.equal(await value(/^torch_node_queue_depth\{model="llama-tiny"\} (\d+)$/m), 0)
  })

  test('SIGTERM during a stream: the stream ends, the process exits 0', async () => {
    const client = await openai(url, KEY)
    const stream = await client.chat.completions.create({
      model: 'llama-tiny',
      messages: ASK,
      max_tokens: 200,
      stream: true,
    })
    const it = stream[Symbol.asyncIterator]()
    await it.next()
    proc.child.kill('SIGTERM')
    // It finishes within --shutdown-timeout (10 s) or ends with the shutdown's error event.
    let ended
    try {
      for (let r = await it.next(); !r.done; r = await it.next());
      ended = 'done'
    } catch (e) {
      assert.match(e.message, /shutting down/)
      ended = 'error'
    }
    assert.ok(ended)
    const { code } = await proc.exited
    assert.equal(code, 0, proc.output().stderr)
    assert.match(proc.output().stdout, /SIGTERM: shutting down/)
  })
})

describe('npx torch-node serve: usage and load errors', () => {
  test("--prefix-cache TOKENS becomes each model's prefixCache load option", () => {
    const { parse } = require('../lib/serve/cli')
    const o = parse(['--model', 'a=./a', '--model', 'b=./b', '--prefix-cache', '4096', '--max-sequences', '2'])
    assert.deepEqual(o.models, {
      a: { folder: './a', maxSequences: 2, prefixCache: { maxTokens: 4096 } },
      b: { folder: './b', maxSequences: 2, prefixCache: { maxTokens: 4096 } },
    })
    assert.deepEqual(parse(['--model', 'a=./a']).models, { a: { folder: './a' } })
    // Not given: torch.serve's default (on); 0 turns it off.
    assert.deepEqual(parse(['--model', 'a=./a', '--prefix-cache', '0']).models, {
      a: { folder: './a', prefixCache: { maxTokens: 0 } },
    })
    assert.throws(
      () => parse(['--model', 'a=./a', '--prefix-cache=-1']),
      /--prefix-cache: expected an integer ≥ 0, got -1/,
    )
  })

  test("--chat-template NAME=FILE and --fetch-images / --allowed-media-domains become serve's options", () => {
    const { parse } = require('../lib/serve/cli')
    const file = path.join(os.tmpdir(), `torch-node-template-${process.pid}.jinja`)
    fs.writeFileSync(file, '{{ messages[0].content }}')
    try {
      const o = parse(['--model', 'a=./a', '--model', 'b=./b', '--chat-template', `b=${file}`, '--fetch-images'])
      assert.deepEqual(o.models, {
        a: { folder: './a' },
        b: { folder: './b', chatTemplate: '{{ messages[0].content }}' },
      })
      assert.equal(o.fetchImages, true)
      assert.deepEqual(parse(['--model', 'a=./a', '--allowed-media-domains', 'example.com, cdn.org']).fetchImages, [
        'example.com',
        'cdn.org',
      ])
      assert.equal(parse(['--model', 'a=./a']).fetchImages, undefined)
      for (const [args, message] of [
        [['--chat-template', `c=${file}`], /--chat-template: no --model named "c"/],
        [['--chat-template', file], /--chat-template: expected NAME=FILE/],
        [['--chat-template', 'a=/no/such.jinja'], /--chat-template: cannot read \/no\/such\.jinja: ENOENT/],
        [['--chat-template', 'a=/dev/zero'], /--chat-template: \/dev\/zero: larger than 1 MiB/],
        [['--allowed-media-domains', 'a.com,http://b'], /--allowed-media-domains: expected host names/],
      ]) {
        assert.throws(() => parse(['--model', 'a=./a', ...args]), message)
      }
    } finally {
      fs.rmSync(file, { force: true })
    }
  })

  test('exit 2 with the usage for bad flags; exit 1 with one line for a folder that is not a model', async () => {
    const run = (args) => {
      const p = startServe(args)
      p.url.catch(() => {})
      return p.exited.then((r) => ({ ...r, ...p.output() }))
    }
    const none = await run([])
    assert.equal(none.code, 2)
    assert.match(none.stderr, /--model NAME=FOLDER: at least one model to serve\nusage: torch-node serve/)
    const bad = await run(['--model', 'nameonly'])
    assert.equal(bad.code, 2)
    assert.match(bad.stderr, /--model: expected NAME=FOLDER, got "nameonly"/)
    const port = await run(['--model', 'a=b', '--port', '70000'])
    assert.equal(port.code, 2)
    const missing = await run(['--model', `x=${os.tmpdir()}`])
    assert.equal(missing.code, 1)
    assert.match(missing.stderr, /^torch-node serve: ModelLoadError: serve: models\["x"\]: .*: no manifest\.json/)
    assert.equal(missing.stderr.trim().split('\n').length, 1)
  })
})

'use strict'
// POST /v1/messages of torch-node serve (lib/serve/messages.js), driven by the real client,
// `@anthropic-ai/sdk`: `messages.create`, `messages.stream` (its events and `finalMessage()`),
// tools (tool_use, then tool_result), stop sequences, errors in Anthropic's shape, the API key as
// x-api-key, and POST /v1/messages/count_tokens; LangChain's ChatAnthropic (`@langchain/anthropic`).
// - In this process, over scripted models (what a model says is fixed).
// - torch.serve over the tiny random Llama of `npm run models`: the answer equals CausalLM run
//   directly, streamed and not; count_tokens equals the usage of the same prompt.
const { describe, test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const http = require('node:http')
const path = require('node:path')
const { createHandler } = require('../lib/serve/app')
const torch = require('..')

const LM_DIR = path.join(__dirname, '..', 'models', 'golden', 'lm', 'llama-tiny')
const noModel = !fs.existsSync(path.join(LM_DIR, 'model.pt2')) && `no ${LM_DIR}: run \`npm run models\``
const VLM = path.join(__dirname, '..', 'models', 'golden', 'vlm', 'llava-tiny')
const NO_VLM = !fs.existsSync(path.join(VLM, 'manifest.json')) && 'no LLaVA fixture: run `npm run models -- --lazy`'
// LangChain's Anthropic chat model (`@langchain/anthropic`, with its own @anthropic-ai/sdk, which sends x-api-key).
const noLangChain = (() => {
  try {
    require.resolve('@langchain/anthropic')
    return false
  } catch {
    return 'no @langchain/anthropic in node_modules'
  }
})()

const WEATHER = {
  name: 'get_weather',
  description: 'The weather in a city',
  input_schema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
}
const CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'

async function anthropic(url, apiKey = 'unused') {
  const { default: Anthropic } = await import('@anthropic-ai/sdk')
  return new Anthropic({ baseURL: url, apiKey, maxRetries: 0 })
}

async function rejection(promise) {
  try {
    await promise
  } catch (e) {
    return e
  }
  assert.fail('expected the request to fail')
}

async function post(url, route, body, headers = {}) {
  const res = await fetch(`${url}${route}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  })
  return { status: res.status, text: await res.text() }
}

/** Anthropic's server-sent events as [name, data] pairs. */
function events(text) {
  return text
    .split('\n\n')
    .filter(Boolean)
    .map((e) => {
      const [, name] = e.match(/^event: (.*)$/m)
      const [, data] = e.match(/^data: (.*)$/m)
      return [name, JSON.parse(data)]
    })
}

/** A model that says what `script(messages, options)` returns, in pieces of 4 characters. */
function scripted(name, script, { toolFormat = 'hermes' } = {}) {
  const prompts = []
  const options = []
  return {
    kind: 'chat',
    name,
    toolFormat,
    markers: new Map(),
    prompts,
    options,
    async prompt(messages, tools, plain) {
      prompts.push({ messages, tools, plain })
      return messages
    },
    async *generate(input, opts) {
      options.push(opts)
      const text = await script(input, opts)
      const pieces = text.match(/[\s\S]{1,4}/g) ?? []
      const max = opts.maxNewTokens ?? Infinity
      let n = 0
      for (const p of pieces.slice(0, max)) {
        if (opts.signal?.aborted) return { finishReason: 'aborted', usage: { promptTokens: 5, completionTokens: n } }
        n++
        yield { text: p, tokens: [0] }
      }
      const finishReason = pieces.length > max ? 'length' : 'stop'
      return { finishReason, usage: { promptTokens: 5, completionTokens: n } }
    },
    stats: () => ({ active: 0, queued: 0 }),
    dispose() {},
  }
}

async function serveScripted(models, apiKey) {
  const { handle, ctx } = createHandler({ models, apiKey })
  const server = http.createServer(handle)
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    ctx,
    close: () =>
      new Promise((resolve) => {
        server.close(resolve)
        server.closeAllConnections()
      }),
  }
}

describe('/v1/messages in this process, with @anthropic-ai/sdk', () => {
  let s
  let weather
  let echo
  let client
  before(async () => {
    // Calls the tool until the conversation holds its result, then answers with it.
    weather = scripted('weather', (messages) => {
      const result = messages.find((m) => m.role === 'tool')
      return result ? `It is ${result.content} in Paris.` : `Let me check. ${CALL}`
    })
    echo = scripted('echo', (messages) => `you said: ${messages.at(-1).content}`)
    s = await serveScripted([weather, echo])
    client = await anthropic(s.url)
  })
  after(() => s?.close())

  test('messages.create: a text block, end_turn, usage; system as a string or blocks', async () => {
    const msg = await client.messages.create({
      model: 'echo',
      max_tokens: 64,
      system: 'Be terse.',
      messages: [{ role: 'user', content: 'hello' }],
      metadata: { user_id: 'u1' },
    })
    assert.match(msg.id, /^msg_[0-9a-f]{24}$/)
    assert.equal(msg.type, 'message')
    assert.equal(msg.role, 'assistant')
    assert.equal(msg.model, 'echo')
    assert.deepEqual(msg.content, [{ type: 'text', text: 'you said: hello' }])
    assert.equal(msg.stop_reason, 'end_turn')
    assert.equal(msg.stop_sequence, null)
    assert.deepEqual(msg.usage, { input_tokens: 5, output_tokens: 4 })
    assert.deepEqual(echo.prompts.at(-1).messages, [
      { role: 'system', content: 'Be terse.' },
      { role: 'user', content: 'hello' },
    ])
    await client.messages.create({
      model: 'echo',
      max_tokens: 64,
      system: [
        { type: 'text', text: 'Be ' },
        { type: 'text', text: 'terse.', cache_control: { type: 'ephemeral' } },
      ],
      messages: [
        { role: 'user', content: [{ type: 'text', text: 'one' }] },
        { role: 'assistant', content: 'two' },
        { role: 'user', content: [{ type: 'text', text: 'three' }] },
      ],
    })
    assert.deepEqual(echo.prompts.at(-1).messages, [
      { role: 'system', content: 'Be terse.' },
      { role: 'user', content: 'one' },
      { role: 'assistant', content: 'two' },
      { role: 'user', content: 'three' },
    ])
  })

  test('messages.stream: text events, finalMessage(), and the events in Anthropic order', async () => {
    const stream = client.messages.stream({
      model: 'echo',
      max_tokens: 64,
      messages: [{ role: 'user', content: 'hi' }],
    })
    let text = ''
    stream.on('text', (delta) => {
      text += delta
    })
    const msg = await stream.finalMessage()
    assert.equal(text, 'you said: hi')
    assert.deepEqual(msg.content, [{ type: 'text', text: 'you said: hi' }])
    assert.equal(msg.stop_reason, 'end_turn')
    assert.deepEqual(msg.usage, { input_tokens: 5, output_tokens: 3 })

    const res = await post(s.url, '/v1/messages', {
      model: 'echo',
      max_tokens: 64,
      stream: true,
      messages: [{ role: 'user', content: 'hi' }],
    })
    assert.equal(res.status, 200)
    const seen = events(res.text)
    const names = seen.map(([name]) => name)
    assert.deepEqual(names, [
      'message_start',
      'ping',
      'content_block_start',
      'content_block_delta',
      'content_block_delta',
      'content_block_delta',
      'content_block_stop',
      'message_delta',
      'message_stop',
    ])
    for (const [name, data] of seen) assert.equal(data.type, name)
    assert.equal(seen[0][1].message.stop_reason, null)
    assert.deepEqual(seen[2][1], { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } })
    assert.deepEqual(seen[3][1].delta, { type: 'text_delta', text: 'you ' })
    assert.deepEqual(seen.at(-2)[1], {
      type: 'message_delta',
      delta: { stop_reason: 'end_turn', stop_sequence: null },
      usage: { input_tokens: 5, output_tokens: 3 },
    })
  })

  test('tools: a tool_use block (stop_reason tool_use), then its tool_result answers, streamed and not', async () => {
    const first = await client.messages.create({
      model: 'weather',
      max_tokens: 256,
      tools: [WEATHER],
      messages: [{ role: 'user', content: 'Weather in Paris?' }],
    })
    assert.equal(first.stop_reason, 'tool_use')
    const [text, use] = first.content
    assert.deepEqual(text, { type: 'text', text: 'Let me check.' })
    assert.equal(use.type, 'tool_use')
    assert.equal(use.name, 'get_weather')
    assert.deepEqual(use.input, { city: 'Paris' })
    assert.deepEqual(weather.prompts.at(-1).tools, [
      {
        type: 'function',
        function: { name: 'get_weather', description: WEATHER.description, parameters: WEATHER.input_schema },
      },
    ])
    const conversation = [
      { role: 'user', content: 'Weather in Paris?' },
      { role: 'assistant', content: first.content },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: 'sunny' }] },
    ]
    const second = await client.messages.create({
      model: 'weather',
      max_tokens: 256,
      tools: [WEATHER],
      messages: conversation,
    })
    assert.deepEqual(second.content, [{ type: 'text', text: 'It is sunny in Paris.' }])
    assert.equal(second.stop_reason, 'end_turn')
    const sent = weather.prompts.at(-1).messages
    assert.equal(sent[1].role, 'assistant')
    assert.equal(sent[1].tool_calls[0].id, use.id)
    assert.deepEqual(sent[2], { role: 'tool', tool_call_id: use.id, content: 'sunny' })

    // is_error: the model reads that the call failed.
    await client.messages.create({
      model: 'weather',
      max_tokens: 256,
      tools: [WEATHER],
      messages: [
        ...conversation.slice(0, 2),
        {
          role: 'user',
          content: [
            {
              type: 'tool_result',
              tool_use_id: use.id,
              content: [{ type: 'text', text: 'no network' }],
              is_error: true,
            },
          ],
        },
      ],
    })
    assert.deepEqual(weather.prompts.at(-1).messages[2], {
      role: 'tool',
      tool_call_id: use.id,
      content: 'Error: no network',
    })

    // Streamed: input_json_delta, and the client's snapshot parses the input.
    const stream = client.messages.stream({
      model: 'weather',
      max_tokens: 256,
      tools: [WEATHER],
      messages: [{ role: 'user', content: 'Weather in Paris?' }],
    })
    const deltas = []
    const partials = []
    stream.on('inputJson', (partial, snapshot) => partials.push([partial, snapshot]))
    const blocks = []
    for await (const e of stream) {
      if (e.type === 'content_block_delta') deltas.push(e.delta.type)
      if (e.type === 'content_block_start' || e.type === 'content_block_stop') blocks.push(e.type)
    }
    assert.ok(deltas.includes('text_delta') && deltas.includes('input_json_delta'), deltas.join())
    assert.deepEqual(blocks, ['content_block_start', 'content_block_stop', 'content_block_start', 'content_block_stop'])
    // The input as generated (the scripted model says 4 characters at a time): several deltas,
    // the client's snapshot growing to the whole input.
    assert.ok(partials.length >= 3, `${partials.length} input_json_delta`)
    assert.equal(partials.map(([p]) => p).join(''), '{"city":"Paris"}')
    assert.deepEqual(partials.at(-1)[1], { city: 'Paris' })
    const msg = await stream.finalMessage()
    assert.equal(msg.stop_reason, 'tool_use')
    assert.deepEqual(
      msg.content.map((b) => (b.type === 'tool_use' ? [b.type, b.name, b.input] : [b.type, b.text])),
      [
        ['text', 'Let me check.'],
        ['tool_use', 'get_weather', { city: 'Paris' }],
      ],
    )
    assert.match(msg.content[1].id, /^call_/)
    // A chat with tools is token ids before it runs: message_start says its length.
    const { prompt } = weather
    weather.prompt = async (messages, tools, plain) => (plain && !tools ? messages : [1, 2, 3])
    const res = await post(s.url, '/v1/messages', {
      model: 'weather',
      max_tokens: 256,
      stream: true,
      tools: [WEATHER],
      messages: [{ role: 'user', content: 'Weather in Paris?' }],
    })
    weather.prompt = prompt
    const [start] = events(res.text)
    assert.deepEqual(start[1].message.usage, { input_tokens: 3, output_tokens: 0 })
  })

  test('tool_choice any, tool, none and disable_parallel_tool_use reach the model', async () => {
    const ask = (tool_choice) =>
      client.messages.create({
        model: 'weather',
        max_tokens: 256,
        tools: [WEATHER],
        tool_choice,
        messages: [{ role: 'user', content: 'Weather?' }],
      })
    await ask({ type: 'any' })
    assert.equal(weather.options.at(-1).responseFormat.toolChoice, 'required')
    await ask({ type: 'tool', name: 'get_weather', disable_parallel_tool_use: true })
    assert.deepEqual(weather.options.at(-1).responseFormat.toolChoice, {
      type: 'function',
      function: { name: 'get_weather' },
    })
    await ask({ type: 'auto', disable_parallel_tool_use: true })
    assert.equal(weather.options.at(-1).responseFormat, undefined)
    await ask({ type: 'none' })
    assert.equal(weather.prompts.at(-1).tools, null)
    const e = await rejection(ask({ type: 'tool', name: 'nope' }))
    assert.equal(e.status, 400)
    assert.match(e.error.error.message, /^tool_choice\.name: no tool named "nope"/)
  })

  test('stop_sequences: the text ends before the first met, stop_reason stop_sequence names it; top_k reaches the model', async () => {
    const ask = { model: 'echo', max_tokens: 64, messages: [{ role: 'user', content: 'abcdefghij' }] }
    const msg = await client.messages.create({ ...ask, stop_sequences: ['zz', 'efg', 'ghi'], top_k: 5 })
    assert.deepEqual(msg.content, [{ type: 'text', text: 'you said: abcd' }])
    assert.equal(msg.stop_reason, 'stop_sequence')
    assert.equal(msg.stop_sequence, 'efg')
    assert.equal(echo.options.at(-1).topK, 5)
    assert.equal(echo.options.at(-1).stop, undefined) // matched here, not by the engine
    const stream = client.messages.stream({ ...ask, stream: undefined, stop_sequences: ['said: a'] })
    let text = ''
    stream.on('text', (d) => {
      text += d
    })
    const streamed = await stream.finalMessage()
    assert.equal(text, 'you ')
    assert.equal(streamed.stop_reason, 'stop_sequence')
    assert.equal(streamed.stop_sequence, 'said: a')
    // Not met: the held tail comes out at the end.
    const free = await client.messages.create({ ...ask, stop_sequences: ['ijk'] })
    assert.deepEqual(free.content, [{ type: 'text', text: 'you said: abcdefghij' }])
    assert.equal(free.stop_reason, 'end_turn')
  })

  test('max_tokens: stop_reason max_tokens', async () => {
    const msg = await client.messages.create({
      model: 'echo',
      max_tokens: 2,
      messages: [{ role: 'user', content: 'hello' }],
    })
    assert.deepEqual(msg.content, [{ type: 'text', text: 'you said' }])
    assert.equal(msg.stop_reason, 'max_tokens')
    assert.equal(msg.usage.output_tokens, 2)
  })

  test("refused in Anthropic's error shape: the client raises its own classes", async () => {
    const { default: Anthropic } = await import('@anthropic-ai/sdk')
    const user = [{ role: 'user', content: 'hi' }]
    const cases = [
      [{ model: 'echo', messages: user }, /^max_tokens: required/],
      [{ model: 'echo', max_tokens: 8, messages: [] }, /^messages: expected a non-empty array/],
      [
        { model: 'echo', max_tokens: 8, messages: [{ role: 'user', content: [{ type: 'image', source: {} }] }] },
        /^messages\[0\]\.content\[0\]\.source: expected \{type: 'base64', media_type, data\} or \{type: 'url', url\}/,
      ],
      [
        {
          model: 'echo',
          max_tokens: 8,
          messages: [
            {
              role: 'user',
              content: [{ type: 'image', source: { type: 'base64', media_type: 'image/tiff', data: '' } }],
            },
          ],
        },
        /^messages\[0\]\.content\[0\]\.source\.media_type: expected one of image\/jpeg/,
      ],
      [
        { model: 'echo', max_tokens: 8, messages: [{ role: 'user', content: [{ type: 'document', source: {} }] }] },
        /reads no documents/,
      ],
      [{ model: 'echo', max_tokens: 8, messages: user, thinking: { type: 'enabled' } }, /^unknown key "thinking"/],
      [{ model: 'echo', max_tokens: 8, messages: [...user, { role: 'assistant', content: 'Sure' }] }, /a prefill/],
      [{ model: 'echo', max_tokens: 8, messages: user, stop_sequences: [''] }, /^stop_sequences:/],
      [
        { model: 'echo', max_tokens: 8, messages: user, tools: [{ type: 'web_search_20250305', name: 'web_search' }] },
        /^tools\[0\]: only custom tools/,
      ],
      [
        {
          model: 'echo',
          max_tokens: 8,
          messages: [{ role: 'user', content: [{ type: 'tool_result', tool_use_id: 'x', content: 'y' }] }],
        },
        /tool_use_id: expected the id of a tool_use block/,
      ],
      [{ model: 'echo', max_tokens: 8, messages: user, tools: [{ name: 'bad name' }] }, /^tools\[0\]\.name:/],
    ]
    for (const [body, message] of cases) {
      const e = await rejection(client.messages.create(body))
      assert.ok(e instanceof Anthropic.BadRequestError, `${JSON.stringify(body)}: ${e}`)
      assert.equal(e.error.type, 'error')
      assert.equal(e.error.error.type, 'invalid_request_error')
      assert.match(e.error.error.message, message)
    }
    const missing = await rejection(client.messages.create({ model: 'nope', max_tokens: 8, messages: user }))
    assert.ok(missing instanceof Anthropic.NotFoundError)
    assert.equal(missing.error.error.type, 'not_found_error')
    const raw = await post(s.url, '/v1/messages', 'not an object')
    assert.equal(raw.status, 400)
    assert.equal(JSON.parse(raw.text).type, 'error')
  })
})

describe('/v1/messages with an API key: x-api-key or Authorization: Bearer', () => {
  let s
  before(async () => {
    s = await serveScripted([scripted('echo', () => 'ok')], 'sk-test')
  })
  after(() => s?.close())

  test('the right key passes either way; a wrong one is a 401 authentication_error', async () => {
    const { default: Anthropic } = await import('@anthropic-ai/sdk')
    const body = { max_tokens: 8, messages: [{ role: 'user', content: 'hi' }] }
    const ok = await (await anthropic(s.url, 'sk-test')).messages.create({ model: 'echo', ...body })
    assert.equal(ok.content[0].text, 'ok')
    const viaHeader = await post(s.url, '/v1/messages', body, {
      'x-api-key': 'sk-test',
      'anthropic-version': '2023-06-01',
    })
    assert.equal(viaHeader.status, 200)
    const wrong = await post(s.url, '/v1/messages', body, { 'x-api-key': 'sk-wrong' })
    assert.equal(wrong.status, 401)
    assert.equal(JSON.parse(wrong.text).error.type, 'authentication_error')
    const e = await rejection((await anthropic(s.url, 'sk-wrong')).messages.create({ model: 'echo', ...body }))
    assert.ok(e instanceof Anthropic.AuthenticationError)
    // The OpenAI routes take x-api-key too.
    const models = await fetch(`${s.url}/v1/models`, { headers: { 'x-api-key': 'sk-test' } })
    assert.equal(models.status, 200)
  })
})

describe('/v1/messages streams that end early: the client leaves, the server shuts down', () => {
  /** A model that says "a", then waits for its abort. */
  function held() {
    const signals = []
    const model = scripted('held', () => 'unused')
    model.generate = async function* (input, { signal }) {
      signals.push(signal)
      yield { text: 'a', tokens: [0] }
      await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }))
      return { finishReason: 'aborted', usage: { promptTokens: 5, completionTokens: 1 } }
    }
    return { model, signals }
  }

  test('past the shutdown deadline the stream gets an error event (overloaded_error) and ends', async () => {
    const { closer } = require('../lib/serve/app')
    const { model } = held()
    const { handle, ctx } = createHandler({ models: [model] })
    const server = http.createServer(handle)
    await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
    const close = closer(server, ctx, () => {})
    const client = await anthropic(`http://127.0.0.1:${server.address().port}`)
    const stream = await client.messages.create({
      max_tokens: 8,
      messages: [{ role: 'user', content: 'x' }],
      stream: true,
    })
    const it = stream[Symbol.asyncIterator]()
    for (let r = await it.next(); r.value.type !== 'content_block_delta'; r = await it.next());
    const closing = close({ timeoutMs: 50 })
    const e = await rejection(
      (async () => {
        for (let r = await it.next(); !r.done; r = await it.next());
      })(),
    )
    assert.match(e.message, /overloaded_error.*the server is shutting down/)
    await closing
  })

  test('a client that leaves mid-stream aborts its generation', async () => {
    const { model, signals } = held()
    const s = await serveScripted([model])
    try {
      const client = await anthropic(s.url)
      const stream = await client.messages.create({
        max_tokens: 8,
        messages: [{ role: 'user', content: 'x' }],
        stop_sequences: ['zz'],
        stream: true,
      })
      const it = stream[Symbol.asyncIterator]()
      for (let r = await it.next(); r.value.type !== 'content_block_delta'; r = await it.next());
      stream.controller.abort()
      await new Promise((resolve) => signals[0].addEventListener('abort', resolve, { once: true }))
      for (let i = 0; i < 1000 && s.ctx.running.size > 0; i++) await new Promise(setImmediate)
      assert.equal(s.ctx.running.size, 0)
    } finally {
      await s.close()
    }
  })
})

describe("/v1/messages with LangChain's ChatAnthropic", { skip: noLangChain }, () => {
  let s
  before(async () => {
    const weather = scripted('weather', (messages) => {
      const result = messages.find((m) => m.role === 'tool')
      return result ? `It is ${result.content} in Paris.` : `Let me check. ${CALL}`
    })
    const echo = scripted('echo', (messages) => `you said: ${messages.at(-1).content}`)
    s = await serveScripted([weather, echo], 'sk-test')
  })
  after(() => s?.close())

  test('invoke, stream, and a tool round trip with bindTools and a ToolMessage', async () => {
    const { ChatAnthropic } = await import('@langchain/anthropic')
    const { HumanMessage, ToolMessage } = await import('@langchain/core/messages')
    const options = { anthropicApiUrl: s.url, apiKey: 'sk-test', maxRetries: 0, maxTokens: 256 }
    const llm = new ChatAnthropic({ model: 'echo', ...options })
    const answer = await llm.invoke('hello')
    assert.equal(answer.content, 'you said: hello')
    assert.equal(answer.response_metadata.stop_reason, 'end_turn')
    assert.equal(answer.usage_metadata.input_tokens, 5)
    let text = ''
    for await (const chunk of await llm.stream('streamed'))
      text += typeof chunk.content === 'string' ? chunk.content : ''
    assert.equal(text, 'you said: streamed')

    const withTools = new ChatAnthropic({ model: 'weather', ...options }).bindTools([WEATHER])
    const ask = new HumanMessage('Weather in Paris?')
    const call = await withTools.invoke([ask])
    assert.deepEqual(
      call.tool_calls.map((c) => [c.name, c.args]),
      [['get_weather', { city: 'Paris' }]],
    )
    const result = new ToolMessage({ content: 'sunny', tool_call_id: call.tool_calls[0].id })
    const done = await withTools.invoke([ask, call, result])
    assert.equal(done.content, 'It is sunny in Paris.')
    let joined = null
    for await (const chunk of await withTools.stream([ask])) joined = joined ? joined.concat(chunk) : chunk
    assert.deepEqual(
      joined.tool_calls.map((c) => [c.name, c.args]),
      [['get_weather', { city: 'Paris' }]],
    )
  })
})

describe('/v1/messages over a causal LM (torch.serve)', { skip: noModel }, () => {
  let server
  let client
  let lm
  const N = 8
  before(async () => {
    const torch = require('..')
    server = await torch.serve({ models: { tiny: { folder: LM_DIR } }, port: 0 })
    client = await anthropic(server.url)
    lm = await torch.text.CausalLM.load(LM_DIR)
  })
  after(async () => {
    lm?.dispose()
    await server?.close()
  })

  test('the answer equals CausalLM.complete on the same messages, streamed and not; count_tokens its input', async () => {
    const messages = [
      { role: 'system', content: 'You are terse.' },
      { role: 'user', content: 'Hello there!' },
    ]
    const want = await lm.complete(messages, { temperature: 0, maxNewTokens: N })
    const ask = { system: 'You are terse.', messages: [{ role: 'user', content: 'Hello there!' }] }
    const msg = await client.messages.create({ ...ask, max_tokens: N, temperature: 0 })
    assert.equal(msg.content.map((b) => b.text).join(''), want.text)
    assert.equal(msg.stop_reason, want.finishReason === 'length' ? 'max_tokens' : 'end_turn')
    assert.equal(msg.usage.input_tokens, want.usage.promptTokens)
    assert.equal(msg.usage.output_tokens, want.usage.completionTokens)
    const stream = client.messages.stream({ ...ask, max_tokens: N, temperature: 0 })
    let text = ''
    stream.on('text', (d) => {
      text += d
    })
    const final = await stream.finalMessage()
    assert.equal(text, want.text)
    assert.equal(final.usage.input_tokens, want.usage.promptTokens)
    const counted = await client.messages.countTokens({ model: 'tiny', ...ask })
    assert.deepEqual(counted, { input_tokens: want.usage.promptTokens })
  })
})

describe('/v1/messages with images (the tiny LLaVA), with @anthropic-ai/sdk', { skip: NO_VLM }, () => {
  const png = fs.readFileSync(path.join(__dirname, '..', 'models', 'images', 'chelsea.png'))
  let served, client

  before(async () => {
    served = await torch.serve({ models: { llava: VLM }, port: 0 })
    client = await anthropic(served.url)
  })
  after(async () => served?.close())

  test('an image block gives the text chat completions gives for its data: URL', { timeout: 120_000 }, async () => {
    const data = png.toString('base64')
    const res = await fetch(`${served.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        model: 'llava',
        max_tokens: 8,
        temperature: 0,
        messages: [
          {
            role: 'user',
            content: [
              { type: 'text', text: 'Look: ' },
              { type: 'image_url', image_url: { url: `data:image/png;base64,${data}` } },
              { type: 'text', text: 'What is it?' },
            ],
          },
        ],
      }),
    })
    const want = await res.json()
    assert.equal(res.status, 200, JSON.stringify(want))
    const msg = await client.messages.create({
      model: 'llava',
      max_tokens: 8,
      temperature: 0,
      messages: [
        {
          role: 'user',
          content: [
            { type: 'text', text: 'Look: ' },
            { type: 'image', source: { type: 'base64', media_type: 'image/png', data } },
            { type: 'text', text: 'What is it?' },
          ],
        },
      ],
    })
    assert.equal(msg.content[0].text, want.choices[0].message.content)
    assert.equal(msg.usage.input_tokens, want.usage.prompt_tokens)
    // A URL source: fetched only where the server fetches (here it does not).
    const { default: Anthropic } = await import('@anthropic-ai/sdk')
    const e = await client.messages
      .create({
        model: 'llava',
        max_tokens: 8,
        messages: [
          { role: 'user', content: [{ type: 'image', source: { type: 'url', url: 'https://example.com/a.png' } }] },
        ],
      })
      .catch((err) => err)
    assert.ok(e instanceof Anthropic.BadRequestError, String(e))
    assert.match(e.error.error.message, /this server fetches no image URL/)
  })
})

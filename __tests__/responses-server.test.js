'use strict'
// POST /v1/responses of torch-node serve (lib/serve/responses.js), driven by the real clients:
// the `openai` client's `responses.create`/`responses.stream`/`responses.retrieve` and the AI SDK's
// default provider (`createOpenAI({baseURL})(model)`, which calls the Responses API).
// - In this process, over scripted models (what a model says is fixed): text, streams with
//   OpenAI's event shapes, function calls and their outputs, previous_response_id, store: false,
//   text.format, refusals, and the store's bounds.
// - torch.serve over the tiny random Llama of `npm run models`: the answer equals CausalLM run
//   directly, streamed and not; max_output_tokens past the context is a 400; prefixCache reaches
//   the load.
const { describe, test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const http = require('node:http')
const path = require('node:path')
const { createHandler } = require('../lib/serve/app')
const { ResponseStore } = require('../lib/serve/responses')

const LM_DIR = path.join(__dirname, '..', 'models', 'golden', 'lm', 'llama-tiny')
const noModel = !fs.existsSync(path.join(LM_DIR, 'model.pt2')) && `no ${LM_DIR}: run \`npm run models\``
// The AI SDK's OpenAI provider (`@ai-sdk/openai`); the openai-compatible one never calls /v1/responses.
const noAiSdk = (() => {
  try {
    require.resolve('@ai-sdk/openai')
    return false
  } catch {
    return 'no @ai-sdk/openai in node_modules'
  }
})()

const WEATHER = {
  type: 'function',
  name: 'get_weather',
  description: 'The weather in a city',
  parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
}
const CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'

async function openai(url) {
  const { default: OpenAI } = await import('openai')
  return new OpenAI({ baseURL: `${url}/v1`, apiKey: 'unused', maxRetries: 0 })
}

async function rejection(promise) {
  try {
    await promise
  } catch (e) {
    return e
  }
  assert.fail('expected the request to fail')
}

async function post(url, route, body) {
  const res = await fetch(`${url}${route}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  })
  return { status: res.status, body: await res.json() }
}

/** A model that says what `script(messages, options)` returns, in pieces of 4 characters. */
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
      const text = await script(input, options)
      const pieces = text.match(/[\s\S]{1,4}/g) ?? []
      const max = options.maxNewTokens ?? Infinity
      for (const p of pieces.slice(0, max)) yield { text: p, tokens: [0] }
      const finishReason = pieces.length > max ? 'length' : 'stop'
      return { finishReason, usage: { promptTokens: 5, completionTokens: Math.min(max, pieces.length) } }
    },
    stats: () => ({ active: 0, queued: 0 }),
    dispose() {},
  }
}

async function serveScripted(models) {
  const { handle, ctx } = createHandler({ models })
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

describe('/v1/responses in this process, with the openai client', () => {
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
    echo = scripted('echo', (messages, options) =>
      options.responseFormat ? '{"city": "Paris"}' : `you said: ${messages.at(-1).content}`,
    )
    s = await serveScripted([weather, echo])
    client = await openai(s.url)
  })
  after(() => s?.close())

  test('a string input: one message item of output_text, usage, and GET /v1/responses/{id}', async () => {
    const res = await client.responses.create({ model: 'echo', input: 'hello', metadata: { run: '1' } })
    assert.match(res.id, /^resp_[0-9a-f]{32}$/)
    assert.equal(res.object, 'response')
    assert.equal(res.status, 'completed')
    assert.equal(res.model, 'echo')
    assert.equal(res.output_text, 'you said: hello') // the client joins the output_text parts
    assert.equal(res.output.length, 1)
    const [item] = res.output
    assert.equal(item.type, 'message')
    assert.equal(item.role, 'assistant')
    assert.equal(item.status, 'completed')
    assert.match(item.id, /^msg_/)
    assert.deepEqual(item.content, [{ type: 'output_text', text: 'you said: hello', annotations: [], logprobs: [] }])
    assert.deepEqual(res.usage, {
      input_tokens: 5,
      input_tokens_details: { cached_tokens: 0 },
      output_tokens: 4,
      output_tokens_details: { reasoning_tokens: 0 },
      total_tokens: 9,
    })
    assert.deepEqual(res.metadata, { run: '1' })
    assert.deepEqual(echo.prompts.at(-1).messages, [{ role: 'user', content: 'hello' }])
    const again = await client.responses.retrieve(res.id)
    assert.deepEqual(again.output, res.output)
    assert.equal(again.id, res.id)
    const items = []
    for await (const i of client.responses.inputItems.list(res.id)) items.push(i)
    assert.equal(items.length, 1)
    assert.match(items[0].id, /^msg_/)
    assert.deepEqual(items[0].content, [{ type: 'input_text', text: 'hello' }])
  })

  test('items: instructions first, input_text and output_text parts, developer and system roles', async () => {
    await client.responses.create({
      model: 'echo',
      instructions: 'Be terse.',
      input: [
        { role: 'developer', content: 'Answer in English.' },
        { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Hi' }] },
        { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'Hello!', annotations: [] }] },
        {
          role: 'user',
          content: [
            { type: 'input_text', text: 'How ' },
            { type: 'input_text', text: 'are you?' },
          ],
        },
      ],
    })
    assert.deepEqual(echo.prompts.at(-1).messages, [
      { role: 'system', content: 'Be terse.' },
      { role: 'system', content: 'Answer in English.' },
      { role: 'user', content: 'Hi' },
      { role: 'assistant', content: 'Hello!' },
      { role: 'user', content: 'How are you?' },
    ])
  })

  test('streamed: OpenAI event shapes in order, sequence numbers, and the client own accumulator', async () => {
    const stream = client.responses.stream({ model: 'echo', input: 'stream me' })
    const events = []
    for await (const e of stream) events.push(e)
    const final = await stream.finalResponse()
    assert.equal(final.output_text, 'you said: stream me')
    assert.equal(final.status, 'completed')
    assert.deepEqual(
      events.map((e) => e.sequence_number),
      events.map((_, i) => i),
    )
    const types = events.map((e) => e.type)
    const deltas = types.filter((t) => t === 'response.output_text.delta').length
    assert.deepEqual(types, [
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.content_part.added',
      ...Array(deltas).fill('response.output_text.delta'),
      'response.output_text.done',
      'response.content_part.done',
      'response.output_item.done',
      'response.completed',
    ])
    assert.ok(deltas > 1)
    assert.equal(events[0].response.status, 'in_progress')
    const done = events.find((e) => e.type === 'response.output_text.done')
    assert.equal(done.text, 'you said: stream me')
    assert.equal(events.at(-1).response.usage.total_tokens, events.at(-1).response.usage.input_tokens + deltas)
    // Stored as it ended.
    assert.equal((await client.responses.retrieve(final.id)).output_text, 'you said: stream me')
  })

  test('function calls: an item with call_id, name and arguments; its output goes back by previous_response_id', async () => {
    const first = await client.responses.create({ model: 'weather', input: 'Weather in Paris?', tools: [WEATHER] })
    assert.equal(first.status, 'completed')
    assert.deepEqual(
      first.output.map((i) => i.type),
      ['message', 'function_call'],
    )
    const call = first.output[1]
    assert.match(call.id, /^fc_/)
    assert.match(call.call_id, /^call_/)
    assert.equal(call.name, 'get_weather')
    assert.deepEqual(JSON.parse(call.arguments), { city: 'Paris' })
    assert.equal(first.output_text, 'Let me check.')
    // The tools reach the template in chat completions' shape.
    assert.deepEqual(weather.prompts.at(-1).tools, [
      {
        type: 'function',
        function: { name: 'get_weather', description: WEATHER.description, parameters: WEATHER.parameters },
      },
    ])

    const second = await client.responses.create({
      model: 'weather',
      previous_response_id: first.id,
      input: [{ type: 'function_call_output', call_id: call.call_id, output: 'sunny' }],
      tools: [WEATHER],
    })
    assert.equal(second.output_text, 'It is sunny in Paris.')
    assert.equal(second.previous_response_id, first.id)
    const messages = weather.prompts.at(-1).messages
    assert.equal(messages.length, 3)
    assert.equal(messages[1].tool_calls[0].id, call.call_id)
    assert.deepEqual(messages[2], { role: 'tool', tool_call_id: call.call_id, content: 'sunny' })
  })

  test('function calls streamed: output_item.added, arguments deltas as generated and done, item done', async () => {
    const whole = await client.responses.create({ model: 'weather', input: 'Weather in Paris?', tools: [WEATHER] })
    const stream = client.responses.stream({ model: 'weather', input: 'Weather in Paris?', tools: [WEATHER] })
    const events = []
    for await (const e of stream) events.push(e)
    const final = await stream.finalResponse()
    const call = final.output.find((i) => i.type === 'function_call')
    assert.equal(call.arguments, whole.output.find((i) => i.type === 'function_call').arguments)
    assert.deepEqual(JSON.parse(call.arguments), { city: 'Paris' })
    const ofCall = events.filter((e) => e.item_id === call.id || e.item?.id === call.id)
    const deltas = ofCall.filter((e) => e.type === 'response.function_call_arguments.delta')
    // The scripted model says 4 characters at a time: the arguments come in several deltas.
    assert.ok(deltas.length >= 3, `${deltas.length} deltas`)
    assert.equal(deltas.map((e) => e.delta).join(''), call.arguments)
    assert.deepEqual(
      ofCall.map((e) => e.type),
      [
        'response.output_item.added',
        ...deltas.map(() => 'response.function_call_arguments.delta'),
        'response.function_call_arguments.done',
        'response.output_item.done',
      ],
    )
    const added = events.find((e) => e.type === 'response.output_item.added' && e.item.type === 'function_call')
    assert.equal(added.item.arguments, '')
    assert.equal(added.item.status, 'in_progress')
  })

  test('the whole conversation as items, with store: false: not kept', async () => {
    const res = await client.responses.create({
      model: 'weather',
      store: false,
      tools: [WEATHER],
      input: [
        { role: 'user', content: 'Weather in Paris?' },
        { type: 'function_call', call_id: 'call_1', name: 'get_weather', arguments: '{"city":"Paris"}' },
        { type: 'function_call_output', call_id: 'call_1', output: 'rainy' },
      ],
    })
    assert.equal(res.output_text, 'It is rainy in Paris.')
    assert.equal(res.store, false)
    const missing = await rejection(client.responses.retrieve(res.id))
    assert.equal(missing.status, 404)
    const next = await rejection(
      client.responses.create({ model: 'weather', previous_response_id: res.id, input: 'x' }),
    )
    assert.equal(next.status, 404)
    assert.match(next.message, /previous_response_id: no stored response/)
  })

  test('text.format json_schema and a forced tool_choice reach the model as its responseFormat', async () => {
    const seen = []
    const json = scripted('json', (messages, options) => {
      seen.push(options.responseFormat)
      return options.responseFormat?.type === 'tool_calls' ? CALL : '{"city": "Paris"}'
    })
    const t = await serveScripted([json])
    try {
      const c = await openai(t.url)
      const schema = WEATHER.parameters
      const res = await c.responses.create({
        input: 'Where?',
        text: { format: { type: 'json_schema', name: 'place', schema, strict: true } },
      })
      assert.deepEqual(JSON.parse(res.output_text), { city: 'Paris' })
      // The client's own helpers: zodTextFormat and responses.parse.
      const { zodTextFormat } = await import('openai/helpers/zod')
      const { z } = await import('zod')
      const parsed = await c.responses.parse({
        input: 'Where?',
        text: { format: zodTextFormat(z.object({ city: z.string() }), 'place') },
      })
      assert.deepEqual(parsed.output_parsed, { city: 'Paris' })
      const forced = await c.responses.create({
        input: 'Where?',
        tools: [WEATHER],
        tool_choice: { type: 'function', name: 'get_weather' },
      })
      assert.equal(forced.output.at(-1).type, 'function_call')
      assert.deepEqual(seen.splice(1, 1)[0].json_schema.name, 'place')
      assert.deepEqual(seen, [
        { type: 'json_schema', json_schema: { name: 'place', schema, strict: true } },
        {
          type: 'tool_calls',
          tools: [
            {
              type: 'function',
              function: { name: 'get_weather', description: WEATHER.description, parameters: schema },
            },
          ],
          toolChoice: { type: 'function', function: { name: 'get_weather' } },
          format: 'hermes',
          parallel: true,
        },
      ])
    } finally {
      await t.close()
    }
  })

  test('max_output_tokens: incomplete with its reason, streamed and not', async () => {
    const res = await client.responses.create({ model: 'echo', input: 'a long answer please', max_output_tokens: 2 })
    assert.equal(res.status, 'incomplete')
    assert.deepEqual(res.incomplete_details, { reason: 'max_output_tokens' })
    assert.equal(res.output_text, 'you said')
    const stream = client.responses.stream({ model: 'echo', input: 'a long answer please', max_output_tokens: 2 })
    const types = []
    for await (const e of stream) types.push(e.type)
    assert.equal(types.at(-1), 'response.incomplete')
  })

  test('refused with 400 (or 404) naming what is wrong', async () => {
    const cases = [
      [{ model: 'echo', input: 'x', frequency_penalty: 1 }, 400, /unknown key "frequency_penalty": accepted keys are/],
      [{ model: 'echo' }, 400, /input: required/],
      [{ model: 'echo', input: 42 }, 400, /input: expected a string or an array of items/],
      [
        { model: 'echo', input: [{ role: 'user', content: [{ type: 'input_image', image_url: 'x' }] }] },
        400,
        /input\[0\]\.content\[0\]: expected a data:image\/\.\.\.;base64 URL or an http\(s\) URL, got "x"/,
      ],
      [
        { model: 'echo', input: [{ type: 'reasoning', summary: [] }] },
        400,
        /input\[0\]\.type: expected one of message/,
      ],
      [
        { model: 'echo', input: [{ type: 'function_call_output', call_id: 'nope', output: 'x' }] },
        400,
        /input\[0\]\.call_id: expected the call_id of an earlier function_call/,
      ],
      [{ model: 'echo', input: [{ type: 'item_reference', id: 'msg_nope' }] }, 404, /input\[0\]\.id: no stored item/],
      [{ model: 'echo', input: 'x', tools: [{ type: 'web_search' }] }, 400, /tools\[0\]\.type: only function tools/],
      [{ model: 'echo', input: 'x', max_output_tokens: 0 }, 400, /max_output_tokens: expected an integer ≥ 1/],
      // The chat route's refusals, with this API's names.
      [{ model: 'echo', input: 'x', tools: [{ ...WEATHER, strict: true }] }, 400, /^tools\[0\]\.strict: true needs/],
      [
        { model: 'echo', input: 'x', tools: [WEATHER], tool_choice: { type: 'function', name: 'nope' } },
        400,
        /^tool_choice\.name: no tool named "nope"/,
      ],
      [{ model: 'echo', input: 'x', truncation: 'auto' }, 400, /truncation: only "disabled"/],
      [{ model: 'echo', input: 'x', text: { format: { type: 'yaml' } } }, 400, /text\.format: expected/],
      [{ model: 'echo', input: 'x', previous_response_id: 'resp_nope' }, 404, /previous_response_id/],
      [{ model: 'nope', input: 'x' }, 404, /model: this server serves/],
    ]
    for (const [body, status, message] of cases) {
      const r = await post(s.url, '/v1/responses', body)
      assert.equal(r.status, status, JSON.stringify(body))
      assert.match(r.body.error.message, message)
    }
    const r = await fetch(`${s.url}/v1/responses/resp_nope`)
    assert.equal(r.status, 404)
  })

  test('an item_reference names an item of a stored response (what the AI SDK sends back)', async () => {
    const first = await client.responses.create({ model: 'echo', input: 'one' })
    await client.responses.create({
      model: 'echo',
      input: [
        { role: 'user', content: 'one' },
        { type: 'item_reference', id: first.output[0].id },
        { role: 'user', content: 'two' },
      ],
    })
    assert.deepEqual(echo.prompts.at(-1).messages, [
      { role: 'user', content: 'one' },
      { role: 'assistant', content: 'you said: one' },
      { role: 'user', content: 'two' },
    ])
  })

  test('input_items: every input item with an id, newest first, a page at a time', async () => {
    const input = [
      { role: 'system', content: 'Be terse.' },
      { type: 'message', id: 'msg_given', role: 'user', content: [{ type: 'input_text', text: 'one' }] },
      { role: 'assistant', content: 'ok' },
      { type: 'function_call', call_id: 'call_9', name: 'get_weather', arguments: '{}' },
      { type: 'function_call_output', call_id: 'call_9', output: 'sunny' },
      { role: 'user', content: 'two' },
    ]
    const res = await client.responses.create({ model: 'echo', input, tools: [WEATHER] })
    const all = []
    // Pages of 2: the client follows has_more with after=last_id.
    for await (const i of client.responses.inputItems.list(res.id, { limit: 2 })) all.push(i)
    assert.deepEqual(
      all.map((i) => i.type),
      ['message', 'function_call_output', 'function_call', 'message', 'message', 'message'],
    )
    assert.equal(all[4].id, 'msg_given')
    assert.deepEqual(all[5].content, [{ type: 'input_text', text: 'Be terse.' }])
    assert.deepEqual(all[3].content, [{ type: 'output_text', text: 'ok' }])
    assert.deepEqual([all[1].call_id, all[1].output], ['call_9', 'sunny'])
    const asc = await client.responses.inputItems.list(res.id, { order: 'asc', limit: 1 })
    assert.equal(asc.data[0].id, all[5].id)
    assert.equal(asc.has_more, true)
    assert.equal((await fetch(`${s.url}/v1/responses/${res.id}/nope`)).status, 404)
  })

  test('DELETE /v1/responses/{id}', async () => {
    const res = await client.responses.create({ model: 'echo', input: 'bye' })
    await client.responses.delete(res.id)
    assert.equal((await rejection(client.responses.retrieve(res.id))).status, 404)
  })
})

describe('/v1/responses streams that end early: the client leaves, the server shuts down', () => {
  /** A model that says "a", then waits for its abort (or `release()`) to say "done". */
  function held() {
    let release
    const gate = new Promise((resolve) => {
      release = resolve
    })
    const signals = []
    const model = scripted('held', () => 'unused')
    model.generate = async function* (input, { signal }) {
      signals.push(signal)
      yield { text: 'a', tokens: [0] }
      const aborted = new Promise((resolve) => signal.addEventListener('abort', () => resolve(null), { once: true }))
      if ((await Promise.race([gate, aborted])) === null) {
        return { finishReason: 'aborted', usage: { promptTokens: 5, completionTokens: 1 } }
      }
      yield { text: 'done', tokens: [0] }
      return { finishReason: 'stop', usage: { promptTokens: 5, completionTokens: 2 } }
    }
    return { model, signals, release: () => release('go') }
  }

  test('a client that leaves mid-stream aborts its generation; nothing is stored', async () => {
    const { model, signals } = held()
    const s = await serveScripted([model])
    try {
      const client = await openai(s.url)
      const stream = await client.responses.create({ input: 'x', stream: true })
      const it = stream[Symbol.asyncIterator]()
      const seen = []
      for (let r = await it.next(); r.value.type !== 'response.output_text.delta'; r = await it.next()) {
        seen.push(r.value.type)
      }
      assert.deepEqual(seen, [
        'response.created',
        'response.in_progress',
        'response.output_item.added',
        'response.content_part.added',
      ])
      stream.controller.abort()
      await new Promise((resolve) => signals[0].addEventListener('abort', resolve, { once: true }))
      // The generation's end runs a few turns of the event loop after its abort.
      for (let i = 0; i < 1000 && s.ctx.running.size > 0; i++) await new Promise(setImmediate)
      assert.equal(s.ctx.running.size, 0)
      assert.equal(s.ctx.responses.size, 0)
    } finally {
      await s.close()
    }
  })

  test('past the shutdown deadline the stream gets an error event and ends', async () => {
    const { closer } = require('../lib/serve/app')
    const { model } = held()
    const { handle, ctx } = createHandler({ models: [model] })
    const server = http.createServer(handle)
    await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
    const close = closer(server, ctx, () => {})
    const client = await openai(`http://127.0.0.1:${server.address().port}`)
    const stream = await client.responses.create({ input: 'x', stream: true })
    const it = stream[Symbol.asyncIterator]()
    for (let r = await it.next(); r.value.type !== 'response.output_text.delta'; r = await it.next());
    const closing = close({ timeoutMs: 50 })
    const e = await rejection(
      (async () => {
        for (let r = await it.next(); !r.done; r = await it.next());
      })(),
    )
    assert.match(e.message, /the server is shutting down/)
    await closing
  })
})

test('ResponseStore: at most maxEntries and maxBytes, each for ttlMs; its items go with it', () => {
  let now = 0
  const store = new ResponseStore({ maxEntries: 2, maxBytes: 100, ttlMs: 1000, now: () => now })
  const put = (id, bytes = 10) => store.put({ id, output: [] }, [], [{ id: `msg_${id}` }], bytes)
  put('a')
  put('b')
  put('c') // a is the oldest: out
  assert.equal(store.get('a'), undefined)
  assert.equal(store.item('msg_a'), undefined)
  assert.deepEqual(store.item('msg_b'), { id: 'msg_b' })
  assert.equal(store.size, 2)
  now = 1500
  put('d')
  // b and c are past their hour (here, a second): gone.
  assert.equal(store.size, 1)
  assert.equal(store.get('b'), undefined)
  assert.ok(store.get('d'))
  put('e', 95) // d's 10 and e's 95 pass 100: d goes
  assert.equal(store.get('d'), undefined)
  assert.ok(store.get('e'))
  put('f', 101) // bigger than the whole store: not kept, e stays
  assert.equal(store.get('f'), undefined)
  assert.ok(store.get('e'))
})

describe('/v1/responses with the AI SDK default provider (createOpenAI()(model))', { skip: noAiSdk }, () => {
  let s
  before(async () => {
    const weather = scripted('weather', (messages) => {
      const result = messages.find((m) => m.role === 'tool')
      return result ? `It is ${result.content} in Paris.` : `Let me check. ${CALL}`
    })
    const echo = scripted('echo', (messages) => `you said: ${messages.at(-1).content}`)
    s = await serveScripted([weather, echo])
  })
  after(() => s?.close())

  test('generateText and streamText: the text, usage and finish reason', async () => {
    const { generateText, streamText } = await import('ai')
    const { createOpenAI } = await import('@ai-sdk/openai')
    const provider = createOpenAI({ baseURL: `${s.url}/v1`, apiKey: 'unused' })
    const result = await generateText({ model: provider('echo'), prompt: 'hello', system: 'Be terse.' })
    assert.equal(result.text, 'you said: hello')
    assert.equal(result.finishReason, 'stop')
    assert.equal(result.usage.inputTokens, 5)
    assert.equal(result.usage.outputTokens, 4)
    const streamed = streamText({ model: provider('echo'), prompt: 'streamed' })
    let text = ''
    for await (const delta of streamed.textStream) text += delta
    assert.equal(text, 'you said: streamed')
    assert.equal(await streamed.finishReason, 'stop')
  })

  test('tools: generateText runs the tool and answers with its result (the next step sends the call back)', async () => {
    const { generateText, streamText, tool, jsonSchema, stepCountIs } = await import('ai')
    const { createOpenAI } = await import('@ai-sdk/openai')
    const provider = createOpenAI({ baseURL: `${s.url}/v1`, apiKey: 'unused' })
    const tools = {
      get_weather: tool({
        description: WEATHER.description,
        inputSchema: jsonSchema(WEATHER.parameters),
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

    const streamed = streamText({
      model: provider('weather'),
      prompt: 'Weather in Paris?',
      tools,
      stopWhen: stepCountIs(3),
    })
    const parts = []
    for await (const part of streamed.fullStream) parts.push(part)
    assert.ok(!parts.some((p) => p.type === 'error'), JSON.stringify(parts.filter((p) => p.type === 'error')))
    const call = parts.find((p) => p.type === 'tool-call')
    assert.deepEqual([call.toolName, call.input], ['get_weather', { city: 'Paris' }])
    // The call's input as it was generated: several tool-input-delta parts, joined the arguments.
    const deltas = parts.filter((p) => p.type === 'tool-input-delta')
    assert.ok(deltas.length >= 3, `${deltas.length} tool-input-delta parts`)
    assert.equal(deltas.map((p) => p.delta).join(''), '{"city":"Paris"}')
    assert.match(await streamed.text, /sunny/)
  })
})

describe('/v1/responses over a causal LM (torch.serve)', { skip: noModel }, () => {
  let server
  let client
  let lm
  const N = 8
  before(async () => {
    const torch = require('..')
    server = await torch.serve({ models: { tiny: { folder: LM_DIR, prefixCache: { maxTokens: 512 } } }, port: 0 })
    client = await openai(server.url)
    lm = await torch.text.CausalLM.load(LM_DIR)
  })
  after(async () => {
    lm?.dispose()
    await server?.close()
  })

  test('the answer equals CausalLM.complete on the same messages, streamed and not', async () => {
    const messages = [
      { role: 'system', content: 'You are terse.' },
      { role: 'user', content: 'Hello there!' },
    ]
    const want = await lm.complete(messages, { temperature: 0, maxNewTokens: N })
    const res = await client.responses.create({
      instructions: 'You are terse.',
      input: 'Hello there!',
      max_output_tokens: N,
      temperature: 0,
    })
    assert.equal(res.output_text, want.text)
    assert.equal(res.status, want.finishReason === 'length' ? 'incomplete' : 'completed')
    assert.equal(res.usage.input_tokens, want.usage.promptTokens)
    assert.equal(res.usage.output_tokens, want.usage.completionTokens)
    const stream = client.responses.stream({
      instructions: 'You are terse.',
      input: 'Hello there!',
      max_output_tokens: N,
      temperature: 0,
    })
    let text = ''
    for await (const e of stream) if (e.type === 'response.output_text.delta') text += e.delta
    assert.equal(text, want.text)
    assert.equal((await stream.finalResponse()).output_text, want.text)
  })

  test('prefixCache reaches the load: the second prompt that starts the same reuses its start', async () => {
    const stats = () => server.models.tiny.stats().prefixCache
    assert.equal(stats().maxTokens, 512)
    const before = stats().hits
    const first = await client.responses.create({
      instructions: 'A long shared system prompt.',
      input: 'one',
      max_output_tokens: 2,
    })
    await client.responses.create({ previous_response_id: first.id, input: 'two', max_output_tokens: 2 })
    assert.ok(stats().hits > before)
  })

  test('a prompt and max_output_tokens (max_tokens) past the context: 400 naming both, as vLLM says it', async () => {
    const context = server.models.tiny.maxContext
    const err = await rejection(client.responses.create({ input: 'Hello', max_output_tokens: context + 1 }))
    assert.equal(err.status, 400)
    assert.match(
      err.message,
      new RegExp(
        `'max_output_tokens' is too large: ${context + 1}\\. This model's maximum context length is ${context} tokens and your request has \\d+ input tokens`,
      ),
    )
    const chat = await rejection(
      client.chat.completions.create({ messages: [{ role: 'user', content: 'Hello' }], max_tokens: context }),
    )
    assert.equal(chat.status, 400)
    assert.match(chat.message, /'max_tokens' is too large/)
    const completion = await rejection(client.completions.create({ prompt: 'Hello', max_tokens: context }))
    assert.equal(completion.status, 400)
    // A prompt past the context alone is refused by the model, naming the prompt.
    const long = await rejection(client.completions.create({ prompt: 'hello '.repeat(400), max_tokens: 4 }))
    assert.equal(long.status, 400)
    assert.match(long.message, /the prompt has \d+ tokens; this model serves at most \d+ in all/)
    // Within the context it runs.
    const ok = await client.completions.create({ prompt: 'Hello', max_tokens: 4, temperature: 0 })
    assert.equal(ok.usage.completion_tokens, 4)
  })

  test('an unknown load option is refused by the load itself, naming the accepted ones', async () => {
    const torch = require('..')
    await assert.rejects(
      torch.serve({ models: { tiny: { folder: LM_DIR, prefixcache: { maxTokens: 8 } } }, port: 0 }),
      (e) => {
        assert.equal(e.code, 'InvalidArg')
        assert.match(
          e.message,
          /^serve: models\["tiny"\]: CausalLM\.load: .*unknown option 'prefixcache'; accepted: .*prefixCache/,
        )
        return true
      },
    )
  })
})

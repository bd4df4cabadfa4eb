// @ts-check
'use strict'
// Streamed tool calls through /v1/chat/completions, in every tool format, over scripted models
// (what the model says is fixed, 3 characters a token) and the official `openai` client: the first
// delta of a call has its index, id, type, name and arguments '', later ones its index and
// argument fragments; joined, they equal the call not streamed; finish_reason tool_calls.
const { describe, test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const http = require('node:http')
const { createHandler } = require('../lib/serve/app')

const WEATHER = {
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'The weather in a city',
    parameters: { type: 'object', properties: { city: { type: 'string' }, days: { type: 'integer' } } },
  },
}
const ARGS = '{"city": "Paris \\u00e9", "days": 3}'
const TWO = [
  { name: 'get_weather', arguments: '{"city":"Paris é","days":3}' },
  { name: 'get_weather', arguments: '{"city":"Lyon"}' },
]

/** What each format's model says: two calls (the generic one under the grammar's list). */
const SAYS = {
  hermes: `Checking.\n<tool_call>\n{"name": "get_weather", "arguments": ${ARGS}}\n</tool_call>\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Lyon"}}\n</tool_call>`,
  llama3: `<|python_tag|>{"name": "get_weather", "parameters": ${ARGS}}; {"name": "get_weather", "parameters": {"city": "Lyon"}}`,
  mistral: `[TOOL_CALLS][{"name": "get_weather", "arguments": ${ARGS}}, {"name": "get_weather", "arguments": {"city": "Lyon"}}]`,
  generic: `{"tool_calls": [{"name": "get_weather", "arguments": ${ARGS}}, {"name": "get_weather", "arguments": {"city": "Lyon"}}]}`,
}

/** @param {string} name @param {keyof typeof SAYS} format */
function scripted(name, format) {
  return {
    kind: 'chat',
    name,
    toolFormat: format === 'generic' ? null : format,
    markers: new Map(),
    async prompt(/** @type {any} */ messages) {
      return messages
    },
    async *generate(/** @type {any} */ input, /** @type {any} */ options) {
      const pieces = SAYS[format].match(/[\s\S]{1,3}/g) ?? []
      const max = options.maxNewTokens ?? Infinity
      for (const p of pieces.slice(0, max)) yield { text: p, tokens: [0] }
      const finishReason = pieces.length > max ? 'length' : 'stop'
      return { finishReason, usage: { promptTokens: 5, completionTokens: Math.min(max, pieces.length) } }
    },
    stats: () => ({ active: 0, queued: 0 }),
    dispose() {},
  }
}

describe('/v1/chat/completions: tool-call arguments streamed as generated, in every format', () => {
  /** @type {http.Server} */
  let server
  /** @type {any} */
  let client
  before(async () => {
    const formats = /** @type {Array<keyof typeof SAYS>} */ (Object.keys(SAYS))
    server = http.createServer(createHandler({ models: formats.map((f) => scripted(f, f)) }).handle)
    await new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(undefined)))
    const { default: OpenAI } = await import('openai')
    const port = /** @type {import('node:net').AddressInfo} */ (server.address()).port
    client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: 'unused', maxRetries: 0 })
  })
  after(async () => {
    server?.closeAllConnections()
    await new Promise((resolve) => (server ? server.close(resolve) : resolve(undefined)))
  })

  /** The stream's tool-call deltas, content and finish_reason. @param {any} body */
  async function streamed(body) {
    const deltas = []
    let content = ''
    let finish = null
    for await (const chunk of await client.chat.completions.create({ ...body, stream: true })) {
      const choice = chunk.choices[0]
      if (!choice) continue
      content += choice.delta.content ?? ''
      deltas.push(...(choice.delta.tool_calls ?? []))
      finish = choice.finish_reason ?? finish
    }
    return { deltas, content, finish }
  }

  for (const format of /** @type {Array<keyof typeof SAYS>} */ (Object.keys(SAYS))) {
    test(`${format}: OpenAI's delta shape, joined equal to the call not streamed`, async () => {
      const body = { model: format, messages: [{ role: 'user', content: 'Weather?' }], tools: [WEATHER] }
      const parallel = { ...body, parallel_tool_calls: true }
      const whole = (await client.chat.completions.create(parallel)).choices[0]
      assert.equal(whole.finish_reason, 'tool_calls')
      assert.deepEqual(
        whole.message.tool_calls.map((/** @type {any} */ c) => c.function),
        TWO,
      )
      const { deltas, content, finish } = await streamed(parallel)
      assert.equal(finish, 'tool_calls')
      assert.equal(content.trim(), whole.message.content ?? '')
      for (const index of [0, 1]) {
        const own = deltas.filter((d) => d.index === index)
        assert.match(own[0].id, format === 'mistral' ? /^[0-9a-f]{9}$/ : /^call_[0-9a-f]{24}$/)
        assert.deepEqual([own[0].type, own[0].function], ['function', { name: 'get_weather', arguments: '' }])
        for (const d of own.slice(1)) assert.deepEqual(Object.keys(d).sort(), ['function', 'index'])
        assert.equal(own.map((d) => d.function.arguments).join(''), TWO[index].arguments)
      }
      // The first call's arguments in several fragments, the first before the second call began.
      const first = deltas.findIndex((d) => d.index === 1)
      assert.ok(first > 4, `the second call begins after ${first} deltas`)
      // The client's own accumulation.
      const final = await client.chat.completions.stream(parallel).finalChatCompletion()
      assert.deepEqual(
        final.choices[0].message.tool_calls.map((/** @type {any} */ c) => c.function),
        TWO,
      )
      // parallel_tool_calls false: only the first call, streamed and not.
      const one = await streamed({ ...body, parallel_tool_calls: false })
      assert.deepEqual([...new Set(one.deltas.map((d) => d.index))], [0])
      const oneWhole = (await client.chat.completions.create({ ...body, parallel_tool_calls: false })).choices[0]
      assert.equal(oneWhole.message.tool_calls.length, 1)
      assert.equal(
        one.deltas.map((d) => d.function.arguments).join(''),
        oneWhole.message.tool_calls[0].function.arguments,
      )
    })
  }

  test('cut by max_tokens: the stream has announced the cut call and ends with length; not streamed only whole calls are kept', async () => {
    // The second call's arguments are cut, inside its "Lyon".
    for (const format of /** @type {Array<keyof typeof SAYS>} */ (['hermes', 'generic'])) {
      const tokens = Math.floor((SAYS[format].indexOf('Lyon') + 2) / 3)
      const body = {
        model: format,
        messages: [{ role: 'user', content: 'Weather?' }],
        tools: [WEATHER],
        parallel_tool_calls: true,
        max_tokens: tokens,
      }
      const whole = (await client.chat.completions.create(body)).choices[0]
      assert.equal(whole.finish_reason, 'length')
      assert.equal(whole.message.content, format === 'hermes' ? 'Checking.' : null)
      const { deltas, content, finish } = await streamed(body)
      assert.equal(finish, 'length')
      assert.equal(content.trim(), format === 'hermes' ? 'Checking.' : '')
      const cut = deltas
        .filter((d) => d.index === 1)
        .map((d) => d.function.arguments)
        .join('')
      assert.ok(TWO[1].arguments.startsWith(cut) && cut !== TWO[1].arguments, cut)
      const kept = whole.message.tool_calls?.map((/** @type {any} */ c) => c.function) ?? []
      assert.deepEqual(kept, TWO.slice(0, 1))
    }
  })
})

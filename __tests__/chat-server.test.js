'use strict'
// examples/chat-server.js (torch.serve with one causal-LM folder) over real HTTP on a loopback port, driven by the official `openai` npm
// client, against the tiny random Llama of models/make_lm_models.py (`npm run models`): greedy
// decoding is deterministic, so each answer must equal `lm.complete` run directly; streamed and
// not, chat and plain completions, 400s for malformed requests, 503 QueueFull, and a client that
// aborts mid-stream freeing its sequence.
const { describe, test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const http = require('node:http')
const { setTimeout: sleep } = require('node:timers/promises')
const torch = require('..')
const { start } = require('../examples/chat-server')
const { createHandler } = require('../lib/serve/app')
const { chatModel } = require('../lib/serve/chat')

const MODEL_DIR = path.join(__dirname, '..', 'models', 'golden', 'lm', 'llama-tiny')
const skip = !fs.existsSync(path.join(MODEL_DIR, 'model.pt2')) && `no ${MODEL_DIR}: run \`npm run models\``
const NAME = 'llama-tiny'
const N = 12
const MESSAGES = [
  { role: 'system', content: 'You are terse.' },
  { role: 'user', content: 'Hello there!' },
]

async function clientFor(url) {
  const { default: OpenAI } = await import('openai')
  return new OpenAI({ baseURL: `${url}/v1`, apiKey: 'unused', maxRetries: 0 })
}

/** The error the client raises for a request, with its HTTP status. */
async function rejection(promise) {
  try {
    await promise
  } catch (e) {
    return e
  }
  assert.fail('expected the request to fail')
}

describe('examples/chat-server.js with the openai client', { skip }, () => {
  let service
  let client
  let want
  before(async () => {
    service = await start({ modelDir: MODEL_DIR, name: NAME, port: 0, maxSequences: 2 })
    client = await clientFor(service.url)
    want = await service.lm.complete(MESSAGES, { temperature: 0, maxNewTokens: N })
  })
  after(() => service?.close())

  test('GET /v1/models lists the model', async () => {
    const models = []
    for await (const m of client.models.list()) models.push(m.id)
    assert.deepEqual(models, [NAME])
  })

  test('chat, not streamed: the text of lm.complete, finish_reason length, usage', async () => {
    const res = await client.chat.completions.create({ model: NAME, messages: MESSAGES, max_tokens: N, temperature: 0 })
    assert.equal(res.object, 'chat.completion')
    assert.match(res.id, /^chatcmpl-/)
    assert.equal(res.model, NAME)
    assert.equal(res.choices.length, 1)
    assert.equal(res.choices[0].message.role, 'assistant')
    assert.equal(res.choices[0].message.content, want.text)
    assert.equal(res.choices[0].finish_reason, 'length')
    const { promptTokens, completionTokens } = want.usage
    assert.deepEqual(res.usage, {
      prompt_tokens: promptTokens,
      completion_tokens: completionTokens,
      total_tokens: promptTokens + completionTokens,
    })
    // max_completion_tokens is the newer name; frequency/presence penalty 0 and n 1 are accepted.
    const again = await client.chat.completions.create({
      messages: MESSAGES,
      max_completion_tokens: N,
      temperature: 0,
      n: 1,
      frequency_penalty: 0,
      presence_penalty: 0,
    })
    assert.equal(again.choices[0].message.content, want.text)
  })

  test('chat, streamed: the deltas join into the same text; the last choice has finish_reason; usage', async () => {
    const stream = await client.chat.completions.create({
      model: NAME,
      messages: MESSAGES,
      max_tokens: N,
      temperature: 0,
      stream: true,
      stream_options: { include_usage: true },
    })
    const chunks = []
    for await (const chunk of stream) chunks.push(chunk) // ends at data: [DONE]
    assert.ok(chunks.every((c) => c.object === 'chat.completion.chunk' && c.id === chunks[0].id))
    const choices = chunks.filter((c) => c.choices.length)
    assert.equal(choices[0].choices[0].delta.role, 'assistant')
    assert.equal(choices.map((c) => c.choices[0].delta.content ?? '').join(''), want.text)
    assert.ok(choices.slice(0, -1).every((c) => c.choices[0].finish_reason === null))
    assert.equal(choices.at(-1).choices[0].finish_reason, 'length')
    assert.equal(chunks.at(-1).choices.length, 0)
    assert.equal(chunks.at(-1).usage.completion_tokens, want.usage.completionTokens)
  })

  test('a stop string: the text before it, finish_reason stop', async () => {
    // Two letters from the middle of the greedy text: generation ends at their first occurrence.
    const at = [...want.text.matchAll(/[A-Za-z]{2}/g)].find((m) => m.index > 0)
    if (!at) return
    const res = await client.chat.completions.create({
      messages: MESSAGES,
      max_tokens: N,
      temperature: 0,
      stop: [at[0]],
    })
    assert.equal(res.choices[0].message.content, want.text.slice(0, want.text.indexOf(at[0])))
    assert.equal(res.choices[0].finish_reason, 'stop')
  })

  test('/v1/completions: a prompt string, streamed and not, equals lm.complete', async () => {
    const prompt = 'Once upon a time'
    const direct = await service.lm.complete(prompt, { temperature: 0, maxNewTokens: N })
    const res = await client.completions.create({ model: NAME, prompt, max_tokens: N, temperature: 0 })
    assert.equal(res.object, 'text_completion')
    assert.equal(res.choices[0].text, direct.text)
    assert.equal(res.choices[0].finish_reason, 'length')
    assert.equal(res.usage.prompt_tokens, direct.usage.promptTokens)
    const stream = await client.completions.create({ prompt, max_tokens: N, temperature: 0, stream: true })
    let text = ''
    let last
    for await (const chunk of stream) {
      text += chunk.choices[0].text
      last = chunk.choices[0].finish_reason
    }
    assert.equal(text, direct.text)
    assert.equal(last, 'length')
  })

  test('malformed requests: 400 with a message that says what is wrong', async () => {
    const chat = (body) => rejection(client.chat.completions.create({ messages: MESSAGES, max_tokens: 2, ...body }))
    for (const [body, pattern] of [
      [{ logit_bias: { 1: 5 } }, /unknown key "logit_bias": accepted keys are messages, /],
      [{ messages: [] }, /messages: expected a non-empty array/],
      [
        { messages: [{ role: 'robot', content: 'x' }] },
        /messages\[0\]\.role: expected one of system, developer, user, assistant/,
      ],
      [{ messages: [{ role: 'user', content: 5 }] }, /messages\[0\]\.content: expected a string, got 5/],
      [{ messages: [{ role: 'user' }] }, /messages\[0\]\.content: expected a string/],
      [{ n: 9 }, /n: expected an integer in \[1, 8\], got 9/],
      [{ frequency_penalty: 0.5 }, /frequency_penalty: not supported \(only 0\)/],
      [{ presence_penalty: 1 }, /presence_penalty: not supported/],
      [{ temperature: 3 }, /temperature: expected a number in \[0, 2\], got 3/],
      [{ top_p: 0 }, /top_p: expected a number in \(0, 1\]/],
      [{ max_tokens: 0 }, /max_tokens: expected an integer ≥ 1, got 0/],
      [{ stop: ['a', 'b', 'c', 'd', 'e'] }, /stop: expected a non-empty string or an array of at most 4/],
    ]) {
      const e = await chat(body)
      assert.equal(e.status, 400, `${JSON.stringify(body)}: ${e.message}`)
      assert.match(e.message, pattern)
      assert.equal(e.code, 'InvalidArg')
    }
    const noPrompt = await rejection(client.completions.create({ prompt: ['a', 'b'], max_tokens: 2 }))
    assert.equal(noPrompt.status, 400)
    assert.match(noPrompt.message, /prompt: expected a non-empty string \(one prompt per request\)/)
    const other = await rejection(client.chat.completions.create({ model: 'gpt-4o', messages: MESSAGES }))
    assert.equal(other.status, 404)
    const res = await fetch(`${service.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"messages": [',
    })
    assert.equal(res.status, 400)
    assert.equal((await res.json()).error.code, 'InvalidJSON')
  })
})

describe('chat-server: one sequence, no queue', { skip }, () => {
  let service
  let client
  before(async () => {
    service = await start({ modelDir: MODEL_DIR, name: NAME, port: 0, maxSequences: 1, maxQueue: 0 })
    client = await clientFor(service.url)
  })
  after(() => service?.close())

  test('503 QueueFull while the sequence is busy; a client abort mid-stream frees it at once', async () => {
    const stream = await client.chat.completions.create({
      messages: MESSAGES,
      max_tokens: 200,
      temperature: 0,
      stream: true,
    })
    const it = stream[Symbol.asyncIterator]()
    await it.next() // the role chunk: the sequence is generating
    assert.equal(service.lm.stats().active, 1)
    const busy = await rejection(client.chat.completions.create({ messages: MESSAGES, max_tokens: 2 }))
    assert.equal(busy.status, 503)
    assert.equal(busy.code, 'QueueFull')
    assert.equal(busy.headers.get('retry-after'), '1')

    // Freed by the abort, not by running out its 200 tokens: counted in steps, not in time.
    const stepsAtAbort = service.lm.stats().steps
    stream.controller.abort()
    while (service.lm.stats().active !== 0) await sleep(5)
    const after = service.lm.stats().steps - stepsAtAbort
    assert.ok(after < 100, `the aborted generation ran ${after} more steps`)
    const next = await client.chat.completions.create({ messages: MESSAGES, max_tokens: 4, temperature: 0 })
    assert.equal(next.choices[0].finish_reason, 'length')
    assert.equal(next.usage.completion_tokens, 4)
  })
})

// Tools on a chat template without tools (llama-tiny's, like SmolLM2's): llama.cpp's generic
// format, the tools in the system turn and the answer a JSON object under a grammar. The tiny
// random model writes noise: each call below is one only because the mask made it so.
const WEATHER = {
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'The weather in a city',
    parameters: {
      type: 'object',
      properties: { city: { enum: ['Paris', 'Tokyo'] }, days: { type: 'integer' } },
      required: ['city', 'days'],
      additionalProperties: false,
    },
  },
}
const TIME = { type: 'function', function: { name: 'get_time', parameters: { type: 'object', properties: {} } } }
const ASK = [{ role: 'user', content: 'What is the weather in Paris?' }]

/** The longest run of digits outside JSON strings. */
function longestDigitRun(text) {
  let inString = false
  let escaped = false
  let run = 0
  let longest = 0
  for (const c of text) {
    if (inString) {
      if (escaped) escaped = false
      else if (c === '\\') escaped = true
      else if (c === '"') inString = false
      continue
    }
    run = c === '"' ? 0 : /[0-9]/.test(c) ? run + 1 : 0
    inString = c === '"'
    longest = Math.max(longest, run)
  }
  return longest
}

describe('chat-server: tools on a template without tools (the generic format)', { skip }, () => {
  let service
  let client
  let url
  let server
  const prompts = []
  before(async () => {
    service = await start({ modelDir: MODEL_DIR, name: NAME, port: 0, maxSequences: 2 })
    // The same model served in this process, its prompt recorded and then kept short: the generic
    // format's system turn (~600 tokens of the tiny model's tokenizer) does not fit its 256-token
    // context. Everything after the prompt (the grammar, the engine, the parsing, the client) is real.
    const real = chatModel(NAME, service.lm, torch.text.Tokenizer.fromFile(MODEL_DIR))
    const model = {
      ...real,
      async prompt(messages, tools, plain) {
        prompts.push({ messages, tools, plain, input: await real.prompt(messages, tools, plain) })
        return [{ role: 'user', content: messages.at(-1).content.slice(0, 40) }]
      },
    }
    server = http.createServer(createHandler({ models: [model] }).handle)
    await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
    url = `http://127.0.0.1:${server.address().port}`
    client = await clientFor(url)
  })
  after(async () => {
    server?.closeAllConnections()
    await new Promise((resolve) => (server ? server.close(resolve) : resolve()))
    await service?.close()
  })

  /** The call's arguments, checked against WEATHER's parameters. */
  const weatherArgs = (call) => {
    assert.equal(call.type, 'function')
    assert.equal(call.function.name, 'get_weather')
    const args = JSON.parse(call.function.arguments)
    assert.deepEqual(Object.keys(args), ['city', 'days'])
    assert.ok(['Paris', 'Tokyo'].includes(args.city) && Number.isInteger(args.days), call.function.arguments)
    return args
  }

  test('tool_choice required and a named function: one call, finish_reason tool_calls, no content', async () => {
    for (const toolChoice of ['required', { type: 'function', function: { name: 'get_weather' } }]) {
      const res = await client.chat.completions.create({
        messages: ASK,
        tools: [WEATHER, ...(toolChoice === 'required' ? [] : [TIME])],
        tool_choice: toolChoice,
        max_tokens: 200,
        temperature: 0,
      })
      const { message, finish_reason } = res.choices[0]
      assert.equal(finish_reason, 'tool_calls', JSON.stringify(message))
      assert.equal(message.content, null)
      assert.equal(message.tool_calls.length, 1)
      assert.match(message.tool_calls[0].id, /^call_[0-9a-f]{24}$/)
      weatherArgs(message.tool_calls[0])
    }
  })

  test('streamed: the same call as not streamed, through the client own helper', async () => {
    const body = { messages: ASK, tools: [WEATHER], tool_choice: 'required', max_tokens: 200, temperature: 0 }
    const whole = await client.chat.completions.create(body)
    const final = await client.chat.completions.stream(body).finalChatCompletion()
    assert.equal(final.choices[0].finish_reason, 'tool_calls')
    assert.deepEqual(
      final.choices[0].message.tool_calls.map((c) => c.function),
      whole.choices[0].message.tool_calls.map((c) => c.function),
    )
  })

  test('tool_choice auto: a call, or a text answer as content; streamed the same', async () => {
    for (const seed of [1, 2, 3, 4]) {
      const body = { messages: ASK, tools: [WEATHER], max_tokens: 200, temperature: 1, seed }
      const res = await client.chat.completions.create(body)
      const { message, finish_reason } = res.choices[0]
      if (message.tool_calls) {
        assert.equal(finish_reason, 'tool_calls')
        weatherArgs(message.tool_calls[0])
      } else {
        assert.equal(typeof message.content, 'string')
        // The answer's string, not the JSON around it.
        assert.ok(!message.content.startsWith('{"response"'), message.content)
      }
      const final = await client.chat.completions.stream(body).finalChatCompletion()
      assert.equal(final.choices[0].message.content ?? null, message.content ?? null)
      assert.deepEqual(
        final.choices[0].message.tool_calls?.map((c) => c.function) ?? [],
        message.tool_calls?.map((c) => c.function) ?? [],
      )
    }
  })

  // A streamed call is announced as soon as its name is known (as vLLM streams one), so a call cut
  // by max_tokens has gone out in part: the stream ends with finish_reason length and the
  // arguments so far; not streamed, the cut call is dropped.
  test('cut by max_tokens: never content; finish_reason stays length; not streamed, the cut call is dropped', async () => {
    for (const stream of [false, true]) {
      for (const parallel of [undefined, true]) {
        const body = {
          messages: ASK,
          tools: [WEATHER],
          tool_choice: 'required',
          max_tokens: 12,
          temperature: 0,
          ...(parallel && { parallel_tool_calls: true }),
        }
        const res = stream
          ? await client.chat.completions.stream(body).finalChatCompletion()
          : await client.chat.completions.create(body)
        const { message, finish_reason } = res.choices[0]
        assert.equal(finish_reason, 'length')
        assert.ok(!message.content, `content ${JSON.stringify(message.content)}`)
        const calls = message.tool_calls ?? []
        if (stream && calls.length) {
          const cut = calls.pop()
          assert.equal(cut.function.name, 'get_weather')
          assert.ok(cut.function.arguments.startsWith('{'), cut.function.arguments)
        }
        for (const call of calls) weatherArgs(call)
      }
    }
  })

  test("the prompt: the tools and the answer's shape in the system turn; earlier calls as the JSON written", async () => {
    const system = { role: 'system', content: 'Be brief.' }
    await client.chat.completions.create({ messages: [system, ...ASK], tools: [WEATHER], max_tokens: 2 })
    const { messages, tools, plain, input } = prompts.at(-1)
    assert.deepEqual([tools, plain], [null, true]) // plain turns, rendered by the model's own template
    assert.equal(input, messages)
    assert.equal(messages.length, 2)
    assert.equal(messages[0].role, 'system')
    assert.ok(messages[0].content.startsWith('Be brief.\n\nRespond in JSON format, either with `tool_call`'))
    assert.ok(messages[0].content.includes(JSON.stringify([WEATHER], null, 2)))
    assert.deepEqual(messages[1], ASK[0])
    const call = {
      id: 'call_1',
      type: 'function',
      function: { name: 'get_weather', arguments: '{"city":"Paris","days":1}' },
    }
    const turn = [
      ...ASK,
      { role: 'assistant', content: null, tool_calls: [call] },
      { role: 'tool', tool_call_id: 'call_1', content: 'sunny' },
    ]
    await client.chat.completions.create({ messages: turn, tools: [WEATHER], tool_choice: 'required', max_tokens: 2 })
    const forced = prompts.at(-1).messages
    assert.ok(forced[0].content.startsWith('Respond in JSON format with `tool_call` (a request to call tools)'))
    assert.deepEqual(forced[2], {
      role: 'assistant',
      content: '{"tool_call": {"name": "get_weather", "arguments": {"city": "Paris", "days": 1}}}',
    })
    assert.deepEqual(JSON.parse(forced[3].content), {
      tool_response: { tool: 'get_weather', content: 'sunny', tool_call_id: 'call_1' },
    })
    // Without tools, the earlier turns still render as the generic format writes them.
    await client.chat.completions.create({ messages: turn, max_tokens: 2 })
    assert.equal(prompts.at(-1).messages.length, 3)
    assert.equal(prompts.at(-1).messages[1].content, forced[2].content)
  })

  test('parallel_tool_calls true: a list of calls; response_format with tools is refused', async () => {
    const res = await client.chat.completions.create({
      messages: ASK,
      tools: [WEATHER],
      tool_choice: 'required',
      parallel_tool_calls: true,
      max_tokens: 200,
      temperature: 0,
    })
    const calls = res.choices[0].message.tool_calls ?? []
    assert.ok(calls.length >= 1 || res.choices[0].finish_reason === 'length')
    calls.forEach(weatherArgs)
    assert.ok(prompts.at(-1).messages[0].content.includes('{"tool_calls": [{"name": "tool_name"'))
    // response_format with tools on this template: refused, naming why.
    const e = await rejection(
      client.chat.completions.create({ messages: ASK, tools: [WEATHER], response_format: { type: 'json_object' } }),
    )
    assert.equal(e.status, 400)
    assert.match(
      e.message,
      /response_format: not with tools on model "llama-tiny", whose chat template has no tool format/,
    )
  })

  test('the AI SDK: generateText with a required tool runs it', async () => {
    const { generateText, tool, jsonSchema } = await import('ai')
    const { createOpenAICompatible } = await import('@ai-sdk/openai-compatible')
    const provider = createOpenAICompatible({ name: 'torch-node', baseURL: `${url}/v1` })
    const seen = []
    const result = await generateText({
      model: provider(NAME),
      prompt: 'What is the weather in Paris?',
      tools: {
        get_weather: tool({
          description: WEATHER.function.description,
          inputSchema: jsonSchema(WEATHER.function.parameters),
          execute: async (input) => {
            seen.push(input)
            return 'sunny'
          },
        }),
      },
      toolChoice: 'required',
      maxOutputTokens: 200,
      temperature: 0,
    })
    assert.equal(result.steps[0].finishReason, 'tool-calls')
    assert.equal(seen.length, 1)
    assert.ok(['Paris', 'Tokyo'].includes(seen[0].city))
  })

  test('streamed calls: the arguments come in fragments as generated, joining into the whole call', async () => {
    const body = { messages: ASK, tools: [WEATHER], tool_choice: 'required', max_tokens: 200, temperature: 0 }
    const whole = (await client.chat.completions.create(body)).choices[0].message.tool_calls
    // The chunks as the openai client reads them: OpenAI's delta shape.
    const deltas = []
    let finish = null
    for await (const chunk of await client.chat.completions.create({ ...body, stream: true })) {
      const choice = chunk.choices[0]
      for (const d of choice?.delta.tool_calls ?? []) deltas.push(d)
      finish = choice?.finish_reason ?? finish
    }
    assert.equal(finish, 'tool_calls')
    assert.deepEqual(Object.keys(deltas[0]).sort(), ['function', 'id', 'index', 'type'])
    assert.deepEqual(deltas[0].function, { name: 'get_weather', arguments: '' })
    assert.ok(deltas.length > 3, `${deltas.length} deltas`)
    for (const d of deltas.slice(1)) assert.deepEqual(Object.keys(d).sort(), ['function', 'index'])
    assert.equal(deltas.map((d) => d.function.arguments).join(''), whole[0].function.arguments)
    // The client's helpers: argument deltas, the final completion, and runTools running the call.
    const stream = client.chat.completions.stream(body)
    const fragments = []
    stream.on('tool_calls.function.arguments.delta', (e) => fragments.push(e.arguments_delta))
    const final = await stream.finalChatCompletion()
    assert.ok(fragments.length > 2)
    assert.equal(fragments.join(''), whole[0].function.arguments)
    assert.deepEqual(final.choices[0].message.tool_calls[0].function, whole[0].function)
    const ran = []
    const runner = client.chat.completions.runTools(
      {
        ...body,
        stream: true,
        tools: [
          {
            type: 'function',
            function: { ...WEATHER.function, function: (args) => (ran.push(args), 'sunny'), parse: JSON.parse },
          },
        ],
      },
      { maxChatCompletions: 2 },
    )
    // The tiny model's later turns are not the point: the first turn's call is run.
    await runner.done().catch((e) => assert.ok(ran.length, e.message))
    assert.deepEqual(ran[0], JSON.parse(whole[0].function.arguments))
  })

  test('the AI SDK: streamText with a tool gets tool-input-delta parts', async () => {
    const { streamText, tool, jsonSchema } = await import('ai')
    const { createOpenAICompatible } = await import('@ai-sdk/openai-compatible')
    const provider = createOpenAICompatible({ name: 'torch-node', baseURL: `${url}/v1` })
    const body = { messages: ASK, tools: [WEATHER], tool_choice: 'required', max_tokens: 200, temperature: 0 }
    const whole = (await client.chat.completions.create(body)).choices[0].message.tool_calls[0].function
    const result = streamText({
      model: provider(NAME),
      messages: ASK,
      tools: {
        get_weather: tool({
          description: WEATHER.function.description,
          inputSchema: jsonSchema(WEATHER.function.parameters),
        }),
      },
      toolChoice: 'required',
      maxOutputTokens: 200,
      temperature: 0,
    })
    const parts = []
    for await (const part of result.fullStream) parts.push(part)
    const deltas = parts.filter((p) => p.type === 'tool-input-delta')
    assert.ok(deltas.length > 2, `${deltas.length} tool-input-delta parts`)
    assert.equal(deltas.map((p) => p.delta).join(''), whole.arguments)
    const call = parts.find((p) => p.type === 'tool-call')
    assert.equal(call.toolName, 'get_weather')
    assert.deepEqual(call.input, JSON.parse(whole.arguments))
  })

  test('JSON-schema numbers: at most 16 digits in a row (the service as it is)', async () => {
    const direct = await clientFor(service.url)
    const schema = {
      type: 'object',
      properties: {
        celsius: { type: 'number' },
        age: { type: 'integer' },
        readings: { type: 'array', items: { type: 'number' }, maxItems: 4 },
      },
      required: ['celsius', 'age', 'readings'],
      additionalProperties: false,
    }
    for (const seed of [1, 2, 3]) {
      const res = await direct.chat.completions.create({
        messages: [{ role: 'user', content: 'The temperature and your age?' }],
        response_format: { type: 'json_schema', json_schema: { name: 'reading', schema, strict: true } },
        max_tokens: 200,
        temperature: 1,
        seed,
      })
      const text = res.choices[0].message.content
      assert.ok(longestDigitRun(text) <= 16, text)
      if (res.choices[0].finish_reason === 'stop') {
        const value = JSON.parse(text)
        assert.ok(Number.isInteger(value.age) && typeof value.celsius === 'number', text)
      }
    }
  })
})

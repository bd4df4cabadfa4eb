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
const { setTimeout: sleep } = require('node:timers/promises')
const { start } = require('../examples/chat-server')

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
      [{ n: 2 }, /n: only 1 is supported, got 2/],
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

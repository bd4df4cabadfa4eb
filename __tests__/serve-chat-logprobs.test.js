'use strict'
// Chat Completions' `logprobs`/`top_logprobs` and `n`, through torch.serve and the `openai` client,
// and CausalLM's `logprobs`/`topLogprobs` under them, on the tiny random Llama of
// models/make_lm_models.py (`npm run models`). The numbers themselves are checked against the
// log-softmax of the program's logits in crates/core/src/generate/lm.rs's tests; here: the shapes,
// that the route reports what `lm.complete` reports, that they are the raw logits' (a penalty
// changes the choice, not the first step's numbers), and 400s for values out of range.
const { describe, test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { start } = require('../examples/chat-server')

const MODEL_DIR = path.join(__dirname, '..', 'models', 'golden', 'lm', 'llama-tiny')
const skip = !fs.existsSync(path.join(MODEL_DIR, 'model.pt2')) && `no ${MODEL_DIR}: run \`npm run models\``
const NAME = 'llama-tiny'
const N = 8
const MESSAGES = [{ role: 'user', content: 'Hello there!' }]

/** The error the client raises for a request, with its HTTP status. */
async function rejection(promise) {
  try {
    await promise
  } catch (e) {
    return e
  }
  assert.fail('expected the request to fail')
}

/** OpenAI's entries for CausalLM's. */
const asOpenAI = (logprobs) =>
  logprobs.map((e) => ({
    token: e.text,
    logprob: e.logprob,
    bytes: e.bytes,
    top_logprobs: e.top.map((a) => ({ token: a.text, logprob: a.logprob, bytes: a.bytes })),
  }))

describe('logprobs and n', { skip }, () => {
  let service
  let client
  before(async () => {
    // Without serve's default prefix cache: a prompt restored from it runs its last token alone,
    // whose logits round apart (~4e-6) from a whole prefill's, and these checks are exact.
    service = await start({ modelDir: MODEL_DIR, name: NAME, port: 0, maxSequences: 4, prefixCache: { maxTokens: 0 } })
    const { default: OpenAI } = await import('openai')
    client = new OpenAI({ baseURL: `${service.url}/v1`, apiKey: 'unused', maxRetries: 0 })
  })
  after(() => service?.close())

  test('lm.complete: one entry per token, the greedy choice the likeliest, the raw logits before a penalty', async () => {
    const lm = service.lm
    const r = await lm.complete(MESSAGES, { temperature: 0, maxNewTokens: N, logprobs: true, topLogprobs: 5 })
    assert.equal(r.logprobs.length, r.tokens.length)
    for (const [i, e] of r.logprobs.entries()) {
      assert.equal(e.token, r.tokens[i])
      assert.equal(e.top.length, 5)
      assert.equal(e.top[0].token, e.token, 'greedy: the likeliest token')
      assert.equal(e.top[0].logprob, e.logprob)
      assert.equal(e.text, Buffer.from(e.bytes).toString('utf8'))
      for (let k = 1; k < 5; k++) assert.ok(e.top[k].logprob <= e.top[k - 1].logprob)
      const mass = e.top.reduce((s, a) => s + Math.exp(a.logprob), 0)
      assert.ok(e.logprob <= 0 && mass <= 1 + 1e-6, `${mass}`)
    }
    // A penalty changes what is chosen, not what is reported: the first step's numbers are the same.
    const penalized = await lm.complete(MESSAGES, {
      temperature: 0,
      maxNewTokens: 2,
      repetitionPenalty: 3,
      logprobs: true,
      topLogprobs: 5,
    })
    assert.deepEqual(penalized.logprobs[0].top, r.logprobs[0].top)
    const plain = await lm.complete(MESSAGES, { temperature: 0, maxNewTokens: 2 })
    assert.equal(plain.logprobs, undefined)
    const zero = await lm.complete(MESSAGES, { temperature: 0, maxNewTokens: 2, logprobs: true })
    assert.deepEqual(zero.logprobs[0].top, [])
    assert.throws(() => lm.generate('x', { logprobs: true, topLogprobs: 21 }), {
      code: 'InvalidArg',
      message: /options\.topLogprobs: expected a whole number in \[0, 20\], got 21/,
    })
    assert.throws(() => lm.generate('x', { topLogprobs: 2 }), {
      code: 'InvalidArg',
      message: /options\.topLogprobs: only with logprobs: true/,
    })
  })

  test('chat: choices[].logprobs.content as lm.complete reports, streamed or not', async () => {
    const want = await service.lm.complete(MESSAGES, {
      temperature: 0,
      maxNewTokens: N,
      logprobs: true,
      topLogprobs: 3,
    })
    const body = { model: NAME, messages: MESSAGES, max_tokens: N, temperature: 0, logprobs: true, top_logprobs: 3 }
    const res = await client.chat.completions.create(body)
    const [choice] = res.choices
    assert.equal(choice.message.content, want.text)
    assert.deepEqual(choice.logprobs, { content: asOpenAI(want.logprobs), refusal: null })
    assert.equal(choice.logprobs.content.length, res.usage.completion_tokens)
    const content = []
    let text = ''
    for await (const chunk of await client.chat.completions.create({ ...body, stream: true })) {
      const c = chunk.choices[0]
      text += c.delta.content ?? ''
      if (c.logprobs) content.push(...c.logprobs.content)
    }
    assert.equal(text, want.text)
    assert.deepEqual(content, asOpenAI(want.logprobs))
    const without = await client.chat.completions.create({ ...body, logprobs: undefined, top_logprobs: undefined })
    assert.equal(without.choices[0].logprobs, null)
  })

  test('n: that many choices with their index, choice 0 as n: 1; streamed chunks carry their index', async () => {
    const body = { model: NAME, messages: MESSAGES, max_tokens: N, temperature: 1, seed: 5 }
    const one = await client.chat.completions.create(body)
    const three = await client.chat.completions.create({ ...body, n: 3, logprobs: true })
    assert.deepEqual(
      three.choices.map((c) => c.index),
      [0, 1, 2],
    )
    assert.equal(three.choices[0].message.content, one.choices[0].message.content)
    assert.notEqual(three.choices[1].message.content, three.choices[0].message.content, 'seeded apart')
    const tokens = three.choices.reduce((s, c) => s + c.logprobs.content.length, 0)
    assert.equal(three.usage.completion_tokens, tokens)
    assert.equal(three.usage.prompt_tokens, one.usage.prompt_tokens)
    const texts = ['', '', '']
    const finishes = []
    for await (const chunk of await client.chat.completions.create({ ...body, n: 3, stream: true })) {
      for (const c of chunk.choices) {
        texts[c.index] += c.delta.content ?? ''
        if (c.finish_reason) finishes.push(c.index)
      }
    }
    assert.deepEqual(
      texts,
      three.choices.map((c) => c.message.content),
    )
    assert.deepEqual(finishes.sort(), [0, 1, 2])
    const completions = await client.completions.create({ model: NAME, prompt: 'Once', max_tokens: 4, n: 2 })
    assert.deepEqual(
      completions.choices.map((c) => c.index),
      [0, 1],
    )
  })

  test('n: a client that hangs up mid-stream frees the slots of all its choices', async () => {
    const controller = new AbortController()
    const body = { model: NAME, messages: MESSAGES, max_tokens: 200, temperature: 1, n: 3, stream: true }
    const stream = await client.chat.completions.create(body, { signal: controller.signal })
    let chunks = 0
    try {
      for await (const chunk of stream) {
        assert.ok(chunk.choices.every((c) => c.index >= 0 && c.index < 3))
        if (++chunks === 6) controller.abort()
      }
    } catch (e) {
      assert.equal(e.name, 'APIUserAbortError')
    }
    const deadline = Date.now() + 3000
    while (service.lm.stats().active > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20))
    assert.deepEqual([service.lm.stats().active, service.lm.stats().queued], [0, 0])
  })

  test('out of range: 400 naming the field', async () => {
    const chat = (b) =>
      rejection(client.chat.completions.create({ model: NAME, messages: MESSAGES, max_tokens: 2, ...b }))
    for (const [b, pattern] of [
      [{ logprobs: true, top_logprobs: 21 }, /top_logprobs: expected an integer in \[0, 20\], got 21/],
      [{ logprobs: true, top_logprobs: -1 }, /top_logprobs: expected an integer in \[0, 20\], got -1/],
      [{ top_logprobs: 2 }, /top_logprobs: only with logprobs: true/],
      [{ logprobs: 'yes' }, /logprobs: expected a boolean/],
      [{ n: 0 }, /n: expected an integer in \[1, 8\], got 0/],
      [{ n: 9 }, /n: expected an integer in \[1, 8\], got 9/],
      [{ n: 1.5 }, /n: expected an integer in \[1, 8\], got 1\.5/],
    ]) {
      const e = await chat(b)
      assert.equal(e.status, 400, `${JSON.stringify(b)}: ${e.message}`)
      assert.match(e.message, pattern)
    }
  })
})

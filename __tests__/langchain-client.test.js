'use strict'
// LangChain's OpenAI chat model (@langchain/openai, from npm, unchanged) pointed at torch.serve
// over real HTTP, as docs/serving.md tells a user to: the tiny random Llama of
// models/make_lm_models.py answers greedily, so every answer must equal `lm.complete` run directly,
// through Chat Completions and through the Responses API (`useResponsesApi`), streamed and not,
// and `withStructuredOutput` (a JSON schema, constrained by the server) parses.
const { describe, test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { start } = require('../examples/chat-server')

const MODEL_DIR = path.join(__dirname, '..', 'models', 'golden', 'lm', 'llama-tiny')
const skip = !fs.existsSync(path.join(MODEL_DIR, 'model.pt2')) && `no ${MODEL_DIR}: run \`npm run models\``
const NAME = 'llama-tiny'
const N = 12
const MESSAGES = [
  { role: 'system', content: 'You are terse.' },
  { role: 'user', content: 'Hello there!' },
]

describe('@langchain/openai ChatOpenAI against torch.serve', { skip }, () => {
  let service
  let want
  /** @param {object} [extra] ChatOpenAI fields beyond the served model's. */
  let chat
  before(async () => {
    service = await start({ modelDir: MODEL_DIR, name: NAME, port: 0, maxSequences: 2 })
    want = await service.lm.complete(MESSAGES, { temperature: 0, maxNewTokens: N })
    const { ChatOpenAI } = await import('@langchain/openai')
    chat = (extra = {}) =>
      new ChatOpenAI({
        model: NAME,
        apiKey: 'unused',
        configuration: { baseURL: `${service.url}/v1` },
        temperature: 0,
        maxTokens: N,
        maxRetries: 0,
        ...extra,
      })
  })
  after(() => service?.close())

  const asLangChain = () => MESSAGES.map((m) => [m.role === 'user' ? 'human' : m.role, m.content])

  for (const [api, extra] of [
    ['Chat Completions', {}],
    ['the Responses API', { useResponsesApi: true }],
  ]) {
    test(`invoke through ${api}: the text of lm.complete, with usage`, async () => {
      const message = await chat(extra).invoke(asLangChain())
      assert.equal(message.text, want.text)
      assert.equal(message.usage_metadata.output_tokens, want.tokens.length)
      assert.ok(message.usage_metadata.input_tokens > 0)
    })

    test(`stream through ${api}: the chunks join into the same text`, async () => {
      let text = ''
      let chunks = 0
      for await (const chunk of await chat(extra).stream(asLangChain())) {
        text += chunk.text
        chunks++
      }
      assert.equal(text, want.text)
      assert.ok(chunks > 1, `${chunks} chunk(s)`)
    })
  }

  test('withStructuredOutput (a JSON schema): the answer parses and keeps to the schema', async () => {
    const schema = {
      title: 'verdict',
      type: 'object',
      properties: { answer: { type: 'string', enum: ['yes', 'no'] }, sure: { type: 'boolean' } },
      required: ['answer', 'sure'],
      additionalProperties: false,
    }
    const model = chat({ maxTokens: 40 }).withStructuredOutput(schema, { method: 'jsonSchema', strict: true })
    const out = await model.invoke([['human', 'Is the sky blue? Answer in JSON.']])
    assert.deepEqual(Object.keys(out).sort(), ['answer', 'sure'])
    assert.ok(['yes', 'no'].includes(out.answer), JSON.stringify(out))
    assert.equal(typeof out.sure, 'boolean')
  })

  test('a model the server lacks: the client gets the 404 as an error, and the server keeps serving', async () => {
    await assert.rejects(chat({ model: 'nope' }).invoke([['human', 'hi']]), (e) => {
      assert.match(String(e.message), /nope/)
      return true
    })
    const message = await chat().invoke(asLangChain())
    assert.equal(message.text, want.text)
  })
})

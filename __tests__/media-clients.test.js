'use strict'
// The media routes of torch-node serve the way users reach them, with the real clients from npm:
// the AI SDK's experimental_transcribe (@ai-sdk/openai) on /v1/audio/transcriptions over the
// Whisper fixture, and images in the chat over the tiny LLaVA (models/make_vlm_models.py) through
// the AI SDK (@ai-sdk/openai-compatible, @ai-sdk/openai's chat and Responses models) and
// LangChain's ChatOpenAI: each gets transformers' greedy text (the goldens), as the openai client
// does in vlm-server.test.js and speech-server.test.js.
const { describe, test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const torch = require('..')

const ROOT = path.join(__dirname, '..', 'models', 'golden')
const WHISPER = path.join(ROOT, 'whisper')
const WHISPER_GOLDENS = path.join(WHISPER, 'goldens.json')
const NO_WHISPER = !fs.existsSync(WHISPER_GOLDENS) && 'no Whisper model: run `node tools/models.js --lazy`'
const VLM_GOLDEN = path.join(ROOT, 'vlm', 'llava-tiny.golden.json')
const NO_VLM = !fs.existsSync(VLM_GOLDEN) && 'no LLaVA fixture: run `npm run models -- --lazy` (job vlm)'
const TIMEOUT = { timeout: 120_000 }

describe('the AI SDK on /v1/audio/transcriptions', { skip: NO_WHISPER }, () => {
  const goldens = NO_WHISPER ? null : JSON.parse(fs.readFileSync(WHISPER_GOLDENS, 'utf8'))
  const wav = () => fs.readFileSync(path.join(WHISPER, 'speech.wav'))
  let served, whisper, ai

  before(async () => {
    served = await torch.serve({
      models: { whisper: { folder: path.join(WHISPER, 'model'), maxNewTokens: goldens.maxNewTokens } },
      port: 0,
      host: '127.0.0.1',
    })
    const { createOpenAI } = await import('@ai-sdk/openai')
    ai = await import('ai')
    whisper = createOpenAI({ baseURL: `${served.url}/v1`, apiKey: 'unused' }).transcription('whisper')
  })
  after(async () => {
    await served?.close()
  })

  test('without provider options: model and file, json back', TIMEOUT, async () => {
    const detected = goldens.cases.find((c) => c.language === null && c.task === 'transcribe')
    const got = await ai.experimental_transcribe({ model: whisper, audio: wav(), maxRetries: 0 })
    assert.equal(got.text, detected.text)
    // json carries no language: the AI SDK reports none.
    assert.equal(got.language, undefined)
  })

  test('with provider options: verbose_json, its language the name OpenAI gives', TIMEOUT, async () => {
    const en = goldens.cases.find((c) => c.language === 'en' && c.task === 'transcribe')
    // With provider options the AI SDK asks verbose_json, and timestamp_granularities[]=segment unless
    // given `timestampGranularities: []` (as here; its default, segments with every field OpenAI
    // gives, is speech-ai-sdk.test.js's).
    const got = await ai.experimental_transcribe({
      model: whisper,
      audio: wav(),
      maxRetries: 0,
      providerOptions: { openai: { language: 'en', timestampGranularities: [] } },
    })
    assert.equal(got.text, en.text)
    assert.equal(got.language, 'en')
    assert.equal(got.responses[0].body.language, 'english')
  })

  test("verbose_json's names: each of the folder's languages, as transformers names it", () => {
    const { LANGUAGE_NAMES } = require('../lib/serve/audio')
    const manifest = JSON.parse(fs.readFileSync(path.join(WHISPER, 'model', 'manifest.json'), 'utf8'))
    const codes = Object.keys(manifest.tokens.langToId).map((t) => t.slice(2, -2))
    assert.equal(codes.length, 100)
    for (const code of codes) assert.equal(manifest.languageNames[LANGUAGE_NAMES.get(code)], code, code)
    assert.equal(LANGUAGE_NAMES.size, codes.length)
  })
})

describe('images in the chat through the AI SDK and LangChain', { skip: NO_VLM }, () => {
  const golden = NO_VLM ? null : JSON.parse(fs.readFileSync(VLM_GOLDEN, 'utf8'))
  const cases = NO_VLM ? [] : golden.cases.filter((c) => c.images.length)
  const png = (file) => fs.readFileSync(path.join(__dirname, '..', 'models', 'images', file))
  let served, baseURL, ai

  /** A golden case's message as the AI SDK's parts: `{type: 'image', image: Buffer}`. */
  const aiMessages = (c) => {
    let next = 0
    return c.messages.map((m) => ({
      role: m.role,
      content: m.content.map((p) => (p.type === 'image' ? { type: 'image', image: png(c.images[next++]) } : p)),
    }))
  }
  /** The AI SDK's generateText on `model`, greedy, the goldens' length. */
  const generate = (model, c) =>
    ai.generateText({
      model,
      messages: aiMessages(c),
      temperature: 0,
      maxOutputTokens: golden.new_tokens,
      maxRetries: 0,
    })

  before(async () => {
    served = await torch.serve({
      models: { llava: path.join(ROOT, 'vlm', 'llava-tiny') },
      port: 0,
      host: '127.0.0.1',
    })
    baseURL = `${served.url}/v1`
    ai = await import('ai')
  })
  after(async () => {
    await served?.close()
  })

  test('@ai-sdk/openai-compatible: image parts as image_url data URLs', TIMEOUT, async () => {
    const { createOpenAICompatible } = await import('@ai-sdk/openai-compatible')
    const model = createOpenAICompatible({ baseURL, name: 'torch-node' }).chatModel('llava')
    for (const c of cases) assert.equal((await generate(model, c)).text, c.text_out, c.name)
  })

  test("@ai-sdk/openai's chat model", TIMEOUT, async () => {
    const { createOpenAI } = await import('@ai-sdk/openai')
    const model = createOpenAI({ baseURL, apiKey: 'unused' }).chat('llava')
    for (const c of cases) assert.equal((await generate(model, c)).text, c.text_out, c.name)
  })

  test("@ai-sdk/openai's Responses model: input_image parts on /v1/responses", TIMEOUT, async () => {
    const { createOpenAI } = await import('@ai-sdk/openai')
    const model = createOpenAI({ baseURL, apiKey: 'unused' })('llava')
    for (const c of cases) assert.equal((await generate(model, c)).text, c.text_out, c.name)
    // Streamed: the same text in Responses' events.
    const c = cases[0]
    const stream = ai.streamText({
      model,
      messages: aiMessages(c),
      temperature: 0,
      maxOutputTokens: golden.new_tokens,
      maxRetries: 0,
    })
    assert.equal(await stream.text, c.text_out)
  })

  test('images not served on /v1/responses and /v1/chat/completions: 400 naming the part', TIMEOUT, async () => {
    const c = cases[0]
    const url = `data:image/png;base64,${png(c.images[0]).toString('base64')}`
    const post = async (route, body) => {
      const res = await fetch(`${baseURL}/${route}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'llava', max_output_tokens: 2, ...body }),
      })
      return { status: res.status, body: await res.json() }
    }
    const input = (part) => ({ input: [{ role: 'user', content: [part, { type: 'input_text', text: 'hi' }] }] })
    const refusals = [
      [
        input({ type: 'input_image', image_url: 'https://example.com/cat.png' }),
        /input\[0\]\.content\[0\]: this server fetches no image URL \(start it with --fetch-images/,
      ],
      [
        input({ type: 'input_image', file_id: 'file-abc' }),
        /input\[0\]\.content\[0\]\.image_url: .*file_id is not served/,
      ],
      [input({ type: 'input_image', image_url: url, detail: 'low' }), /input\[0\]\.content\[0\]\.detail: only "auto"/],
      [
        input({ type: 'input_file', file_data: url }),
        /input\[0\]\.content\[0\]\.type: expected input_text.*got "input_file"/,
      ],
      [
        { input: [{ role: 'user', content: [{ type: 'input_image', image_url: url }, { type: 'input_file' }] }] },
        /input\[0\]\.content\[1\]\.type: expected input_text or input_image, got "input_file"/,
      ],
      [
        { input: [{ role: 'system', content: [{ type: 'input_image', image_url: url }] }, 'hi'] },
        /input\[0\]\.content\[0\]\.type: expected input_text/,
      ],
    ]
    for (const [body, message] of refusals) {
      const got = await post('responses', body)
      assert.equal(got.status, 400, JSON.stringify(got.body))
      assert.equal(got.body.error.code, 'InvalidArg')
      assert.match(got.body.error.message, message)
    }
    const low = await post('chat/completions', {
      max_output_tokens: undefined,
      max_tokens: 2,
      messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url, detail: 'low' } }] }],
    })
    assert.equal(low.status, 400)
    assert.match(low.body.error.message, /messages\[0\]\.content\[0\]\.image_url\.detail: only "auto"/)
    // detail "auto" is what is done; the server goes on serving.
    const auto = await post('responses', input({ type: 'input_image', image_url: url, detail: 'auto' }))
    assert.equal(auto.status, 200, JSON.stringify(auto.body))
    assert.equal(auto.body.output[0].content[0].type, 'output_text')
    // The next turn replays the stored conversation, its image included.
    const next = await post('responses', { previous_response_id: auto.body.id, input: 'and?' })
    assert.equal(next.status, 200, JSON.stringify(next.body))
    assert.ok(next.body.usage.input_tokens > auto.body.usage.input_tokens + auto.body.usage.output_tokens)
  })

  test("LangChain's ChatOpenAI: image_url parts in a HumanMessage", TIMEOUT, async () => {
    const { ChatOpenAI } = await import('@langchain/openai')
    const { HumanMessage } = await import('@langchain/core/messages')
    const chat = new ChatOpenAI({
      model: 'llava',
      apiKey: 'unused',
      configuration: { baseURL },
      temperature: 0,
      maxTokens: golden.new_tokens,
      maxRetries: 0,
    })
    for (const c of cases) {
      let next = 0
      const content = c.messages[0].content.map((p) =>
        p.type === 'image'
          ? {
              type: 'image_url',
              image_url: { url: `data:image/png;base64,${png(c.images[next++]).toString('base64')}` },
            }
          : p,
      )
      const got = await chat.invoke([new HumanMessage({ content })])
      assert.equal(got.content, c.text_out, c.name)
    }
  })
})

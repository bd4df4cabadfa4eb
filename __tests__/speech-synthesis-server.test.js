'use strict'
// POST /v1/audio/speech over a VITS folder (issue 51's speech half), through the `openai` client
// from npm and plain fetch: with a seed, the WAV's and the raw PCM's samples equal
// encodeWav(TextToSpeechPipeline.run(input, {seed, speakingRate: speed})), whose waveform equals
// transformers' VitsModel (text-to-speech.test.js); what is not built (mp3, instructions, SSE) and
// broken bodies are 4xx with codes, and the server keeps serving after each. Served by torch.serve,
// what `npx torch-node serve --model tts=FOLDER` runs.
const { describe, test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const torch = require('..')
const { TextToSpeechPipeline, encodeWav } = require('../lib/audio/text-to-speech')

const FOLDER = path.join(__dirname, '..', 'models', 'golden', 'tts', 'vits')
const SKIP = fs.existsSync(path.join(FOLDER, 'manifest.json'))
  ? false
  : 'no VITS fixture: run `node tools/models.js --lazy` (job tts)'
const TIMEOUT = { timeout: 120_000 }

describe('/v1/audio/speech with a VITS model', { skip: SKIP }, () => {
  let served, url, client, tts

  before(async () => {
    served = await torch.serve({ models: { tts: FOLDER } })
    url = `${served.url}/v1`
    const { default: OpenAI } = await import('openai')
    client = new OpenAI({ baseURL: url, apiKey: 'unused', maxRetries: 0 })
    tts = await TextToSpeechPipeline.load(FOLDER)
  })
  after(async () => {
    tts?.dispose()
    await served?.close()
  })

  const post = (body) =>
    fetch(`${url}/audio/speech`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: typeof body === 'string' ? body : JSON.stringify(body),
    })
  const good = { model: 'tts', input: 'hello there', voice: 'alloy', seed: 11 }

  test("the openai client's speech.create: a WAV whose samples are the pipeline's", TIMEOUT, async () => {
    const input = 'Hello, World!'
    // `seed` (torch-node's key) goes in the body as the client sends any other.
    const res = await client.audio.speech.create({
      model: 'tts',
      voice: 'alloy',
      input,
      response_format: 'wav',
      speed: 1.25,
      seed: 5,
    })
    const bytes = Buffer.from(await res.arrayBuffer())
    assert.equal(res.headers.get('content-type'), 'audio/wav')
    assert.equal(res.headers.get('x-torch-node-sampling-rate'), '16000')
    assert.equal(res.headers.get('x-torch-node-voice'), 'default')
    const want = await tts.run(input, { seed: 5, speakingRate: 1.25 })
    assert.deepEqual(bytes, encodeWav(want.audio, want.samplingRate))
    assert.ok(want.audio.length > 0)
  })

  test('pcm: the same samples without the header; no seed still speaks', TIMEOUT, async () => {
    const res = await post({ ...good, response_format: 'pcm' })
    assert.equal(res.status, 200)
    assert.equal(res.headers.get('content-type'), 'audio/pcm')
    const bytes = Buffer.from(await res.arrayBuffer())
    const want = await tts.run(good.input, { seed: 11 })
    assert.deepEqual(bytes, encodeWav(want.audio, 16000).subarray(44))
    const any = await post({ ...good, seed: undefined })
    assert.equal(any.status, 200)
    assert.equal(any.headers.get('content-type'), 'audio/wav')
    assert.ok((await any.arrayBuffer()).byteLength > 44)
  })

  test('what is not built and broken bodies are 4xx; the server keeps serving', TIMEOUT, async () => {
    const cases = [
      [{ ...good, response_format: 'mp3' }, 400, /mp3 is not encoded here/],
      [{ ...good, response_format: 'ogg' }, 400, /response_format/],
      [{ ...good, instructions: 'cheerful' }, 400, /instructions/],
      [{ ...good, stream_format: 'sse' }, 400, /stream_format/],
      [{ ...good, speed: 5 }, 400, /speed/],
      [{ ...good, speed: 'fast' }, 400, /speed/],
      [{ ...good, seed: -1 }, 400, /seed/],
      [{ ...good, voice: undefined }, 400, /voice/],
      [{ ...good, voice: { id: 'x' } }, 400, /voice/],
      [{ ...good, input: 42 }, 400, /input/],
      [{ ...good, input: '' }, 400, /nothing to say/],
      [{ ...good, input: '!!!' }, 400, /nothing to say/],
      [{ ...good, input: 'a'.repeat(4097) }, 400, /4096/],
      [{ ...good, input: 'é'.repeat(1 << 20) }, 400, /4096/],
      [{ ...good, temperature: 1 }, 400, /unknown key "temperature"/],
      [{ ...good, model: 'nope' }, 404, /model/],
      ['{"input": ', 400, /JSON/],
      ['[1, 2]', 400, /JSON object/],
    ]
    for (const [body, status, pattern] of cases) {
      const res = await post(body)
      const text = await res.text()
      assert.equal(res.status, status, text)
      assert.match(JSON.parse(text).error.message, pattern)
      const ok = await post({ ...good, input: 'ab' })
      assert.equal(ok.status, 200)
      await ok.arrayBuffer()
    }
  })

  test('the openai client raises its BadRequestError for mp3', TIMEOUT, async () => {
    const { BadRequestError } = await import('openai')
    await assert.rejects(
      client.audio.speech.create({ model: 'tts', voice: 'alloy', input: 'ab', response_format: 'mp3' }),
      (e) => e instanceof BadRequestError && /mp3/.test(e.message),
    )
  })
})

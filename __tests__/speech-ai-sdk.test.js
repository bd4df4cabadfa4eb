'use strict'
// The AI SDK's experimental_transcribe (@ai-sdk/openai, the real package from node_modules) on
// torch-node serve's /v1/audio/transcriptions with its DEFAULT provider options: it asks for
// verbose_json and timestamp_granularities[]=segment, and its schema requires each segment's
// seek, avg_logprob, compression_ratio and no_speech_prob. Over the timestamp test model
// (models/make_whisper_models.py, ts-model): the segments equal the pipeline's chunks.
const { describe, test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const torch = require('..')

const DIR = path.join(__dirname, '..', 'models', 'golden', 'whisper')
const SKIP = !fs.existsSync(path.join(DIR, 'segments.json')) && 'no Whisper fixture: run `node tools/models.js --lazy`'
const TIMEOUT = { timeout: 180_000 }

describe('the AI SDK transcribes with its default provider options', { skip: SKIP }, () => {
  const goldens = SKIP ? null : JSON.parse(fs.readFileSync(path.join(DIR, 'segments.json'), 'utf8'))
  let served, asr, ai, whisper

  before(async () => {
    const folder = path.join(DIR, 'ts-model')
    served = await torch.serve({
      models: { whisper: { folder, maxNewTokens: goldens.maxNewTokens } },
      port: 0,
      host: '127.0.0.1',
    })
    asr = await torch.pipeline('automatic-speech-recognition', folder)
    const { createOpenAI } = await import('@ai-sdk/openai')
    ai = await import('ai')
    whisper = createOpenAI({ baseURL: `${served.url}/v1`, apiKey: 'unused' }).transcription('whisper')
  })
  after(async () => {
    await served?.close()
    asr?.dispose()
  })

  test('verbose_json with segments: text, language, duration and the segments', TIMEOUT, async () => {
    const long = path.join(DIR, 'long.wav')
    const got = await ai.experimental_transcribe({
      model: whisper,
      audio: fs.readFileSync(long),
      providerOptions: { openai: { language: 'en' } },
      maxRetries: 0,
    })
    const own = await asr.run(long, { language: 'en', returnTimestamps: true, maxNewTokens: goldens.maxNewTokens })
    assert.equal(got.text, own.text)
    assert.equal(got.language, 'en')
    assert.equal(got.durationInSeconds, 40)
    assert.ok(got.segments.length > 0)
    assert.deepEqual(
      got.segments.map((s) => [s.text, s.startSecond]),
      own.chunks.map((c) => [c.text, c.timestamp[0]]),
    )
    // The raw body (the SDK keeps it): OpenAI's segment fields, from transformers' measures.
    const body = /** @type {any} */ (got.responses[0].body)
    const windows = goldens.cases.find((c) => c.name === 'long').windows
    for (const s of body.segments) {
      const pass = windows.findLast((w) => w.seek <= s.seek).passes.at(-1)
      assert.ok(Math.abs(s.avg_logprob - pass.avgLogprob) < 1e-4)
      assert.equal(s.temperature, 0)
    }
  })
})

'use strict'
// Whisper beam search (issue 51): SpeechRecognitionPipeline.run({ numBeams }) against
// models/make_whisper_models.py's beams.json, transformers 5's WhisperForConditionalGeneration
// .generate(num_beams=N) on the random-weight test models: sequences and text equal (length
// penalties 0..2, early stopping true and 'never', a translation, the language detected); with
// timestamps (ts-model, one window and 40 s long-form) generate's tokens equal; numBeams: 5 equals
// transformers' pipeline with no num_beams (its default: 5 beams). The default follows the
// checkpoint (1 here: greedy, goldens.json's greedy sequence). The scores' agreement (1e-4) is the
// core's test (crates/core/src/audio/whisper/decode.rs).
const { describe, test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { coded } = require('./helpers')
const { SpeechRecognitionPipeline } = require('../lib/audio/speech-recognition')

const DIR = path.join(__dirname, '..', 'models', 'golden', 'whisper')
const BEAMS = path.join(DIR, 'beams.json')
const SKIP = fs.existsSync(BEAMS)
  ? false
  : 'no beam goldens: run `node tools/models.js --lazy` (make_whisper_models.py)'
const TIMEOUT = { timeout: 120_000 }

describe('Whisper beam search', { skip: SKIP }, () => {
  /** @type {SpeechRecognitionPipeline} */
  let asr
  /** @type {SpeechRecognitionPipeline} */
  let tsAsr
  /** @type {any} */
  let beams
  before(async () => {
    beams = JSON.parse(fs.readFileSync(BEAMS, 'utf8'))
    asr = await SpeechRecognitionPipeline.load(path.join(DIR, 'model'))
    tsAsr = await SpeechRecognitionPipeline.load(path.join(DIR, 'ts-model'))
  })
  after(() => {
    asr?.dispose()
    tsAsr?.dispose()
  })

  test('numBeams, lengthPenalty and earlyStopping equal transformers generate', TIMEOUT, async () => {
    const cases = beams.cases.filter((/** @type {any} */ c) => c.model === 'model')
    assert.ok(cases.length >= 4)
    for (const c of cases) {
      /** @type {any} */
      const options = { maxNewTokens: beams.maxNewTokens, numBeams: c.num_beams }
      if (c.language !== null) options.language = c.language
      if (c.task) options.task = c.task
      if (c.length_penalty !== undefined) options.lengthPenalty = c.length_penalty
      if (c.early_stopping !== undefined) options.earlyStopping = c.early_stopping
      const got = await asr.run(path.join(DIR, 'speech.wav'), options)
      assert.deepEqual(got.tokens, c.sequence, JSON.stringify(c))
      assert.equal(got.text, c.text, JSON.stringify(c))
    }
  })

  test('with timestamps: one window, long-form, and the pipeline default of 5 beams', TIMEOUT, async () => {
    const read = (/** @type {string} */ name) => path.join(DIR, name.endsWith('long') ? 'long.wav' : 'speech.wav')
    for (const c of beams.cases.filter((/** @type {any} */ c) => c.model === 'ts-model')) {
      const options = {
        language: 'en',
        maxNewTokens: beams.tsMaxNewTokens,
        returnTimestamps: true,
        numBeams: c.num_beams,
      }
      const got = await tsAsr.run(read(c.name), options)
      if (c.tokens) {
        assert.deepEqual(got.tokens.slice(got.tokens.length - c.tokens.length), c.tokens, c.name)
      } else {
        assert.equal(got.text, c.text, c.name)
        assert.deepEqual(
          got.chunks?.map((k) => ({ timestamp: k.timestamp, text: k.text })),
          c.chunks,
          c.name,
        )
      }
    }
  })

  test('the default follows the checkpoint: one beam here, greedy', TIMEOUT, async () => {
    assert.equal(asr.numBeams, 1)
    const greedy = JSON.parse(fs.readFileSync(path.join(DIR, 'goldens.json'), 'utf8'))
    const want = greedy.cases[0]
    const options = { language: want.language, task: want.task, maxNewTokens: greedy.maxNewTokens }
    const got = await asr.run(path.join(DIR, 'speech.wav'), options)
    assert.deepEqual(got.tokens, want.sequence)
    const one = await asr.run(path.join(DIR, 'speech.wav'), { ...options, numBeams: 1 })
    assert.deepEqual(one.tokens, want.sequence)
  })

  test('bad beam options are InvalidArg', TIMEOUT, async () => {
    const wav = path.join(DIR, 'speech.wav')
    await assert.rejects(asr.run(wav, { numBeams: 0 }), coded('InvalidArg', /numBeams/))
    await assert.rejects(asr.run(wav, { numBeams: 17 }), coded('InvalidArg', /numBeams/))
    await assert.rejects(asr.run(wav, { numBeams: 2.5 }), coded('InvalidArg', /numBeams/))
    await assert.rejects(asr.run(wav, { numBeams: 2, lengthPenalty: NaN }), coded('InvalidArg', /lengthPenalty/))
    await assert.rejects(
      asr.run(wav, { numBeams: 2, earlyStopping: 'sometimes' }),
      coded('InvalidArg', /earlyStopping/),
    )
    // The beam-only options with one beam: refused rather than ignored.
    await assert.rejects(asr.run(wav, { lengthPenalty: 0.5 }), coded('InvalidArg', /only with numBeams/))
    await assert.rejects(asr.run(wav, { numBeams: 1, earlyStopping: true }), coded('InvalidArg', /only with numBeams/))
  })
})

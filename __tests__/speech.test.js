'use strict'
// Speech to text (issue 51): SpeechRecognitionPipeline over a random-weight Whisper exported by
// python/export_whisper.py (models/make_whisper_models.py's goldens). Greedy tokens and text equal
// to transformers 5's WhisperForConditionalGeneration.generate on the same audio for several
// language / task settings (detection included); the same audio as a path, a Buffer, FLAC and a
// Float32Array; garbage and hostile input end in coded errors and the process stays up. A second
// config (ts-model, timestamps allowed): transformers' pipeline(return_timestamps=True) on one
// window, on 40 s long-form and chunked (chunk_length_s 15), text and chunks equal (timestamps
// exact to their two decimals). The features' agreement with WhisperFeatureExtractor is the
// core's test (crates/core/src/audio).
const { describe, test, before } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { coded } = require('./helpers')
const { SpeechRecognitionPipeline } = require('../lib/audio/speech-recognition')

const DIR = path.join(__dirname, '..', 'models', 'golden', 'whisper')
const AUDIO = path.join(__dirname, '..', 'models', 'fixtures', 'audio')
const GOLDENS = path.join(DIR, 'goldens.json')
const SKIP = fs.existsSync(GOLDENS)
  ? false
  : 'no Whisper model: run `node tools/models.js --lazy` (make_whisper_models.py)'
const TIMEOUT = { timeout: 120_000 }

/** The 16-bit PCM samples of a mono WAV written by Python's `wave` (a 44-byte header), in [-1, 1). */
function wavSamples(file) {
  const bytes = fs.readFileSync(file)
  const pcm = new Int16Array(bytes.buffer.slice(bytes.byteOffset + 44, bytes.byteOffset + bytes.length))
  return Float32Array.from(pcm, (s) => s / 32768)
}

describe('SpeechRecognitionPipeline (Whisper)', { skip: SKIP }, () => {
  /** @type {SpeechRecognitionPipeline} */
  let asr
  /** @type {any} */
  let goldens
  before(async () => {
    goldens = JSON.parse(fs.readFileSync(GOLDENS, 'utf8'))
    asr = await SpeechRecognitionPipeline.load(path.join(DIR, 'model'))
  })

  test('greedy tokens and text equal transformers generate', TIMEOUT, async () => {
    assert.equal(asr.task, 'automatic-speech-recognition')
    assert.equal(asr.samplingRate, 16000)
    for (const c of goldens.cases) {
      const options = { maxNewTokens: goldens.maxNewTokens }
      if (c.language !== null) options.language = c.language
      if (c.task !== null) options.task = c.task
      const got = await asr.run(path.join(DIR, 'speech.wav'), options)
      assert.deepEqual(got.tokens, c.sequence, JSON.stringify(c))
      assert.equal(got.text, c.text, JSON.stringify(c))
    }
  })

  test('a Buffer, the FLAC copy and a Float32Array give the same tokens', TIMEOUT, async () => {
    const want = goldens.cases[0]
    const options = { language: want.language, task: want.task, maxNewTokens: goldens.maxNewTokens }
    for (const audio of [
      fs.readFileSync(path.join(DIR, 'speech.wav')),
      path.join(AUDIO, 'speech.flac'),
      wavSamples(path.join(DIR, 'speech.wav')),
    ]) {
      assert.deepEqual((await asr.run(audio, options)).tokens, want.sequence)
    }
  })

  test('MP3, Ogg/Vorbis and 44.1 kHz stereo decode and transcribe', TIMEOUT, async () => {
    for (const file of [
      path.join(AUDIO, 'speech.mp3'),
      path.join(AUDIO, 'speech.ogg'),
      path.join(DIR, 'speech44k.wav'),
    ]) {
      const got = await asr.run(file, { language: 'en', maxNewTokens: 4 })
      assert.deepEqual(got.tokens.slice(0, 4), goldens.cases[0].sequence.slice(0, 4))
      assert.equal(got.tokens.length, 8)
      assert.equal(got.language, 'en')
    }
  })

  test('garbage, empty and lying audio are coded errors; the process stays up', TIMEOUT, async () => {
    const wav = fs.readFileSync(path.join(DIR, 'speech.wav'))
    const lying = Buffer.from(wav)
    lying.writeUInt32LE(0xffffffff, 40)
    for (const audio of [Buffer.from('definitely not audio'), Buffer.alloc(0), wav.subarray(0, 30), lying]) {
      await assert.rejects(asr.run(audio), coded('InvalidArg', /invalid audio: /))
    }
    await assert.rejects(asr.run(wav, { maxDurationS: 0.5 }), coded('InvalidArg', /limit of 0.5 s/))
    await assert.rejects(asr.run(path.join(AUDIO, 'missing.wav')), coded('InvalidArg', /cannot read audio/))
    // Still serving.
    const got = await asr.run(wav, { language: 'en', maxNewTokens: 2 })
    assert.deepEqual(got.tokens, goldens.cases[0].sequence.slice(0, 6))
  })

  test('bad options and arguments are InvalidArg; an aborted signal is Aborted', TIMEOUT, async () => {
    const wav = path.join(DIR, 'speech.wav')
    await assert.rejects(asr.run(wav, { task: 'summarize' }), coded('InvalidArg', /task/))
    await assert.rejects(asr.run(wav, { language: 'klingon' }), coded('InvalidArg', /language 'klingon'/))
    await assert.rejects(asr.run(wav, { numBeams: 17 }), coded('InvalidArg', /numBeams/))
    await assert.rejects(asr.run(wav, { returnTimestamps: 'yes' }), coded('InvalidArg', /returnTimestamps/))
    await assert.rejects(asr.run(wav, { strideLengthS: 1 }), coded('InvalidArg', /needs chunkLengthS/))
    await assert.rejects(asr.run(wav, { chunkLengthS: 31 }), coded('InvalidArg', /chunkLengthS/))
    await assert.rejects(asr.run(wav, { chunkLengthS: 6, strideLengthS: [3, 3] }), coded('InvalidArg', /strides/))
    await assert.rejects(asr.run(wav, { maxDurationS: 99999 }), coded('InvalidArg', /maxDurationS/))
    await assert.rejects(asr.run(wav, { bogus: 1 }), coded('InvalidArg', /bogus/))
    await assert.rejects(asr.run(42), coded('InvalidArg', /audio: expected/))
    await assert.rejects(asr.run(wav, { signal: AbortSignal.abort() }), coded('Aborted'))
    await assert.rejects(SpeechRecognitionPipeline.load(path.join(AUDIO)), coded('ModelLoadError', /manifest/))
    assert.throws(() => new SpeechRecognitionPipeline(Symbol('x'), null), coded('InvalidArg', /load\(folder\)/))
  })
})

const TS = path.join(DIR, 'timestamps.json')
describe(
  'SpeechRecognitionPipeline: timestamps, long audio, chunks',
  { skip: fs.existsSync(TS) ? false : SKIP || 'no timestamps.json' },
  () => {
    /** @type {SpeechRecognitionPipeline} */
    let asr
    /** @type {any} */
    let goldens
    before(async () => {
      goldens = JSON.parse(fs.readFileSync(TS, 'utf8'))
      asr = await SpeechRecognitionPipeline.load(path.join(DIR, 'ts-model'))
    })
    const run = (c) => {
      const options = { maxNewTokens: goldens.maxNewTokens }
      if (c.language !== null) options.language = c.language
      if (c.return_timestamps) options.returnTimestamps = true
      if (c.chunk_length_s) options.chunkLengthS = c.chunk_length_s
      return asr.run(path.join(DIR, c.name.startsWith('short') ? 'speech.wav' : 'long.wav'), options)
    }
    const same = (got, c) => {
      assert.equal(got.text, c.text, c.name)
      if (!c.chunks) return assert.equal(got.chunks, undefined)
      assert.deepEqual(
        got.chunks.map((k) => ({ timestamp: k.timestamp, text: k.text })),
        c.chunks,
        c.name,
      )
    }

    for (const name of ['short', 'short-detected', 'long', 'chunked', 'chunked-text']) {
      test(`${name}: text and chunks equal transformers' pipeline`, TIMEOUT, async () => {
        const c = goldens.cases.find((x) => x.name === name)
        const got = await run(c)
        same(got, c)
        // generate(return_timestamps=True)'s tokens follow the prompt.
        if (c.tokens) assert.deepEqual(got.tokens.slice(got.tokens.length - c.tokens.length), c.tokens)
        assert.ok(Math.abs(got.duration - (name.startsWith('short') ? 1.5 : 40)) < 1e-9)
      })
    }

    test("segments.json: each window's measures and the fallback equal transformers' generate", TIMEOUT, async () => {
      const seg = JSON.parse(fs.readFileSync(path.join(DIR, 'segments.json'), 'utf8'))
      for (const c of seg.cases) {
        const options = {
          language: 'en',
          maxNewTokens: seg.maxNewTokens,
          returnTimestamps: true,
          temperature: c.temperature,
          ...(c.logprob_threshold === undefined ? {} : { logprobThreshold: c.logprob_threshold }),
          ...(c.no_speech_threshold === undefined ? {} : { noSpeechThreshold: c.no_speech_threshold }),
          ...(c.compression_ratio_threshold === undefined
            ? {}
            : { compressionRatioThreshold: c.compression_ratio_threshold }),
        }
        const got = await asr.run(
          path.join(DIR, c.name === 'short' || c.name === 'fallback' ? 'speech.wav' : 'long.wav'),
          options,
        )
        const kept = c.windows.filter((w) => !w.passes.at(-1).skip)
        if (c.name === 'fallback') {
          // Sampled: each window ends at the last temperature, as transformers' did.
          assert.ok(kept.every((w) => w.passes.at(-1).temperature === 1))
          assert.ok(got.chunks.length > 0 && got.chunks.every((k) => k.temperature === 1), c.name)
          continue
        }
        assert.deepEqual(got.tokens.slice(got.tokens.length - c.tokens.length), c.tokens, c.name)
        assert.deepEqual(
          [...new Set(got.chunks.map((k) => k.seek))],
          kept.map((w) => w.seek),
          c.name,
        )
        for (const k of got.chunks) {
          const pass = kept.find((w) => w.seek === k.seek).passes.at(-1)
          assert.equal(k.temperature, 0)
          assert.ok(Math.abs(k.avgLogprob - pass.avgLogprob) < 1e-4, c.name)
          assert.ok(Math.abs(k.noSpeechProb - pass.noSpeechProb) < 1e-4, c.name)
          assert.ok(Math.abs(k.compressionRatio - pass.compressionRatio) < 1e-9, c.name)
        }
      }
    })

    test('the fallback options are checked; a seed makes sampling repeatable', TIMEOUT, async () => {
      const wav = path.join(DIR, 'speech.wav')
      await assert.rejects(asr.run(wav, { temperature: -1 }), coded('InvalidArg', /temperature/))
      await assert.rejects(asr.run(wav, { temperature: [] }), coded('InvalidArg', /temperature/))
      await assert.rejects(asr.run(wav, { temperature: [0, 'hot'] }), coded('InvalidArg', /temperature/))
      await assert.rejects(asr.run(wav, { noSpeechThreshold: 0.6 }), coded('InvalidArg', /needs logprobThreshold/))
      await assert.rejects(asr.run(wav, { logprobThreshold: 1 }), coded('InvalidArg', /logprobThreshold/))
      await assert.rejects(asr.run(wav, { seed: -1 }), coded('InvalidArg', /seed/))
      const sampled = (seed) => asr.run(wav, { language: 'en', maxNewTokens: 8, temperature: 1, seed })
      const [a, b, c] = await Promise.all([sampled(1), sampled(1), sampled(2)])
      assert.deepEqual(a.tokens, b.tokens)
      assert.notDeepEqual(a.tokens, c.tokens)
    })

    test('over 30 s without returnTimestamps or chunkLengthS: InvalidArg naming both', TIMEOUT, async () => {
      await assert.rejects(
        asr.run(path.join(DIR, 'long.wav')),
        coded('InvalidArg', /longer than one 30 s window: pass returnTimestamps: true .* or chunkLengthS/),
      )
      await assert.rejects(
        asr.run(path.join(DIR, 'long.wav'), { maxDurationS: 20 }),
        coded('InvalidArg', /limit of 20 s/),
      )
    })
  },
)

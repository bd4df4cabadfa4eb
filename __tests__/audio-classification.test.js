'use strict'
// audio-classification (issue 50): Wav2Vec2ForSequenceClassification and ASTForAudioClassification
// folders python/export_audio.py wrote from random-weight checkpoints, against transformers 5's
// pipeline('audio-classification') (models/make_audio_models.py's goldens): input_values within 1e-6
// (Wav2Vec2's normalization; AST's log-mel filter banks), labels in order, scores within 1e-5 for
// every topK / functionToApply call; coded errors for bad audio and options.
const { describe, test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const torch = require('..')
const { coded } = require('./helpers')
const { AudioClassificationPipeline } = require('../lib/audio/audio-classification')

const DIR = path.join(__dirname, '..', 'models', 'golden', 'audio')
const GOLDENS = path.join(DIR, 'goldens.json')
const SKIP = fs.existsSync(GOLDENS)
  ? false
  : 'no audio classifier: run `node tools/models.js --lazy` (make_audio_models.py)'
const SCORE_TOLERANCE = 1e-5
const FEATURE_TOLERANCE = 1e-6
const TIMEOUT = { timeout: 120_000 }

const goldens = SKIP ? null : JSON.parse(fs.readFileSync(GOLDENS, 'utf8'))
/** A mono WAV of 32-bit float samples (format 3, IEEE float). */
const floatWav = (samples, rate) => {
  const data = Buffer.from(samples.buffer, samples.byteOffset, samples.byteLength)
  const head = Buffer.alloc(44)
  head.write('RIFF', 0)
  head.writeUInt32LE(36 + data.length, 4)
  head.write('WAVEfmt ', 8)
  head.writeUInt32LE(16, 16)
  head.writeUInt16LE(3, 20)
  head.writeUInt16LE(1, 22)
  head.writeUInt32LE(rate, 24)
  head.writeUInt32LE(rate * 4, 28)
  head.writeUInt16LE(4, 32)
  head.writeUInt16LE(32, 34)
  head.write('data', 36)
  head.writeUInt32LE(data.length, 40)
  return Buffer.concat([head, data])
}
const floats = (b64) => {
  const bytes = Buffer.from(b64, 'base64')
  return new Float32Array(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.length))
}

// name -> the shortest clip the model takes (Wav2Vec2: its convolutions' receptive field; AST: one frame)
const MODELS = { wav2vec2: 45, ast: 400 }

for (const [name, shortest] of Object.entries(MODELS)) {
  describe(`${name}: audio-classification against transformers`, { skip: SKIP }, () => {
    const folder = path.join(DIR, name)
    const results = SKIP ? [] : goldens[name].results
    let pipe
    before(async () => {
      pipe = await AudioClassificationPipeline.load(folder)
    })
    after(() => pipe?.dispose())

    test('input_values equal Wav2Vec2FeatureExtractor', TIMEOUT, async () => {
      const preprocess = await torch.ScriptModule.load(path.join(folder, 'preprocess.pt'))
      for (const want of results) {
        const samples = floats(want.samples)
        const values = await preprocess.forward(torch.fromBuffer(samples, [samples.length]))
        const expected = floats(want.inputValues)
        assert.equal(values.numel(), expected.length)
        const got = values.toTypedArray()
        let diff = 0
        for (let i = 0; i < expected.length; i++) diff = Math.max(diff, Math.abs(got[i] - expected[i]))
        assert.ok(diff <= FEATURE_TOLERANCE, `${want.clip}: input_values differ by ${diff}`)
        values.dispose()
      }
      preprocess.dispose()
    })

    test('every topK and functionToApply equals the pipeline', TIMEOUT, async () => {
      assert.equal(pipe.task, 'audio-classification')
      assert.deepEqual(pipe.labels, ['yes', 'no', 'up', 'down'])
      assert.equal(pipe.samplingRate, 16000)
      for (const want of results) {
        for (const call of want.calls) {
          const got = await pipe.run(floats(want.samples), call.options)
          const what = `${want.clip} ${JSON.stringify(call.options)}`
          assert.deepEqual(
            got.map((r) => r.label),
            call.result.map((r) => r.label),
            `${what}: labels`,
          )
          got.forEach((r, i) => {
            const d = Math.abs(r.score - call.result[i].score)
            assert.ok(d <= SCORE_TOLERANCE, `${what}: ${r.label} ${r.score} vs ${call.result[i].score}`)
          })
        }
      }
    })

    test('a WAV file, its bytes and { raw, samplingRate } equal the pipeline', TIMEOUT, async () => {
      // The golden clips written as 32-bit float WAVs: the same samples, so the same answers.
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'torch-node-audio-'))
      try {
        for (const want of results) {
          const samples = floats(want.samples)
          const file = path.join(dir, `${want.clip}.wav`)
          fs.writeFileSync(file, floatWav(samples, 16000))
          const call = want.calls[0]
          const raw = { raw: samples, samplingRate: 16000 }
          const dict = { array: samples, sampling_rate: 16000 }
          for (const input of [file, fs.readFileSync(file), new Uint8Array(fs.readFileSync(file)), raw, dict]) {
            const got = await pipe.run(input, call.options)
            assert.deepEqual(
              got.map((r) => r.label),
              call.result.map((r) => r.label),
            )
            got.forEach((r, i) => assert.ok(Math.abs(r.score - call.result[i].score) <= SCORE_TOLERANCE))
          }
        }
        // Another rate is resampled to the model's (rubato; transformers would use torchaudio).
        const half = floats(results[0].samples).filter((_, i) => i % 2 === 0)
        const got = await pipe.run([{ raw: half, samplingRate: 8000 }, path.join(dir, `${results[0].clip}.wav`)])
        assert.equal(got.length, 2)
        assert.equal(got[0].length, Math.min(5, pipe.labels.length))
      } finally {
        fs.rmSync(dir, { recursive: true, force: true })
      }
    })

    test('hostile files and bad dicts are coded errors; the process stays up', TIMEOUT, async () => {
      const samples = floats(results[0].samples)
      await assert.rejects(pipe.run(Buffer.from('not audio at all')), coded('InvalidArg', /invalid audio/))
      await assert.rejects(pipe.run(Buffer.alloc(0)), coded('InvalidArg', /invalid audio/))
      const truncated = floatWav(samples, 16000).subarray(0, 30)
      await assert.rejects(pipe.run(truncated), coded('InvalidArg', /invalid audio/))
      await assert.rejects(pipe.run(path.join(DIR, 'missing.wav')), coded('InvalidArg', /cannot read audio/))
      await assert.rejects(pipe.run({ raw: [0.1], samplingRate: 16000 }), coded('InvalidArg', /raw: expected/))
      await assert.rejects(pipe.run({ raw: samples }), coded('InvalidArg', /samplingRate/))
      await assert.rejects(
        pipe.run({ raw: samples, samplingRate: 16000, x: 1 }),
        coded('InvalidArg', /unknown option 'x'; accepted: raw, array, samplingRate, sampling_rate/),
      )
      await assert.rejects(
        pipe.run({ raw: samples, samplingRate: 1_000_000 }),
        coded('InvalidArg', /sampling rate of 1000000 Hz/),
      )
      const nan = new Float32Array(800).fill(NaN)
      await assert.rejects(pipe.run({ raw: nan, samplingRate: 8000 }), coded('InvalidArg', /NaN/))
      assert.equal((await pipe.run(samples)).length > 0, true)
    })

    test('an array of clips gives an array of answers', TIMEOUT, async () => {
      const clips = results.map((want) => floats(want.samples))
      const many = await pipe.run(clips, { topK: 2 })
      many.forEach((got, i) =>
        assert.deepEqual(
          got.map((r) => r.label),
          results[i].calls[1].result.map((r) => r.label),
        ),
      )
      await assert.rejects(pipe.run([]), coded('InvalidArg', /at least one clip/))
      await assert.rejects(pipe.run([clips[0], 42]), coded('InvalidArg', /audio\[1\]: expected a Buffer, a path/))
    })

    test('concurrent calls each get their own answer', TIMEOUT, async () => {
      const outs = await Promise.all(results.map((want) => pipe.run(floats(want.samples))))
      outs.forEach((got, i) =>
        assert.deepEqual(
          got.map((r) => r.label),
          results[i].calls[0].result.map((r) => r.label),
        ),
      )
    })

    test('coded errors: not audio, empty or too short audio, NaN, bad options, disposed', TIMEOUT, async () => {
      const samples = floats(results[0].samples)
      await assert.rejects(pipe.run('clip.wav'), coded('InvalidArg', /cannot read audio/))
      await assert.rejects(pipe.run(42), coded('InvalidArg', /Float32Array/))
      await assert.rejects(pipe.run([0.1, 0.2]), coded('InvalidArg', /Float32Array/))
      await assert.rejects(pipe.run(new Float32Array(0)), coded('InvalidArg', /empty/))
      await assert.rejects(
        pipe.run(new Float32Array(shortest - 1)),
        coded('InvalidArg', new RegExp(`at least ${shortest}`)),
      )
      await assert.rejects(pipe.run(new Float32Array(shortest).fill(NaN)), coded('InvalidArg', /NaN/))
      await assert.rejects(pipe.run(samples, { topK: 0 }), coded('InvalidArg', /topK/))
      await assert.rejects(pipe.run(samples, { functionToApply: 'tanh' }), coded('InvalidArg', /functionToApply/))
      await assert.rejects(pipe.run(samples, { threshold: 0.5 }), coded('InvalidArg', /threshold/))
      const aborted = AbortSignal.abort()
      await assert.rejects(pipe.run(samples, { signal: aborted }), coded('Aborted'))
      await assert.rejects(AudioClassificationPipeline.load(path.join(DIR, 'nowhere')), coded('ModelLoadError'))
      const other = await AudioClassificationPipeline.load(folder)
      other.dispose()
      await assert.rejects(other.run(samples), coded('Disposed'))
      assert.throws(() => new AudioClassificationPipeline(), coded('InvalidArg', /load/))
    })
  })
}

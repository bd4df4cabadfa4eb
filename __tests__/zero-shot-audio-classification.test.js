'use strict'
// zero-shot-audio-classification (issue 50): random-weight CLAP folders (unfused: rand_trunc, one
// Slaney mel; fused: fusion, four HTK mels) python/export_clap.py wrote, against transformers 5's
// pipeline('zero-shot-audio-classification') and ClapFeatureExtractor (models/make_clap_models.py's
// goldens): input_features within 1e-5, labels in order and scores within 1e-5 for a clip shorter
// than the maximum, one exactly at it, one just past it (fused: taken whole, as transformers does)
// and a band-limited chord; the chord given at 44.1 kHz (resampled by rubato, transformers' clip
// computed at 16 kHz) within 1e-3; batches and concurrent callers equal single calls; coded errors;
// the extractor's 'pad' and 'repeat' paddings (the models use repeatpad) within 1e-5 too.
const { describe, test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const torch = require('..')
const { coded } = require('./helpers')
const { ZeroShotAudioClassificationPipeline } = require('../lib/audio/zero-shot-audio-classification')

const DIR = path.join(__dirname, '..', 'models', 'golden', 'clap')
const GOLDENS = path.join(DIR, 'goldens.json')
const SKIP = fs.existsSync(GOLDENS) ? false : 'no CLAP folders: run `node tools/models.js --lazy` (make_clap_models.py)'
const SCORE_TOLERANCE = 1e-5
const FEATURE_TOLERANCE = 1e-5
// The resampled chord: rubato's resampler against the chord computed at 16 kHz.
const RESAMPLED_TOLERANCE = 1e-3
const TIMEOUT = { timeout: 120_000 }

const goldens = SKIP ? null : JSON.parse(fs.readFileSync(GOLDENS, 'utf8'))
const floats = (b64) => {
  const bytes = Buffer.from(b64, 'base64')
  return new Float32Array(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.length))
}
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

/** Labels exactly as `want`'s, scores within `tolerance`. */
function assertScores(got, want, tolerance, what) {
  assert.deepEqual(
    got.map((r) => r.label),
    want.map((r) => r.label),
    `${what}: labels`,
  )
  got.forEach((r, i) => {
    const d = Math.abs(r.score - want[i].score)
    assert.ok(d <= tolerance, `${what}: ${r.label} ${r.score} vs ${want[i].score} (|diff| ${d})`)
  })
}

// name -> the longest clip its extractor takes (rand_trunc: the maximum; fusion: up to one hop past it)
const MODELS = { clap: 16000, 'clap-fused': 16159 }

for (const [name, longest] of Object.entries(MODELS)) {
  describe(`${name}: zero-shot-audio-classification against transformers`, { skip: SKIP }, () => {
    const folder = path.join(DIR, name)
    const results = SKIP ? [] : goldens[name]
    const labels = SKIP ? [] : goldens.inputs.labels
    const samples = (clip) => floats(goldens.samples[clip])
    let pipe
    before(async () => {
      pipe = await ZeroShotAudioClassificationPipeline.load(folder)
    })
    after(() => pipe?.dispose())

    test('input_features equal ClapFeatureExtractor', TIMEOUT, async () => {
      const preprocess = await torch.ScriptModule.load(path.join(folder, 'preprocess.pt'))
      try {
        for (const want of results) {
          const clip = samples(want.clip)
          const features = await preprocess.forward(torch.fromBuffer(clip, [clip.length]))
          assert.deepEqual(features.shape, want.featureShape)
          const expected = floats(want.inputFeatures)
          const got = features.toTypedArray()
          let diff = 0
          for (let i = 0; i < expected.length; i++) diff = Math.max(diff, Math.abs(got[i] - expected[i]))
          assert.ok(diff <= FEATURE_TOLERANCE, `${want.clip}: input_features differ by ${diff}`)
          features.dispose()
        }
      } finally {
        preprocess.dispose()
      }
    })

    test('the default and a custom template equal the pipeline', TIMEOUT, async () => {
      assert.equal(pipe.task, 'zero-shot-audio-classification')
      assert.equal(pipe.samplingRate, 16000)
      assert.equal(pipe.maxSamples, longest)
      assert.ok(results.some((r) => r.clip === 'exact'))
      for (const want of results) {
        const clip = samples(want.clip)
        assertScores(await pipe.run(clip, { candidateLabels: labels }), want.default, SCORE_TOLERANCE, want.clip)
        const template = goldens.inputs.template
        const got = await pipe.run(clip, { candidateLabels: labels, hypothesisTemplate: template })
        assertScores(got, want.template, SCORE_TOLERANCE, `${want.clip} (template)`)
      }
    })

    test('a WAV file, its bytes, { raw, samplingRate } and a resampled clip', TIMEOUT, async () => {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'torch-node-clap-'))
      try {
        const want = results.find((r) => r.clip === 'short')
        const clip = samples('short')
        const file = path.join(dir, 'short.wav')
        fs.writeFileSync(file, floatWav(clip, 16000))
        const inputs = [
          file,
          fs.readFileSync(file),
          { raw: clip, samplingRate: 16000 },
          { array: clip, sampling_rate: 16000 },
        ]
        for (const input of inputs) {
          assertScores(await pipe.run(input, { candidateLabels: labels }), want.default, SCORE_TOLERANCE, 'input')
        }
        const chord = results.find((r) => r.clip === 'resampled')
        const source = floats(goldens.resampledSource)
        const rate = goldens.inputs.sourceRate
        for (const input of [{ raw: source, samplingRate: rate }, floatWav(source, rate)]) {
          const got = await pipe.run(input, { candidateLabels: labels })
          assertScores(got, chord.default, RESAMPLED_TOLERANCE, 'the chord at 44.1 kHz')
        }
      } finally {
        fs.rmSync(dir, { recursive: true, force: true })
      }
    })

    test('a batch and concurrent callers equal single calls; labels embedded once', TIMEOUT, async () => {
      const clips = results.map((r) => samples(r.clip))
      const fresh = await ZeroShotAudioClassificationPipeline.load(folder, { maxBatchSize: 3 })
      try {
        const many = await fresh.run(clips, { candidateLabels: labels })
        assert.equal(many.length, clips.length)
        many.forEach((got, i) => assertScores(got, results[i].default, SCORE_TOLERANCE, `batch[${i}]`))
        const texts = fresh.stats().text.requests
        const callers = await Promise.all(
          Array.from({ length: 8 }, (_, k) => fresh.run(clips[k % clips.length], { candidateLabels: labels })),
        )
        callers.forEach((got, k) =>
          assertScores(got, results[k % clips.length].default, SCORE_TOLERANCE, `caller ${k}`),
        )
        // the hypotheses' embeddings were kept: no text forward for the same labels
        assert.equal(fresh.stats().text.requests, texts)
        // maxBatchSize 3: the 3 or 4 clips of the batch went as 2 audio requests, then 8 callers
        assert.equal(fresh.stats().audio.requests, Math.ceil(clips.length / 3) + 8)
        const one = await fresh.run(clips[0], { candidateLabels: ['{x}'], hypothesisTemplate: '{} {{}}' })
        assert.deepEqual(one, [{ score: 1, label: '{x}' }])
      } finally {
        fresh.dispose()
      }
    })

    test('bad labels, audio and options are coded errors; the pipeline keeps serving', TIMEOUT, async () => {
      const clip = samples('short')
      const o = { candidateLabels: labels }
      await assert.rejects(pipe.run(clip, { candidateLabels: [] }), coded('InvalidArg', /candidateLabels/))
      await assert.rejects(pipe.run(clip), coded('InvalidArg', /candidateLabels/))
      await assert.rejects(pipe.run(clip, {}), coded('InvalidArg', /candidateLabels/))
      await assert.rejects(pipe.run(clip, { candidateLabels: [1] }), coded('InvalidArg', /candidateLabels/))
      await assert.rejects(pipe.run(clip, { ...o, topK: 2 }), coded('InvalidArg', /unknown option 'topK'/))
      await assert.rejects(pipe.run(new Float32Array(0), o), coded('InvalidArg', /empty/))
      const nan = Float32Array.from(clip)
      nan[7] = NaN
      await assert.rejects(pipe.run(nan, o), coded('InvalidArg', /NaN/))
      await assert.rejects(pipe.run({ raw: nan, samplingRate: 8000 }, o), coded('InvalidArg', /NaN/))
      await assert.rejects(pipe.run(new Float32Array(longest + 1), o), coded('InvalidArg', /at most .*random/))
      await assert.rejects(pipe.run(42, o), coded('InvalidArg', /Float32Array/))
      await assert.rejects(pipe.run([], o), coded('InvalidArg', /at least one clip/))
      await assert.rejects(pipe.run([clip, 'nowhere.wav'], o), coded('InvalidArg', /audio\[1\]/))
      await assert.rejects(pipe.run(Buffer.from('not audio at all'), o), coded('InvalidArg', /invalid audio/))
      await assert.rejects(pipe.run({ raw: clip, samplingRate: 0 }, o), coded('InvalidArg', /samplingRate/))
      await assert.rejects(pipe.run(clip, { ...o, signal: AbortSignal.abort() }), coded('Aborted'))
      assert.equal((await pipe.run(new Float32Array(longest).fill(0.25), o)).length, labels.length)
      assert.equal((await pipe.run(clip.subarray(0, 1), o)).length, labels.length)
    })

    test('load and lifetime errors', TIMEOUT, async () => {
      await assert.rejects(ZeroShotAudioClassificationPipeline.load(path.join(DIR, 'nowhere')), coded('ModelLoadError'))
      await assert.rejects(
        ZeroShotAudioClassificationPipeline.load(path.join(DIR, `${name}-src`)),
        coded('ModelLoadError'),
      )
      await assert.rejects(ZeroShotAudioClassificationPipeline.load(folder, { maxBatchSize: 0 }), coded('InvalidArg'))
      assert.throws(() => new ZeroShotAudioClassificationPipeline(), coded('InvalidArg', /torch.pipeline/))
      const other = await ZeroShotAudioClassificationPipeline.load(folder)
      other.dispose()
      assert.equal(other.isDisposed, true)
      await assert.rejects(other.run(samples('short'), { candidateLabels: labels }), coded('Disposed'))
    })
  })
}

test(
  "ClapFeatureExtractor's other paddings ('pad', 'repeat') as export_clap.py scripts them",
  { skip: SKIP, ...TIMEOUT },
  async () => {
    const clip = floats(goldens.samples.short)
    for (const padding of goldens.inputs.paddings) {
      const want = goldens.paddings[padding]
      const preprocess = await torch.ScriptModule.load(path.join(DIR, `preprocess-${padding}.pt`))
      try {
        const features = await preprocess.forward(torch.fromBuffer(clip, [clip.length]))
        assert.deepEqual(features.shape, want.featureShape)
        const expected = floats(want.inputFeatures)
        const got = features.toTypedArray()
        let diff = 0
        for (let i = 0; i < expected.length; i++) diff = Math.max(diff, Math.abs(got[i] - expected[i]))
        assert.ok(diff <= FEATURE_TOLERANCE, `${padding}: input_features differ by ${diff}`)
        features.dispose()
      } finally {
        preprocess.dispose()
      }
    }
  },
)

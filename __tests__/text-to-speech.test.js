'use strict'
// text-to-speech (issue 51): a random-weight VitsModel python/export_tts.py exported, against
// transformers 5's VitsModel run after torch.manual_seed(seed) (models/make_tts_models.py's goldens):
// VitsTokenizer's ids exactly (normalize true and false), every call's waveform within 1e-4 with its
// length exact, texts of an array each as alone; bounds and hostile input as coded errors.
const { describe, test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { coded, childOut } = require('./helpers')
const { TextToSpeechPipeline, encodeWav } = require('../lib/audio/text-to-speech')
const { VitsTokenizer } = require('../lib/audio/vits-tokenizer')

const DIR = path.join(__dirname, '..', 'models', 'golden', 'tts')
const FOLDER = path.join(DIR, 'vits')
const GOLDENS = path.join(DIR, 'goldens.json')
const SKIP = fs.existsSync(GOLDENS) ? false : 'no VITS fixture: run `.libtorch/bin/python models/make_tts_models.py`'
const TOLERANCE = 1e-4
const TIMEOUT = { timeout: 120_000 }

const goldens = SKIP ? null : JSON.parse(fs.readFileSync(GOLDENS, 'utf8'))
const floats = (b64) => {
  const bytes = Buffer.from(b64, 'base64')
  return new Float32Array(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.length))
}
const maxDiff = (a, b) => a.reduce((m, x, i) => Math.max(m, Math.abs(x - b[i])), 0)

describe('text-to-speech: VITS against transformers', { skip: SKIP }, () => {
  let pipe
  before(async () => {
    pipe = await TextToSpeechPipeline.load(FOLDER)
  })
  after(() => pipe?.dispose())

  test('tokenize equals VitsTokenizer (normalize true and false, add_blank false)', () => {
    for (const { text, ids } of goldens.tokenize) assert.deepEqual(pipe.tokenize(text), ids, JSON.stringify(text))
    const manifest = JSON.parse(fs.readFileSync(path.join(FOLDER, 'manifest.json'), 'utf8'))
    const vocab = JSON.parse(fs.readFileSync(path.join(FOLDER, 'vocab.json'), 'utf8'))
    const raw = new VitsTokenizer(vocab, { ...manifest.tokenizer, normalize: false })
    for (const { text, ids } of goldens.tokenizeRaw) assert.deepEqual(raw.encode(text), ids, JSON.stringify(text))
    const plain = new VitsTokenizer(vocab, { ...manifest.tokenizer, addBlank: false })
    for (const { text, ids } of goldens.tokenizeNoBlank) assert.deepEqual(plain.encode(text), ids, JSON.stringify(text))
    // A uroman checkpoint reads romanized text: other text is refused, not passed on unromanized.
    const uroman = new VitsTokenizer(vocab, { ...manifest.tokenizer, isUroman: true })
    assert.deepEqual(uroman.encode('ab'), goldens.tokenize[1].ids)
    assert.throws(() => uroman.encode('été'), coded('InvalidArg', /romanize/))
  })

  test('every call equals VitsModel after torch.manual_seed within 1e-4, lengths exact', TIMEOUT, async () => {
    assert.equal(pipe.task, 'text-to-speech')
    assert.equal(pipe.samplingRate, goldens.samplingRate)
    for (const call of goldens.calls) {
      const want = floats(call.waveform)
      const got = await pipe.run(call.text, { seed: call.seed, ...call.options })
      assert.equal(got.samplingRate, 16000)
      assert.ok(got.audio instanceof Float32Array)
      assert.equal(got.audio.length, call.samples, `${call.text} ${JSON.stringify(call.options)}`)
      const diff = maxDiff(got.audio, want)
      assert.ok(diff <= TOLERANCE, `${call.text} seed ${call.seed}: differs by ${diff}`)
    }
  })

  test('a seed as a BigInt, and an array of texts of different lengths each as alone', TIMEOUT, async () => {
    const [a, b] = goldens.calls
    const both = await pipe.run([a.text, b.text], { seed: 3n })
    assert.equal(both.length, 2)
    const alone = [await pipe.run(a.text, { seed: 3 }), await pipe.run(b.text, { seed: 3 })]
    assert.notEqual(both[0].audio.length, both[1].audio.length)
    for (let i = 0; i < 2; i++) assert.deepEqual(both[i].audio, alone[i].audio)
    const big = goldens.calls.find((c) => c.seed > 2 ** 32)
    const got = await pipe.run(big.text, { seed: BigInt(big.seed), ...big.options })
    assert.ok(maxDiff(got.audio, floats(big.waveform)) <= TOLERANCE)
  })

  test('without a seed, speech still (a fresh seed each call)', TIMEOUT, async () => {
    const r = await pipe.run('ab')
    assert.ok(r.audio.length > 0 && r.audio.every(Number.isFinite))
  })

  test('bad text and options are InvalidArg before anything runs', TIMEOUT, async () => {
    const bad = [
      [42, /text: expected a string/],
      [[], /at least one text/],
      ['', /nothing to say/],
      ['!!!', /nothing to say/],
      [['ab', null], /text\[1\]: expected a string/],
      ['x'.repeat(1 << 20), /over 4096 characters/],
    ]
    for (const [text, message] of bad) await assert.rejects(pipe.run(text), coded('InvalidArg', message))
    const options = [
      [{ seed: -1 }, /seed: expected an integer/],
      [{ seed: 1.5 }, /seed/],
      [{ seed: 2n ** 63n }, /seed/],
      [{ seed: 'x' }, /seed/],
      [{ noiseScale: NaN }, /noiseScale/],
      [{ speakingRate: 0 }, /speakingRate/],
      [{ noiseScaleDuration: Infinity }, /noiseScaleDuration/],
      [{ temperature: 1 }, /temperature/],
    ]
    for (const [o, message] of options) await assert.rejects(pipe.run('ab', o), coded('InvalidArg', message))
  })

  test('maxChars, maxDurationS, maxQueue and a signal', TIMEOUT, async () => {
    const short = await TextToSpeechPipeline.load(FOLDER, { maxChars: 5, maxDurationS: 0.05, maxQueue: 0 })
    try {
      assert.equal(short.maxChars, 5)
      await assert.rejects(short.run('abcdef'), coded('InvalidArg', /over 5 characters/))
      // 'hello' lasts 0.33 s at seed 0 (goldens): past 0.05 s, refused before the decoder runs.
      await assert.rejects(
        short.run('hello', { seed: 0 }),
        coded('InvalidArg', /would last .* over the pipeline's maxDurationS/),
      )
      // One runs, none may wait: a second call made in the same tick is refused at once.
      const first = short.run('ab', { seed: 1, noiseScaleDuration: 0 })
      await assert.rejects(short.run('ab'), coded('QueueFull'))
      await first.catch(() => {})
      await assert.rejects(short.run('ab', { signal: AbortSignal.abort() }), coded('Aborted'))
    } finally {
      short.dispose()
    }
    await assert.rejects(short.run('ab'), coded('Disposed'))
    // Disposed with a call waiting behind one running: the waiting one is refused, not run.
    const twice = await TextToSpeechPipeline.load(FOLDER)
    const running = twice.run('ab', { seed: 1 }).then(
      (r) => r.audio.length,
      (e) => e.code,
    )
    const waiting = twice.run(['ab', 'ba'], { seed: 1 })
    twice.dispose()
    await assert.rejects(waiting, coded('Disposed'))
    const first = await running // it ran (its samples), or it had not started when dispose() came
    assert.ok(first === 'Disposed' || (Number.isInteger(first) && first > 0), String(first))
    await assert.rejects(TextToSpeechPipeline.load(FOLDER, { maxChars: 0 }), coded('InvalidArg', /maxChars/))
    await assert.rejects(TextToSpeechPipeline.load(__dirname), coded('ModelLoadError', /manifest\.json/))
    await assert.rejects(TextToSpeechPipeline.load(path.join(DIR, 'vits-src')), coded('ModelLoadError'))
  })

  test('hostile input in a child process ends in coded errors, never a crash', TIMEOUT, () => {
    const lib = JSON.stringify(path.join(__dirname, '..', 'lib', 'audio', 'text-to-speech.js'))
    const out = childOut(
      `
      const { TextToSpeechPipeline } = require(${lib})
      ;(async () => {
        const p = await TextToSpeechPipeline.load(${JSON.stringify(FOLDER)})
        const codes = []
        const inputs = ['', 'é'.repeat(1 << 20), Symbol('x'), { toString: () => 'ab' }, '\\u0000\\ud800', '🙂'.repeat(5000)]
        for (const t of inputs) codes.push(await p.run(t).then(() => 'ok', (e) => e.code))
        for (const o of [{ noiseScale: NaN }, { seed: {} }, { speakingRate: -1 }, 7, { signal: 'x' }])
          codes.push(await p.run('ab', o).then(() => 'ok', (e) => e.code))
        codes.push((await p.run('ab', { seed: 5 })).audio.length > 0)
        p.dispose()
        console.log('OUT ' + JSON.stringify(codes))
      })()
      `,
      { timeout: 60_000 },
    )
    const invalid = Array(11).fill('InvalidArg')
    assert.deepEqual(out, [...invalid, true])
  })
})

describe('encodeWav', () => {
  test('16-bit PCM and float WAV: the 44-byte header, then the samples', () => {
    const audio = new Float32Array([0, 0.5, -0.5, 1.5, -2, NaN, 1 / 32767])
    const wav = encodeWav(audio, 16000)
    assert.equal(wav.length, 44 + 2 * audio.length)
    assert.equal(wav.toString('latin1', 0, 4), 'RIFF')
    assert.equal(wav.readUInt32LE(4), 36 + 2 * audio.length)
    assert.equal(wav.toString('latin1', 8, 16), 'WAVEfmt ')
    assert.deepEqual(
      [wav.readUInt32LE(16), wav.readUInt16LE(20), wav.readUInt16LE(22), wav.readUInt32LE(24)],
      [16, 1, 1, 16000],
    )
    assert.deepEqual([wav.readUInt32LE(28), wav.readUInt16LE(32), wav.readUInt16LE(34)], [32000, 2, 16])
    assert.equal(wav.toString('latin1', 36, 40), 'data')
    assert.equal(wav.readUInt32LE(40), 2 * audio.length)
    const samples = Array.from({ length: audio.length }, (_, i) => wav.readInt16LE(44 + 2 * i))
    assert.deepEqual(samples, [0, 16384, -16384, 32767, -32767, 0, 1])
    const f = encodeWav(audio, 22050, { format: 'float32' })
    assert.deepEqual([f.readUInt16LE(20), f.readUInt16LE(34), f.readUInt32LE(28)], [3, 32, 22050 * 4])
    assert.deepEqual(new Float32Array(f.buffer.slice(f.byteOffset + 44, f.byteOffset + f.length)), audio)
  })

  test('bad arguments are InvalidArg', () => {
    assert.throws(() => encodeWav([0.1], 16000), coded('InvalidArg', /Float32Array/))
    assert.throws(() => encodeWav(new Float32Array(1), 0), coded('InvalidArg', /samplingRate/))
    assert.throws(() => encodeWav(new Float32Array(1), 16000, { format: 'mp3' }), coded('InvalidArg', /format/))
  })
})

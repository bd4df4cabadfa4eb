// @ts-check
'use strict'
// The text-to-speech pipeline over a folder python/export_tts.py wrote (VitsModel: Facebook's
// MMS-TTS): transformers' TextToAudioPipeline for VITS. The text is tokenized here
// (vits-tokenizer.js: VitsTokenizer's characters), then one scripted program (model.pt) runs on
// torch-node's executor through a Batcher (one call at a time: the program's torch.Generator is
// its own, seeded per call): text encoder, durations, alignment, flow and HiFi-GAN. With `seed`,
// the waveform is transformers' VitsModel(**tokenizer(text)) after torch.manual_seed(seed).
const crypto = require('node:crypto')
const fs = require('node:fs')
const path = require('node:path')
const { Batcher } = require('../batcher')
const { codedError, describe } = require('../errors')
const opt = require('../options')
const torch = require('../torch')
const { VitsTokenizer } = require('./vits-tokenizer')

/** @import { Tensor, ScriptModule } from '../../index' */

// The public types below become index.d.ts's declarations (tools/lib-typings.js).
/**
 * Speech for one text, as transformers' text-to-speech pipeline answers it.
 * @typedef {object} SpeechAudio
 * @property {Float32Array} audio Mono samples in [-1, 1] (HiFi-GAN's tanh), at `samplingRate`.
 * @property {number} samplingRate Samples a second (the checkpoint's: 16000 for MMS-TTS).
 */
/**
 * Options of `TextToSpeechPipeline.run`; any other key is refused (`InvalidArg`).
 * @typedef {object} TextToSpeechOptions
 * @property {number | bigint} [seed] Seeds the call's noise (0 ≤ seed < 2^63): the waveform equals
 *   transformers' `VitsModel(**inputs)` run after `torch.manual_seed(seed)`. Each text of an array
 *   gets the same seed. Without it, a random seed each call (VITS is stochastic).
 * @property {number} [speakingRate] Faster (> 1) or slower speech: durations divided by it (0.1..10;
 *   default the checkpoint's `speaking_rate`, 1).
 * @property {number} [noiseScale] The prior noise's scale (0..10; default the checkpoint's, 0.667); 0:
 *   no noise in the spectrogram.
 * @property {number} [noiseScaleDuration] The duration noise's scale (0..10; default the checkpoint's,
 *   0.8); 0: the durations are deterministic.
 * @property {AbortSignal} [signal] Aborting rejects with `Aborted` while the call waits (a text
 *   being synthesized finishes; the texts after it are not run).
 */
/**
 * Options of `TextToSpeechPipeline.load`; any other key is refused (`InvalidArg`).
 * @typedef {object} TextToSpeechLoadOptions
 * @property {number} [maxChars] The longest text, in characters (code points) (default 4096, OpenAI's
 *   limit; at most 100000): longer is `InvalidArg` before anything runs.
 * @property {number} [maxDurationS] The longest speech made, in seconds (default 600, at most 3600):
 *   a text whose predicted durations pass it is `InvalidArg`, found before the decoder runs.
 * @property {number} [maxQueue] Calls that may wait while one runs (default 64); past it `run` rejects
 *   with `QueueFull`.
 * @property {AbortSignal} [signal] Aborting rejects the load with `Aborted`.
 */

const MAX_SEED = 2n ** 63n - 1n
// The typed arrays' own getters: a subclass or a Proxy may lie about `length` and `buffer`.
const TYPED_ARRAY = Object.getPrototypeOf(Uint8Array).prototype
const tagOf = /** @type {(this: unknown) => string | undefined} */ (
  Object.getOwnPropertyDescriptor(TYPED_ARRAY, Symbol.toStringTag)?.get
)
const lengthOf = /** @type {(this: unknown) => number} */ (Object.getOwnPropertyDescriptor(TYPED_ARRAY, 'length')?.get)
const scale = opt.number({ min: 0, max: 10, expected: 'a number 0..10' })
const RUN_OPTIONS = opt.bag({
  seed: opt.any,
  speakingRate: opt.number({ min: 0.1, max: 10, expected: 'a number 0.1..10' }),
  noiseScale: scale,
  noiseScaleDuration: scale,
  signal: opt.instance(AbortSignal, 'an AbortSignal'),
})
const LOAD_OPTIONS = opt.bag({
  maxChars: opt.integer({ min: 1, max: 100_000 }),
  maxDurationS: opt.number({ min: 0.01, max: 3600, expected: 'a number of seconds in (0, 3600]' }),
  maxQueue: opt.integer({ min: 0 }),
  signal: opt.instance(AbortSignal, 'an AbortSignal'),
})
const LOAD = Symbol('TextToSpeechPipeline.load')

/** @param {string} message @param {Function} [caller] */
const invalid = (message, caller) => codedError('InvalidArg', message, caller)

/**
 * Text to speech with a VITS checkpoint (Facebook's MMS-TTS, `VitsModel`, exported with
 * python/export_tts.py). Made with `TextToSpeechPipeline.load(folder)` or
 * `torch.pipeline('text-to-speech', folder)`.
 */
class TextToSpeechPipeline {
  /** @type {any} */ #manifest
  /** @type {ScriptModule} */ #model
  /** @type {InstanceType<typeof Batcher>} */ #batcher
  /** @type {VitsTokenizer} */ #tokenizer
  #maxChars
  #maxFrames
  #maxQueue
  /** Calls admitted and not finished: one runs, the others wait in the Batcher. */
  #active = 0
  #disposed = false

  /**
   * Throws `InvalidArg`: use `TextToSpeechPipeline.load(folder)`.
   * @private
   * @param {symbol} token @param {any} manifest @param {ScriptModule} model @param {VitsTokenizer} tokenizer
   * @param {{ maxChars?: number; maxDurationS?: number; maxQueue?: number }} o
   */
  constructor(token, manifest, model, tokenizer, o) {
    if (token !== LOAD) throw invalid('new TextToSpeechPipeline(): use await TextToSpeechPipeline.load(folder)')
    this.#manifest = manifest
    this.#model = model
    this.#tokenizer = tokenizer
    this.#maxChars = o.maxChars ?? 4096
    this.#maxFrames = Math.floor(((o.maxDurationS ?? 600) * manifest.samplingRate) / manifest.hop)
    this.#maxQueue = o.maxQueue ?? 64
    // One text at a time: the program's generator is one object, seeded at the start of each call.
    this.#batcher = new Batcher(model, { maxBatchSize: 1, maxDelayMs: 0, concurrency: 1, maxQueue: Infinity })
  }

  /**
   * Loads a folder python/export_tts.py wrote. Errors: `ModelLoadError`, `InvalidArg`, `Aborted`.
   * @param {string} folder
   * @param {TextToSpeechLoadOptions} [options]
   * @returns {Promise<TextToSpeechPipeline>}
   */
  static async load(folder, options) {
    const load = TextToSpeechPipeline.load
    if (typeof folder !== 'string') throw invalid(`folder: expected a path, got ${describe(folder)}`, load)
    const o = opt.read(options, LOAD_OPTIONS, 'TextToSpeechPipeline.load: options', load)
    let manifest, vocab
    try {
      manifest = JSON.parse(fs.readFileSync(path.join(folder, 'manifest.json'), 'utf8'))
      if (manifest?.format !== 'torch-node/tts-model' || manifest.kind !== 'text-to-speech') {
        throw new Error(
          `not a text-to-speech export (kind '${manifest?.kind}'); export a VitsModel (MMS-TTS) with python/export_tts.py`,
        )
      }
      vocab = JSON.parse(fs.readFileSync(path.join(folder, manifest.tokenizer.vocab), 'utf8'))
    } catch (e) {
      throw codedError('ModelLoadError', `${folder}: ${/** @type {Error} */ (e).message}`, load)
    }
    const tokenizer = new VitsTokenizer(vocab, manifest.tokenizer)
    const model = await torch().ScriptModule.load(
      path.join(folder, manifest.program),
      ...(o.signal ? [{ signal: o.signal }] : []),
    )
    return new TextToSpeechPipeline(LOAD, manifest, model, tokenizer, o)
  }

  /** `'text-to-speech'`. @returns {'text-to-speech'} */
  get task() {
    return 'text-to-speech'
  }

  /** Samples a second of the speech made (the checkpoint's `sampling_rate`). */
  get samplingRate() {
    return this.#manifest.samplingRate
  }

  /** The longest text `run` takes, in characters (code points). */
  get maxChars() {
    return this.#maxChars
  }

  /** True once `dispose()` was called. */
  get isDisposed() {
    return this.#disposed
  }

  /**
   * The token ids the model reads for `text` (transformers' VitsTokenizer: lower-cased, characters
   * outside the vocabulary dropped, a blank between characters). Errors: `InvalidArg`.
   * @param {string} text
   * @returns {number[]}
   */
  tokenize(text) {
    if (typeof text !== 'string')
      throw invalid(`tokenize: text: expected a string, got ${describe(text)}`, this.tokenize)
    return this.#tokenizer.encode(text, this.tokenize)
  }

  /**
   * Speech for `text` (`{audio, samplingRate}`), or for each of an array of texts (an array of
   * those, each text run alone), as transformers' `pipeline('text-to-speech')`. Every text is
   * checked before any runs: a string of at most `maxChars` characters with something to say (a
   * text with no character of the vocabulary is `InvalidArg`). Errors: `InvalidArg`, `QueueFull`,
   * `Aborted`, `Disposed`, `ForwardError`.
   * @param {string | string[]} text
   * @param {TextToSpeechOptions} [options]
   * @returns {Promise<SpeechAudio | SpeechAudio[]>}
   */
  async run(text, options) {
    const name = 'TextToSpeechPipeline.run'
    const o = opt.read(options, RUN_OPTIONS, `${name}: options`, this.run)
    const seed = o.seed === undefined ? BigInt(crypto.randomInt(2 ** 47)) : readSeed(o.seed, this.run)
    const batched = Array.isArray(text)
    const texts = batched ? Array.from(text) : [text]
    if (texts.length === 0) throw invalid(`${name}: text: expected at least one text`, this.run)
    const ids = texts.map((t, i) => this.#ids(t, batched ? `${name}: text[${i}]` : `${name}: text`))
    if (this.#disposed) throw codedError('Disposed', 'the text-to-speech model was disposed', this.run)
    const m = this.#manifest
    const settings = [
      o.noiseScale ?? m.noiseScale,
      o.noiseScaleDuration ?? m.noiseScaleDuration,
      o.speakingRate ?? m.speakingRate,
      this.#maxFrames,
    ]
    if (this.#active > this.#maxQueue) {
      throw codedError(
        'QueueFull',
        `${name}: ${this.#active} calls in flight already (maxQueue ${this.#maxQueue})`,
        this.run,
      )
    }
    this.#active++
    try {
      const out = []
      for (const row of ids) {
        if (o.signal?.aborted) throw codedError('Aborted', 'the signal was aborted', this.run)
        out.push(await this.#speak(row, seed, settings, o.signal))
      }
      return batched ? out : out[0]
    } finally {
      this.#active--
    }
  }

  /** The ids of one checked text. @param {unknown} text @param {string} what */
  #ids(text, what) {
    if (typeof text !== 'string') throw invalid(`${what}: expected a string, got ${describe(text)}`, this.run)
    // Counted in code points, stopping past the limit: a megabyte is not walked.
    let chars = 0
    for (let i = 0; i < text.length && chars <= this.#maxChars; i++, chars++) {
      if (text.charCodeAt(i) >= 0xd800 && text.charCodeAt(i) < 0xdc00) i++
    }
    if (chars > this.#maxChars) {
      throw invalid(`${what}: over ${this.#maxChars} characters (the pipeline's maxChars)`, this.run)
    }
    const ids = this.#tokenizer.encode(text, this.run)
    if (ids.length === 0) {
      throw invalid(
        `${what}: nothing to say: no character of the model's vocabulary in ${JSON.stringify(text.slice(0, 40))}`,
        this.run,
      )
    }
    return ids
  }

  /**
   * One text through the program.
   * @param {number[]} ids @param {bigint} seed @param {number[]} settings @param {AbortSignal} [signal]
   * @returns {Promise<SpeechAudio>}
   */
  async #speak(ids, seed, settings, signal) {
    const input = torch().tensor([ids], { dtype: 'int64' })
    /** @type {Tensor[]} */
    let outputs = []
    try {
      const call = signal ? [{ signal }] : []
      // The seed as a BigInt: the program's `int` is 64-bit (IValue's typing says number only).
      const args = /** @type {any[]} */ ([input, seed, ...settings, ...call])
      outputs = /** @type {Tensor[]} */ (await this.#batcher.run(...args))
      const [waveform, samples] = outputs
      const count = Number(samples.toTypedArray()[0])
      if (waveform.shape[1] === 0) {
        const seconds = (count / this.samplingRate).toFixed(1)
        const limit = ((this.#maxFrames * this.#manifest.hop) / this.samplingRate).toFixed(1)
        throw invalid(`the speech would last ${seconds} s, over the pipeline's maxDurationS (${limit} s)`, this.run)
      }
      const audio = /** @type {Float32Array} */ (waveform.toTypedArray()).slice(0, count)
      return { audio, samplingRate: this.samplingRate }
    } catch (e) {
      // dispose() closes the Batcher: the texts waiting in it are refused as Disposed, as later calls.
      if (/** @type {any} */ (e)?.code === 'Closed') {
        throw codedError('Disposed', 'the text-to-speech model was disposed', this.run)
      }
      throw e
    } finally {
      input.dispose()
      for (const t of outputs) t.dispose()
    }
  }

  /** Frees the program once the text running ends; waiting and later calls reject with `Disposed`. */
  dispose() {
    if (this.#disposed) return
    this.#disposed = true
    this.#batcher.close().finally(() => this.#model.dispose())
  }

  [Symbol.dispose]() {
    this.dispose()
  }
}

/** A seed as the program's int: 0 ≤ seed < 2^63. @param {unknown} seed @param {Function} caller */
function readSeed(seed, caller) {
  const ok =
    (typeof seed === 'number' && Number.isSafeInteger(seed) && seed >= 0) ||
    (typeof seed === 'bigint' && seed >= 0n && seed <= MAX_SEED)
  if (!ok) {
    const got = typeof seed === 'number' || typeof seed === 'bigint' ? String(seed) : describe(seed)
    throw invalid(
      `TextToSpeechPipeline.run: options.seed: expected an integer 0..2^63-1 (a number or a BigInt), got ${got}`,
      caller,
    )
  }
  return BigInt(/** @type {number | bigint} */ (seed))
}

/**
 * `audio` as a WAV file: 16-bit PCM (`'pcm16'`, the default: samples clamped to [-1, 1] and rounded
 * to ±32767, half away from zero) or 32-bit float (`'float32'`), mono, at `samplingRate`; the 44-byte RIFF header then the
 * samples, little-endian, as a Buffer (a Uint8Array: the typings need no Node types). Errors: `InvalidArg`.
 * @param {Float32Array} audio
 * @param {number} samplingRate
 * @param {{ format?: 'pcm16' | 'float32' }} [options]
 * @returns {Uint8Array}
 */
function encodeWav(audio, samplingRate, options) {
  if (tagOf.call(audio) !== 'Float32Array')
    throw invalid(`encodeWav: audio: expected a Float32Array, got ${describe(audio)}`, encodeWav)
  if (!(Number.isInteger(samplingRate) && samplingRate >= 1 && samplingRate <= 1_000_000)) {
    throw invalid(`encodeWav: samplingRate: expected an integer 1..1000000, got ${describe(samplingRate)}`, encodeWav)
  }
  const { format = 'pcm16' } = opt.read(
    options,
    { format: opt.oneOf(['pcm16', 'float32']) },
    'encodeWav: options',
    encodeWav,
  )
  const width = format === 'pcm16' ? 2 : 4
  const samples = lengthOf.call(audio)
  const bytes = samples * width
  if (bytes > 0xffffffff - 36) throw invalid(`encodeWav: ${samples} samples are over WAV's 4 GiB`, encodeWav)
  const out = Buffer.alloc(44 + bytes)
  out.write('RIFF', 0, 'latin1')
  out.writeUInt32LE(36 + bytes, 4)
  out.write('WAVEfmt ', 8, 'latin1')
  out.writeUInt32LE(16, 16) // the fmt chunk's size
  out.writeUInt16LE(format === 'pcm16' ? 1 : 3, 20) // 1: PCM, 3: IEEE float
  out.writeUInt16LE(1, 22) // mono
  out.writeUInt32LE(samplingRate, 24)
  out.writeUInt32LE(samplingRate * width, 28) // bytes a second
  out.writeUInt16LE(width, 32) // bytes a frame
  out.writeUInt16LE(width * 8, 34)
  out.write('data', 36, 'latin1')
  out.writeUInt32LE(bytes, 40)
  if (format === 'float32') for (let i = 0; i < samples; i++) out.writeFloatLE(audio[i], 44 + 4 * i)
  else pcm16(audio, out, 44)
  return out
}

/**
 * The samples as 16-bit little-endian PCM into `out` at `offset`: clamped to [-1, 1], times 32767,
 * rounded half away from zero (NaN as 0).
 * @param {Float32Array} audio @param {Buffer} out @param {number} offset
 */
function pcm16(audio, out, offset) {
  const samples = lengthOf.call(audio)
  for (let i = 0; i < samples; i++) {
    const x = audio[i]
    // Half away from zero, the same both sides (Math.round alone rounds -0.5 up).
    const v = x >= 1 ? 32767 : x <= -1 ? -32767 : Number.isNaN(x) ? 0 : Math.sign(x) * Math.round(Math.abs(x) * 32767)
    out.writeInt16LE(v, offset + 2 * i)
  }
}

module.exports.TextToSpeechPipeline = TextToSpeechPipeline
module.exports.encodeWav = encodeWav
module.exports.pcm16 = pcm16

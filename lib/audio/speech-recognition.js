// @ts-check
'use strict'
// SpeechRecognitionPipeline: speech to text with Whisper, from a folder written by
// python/export_whisper.py. The work is native (src/speech.rs over crates/core/src/audio/): the
// audio file is decoded (WAV, FLAC, MP3, Ogg/Vorbis), down-mixed, resampled to 16 kHz, turned into
// Whisper's log-mel features and decoded (greedy, beam search or sampling) on torch-node's executor,
// off the event loop.
// This file checks the options and turns the native failure sentinel into a thrown coded error.
const fs = require('node:fs')
const path = require('node:path')
const { loadAddon } = require('../addon')
const { codedError, describe, callNative: call } = require('../errors')
const opt = require('../options')

const native = loadAddon()

const LOAD = Symbol('SpeechRecognitionPipeline.load')
const MODEL = Symbol('model')
const RATE = Symbol('samplingRate')
const BEAMS = Symbol('numBeams')

/** The longest audio `maxDurationS` may allow: 3 hours (its samples alone take 64 KB a second). */
const MAX_DURATION_S = 3 * 3600
const seconds = opt.number({ min: 0, max: 30, expected: 'a number of seconds 0..30' })
const temperature = opt.number({ min: 0, max: 2, expected: 'a temperature 0..2' })
const RUN_OPTIONS = opt.bag({
  language: opt.string,
  task: opt.oneOf(['transcribe', 'translate']),
  maxNewTokens: opt.integer({ min: 1, max: 4096 }),
  maxDurationS: opt.number({
    min: 0.001,
    max: MAX_DURATION_S,
    expected: `a number of seconds in (0, ${MAX_DURATION_S}]`,
  }),
  numBeams: opt.integer({ min: 1, max: 16 }),
  lengthPenalty: opt.number(),
  earlyStopping: opt.oneOf([true, false, 'never']),
  returnTimestamps: opt.boolean,
  chunkLengthS: opt.number({ min: 0.1, max: 30, expected: 'a number of seconds 0.1..30' }),
  strideLengthS: opt.either([seconds, opt.arrayOf(seconds, 'seconds')], 'seconds or [left, right] seconds'),
  temperature: opt.either(
    [temperature, opt.arrayOf(temperature, 'temperatures', { min: 1 })],
    'a temperature 0..2 or a list of them',
  ),
  compressionRatioThreshold: opt.number({ min: 0 }),
  logprobThreshold: opt.number({ max: 0 }),
  noSpeechThreshold: opt.number({ min: 0, max: 1 }),
  seed: opt.integer({ min: 0, max: 2 ** 32 - 1 }),
  signal: opt.instance(AbortSignal, 'an AbortSignal'),
})

/**
 * Speech to text (Whisper): `automatic-speech-recognition` as transformers' pipeline (greedy or
 * beam search, as the checkpoint's generation config says, or `numBeams`).
 * Made with `SpeechRecognitionPipeline.load(folder)`.
 */
class SpeechRecognitionPipeline {
  /**
   * Throws `InvalidArg`: use `SpeechRecognitionPipeline.load(folder)`.
   * @private
   * @param {symbol} token @param {any} model
   */
  constructor(token, model) {
    if (token !== LOAD) {
      throw codedError(
        'InvalidArg',
        'SpeechRecognitionPipeline: use SpeechRecognitionPipeline.load(folder)',
        SpeechRecognitionPipeline,
      )
    }
    this[MODEL] = model
    this[RATE] = model.samplingRate
    this[BEAMS] = model.checkpointNumBeams
  }

  /**
   * Loads a folder python/export_whisper.py wrote from a WhisperForConditionalGeneration
   * checkpoint. Errors: `ModelLoadError`, `InvalidArg`.
   * @param {string} folder
   * @param {{}} [options] none yet (CPU, float32)
   * @returns {Promise<SpeechRecognitionPipeline>}
   */
  static async load(folder, options) {
    const where = 'SpeechRecognitionPipeline.load'
    if (typeof folder !== 'string')
      throw codedError(
        'InvalidArg',
        `${where}: folder: expected a string, got ${describe(folder)}`,
        SpeechRecognitionPipeline.load,
      )
    opt.read(options, {}, `${where}: options`, SpeechRecognitionPipeline.load)
    const manifest = path.join(folder, 'manifest.json')
    if (!fs.existsSync(manifest))
      throw codedError(
        'ModelLoadError',
        `${where}: no manifest.json in '${folder}' (export with python/export_whisper.py)`,
        SpeechRecognitionPipeline.load,
      )
    const model = call(native._SpeechModel._open, native._SpeechModel, [folder], where, SpeechRecognitionPipeline.load)
    return new SpeechRecognitionPipeline(LOAD, model)
  }

  /**
   * `'automatic-speech-recognition'`.
   * @returns {'automatic-speech-recognition'}
   */
  get task() {
    return 'automatic-speech-recognition'
  }

  /**
   * The rate `Float32Array` input must be at (16000).
   * @returns {number}
   */
  get samplingRate() {
    return this[RATE]
  }

  /**
   * The beams `run` searches with when `numBeams` is not given: the checkpoint's generation
   * config's `num_beams` (1 where it has none: greedy).
   * @returns {number}
   */
  get numBeams() {
    return this[BEAMS]
  }

  /**
   * Transcribes (or translates) `audio`: an encoded file (a Buffer or Uint8Array of WAV, FLAC, MP3
   * or Ogg/Vorbis, or a path to one) or mono samples at `samplingRate` (a Float32Array), as
   * transformers' `pipeline('automatic-speech-recognition')` (greedy).
   *
   * Options: `language` (a code, `<|en|>` or a name; detected when not given), `task`,
   * `maxNewTokens` (per 30 s window), `maxDurationS` (longer audio is refused, `InvalidArg`;
   * default 1200, at most 10800), `returnTimestamps` (timestamp tokens generated, and `chunks`:
   * `[{ timestamp: [start, end], text, tokens }]` in seconds, `end` null where the model left the
   * last one open), `chunkLengthS` (the audio cut into chunks of this many seconds, ≤ 30, decoded
   * alone and merged where they overlap) with `strideLengthS` (the overlap, seconds or
   * `[left, right]`, default chunkLengthS / 6). Audio over 30 s needs `returnTimestamps` (decoded
   * window after window, as transformers' long-form generate) or `chunkLengthS`, else `InvalidArg`.
   *
   * Beam search, as transformers' `generate`: `numBeams` (1..16; default the checkpoint's generation
   * config's `num_beams`, 1 for OpenAI's Whisper checkpoints: greedy, where transformers' pipeline
   * would take 5; pass `numBeams: 5` for the pipeline's result), `lengthPenalty` (default 1: a
   * finished beam's score is its summed log-probability over its length to this power) and
   * `earlyStopping` (`false`, the default: stop when no running beam can beat the finished ones;
   * `true`: once `numBeams` beams have finished; `'never'`), the last two only with beams
   * (`InvalidArg` otherwise). Beams search at temperature 0; a fallback temperature above 0 samples
   * with one beam, and the later windows of that call decode with one beam too (as transformers'
   * `generate_with_fallback` leaves its config).
   *
   * Temperature fallback, as transformers' `generate`: `temperature` (default 0: greedy; a list
   * is tried in turn, each above 0 sampling, seeded by `seed`, default 0), with
   * `compressionRatioThreshold` (e.g. 2.4) and `logprobThreshold` (e.g. -1): a window whose token
   * compression ratio is over the one or average log-probability under the other is decoded again
   * at the next temperature; `noSpeechThreshold` (e.g. 0.6, needs `logprobThreshold`): a window
   * whose `<|nospeech|>` probability is over it, and log-probability under, is skipped as silence.
   * With timestamps each chunk says how its window's kept pass looked: `seek` (its first feature
   * frame, 10 ms each), `temperature`, `avgLogprob`, `compressionRatio` (of its text, as OpenAI's
   * whisper) and `noSpeechProb`.
   *
   * Resolves to `{ text, tokens, language, duration }` (+ `chunks`): the text, the decoder's tokens
   * (the prompt, then each window's tokens), the language used (given or detected) and the audio's
   * seconds. Errors: `InvalidArg` (bad options, undecodable audio: "invalid audio: ..."),
   * `Aborted`, `ForwardError`.
   * @param {Uint8Array | string | Float32Array} audio
   * @param {{language?: string, task?: 'transcribe' | 'translate', maxNewTokens?: number,
   *   maxDurationS?: number, numBeams?: number, lengthPenalty?: number,
   *   earlyStopping?: boolean | 'never', returnTimestamps?: boolean, chunkLengthS?: number,
   *   strideLengthS?: number | [number, number], temperature?: number | number[],
   *   compressionRatioThreshold?: number, logprobThreshold?: number, noSpeechThreshold?: number,
   *   seed?: number, signal?: AbortSignal}} [options]
   * @returns {Promise<{text: string, tokens: number[], language: string | null, duration: number,
   *   chunks?: {timestamp: [number | null, number | null], text: string, tokens: number[],
   *   seek: number, temperature: number, avgLogprob: number, compressionRatio: number,
   *   noSpeechProb: number | null}[]}>}
   */
  async run(audio, options) {
    const where = 'SpeechRecognitionPipeline.run'
    const o = opt.read(options, RUN_OPTIONS, `${where}: options`, this.run)
    if (!(typeof audio === 'string' || audio instanceof Uint8Array || audio instanceof Float32Array)) {
      throw codedError(
        'InvalidArg',
        `${where}: audio: expected a Buffer, a path or a Float32Array, got ${describe(audio)}`,
        this.run,
      )
    }
    const m = this[MODEL]
    if (m === null) throw codedError('Disposed', `${where}: the pipeline was disposed`, this.run)
    let stride = o.strideLengthS
    if (stride !== undefined && o.chunkLengthS === undefined) {
      throw codedError('InvalidArg', `${where}: options.strideLengthS: needs chunkLengthS`, this.run)
    }
    if (o.noSpeechThreshold !== undefined && o.logprobThreshold === undefined) {
      throw codedError('InvalidArg', `${where}: options.noSpeechThreshold: needs logprobThreshold`, this.run)
    }
    if (typeof stride === 'number') stride = [stride, stride]
    else if (stride !== undefined && stride.length !== 2) {
      throw codedError('InvalidArg', `${where}: options.strideLengthS: expected [left, right] seconds`, this.run)
    }
    const args = [
      audio,
      o.language,
      o.task,
      o.maxNewTokens,
      o.maxDurationS,
      o.returnTimestamps,
      o.chunkLengthS,
      stride,
      typeof o.temperature === 'number' ? [o.temperature] : o.temperature,
      [o.compressionRatioThreshold ?? null, o.logprobThreshold ?? null, o.noSpeechThreshold ?? null],
      o.seed,
      o.numBeams,
      o.lengthPenalty,
      o.earlyStopping === undefined ? undefined : String(o.earlyStopping),
      o.signal,
    ]
    const result = await call(m._transcribe, m, args, where, this.run)
    return result
  }

  /**
   * Lets the model's programs go: they are freed once no `run` in flight holds them (at once when
   * none runs); later calls throw `Disposed`. Calling it again does nothing.
   */
  dispose() {
    this[MODEL] = null
  }
}

module.exports.SpeechRecognitionPipeline = SpeechRecognitionPipeline

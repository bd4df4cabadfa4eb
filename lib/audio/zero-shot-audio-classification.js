// @ts-check
'use strict'
// torch.pipeline('zero-shot-audio-classification', folder): transformers 5's
// ZeroShotAudioClassificationPipeline over a CLAP folder python/export_clap.py wrote. Each label
// becomes `hypothesisTemplate` with the label in it, both towers embed, and the scores are
// ClapModel's logits_per_audio (the cosine similarity times exp(logit_scale_a)) softmaxed over the labels.
const { codedError } = require('../errors')
const opt = require('../options')
const { ClapModel } = require('./clap-model')
const { CALL_OPTIONS } = require('../vision/model-folder')
const { fillTemplate } = require('../vision/zero-shot-image-classification')

/** @import { AudioInput } from './audio-classification' */

// The public types below become index.d.ts's declarations (tools/lib-typings.js).
/**
 * A label and its score.
 * @typedef {object} ZeroShotAudioClassificationLabel
 * @property {string} label One of `candidateLabels`.
 * @property {number} score Its softmax probability over the labels.
 */
/**
 * Options of `ZeroShotAudioClassificationPipeline.run`; any other key is refused (`InvalidArg`).
 * @typedef {object} ZeroShotAudioClassificationOptions
 * @property {string[]} candidateLabels The labels to score (at least one).
 * @property {string} [hypothesisTemplate] The sentence each label goes into at `{}` (default
 *   `'This is a sound of {}.'`, as transformers').
 * @property {AbortSignal} [signal] Aborting rejects with `Aborted` while the call's requests are still queued.
 * @property {number} [timeoutMs] The longest a request may wait in the queue, in milliseconds (then `Timeout`).
 */
/**
 * Options of `ZeroShotAudioClassificationPipeline.load`.
 * @typedef {object} ZeroShotAudioClassificationLoadOptions
 * @property {number} [maxBatchSize] The most texts or clips a tower's forward takes (default 32).
 * @property {number} [maxDelayMs] How long a forward waits for more requests (default 0).
 * @property {number} [maxQueue] The most requests a tower queues before `QueueFull` (default 1024).
 * @property {AbortSignal} [signal] Aborting rejects the load with `Aborted`.
 */

const TEMPLATE = 'This is a sound of {}.'
/** The most hypotheses whose text embeddings a pipeline keeps (512-dim: 2 KiB each, 8 MiB in all). */
const TEXT_CACHE = 4096
const LOAD = Symbol('ZeroShotAudioClassificationPipeline.load')
const RUN_OPTIONS = opt.bag(
  {
    candidateLabels: opt.arrayOf(opt.string, 'an array of strings', { min: 1 }),
    hypothesisTemplate: opt.string,
    ...CALL_OPTIONS,
  },
  { required: ['candidateLabels'] },
)

/**
 * Softmax of one clip's logits over the labels, as ZeroShotAudioClassificationPipeline.postprocess
 * (the embeddings normalized again, as ClapModel.forward does).
 * @param {Float32Array} audio @param {Float32Array[]} texts @param {number} scale @returns {number[]}
 */
function scores(audio, texts, scale) {
  const a = normalized(audio)
  const logits = texts.map((t) => {
    const txt = normalized(t)
    let dot = 0
    for (let i = 0; i < a.length; i++) dot += a[i] * txt[i]
    return dot * scale
  })
  const top = Math.max(...logits)
  const exps = logits.map((l) => Math.exp(l - top))
  const sum = exps.reduce((x, y) => x + y, 0)
  return exps.map((e) => e / sum)
}

/** A row divided by its L2 norm, in float64. @param {Float32Array} row @returns {Float64Array} */
function normalized(row) {
  let sum = 0
  for (const v of row) sum += v * v
  const n = Math.sqrt(sum)
  return Float64Array.from(row, (v) => v / n)
}

/**
 * Zero-shot audio classification with a CLAP model: which of any labels fits a sound best.
 * Concurrent `run` calls share forwards of both towers, and the labels' text embeddings are kept
 * for later calls. Made with `ZeroShotAudioClassificationPipeline.load(folder)` (or
 * `torch.pipeline('zero-shot-audio-classification', folder)`).
 */
class ZeroShotAudioClassificationPipeline {
  /** @type {ClapModel} */ #model
  /**
   * The hypotheses' text embeddings, shared by calls: callers that score the same labels (the
   * usual case) run the text tower once for them, not once each. A promise per hypothesis, most
   * recently used last, at most TEXT_CACHE; one that fails is forgotten.
   * @type {Map<string, Promise<Float32Array>>}
   */
  #texts = new Map()

  /**
   * Throws `InvalidArg`: use `ZeroShotAudioClassificationPipeline.load(folder)`.
   * @private
   * @param {symbol} token @param {ClapModel} model
   */
  constructor(token, model) {
    if (token !== LOAD) {
      throw codedError(
        'InvalidArg',
        "new ZeroShotAudioClassificationPipeline(): use await torch.pipeline('zero-shot-audio-classification', folder)",
      )
    }
    this.#model = model
  }

  /**
   * Loads a folder `npx torch-node export` (python/export_clap.py) wrote from a ClapModel checkpoint.
   * Errors: `ModelLoadError`, `InvalidArg`, `Aborted`.
   * @param {string} folder
   * @param {ZeroShotAudioClassificationLoadOptions} [options]
   * @returns {Promise<ZeroShotAudioClassificationPipeline>}
   */
  static async load(folder, options) {
    const load = ZeroShotAudioClassificationPipeline.load
    return new ZeroShotAudioClassificationPipeline(LOAD, await ClapModel.load(folder, options, load))
  }

  /** `'zero-shot-audio-classification'`. */
  get task() {
    return 'zero-shot-audio-classification'
  }

  /** The sampling rate clips are resampled to (Hz; 48000 for LAION's CLAP). @returns {number} */
  get samplingRate() {
    return this.#model.samplingRate
  }

  /**
   * The most samples a clip may have at `samplingRate` (the feature extractor's max_length_s; a
   * longer clip is refused, as transformers would cut it at random). @returns {number}
   */
  get maxSamples() {
    return this.#model.maxSamples
  }

  /** The embeddings' size. @returns {number} */
  get dim() {
    return this.#model.dim
  }

  /** True once `dispose()` was called. */
  get isDisposed() {
    return this.#model.isDisposed
  }

  /** The text and audio Batchers' counts. */
  stats() {
    return this.#model.stats()
  }

  /** @param {string[]} hypotheses @param {Function} caller @returns {Promise<Float32Array[]>} */
  #embedHypotheses(hypotheses, caller) {
    const missing = [...new Set(hypotheses.filter((h) => !this.#texts.has(h)))]
    if (missing.length > 0) {
      // Without the call's signal or timeout: the embeddings serve other callers too (a caller's
      // abort still rejects its own call through the audio tower's request).
      const pending = this.#model.embedTexts(missing, {}, caller)
      missing.forEach((h, i) =>
        this.#texts.set(
          h,
          pending.then((rows) => rows[i]),
        ),
      )
      pending.catch(() => missing.forEach((h) => this.#texts.delete(h)))
    }
    const out = hypotheses.map((h) => {
      const row = /** @type {Promise<Float32Array>} */ (this.#texts.get(h))
      this.#texts.delete(h)
      this.#texts.set(h, row)
      return row
    })
    for (const h of this.#texts.keys()) {
      if (this.#texts.size <= TEXT_CACHE) break
      this.#texts.delete(h)
    }
    return Promise.all(out)
  }

  /**
   * Scores `candidateLabels` for one clip (an array of `{score, label}`, best first; equal scores
   * keep the labels' order) or for each of an array of clips (an array of those), as transformers'
   * `pipeline('zero-shot-audio-classification')`. A clip is an encoded file (a Buffer or Uint8Array
   * of WAV, FLAC, MP3 or Ogg/Vorbis, or a path to one: decoded, down-mixed to mono and resampled to
   * `samplingRate` off the event loop), `{ raw, samplingRate }` (mono samples at a rate, resampled
   * when it is not the model's; transformers' `array` / `sampling_rate` names too), or mono float32
   * samples at `samplingRate` Hz. Each must have 1 to `maxSamples` finite samples (a clip shorter
   * than the model's length is repeated and padded as ClapFeatureExtractor does; a longer one is
   * refused: transformers would pick random parts of it); every clip is read and checked before any
   * runs. Errors: `InvalidArg` (bad options or audio), `QueueFull`, `Aborted`, `Timeout`, `Disposed`.
   * @param {AudioInput | AudioInput[]} audio
   * @param {ZeroShotAudioClassificationOptions} options
   * @returns {Promise<ZeroShotAudioClassificationLabel[] | ZeroShotAudioClassificationLabel[][]>}
   */
  async run(audio, options) {
    const name = 'ZeroShotAudioClassificationPipeline.run'
    const caller = this.run
    if (options === undefined) {
      throw codedError('InvalidArg', `${name}: options.candidateLabels: expected labels to score, got none`, caller)
    }
    const o = opt.read(options, RUN_OPTIONS, `${name}: options`, caller)
    const batched = Array.isArray(audio)
    const given = batched ? Array.from(audio) : [audio]
    if (given.length === 0) throw codedError('InvalidArg', `${name}: audio: expected at least one clip`, caller)
    const clips = []
    for (const [i, clip] of given.entries()) {
      clips.push(await this.#model.samples(clip, batched ? `${name}: audio[${i}]` : `${name}: audio`, o.signal, caller))
    }
    const labels = /** @type {string[]} */ (o.candidateLabels)
    const template = o.hypothesisTemplate ?? TEMPLATE
    const [texts, embeddings] = await Promise.all([
      this.#embedHypotheses(
        labels.map((l) => fillTemplate(template, l)),
        caller,
      ),
      this.#model.embedAudio(clips, o, caller),
    ])
    const scale = this.#model.logitScale
    const results = embeddings.map((clip) =>
      scores(clip, texts, scale)
        .map((score, i) => ({ score, label: labels[i] }))
        .sort((a, b) => b.score - a.score),
    )
    return batched ? results : results[0]
  }

  /** Frees the programs once running batches finish; calls waiting and later ones reject with `Disposed`. */
  dispose() {
    this.#model.dispose()
  }

  [Symbol.dispose]() {
    this.dispose()
  }
}

module.exports.ZeroShotAudioClassificationPipeline = ZeroShotAudioClassificationPipeline

// @ts-check
'use strict'
// The audio-classification pipeline over a folder python/export_audio.py wrote (Wav2Vec2, HuBERT,
// WavLM *ForSequenceClassification, ASTForAudioClassification): transformers 5's
// AudioClassificationPipeline. The feature extractor (Wav2Vec2FeatureExtractor: zero-mean
// unit-variance; ASTFeatureExtractor: log-mel filter banks) runs as TorchScript (preprocess.pt),
// the model as a traced TorchScript program, both on torch-node's executor; then softmax, sigmoid or
// nothing over the logits, and the topK labels, best first.
const fs = require('node:fs')
const path = require('node:path')
const { codedError, describe } = require('../errors')
const { readClip } = require('./clip-input')
const opt = require('../options')

const torch = require('../torch')
const { applyFunction } = require('../text/logits')

/** @import { Tensor, ScriptModule } from '../../index' */

// The public types below become index.d.ts's declarations (tools/lib-typings.js).
/**
 * One label of a clip, as transformers' audio-classification pipeline answers it.
 * @typedef {object} AudioClassificationLabel
 * @property {string} label The label's name (the checkpoint's `id2label`).
 * @property {number} score Its score after `functionToApply`.
 */
/**
 * Options of `AudioClassificationPipeline.run`; any other key is refused (`InvalidArg`).
 * @typedef {object} AudioClassificationOptions
 * @property {number} [topK] How many labels, best first (default 5, at most the model's label count,
 *   as transformers').
 * @property {'softmax' | 'sigmoid' | 'none'} [functionToApply] Default as transformers' pipeline:
 *   `'none'` for `problem_type` regression, `'sigmoid'` for multi-label, else `'softmax'`.
 * @property {AbortSignal} [signal] Aborting rejects with `Aborted` before the model has run.
 */
/**
 * A clip as transformers' pipelines take one as a dict: mono samples and their rate (resampled to
 * the model's when they differ). `sampling_rate` and `array` are accepted for transformers' names.
 * @typedef {object} AudioSamples
 * @property {Float32Array} raw The samples.
 * @property {number} samplingRate Their rate in Hz (1..384000).
 */
/**
 * Options of `AudioClassificationPipeline.load`.
 * @typedef {object} AudioClassificationLoadOptions
 * @property {AbortSignal} [signal] Aborting rejects the load with `Aborted`.
 */

const RUN_OPTIONS = opt.bag({
  topK: opt.integer({ min: 1 }),
  functionToApply: opt.oneOf(['softmax', 'sigmoid', 'none']),
  signal: opt.instance(AbortSignal, 'an AbortSignal'),
})
const LOAD_OPTIONS = opt.bag({ signal: opt.instance(AbortSignal, 'an AbortSignal') })
const LOAD = Symbol('AudioClassificationPipeline.load')
/**
 * A clip `run` takes: an encoded file (bytes or a path), samples at a rate, or samples at the
 * model's rate.
 * @typedef {Uint8Array | string | AudioSamples | Float32Array} AudioInput
 */
/** @param {string} message @param {Function} [caller] */
const invalid = (message, caller) => codedError('InvalidArg', message, caller)

/**
 * Audio classification with a transformers checkpoint (Wav2Vec2, HuBERT, WavLM
 * `*ForSequenceClassification`, `ASTForAudioClassification` exported with python/export_audio.py). Made with
 * `AudioClassificationPipeline.load(folder)`.
 */
class AudioClassificationPipeline {
  /** @type {any} */ #manifest
  /** @type {ScriptModule} */ #preprocess
  /** @type {ScriptModule} */ #model
  /** @type {string[]} */ #labels
  /** @type {'softmax' | 'sigmoid' | 'none'} */ #function
  #disposed = false

  /**
   * Throws `InvalidArg`: use `AudioClassificationPipeline.load(folder)`.
   * @private
   * @param {symbol} token @param {any} manifest @param {ScriptModule} preprocess @param {ScriptModule} model
   */
  constructor(token, manifest, preprocess, model) {
    if (token !== LOAD)
      throw invalid('new AudioClassificationPipeline(): use await AudioClassificationPipeline.load(folder)')
    this.#manifest = manifest
    this.#preprocess = preprocess
    this.#model = model
    this.#labels = Array.from({ length: manifest.numLabels }, (_, i) => manifest.id2label?.[String(i)] ?? `LABEL_${i}`)
    const problem = manifest.problemType
    this.#function =
      problem === 'regression' ? 'none' : problem === 'multi_label_classification' ? 'sigmoid' : 'softmax'
  }

  /**
   * Loads a folder python/export_audio.py wrote. Errors: `ModelLoadError`, `InvalidArg`, `Aborted`.
   * @param {string} folder
   * @param {AudioClassificationLoadOptions} [options]
   * @returns {Promise<AudioClassificationPipeline>}
   */
  static async load(folder, options) {
    const load = AudioClassificationPipeline.load
    if (typeof folder !== 'string') throw invalid(`folder: expected a path, got ${describe(folder)}`, load)
    const o = opt.read(options, LOAD_OPTIONS, 'load: options', load)
    let manifest
    try {
      manifest = JSON.parse(fs.readFileSync(path.join(folder, 'manifest.json'), 'utf8'))
    } catch (e) {
      const why = /** @type {Error} */ (e).message
      throw codedError('ModelLoadError', `${folder}: cannot read manifest.json: ${why}`, load)
    }
    if (manifest?.format !== 'torch-node/audio-model' || manifest.kind !== 'audio-classification') {
      throw codedError(
        'ModelLoadError',
        `${folder}: manifest.json is not an audio-classification export (kind '${manifest?.kind}'); export a ` +
          'Wav2Vec2ForSequenceClassification or ASTForAudioClassification checkpoint with python/export_audio.py',
        load,
      )
    }
    const { ScriptModule } = torch()
    const signal = o.signal ? [{ signal: o.signal }] : []
    const [preprocess, model] = await Promise.all([
      ScriptModule.load(path.join(folder, manifest.preprocess), ...signal),
      ScriptModule.load(path.join(folder, manifest.model.program), ...signal),
    ])
    return new AudioClassificationPipeline(LOAD, manifest, preprocess, model)
  }

  /** `'audio-classification'`. */
  get task() {
    return 'audio-classification'
  }

  /** The labels, in the order of the model's logits (config.json's `id2label`). @returns {string[]} */
  get labels() {
    return [...this.#labels]
  }

  /** The sampling rate the model's samples are at (Hz; 16000 for Wav2Vec2). */
  get samplingRate() {
    return this.#manifest.samplingRate
  }

  /** The function `run` applies unless told (transformers' rule). @returns {'softmax' | 'sigmoid' | 'none'} */
  get functionToApply() {
    return this.#function
  }

  /** True once `dispose()` was called. */
  get isDisposed() {
    return this.#disposed
  }

  /**
   * The `topK` labels of a clip, best first (`[{label, score}]`), or of each of an array of clips
   * (an array of those), as transformers' `pipeline('audio-classification')`. A clip is an encoded
   * file (a Buffer or Uint8Array of WAV, FLAC, MP3 or Ogg/Vorbis, or a path to one: decoded,
   * down-mixed to mono and resampled to `samplingRate` off the event loop, as the speech pipeline
   * reads audio), `{ raw, samplingRate }` (mono samples at a rate, resampled when it is not the
   * model's; transformers' `sampling_rate` / `array` names too), or mono float32 samples at
   * `samplingRate` Hz. Each must be at least the model's shortest input (400 samples for
   * wav2vec2-base and for AST) and finite, and at most 20 minutes; every clip is read and checked
   * before any runs. Errors: `InvalidArg` (bad options or audio: "invalid audio: ..."), `Aborted`,
   * `Disposed`, `ForwardError`.
   * @param {AudioInput | AudioInput[]} audio
   * @param {AudioClassificationOptions} [options]
   * @returns {Promise<AudioClassificationLabel[] | AudioClassificationLabel[][]>}
   */
  async run(audio, options) {
    const name = 'AudioClassificationPipeline.run'
    const o = opt.read(options, RUN_OPTIONS, `${name}: options`, this.run)
    const batched = Array.isArray(audio)
    const given = batched ? Array.from(audio) : [audio]
    if (given.length === 0) throw invalid(`${name}: audio: expected at least one clip`, this.run)
    const what = (/** @type {number} */ i) => (batched ? `${name}: audio[${i}]` : `${name}: audio`)
    const clips = []
    for (const [i, clip] of given.entries())
      clips.push(await readClip(clip, this.samplingRate, what(i), o.signal, this.run))
    clips.forEach((clip, i) => this.#check(clip, what(i)))
    if (this.#disposed) throw codedError('Disposed', 'the audio-classification model was disposed', this.run)
    const out = []
    for (const clip of clips) {
      if (o.signal?.aborted) throw codedError('Aborted', 'the signal was aborted', this.run)
      out.push(await this.#classify(clip, o))
    }
    return batched ? out : out[0]
  }

  /** InvalidArg unless `clip` is a clip the model takes. @param {unknown} clip @param {string} what */
  #check(clip, what) {
    if (!(clip instanceof Float32Array)) {
      const got = describe(clip)
      throw invalid(`${what}: expected a Float32Array of ${this.samplingRate} Hz samples, got ${got}`, this.run)
    }
    if (clip.length === 0) throw invalid(`${what}: the clip is empty (0 samples)`, this.run)
    const shortest = this.#manifest.minSamples ?? 1
    if (clip.length < shortest) {
      throw invalid(`${what}: ${clip.length} samples; the model takes at least ${shortest}`, this.run)
    }
    if (!clip.every(Number.isFinite)) throw invalid(`${what}: a sample is NaN or infinite`, this.run)
  }

  /**
   * One checked clip through the feature extractor and the model, then the labels.
   * @param {Float32Array} clip @param {any} o @returns {Promise<AudioClassificationLabel[]>}
   */
  async #classify(clip, o) {
    const call = o.signal ? [{ signal: o.signal }] : []
    const owned = []
    try {
      const samples = torch().fromBuffer(clip, [clip.length])
      owned.push(samples)
      const values = /** @type {Tensor} */ (await this.#preprocess.forward(samples, ...call))
      owned.push(values)
      const logits = /** @type {Tensor} */ (await this.#model.forward(values, ...call))
      owned.push(logits)
      const width = this.#labels.length
      const fn = o.functionToApply ?? this.#function
      const [scores] = applyFunction(/** @type {Float32Array} */ (logits.toTypedArray()), width, fn)
      return (
        scores
          .map((score, i) => ({ label: this.#labels[i], score }))
          // best first; equal scores keep the labels' order (as torch.topk does on ties here)
          .sort((a, b) => b.score - a.score)
          .slice(0, Math.min(o.topK ?? 5, width))
      )
    } finally {
      for (const x of owned) x.dispose()
    }
  }

  /** Frees the programs; a call running finishes, later ones reject with `Disposed`. */
  dispose() {
    if (this.#disposed) return
    this.#disposed = true
    this.#preprocess.dispose()
    this.#model.dispose()
  }

  [Symbol.dispose]() {
    this.dispose()
  }
}

module.exports.AudioClassificationPipeline = AudioClassificationPipeline

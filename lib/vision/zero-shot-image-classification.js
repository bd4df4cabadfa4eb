// @ts-check
'use strict'
// torch.pipeline('zero-shot-image-classification', folder): transformers 5's
// ZeroShotImageClassificationPipeline over a CLIP or SigLIP folder `torch-node export` wrote. Each
// label becomes `hypothesisTemplate` with the label in it, both towers embed, and the scores are
// CLIPModel's / SiglipModel's logits_per_image: the cosine similarity times exp(logit_scale)
// (+ logit_bias for SigLIP), then a softmax over the labels (CLIP) or a sigmoid of each (SigLIP).
const { codedError } = require('../errors')
const opt = require('../options')
const { ClipModel, normalized } = require('./clip-model')
const { CALL_OPTIONS, imageSource, readImages } = require('./model-folder')
const { ClipPipeline, LOAD, MODEL } = require('./clip-pipeline')

/** @import { ImageSource } from './image-feature-extraction' */

// The public types below become index.d.ts's declarations (tools/lib-typings.js).
/**
 * A label and its score.
 * @typedef {object} ZeroShotImageClassificationLabel
 * @property {string} label One of `candidateLabels`.
 * @property {number} score CLIP: its softmax probability over the labels; SigLIP: its own sigmoid.
 */
/**
 * Options of `ZeroShotImageClassificationPipeline.run`; any other key is refused (`InvalidArg`).
 * @typedef {object} ZeroShotImageClassificationOptions
 * @property {string[]} candidateLabels The labels to score (at least one).
 * @property {string} [hypothesisTemplate] The sentence each label goes into at `{}` (default
 *   `'This is a photo of {}.'`, as transformers').
 * @property {AbortSignal} [signal] Aborting rejects with `Aborted` while the call's requests are still queued.
 * @property {number} [timeoutMs] The longest a request may wait in the queue, in milliseconds (then `Timeout`).
 */

const TEMPLATE = 'This is a photo of {}.'
/** The most hypotheses whose text embeddings a pipeline keeps (ViT-B/32: 2 KiB each, 8 MiB in all). */
const TEXT_CACHE = 4096
const RUN_OPTIONS = opt.bag(
  {
    candidateLabels: opt.arrayOf(opt.string, 'an array of strings', { min: 1 }),
    hypothesisTemplate: opt.string,
    ...CALL_OPTIONS,
  },
  { required: ['candidateLabels'] },
)

/** Python's str.format with one positional field, as transformers' template.format(label). */
function fill(template, label) {
  return template.replace(/\{\{|\}\}|\{\}/g, (m) => (m === '{}' ? label : m[0]))
}

/**
 * Scores of one image against the labels, as ZeroShotImageClassificationPipeline.postprocess.
 * @param {Float32Array} image @param {Float32Array[]} texts @param {any} manifest @returns {number[]}
 */
function scores(image, texts, manifest) {
  const img = normalized(image)
  const logits = texts.map((t) => {
    const txt = normalized(t)
    let dot = 0
    for (let i = 0; i < img.length; i++) dot += img[i] * txt[i]
    return dot * manifest.logitScale + (manifest.family === 'siglip' ? manifest.logitBias : 0)
  })
  if (manifest.family === 'siglip') return logits.map((l) => 1 / (1 + Math.exp(-l)))
  const top = Math.max(...logits)
  const exps = logits.map((l) => Math.exp(l - top))
  const sum = exps.reduce((a, b) => a + b, 0)
  return exps.map((e) => e / sum)
}

/**
 * Zero-shot image classification with a CLIP or SigLIP model: which of any labels fits an image
 * best. Concurrent `run` calls share forwards of both towers. Made with
 * `ZeroShotImageClassificationPipeline.load(folder)` (or `torch.pipeline('zero-shot-image-classification', folder)`).
 */
class ZeroShotImageClassificationPipeline extends ClipPipeline {
  /**
   * Throws `InvalidArg`: use `ZeroShotImageClassificationPipeline.load(folder)`.
   * @private
   * @param {symbol} token @param {ClipModel} model
   */
  constructor(token, model) {
    super(token, model, 'zero-shot-image-classification')
  }

  /**
   * The hypotheses' text embeddings, shared by calls: callers that score the same labels (the
   * usual case) run the text tower once for them, not once each. A promise per hypothesis, most
   * recently used last, at most TEXT_CACHE; one that fails is forgotten.
   * @type {Map<string, Promise<Float32Array>>}
   */
  #texts = new Map()

  /**
   * @param {string[]} hypotheses @param {Function} caller @returns {Promise<Float32Array[]>}
   */
  #embedHypotheses(hypotheses, caller) {
    const missing = [...new Set(hypotheses.filter((h) => !this.#texts.has(h)))]
    if (missing.length > 0) {
      // Without the call's signal or timeout: the embeddings serve other callers too (a caller's
      // abort still rejects its own call through the image tower's request).
      const pending = this[MODEL].embedTexts(missing, {}, caller)
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
   * Loads a folder `npx torch-node export` wrote from a CLIPModel or SiglipModel checkpoint. Options:
   * `maxBatchSize` (32), `maxDelayMs` (0), `maxQueue` (1024), `signal`. Errors: `ModelLoadError`, `InvalidArg`.
   * @param {string} folder
   * @param {{ maxBatchSize?: number, maxDelayMs?: number, maxQueue?: number, signal?: AbortSignal }} [options]
   * @returns {Promise<ZeroShotImageClassificationPipeline>}
   */
  static async load(folder, options) {
    return new ZeroShotImageClassificationPipeline(
      LOAD,
      await ClipModel.load(folder, options, ZeroShotImageClassificationPipeline.load),
    )
  }

  /** `'zero-shot-image-classification'`. */
  get task() {
    return 'zero-shot-image-classification'
  }

  /**
   * Scores `candidateLabels` for one image (an array of `{score, label}`, best first; equal scores
   * keep the labels' order) or for each of an array of images (an array of those). Errors:
   * `InvalidArg`, `InvalidImage`, `QueueFull`, `Aborted`, `Timeout`, `Disposed`.
   * @param {ImageSource | ImageSource[]} images
   * @param {ZeroShotImageClassificationOptions} options
   * @returns {Promise<ZeroShotImageClassificationLabel[] | ZeroShotImageClassificationLabel[][]>}
   */
  async run(images, options) {
    const name = 'ZeroShotImageClassificationPipeline.run'
    const caller = this.run
    const { batched, sources } = readImages(images, name, caller, imageSource)
    if (options === undefined) {
      throw codedError('InvalidArg', `${name}: options.candidateLabels: expected labels to score, got none`, caller)
    }
    const o = opt.read(options, RUN_OPTIONS, `${name}: options`, caller)
    const labels = /** @type {string[]} */ (o.candidateLabels)
    const template = o.hypothesisTemplate ?? TEMPLATE
    const [texts, embeddings] = await Promise.all([
      this.#embedHypotheses(
        labels.map((l) => fill(template, l)),
        caller,
      ),
      this[MODEL].embedImages(sources, o, caller),
    ])
    const manifest = this[MODEL].manifest
    const results = embeddings.map((image) =>
      scores(image, texts, manifest)
        .map((score, i) => ({ score, label: labels[i] }))
        .sort((a, b) => b.score - a.score),
    )
    return batched ? results : results[0]
  }
}

module.exports.ZeroShotImageClassificationPipeline = ZeroShotImageClassificationPipeline
module.exports.fillTemplate = fill

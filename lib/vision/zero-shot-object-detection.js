// @ts-check
'use strict'
// torch.pipeline('zero-shot-object-detection', folder): transformers 5's
// ZeroShotObjectDetectionPipeline over an OWL-ViT or OWLv2 folder python/export_owl.py wrote. Each
// label is a text query; every patch of the image scores it (OwlViTClassPredictionHead's logit
// through a sigmoid, in head.pt) and has a box (post_process_object_detection's corners in the
// image's pixels). The patches scoring above `threshold`, of all labels, best first, each box
// truncated to integers as the pipeline's `box.int()` does.
const { codedError } = require('../errors')
const opt = require('../options')
const { OwlModel } = require('./owl-model')
const { CALL_OPTIONS, imageOrTensorSource, readImages } = require('./model-folder')

/** @import { Tensor } from '../../index' */
/** @import { DetectionBox } from './object-detection' */

// The public types below become index.d.ts's declarations (tools/lib-typings.js).
/**
 * An image as the zero-shot object detector takes it: a path, a `data:image/...;base64` URL, the
 * file's bytes, or a uint8 RGB Tensor `[3, H, W]` (as `torch.image.load(x, { dtype: 'uint8',
 * layout: 'chw' })` gives).
 * @typedef {string | Uint8Array | Tensor} ZeroShotDetectionImage
 */
/**
 * An object found for one of the labels, as transformers' zero-shot-object-detection pipeline
 * answers it.
 * @typedef {object} ZeroShotDetectedObject
 * @property {number} score The patch's sigmoid score for the label.
 * @property {string} label One of `candidateLabels`.
 * @property {DetectionBox} box Where it is, in the image's pixels (integers, truncated as
 *   transformers' pipeline does; an edge may lie outside the image).
 */
/**
 * Options of `ZeroShotObjectDetectionPipeline.run`; any other key is refused (`InvalidArg`).
 * @typedef {object} ZeroShotObjectDetectionOptions
 * @property {string | string[]} candidateLabels What to look for: labels (1 to 1024), or one string
 *   of labels separated by commas (split as transformers does, spaces kept). Each label must fit the
 *   model's text positions (16 tokens for OWL-ViT and OWLv2), as transformers' pipeline requires.
 * @property {number} [threshold] Keep the objects scoring above it (default 0.1, as transformers').
 * @property {number} [topK] Keep the best `topK` of them (default: all).
 * @property {AbortSignal} [signal] Aborting rejects with `Aborted` while the call's images are still queued.
 * @property {number} [timeoutMs] The longest an image may wait in the queue, in milliseconds (then `Timeout`).
 */
/**
 * Options of `ZeroShotObjectDetectionPipeline.load`; any other key is refused (`InvalidArg`).
 * @typedef {object} ZeroShotObjectDetectionLoadOptions
 * @property {number} [maxBatchSize] The most images (and labels) a forward takes (default 16; at
 *   most the export's `--max-batch` for a .pt2 folder).
 * @property {number} [maxDelayMs] How long a forward waits for more requests (default 0).
 * @property {number} [maxQueue] How many requests may wait per program (default 1024; `Infinity`:
 *   no bound); past it calls reject with `QueueFull`.
 * @property {AbortSignal} [signal] Aborts the load.
 */

/** The most labels one call may ask for: the head's scores are labels × patches floats an image. */
const MAX_LABELS = 1024
const RUN_OPTIONS = opt.bag(
  {
    candidateLabels: opt.either([opt.string, opt.arrayOf(opt.string, 'strings')], 'a string or an array of strings'),
    threshold: opt.number({ expected: 'a number' }),
    topK: opt.integer({ min: 1 }),
    ...CALL_OPTIONS,
  },
  { required: ['candidateLabels'] },
)
const LOAD = Symbol('ZeroShotObjectDetectionPipeline.load')

/** @param {string} message @param {Function} [caller] */
const invalid = (message, caller) => codedError('InvalidArg', message, caller)

/**
 * ZeroShotObjectDetectionPipeline.postprocess of one image: the patches scoring above the
 * threshold (compared in float32, as the pipeline's tensor) and not 0 (its `nonzero()`), by label
 * then patch, sorted best first (stable, as Python's sorted), the first topK.
 * @param {{ scores: Float32Array, boxes: Float32Array, patches: number }} d @param {string[]} labels
 * @param {boolean[]} ignored @param {number} threshold @param {number | undefined} topK
 * @returns {ZeroShotDetectedObject[]}
 */
function detections({ scores, boxes, patches }, labels, ignored, threshold, topK) {
  const bar = Math.fround(threshold)
  /** @type {ZeroShotDetectedObject[]} */
  const out = []
  labels.forEach((label, q) => {
    if (ignored[q]) return // transformers' query_mask: its logits are float32's min, its scores 0
    for (let p = 0; p < patches; p++) {
      const score = scores[q * patches + p]
      if (!(score > bar) || score === 0) continue
      // + 0: an edge in (-1, 0) is 0, as Python's int, not -0
      const [xmin, ymin, xmax, ymax] = Array.from(boxes.subarray(p * 4, p * 4 + 4), (x) => Math.trunc(x) + 0)
      out.push({ score, label, box: { xmin, ymin, xmax, ymax } })
    }
  })
  out.sort((a, b) => b.score - a.score)
  return topK === undefined ? out : out.slice(0, topK)
}

/**
 * Zero-shot object detection with an OWL-ViT or OWLv2 model: boxes around whatever labels you name
 * ("a cat", "a remote control") in an image. Concurrent `run` calls share forwards, and the labels'
 * text embeddings are kept for later calls. Made with `ZeroShotObjectDetectionPipeline.load(folder)`
 * (or `torch.pipeline('zero-shot-object-detection', folder)`).
 */
class ZeroShotObjectDetectionPipeline {
  /** @type {OwlModel} */ #model

  /**
   * Throws `InvalidArg`: use `ZeroShotObjectDetectionPipeline.load(folder)`.
   * @private
   * @param {symbol} token @param {OwlModel} model
   */
  constructor(token, model) {
    if (token !== LOAD) {
      throw invalid(
        "new ZeroShotObjectDetectionPipeline(): use await torch.pipeline('zero-shot-object-detection', folder)",
        new.target,
      )
    }
    this.#model = model
  }

  /**
   * Loads a folder `npx torch-node export` (python/export_owl.py) wrote from an
   * OwlViTForObjectDetection or Owlv2ForObjectDetection checkpoint. Errors: `ModelLoadError`, `InvalidArg`.
   * @param {string} folder
   * @param {ZeroShotObjectDetectionLoadOptions} [options]
   * @returns {Promise<ZeroShotObjectDetectionPipeline>}
   */
  static async load(folder, options) {
    const model = await OwlModel.load(folder, options, ZeroShotObjectDetectionPipeline.load)
    return new ZeroShotObjectDetectionPipeline(LOAD, model)
  }

  /** `'zero-shot-object-detection'`. */
  get task() {
    return 'zero-shot-object-detection'
  }

  /**
   * `'owlvit'` (boxes scale with the image's width and height) or `'owlv2'` (whose processor pads
   * the image to a square: boxes scale with its longer side).
   * @returns {'owlvit' | 'owlv2'}
   */
  get family() {
    return this.#model.family
  }

  /** True once `dispose()` was called. */
  get isDisposed() {
    return this.#model.isDisposed
  }

  /** The text and image Batchers' counts. */
  stats() {
    return this.#model.stats()
  }

  /**
   * The objects matching `candidateLabels` in one image (`[{score, label, box}]`, best first) or in
   * each of an array of images (an array of those), as transformers' `pipeline('zero-shot-object-detection')`.
   * Errors: `InvalidArg`, `InvalidImage`, `QueueFull`, `Aborted`, `Timeout`, `Disposed`.
   * @param {ZeroShotDetectionImage | ZeroShotDetectionImage[]} images
   * @param {ZeroShotObjectDetectionOptions} options
   * @returns {Promise<ZeroShotDetectedObject[] | ZeroShotDetectedObject[][]>}
   */
  async run(images, options) {
    const name = 'ZeroShotObjectDetectionPipeline.run'
    const caller = this.run
    const { batched, sources } = readImages(images, name, caller, imageOrTensorSource)
    if (options === undefined) {
      throw invalid(`${name}: options.candidateLabels: expected labels to look for, got none`, caller)
    }
    const o = opt.read(options, RUN_OPTIONS, `${name}: options`, caller)
    const given = /** @type {string | string[]} */ (o.candidateLabels)
    const labels = typeof given === 'string' ? given.split(',') : given
    if (labels.length === 0) throw invalid(`${name}: options.candidateLabels: expected at least one label`, caller)
    if (labels.length > MAX_LABELS) {
      throw invalid(
        `${name}: options.candidateLabels: at most ${MAX_LABELS} labels a call, got ${labels.length}`,
        caller,
      )
    }
    const threshold = o.threshold ?? 0.1
    const model = this.#model
    const queries = model.queries(labels, caller)
    queries.catch(() => {}) // awaited below, by each image; a failure is thrown there
    /** @type {ZeroShotDetectedObject[][]} */
    const out = []
    for (let i = 0; i < sources.length; i += model.maxBatchSize) {
      const chunk = sources.slice(i, i + model.maxBatchSize)
      const settled = await Promise.allSettled(chunk.map((s) => model.detect(s, queries, o, caller)))
      const failed = settled.find((p) => p.status === 'rejected')
      if (failed) throw failed.reason
      const ignored = (await queries).map((q) => q.ignored)
      for (const p of settled) {
        const d = /** @type {PromiseFulfilledResult<any>} */ (p).value
        out.push(detections(d, labels, ignored, threshold, o.topK))
      }
    }
    return batched ? out : out[0]
  }

  /** Frees the programs once running batches finish; calls waiting and later ones reject with `Disposed`. */
  dispose() {
    this.#model.dispose()
  }

  [Symbol.dispose]() {
    this.dispose()
  }
}

module.exports.ZeroShotObjectDetectionPipeline = ZeroShotObjectDetectionPipeline
module.exports.MAX_LABELS = MAX_LABELS

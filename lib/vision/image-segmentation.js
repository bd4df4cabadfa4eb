// @ts-check
'use strict'
// The image-segmentation pipeline: transformers 5's ImageSegmentationPipeline over a folder
// python/export_dense.py wrote. Segformer, DPT (semantic): the logits are resized (bilinear) to the
// image's size and argmax'd as post_process_semantic_segmentation does (postprocess.pt); then one
// `{score: null, label, mask}` per label present, in label-id order (numpy.unique), each mask 255
// where that label won. Mask2Former, DETR (panoptic, instance, semantic): postprocess.pt hands back the
// query logits and the image's size, and segments.pt runs Mask2FormerImageProcessor's (DetrImageProcessor's)
// post_process_<subtask>_segmentation with the call's thresholds; then one `{score, label, mask}` per
// segment, in its order, each mask 255 where the segment map holds its id.
const path = require('node:path')
const { codedError } = require('../errors')
const opt = require('../options')
const torch = require('../torch')
const { DenseModel, DensePipeline, LOAD, MODEL, predictAll } = require('./dense-model')
const { CALL_OPTIONS } = require('./model-folder')

/** @import { Tensor } from '../../index' */
/** @import { DenseImage, DenseLoadOptions } from './depth-estimation' */

// The public types below become index.d.ts's declarations (tools/lib-typings.js).
/**
 * One segment of an image: a label's region (semantic), an object (instance), or either (panoptic).
 * @typedef {object} ImageSegment
 * @property {number | null} score The segment's score rounded to 6 decimals as transformers' (panoptic:
 *   the query's class probability; instance: that times the mask's mean probability), `null` for
 *   semantic segments (a semantic model scores none).
 * @property {string} label The label's name (the checkpoint's `id2label`).
 * @property {Tensor} mask uint8 `[H, W]` at the image's size: 255 where the segment is, else 0.
 */
/**
 * What `ImageSegmentationPipeline.run` segments: `'semantic'` (one segment per label present),
 * `'instance'` (one per object, overlapping ones painted in order) or `'panoptic'` (objects and
 * regions, each pixel in one segment).
 * @typedef {'semantic' | 'instance' | 'panoptic'} SegmentationSubtask
 */
/**
 * Options of `ImageSegmentationPipeline.run`; any other key, or a threshold the subtask does not
 * read, is refused (`InvalidArg`).
 * @typedef {object} ImageSegmentationOptions
 * @property {SegmentationSubtask} [subtask] One of the model's `subtasks`; default its first, as
 *   transformers' (panoptic, else instance, else semantic).
 * @property {number} [threshold] Panoptic and instance: keep the segments scoring above it (panoptic)
 *   or at least it (instance); default 0.9, as the pipeline's.
 * @property {number} [maskThreshold] Panoptic: a query's mask covers the pixels whose weighted
 *   probability is at least it; default 0.5.
 * @property {number} [overlapMaskAreaThreshold] Panoptic: drop a segment keeping no more than this
 *   share of its mask's area; default 0.5.
 * @property {AbortSignal} [signal] Aborting rejects with `Aborted` while the call's images are still queued.
 * @property {number} [timeoutMs] The longest an image may wait in the queue, in milliseconds (then `Timeout`).
 */

const RUN_OPTIONS = opt.bag({
  subtask: opt.oneOf(['semantic', 'instance', 'panoptic']),
  threshold: opt.number({ expected: 'a number' }),
  maskThreshold: opt.number({ expected: 'a number' }),
  overlapMaskAreaThreshold: opt.number({ expected: 'a number' }),
  ...CALL_OPTIONS,
})
/** The pipeline's defaults of the thresholds (transformers 5's ImageSegmentationPipeline.postprocess). */
const THRESHOLDS = { threshold: 0.9, maskThreshold: 0.5, overlapMaskAreaThreshold: 0.5 }
/**
 * The thresholds each subtask's post-processing reads (the manifest's `universal.reads`; this, Mask2Former's,
 * for a folder that predates it); transformers ignores the others, we refuse them.
 */
const READS = { panoptic: Object.keys(THRESHOLDS), instance: ['threshold'], semantic: [] }

/**
 * uint8 `[height, width]`: 255 where `ids` holds `id`, as the pipeline's `(segmentation == id) * 255`.
 * @param {Int32Array} ids @param {number} id @param {number} height @param {number} width
 * @returns {Tensor}
 */
function maskOf(ids, id, height, width) {
  const mask = new Uint8Array(ids.length)
  for (let i = 0; i < ids.length; i++) if (ids[i] === id) mask[i] = 255
  return torch().fromBuffer(mask, [height, width])
}

/**
 * One segment per label id present in `ids` (ascending), as the pipeline's semantic branch.
 * @param {Int32Array} ids @param {number} height @param {number} width @param {Record<string, string>} id2label
 * @returns {ImageSegment[]}
 */
function segments(ids, height, width, id2label) {
  const present = [...new Set(ids)].sort((a, b) => a - b)
  return present.map((id) => ({
    score: null,
    label: id2label[String(id)] ?? `LABEL_${id}`,
    mask: maskOf(ids, id, height, width),
  }))
}

/**
 * One segment per row of `table` (id, label id, score), in its order, each mask where `ids` holds the id.
 * @param {Int32Array} ids @param {Float64Array} table @param {number} height @param {number} width
 * @param {Record<string, string>} id2label
 * @returns {ImageSegment[]}
 */
function scoredSegments(ids, table, height, width, id2label) {
  const out = []
  for (let row = 0; row + 2 < table.length; row += 3) {
    const [id, label, score] = [table[row], table[row + 1], table[row + 2]]
    out.push({
      // transformers rounds with round(score, 6); toFixed rounds the exact binary value too
      score: Number(score.toFixed(6)),
      label: id2label[String(label)] ?? `LABEL_${label}`,
      mask: maskOf(ids, id, height, width),
    })
  }
  return out
}

/**
 * Image segmentation: semantic (Segformer, DPT), or panoptic, instance and semantic (Mask2Former,
 * DETR), exported from the transformers checkpoint. Concurrent calls share forwards. Made with
 * `ImageSegmentationPipeline.load(folder)`.
 */
class ImageSegmentationPipeline extends DensePipeline {
  /** @type {any} segments.pt (Mask2Former, DETR), else null */ #segments

  /**
   * Throws `InvalidArg`: use `ImageSegmentationPipeline.load(folder)`.
   * @private
   * @param {symbol} token @param {DenseModel} model @param {any} [segments]
   */
  constructor(token, model, segments = null) {
    super(token, model)
    this.#segments = segments
  }

  /**
   * Loads a folder python/export_dense.py wrote from a SegformerForSemanticSegmentation,
   * DPTForSemanticSegmentation, Mask2FormerForUniversalSegmentation or DetrForSegmentation checkpoint.
   * Errors: `ModelLoadError`, `InvalidArg`.
   * @param {string} folder
   * @param {DenseLoadOptions} [options]
   * @returns {Promise<ImageSegmentationPipeline>}
   */
  static async load(folder, options) {
    const load = ImageSegmentationPipeline.load
    const model = await DenseModel.load(folder, options, 'image-segmentation', load)
    const file = model.manifest.segments
    if (!file) return new ImageSegmentationPipeline(LOAD, model)
    try {
      return new ImageSegmentationPipeline(LOAD, model, await torch().ScriptModule.load(path.join(folder, file)))
    } catch (e) {
      model.dispose()
      throw e
    }
  }

  /**
   * The subtasks this model answers, its default first: `['semantic']` (Segformer, DPT) or
   * `['panoptic', 'instance', 'semantic']` (Mask2Former, DETR).
   * @returns {SegmentationSubtask[]}
   */
  get subtasks() {
    return this[MODEL].manifest.subtasks ?? ['semantic']
  }

  /** `'image-segmentation'`. */
  get task() {
    return 'image-segmentation'
  }

  /** The label names by id (the checkpoint's `id2label`). @returns {Record<string, string>} */
  get labels() {
    return this[MODEL].manifest.id2label
  }

  /**
   * The segments of one image (`[{score, label, mask}]`: semantic, one per label present, score
   * `null`; instance and panoptic, one per segment kept) or of each of an array of images (an array
   * of those), as transformers' `pipeline('image-segmentation')`.
   * Errors: `InvalidArg` (also a subtask the model lacks, a threshold the subtask does not read),
   * `InvalidImage`, `QueueFull`, `Aborted`, `Timeout`, `Disposed`, `ForwardError`.
   * @param {DenseImage | DenseImage[]} images
   * @param {ImageSegmentationOptions} [options]
   * @returns {Promise<ImageSegment[] | ImageSegment[][]>}
   */
  async run(images, options) {
    const name = 'ImageSegmentationPipeline.run'
    const o = opt.read(options, RUN_OPTIONS, `${name}: options`, this.run)
    const subtasks = this.subtasks
    const subtask = o.subtask ?? subtasks[0]
    if (!subtasks.includes(subtask)) {
      const has = subtasks.map((s) => `'${s}'`).join(', ')
      throw codedError(
        'InvalidArg',
        `${name}: options.subtask: this model does ${has} only, got '${subtask}'`,
        this.run,
      )
    }
    const reads = this[MODEL].manifest.universal?.reads ?? READS
    for (const key of Object.keys(THRESHOLDS)) {
      if (o[key] !== undefined && !reads[subtask].includes(key)) {
        throw codedError('InvalidArg', `${name}: options.${key}: the ${subtask} subtask does not read it`, this.run)
      }
    }
    const id2label = this[MODEL].manifest.id2label
    if (!id2label) throw codedError('ModelLoadError', `${name}: the folder's manifest has no id2label`, this.run)
    if (!this.#segments) {
      return predictAll(this[MODEL], images, o, name, this.run, (prediction) => {
        const [height, width] = prediction.shape
        return segments(/** @type {Int32Array} */ (prediction.toTypedArray()), height, width, id2label)
      })
    }
    const t = { ...THRESHOLDS, ...o }
    const args = [subtask, t.threshold, t.maskThreshold, t.overlapMaskAreaThreshold]
    const pending = await predictAll(this[MODEL], images, o, name, this.run, (prediction) => {
      const p = this.#segmentsOf(prediction.clone(), args, subtask, id2label)
      p.catch(() => {}) // awaited below; a failure elsewhere in the call must not leave it unhandled
      return p
    })
    return Array.isArray(pending) ? Promise.all(pending) : pending
  }

  /**
   * segments.pt on one image's query logits (`packed`, disposed here), then the segments.
   * @param {Tensor} packed @param {unknown[]} args @param {string} subtask @param {Record<string, string>} id2label
   * @returns {Promise<ImageSegment[]>}
   */
  async #segmentsOf(packed, args, subtask, id2label) {
    let out
    try {
      if (this.isDisposed) throw codedError('Disposed', 'the image-segmentation model was disposed')
      out = /** @type {Tensor[]} */ (await this.#segments.forward(packed, ...args))
    } finally {
      packed.dispose()
    }
    const [map, table] = out
    try {
      const [height, width] = map.shape
      const ids = /** @type {Int32Array} */ (map.toTypedArray())
      if (subtask === 'semantic') return segments(ids, height, width, id2label)
      return scoredSegments(ids, /** @type {Float64Array} */ (table.toTypedArray()), height, width, id2label)
    } finally {
      for (const x of out) x.dispose()
    }
  }

  /** Frees the programs once running batches finish; calls waiting and later ones reject with `Disposed`. */
  dispose() {
    super.dispose()
    // a ScriptModule disposed while a forward runs lets that call finish
    this.#segments?.dispose()
  }
}

module.exports.ImageSegmentationPipeline = ImageSegmentationPipeline

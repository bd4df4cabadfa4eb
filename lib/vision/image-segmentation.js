// @ts-check
'use strict'
// The image-segmentation pipeline (semantic): transformers 5's ImageSegmentationPipeline over a
// Segformer or DPT folder python/export_dense.py wrote. The logits are resized (bilinear) to the image's
// size and argmax'd as post_process_semantic_segmentation does; then one `{score: null, label,
// mask}` per label present, in label-id order (numpy.unique), each mask 255 where that label won.
const { codedError } = require('../errors')
const opt = require('../options')
const torch = require('../torch')
const { DenseModel, DensePipeline, LOAD, MODEL, predictAll } = require('./dense-model')
const { CALL_OPTIONS } = require('./model-folder')

/** @import { Tensor } from '../../index' */
/** @import { DenseImage, DenseLoadOptions } from './depth-estimation' */

// The public types below become index.d.ts's declarations (tools/lib-typings.js).
/**
 * One label's region of an image.
 * @typedef {object} ImageSegment
 * @property {null} score Always `null`: a semantic model scores no segment (as transformers').
 * @property {string} label The label's name (the checkpoint's `id2label`).
 * @property {Tensor} mask uint8 `[H, W]` at the image's size: 255 where the label won, else 0.
 */
/**
 * Options of `ImageSegmentationPipeline.run`; any other key is refused (`InvalidArg`).
 * @typedef {object} ImageSegmentationOptions
 * @property {'semantic'} [subtask] The only one a semantic model has (transformers' default for it).
 * @property {AbortSignal} [signal] Aborting rejects with `Aborted` while the call's images are still queued.
 * @property {number} [timeoutMs] The longest an image may wait in the queue, in milliseconds (then `Timeout`).
 */

const RUN_OPTIONS = opt.bag({
  subtask: opt.check((v) => v === 'semantic', "'semantic' (this model has no instance or panoptic head)"),
  ...CALL_OPTIONS,
})

/**
 * One segment per label id present in `ids` (ascending), as the pipeline's semantic branch.
 * @param {Int32Array} ids @param {number} height @param {number} width @param {Record<string, string>} id2label
 * @returns {ImageSegment[]}
 */
function segments(ids, height, width, id2label) {
  const present = [...new Set(ids)].sort((a, b) => a - b)
  const { fromBuffer } = torch()
  return present.map((id) => {
    const mask = new Uint8Array(ids.length)
    for (let i = 0; i < ids.length; i++) if (ids[i] === id) mask[i] = 255
    return { score: null, label: id2label[String(id)] ?? `LABEL_${id}`, mask: fromBuffer(mask, [height, width]) }
  })
}

/**
 * Semantic segmentation: which label each pixel of an image belongs to (Segformer or DPT exported
 * from the transformers checkpoint). Concurrent calls share forwards. Made with
 * `ImageSegmentationPipeline.load(folder)`.
 */
class ImageSegmentationPipeline extends DensePipeline {
  /**
   * Throws `InvalidArg`: use `ImageSegmentationPipeline.load(folder)`.
   * @private
   * @param {symbol} token @param {DenseModel} model
   */
  constructor(token, model) {
    super(token, model)
  }

  /**
   * Loads a folder python/export_dense.py wrote from a SegformerForSemanticSegmentation or
   * DPTForSemanticSegmentation checkpoint.
   * Errors: `ModelLoadError`, `InvalidArg`.
   * @param {string} folder
   * @param {DenseLoadOptions} [options]
   * @returns {Promise<ImageSegmentationPipeline>}
   */
  static async load(folder, options) {
    const load = ImageSegmentationPipeline.load
    return new ImageSegmentationPipeline(LOAD, await DenseModel.load(folder, options, 'image-segmentation', load))
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
   * The segments of one image (`[{score: null, label, mask}]`, one per label present) or of each of
   * an array of images (an array of those), as transformers' `pipeline('image-segmentation')`.
   * Errors: `InvalidArg`, `InvalidImage`, `QueueFull`, `Aborted`, `Timeout`, `Disposed`, `ForwardError`.
   * @param {DenseImage | DenseImage[]} images
   * @param {ImageSegmentationOptions} [options]
   * @returns {Promise<ImageSegment[] | ImageSegment[][]>}
   */
  async run(images, options) {
    const name = 'ImageSegmentationPipeline.run'
    const o = opt.read(options, RUN_OPTIONS, `${name}: options`, this.run)
    const id2label = this[MODEL].manifest.id2label
    if (!id2label) throw codedError('ModelLoadError', `${name}: the folder's manifest has no id2label`, this.run)
    return predictAll(this[MODEL], images, o, name, this.run, (prediction) => {
      const [height, width] = prediction.shape
      return segments(/** @type {Int32Array} */ (prediction.toTypedArray()), height, width, id2label)
    })
  }
}

module.exports.ImageSegmentationPipeline = ImageSegmentationPipeline

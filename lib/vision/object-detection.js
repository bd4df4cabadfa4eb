// @ts-check
'use strict'
// The object-detection pipeline over a DETR or YOLOS folder python/export_vision.py wrote:
// transformers 5's ObjectDetectionPipeline. postprocess.pt is post_process_object_detection before
// its threshold (softmax over the classes, the best one but "no object", the boxes from center to
// corners scaled to the image); here the queries scoring above `threshold`, in query order, each
// box truncated to integers as the pipeline's `box.int()` does.
// (torch.vision's torchvision detectors are ScriptModules called directly.)
const opt = require('../options')
const { DenseModel, DensePipeline, LOAD, MODEL, predictAll } = require('./dense-model')
const { CALL_OPTIONS } = require('./model-folder')

/** @import { DenseImage, DenseLoadOptions } from './depth-estimation' */

// The public types below become index.d.ts's declarations (tools/lib-typings.js).
/**
 * A detection's box in the image's pixels (integers, truncated as transformers' pipeline does).
 * @typedef {object} DetectionBox
 * @property {number} xmin
 * @property {number} ymin
 * @property {number} xmax
 * @property {number} ymax
 */
/**
 * One object found in an image, as transformers' object-detection pipeline answers it.
 * @typedef {object} DetectedObject
 * @property {number} score The class's probability (softmax over the classes and "no object").
 * @property {string} label The class's name (the checkpoint's `id2label`).
 * @property {DetectionBox} box Where it is.
 */
/**
 * Options of `ObjectDetectionPipeline.run`; any other key is refused (`InvalidArg`).
 * @typedef {object} ObjectDetectionOptions
 * @property {number} [threshold] Keep the objects scoring above it (default 0.5, as transformers').
 * @property {AbortSignal} [signal] Aborting rejects with `Aborted` while the call's images are still queued.
 * @property {number} [timeoutMs] The longest an image may wait in the queue, in milliseconds (then `Timeout`).
 */

const RUN_OPTIONS = opt.bag({
  threshold: opt.number({ expected: 'a number' }),
  ...CALL_OPTIONS,
})

/**
 * Object detection with a transformers checkpoint (DETR, YOLOS exported with
 * python/export_vision.py). Concurrent calls share forwards. Made with
 * `ObjectDetectionPipeline.load(folder)` or `torch.pipeline('object-detection', folder)`.
 */
class ObjectDetectionPipeline extends DensePipeline {
  /**
   * Throws `InvalidArg`: use `ObjectDetectionPipeline.load(folder)`.
   * @private
   * @param {symbol} token @param {DenseModel} model
   */
  constructor(token, model) {
    super(token, model)
  }

  /**
   * Loads a folder python/export_vision.py wrote from a DetrForObjectDetection or
   * YolosForObjectDetection checkpoint.
   * Errors: `ModelLoadError`, `InvalidArg`.
   * @param {string} folder
   * @param {DenseLoadOptions} [options]
   * @returns {Promise<ObjectDetectionPipeline>}
   */
  static async load(folder, options) {
    const load = ObjectDetectionPipeline.load
    return new ObjectDetectionPipeline(LOAD, await DenseModel.load(folder, options, 'object-detection', load))
  }

  /** `'object-detection'`. */
  get task() {
    return 'object-detection'
  }

  /** The class names by id (the checkpoint's `id2label`). @returns {Record<string, string>} */
  get labels() {
    return this[MODEL].manifest.id2label
  }

  /**
   * The objects of one image (`[{score, label, box}]`, in the model's query order) or of each of an
   * array of images (an array of those), as transformers' `pipeline('object-detection')`.
   * Errors: `InvalidArg`, `InvalidImage`, `QueueFull`, `Aborted`, `Timeout`, `Disposed`, `ForwardError`.
   * @param {DenseImage | DenseImage[]} images
   * @param {ObjectDetectionOptions} [options]
   * @returns {Promise<DetectedObject[] | DetectedObject[][]>}
   */
  async run(images, options) {
    const name = 'ObjectDetectionPipeline.run'
    const o = opt.read(options, RUN_OPTIONS, `${name}: options`, this.run)
    const threshold = o.threshold ?? 0.5
    const id2label = this[MODEL].manifest.id2label ?? {}
    return predictAll(this[MODEL], images, o, name, this.run, (detections) => {
      const rows = /** @type {Float32Array} */ (detections.toTypedArray())
      /** @type {DetectedObject[]} */
      const out = []
      for (let r = 0; r + 6 <= rows.length; r += 6) {
        const score = rows[r]
        if (!(score > threshold)) continue
        const id = rows[r + 1]
        // + 0: a box edge in (-1, 0) is 0, as Python's int, not -0
        const [xmin, ymin, xmax, ymax] = Array.from(rows.subarray(r + 2, r + 6), (x) => Math.trunc(x) + 0)
        out.push({ score, label: id2label[String(id)] ?? `LABEL_${id}`, box: { xmin, ymin, xmax, ymax } })
      }
      return out
    })
  }
}

module.exports.ObjectDetectionPipeline = ObjectDetectionPipeline

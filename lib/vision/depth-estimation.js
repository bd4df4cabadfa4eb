// @ts-check
'use strict'
// The depth-estimation pipeline: transformers 5's DepthEstimationPipeline over a DPT or Depth
// Anything folder python/export_dense.py wrote. The model's predicted_depth is resized (bicubic)
// to the image's size as post_process_depth_estimation does, and `depth` is that depth scaled to
// 0–255 by its min and max, as the pipeline's PIL image is made (numpy float32, then uint8).
const opt = require('../options')
const torch = require('../torch')
const { DenseModel, DensePipeline, LOAD, MODEL, predictAll } = require('./dense-model')
const { CALL_OPTIONS } = require('./model-folder')

/** @import { Tensor } from '../../index' */
/** @import { ImageSource } from './image-feature-extraction' */

// The public types below become index.d.ts's declarations (tools/lib-typings.js).
/**
 * An image as the depth and segmentation pipelines take it: a path, a `data:image/...;base64,` URL,
 * the file's bytes, or a uint8 RGB Tensor `[3, H, W]`.
 * @typedef {ImageSource | Tensor} DenseImage
 */
/**
 * One image's depth.
 * @typedef {object} DepthEstimation
 * @property {Tensor} predictedDepth float32 `[H, W]` at the image's size: the model's
 *   predicted_depth resized bicubic (transformers' `predicted_depth`).
 * @property {Tensor} depth uint8 `[H, W]`: `predictedDepth` scaled to 0–255 by its min and max
 *   (transformers' `depth` image, grayscale; `torch.image.encode(depth.expand([3, H, W]), 'png')`
 *   writes it as a PNG).
 */
/**
 * Options of `DepthEstimationPipeline.run`; any other key is refused (`InvalidArg`).
 * @typedef {object} DenseRunOptions
 * @property {AbortSignal} [signal] Aborting rejects with `Aborted` while the call's images are still queued.
 * @property {number} [timeoutMs] The longest an image may wait in the queue, in milliseconds (then `Timeout`).
 */
/**
 * Options of `DepthEstimationPipeline.load` and `ImageSegmentationPipeline.load`.
 * @typedef {object} DenseLoadOptions
 * @property {number} [maxBatchSize] The most images in one forward (default 16; at most the export's `--max-batch`).
 * @property {number} [maxDelayMs] How long a forward waits for more images (default 0).
 * @property {number} [maxQueue] The most images waiting (default 1024; then `QueueFull`).
 * @property {AbortSignal} [signal] Aborts the load.
 */

const RUN_OPTIONS = opt.bag({ ...CALL_OPTIONS })

/**
 * transformers' `(depth - min) / (max - min)`, `* 255`, `.astype("uint8")` in numpy float32:
 * each step rounded to float32 (Math.fround), then truncated.
 * @param {Float32Array} data @returns {Uint8Array}
 */
function depthImage(data) {
  let min = Infinity
  let max = -Infinity
  for (const v of data) {
    if (v < min) min = v
    if (v > max) max = v
  }
  const range = Math.fround(max - min)
  const out = new Uint8Array(data.length)
  for (let i = 0; i < data.length; i++) {
    const v = Math.fround(Math.fround(Math.fround(data[i] - min) / range) * 255)
    out[i] = v > 0 ? Math.min(255, Math.trunc(v)) : 0 // NaN (a flat depth: 0 / 0) gives 0
  }
  return out
}

/**
 * Depth from one image: DPT or Depth Anything exported from the transformers checkpoint. Concurrent
 * calls share forwards. Made with `DepthEstimationPipeline.load(folder)`.
 */
class DepthEstimationPipeline extends DensePipeline {
  /**
   * Throws `InvalidArg`: use `DepthEstimationPipeline.load(folder)`.
   * @private
   * @param {symbol} token @param {DenseModel} model
   */
  constructor(token, model) {
    super(token, model)
  }

  /**
   * Loads a folder python/export_dense.py wrote from a DPTForDepthEstimation or
   * DepthAnythingForDepthEstimation checkpoint. Errors: `ModelLoadError`, `InvalidArg`.
   * @param {string} folder
   * @param {DenseLoadOptions} [options]
   * @returns {Promise<DepthEstimationPipeline>}
   */
  static async load(folder, options) {
    const load = DepthEstimationPipeline.load
    return new DepthEstimationPipeline(LOAD, await DenseModel.load(folder, options, 'depth-estimation', load))
  }

  /** `'depth-estimation'`. */
  get task() {
    return 'depth-estimation'
  }

  /**
   * The depth of one image (`{predictedDepth, depth}`) or of each of an array of images (an array of
   * those), as transformers' `pipeline('depth-estimation')`. Errors: `InvalidArg`, `InvalidImage`,
   * `QueueFull`, `Aborted`, `Timeout`, `Disposed`, `ForwardError`.
   * @param {DenseImage | DenseImage[]} images
   * @param {DenseRunOptions} [options]
   * @returns {Promise<DepthEstimation | DepthEstimation[]>}
   */
  async run(images, options) {
    const name = 'DepthEstimationPipeline.run'
    const o = opt.read(options, RUN_OPTIONS, `${name}: options`, this.run)
    return predictAll(this[MODEL], images, o, name, this.run, (prediction) => {
      const [height, width] = prediction.shape
      const data = /** @type {Float32Array} */ (prediction.toTypedArray()).slice()
      const { fromBuffer } = torch()
      return {
        predictedDepth: fromBuffer(data, [height, width]),
        depth: fromBuffer(depthImage(data), [height, width]),
      }
    })
  }
}

module.exports.DepthEstimationPipeline = DepthEstimationPipeline
module.exports.depthImage = depthImage

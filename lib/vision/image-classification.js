// @ts-check
'use strict'
// The image-classification pipeline over a Hugging Face `*ForImageClassification` folder
// python/export_vision.py wrote (ViT, ConvNeXt, ...): transformers 5's ImageClassificationPipeline.
// The checkpoint's image processor runs as TorchScript (preprocess.pt), the model behind a Batcher;
// then softmax, sigmoid or nothing over the logits, and the topK labels, best first.
// (torch.vision.classify stays the path for a torchvision ScriptModule and its ImageNet labels.)
const opt = require('../options')
const { applyFunction } = require('../text/logits')
const { defaultFunction } = require('../text/text-classification')
const { DenseModel, DensePipeline, LOAD, MODEL, predictAll } = require('./dense-model')
const { CALL_OPTIONS } = require('./model-folder')

/** @import { DenseImage, DenseLoadOptions } from './depth-estimation' */

// The public types below become index.d.ts's declarations (tools/lib-typings.js).
/**
 * One label of an image, as transformers' image-classification pipeline answers it.
 * @typedef {object} ImageClassificationLabel
 * @property {string} label The label's name (the checkpoint's `id2label`).
 * @property {number} score Its score after `functionToApply`.
 */
/**
 * Options of `ImageClassificationPipeline.run`; any other key is refused (`InvalidArg`).
 * @typedef {object} ImageClassificationOptions
 * @property {number} [topK] How many labels per image, best first (default 5, at most the model's
 *   label count, as transformers').
 * @property {'softmax' | 'sigmoid' | 'none'} [functionToApply] Default as transformers' pipeline:
 *   `'none'` for `problem_type` regression, `'sigmoid'` for multi-label or one label, else `'softmax'`.
 * @property {AbortSignal} [signal] Aborting rejects with `Aborted` while the call's images are still queued.
 * @property {number} [timeoutMs] The longest an image may wait in the queue, in milliseconds (then `Timeout`).
 */

const RUN_OPTIONS = opt.bag({
  topK: opt.integer({ min: 1 }),
  functionToApply: opt.oneOf(['softmax', 'sigmoid', 'none']),
  ...CALL_OPTIONS,
})

/**
 * Image classification with a transformers checkpoint (ViT, ConvNeXt, DeiT, BEiT, Swin, ...
 * exported with python/export_vision.py). Concurrent calls share forwards. Made with
 * `ImageClassificationPipeline.load(folder)` or `torch.pipeline('image-classification', folder)`.
 */
class ImageClassificationPipeline extends DensePipeline {
  /** @type {string[]} */ #labels
  /** @type {'softmax' | 'sigmoid' | 'none'} */ #function

  /**
   * Throws `InvalidArg`: use `ImageClassificationPipeline.load(folder)`.
   * @private
   * @param {symbol} token @param {DenseModel} model
   */
  constructor(token, model) {
    super(token, model)
    const manifest = model.manifest
    const count = manifest.numLabels
    this.#labels = Array.from({ length: count }, (_, i) => manifest.id2label?.[String(i)] ?? `LABEL_${i}`)
    this.#function = defaultFunction(manifest, count)
  }

  /**
   * Loads a folder python/export_vision.py wrote from a `*ForImageClassification` checkpoint.
   * Errors: `ModelLoadError`, `InvalidArg`.
   * @param {string} folder
   * @param {DenseLoadOptions} [options]
   * @returns {Promise<ImageClassificationPipeline>}
   */
  static async load(folder, options) {
    const load = ImageClassificationPipeline.load
    return new ImageClassificationPipeline(LOAD, await DenseModel.load(folder, options, 'image-classification', load))
  }

  /** `'image-classification'`. */
  get task() {
    return 'image-classification'
  }

  /** The labels, in the order of the model's logits (config.json's `id2label`). @returns {string[]} */
  get labels() {
    return [...this.#labels]
  }

  /** The function `run` applies unless told (transformers' rule). @returns {'softmax' | 'sigmoid' | 'none'} */
  get functionToApply() {
    return this.#function
  }

  /**
   * The `topK` labels of one image, best first (`[{label, score}]`), or of each of an array of
   * images (an array of those), as transformers' `pipeline('image-classification')`.
   * Errors: `InvalidArg`, `InvalidImage`, `QueueFull`, `Aborted`, `Timeout`, `Disposed`, `ForwardError`.
   * @param {DenseImage | DenseImage[]} images
   * @param {ImageClassificationOptions} [options]
   * @returns {Promise<ImageClassificationLabel[] | ImageClassificationLabel[][]>}
   */
  async run(images, options) {
    const name = 'ImageClassificationPipeline.run'
    const o = opt.read(options, RUN_OPTIONS, `${name}: options`, this.run)
    const width = this.#labels.length
    const topK = Math.min(o.topK ?? 5, width)
    const fn = o.functionToApply ?? this.#function
    return predictAll(this[MODEL], images, o, name, this.run, (logits) => {
      const [scores] = applyFunction(/** @type {Float32Array} */ (logits.toTypedArray()), width, fn)
      return (
        scores
          .map((score, i) => ({ label: this.#labels[i], score }))
          // best first; equal scores keep the labels' order (as Python's stable sort does)
          .sort((a, b) => b.score - a.score)
          .slice(0, topK)
      )
    })
  }
}

module.exports.ImageClassificationPipeline = ImageClassificationPipeline

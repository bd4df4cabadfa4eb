// @ts-check
'use strict'
// A folder python/export_dense.py or python/export_vision.py wrote (kind 'depth-estimation',
// 'image-segmentation', 'image-classification', 'object-detection' or 'image-feature-extraction'): the
// model behind a torch.Batcher, so concurrent calls share forwards (requests whose pixel_values
// differ in size, as Depth Anything's keep-aspect-ratio processor makes them, go to separate
// batches), and the checkpoint's image processor and post-processing as TorchScript
// (preprocess.pt, postprocess.pt: the ATen kernels transformers 5 runs). The depth-estimation and
// image-segmentation, image-classification and object-detection pipelines (and image-feature-extraction's
// backbones) are built on it, from public APIs only.
const path = require('node:path')
const { codedError, describe } = require('../errors')
const torch = require('../torch')
const { imageOrTensorSource, readImages, readFolder, loadProgram, runBatched } = require('./model-folder')

/** @import { Batcher, Tensor } from '../../index' */
/** @import { ImageCallOptions } from './model-folder' */

const DEFAULTS = { maxBatchSize: 16, maxDelayMs: 0, maxQueue: 1024 }
/** What each kind's manifest must say, and which checkpoints export to it. */
const EXPORTS = {
  'depth-estimation': 'DPTForDepthEstimation or DepthAnythingForDepthEstimation checkpoint with python/export_dense.py',
  'image-segmentation':
    'SegformerForSemanticSegmentation, DPTForSemanticSegmentation, Mask2FormerForUniversalSegmentation or DetrForSegmentation checkpoint with python/export_dense.py',
  'image-classification': '*ForImageClassification checkpoint with python/export_vision.py',
  'object-detection': 'DetrForObjectDetection or YolosForObjectDetection checkpoint with python/export_vision.py',
  'image-feature-extraction':
    'vision backbone (ViTModel, Dinov2Model, DeiTModel, ...) with python/export_vision.py, or a CLIPModel or SiglipModel checkpoint',
}

/** The model, its processor and post-processing. Internal: a pipeline holds one. */
class DenseModel {
  /** @type {any} */ #manifest
  /** @type {any} */ #preprocess
  /** @type {any} */ #postprocess
  /** @type {Batcher} */ #batcher
  /** @type {any[]} */ #programs
  #maxBatchSize
  #disposed = false

  /** @param {any} manifest @param {any[]} programs @param {typeof DEFAULTS} o */
  constructor(manifest, [preprocess, postprocess, model], o) {
    this.#manifest = manifest
    this.#preprocess = preprocess
    this.#postprocess = postprocess
    this.#programs = [preprocess, postprocess, model]
    this.#maxBatchSize = o.maxBatchSize
    const { Batcher } = torch()
    this.#batcher = new Batcher(model, {
      maxBatchSize: o.maxBatchSize,
      maxDelayMs: o.maxDelayMs,
      maxQueue: o.maxQueue,
      unpad: false,
    })
  }

  /**
   * Loads `folder` (manifest.json of `kind`, the model, preprocess.pt and postprocess.pt).
   * @param {string} folder @param {unknown} options @param {string} kind @param {Function} caller
   * @returns {Promise<DenseModel>}
   */
  static async load(folder, options, kind, caller) {
    const expect = {
      format: 'torch-node/dense-model',
      kind,
      what: kind,
      exportHow: EXPORTS[/** @type {keyof typeof EXPORTS} */ (kind)],
      batchOf: 'model takes',
    }
    const { manifest, o, signal } = readFolder(folder, options, DEFAULTS, expect, caller)
    const { ScriptModule } = torch()
    const programs = await Promise.all([
      ScriptModule.load(path.join(folder, manifest.preprocess), signal),
      ScriptModule.load(path.join(folder, manifest.postprocess), signal),
      loadProgram(folder, manifest.model, signal),
    ])
    return new DenseModel(manifest, programs, o)
  }

  /** manifest.json as read (a copy). */
  get manifest() {
    return structuredClone(this.#manifest)
  }

  get isDisposed() {
    return this.#disposed
  }

  /** How many images go to the model at once, at most. */
  get maxBatchSize() {
    return this.#maxBatchSize
  }

  /** The Batcher's counts. */
  stats() {
    return this.#batcher.stats()
  }

  #check(caller) {
    if (this.#disposed) throw codedError('Disposed', `the ${this.#manifest.kind} model was disposed`, caller)
  }

  /**
   * One image through the processor, the model (batched with other calls') and the
   * post-processing: the depth float32 `[H, W]` or the label ids int32 `[H, W]` at the image's size,
   * the logits float32 `[labels]` (classification), the detections float32 `[queries, 6]`, a
   * backbone's last_hidden_state and pooler_output flattened float32 `[T * H + pooled]`.
   * @param {string | Uint8Array | Tensor} source @param {ImageCallOptions} o
   * @param {Function} caller @returns {Promise<Tensor>}
   */
  async predict(source, o, caller) {
    this.#check(caller)
    const t = torch()
    const call = o.signal ? [{ signal: o.signal }] : []
    const owned = []
    try {
      const image = source instanceof t.Tensor ? source : await t.image.load(source, { dtype: 'uint8', layout: 'chw' })
      if (image !== source) owned.push(image)
      if (o.signal?.aborted) throw codedError('Aborted', 'the signal was aborted', caller)
      const pixels = /** @type {Tensor} */ (await this.#preprocess.forward(image, ...call))
      owned.push(pixels)
      const batch = pixels.unsqueeze(0)
      owned.push(batch)
      const output = await this.#run(batch, o, caller)
      owned.push(output)
      const row = output.squeeze(0)
      const size = t.tensor([image.shape[1], image.shape[2]], { dtype: 'int64' })
      owned.push(row, size)
      const post = /** @type {Tensor} */ (await this.#postprocess.forward(row, size, ...call))
      if (post.dtype !== 'int64') return post
      owned.push(post)
      return post.to('int32')
    } finally {
      for (const x of owned) x.dispose()
    }
  }

  /** The Batcher's run; `Closed` by dispose() reads `Disposed`. */
  async #run(input, o, caller) {
    const out = await runBatched(
      this.#batcher,
      input,
      o,
      () => this.#disposed,
      () => this.#check(caller),
    )
    if (!(out instanceof torch().Tensor)) throw codedError('ShapeMismatch', `the model returned ${describe(out)}`)
    return out
  }

  /** Frees the programs once the running batches finish; queued and later calls reject (`Disposed`). */
  dispose() {
    if (this.#disposed) return
    this.#disposed = true
    this.#batcher.close().then(() => {
      for (const p of this.#programs) p.dispose()
    })
  }
}

/** The token `load` passes to the constructor: `new` from outside is refused. */
const LOAD = Symbol('DensePipeline.load')
/** The key of a pipeline's DenseModel. */
const MODEL = Symbol('DensePipeline.model')

/** What the depth-estimation and image-segmentation pipelines share: loading, run's loop, disposal. */
class DensePipeline {
  /** @type {DenseModel} */ #model

  /**
   * Throws `InvalidArg`: use the pipeline's static `load(folder)`.
   * @protected
   * @param {symbol} token @param {DenseModel} model
   */
  constructor(token, model) {
    if (token !== LOAD) {
      throw codedError('InvalidArg', `new ${new.target.name}(): use await ${new.target.name}.load(folder)`, new.target)
    }
    this.#model = model
  }

  /** @returns {DenseModel} */
  get [MODEL]() {
    return this.#model
  }

  /** True once `dispose()` was called. */
  get isDisposed() {
    return this.#model.isDisposed
  }

  /** The model Batcher's counts. */
  stats() {
    return this.#model.stats()
  }

  /** Frees the programs once running batches finish; calls waiting and later ones reject with `Disposed`. */
  dispose() {
    this.#model.dispose()
  }

  [Symbol.dispose]() {
    this.dispose()
  }
}

/**
 * `each(prediction, i)` of every image: checked first, then up to maxBatchSize images in flight
 * at a time (a call with thousands of images holds a batch of them in memory, not all).
 * @template T
 * @param {DenseModel} model @param {unknown} images @param {any} o @param {string} name @param {Function} caller
 * @param {(prediction: Tensor) => T} each
 * @returns {Promise<T | T[]>}
 */
async function predictAll(model, images, o, name, caller, each) {
  const { batched, sources } = readImages(images, name, caller, imageOrTensorSource)
  const out = []
  for (let i = 0; i < sources.length; i += model.maxBatchSize) {
    const chunk = sources.slice(i, i + model.maxBatchSize)
    const settled = await Promise.allSettled(chunk.map((s) => model.predict(s, o, caller)))
    const failed = settled.find((p) => p.status === 'rejected')
    if (failed) {
      for (const p of settled) if (p.status === 'fulfilled') p.value.dispose()
      throw failed.reason
    }
    for (const p of settled) {
      const prediction = /** @type {PromiseFulfilledResult<Tensor>} */ (p).value
      try {
        out.push(each(prediction))
      } finally {
        prediction.dispose()
      }
    }
  }
  return batched ? out : out[0]
}

module.exports.DenseModel = DenseModel
module.exports.DensePipeline = DensePipeline
module.exports.LOAD = LOAD
module.exports.MODEL = MODEL
module.exports.predictAll = predictAll

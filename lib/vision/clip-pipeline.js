// @ts-check
'use strict'
// What the CLIP and SigLIP pipelines share (zero-shot-image-classification,
// image-feature-extraction): a ClipModel made by the subclass's static `load`, and the getters and
// disposal over it. The model is reached through the MODEL symbol, which only lib/ holds.
const { codedError } = require('../errors')

/** @import { ClipModel } from './clip-model' */

/** The token `load` passes to the constructor: `new` from outside is refused. */
const LOAD = Symbol('ClipPipeline.load')
/** The key of a pipeline's ClipModel. */
const MODEL = Symbol('ClipPipeline.model')

class ClipPipeline {
  /** @type {ClipModel} */ #model

  /**
   * Throws `InvalidArg`: use the pipeline's static `load(folder)` (or `torch.pipeline(task, folder)`).
   * @protected
   * @param {symbol} token @param {ClipModel} model @param {string} task
   */
  constructor(token, model, task) {
    if (token !== LOAD) {
      const name = new.target.name
      throw codedError('InvalidArg', `new ${name}(): use await torch.pipeline('${task}', folder)`, new.target)
    }
    this.#model = model
  }

  /** @returns {ClipModel} */
  get [MODEL]() {
    return this.#model
  }

  /**
   * `'clip'` (zero-shot scores are a softmax over the labels) or `'siglip'` (each label's sigmoid).
   * @returns {'clip' | 'siglip'}
   */
  get family() {
    return this.#model.family
  }

  /** The embeddings' size. @returns {number} */
  get dim() {
    return this.#model.dim
  }

  /** True once `dispose()` was called. */
  get isDisposed() {
    return this.#model.isDisposed
  }

  /** The text and image Batchers' counts. */
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

module.exports.ClipPipeline = ClipPipeline
module.exports.LOAD = LOAD
module.exports.MODEL = MODEL

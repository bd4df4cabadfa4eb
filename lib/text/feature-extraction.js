// @ts-check
'use strict'
// torch.pipeline('feature-extraction', folder): torch.text.SentenceEncoder under the pipeline's
// name, so that one entry point takes every task; `run` is `encode`.
const { codedError } = require('../errors')
const { PIPELINE } = require('./logits')

/** @import { text } from '../../index' */
/** @import { SentenceEncodeOptions } from './sentence-encoder' */
/** @import { BatcherStats } from '../batcher' */
/** @import { Tensor } from '../../index' */

/**
 * Sentence embeddings over a folder written by `npx torch-node export` from a text encoder: the
 * `SentenceEncoder` it wraps does the work. Made with `torch.pipeline('feature-extraction', folder)`.
 */
class FeatureExtractionPipeline {
  /** @type {text.SentenceEncoder} */ #encoder

  /**
   * Throws `InvalidArg`: use `torch.pipeline('feature-extraction', folder)`.
   * @private
   * @param {symbol} token @param {text.SentenceEncoder} encoder
   */
  constructor(token, encoder) {
    if (token !== PIPELINE) {
      throw codedError(
        'InvalidArg',
        "new FeatureExtractionPipeline(): use await torch.pipeline('feature-extraction', folder)",
        FeatureExtractionPipeline,
      )
    }
    this.#encoder = encoder
  }

  /** `'feature-extraction'`. */
  get task() {
    return 'feature-extraction'
  }

  /**
   * The SentenceEncoder that runs the calls.
   * @returns {text.SentenceEncoder}
   */
  get encoder() {
    return this.#encoder
  }

  /** True once `dispose()` was called. */
  get isDisposed() {
    return this.#encoder.isDisposed
  }

  /**
   * The Batcher's counts.
   * @returns {BatcherStats}
   */
  stats() {
    return this.#encoder.stats()
  }

  /**
   * `SentenceEncoder.encode`: a float32 `[n, dim]` tensor, one row per text.
   * @param {string | string[]} input
   * @param {SentenceEncodeOptions} [options]
   * @returns {Promise<Tensor>}
   */
  run(input, options) {
    return this.#encoder.encode(input, options)
  }

  /** Frees the program; calls waiting reject with `Disposed`. */
  dispose() {
    this.#encoder.dispose()
  }

  [Symbol.dispose]() {
    this.dispose()
  }
}

// One assignment per name: tsc takes a class exported so as a type too (not from an object literal).
module.exports.FeatureExtractionPipeline = FeatureExtractionPipeline

// @ts-check
'use strict'
// torch.pipeline('image-feature-extraction', folder) over a CLIP or SigLIP folder: the image
// embeddings (CLIPModel.get_image_features: the image tower's pooled output, projected), and the
// text embeddings of the same folder (get_text_features) in the same space, for search by text.
const { codedError } = require('../errors')
const opt = require('../options')
const { ClipModel, normalized } = require('./clip-model')
const { CALL_OPTIONS, imageSource, readImages } = require('./model-folder')
const { ClipPipeline, LOAD, MODEL } = require('./clip-pipeline')

/** @import { Tensor } from '../../index' */

// The public types below become index.d.ts's declarations (tools/lib-typings.js).
/**
 * An image: a file path, a `data:image/...;base64,` URL, or the file's bytes (JPEG, PNG, WebP, GIF, BMP, TIFF).
 * @typedef {string | Uint8Array} ImageSource
 */
/**
 * Options of `ImageFeatureExtractionPipeline.run` and `embedText`; any other key is refused (`InvalidArg`).
 * @typedef {object} ImageFeatureExtractionOptions
 * @property {boolean} [normalize] L2-normalize each row (default `false`: get_image_features /
 *   get_text_features as they are; normalized rows make the dot product the cosine similarity).
 * @property {AbortSignal} [signal] Aborting rejects with `Aborted` while the call's requests are still queued.
 * @property {number} [timeoutMs] The longest a request may wait in the queue, in milliseconds (then `Timeout`).
 */

const RUN_OPTIONS = opt.bag({ normalize: opt.boolean, ...CALL_OPTIONS })

/** Rows as one float32 `[n, dim]` tensor. @param {Float32Array[]} rows @param {number} dim @param {boolean} unit */
function tensorOf(rows, dim, unit) {
  const data = new Float32Array(rows.length * dim)
  rows.forEach((row, i) => data.set(unit ? normalized(row) : row, i * dim))
  return require('../torch')().fromBuffer(data, [rows.length, dim])
}

/**
 * Image embeddings (and text embeddings in the same space) from a CLIP or SigLIP folder. Concurrent
 * calls share forwards. Made with `ImageFeatureExtractionPipeline.load(folder)` (or
 * `torch.pipeline('image-feature-extraction', folder)`).
 */
class ImageFeatureExtractionPipeline extends ClipPipeline {
  /**
   * Throws `InvalidArg`: use `ImageFeatureExtractionPipeline.load(folder)`.
   * @private
   * @param {symbol} token @param {ClipModel} model
   */
  constructor(token, model) {
    super(token, model, 'image-feature-extraction')
  }

  /**
   * Loads a folder `npx torch-node export` wrote from a CLIPModel or SiglipModel checkpoint. Options:
   * `maxBatchSize` (32), `maxDelayMs` (0), `maxQueue` (1024), `signal`. Errors: `ModelLoadError`, `InvalidArg`.
   * @param {string} folder
   * @param {{ maxBatchSize?: number, maxDelayMs?: number, maxQueue?: number, signal?: AbortSignal }} [options]
   * @returns {Promise<ImageFeatureExtractionPipeline>}
   */
  static async load(folder, options) {
    return new ImageFeatureExtractionPipeline(
      LOAD,
      await ClipModel.load(folder, options, ImageFeatureExtractionPipeline.load),
    )
  }

  /** `'image-feature-extraction'`. */
  get task() {
    return 'image-feature-extraction'
  }

  /** The folder's tokenizer (`tokenizer.json`), as `embedText` uses it. */
  get tokenizer() {
    return this[MODEL].tokenizer
  }

  /** The most tokens of a text the text tower sees (longer texts are cut). @returns {number} */
  get maxSequenceLength() {
    return this[MODEL].maxSequenceLength
  }

  /**
   * How many tokens the texts are (each cut at `maxSequenceLength`, special tokens included).
   * @param {string[]} texts @returns {Promise<number>}
   */
  async countTokens(texts) {
    const counts = await Promise.all(texts.map((t) => this[MODEL].tokenize(t)))
    return counts.reduce((sum, ids) => sum + ids.length, 0)
  }

  /**
   * The images' embeddings: a float32 `[n, dim]` tensor, one row per image (n = 1 for one image).
   * Errors: `InvalidArg`, `InvalidImage`, `QueueFull`, `Aborted`, `Timeout`, `Disposed`.
   * @param {ImageSource | ImageSource[]} images
   * @param {ImageFeatureExtractionOptions} [options]
   * @returns {Promise<Tensor>}
   */
  async run(images, options) {
    const name = 'ImageFeatureExtractionPipeline.run'
    const caller = this.run
    const { sources } = readImages(images, name, caller, imageSource)
    const o = opt.read(options, RUN_OPTIONS, `${name}: options`, caller)
    const rows = await this[MODEL].embedImages(sources, o, caller)
    return tensorOf(rows, this[MODEL].dim, o.normalize === true)
  }

  /**
   * The texts' embeddings in the images' space: a float32 `[n, dim]` tensor, tokenized as the
   * zero-shot pipeline does (CLIP: cut at the model's positions; SigLIP: padded to 64 tokens).
   * Errors as `run`.
   * @param {string | string[]} texts
   * @param {ImageFeatureExtractionOptions} [options]
   * @returns {Promise<Tensor>}
   */
  async embedText(texts, options) {
    const name = 'ImageFeatureExtractionPipeline.embedText'
    const caller = this.embedText
    const list = Array.isArray(texts) ? Array.from(texts) : [texts]
    list.forEach((t, i) => {
      if (typeof t !== 'string') {
        throw codedError('InvalidArg', `${name}: texts[${i}]: expected a string, got ${typeof t}`, caller)
      }
    })
    if (list.length === 0) throw codedError('InvalidArg', `${name}: texts: expected at least one text`, caller)
    const o = opt.read(options, RUN_OPTIONS, `${name}: options`, caller)
    const rows = await this[MODEL].embedTexts(list, o, caller)
    return tensorOf(rows, this[MODEL].dim, o.normalize === true)
  }
}

module.exports.ImageFeatureExtractionPipeline = ImageFeatureExtractionPipeline

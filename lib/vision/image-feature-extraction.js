// @ts-check
'use strict'
// torch.pipeline('image-feature-extraction', folder), over either kind of folder:
// - a CLIP or SigLIP folder (kind 'clip'): the image embeddings (CLIPModel.get_image_features: the
//   image tower's pooled output, projected), and the text embeddings of the same folder
//   (get_text_features) in the same space, for search by text;
// - a vision backbone python/export_vision.py wrote (kind 'image-feature-extraction': ViTModel,
//   Dinov2Model, DeiTModel, ...): per image, transformers 5's ImageFeatureExtractionPipeline's answer,
//   last_hidden_state [1, T, H], or with `pool` pooler_output [1, H].
const fs = require('node:fs')
const path = require('node:path')
const { codedError } = require('../errors')
const opt = require('../options')
const { ClipModel, normalized } = require('./clip-model')
const { DenseModel, predictAll } = require('./dense-model')
const { CALL_OPTIONS, imageSource, readImages } = require('./model-folder')

/** @import { Tensor } from '../../index' */

// The public types below become index.d.ts's declarations (tools/lib-typings.js).
/**
 * An image: a file path, a `data:image/...;base64,` URL, or the file's bytes (JPEG, PNG, WebP, GIF, BMP, TIFF).
 * @typedef {string | Uint8Array} ImageSource
 */
/**
 * Options of `ImageFeatureExtractionPipeline.run` and `embedText`; any other key is refused
 * (`InvalidArg`), as is an option the folder's kind does not take.
 * @typedef {object} ImageFeatureExtractionOptions
 * @property {boolean} [normalize] CLIP and SigLIP folders only: L2-normalize each row (default
 *   `false`: get_image_features / get_text_features as they are; normalized rows make the dot
 *   product the cosine similarity).
 * @property {boolean} [pool] Backbone folders only: each image's pooler_output `[1, H]` instead of
 *   its last_hidden_state `[1, T, H]` (default `false`, as transformers' `pool`); `InvalidArg` where
 *   the model has no pooler (transformers raises ValueError).
 * @property {AbortSignal} [signal] Aborting rejects with `Aborted` while the call's requests are still queued.
 * @property {number} [timeoutMs] The longest a request may wait in the queue, in milliseconds (then `Timeout`).
 */

/** The manifest kind of a backbone folder (python/export_vision.py). */
const BACKBONE = 'image-feature-extraction'
const CLIP_OPTIONS = opt.bag(
  { normalize: opt.boolean, ...CALL_OPTIONS },
  { hints: { pool: "a CLIP or SigLIP folder's embeddings are pooled and projected already (pool is for backbones)" } },
)
const BACKBONE_OPTIONS = opt.bag(
  { pool: opt.boolean, ...CALL_OPTIONS },
  {
    hints: {
      normalize: "transformers returns a backbone's hidden states as they are (normalize is for CLIP and SigLIP)",
    },
  },
)
/** The token `load` passes to the constructor: `new` from outside is refused. */
const LOAD = Symbol('ImageFeatureExtractionPipeline.load')

/** A folder's manifest kind, or undefined where there is none to read (the model's load says why). @param {unknown} folder */
function kindOf(folder) {
  if (typeof folder !== 'string') return undefined
  try {
    return JSON.parse(fs.readFileSync(path.join(folder, 'manifest.json'), 'utf8'))?.kind
  } catch {
    return undefined
  }
}

/**
 * A backbone's output row (last_hidden_state flattened, then pooler_output flattened) as
 * transformers returns one image's: `[1, T, H]`, or pooled `[1, ...pooledShape]`.
 * @param {Tensor} row @param {number} hidden @param {number[] | null} pooledShape @param {boolean} pool
 * @returns {Tensor}
 */
function featuresOf(row, hidden, pooledShape, pool) {
  const pooled = pooledShape ? pooledShape.reduce((a, b) => a * b, 1) : 0
  const tokens = (row.shape[0] - pooled) / hidden
  if (!Number.isInteger(tokens) || tokens < 1) {
    throw codedError('ShapeMismatch', `the model returned ${row.shape[0]} values, not tokens × ${hidden} + ${pooled}`)
  }
  const part = pool ? row.narrow(0, tokens * hidden, pooled) : row.narrow(0, 0, tokens * hidden)
  try {
    return part.reshape(pool ? [1, .../** @type {number[]} */ (pooledShape)] : [1, tokens, hidden])
  } finally {
    part.dispose()
  }
}

/** Rows as one float32 `[n, dim]` tensor. @param {Float32Array[]} rows @param {number} dim @param {boolean} unit */
function tensorOf(rows, dim, unit) {
  const data = new Float32Array(rows.length * dim)
  rows.forEach((row, i) => data.set(unit ? normalized(row) : row, i * dim))
  return require('../torch')().fromBuffer(data, [rows.length, dim])
}

/**
 * Image features: from a CLIP or SigLIP folder, image embeddings (and text embeddings in the same
 * space); from a vision backbone folder (ViT, DINOv2, DeiT, ...), each image's last_hidden_state or
 * pooler_output, as transformers' pipeline('image-feature-extraction'). Concurrent calls share
 * forwards. Made with `ImageFeatureExtractionPipeline.load(folder)` (or
 * `torch.pipeline('image-feature-extraction', folder)`).
 */
class ImageFeatureExtractionPipeline {
  /** @type {ClipModel | null} */ #clip
  /** @type {DenseModel | null} */ #backbone
  /** @type {{ hiddenSize: number, pooledShape: number[] | null } | null} */ #shapes

  /**
   * Throws `InvalidArg`: use `ImageFeatureExtractionPipeline.load(folder)`.
   * @private
   * @param {symbol} token @param {ClipModel | DenseModel} model
   */
  constructor(token, model) {
    if (token !== LOAD) {
      throw codedError(
        'InvalidArg',
        "new ImageFeatureExtractionPipeline(): use await torch.pipeline('image-feature-extraction', folder)",
        new.target,
      )
    }
    this.#clip = model instanceof ClipModel ? model : null
    this.#backbone = model instanceof DenseModel ? model : null
    const m = this.#backbone?.manifest
    this.#shapes = m ? { hiddenSize: m.hiddenSize, pooledShape: m.pooledShape ?? null } : null
  }

  /**
   * Loads a folder `npx torch-node export` wrote from a CLIPModel or SiglipModel checkpoint (kind
   * `'clip'`), or python/export_vision.py from a vision backbone (kind `'image-feature-extraction'`).
   * Options: `maxBatchSize` (CLIP 32, backbones 16), `maxDelayMs` (0), `maxQueue` (1024), `signal`.
   * Errors: `ModelLoadError`, `InvalidArg`.
   * @param {string} folder
   * @param {{ maxBatchSize?: number, maxDelayMs?: number, maxQueue?: number, signal?: AbortSignal }} [options]
   * @returns {Promise<ImageFeatureExtractionPipeline>}
   */
  static async load(folder, options) {
    const caller = ImageFeatureExtractionPipeline.load
    if (kindOf(folder) !== BACKBONE) {
      return new ImageFeatureExtractionPipeline(LOAD, await ClipModel.load(folder, options, caller))
    }
    const model = await DenseModel.load(folder, options, BACKBONE, caller)
    const { hiddenSize, pooledShape } = model.manifest
    const size = (/** @type {unknown} */ n) => Number.isInteger(n) && /** @type {number} */ (n) > 0
    if (!size(hiddenSize) || !(pooledShape === null || (Array.isArray(pooledShape) && pooledShape.every(size)))) {
      model.dispose()
      throw codedError(
        'ModelLoadError',
        `${folder}: manifest.json: hiddenSize ${JSON.stringify(hiddenSize)} and pooledShape ` +
          `${JSON.stringify(pooledShape)} are not a size and null or sizes`,
        caller,
      )
    }
    return new ImageFeatureExtractionPipeline(LOAD, model)
  }

  /** `'image-feature-extraction'`. */
  get task() {
    return 'image-feature-extraction'
  }

  /**
   * `'clip'` (a CLIP or SigLIP folder: embeddings, `embedText`) or `'backbone'` (a vision
   * backbone: hidden states, `pool`).
   * @returns {'clip' | 'backbone'}
   */
  get kind() {
    return this.#clip ? 'clip' : 'backbone'
  }

  /**
   * A CLIP folder's `'clip'` (zero-shot scores are a softmax over the labels) or `'siglip'` (each
   * label's sigmoid); null for a backbone.
   * @returns {'clip' | 'siglip' | null}
   */
  get family() {
    return this.#clip ? this.#clip.family : null
  }

  /** The embeddings' size (a backbone: the hidden size H). @returns {number} */
  get dim() {
    return this.#clip ? this.#clip.dim : /** @type {{ hiddenSize: number }} */ (this.#shapes).hiddenSize
  }

  /**
   * A backbone's pooler_output shape per image, without its leading 1 (`[H]`), or null where the
   * model has no pooler (`pool` is refused) or the folder is a CLIP one.
   * @returns {number[] | null}
   */
  get pooledShape() {
    return this.#shapes?.pooledShape ? [...this.#shapes.pooledShape] : null
  }

  /** The folder's tokenizer (`tokenizer.json`), as `embedText` uses it; null for a backbone. */
  get tokenizer() {
    return this.#clip ? this.#clip.tokenizer : null
  }

  /** The most tokens of a text the text tower sees (longer texts are cut); 0 for a backbone. @returns {number} */
  get maxSequenceLength() {
    return this.#clip ? this.#clip.maxSequenceLength : 0
  }

  /** True once `dispose()` was called. */
  get isDisposed() {
    return /** @type {ClipModel | DenseModel} */ (this.#clip ?? this.#backbone).isDisposed
  }

  /** The Batchers' counts: a CLIP folder's `{ text, image }`, a backbone's model Batcher's. */
  stats() {
    return this.#clip ? this.#clip.stats() : /** @type {DenseModel} */ (this.#backbone).stats()
  }

  /** Frees the programs once running batches finish; calls waiting and later ones reject with `Disposed`. */
  dispose() {
    ;(this.#clip ?? /** @type {DenseModel} */ (this.#backbone)).dispose()
  }

  [Symbol.dispose]() {
    this.dispose()
  }

  /** The CLIP model, or InvalidArg naming `what` a backbone lacks. @param {string} what @param {Function} caller */
  #clipFor(what, caller) {
    if (this.#clip) return this.#clip
    throw codedError('InvalidArg', `${what}: a vision backbone has no text tower (a CLIP or SigLIP folder has)`, caller)
  }

  /**
   * How many tokens the texts are (each cut at `maxSequenceLength`, special tokens included).
   * CLIP and SigLIP folders only (`InvalidArg` for a backbone).
   * @param {string[]} texts @returns {Promise<number>}
   */
  async countTokens(texts) {
    const clip = this.#clipFor('ImageFeatureExtractionPipeline.countTokens', this.countTokens)
    const counts = await Promise.all(texts.map((t) => clip.tokenize(t)))
    return counts.reduce((sum, ids) => sum + ids.length, 0)
  }

  /**
   * The images' features. A CLIP or SigLIP folder: their embeddings, one float32 `[n, dim]` tensor,
   * one row per image (n = 1 for one image). A backbone: per image, as transformers'
   * pipeline('image-feature-extraction', ...)(image, return_tensors=True): last_hidden_state
   * float32 `[1, T, H]`, or with `pool: true` pooler_output `[1, H]`; one image gives a Tensor,
   * an array of images an array of them (a backbone also takes uint8 RGB Tensors `[3, H, W]`).
   * Errors: `InvalidArg`, `InvalidImage`, `QueueFull`, `Aborted`, `Timeout`, `Disposed`.
   * @param {ImageSource | Tensor | Array<ImageSource | Tensor>} images
   * @param {ImageFeatureExtractionOptions} [options]
   * @returns {Promise<Tensor | Tensor[]>}
   */
  async run(images, options) {
    const name = 'ImageFeatureExtractionPipeline.run'
    const caller = this.run
    if (this.#backbone) {
      const o = opt.read(options, BACKBONE_OPTIONS, `${name}: options`, caller)
      const { hiddenSize, pooledShape } = /** @type {{ hiddenSize: number, pooledShape: number[] | null }} */ (
        this.#shapes
      )
      const pool = o.pool === true
      if (pool && !pooledShape) {
        throw codedError('InvalidArg', `${name}: options.pool: this model has no pooler (no pooler_output)`, caller)
      }
      return predictAll(this.#backbone, images, o, name, caller, (row) =>
        featuresOf(row, hiddenSize, pooledShape, pool),
      )
    }
    const clip = /** @type {ClipModel} */ (this.#clip)
    const { sources } = readImages(images, name, caller, imageSource)
    const o = opt.read(options, CLIP_OPTIONS, `${name}: options`, caller)
    const rows = await clip.embedImages(sources, o, caller)
    return tensorOf(rows, clip.dim, o.normalize === true)
  }

  /**
   * The texts' embeddings in the images' space: a float32 `[n, dim]` tensor, tokenized as the
   * zero-shot pipeline does (CLIP: cut at the model's positions; SigLIP: padded to 64 tokens).
   * CLIP and SigLIP folders only. Errors as `run`.
   * @param {string | string[]} texts
   * @param {ImageFeatureExtractionOptions} [options]
   * @returns {Promise<Tensor>}
   */
  async embedText(texts, options) {
    const name = 'ImageFeatureExtractionPipeline.embedText'
    const caller = this.embedText
    const clip = this.#clipFor(name, caller)
    const list = Array.isArray(texts) ? Array.from(texts) : [texts]
    list.forEach((t, i) => {
      if (typeof t !== 'string') {
        throw codedError('InvalidArg', `${name}: texts[${i}]: expected a string, got ${typeof t}`, caller)
      }
    })
    if (list.length === 0) throw codedError('InvalidArg', `${name}: texts: expected at least one text`, caller)
    const o = opt.read(options, CLIP_OPTIONS, `${name}: options`, caller)
    const rows = await clip.embedTexts(list, o, caller)
    return tensorOf(rows, clip.dim, o.normalize === true)
  }
}

module.exports.ImageFeatureExtractionPipeline = ImageFeatureExtractionPipeline

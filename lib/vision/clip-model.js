// @ts-check
'use strict'
// A folder `torch-node export` wrote from a CLIPModel or SiglipModel checkpoint (kind 'clip'):
// its text and image towers, each behind a torch.Batcher so concurrent calls share forwards, the
// image processor (preprocess.pt, a TorchScript module running the kernels transformers 5's
// torchvision backend runs) and the logit scale and bias. The zero-shot and image-feature
// pipelines and /v1/embeddings are built on it. Composed from public APIs (torch.image.load,
// Tokenizer, AOTModule/ScriptModule, Batcher), so it lives in JS.
const path = require('node:path')
const { codedError, describe } = require('../errors')
const torch = require('../torch')
const { readFolder, loadProgram, runBatched } = require('./model-folder')

/** @import { Batcher, Tensor } from '../../index' */
/** @import { ImageCallOptions } from './model-folder' */

const DEFAULTS = { maxBatchSize: 32, maxDelayMs: 0, maxQueue: 1024 }
const EXPECT = {
  format: 'torch-node/clip-model',
  kind: 'clip',
  what: 'CLIP or SigLIP',
  exportHow: 'CLIPModel or SiglipModel checkpoint with npx torch-node export',
  batchOf: 'towers take',
}
// A short text is tokenized on the JS thread (a hop to the executor costs more than that).
const SYNC_TOKENIZE_CHARS = 4096

/** L2 norm of a row, as transformers' _get_vector_norm. @param {ArrayLike<number>} row */
function norm(row) {
  let sum = 0
  for (let i = 0; i < row.length; i++) sum += row[i] * row[i]
  return Math.sqrt(sum)
}

/** A Float32Array row divided by its L2 norm. @param {Float32Array} row */
function normalized(row) {
  const n = norm(row)
  return row.map((v) => v / n)
}

/** The two towers of a CLIP or SigLIP folder. Internal: the pipelines and the server hold one. */
class ClipModel {
  /** @type {any} */ #manifest
  /** @type {any} */ #tokenizer
  /** @type {any} */ #preprocess
  /** @type {Batcher} */ #text
  /** @type {Batcher} */ #image
  /** @type {any[]} */ #programs
  /** @type {number} */ #maxBatchSize
  #disposed = false

  /**
   * @param {any} manifest @param {any} tokenizer @param {any} preprocess @param {any} text @param {any} image
   * @param {typeof DEFAULTS} o
   */
  constructor(manifest, tokenizer, preprocess, text, image, o) {
    this.#manifest = manifest
    this.#tokenizer = tokenizer
    this.#preprocess = preprocess
    this.#programs = [preprocess, text, image]
    this.#maxBatchSize = o.maxBatchSize
    const { Batcher } = torch()
    const batching = { maxBatchSize: o.maxBatchSize, maxDelayMs: o.maxDelayMs, maxQueue: o.maxQueue, unpad: false }
    const withMask = manifest.text.inputs.includes('attention_mask')
    // CLIP: padded to the longest with the mask as the second input (the pooled eos token does not
    // see padding); SigLIP: every text is already 64 tokens.
    this.#text = new Batcher(
      text,
      withMask ? { ...batching, padValue: manifest.padTokenId, mask: { index: 1, dtype: 'int64' } } : batching,
    )
    this.#image = new Batcher(image, batching)
  }

  /**
   * Loads `folder` (manifest.json, tokenizer.json, the towers and preprocess.pt).
   * @param {string} folder @param {unknown} options @param {Function} caller @returns {Promise<ClipModel>}
   */
  static async load(folder, options, caller) {
    const { manifest, o, signal } = readFolder(folder, options, DEFAULTS, EXPECT, caller)
    const { text, ScriptModule } = torch()
    const tokenizer = text.Tokenizer.fromFile(path.join(folder, manifest.tokenizer))
    const [preprocess, textTower, imageTower] = await Promise.all([
      ScriptModule.load(path.join(folder, manifest.preprocess), signal),
      loadProgram(folder, manifest.text, signal),
      loadProgram(folder, manifest.image, signal),
    ])
    return new ClipModel(manifest, tokenizer, preprocess, textTower, imageTower, o)
  }

  /** 'clip' (softmax over labels) or 'siglip' (sigmoid of each). @returns {'clip' | 'siglip'} */
  get family() {
    return this.#manifest.family
  }

  /** The embeddings' size. @returns {number} */
  get dim() {
    return this.#manifest.dim
  }

  /** The folder's tokenizer. */
  get tokenizer() {
    return this.#tokenizer
  }

  /** manifest.json as read (a copy). */
  get manifest() {
    return structuredClone(this.#manifest)
  }

  get isDisposed() {
    return this.#disposed
  }

  /** Both Batchers' counts. */
  stats() {
    return { text: this.#text.stats(), image: this.#image.stats() }
  }

  /** A tower's Batcher run; `Closed` by dispose() reads `Disposed`. */
  #run(batcher, input, o, caller) {
    return runBatched(
      batcher,
      input,
      o,
      () => this.#disposed,
      () => this.#check(caller),
    )
  }

  #check(caller) {
    if (this.#disposed) throw codedError('Disposed', 'the CLIP model was disposed', caller)
  }

  /** The most tokens of a text the text tower sees (longer texts are cut). @returns {number} */
  get maxSequenceLength() {
    const padding = this.#manifest.textPadding
    return padding.strategy === 'max_length' ? padding.length : this.#manifest.maxSequenceLength
  }

  /**
   * A text's token ids, cut at `maxSequenceLength`; a long text is tokenized on the executor.
   * @param {string} text @returns {Promise<number[]>}
   */
  async tokenize(text) {
    const options = { maxLength: this.maxSequenceLength, truncation: true }
    if (text.length <= SYNC_TOKENIZE_CHARS) return this.#tokenizer.encode(text, options).ids
    const [encoding] = await this.#tokenizer.encodeBatch([text], { ...options, padding: false })
    return encoding.ids
  }

  /**
   * get_text_features of each text (not normalized), as transformers' zero-shot pipeline tokenizes
   * them: CLIP to the longest (cut at the model's positions), SigLIP to 64 tokens.
   * @param {string[]} texts @param {ImageCallOptions} o @param {Function} [caller] @returns {Promise<Float32Array[]>}
   */
  async embedTexts(texts, o, caller) {
    this.#check(caller)
    const m = this.#manifest
    const fixed = m.textPadding.strategy === 'max_length' ? m.textPadding.length : 0
    const ids = await Promise.all(texts.map((text) => this.tokenize(text)))
    for (const row of ids) while (row.length < fixed) row.push(m.padTokenId)
    // Texts of one length go together, up to maxBatchSize a request: a call with thousands of
    // labels is a few requests (at most one part-filled per length), not thousands in the queue.
    /** @type {Map<number, number[]>} */
    const byLength = new Map()
    ids.forEach((row, i) => byLength.set(row.length, [...(byLength.get(row.length) ?? []), i]))
    const out = new Array(texts.length)
    const chunks = [...byLength.values()].flatMap((group) => chunked(group, this.#maxBatchSize))
    await Promise.all(
      chunks.map(async (chunk) => {
        const input = torch().tensor(
          chunk.map((i) => ids[i]),
          { dtype: 'int64' },
        )
        try {
          const rows = rowsOf(await this.#run(this.#text, input, o, caller), chunk.length, m.dim)
          chunk.forEach((i, k) => (out[i] = rows[k]))
        } finally {
          input.dispose()
        }
      }),
    )
    return out
  }

  /**
   * get_image_features of each image (not normalized): decoded (the decoder's limits apply), then
   * the checkpoint's processor (preprocess.pt), then the image tower; up to maxBatchSize images a
   * request, one request's images in memory at a time.
   * @param {Array<string | Uint8Array>} sources @param {ImageCallOptions} o @param {Function} [caller]
   * @returns {Promise<Float32Array[]>}
   */
  async embedImages(sources, o, caller) {
    this.#check(caller)
    const out = []
    for (const chunk of chunked(sources, this.#maxBatchSize)) {
      const settled = await Promise.allSettled(chunk.map((source) => this.pixelValues(source, o, caller)))
      const pixels = settled.flatMap((p) => (p.status === 'fulfilled' ? [p.value] : []))
      let batch
      try {
        const failed = settled.find((p) => p.status === 'rejected')
        if (failed) throw failed.reason
        batch = torch().stack(pixels, 0)
        const rows = rowsOf(await this.#run(this.#image, batch, o, caller), chunk.length, this.#manifest.dim)
        out.push(...rows)
      } finally {
        batch?.dispose()
        for (const p of pixels) p.dispose()
      }
    }
    return out
  }

  /**
   * The processor's pixel_values of one image, float32 `[3, H, W]` (the caller disposes it).
   * @param {string | Uint8Array} source @param {ImageCallOptions} o @param {Function} [caller] @returns {Promise<Tensor>}
   */
  async pixelValues(source, o, caller) {
    this.#check(caller)
    const decoded = await torch().image.load(source, { dtype: 'uint8', layout: 'chw' })
    try {
      if (o.signal?.aborted) throw codedError('Aborted', 'the signal was aborted', caller)
      const run = o.signal ? this.#preprocess.forward(decoded, { signal: o.signal }) : this.#preprocess.forward(decoded)
      return /** @type {Tensor} */ (await run)
    } finally {
      decoded.dispose()
    }
  }

  /** Frees the programs once the running batches finish; queued and later calls reject (`Disposed`). */
  dispose() {
    if (this.#disposed) return
    this.#disposed = true
    Promise.all([this.#text.close(), this.#image.close()]).then(() => {
      for (const p of this.#programs) p.dispose()
    })
  }
}

/**
 * A tower's `[n, dim]` output as n Float32Array rows (the tensor disposed).
 * @param {unknown} out @param {number} n @param {number} dim @returns {Float32Array[]}
 */
function rowsOf(out, n, dim) {
  const { Tensor } = torch()
  if (!(out instanceof Tensor)) throw codedError('ShapeMismatch', `a tower returned ${describe(out)}`)
  try {
    if (out.ndim !== 2 || out.shape[0] !== n || out.shape[1] !== dim) {
      throw codedError('ShapeMismatch', `a tower returned shape [${out.shape}], expected [${n}, ${dim}]`)
    }
    const flat = /** @type {Float32Array} */ (out.toTypedArray())
    return Array.from({ length: n }, (_, i) => flat.subarray(i * dim, (i + 1) * dim))
  } finally {
    out.dispose()
  }
}

/** `list` in runs of at most `size`. @template T @param {T[]} list @param {number} size @returns {T[][]} */
function chunked(list, size) {
  return Array.from({ length: Math.ceil(list.length / size) }, (_, i) => list.slice(i * size, (i + 1) * size))
}

// One assignment per name: tsc takes a class exported so as a type too (not from an object literal).
module.exports.ClipModel = ClipModel
module.exports.normalized = normalized

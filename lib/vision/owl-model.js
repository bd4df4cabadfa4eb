// @ts-check
'use strict'
// A folder python/export_owl.py wrote from an OwlViTForObjectDetection or Owlv2ForObjectDetection
// checkpoint (kind 'owl'): the query (text) and image programs, each behind a torch.Batcher so
// concurrent calls share forwards, the image processor (preprocess.pt) and the head (head.pt: the
// class head's sigmoid scores for each label and patch, the boxes in the image's pixels). The
// labels' query embeddings are kept, so callers asking for the same labels embed them once.
// Composed from public APIs (torch.image.load, Tokenizer, AOTModule/ScriptModule, Batcher).
const path = require('node:path')
const { codedError, describe } = require('../errors')
const torch = require('../torch')
const { readFolder, loadProgram, runBatched } = require('./model-folder')

/** @import { Batcher, Tensor } from '../../index' */
/** @import { ImageCallOptions } from './model-folder' */

const DEFAULTS = { maxBatchSize: 16, maxDelayMs: 0, maxQueue: 1024 }
const EXPECT = {
  format: 'torch-node/owl-model',
  kind: 'owl',
  what: 'OWL-ViT or OWLv2',
  exportHow: 'OwlViTForObjectDetection or Owlv2ForObjectDetection checkpoint with npx torch-node export',
  batchOf: 'programs take',
}
/** The most labels whose query embeddings a model keeps (OWLv2 base: 2 KiB each, 8 MiB in all). */
const QUERY_CACHE = 4096

/**
 * A label's query: its embedding, and whether the detector ignores it (transformers' query_mask:
 * a label whose first token id is 0 scores nothing).
 * @typedef {{ embedding: Float32Array, ignored: boolean }} Query
 */

/** The programs of an OWL-ViT or OWLv2 folder. Internal: the pipeline holds one. */
class OwlModel {
  /** @type {any} */ #manifest
  /** @type {any} */ #tokenizer
  /** @type {any} */ #preprocess
  /** @type {any} */ #head
  /** @type {Batcher} */ #text
  /** @type {Batcher} */ #image
  /** @type {any[]} */ #programs
  /** @type {number} */ #maxBatchSize
  #disposed = false
  /**
   * The labels' queries, shared by calls: a promise per label, most recently used last, at most
   * QUERY_CACHE; one that fails is forgotten.
   * @type {Map<string, Promise<Query>>}
   */
  #queries = new Map()

  /**
   * @param {any} manifest @param {any} tokenizer @param {any[]} programs preprocess, head, text, image
   * @param {typeof DEFAULTS} o
   */
  constructor(manifest, tokenizer, [preprocess, head, text, image], o) {
    this.#manifest = manifest
    this.#tokenizer = tokenizer
    this.#preprocess = preprocess
    this.#head = head
    this.#programs = [preprocess, head, text, image]
    this.#maxBatchSize = o.maxBatchSize
    const { Batcher } = torch()
    const batching = { maxBatchSize: o.maxBatchSize, maxDelayMs: o.maxDelayMs, maxQueue: o.maxQueue, unpad: false }
    // Requests of different lengths share a forward, right-padded with the attention mask as the
    // second input (the tower is causal and pools at the highest token id: padding after a label
    // changes nothing before it).
    this.#text = new Batcher(text, { ...batching, padValue: manifest.padTokenId, mask: { index: 1, dtype: 'int64' } })
    this.#image = new Batcher(image, batching)
  }

  /**
   * Loads `folder` (manifest.json, tokenizer.json, the programs, preprocess.pt and head.pt).
   * @param {string} folder @param {unknown} options @param {Function} caller @returns {Promise<OwlModel>}
   */
  static async load(folder, options, caller) {
    const { manifest, o, signal } = readFolder(folder, options, DEFAULTS, EXPECT, caller)
    const { text, ScriptModule } = torch()
    const tokenizer = text.Tokenizer.fromFile(path.join(folder, manifest.tokenizer))
    const programs = await Promise.all([
      ScriptModule.load(path.join(folder, manifest.preprocess), signal),
      ScriptModule.load(path.join(folder, manifest.head), signal),
      loadProgram(folder, manifest.text, signal),
      loadProgram(folder, manifest.image, signal),
    ])
    return new OwlModel(manifest, tokenizer, programs, o)
  }

  /** `'owlvit'` or `'owlv2'`. @returns {'owlvit' | 'owlv2'} */
  get family() {
    return this.#manifest.family
  }

  /** manifest.json as read (a copy). */
  get manifest() {
    return structuredClone(this.#manifest)
  }

  get isDisposed() {
    return this.#disposed
  }

  /** How many images go to the image program at once, at most. */
  get maxBatchSize() {
    return this.#maxBatchSize
  }

  /** Both Batchers' counts. */
  stats() {
    return { text: this.#text.stats(), image: this.#image.stats() }
  }

  #check(caller) {
    if (this.#disposed) throw codedError('Disposed', `the ${this.#manifest.family} model was disposed`, caller)
  }

  /** A Batcher's run; `Closed` by dispose() reads `Disposed`. */
  async #run(batcher, input, o, caller) {
    const out = await runBatched(
      batcher,
      input,
      o,
      () => this.#disposed,
      () => this.#check(caller),
    )
    if (!(out instanceof torch().Tensor)) throw codedError('ShapeMismatch', `a program returned ${describe(out)}`)
    return out
  }

  /**
   * The labels' queries, from the cache or embedded now (without the call's signal: they serve
   * other callers too). A label longer than the model's positions rejects with `InvalidArg`, as
   * transformers' pipeline, which neither pads nor cuts a label, cannot run it either.
   * @param {string[]} labels @param {Function} caller @returns {Promise<Query[]>}
   */
  queries(labels, caller) {
    this.#check(caller)
    const missing = [...new Set(labels.filter((l) => !this.#queries.has(l)))]
    if (missing.length > 0) {
      const pending = this.#embed(missing, caller)
      missing.forEach((l, i) =>
        this.#queries.set(
          l,
          pending.then((rows) => rows[i]),
        ),
      )
      pending.catch(() => missing.forEach((l) => this.#queries.delete(l)))
    }
    const out = labels.map((l) => {
      const query = /** @type {Promise<Query>} */ (this.#queries.get(l))
      this.#queries.delete(l)
      this.#queries.set(l, query)
      return query
    })
    for (const l of this.#queries.keys()) {
      if (this.#queries.size <= QUERY_CACHE) break
      this.#queries.delete(l)
    }
    return Promise.all(out)
  }

  /** @param {string[]} labels @param {Function} caller @returns {Promise<Query[]>} */
  async #embed(labels, caller) {
    const m = this.#manifest
    const encodings = await this.#tokenizer.encodeBatch(labels, { padding: false })
    const ids = encodings.map((e, i) => {
      const label = labels[i].length > 40 ? `${labels[i].slice(0, 40)}...` : labels[i]
      if (e.ids.length > m.maxSequenceLength) {
        throw codedError(
          'InvalidArg',
          `candidate label '${label}' is ${e.ids.length} tokens; this model reads at most ${m.maxSequenceLength}`,
          caller,
        )
      }
      // a tokenizer without special tokens makes none of an empty label: nothing to embed
      if (e.ids.length === 0) throw codedError('InvalidArg', `candidate label '${label}' has no tokens`, caller)
      return e.ids
    })
    // Labels of one length go together, up to maxBatchSize a request: a call with a thousand labels
    // is a few requests in the queue, not a thousand.
    /** @type {Map<number, number[]>} */
    const byLength = new Map()
    ids.forEach((row, i) => byLength.set(row.length, [...(byLength.get(row.length) ?? []), i]))
    const chunks = [...byLength.values()].flatMap((group) =>
      Array.from({ length: Math.ceil(group.length / this.#maxBatchSize) }, (_, c) =>
        group.slice(c * this.#maxBatchSize, (c + 1) * this.#maxBatchSize),
      ),
    )
    const out = new Array(labels.length)
    await Promise.all(
      chunks.map(async (chunk) => {
        const input = torch().tensor(
          chunk.map((i) => ids[i]),
          { dtype: 'int64' },
        )
        try {
          const flat = rowOf(await this.#run(this.#text, input, {}, caller), [chunk.length, m.dim])
          chunk.forEach((i, k) => {
            out[i] = { embedding: flat.subarray(k * m.dim, (k + 1) * m.dim), ignored: !(ids[i][0] > 0) }
          })
        } finally {
          input.dispose()
        }
      }),
    )
    return out
  }

  /**
   * One image's scores for each query and its boxes: decoded (or taken as a uint8 `[3, H, W]`
   * Tensor), preprocess.pt, the image program (batched with other calls'), head.pt.
   * @param {string | Uint8Array | Tensor} source @param {Promise<Query[]>} queries
   * @param {ImageCallOptions} o @param {Function} caller
   * @returns {Promise<{ scores: Float32Array, boxes: Float32Array, patches: number }>} scores
   *   `[labels, patches]` and boxes `[patches, 4]` (xmin, ymin, xmax, ymax), row-major
   */
  async detect(source, queries, o, caller) {
    this.#check(caller)
    const t = torch()
    const m = this.#manifest
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
      const features = await this.#run(this.#image, batch, o, caller)
      owned.push(features)
      if (features.ndim !== 3 || features.shape[1] !== m.patches || features.shape[2] !== m.dim + 6) {
        throw codedError('ShapeMismatch', `the image program returned [${features.shape}]`, caller)
      }
      const rows = (await queries).map((q) => q.embedding)
      const flat = new Float32Array(rows.length * m.dim)
      rows.forEach((row, i) => flat.set(row, i * m.dim))
      const embeddings = t.tensor(flat, { shape: [rows.length, m.dim] })
      const row = features.squeeze(0)
      const size = t.tensor([image.shape[1], image.shape[2]], { dtype: 'int64' })
      owned.push(embeddings, row, size)
      const out = /** @type {Tensor[]} */ (await this.#head.forward(row, embeddings, size, ...call))
      owned.push(...out)
      return {
        scores: rowOf(out[0], [rows.length, m.patches], false),
        boxes: rowOf(out[1], [m.patches, 4], false),
        patches: m.patches,
      }
    } finally {
      for (const x of owned) x.dispose()
    }
  }

  /** Frees the programs once the running batches finish; queued and later calls reject (`Disposed`). */
  dispose() {
    if (this.#disposed) return
    this.#disposed = true
    this.#queries.clear()
    Promise.all([this.#text.close(), this.#image.close()]).then(() => {
      for (const p of this.#programs) p.dispose()
    })
  }
}

/**
 * A program's float32 output of `shape` as one Float32Array (a copy); the tensor disposed unless
 * `dispose` is false.
 * @param {unknown} out @param {number[]} shape @param {boolean} [dispose] @returns {Float32Array}
 */
function rowOf(out, shape, dispose = true) {
  const { Tensor } = torch()
  if (!(out instanceof Tensor)) throw codedError('ShapeMismatch', `a program returned ${describe(out)}`)
  try {
    if (out.ndim !== shape.length || out.shape.some((d, i) => d !== shape[i])) {
      throw codedError('ShapeMismatch', `a program returned shape [${out.shape}], expected [${shape}]`)
    }
    return /** @type {Float32Array} */ (out.toTypedArray())
  } finally {
    if (dispose) out.dispose()
  }
}

module.exports.OwlModel = OwlModel

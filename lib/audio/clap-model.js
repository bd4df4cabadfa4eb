// @ts-check
'use strict'
// A folder python/export_clap.py wrote from a ClapModel checkpoint (kind 'clap'): its text and audio
// towers, each behind a torch.Batcher so concurrent calls share forwards, ClapFeatureExtractor as
// TorchScript (preprocess.pt) and logits_per_audio's scale. The zero-shot-audio-classification
// pipeline is built on it. Composed from public APIs (Tokenizer, ScriptModule, Batcher) and the
// audio decoder the audio-classification pipeline uses, so it lives in JS.
const path = require('node:path')
const { codedError, describe } = require('../errors')
const { readClip, checkFinite } = require('./clip-input')
const torch = require('../torch')
const { readFolder, loadProgram, runBatched } = require('../vision/model-folder')

/** @import { Batcher, Tensor } from '../../index' */
/** @import { ImageCallOptions } from '../vision/model-folder' */

const DEFAULTS = { maxBatchSize: 32, maxDelayMs: 0, maxQueue: 1024 }
const EXPECT = {
  format: 'torch-node/clap-model',
  kind: 'clap',
  what: 'CLAP',
  exportHow: 'ClapModel checkpoint with npx torch-node export',
  batchOf: 'towers take',
}
/** @param {string} message @param {Function} [caller] */
const invalid = (message, caller) => codedError('InvalidArg', message, caller)

/** The two towers of a CLAP folder. Internal: the pipeline holds one. */
class ClapModel {
  /** @type {any} */ #manifest
  /** @type {any} */ #tokenizer
  /** @type {any} */ #preprocess
  /** @type {Batcher} */ #text
  /** @type {Batcher} */ #audio
  /** @type {any[]} */ #programs
  /** @type {number} */ #maxBatchSize
  #disposed = false

  /**
   * @param {any} manifest @param {any} tokenizer @param {any} preprocess @param {any} text @param {any} audio
   * @param {{ maxBatchSize: number, maxDelayMs: number, maxQueue: number }} o
   */
  constructor(manifest, tokenizer, preprocess, text, audio, o) {
    this.#manifest = manifest
    this.#tokenizer = tokenizer
    this.#preprocess = preprocess
    this.#programs = [preprocess, text, audio]
    this.#maxBatchSize = o.maxBatchSize
    const { Batcher } = torch()
    const batching = { maxBatchSize: o.maxBatchSize, maxDelayMs: o.maxDelayMs, maxQueue: o.maxQueue, unpad: false }
    // Texts of different lengths share a forward padded with the mask as the second input (the
    // pooled first token and the RoBERTa positions do not see padding).
    this.#text = new Batcher(text, { ...batching, padValue: manifest.padTokenId, mask: { index: 1, dtype: 'int64' } })
    this.#audio = new Batcher(audio, batching)
  }

  /**
   * Loads `folder` (manifest.json, tokenizer.json, the towers and preprocess.pt).
   * @param {string} folder @param {unknown} options @param {Function} caller @returns {Promise<ClapModel>}
   */
  static async load(folder, options, caller) {
    const { manifest, o, signal } = readFolder(folder, options, DEFAULTS, EXPECT, caller)
    const { text, ScriptModule } = torch()
    const tokenizer = text.Tokenizer.fromFile(path.join(folder, manifest.tokenizer))
    const [preprocess, textTower, audioTower] = await Promise.all([
      ScriptModule.load(path.join(folder, manifest.preprocess), signal),
      loadProgram(folder, manifest.text, signal),
      loadProgram(folder, manifest.audio, signal),
    ])
    return new ClapModel(manifest, tokenizer, preprocess, textTower, audioTower, o)
  }

  /** The embeddings' size. @returns {number} */
  get dim() {
    return this.#manifest.dim
  }

  /** The rate the clips are resampled to (Hz). @returns {number} */
  get samplingRate() {
    return this.#manifest.samplingRate
  }

  /** The most samples a clip may have (at `samplingRate`). @returns {number} */
  get maxSamples() {
    return this.#manifest.maxSamples
  }

  /** exp(logit_scale_a): the scale of logits_per_audio. @returns {number} */
  get logitScale() {
    return this.#manifest.logitScale
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
    return { text: this.#text.stats(), audio: this.#audio.stats() }
  }

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
    if (this.#disposed) throw codedError('Disposed', 'the CLAP model was disposed', caller)
  }

  /**
   * get_text_features of each text (L2-normalized): tokenized with the special tokens, cut at the
   * model's positions (`maxSequenceLength`), up to maxBatchSize texts a request.
   * @param {string[]} texts @param {ImageCallOptions} o @param {Function} [caller] @returns {Promise<Float32Array[]>}
   */
  async embedTexts(texts, o, caller) {
    this.#check(caller)
    const m = this.#manifest
    const options = { maxLength: m.maxSequenceLength, truncation: true, padding: false }
    const ids = (await this.#tokenizer.encodeBatch(texts, options)).map((e) => e.ids)
    // Texts of one length go together, up to maxBatchSize a request (the Batcher's mask covers a
    // request's rows whole): a call with thousands of labels is a few requests, not thousands.
    /** @type {Map<number, number[]>} */
    const byLength = new Map()
    ids.forEach((row, i) => {
      const group = byLength.get(row.length)
      if (group) group.push(i)
      else byLength.set(row.length, [i])
    })
    const out = new Array(texts.length)
    const chunks = [...byLength.values()].flatMap((group) => chunked(group, this.#maxBatchSize))
    await Promise.all(
      chunks.map(async (chunk) => {
        const input = torch().tensor(
          chunk.map((i) => ids[i]),
          { dtype: 'int64' },
        )
        try {
          const got = rowsOf(await this.#run(this.#text, input, o, caller), chunk.length, m.dim)
          chunk.forEach((i, k) => (out[i] = got[k]))
        } finally {
          input.dispose()
        }
      }),
    )
    return out
  }

  /**
   * get_audio_features of each checked clip (L2-normalized): ClapFeatureExtractor (preprocess.pt),
   * then the audio tower; up to maxBatchSize clips a request, one request's features in memory at a time.
   * @param {Float32Array[]} clips @param {ImageCallOptions} o @param {Function} [caller] @returns {Promise<Float32Array[]>}
   */
  async embedAudio(clips, o, caller) {
    this.#check(caller)
    const out = []
    const call = o.signal ? [{ signal: o.signal }] : []
    for (const chunk of chunked(clips, this.#maxBatchSize)) {
      const settled = await Promise.allSettled(
        chunk.map(async (clip) => {
          const samples = torch().fromBuffer(clip, [clip.length])
          try {
            return /** @type {Tensor} */ (await this.#preprocess.forward(samples, ...call))
          } finally {
            samples.dispose()
          }
        }),
      )
      const features = settled.flatMap((p) => (p.status === 'fulfilled' ? [p.value] : []))
      let batch
      try {
        const failed = settled.find((p) => p.status === 'rejected')
        if (failed) throw failed.reason
        batch = torch().stack(features, 0)
        out.push(...rowsOf(await this.#run(this.#audio, batch, o, caller), chunk.length, this.#manifest.dim))
      } finally {
        batch?.dispose()
        for (const f of features) f.dispose()
      }
    }
    return out
  }

  /**
   * A clip's samples at `samplingRate`, checked: a Float32Array as it is, `{ raw, samplingRate }`
   * resampled where the rate differs, an encoded file (bytes or a path) decoded, down-mixed and
   * resampled off the event loop. InvalidArg for anything else, an empty clip, a NaN or infinite
   * sample, or more than `maxSamples` samples.
   * @param {unknown} clip @param {string} what @param {AbortSignal | undefined} signal @param {Function} caller
   * @returns {Promise<Float32Array>}
   */
  async samples(clip, what, signal, caller) {
    const got = await readClip(clip, this.samplingRate, what, signal, caller)
    if (got.length === 0) throw invalid(`${what}: the clip is empty (0 samples)`, caller)
    if (got.length > this.maxSamples) {
      const fe = this.#manifest.featureExtractor
      throw invalid(
        `${what}: ${got.length} samples at ${this.samplingRate} Hz; the model takes at most ${this.maxSamples} ` +
          `(${fe.maxLengthS} s): transformers' ClapFeatureExtractor (truncation '${fe.truncation}') cuts a longer ` +
          'clip at random, torch-node refuses it: cut or split the clip',
        caller,
      )
    }
    checkFinite(got, what, caller)
    return got
  }

  /** Frees the programs once the running batches finish; queued and later calls reject (`Disposed`). */
  dispose() {
    if (this.#disposed) return
    this.#disposed = true
    Promise.all([this.#text.close(), this.#audio.close()]).then(() => {
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

module.exports.ClapModel = ClapModel

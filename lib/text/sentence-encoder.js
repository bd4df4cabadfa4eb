// @ts-check
'use strict'
// torch.text.SentenceEncoder: sentence embeddings from a model folder written by
// `torch-node export` (python/export_text.py): tokenize (torch.text.Tokenizer, truncated to the
// manifest's maxSequenceLength as sentence-transformers does) → pad → forward (the exported
// program runs the encoder and the pooling) → L2-normalize when the manifest (or the call) says.
//
// Batching: a call's texts are grouped by length bucket and cut into requests of at most
// maxBatchSize texts, each padded to its own longest text; the requests of all concurrent calls
// go through one torch.Batcher with those buckets (`buckets`), so texts of similar length share
// forwards and one long text never pads a batch of short ones. When the encoder is idle (nothing
// queued or running) a lone request skips the Batcher's timer and runs at once: one call at a
// time pays no batching delay, and requests that arrive meanwhile collect into the next batch.
// Composed from public APIs (Tokenizer, AOTModule/ScriptModule, Batcher, fromBuffer), so JS.
// Speed, where the time goes and the executor shape for a shared machine: docs/text.md#speed.
const fs = require('node:fs')
const path = require('node:path')
const { codedError, describe } = require('../errors')
const torch = require('../torch')
const opt = require('../options')

/** @import { Batcher, Tensor, text } from '../../index' */
/** @import { BatcherStats } from '../batcher' */
/** @typedef {{ids: ArrayLike<number>, typeIds: ArrayLike<number>}} Encoded */
/**
 * @typedef {{maxBatchSize: number, maxDelayMs: number, maxQueue: number, buckets: number[],
 *   dtype?: string, signal?: AbortSignal}} LoadOptions
 */

// The public types below become index.d.ts's declarations (tools/lib-typings.js).
/**
 * Options of `torch.text.SentenceEncoder.load`; any other key is refused (`InvalidArg`).
 * @typedef {object} SentenceEncoderOptions
 * @property {number} [maxBatchSize] Texts per forward (default 32).
 * @property {number} [maxDelayMs] How long a new batch waits for more requests, in ms (default 0: requests that
 *   arrive while a forward runs still share the next one).
 * @property {number} [maxQueue] Requests waiting (each up to `maxBatchSize` texts of one length bucket) before
 *   `QueueFull` (default 1024; `Infinity` for no bound).
 * @property {number[]} [buckets] Increasing padded lengths whose texts share batches (default 16, 32, 48, 64, 96,
 *   128, ... up to the max sequence length).
 * @property {'float32' | 'bfloat16' | 'float16'} [dtype] The export's dtype (the manifest's); a TorchScript
 *   folder also takes `'bfloat16'`.
 * @property {AbortSignal} [signal] Aborts the load (`Aborted`).
 */
/**
 * Options of `SentenceEncoder.encode`; any other key is refused (`InvalidArg`).
 * @typedef {object} SentenceEncodeOptions
 * @property {boolean} [normalize] L2-normalize each embedding (default: the manifest's `normalize`).
 * @property {AbortSignal} [signal] Aborting rejects with `Aborted` while the call's requests are still queued.
 * @property {number} [timeoutMs] The longest a request may wait in the queue, in milliseconds (then `Timeout`).
 */
/**
 * `manifest.json` of a folder written by `torch-node export` (python/export_text.py).
 * @typedef {object} TextModelManifest
 * @property {'torch-node/text-model'} format
 * @property {number} formatVersion
 * @property {'sentence-encoder'} kind
 * @property {string} program `model.pt2` or `model.pt`.
 * @property {'pt2' | 'torchscript'} programFormat `'pt2'`: loaded with `AOTModule`; `'torchscript'`: with
 *   `ScriptModule`.
 * @property {Array<{ name: string; dtype: 'int64'; shape: Array<string | number> }>} inputs `input_ids`,
 *   `attention_mask` and, where the model takes them, `token_type_ids`: int64 `[batch, sequence]`, right-padded.
 * @property {{ name: string; dtype: 'float32'; shape: Array<string | number>; dim: number }} output The pooled
 *   embedding, float32 `[batch, dim]`, not normalized.
 * @property {'mean' | 'cls' | 'max' | 'mean_sqrt_len_tokens'} pooling
 * @property {boolean} poolingInProgram True: the program returns pooled embeddings.
 * @property {boolean} normalize Whether `encode` L2-normalizes by default.
 * @property {number} maxSequenceLength The most tokens (special tokens included) a text keeps.
 * @property {number} padTokenId
 * @property {'right'} padding
 * @property {'float32' | 'bfloat16' | 'float16'} dtype
 * @property {{ batch: [number, number]; sequence: [number, number] } | null} dynamicShapes The sizes a `.pt2`
 *   accepts (null for TorchScript).
 * @property {string} tokenizer
 * @property {{ modelType: string; architectures: string[] | null; hash: string }} source
 * @property {{ torch: string; transformers: string }} exportedWith
 * @property {number} checkedMaxAbsDiff The program against the eager model at other sizes than the export's.
 */

const FORMAT = 'torch-node/text-model'
const FORMAT_VERSION = 1
// maxDelayMs 0: the Batcher still collects the requests that arrive while a batch runs (it
// never runs more than `concurrency` at once), so batches grow with the load without a fixed wait.
const DEFAULTS = { maxBatchSize: 32, maxDelayMs: 0, maxQueue: 1024 }
// One short text is tokenized on the JS thread (a hop to the executor costs more than that).
const SYNC_TOKENIZE_CHARS = 4096

const signalOption = opt.instance(AbortSignal, 'an AbortSignal')
const LOAD_OPTIONS = opt.bag({
  dtype: opt.oneOf(['float32', 'bfloat16', 'float16']),
  maxBatchSize: opt.integer({ min: 1 }),
  maxDelayMs: opt.number({ min: 0, expected: 'a number of milliseconds ≥ 0' }),
  maxQueue: opt.either(
    [opt.integer({ min: 1 }), opt.check((v) => v === Infinity, 'Infinity')],
    'a positive integer or Infinity',
  ),
  buckets: opt.check(
    (v) =>
      Array.isArray(v) && v.length > 0 && v.every((b, i) => Number.isInteger(b) && b > 0 && (i === 0 || b > v[i - 1])),
    'an increasing array of positive lengths',
  ),
  signal: signalOption,
})
const ENCODE_OPTIONS = opt.bag({
  normalize: opt.boolean,
  signal: signalOption,
  timeoutMs: opt.number({ min: 0, infinite: true, expected: 'a number of milliseconds ≥ 0' }),
})
const LOAD = Symbol('SentenceEncoder.load')
/**
 * For lib/text/pipeline.js, set in SentenceEncoder's static block: a classifier folder's program
 * (kind 'text-classifier') returns one row of logits per text, so it runs through the same batching;
 * the pipeline tokenizes (text pairs too) and hands the encodings over.
 * @type {(encoder: SentenceEncoder, encodings: Encoded[], o: SentenceEncodeOptions) => Promise<Float32Array>}
 */
let rowsOf
/** @type {(folder: string, options: SentenceEncoderOptions | undefined, kind: string, caller: Function) => Promise<SentenceEncoder>} */
let loadOf

/**
 * Padded lengths that share batches: 16, 32, 48, 64, 96, 128, 192, 256, 384, 512, ... (steps of
 * at most 1.5×, so a batch pads each text by less than half its length), up to `max`.
 * @param {number} max
 */
function defaultBuckets(max) {
  const buckets = []
  for (let b = 16; b < max; b *= 2) {
    buckets.push(b)
    if (b >= 32 && b * 1.5 < max) buckets.push(b * 1.5)
  }
  buckets.push(max)
  return [...new Set(buckets)].sort((a, b) => a - b)
}

/** @param {string} message @param {Function} [caller] */
const invalid = (message, caller) => codedError('InvalidArg', message, caller)

/**
 * manifest.json of `folder`, checked to be a sentence encoder (or `kind`) this version reads.
 * @param {string} folder @param {Function} caller @param {string} [kind] @returns {TextModelManifest}
 */
function readManifest(folder, caller, kind = 'sentence-encoder') {
  const file = path.join(folder, 'manifest.json')
  let manifest
  try {
    manifest = JSON.parse(fs.readFileSync(file, 'utf8'))
  } catch (e) {
    const why =
      /** @type {any} */ (e).code === 'ENOENT'
        ? 'no manifest.json (a folder written by `npx torch-node export`?)'
        : /** @type {Error} */ (e).message
    throw codedError('ModelLoadError', `SentenceEncoder.load: ${folder}: ${why}`, caller)
  }
  /** @param {string} message */
  const bad = (message) => codedError('ModelLoadError', `SentenceEncoder.load: ${file}: ${message}`, caller)
  if (manifest?.format !== FORMAT || manifest.kind !== kind) {
    throw bad(`not a ${kind} manifest (format '${manifest?.format}', kind '${manifest?.kind}')`)
  }
  if (manifest.formatVersion > FORMAT_VERSION) {
    throw bad(
      `format version ${manifest.formatVersion} is newer than this torch-node reads (${FORMAT_VERSION}); ` +
        'update torch-node',
    )
  }
  const names = Array.isArray(manifest.inputs) ? manifest.inputs.map((/** @type {any} */ i) => i?.name) : []
  if (
    names[0] !== 'input_ids' ||
    names[1] !== 'attention_mask' ||
    names.length > 3 ||
    !names.slice(2).every((/** @type {string} */ n) => n === 'token_type_ids')
  ) {
    throw bad(`inputs [${names}]: expected input_ids, attention_mask and optionally token_type_ids`)
  }
  if (!manifest.poolingInProgram) throw bad('the program returns token states (poolingInProgram false)')
  for (const key of ['maxSequenceLength', 'padTokenId']) {
    if (!Number.isInteger(manifest[key]) || manifest[key] < 0) {
      throw bad(`${key}: expected an integer, got ${describe(manifest[key])}`)
    }
  }
  if (!Number.isInteger(manifest.output?.dim)) throw bad('output.dim: expected an integer')
  if (!['pt2', 'torchscript'].includes(manifest.programFormat)) {
    throw bad(`programFormat '${manifest.programFormat}': expected pt2 or torchscript`)
  }
  return manifest
}

/**
 * load's options with their defaults.
 * @param {unknown} options @param {TextModelManifest} manifest @param {Function} caller @returns {LoadOptions}
 */
function readLoadOptions(options, manifest, caller) {
  const o = { ...DEFAULTS, ...opt.read(options, LOAD_OPTIONS, 'SentenceEncoder.load: options', caller) }
  const bf16Script = manifest.programFormat === 'torchscript' && o.dtype === 'bfloat16'
  if (o.dtype !== undefined && o.dtype !== manifest.dtype && !bf16Script) {
    throw invalid(
      `SentenceEncoder.load: options.dtype: this folder was exported in ${manifest.dtype}; ` +
        `export again with --dtype ${o.dtype} (got '${o.dtype}')`,
      caller,
    )
  }
  const most = manifest.dynamicShapes?.batch?.[1]
  if (Number.isInteger(most) && o.maxBatchSize > /** @type {number} */ (most)) {
    throw invalid(
      `SentenceEncoder.load: options.maxBatchSize: this program takes batches of at most ${most} ` +
        `(export --max-batch), got ${o.maxBatchSize}`,
      caller,
    )
  }
  return { ...o, buckets: o.buckets ?? defaultBuckets(manifest.maxSequenceLength) }
}

/**
 * Divides each row of `out` by its L2 norm (at least 1e-12), as torch.nn.functional.normalize.
 * @param {Float32Array} out @param {number} dim
 */
function normalizeRows(out, dim) {
  for (let base = 0; base < out.length; base += dim) {
    let sum = 0
    for (let i = base; i < base + dim; i++) sum += out[i] * out[i]
    const norm = Math.max(Math.sqrt(sum), 1e-12)
    for (let i = base; i < base + dim; i++) out[i] /= norm
  }
}

/**
 * Sentence embeddings from a folder written by `npx torch-node export`: tokenize, pad by
 * length bucket, forward (encoder + pooling), normalize. Concurrent `encode` calls share
 * forwards through a `Batcher`. Made with `SentenceEncoder.load`.
 */
class SentenceEncoder {
  /** @type {TextModelManifest} */ #manifest
  /** @type {any} an AOTModule or a ScriptModule */ #program
  /** @type {text.Tokenizer} */ #tokenizer
  /** @type {Batcher} */ #batcher
  /** @type {number} */ #maxBatchSize
  /** @type {number[]} */ #buckets
  #direct = 0 // requests run without the Batcher, now
  #disposed = false

  /**
   * Throws `InvalidArg`: use `SentenceEncoder.load`.
   * @private
   * @param {symbol} token @param {TextModelManifest} manifest @param {any} program @param {any} tokenizer
   * @param {LoadOptions} options
   */
  constructor(token, manifest, program, tokenizer, options) {
    if (token !== LOAD) {
      throw invalid('new SentenceEncoder(): use await torch.text.SentenceEncoder.load(folder)', SentenceEncoder)
    }
    this.#manifest = manifest
    this.#program = program
    this.#tokenizer = tokenizer
    this.#maxBatchSize = options.maxBatchSize
    this.#buckets = options.buckets
    this.#batcher = new (torch().Batcher)(program, {
      maxBatchSize: options.maxBatchSize,
      maxDelayMs: options.maxDelayMs,
      maxQueue: options.maxQueue,
      // input_ids padded with the pad token, attention_mask and token_type_ids with 0
      padValue: manifest.inputs.map((_, i) => (i === 0 ? manifest.padTokenId : 0)),
      buckets: options.buckets,
      unpad: false, // the output [rows, dim] has no sequence dim to cut (dim may equal a length)
    })
  }

  // Loads model.pt2 with torch.AOTModule, or the TorchScript fallback with torch.ScriptModule.
  /**
   * Reads `folder/manifest.json`, loads the program and `tokenizer.json`. Errors: `ModelLoadError`, `InvalidArg`.
   * @param {string} folder
   * @param {SentenceEncoderOptions} [options]
   * @returns {Promise<SentenceEncoder>}
   */
  static async load(folder, options) {
    return SentenceEncoder.#load(folder, options, 'sentence-encoder', SentenceEncoder.load)
  }

  static {
    rowsOf = (encoder, encodings, o) => encoder.#rows(encodings, o)
    loadOf = (folder, options, kind, caller) => SentenceEncoder.#load(folder, options, kind, caller)
  }

  /**
   * `SentenceEncoder.load` of a folder of `kind` (lib/text/pipeline.js loads 'text-classifier' folders).
   * @param {string} folder @param {SentenceEncoderOptions | undefined} options @param {string} kind
   * @param {Function} caller
   * @returns {Promise<SentenceEncoder>}
   */
  static async #load(folder, options, kind, caller) {
    if (typeof folder !== 'string') {
      throw invalid(`SentenceEncoder.load: folder: expected a path, got ${describe(folder)}`, caller)
    }
    const manifest = readManifest(folder, caller, kind)
    const o = readLoadOptions(options, manifest, caller)
    const { text, AOTModule, ScriptModule } = torch()
    const { Tokenizer } = text
    const tokenizer = Tokenizer.fromFile(path.join(folder, manifest.tokenizer || 'tokenizer.json'))
    const file = path.join(folder, manifest.program)
    const signal = o.signal === undefined ? {} : { signal: o.signal }
    // A TorchScript folder may be run in bf16 (ScriptModule's own dtype option); a .pt2 may not.
    const bf16 =
      o.dtype === 'bfloat16' && manifest.dtype !== 'bfloat16' ? { dtype: /** @type {const} */ ('bfloat16') } : {}
    const program =
      manifest.programFormat === 'pt2'
        ? await AOTModule.load(file, signal)
        : await ScriptModule.load(file, { ...signal, ...bf16 })
    return new SentenceEncoder(LOAD, manifest, program, tokenizer, o)
  }

  /** The embedding's size. */
  get dim() {
    return this.#manifest.output.dim
  }

  /** The most tokens of a text the model sees (special tokens included). */
  get maxSequenceLength() {
    return this.#manifest.maxSequenceLength
  }

  /** Whether `encode` L2-normalizes by default. */
  get normalize() {
    return this.#manifest.normalize
  }

  /**
   * `manifest.json` as read (a copy).
   * @returns {TextModelManifest}
   */
  get manifest() {
    return structuredClone(this.#manifest)
  }

  /**
   * The folder's tokenizer (`tokenizer.json`), as `encode` uses it: to count or inspect tokens.
   * @returns {text.Tokenizer}
   */
  get tokenizer() {
    return this.#tokenizer
  }

  /** True once `dispose()` was called. */
  get isDisposed() {
    return this.#disposed
  }

  /**
   * The Batcher's counts (requests are chunks of up to `maxBatchSize` texts of one bucket).
   * @returns {BatcherStats}
   */
  stats() {
    return this.#batcher.stats()
  }

  /**
   * A float32 `[n, dim]` tensor, one row per text in order (n = 1 for a string); texts past
   * `maxSequenceLength` tokens are truncated, as sentence-transformers does. Errors:
   * `InvalidArg`, `QueueFull`, `Aborted`, `Timeout`, `Disposed`.
   * @param {string | string[]} input
   * @param {SentenceEncodeOptions} [options]
   * @returns {Promise<Tensor>}
   */
  async encode(input, options) {
    const caller = this.encode
    if (this.#disposed) throw codedError('Disposed', 'SentenceEncoder.encode: the encoder was disposed', caller)
    // Read once (a Proxy's items are read here, not again by the tokenizer).
    const texts = typeof input === 'string' ? [input] : Array.isArray(input) ? Array.from(input) : input
    if (!Array.isArray(texts)) {
      throw invalid(`SentenceEncoder.encode: expected a string or an array of strings, got ${describe(input)}`, caller)
    }
    texts.forEach((t, i) => {
      if (typeof t !== 'string') {
        throw invalid(`SentenceEncoder.encode: texts[${i}]: expected a string, got ${describe(t)}`, caller)
      }
    })
    /** @type {SentenceEncodeOptions} */
    const o = opt.read(options, ENCODE_OPTIONS, 'SentenceEncoder.encode: options', caller)
    const normalize = o.normalize ?? this.#manifest.normalize
    if (o.signal?.aborted) throw codedError('Aborted', 'SentenceEncoder.encode: the signal was aborted', caller)
    const dim = this.dim
    /** @type {Float32Array} */
    let out = new Float32Array(0)
    if (texts.length > 0) {
      out = await this.#rows(await this.#tokenize(texts, o.signal), o)
      if (normalize) normalizeRows(out, dim)
    }
    return torch().fromBuffer(out, [texts.length, dim])
  }

  /**
   * The program's rows for `encodings`, in order, `[encodings.length * dim]`.
   * @param {Encoded[]} encodings @param {SentenceEncodeOptions} o @returns {Promise<Float32Array>}
   */
  async #rows(encodings, o) {
    const out = new Float32Array(encodings.length * this.dim)
    try {
      await this.#embed(encodings, out, o)
    } catch (e) {
      // dispose() closed the Batcher under this call: say so as the other calls do.
      if (this.#disposed && /** @type {any} */ (e)?.code === 'Closed') {
        throw codedError('Disposed', 'SentenceEncoder.encode: the encoder was disposed')
      }
      throw e
    }
    return out
  }

  /**
   * Each text's token ids (and type ids), truncated as sentence-transformers does.
   * @param {string[]} texts @param {AbortSignal | undefined} signal @returns {Promise<Encoded[]>}
   */
  async #tokenize(texts, signal) {
    const options = { truncation: true, maxLength: this.#manifest.maxSequenceLength }
    /** @type {Encoded[]} */
    let encodings
    try {
      encodings =
        texts.length === 1 && texts[0].length <= SYNC_TOKENIZE_CHARS
          ? [this.#tokenizer.encode(texts[0], options)]
          : await this.#tokenizer.encodeBatch(texts, signal === undefined ? options : { ...options, signal })
    } catch (e) {
      // The tokenizer's own words ("texts[1]: a lone surrogate ..."), said by this call.
      if (e instanceof Error && !e.message.startsWith('SentenceEncoder')) {
        e.message = `SentenceEncoder.encode: ${e.message}`
      }
      throw e
    }
    if (this.#disposed) throw codedError('Disposed', 'SentenceEncoder.encode: the encoder was disposed')
    return encodings.map((e) => ({ ids: e.ids, typeIds: e.typeIds }))
  }

  /**
   * Runs the texts' requests (by bucket, maxBatchSize each) and writes each row into `out`.
   * @param {Encoded[]} encodings @param {Float32Array} out @param {SentenceEncodeOptions} o
   */
  async #embed(encodings, out, o) {
    /** @type {Map<number, number[]>} bucket -> the texts' indices */
    const byBucket = new Map()
    encodings.forEach((e, i) => {
      const found = this.#buckets.findIndex((b) => e.ids.length <= b)
      const bucket = found === -1 ? this.#buckets.length : found
      byBucket.set(bucket, [...(byBucket.get(bucket) ?? []), i])
    })
    const chunks = [...byBucket.values()].flatMap((rows) =>
      Array.from({ length: Math.ceil(rows.length / this.#maxBatchSize) }, (_, k) =>
        rows.slice(k * this.#maxBatchSize, (k + 1) * this.#maxBatchSize),
      ),
    )
    if (o.signal?.aborted) throw codedError('Aborted', 'SentenceEncoder.encode: the signal was aborted')
    // One failure (QueueFull, a timeout) drops the call's other queued requests at once.
    const controller = new AbortController()
    const onAbort = () => controller.abort()
    o.signal?.addEventListener('abort', onAbort, { once: true })
    try {
      const results = await Promise.allSettled(
        chunks.map(async (rows) => {
          try {
            const embeddings = await this.#run(
              rows.map((i) => encodings[i]),
              controller.signal,
              o.timeoutMs,
            )
            embeddings.forEach((row, k) => out.set(row, rows[k] * this.dim))
          } catch (e) {
            controller.abort()
            throw e
          }
        }),
      )
      const failed = results.flatMap((r) => (r.status === 'rejected' ? [r.reason] : []))
      if (failed.length > 0) {
        // The user's abort, else the first cause (not the Aborted it made of its siblings).
        throw (
          (o.signal?.aborted && failed.find((e) => e?.code === 'Aborted')) ||
          failed.find((e) => e?.code !== 'Aborted') ||
          failed[0]
        )
      }
    } finally {
      o.signal?.removeEventListener('abort', onAbort)
    }
  }

  /**
   * One request: `encodings` padded to their longest, run; each row's embedding.
   * @param {Encoded[]} encodings @param {AbortSignal} signal @param {number | undefined} timeoutMs
   * @returns {Promise<Float32Array[]>}
   */
  async #run(encodings, signal, timeoutMs) {
    const { fromBuffer, Tensor } = torch()
    const rows = encodings.length
    const length = Math.max(...encodings.map((e) => e.ids.length))
    const count = this.#manifest.inputs.length
    const pad = BigInt(this.#manifest.padTokenId)
    const data = Array.from({ length: count }, (_, i) => new BigInt64Array(rows * length).fill(i === 0 ? pad : 0n))
    encodings.forEach((e, r) => {
      const base = r * length
      for (let t = 0; t < e.ids.length; t++) {
        data[0][base + t] = BigInt(e.ids[t])
        data[1][base + t] = 1n
        if (count > 2) data[2][base + t] = BigInt(e.typeIds[t])
      }
    })
    const inputs = data.map((d) => fromBuffer(d, [rows, length]))
    let output
    try {
      const { queued, inFlight } = this.#batcher.stats()
      if (queued === 0 && inFlight === 0 && this.#direct === 0) {
        this.#direct++
        try {
          output = await this.#program.forward(...inputs, { signal })
        } finally {
          this.#direct--
        }
      } else {
        output = await this.#batcher.run(...inputs, timeoutMs === undefined ? { signal } : { signal, timeoutMs })
      }
    } finally {
      for (const t of inputs) t.dispose()
    }
    if (!(output instanceof Tensor) || output.ndim !== 2 || output.shape[0] !== rows || output.shape[1] !== this.dim) {
      const shape = output instanceof Tensor ? `[${output.shape}]` : describe(output)
      output?.dispose?.()
      throw codedError(
        'ShapeMismatch',
        `SentenceEncoder.encode: the program returned ${shape}, expected [${rows}, ${this.dim}] (manifest output.dim)`,
      )
    }
    const flat = output.dtype === 'float32' ? output : output.to('float32')
    const values = /** @type {Float32Array} */ (flat.toTypedArray()) // a copy, in row-major order
    if (flat !== output) flat.dispose()
    output.dispose()
    return Array.from({ length: rows }, (_, r) => values.subarray(r * this.dim, (r + 1) * this.dim))
  }

  /** Closes the Batcher (calls waiting in it reject with `Disposed`) and frees the program. */
  dispose() {
    if (this.#disposed) return
    this.#disposed = true
    this.#batcher.close()
    this.#program.dispose()
  }

  [Symbol.dispose]() {
    this.dispose()
  }
}

/**
 * For lib/text/pipeline.js: a folder of `kind` loaded as a SentenceEncoder, and the program's rows
 * for encodings it made (`[n * dim]`, through the same Batcher).
 */
const internals = {
  /** @param {string} folder @param {SentenceEncoderOptions | undefined} options @param {string} kind @param {Function} caller */
  load: (folder, options, kind, caller) => loadOf(folder, options, kind, caller),
  /**
   * `encoder` as the API types it (index.d.ts's declaration, which has no private fields).
   * @param {text.SentenceEncoder} encoder @param {Encoded[]} encodings @param {SentenceEncodeOptions} o
   */
  rows: (encoder, encodings, o) => rowsOf(/** @type {any} */ (encoder), encodings, o),
}

module.exports = { SentenceEncoder, defaultBuckets, internals }

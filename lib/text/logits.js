// @ts-check
'use strict'
// What the pipelines over `torch-node export`'s heads share (lib/text/text-classification.js,
// text-ranking.js, zero-shot-classification.js, token-classification.js, fill-mask.js): texts and
// text pairs tokenized as transformers' pipeline does (truncated to the manifest's
// maxSequenceLength), run through the SentenceEncoder's batching (its `rows` hook: each head's
// program returns one fixed-width row of logits per text), the functions applied to the logits,
// and the getters every pipeline has (EncoderPipeline).
const { codedError, describe } = require('../errors')
const opt = require('../options')
const { internals } = require('./sentence-encoder')

/** @import { text, Encoding } from '../../index' */
/** @import { BatcherStats } from '../batcher' */
/** @typedef {{text: string, textPair?: string}} Pair */
/** @typedef {{signal?: AbortSignal, timeoutMs?: number}} PipelineCallOptions */

// The token a pipeline's constructor takes: made only by torch.pipeline (lib/text/pipeline.js).
const PIPELINE = Symbol('torch.pipeline')
// One short text is tokenized on the JS thread (as SentenceEncoder does).
const SYNC_TOKENIZE_CHARS = 4096

const CALL_OPTIONS = {
  signal: opt.instance(AbortSignal, 'an AbortSignal'),
  timeoutMs: opt.number({ min: 0, infinite: true, expected: 'a number of milliseconds ≥ 0' }),
}

// A text pair as an input: `{text, textPair?}`, any other key refused as every option bag is.
const TEXT_PAIR = opt.bag({ text: opt.string, textPair: opt.string }, { required: ['text'] })

/** @param {string} message @param {Function} [caller] */
const invalid = (message, caller) => codedError('InvalidArg', message, caller)

/**
 * Checks one input: a string or `{text, textPair}`; returns it as a pair.
 * @param {unknown} input @param {string} what @param {Function} caller @returns {Pair}
 */
function readText(input, what, caller) {
  if (typeof input === 'string') return { text: input }
  if (input !== null && typeof input === 'object' && !Array.isArray(input)) {
    return /** @type {Pair} */ (opt.read(input, TEXT_PAIR, what, caller))
  }
  throw invalid(`${what}: expected a string or {text, textPair}, got ${describe(input)}`, caller)
}

/**
 * `input` (a text or an array of texts) checked: the texts, and whether it was an array.
 * @param {unknown} input @param {string} name @param {Function} caller
 * @returns {{texts: string[], batched: boolean}}
 */
function readTexts(input, name, caller) {
  const batched = Array.isArray(input)
  const texts = batched ? Array.from(input) : [input]
  texts.forEach((t, i) => {
    if (typeof t !== 'string') {
      throw invalid(`${name}: ${batched ? `input[${i}]` : 'input'}: expected a string, got ${describe(t)}`, caller)
    }
  })
  return { texts, batched }
}

/**
 * Each input's encoding (truncated to the model's maxSequenceLength by `truncation`: true is
 * longest_first; zero-shot-classification cuts only the first text, as transformers does). Errors:
 * `Disposed`, `Aborted`, and the tokenizer's.
 * @param {text.SentenceEncoder} encoder @param {Pair[]} inputs @param {PipelineCallOptions} o @param {string} name
 * @param {Function} caller @param {true | 'only_first'} [truncation]
 * @returns {Promise<Encoding[]>}
 */
async function encode(encoder, inputs, o, name, caller, truncation = true) {
  if (encoder.isDisposed) throw codedError('Disposed', `${name}: the pipeline was disposed`, caller)
  if (o.signal?.aborted) throw codedError('Aborted', `${name}: the signal was aborted`, caller)
  const options = { truncation, maxLength: encoder.maxSequenceLength }
  const tokenizer = encoder.tokenizer
  /** @type {Encoding[]} */
  const encodings = new Array(inputs.length)
  if (inputs.length === 0) return encodings
  try {
    const only = inputs[0]
    if (inputs.length === 1 && only.text.length + (only.textPair?.length ?? 0) <= SYNC_TOKENIZE_CHARS) {
      encodings[0] = tokenizer.encode(
        only.text,
        only.textPair === undefined ? options : { ...options, pair: only.textPair },
      )
    } else {
      // Texts and pairs are tokenized as two batches (encodeBatch takes a pair for every text or none).
      const batch = o.signal === undefined ? options : { ...options, signal: o.signal }
      const single = inputs.flatMap((x, i) => (x.textPair === undefined ? [i] : []))
      const paired = inputs.flatMap((x, i) => (x.textPair === undefined ? [] : [i]))
      const [a, b] = await Promise.all([
        single.length === 0
          ? []
          : tokenizer.encodeBatch(
              single.map((i) => inputs[i].text),
              batch,
            ),
        paired.length === 0
          ? []
          : tokenizer.encodeBatch(
              paired.map((i) => inputs[i].text),
              { ...batch, pair: paired.map((i) => /** @type {string} */ (inputs[i].textPair)) },
            ),
      ])
      single.forEach((i, k) => (encodings[i] = a[k]))
      paired.forEach((i, k) => (encodings[i] = b[k]))
    }
  } catch (e) {
    if (e instanceof Error && !e.message.startsWith(name)) e.message = `${name}: ${e.message}`
    throw e
  }
  return encodings
}

/**
 * The program's row for each encoding, `[encodings.length * width]` in order. Errors: `Disposed`,
 * `Aborted`, `QueueFull`, `Timeout`.
 * @param {text.SentenceEncoder} encoder @param {Encoding[]} encodings @param {PipelineCallOptions} o
 * @param {string} name
 * @returns {Promise<Float32Array>}
 */
async function rowsOf(encoder, encodings, o, name) {
  if (encodings.length === 0) return new Float32Array(0)
  const rows = encodings.map((e) => ({ ids: e.ids, typeIds: e.typeIds }))
  try {
    return await internals.rows(encoder, rows, o)
  } catch (e) {
    // The batching's words are SentenceEncoder's; say them as this pipeline's.
    const error = /** @type {any} */ (e)
    if (typeof error?.message === 'string') {
      error.message = error.message.replace(/^SentenceEncoder\.encode: the encoder/, `${name}: the pipeline`)
      error.message = error.message.replace(/^SentenceEncoder\.encode/, name)
    }
    throw e
  }
}

/**
 * The logits of each input, `[inputs.length * labels]` in order (`encode`, then `rowsOf`).
 * @param {text.SentenceEncoder} encoder @param {Pair[]} inputs @param {PipelineCallOptions} o @param {string} name
 * @param {Function} caller @param {true | 'only_first'} [truncation]
 * @returns {Promise<Float32Array>}
 */
async function logitsOf(encoder, inputs, o, name, caller, truncation) {
  return rowsOf(encoder, await encode(encoder, inputs, o, name, caller, truncation), o, name)
}

/** @param {number} x */
const sigmoid = (x) => 1 / (1 + Math.exp(-x))

/**
 * Softmax of one row, shifted by its max as transformers' pipeline does.
 * @param {ArrayLike<number>} row @returns {number[]}
 */
function softmax(row) {
  const max = Math.max(...Array.from(row))
  const exps = Array.from(row, (x) => Math.exp(x - max))
  const sum = exps.reduce((s, x) => s + x, 0)
  return exps.map((x) => x / sum)
}

/**
 * `fn` over each row of `logits` (`[rows * width]`): an array of rows.
 * @param {Float32Array} logits @param {number} width @param {'softmax' | 'sigmoid' | 'none'} fn
 * @returns {number[][]}
 */
function applyFunction(logits, width, fn) {
  return Array.from({ length: logits.length / width }, (_, r) => {
    const row = logits.subarray(r * width, (r + 1) * width)
    return fn === 'softmax' ? softmax(row) : fn === 'sigmoid' ? Array.from(row, sigmoid) : Array.from(row)
  })
}

/**
 * What every pipeline over an exported head has: the folder's tokenizer, its sequence length, the
 * Batcher's counts, dispose. Subclasses read the encoder through `encoder`.
 */
class EncoderPipeline {
  /** @type {text.SentenceEncoder} */ #encoder

  /**
   * @param {symbol} token @param {text.SentenceEncoder} encoder @param {string} task
   * @param {Function} Class the subclass, for the error's stack
   */
  constructor(token, encoder, task, Class) {
    if (token !== PIPELINE) {
      throw codedError('InvalidArg', `new ${Class.name}(): use await torch.pipeline('${task}', folder)`, Class)
    }
    this.#encoder = encoder
  }

  /**
   * The loaded program and its batching (for the subclasses).
   * @protected
   */
  get encoder() {
    return this.#encoder
  }

  /**
   * The folder's tokenizer (`tokenizer.json`), as `run` uses it: to count or inspect tokens.
   * @returns {text.Tokenizer}
   */
  get tokenizer() {
    return this.#encoder.tokenizer
  }

  /** The most tokens of an input (a pair's two texts together, special tokens included) the model sees; longer ones are truncated. */
  get maxSequenceLength() {
    return this.#encoder.maxSequenceLength
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

  /** Frees the program; calls waiting reject with `Disposed`. */
  dispose() {
    this.#encoder.dispose()
  }

  [Symbol.dispose]() {
    this.dispose()
  }
}

module.exports = {
  readText,
  readTexts,
  encode,
  rowsOf,
  logitsOf,
  applyFunction,
  softmax,
  EncoderPipeline,
  CALL_OPTIONS,
  PIPELINE,
}

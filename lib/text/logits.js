// @ts-check
'use strict'
// What the classifier pipelines share (lib/text/text-classification.js, text-ranking.js): texts and
// text pairs tokenized as transformers' pipeline does (truncated to the manifest's
// maxSequenceLength), run through the SentenceEncoder's batching (its `rows` hook: a classifier's
// program returns one row of logits per text), and the functions applied to the logits.
const { codedError, describe } = require('../errors')
const opt = require('../options')
const { internals } = require('./sentence-encoder')

/** @import { text } from '../../index' */
/** @typedef {{text: string, textPair?: string}} Pair */
/** @typedef {{signal?: AbortSignal, timeoutMs?: number}} CallOptions */

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
 * The logits of each input, `[inputs.length * labels]` in order. Errors: `Disposed`, `Aborted`,
 * `QueueFull`, `Timeout`, and the tokenizer's.
 * @param {text.SentenceEncoder} encoder @param {Pair[]} inputs @param {CallOptions} o @param {string} name
 * @param {Function} caller
 * @returns {Promise<Float32Array>}
 */
async function logitsOf(encoder, inputs, o, name, caller) {
  if (encoder.isDisposed) throw codedError('Disposed', `${name}: the pipeline was disposed`, caller)
  if (o.signal?.aborted) throw codedError('Aborted', `${name}: the signal was aborted`, caller)
  if (inputs.length === 0) return new Float32Array(0)
  const options = { truncation: true, maxLength: encoder.maxSequenceLength }
  const tokenizer = encoder.tokenizer
  /** @type {Array<{ids: ArrayLike<number>, typeIds: ArrayLike<number>}>} */
  const encodings = new Array(inputs.length)
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

module.exports = { readText, logitsOf, applyFunction, CALL_OPTIONS, PIPELINE }

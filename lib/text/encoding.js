// @ts-check
'use strict'
// torch.text.Tokenizer's `Encoding`s. The native side hands over one batch as columns (a
// Uint32Array per field, every text's tokens one after another, and all the tokens' strings as
// one string: src/text.rs); each Encoding is a view of its text's slice whose arrays are
// built on first read and kept. So `await encodeBatch(10_000 texts)` costs the event loop a few
// copies and 10,000 small objects, not 60,000 arrays and 250,000 strings at once (as JSON, that
// was 100+ ms of JSON.parse); a caller that reads every field pays that as it goes. JS because
// N-API makes objects one call per property, and has no lazy properties.
const { inspect } = require('node:util')

/**
 * One batch's columns, as src/text.rs builds them: text `i`'s tokens are
 * `starts[i]..starts[i + 1]` of `ids`, `attentionMask`, `typeIds`, `specialTokensMask` and
 * `tokenEnds` (where each token's string ends in `tokens`), and twice that of `offsets`.
 * @typedef {{starts: Uint32Array, ids: Uint32Array, offsets: Uint32Array, attentionMask: Uint32Array,
 *   typeIds: Uint32Array, specialTokensMask: Uint32Array, tokenEnds: Uint32Array, tokens: string}} Columns
 */

/** `column[from..to]` as a plain array of numbers. */
function numbers(/** @type {Uint32Array} */ column, /** @type {number} */ from, /** @type {number} */ to) {
  const out = new Array(to - from)
  for (let k = from; k < to; k++) out[k - from] = column[k]
  return out
}

/** One encoded text: `{ids, tokens, offsets, attentionMask, typeIds, specialTokensMask}`. */
class Encoding {
  /** @type {Columns} */ #columns
  /** @type {number} */ #from
  /** @type {number} */ #to
  /** @type {number[] | undefined} */ #ids
  /** @type {string[] | undefined} */ #tokens
  /** @type {Array<[number, number]> | undefined} */ #offsets
  /** @type {number[] | undefined} */ #attentionMask
  /** @type {number[] | undefined} */ #typeIds
  /** @type {number[] | undefined} */ #specialTokensMask

  /** @param {Columns} columns @param {number} i the text's index in the batch */
  constructor(columns, i) {
    this.#columns = columns
    this.#from = columns.starts[i]
    this.#to = columns.starts[i + 1]
  }

  /** Token ids. */
  get ids() {
    return (this.#ids ??= numbers(this.#columns.ids, this.#from, this.#to))
  }

  /** The tokens' strings (`##ing`, `Ġworld`, `▁the`, `[CLS]`). */
  get tokens() {
    if (this.#tokens === undefined) {
      const { tokens, tokenEnds } = this.#columns
      const out = new Array(this.#to - this.#from)
      let start = this.#from === 0 ? 0 : tokenEnds[this.#from - 1]
      for (let k = this.#from; k < this.#to; k++) {
        out[k - this.#from] = tokens.slice(start, tokenEnds[k])
        start = tokenEnds[k]
      }
      this.#tokens = out
    }
    return this.#tokens
  }

  /**
   * Each token's `[start, end)` in the text it came from, as JS string indices:
   * `text.slice(start, end)` is the token's text. Special tokens have `[0, 0]`.
   */
  get offsets() {
    if (this.#offsets === undefined) {
      const { offsets } = this.#columns
      /** @type {Array<[number, number]>} */
      const out = new Array(this.#to - this.#from)
      for (let k = this.#from; k < this.#to; k++) out[k - this.#from] = [offsets[2 * k], offsets[2 * k + 1]]
      this.#offsets = out
    }
    return this.#offsets
  }

  /** 1 for real tokens, 0 for padding. */
  get attentionMask() {
    return (this.#attentionMask ??= numbers(this.#columns.attentionMask, this.#from, this.#to))
  }

  /** 0 for the first text's tokens, 1 for a pair's second. */
  get typeIds() {
    return (this.#typeIds ??= numbers(this.#columns.typeIds, this.#from, this.#to))
  }

  /** 1 where the post-processor added a special token. */
  get specialTokensMask() {
    return (this.#specialTokensMask ??= numbers(this.#columns.specialTokensMask, this.#from, this.#to))
  }

  /** The fields as a plain object (what `JSON.stringify` writes). */
  toJSON() {
    const { ids, tokens, offsets, attentionMask, typeIds, specialTokensMask } = this
    return { ids, tokens, offsets, attentionMask, typeIds, specialTokensMask }
  }

  /**
   * `console.log(encoding)` shows the fields (getters, so not shown by default).
   * @param {number} depth @param {import('node:util').InspectOptions} options
   */
  [inspect.custom](depth, options) {
    return `Encoding ${inspect(this.toJSON(), options)}`
  }
}

/**
 * The Encodings of a batch's columns, one per text.
 * @param {Columns} columns
 */
function encodings(columns) {
  const out = new Array(columns.starts.length - 1)
  for (let i = 0; i < out.length; i++) out[i] = new Encoding(columns, i)
  return out
}

/** Whether `value` is a batch's columns (not `encodeBatch`'s tensors). */
const isColumns = (/** @type {any} */ value) => value?.tokenEnds instanceof Uint32Array

module.exports = { Encoding, encodings, isColumns }

// @ts-check
'use strict'
// torch.pipeline('text-ranking', folder): sentence-transformers' CrossEncoder.rank over a folder
// `torch-node export` wrote from a cross-encoder (a *ForSequenceClassification with one logit):
// each (query, document) pair's logit through the CrossEncoder's activation (sigmoid unless its
// config.json says otherwise), the documents sorted by score.
const { codedError, describe } = require('../errors')
const opt = require('../options')
const { logitsOf, EncoderPipeline, CALL_OPTIONS } = require('./logits')

/** @import { text } from '../../index' */

// The public types below become index.d.ts's declarations (tools/lib-typings.js).
/**
 * What `TextRankingPipeline.run` ranks.
 * @typedef {object} TextRankingInput
 * @property {string} query
 * @property {string[]} documents
 */
/**
 * One ranked document.
 * @typedef {object} TextRankingResult
 * @property {number} index The document's index in `documents`.
 * @property {number} score Its relevance: the CrossEncoder's activation of its logit.
 * @property {string} [document] The document, with `returnDocuments`.
 */
/**
 * Options of `TextRankingPipeline.run`; any other key is refused (`InvalidArg`).
 * @typedef {object} TextRankingOptions
 * @property {number} [topN] The best `topN` documents only (default all).
 * @property {boolean} [returnDocuments] Adds each document's text (default false).
 * @property {AbortSignal} [signal] Aborting rejects with `Aborted` while the call's requests are still queued.
 * @property {number} [timeoutMs] The longest a request may wait in the queue, in milliseconds (then `Timeout`).
 */
/** @typedef {{topN?: number, returnDocuments?: boolean, signal?: AbortSignal, timeoutMs?: number}} RunOptions */

const RUN_OPTIONS = opt.bag({ topN: opt.integer({ min: 1 }), returnDocuments: opt.boolean, ...CALL_OPTIONS })

/**
 * Reranking (a query against candidate documents, as a search's second stage) over a folder written
 * by `npx torch-node export` from a cross-encoder. Concurrent `run` calls share forwards. Made with
 * `torch.pipeline('text-ranking', folder)`.
 */
class TextRankingPipeline extends EncoderPipeline {
  /** @type {'sigmoid' | 'none'} */ #activation

  /**
   * Throws `InvalidArg`: use `torch.pipeline('text-ranking', folder)`.
   * @private
   * @param {symbol} token @param {text.SentenceEncoder} encoder
   */
  constructor(token, encoder) {
    super(token, encoder, 'text-ranking', TextRankingPipeline)
    this.#activation = /** @type {any} */ (encoder.manifest).rankingActivation === 'none' ? 'none' : 'sigmoid'
  }

  /** `'text-ranking'`. */
  get task() {
    return 'text-ranking'
  }

  /**
   * Scores each document against the query; the documents best first (equal scores in their
   * order). Errors: `InvalidArg`, `QueueFull`, `Aborted`, `Timeout`, `Disposed`.
   * @param {TextRankingInput} input
   * @param {TextRankingOptions} [options]
   * @returns {Promise<TextRankingResult[]>}
   */
  async run(input, options) {
    const name = 'TextRankingPipeline.run'
    const caller = this.run
    const { query, documents } = /** @type {any} */ (input ?? {})
    if (typeof query !== 'string') {
      throw codedError('InvalidArg', `${name}: input.query: expected a string, got ${describe(query)}`, caller)
    }
    const docs = Array.isArray(documents) ? Array.from(documents) : documents
    if (!Array.isArray(docs)) {
      throw codedError(
        'InvalidArg',
        `${name}: input.documents: expected an array of strings, got ${describe(documents)}`,
        caller,
      )
    }
    docs.forEach((d, i) => {
      if (typeof d !== 'string') {
        throw codedError('InvalidArg', `${name}: input.documents[${i}]: expected a string, got ${describe(d)}`, caller)
      }
    })
    /** @type {RunOptions} */
    const o = opt.read(options, RUN_OPTIONS, `${name}: options`, caller)
    const pairs = docs.map((/** @type {string} */ d) => ({ text: query, textPair: d }))
    const logits = await logitsOf(this.encoder, pairs, o, name, caller)
    const sigmoid = this.#activation === 'sigmoid'
    const ranked = Array.from(logits, (x, index) => ({ index, score: sigmoid ? 1 / (1 + Math.exp(-x)) : x }))
      .sort((a, b) => b.score - a.score)
      .slice(0, o.topN ?? docs.length)
    return o.returnDocuments ? ranked.map((r) => ({ ...r, document: docs[r.index] })) : ranked
  }
}

// One assignment per name: tsc takes a class exported so as a type too (not from an object literal).
module.exports.TextRankingPipeline = TextRankingPipeline

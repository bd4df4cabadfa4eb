// @ts-check
'use strict'
// torch.pipeline('fill-mask', folder): transformers' FillMaskPipeline over a folder `torch-node
// export` wrote from a *ForMaskedLM checkpoint: the program returns the vocabulary's logits at each
// text's first `maskSlots` mask tokens (kind 'masked-lm'); softmax, the top k (of the targets when
// given), and each candidate's sequence decoded as transformers 5's postprocess does.
const { codedError } = require('../errors')
const opt = require('../options')
const { encode, rowsOf, softmax, EncoderPipeline, CALL_OPTIONS, readTexts } = require('./logits')

/** @import { text } from '../../index' */

// The public types below become index.d.ts's declarations (tools/lib-typings.js).
/**
 * One candidate for a mask.
 * @typedef {object} FillMaskResult
 * @property {number} score Its probability (softmax over the whole vocabulary, targets or not).
 * @property {number} token Its token id.
 * @property {string} tokenStr The token decoded.
 * @property {string} sequence The text with the mask replaced, decoded (special tokens left out
 *   when the text has one mask; with several, each mask's candidates fill that mask only).
 */
/**
 * Options of `FillMaskPipeline.run`; any other key is refused (`InvalidArg`).
 * @typedef {object} FillMaskOptions
 * @property {number} [topK] How many candidates per mask, best first. Default 5.
 * @property {string[] | string} [targets] Only these tokens are candidates (a word not in the
 *   vocabulary stands for its first token, as in transformers).
 * @property {AbortSignal} [signal] Aborting rejects with `Aborted` while the call's requests are still queued.
 * @property {number} [timeoutMs] The longest a request may wait in the queue, in milliseconds (then `Timeout`).
 */
/** @typedef {{topK?: number, targets?: string[] | string, signal?: AbortSignal, timeoutMs?: number}} RunOptions */

const RUN_OPTIONS = opt.bag({
  topK: opt.integer({ min: 1 }),
  targets: opt.either([opt.string, opt.arrayOf(opt.string, 'strings')], 'a string or an array of strings'),
  ...CALL_OPTIONS,
})

/**
 * The `k` ids of `candidates` with the highest `probs`, best first (equal ones the lower id first),
 * by one pass that keeps the best k (not a sort of the vocabulary).
 * @param {number[]} probs @param {Iterable<number>} candidates @param {number} k @returns {number[]}
 */
function topIndices(probs, candidates, k) {
  /** @type {number[]} */
  const best = []
  const before = (/** @type {number} */ a, /** @type {number} */ b) =>
    probs[a] > probs[b] || (probs[a] === probs[b] && a < b)
  for (const id of candidates) {
    if (best.length === k && !before(id, best[k - 1])) continue
    if (best.length === k) best.pop()
    let at = best.length
    while (at > 0 && before(id, best[at - 1])) at--
    best.splice(at, 0, id)
  }
  return best
}

/**
 * Masked language modelling (the best tokens for each `[MASK]` of a text) over a folder written by
 * `npx torch-node export` from a `*ForMaskedLM` checkpoint. Concurrent `run` calls share forwards.
 * Made with `torch.pipeline('fill-mask', folder)`.
 */
class FillMaskPipeline extends EncoderPipeline {
  /** @type {number} */ #maskId
  /** @type {string} */ #maskToken
  /** @type {number} */ #slots
  /** @type {number} */ #padId

  /**
   * Throws `InvalidArg`: use `torch.pipeline('fill-mask', folder)`.
   * @private
   * @param {symbol} token @param {text.SentenceEncoder} encoder
   */
  constructor(token, encoder) {
    super(token, encoder, 'fill-mask', FillMaskPipeline)
    const manifest = /** @type {any} */ (encoder.manifest)
    this.#maskId = manifest.maskTokenId
    this.#maskToken = manifest.maskToken
    this.#slots = manifest.maskSlots
    this.#padId = manifest.padTokenId
  }

  /** `'fill-mask'`. */
  get task() {
    return 'fill-mask'
  }

  /** The mask token (`[MASK]`, `<mask>`) a text marks the blanks with. */
  get maskToken() {
    return this.#maskToken
  }

  /**
   * Fills the masks of one text or of each text of an array. A text with one mask gives its
   * candidates, best first; one with several an array of them per mask; an array of texts an
   * array of those (a one-text array: that text's, as transformers). Errors: `InvalidArg` (a text
   * without a mask, or with more than the export's `maskSlots`, 4), `QueueFull`, `Aborted`,
   * `Timeout`, `Disposed`.
   * @param {string | string[]} input
   * @param {FillMaskOptions} [options]
   * @returns {Promise<FillMaskResult[] | FillMaskResult[][] | FillMaskResult[][][]>}
   */
  async run(input, options) {
    const name = 'FillMaskPipeline.run'
    const caller = this.run
    const { texts, batched } = readTexts(input, name, caller)
    /** @type {RunOptions} */
    const o = opt.read(options, RUN_OPTIONS, `${name}: options`, caller)
    const targets = o.targets === undefined ? undefined : this.#targetIds(o.targets, name, caller)
    const topK = Math.min(o.topK ?? 5, targets?.length ?? this.tokenizer.vocabSize)
    const encodings = await encode(
      this.encoder,
      texts.map((text) => ({ text })),
      o,
      name,
      caller,
    )
    const masks = encodings.map((e, t) => {
      const at = e.ids.flatMap((id, i) => (id === this.#maskId ? [i] : []))
      const what = batched ? `input[${t}]` : 'input'
      if (at.length === 0) {
        throw codedError('InvalidArg', `${name}: ${what}: no mask token (${this.#maskToken}) in the text`, caller)
      }
      if (at.length > this.#slots) {
        throw codedError(
          'InvalidArg',
          `${name}: ${what}: ${at.length} mask tokens; this export fills at most ${this.#slots}`,
          caller,
        )
      }
      return at
    })
    const rows = await rowsOf(this.encoder, encodings, o, name)
    const vocab = this.encoder.dim / this.#slots
    const results = encodings.map((e, t) => {
      const single = masks[t].length === 1
      const perMask = masks[t].map((position, k) => {
        const base = (t * this.#slots + k) * vocab
        const probs = softmax(rows.subarray(base, base + vocab))
        return topIndices(probs, targets ?? probs.keys(), topK).map((token) => {
          const ids = e.ids.map((id, i) => (i === position ? token : id)).filter((id) => id !== this.#padId)
          return {
            score: probs[token],
            token,
            tokenStr: this.tokenizer.decode([token]),
            sequence: this.tokenizer.decode(ids, { skipSpecialTokens: single }),
          }
        })
      })
      return single ? perMask[0] : perMask
    })
    return /** @type {FillMaskResult[] | FillMaskResult[][] | FillMaskResult[][][]} */ (
      batched && results.length !== 1 ? results : results[0]
    )
  }

  /**
   * transformers' get_target_ids: each target's id, else its first token's (no token: left out),
   * without repeats. Errors: `InvalidArg` when none is left.
   * @param {string | string[]} targets @param {string} name @param {Function} caller @returns {number[]}
   */
  #targetIds(targets, name, caller) {
    const ids = (typeof targets === 'string' ? [targets] : targets).flatMap((target) => {
      const id = this.tokenizer.tokenToId(target)
      if (id !== null) return [id]
      const first = this.tokenizer.encode(target, { addSpecialTokens: false }).ids[0]
      return first === undefined ? [] : [first]
    })
    if (ids.length === 0) throw codedError('InvalidArg', `${name}: options.targets: no target is a token`, caller)
    return [...new Set(ids)]
  }
}

// One assignment per name: tsc takes a class exported so as a type too (not from an object literal).
module.exports.FillMaskPipeline = FillMaskPipeline

// @ts-check
'use strict'
// torch.pipeline('text-classification', folder): transformers' TextClassificationPipeline over a
// folder `torch-node export` wrote from a *ForSequenceClassification checkpoint (kind
// 'text-classifier'): the program's logits, the function transformers picks from problem_type
// and the number of labels (or the call's), the top labels. Shapes as transformers.js returns them.
const opt = require('../options')
const { readText, logitsOf, applyFunction, EncoderPipeline, CALL_OPTIONS } = require('./logits')

/** @import { text } from '../../index' */
/** @import { TextModelManifest } from './sentence-encoder' */

// The public types below become index.d.ts's declarations (tools/lib-typings.js).
/**
 * One text to classify: a string, or a pair (`{text, textPair}`: a premise and its hypothesis, a
 * question and its answer), tokenized as the model's tokenizer joins two texts.
 * @typedef {string | { text: string; textPair?: string }} TextClassificationInput
 */
/**
 * A label and its score.
 * @typedef {object} TextClassificationLabel
 * @property {string} label The label's name (config.json's `id2label`).
 * @property {number} score Its score after `functionToApply`.
 */
/**
 * Options of `TextClassificationPipeline.run`; any other key is refused (`InvalidArg`).
 * @typedef {object} TextClassificationOptions
 * @property {number | null} [topK] How many labels per input, best first (default 1); `null` or
 *   `Infinity`: all of them.
 * @property {'softmax' | 'sigmoid' | 'none'} [functionToApply] Default as transformers' pipeline:
 *   `'none'` for `problem_type` regression, `'sigmoid'` for multi-label or one label, else `'softmax'`.
 * @property {AbortSignal} [signal] Aborting rejects with `Aborted` while the call's requests are still queued.
 * @property {number} [timeoutMs] The longest a request may wait in the queue, in milliseconds (then `Timeout`).
 */
/** @typedef {{topK?: number, functionToApply?: 'softmax' | 'sigmoid' | 'none', signal?: AbortSignal, timeoutMs?: number}} RunOptions */

const RUN_OPTIONS = opt.bag({
  topK: opt.either(
    [opt.integer({ min: 1 }), opt.check((v) => v === Infinity, 'Infinity')],
    'a positive integer, Infinity or null',
  ),
  functionToApply: opt.oneOf(['softmax', 'sigmoid', 'none']),
  ...CALL_OPTIONS,
})

/**
 * The function transformers' TextClassificationPipeline.postprocess applies by default.
 * @param {TextModelManifest & {problemType?: string | null}} manifest @param {number} labels
 * @returns {'softmax' | 'sigmoid' | 'none'}
 */
function defaultFunction(manifest, labels) {
  if (manifest.problemType === 'regression') return 'none'
  if (manifest.problemType === 'multi_label_classification' || labels === 1) return 'sigmoid'
  return 'softmax'
}

/**
 * Text classification (sentiment, topics, NLI with text pairs, ...) over a folder written by
 * `npx torch-node export` from a `*ForSequenceClassification` checkpoint. Concurrent `run` calls share
 * forwards. Made with `torch.pipeline('text-classification', folder)`.
 */
class TextClassificationPipeline extends EncoderPipeline {
  /** @type {string[]} */ #labels
  /** @type {'softmax' | 'sigmoid' | 'none'} */ #function

  /**
   * Throws `InvalidArg`: use `torch.pipeline('text-classification', folder)`.
   * @private
   * @param {symbol} token @param {text.SentenceEncoder} encoder
   */
  constructor(token, encoder) {
    super(token, encoder, 'text-classification', TextClassificationPipeline)
    const manifest = /** @type {any} */ (encoder.manifest)
    this.#labels = manifest.labels
    this.#function = defaultFunction(manifest, this.#labels.length)
  }

  /** `'text-classification'`. */
  get task() {
    return 'text-classification'
  }

  /**
   * The labels, in the order of the model's logits (config.json's `id2label`).
   * @returns {string[]}
   */
  get labels() {
    return [...this.#labels]
  }

  /**
   * The function `run` applies unless told (transformers' rule).
   * @returns {'softmax' | 'sigmoid' | 'none'}
   */
  get functionToApply() {
    return this.#function
  }

  /**
   * Classifies one input or an array of them. With `topK` 1 (the default), one `{label, score}` per
   * input (a one-element array for one input, as transformers does); otherwise each input's
   * `topK` labels, best first (an array of them per input for an array). Errors: `InvalidArg`,
   * `QueueFull`, `Aborted`, `Timeout`, `Disposed`.
   * @param {TextClassificationInput | TextClassificationInput[]} input
   * @param {TextClassificationOptions} [options]
   * @returns {Promise<TextClassificationLabel[] | TextClassificationLabel[][]>}
   */
  async run(input, options) {
    const name = 'TextClassificationPipeline.run'
    const caller = this.run
    const batched = Array.isArray(input)
    const inputs = (batched ? Array.from(input) : [input]).map((x, i) =>
      readText(x, batched ? `${name}: input[${i}]` : `${name}: input`, caller),
    )
    const all = options != null && typeof options === 'object' && /** @type {any} */ (options).topK === null
    /** @type {RunOptions} */
    const o = opt.read(options, RUN_OPTIONS, `${name}: options`, caller)
    const width = this.#labels.length
    const topK = all ? width : Math.min(o.topK ?? 1, width)
    const logits = await logitsOf(this.encoder, inputs, o, name, caller)
    const scores = applyFunction(logits, width, o.functionToApply ?? this.#function)
    const results = scores.map((row) =>
      row
        .map((score, i) => ({ label: this.#labels[i], score }))
        // best first; equal scores keep the labels' order (as a stable sort of Python's does)
        .sort((a, b) => b.score - a.score)
        .slice(0, topK),
    )
    if (topK === 1 && !all) return results.map((r) => r[0])
    return batched ? results : results[0]
  }
}

// One assignment per name: tsc takes a class exported so as a type too (not from an object literal).
module.exports.TextClassificationPipeline = TextClassificationPipeline
module.exports.defaultFunction = defaultFunction

// @ts-check
'use strict'
// torch.pipeline('zero-shot-classification', folder): transformers' ZeroShotClassificationPipeline
// over a folder `torch-node export` wrote from an NLI *ForSequenceClassification checkpoint: each
// candidate label becomes a hypothesis ("This example is {}.") paired with the text, and the
// entailment logits say how well each label fits. Post-processing as transformers 5's postprocess.
const { codedError } = require('../errors')
const opt = require('../options')
const { logitsOf, softmax, EncoderPipeline, CALL_OPTIONS, readTexts } = require('./logits')

/** @import { text } from '../../index' */

// The public types below become index.d.ts's declarations (tools/lib-typings.js).
/**
 * One text's labels, best first.
 * @typedef {object} ZeroShotClassificationResult
 * @property {string} sequence The text.
 * @property {string[]} labels The candidate labels, best first.
 * @property {number[]} scores Their scores, in the same order (summing to 1 unless `multiLabel`).
 */
/**
 * Options of `ZeroShotClassificationPipeline.run`; any other key is refused (`InvalidArg`).
 * @typedef {object} ZeroShotClassificationOptions
 * @property {string[] | string} candidateLabels The labels to choose from: an array, or one string of
 *   comma-separated labels (as transformers takes). Required.
 * @property {string} [hypothesisTemplate] The hypothesis each label makes, its `{}` replaced by the label
 *   (Python's `str.format`: `{{` and `}}` are braces). Default `'This example is {}.'`.
 * @property {boolean} [multiLabel] Each label scored on its own (entailment against contradiction)
 *   rather than the labels against each other. Default false (true in effect for one label, as in transformers).
 * @property {AbortSignal} [signal] Aborting rejects with `Aborted` while the call's requests are still queued.
 * @property {number} [timeoutMs] The longest a request may wait in the queue, in milliseconds (then `Timeout`).
 */
/** @typedef {{candidateLabels: string[] | string, hypothesisTemplate?: string, multiLabel?: boolean, signal?: AbortSignal, timeoutMs?: number}} RunOptions */

const RUN_OPTIONS = opt.bag(
  {
    candidateLabels: opt.either(
      [opt.string, opt.arrayOf(opt.string, 'strings')],
      'an array of strings or a comma-separated string',
    ),
    hypothesisTemplate: opt.string,
    multiLabel: opt.boolean,
    ...CALL_OPTIONS,
  },
  { required: ['candidateLabels'] },
)
const DEFAULT_TEMPLATE = 'This example is {}.'

/**
 * `template` with its `{}` (or `{0}`) replaced by `label`, as Python's `template.format(label)`.
 * @param {string} template @param {string} label
 */
const formatTemplate = (template, label) =>
  template.replace(/\{\{|\}\}|\{0?\}/g, (m) => (m === '{{' ? '{' : m === '}}' ? '}' : label))

/**
 * The index of the entailment label (transformers' entailment_id: the first label starting with
 * "entail", any case), or -1.
 * @param {string[]} labels
 */
const entailmentIndex = (labels) => labels.findIndex((l) => l.toLowerCase().startsWith('entail'))

/**
 * Zero-shot text classification (labels chosen per call) over a folder written by
 * `npx torch-node export` from an NLI `*ForSequenceClassification` checkpoint (its labels include
 * entailment and contradiction). Concurrent `run` calls share forwards. Made with
 * `torch.pipeline('zero-shot-classification', folder)`.
 */
class ZeroShotClassificationPipeline extends EncoderPipeline {
  /** @type {number} */ #entailment
  /** @type {number} */ #contradiction
  /** @type {number} */ #width

  /**
   * Throws `InvalidArg`: use `torch.pipeline('zero-shot-classification', folder)`.
   * @private
   * @param {symbol} token @param {text.SentenceEncoder} encoder
   */
  constructor(token, encoder) {
    super(token, encoder, 'zero-shot-classification', ZeroShotClassificationPipeline)
    const labels = /** @type {any} */ (encoder.manifest).labels
    this.#width = labels.length
    this.#entailment = entailmentIndex(labels)
    // transformers: contradiction_id = -1 if entailment_id == 0 else 0 (by position, not by name)
    this.#contradiction = this.#entailment === 0 ? labels.length - 1 : 0
  }

  /** `'zero-shot-classification'`. */
  get task() {
    return 'zero-shot-classification'
  }

  /**
   * Scores the candidate labels against one text or an array of them: one forward per (text,
   * label) pair, batched. Returns `{sequence, labels, scores}` (an array of them for an array),
   * labels best first as transformers sorts them. Errors: `InvalidArg` (no candidate labels, a
   * template without `{}`), `QueueFull`, `Aborted`, `Timeout`, `Disposed`.
   * @param {string | string[]} input
   * @param {ZeroShotClassificationOptions} options
   * @returns {Promise<ZeroShotClassificationResult | ZeroShotClassificationResult[]>}
   */
  async run(input, options) {
    const name = 'ZeroShotClassificationPipeline.run'
    const caller = this.run
    const { texts, batched } = readTexts(input, name, caller)
    /** @type {RunOptions} */
    const o = opt.read(options, RUN_OPTIONS, `${name}: options`, caller)
    const labels =
      typeof o.candidateLabels === 'string'
        ? o.candidateLabels
            .split(',')
            .map((l) => l.trim())
            .filter((l) => l !== '')
        : Array.from(o.candidateLabels)
    // transformers' check (its len(sequences) is 0 for an empty string too)
    if (labels.length === 0 || texts.length === 0 || texts.includes('')) {
      throw codedError('InvalidArg', `${name}: at least one candidate label and one non-empty text are needed`, caller)
    }
    const template = o.hypothesisTemplate ?? DEFAULT_TEMPLATE
    if (formatTemplate(template, labels[0]) === template) {
      throw codedError(
        'InvalidArg',
        `${name}: options.hypothesisTemplate: ${JSON.stringify(template)} has no {} for the label`,
        caller,
      )
    }
    const hypotheses = labels.map((l) => formatTemplate(template, l))
    const pairs = texts.flatMap((text) => hypotheses.map((textPair) => ({ text, textPair })))
    // transformers tokenizes with truncation only_first: the hypothesis is never cut.
    const logits = await logitsOf(this.encoder, pairs, o, name, caller, 'only_first')
    const results = texts.map((sequence, t) => {
      const logit = (/** @type {number} */ l, /** @type {number} */ k) =>
        logits[(t * labels.length + l) * this.#width + k]
      const scores =
        o.multiLabel || labels.length === 1
          ? // each label: softmax over (contradiction, entailment), the entailment's share
            labels.map((_, l) => softmax([logit(l, this.#contradiction), logit(l, this.#entailment)])[1])
          : softmax(labels.map((_, l) => logit(l, this.#entailment)))
      // numpy's argsort reversed: best first, equal scores the later label first
      const order = scores.map((_, i) => i).sort((a, b) => scores[b] - scores[a] || b - a)
      return { sequence, labels: order.map((i) => labels[i]), scores: order.map((i) => scores[i]) }
    })
    return batched ? results : results[0]
  }
}

// One assignment per name: tsc takes a class exported so as a type too (not from an object literal).
module.exports.ZeroShotClassificationPipeline = ZeroShotClassificationPipeline
module.exports.entailmentIndex = entailmentIndex

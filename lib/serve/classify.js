// @ts-check
'use strict'
// POST /v1/classify of torch-node serve over a torch.pipeline('text-classification') (vLLM's
// shape): `{model, input: string | string[]}` → `{id, object: 'list', created, model, data:
// [{index, label, probs, num_classes}], usage}`, `probs` every label's score in the model's label
// order under the pipeline's default function (transformers' rule: softmax, sigmoid for
// multi-label or one label, none for regression), `label` the best. Requests that arrive together
// share forwards; past the queue the answer is 503 QueueFull at once.
const { randomUUID } = require('node:crypto')
const { invalid, sendJson, readKeys } = require('./http')

/**
 * @import { text } from '../../index'
 * @import { TextClassificationPipeline } from '../text/text-classification'
 * @import { TextRankingPipeline } from '../text/text-ranking'
 */

/**
 * What /v1/classify needs of a model (`classifyModel` makes one from a pipeline).
 * @typedef {object} ClassifyModel
 * @property {'classify'} kind
 * @property {string} name
 * @property {TextClassificationPipeline} pipeline
 * @property {() => { active: number; queued: number }} stats
 * @property {() => void} dispose
 */

const REQUEST_KEYS = ['model', 'input', 'user']
/** Up to this many characters in a request, its tokens are counted on the JS thread. */
const SYNC_COUNT_CHARS = 16 * 1024

/**
 * The served form of a pipeline (classify's or rerank's): its name, kind, queue and dispose.
 * @template {TextClassificationPipeline | TextRankingPipeline} P
 * @template {string} K
 * @param {K} kind @param {string} name @param {P} pipeline
 */
function servedPipeline(kind, name, pipeline) {
  return {
    kind,
    name,
    pipeline,
    stats() {
      const { queued, inFlight } = pipeline.stats()
      return { active: inFlight, queued }
    },
    dispose: () => pipeline.dispose(),
  }
}

/**
 * @param {string} name @param {TextClassificationPipeline} pipeline @returns {ClassifyModel}
 */
const classifyModel = (name, pipeline) => servedPipeline('classify', name, pipeline)

/**
 * The tokens the model sees for `inputs` (texts, or pairs), truncated as the pipeline truncates.
 * @param {text.Tokenizer} tokenizer @param {number} maxLength
 * @param {Array<{text: string, textPair?: string}>} inputs
 * @returns {Promise<number>}
 */
async function countTokens(tokenizer, maxLength, inputs) {
  const options = { truncation: true, maxLength }
  const chars = inputs.reduce((n, x) => n + x.text.length + (x.textPair?.length ?? 0), 0)
  // A small request is counted here (microseconds); a large one on the executor.
  if (chars <= SYNC_COUNT_CHARS) {
    return inputs.reduce(
      (sum, x) =>
        sum +
        tokenizer.encode(x.text, x.textPair === undefined ? options : { ...options, pair: x.textPair }).ids.length,
      0,
    )
  }
  let total = 0
  const single = inputs.filter((x) => x.textPair === undefined)
  const paired = inputs.filter((x) => x.textPair !== undefined)
  if (single.length > 0) {
    for (const e of await tokenizer.encodeBatch(
      single.map((x) => x.text),
      options,
    ))
      total += e.ids.length
  }
  if (paired.length > 0) {
    const pair = paired.map((x) => /** @type {string} */ (x.textPair))
    for (const e of await tokenizer.encodeBatch(
      paired.map((x) => x.text),
      { ...options, pair },
    ))
      total += e.ids.length
  }
  return total
}

/**
 * `input` checked: a non-empty string or a non-empty array of them, within the limits.
 * @param {unknown} input @param {{ maxItems: number; maxChars: number }} limits @param {string} key
 * @returns {string[]}
 */
function readTexts(input, limits, key) {
  const texts = typeof input === 'string' ? [input] : input
  if (!Array.isArray(texts)) {
    throw invalid(`${key}: expected a string or an array of strings, got ${input === null ? 'null' : typeof input}`)
  }
  if (texts.length === 0) throw invalid(`${key}: expected at least one string, got an empty array`)
  if (texts.length > limits.maxItems)
    throw invalid(`${key}: at most ${limits.maxItems} items per request, got ${texts.length}`)
  texts.forEach((text, i) => {
    const where = Array.isArray(input) ? `${key}[${i}]` : key
    if (typeof text !== 'string')
      throw invalid(`${where}: expected a string, got ${text === null ? 'null' : typeof text}`)
    if (text.length > limits.maxChars)
      throw invalid(`${where}: at most ${limits.maxChars} characters, got ${text.length}`)
  })
  return texts
}

/**
 * An AbortSignal that fires when the client hangs up before its answer: its requests leave the queue.
 * @param {import('node:http').ServerResponse} res
 * @returns {AbortSignal}
 */
function hangUp(res) {
  const gone = new AbortController()
  res.on('close', () => {
    if (!res.writableEnded) gone.abort()
  })
  return gone.signal
}

/**
 * POST /v1/classify
 * @param {import('./app').Context} ctx
 * @param {unknown} body
 * @param {import('node:http').ServerResponse} res
 */
async function classify(ctx, body, res) {
  const b = readKeys(body, REQUEST_KEYS)
  if (b.input === undefined) throw invalid('input: required (a string or an array of strings)')
  const model = /** @type {ClassifyModel} */ (ctx.model(b.model, 'classify'))
  if (b.user !== undefined && typeof b.user !== 'string') throw invalid('user: expected a string')
  const texts = readTexts(b.input, ctx.limits, 'input')
  const { pipeline } = model
  const [scores, tokens] = await Promise.all([
    pipeline.run(texts, { topK: null, signal: hangUp(res) }),
    countTokens(
      pipeline.tokenizer,
      pipeline.maxSequenceLength,
      texts.map((text) => ({ text })),
    ),
  ])
  const labels = pipeline.labels
  const data = /** @type {Array<Array<{label: string, score: number}>>} */ (scores).map((ranked, index) => {
    const probs = labels.map((label) => /** @type {{score: number}} */ (ranked.find((r) => r.label === label)).score)
    return { index, label: ranked[0].label, probs, num_classes: labels.length }
  })
  ctx.metrics.tokens(model.name, tokens, 0)
  sendJson(res, 200, {
    id: `classify-${randomUUID().replaceAll('-', '')}`,
    object: 'list',
    created: Math.floor(Date.now() / 1000),
    model: model.name,
    data,
    usage: { prompt_tokens: tokens, total_tokens: tokens, completion_tokens: 0, prompt_tokens_details: null },
  })
}

module.exports = { classify, classifyModel, servedPipeline, countTokens, readTexts, hangUp }

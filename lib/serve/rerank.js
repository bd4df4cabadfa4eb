// @ts-check
'use strict'
// POST /v1/rerank (and /rerank, /v2/rerank) of torch-node serve over a torch.pipeline('text-ranking'):
// the Cohere / Jina shape llama-server and vLLM accept, `{model, query, documents: (string |
// {text})[], top_n, return_documents}` → `{id, model, results: [{index, relevance_score,
// document?: {text}}], usage: {total_tokens}}`, the documents best first, scored as
// sentence-transformers' CrossEncoder.rank scores them. Requests that arrive together share
// forwards; past the queue the answer is 503 QueueFull at once. POST /v1/score is vLLM's
// CrossEncoder.predict over the same model: `{model, text_1, text_2}` (a string and a list, or two
// lists of one length) → `{id, object: 'list', created, model, data: [{index, object: 'score',
// score}], usage}`, in the pairs' order.
const { randomUUID } = require('node:crypto')
const { invalid, show, sendJson, readKeys } = require('./http')
const { servedPipeline, countTokens, hangUp, readTexts } = require('./classify')

/** @import { TextRankingPipeline } from '../text/text-ranking' */

/**
 * What /v1/rerank needs of a model (`rerankModel` makes one from a pipeline).
 * @typedef {object} RerankModel
 * @property {'rerank'} kind
 * @property {string} name
 * @property {TextRankingPipeline} pipeline
 * @property {() => { active: number; queued: number }} stats
 * @property {() => void} dispose
 */

// Cohere's v2 request also has max_tokens_per_doc, which is refused rather than ignored.
const REQUEST_KEYS = ['model', 'query', 'documents', 'top_n', 'return_documents', 'user']

/**
 * @param {string} name @param {TextRankingPipeline} pipeline @returns {RerankModel}
 */
const rerankModel = (name, pipeline) => servedPipeline('rerank', name, pipeline)

/**
 * `documents` checked: strings or `{text}` objects (Cohere's v1 and Jina's), within the limits.
 * @param {unknown} documents @param {{ maxItems: number; maxChars: number }} limits @returns {string[]}
 */
function readDocuments(documents, limits) {
  if (!Array.isArray(documents)) {
    throw invalid(`documents: expected an array of strings or {text} objects, got ${show(documents)}`)
  }
  if (documents.length > limits.maxItems) {
    throw invalid(`documents: at most ${limits.maxItems} items per request, got ${documents.length}`)
  }
  return documents.map((d, i) => {
    const text = d !== null && typeof d === 'object' && !Array.isArray(d) ? d.text : d
    if (typeof text !== 'string') throw invalid(`documents[${i}]: expected a string or {text: string}, got ${show(d)}`)
    if (text.length > limits.maxChars) {
      throw invalid(`documents[${i}]: at most ${limits.maxChars} characters, got ${text.length}`)
    }
    return text
  })
}

/**
 * POST /v1/rerank
 * @param {import('./app').Context} ctx
 * @param {unknown} body
 * @param {import('node:http').ServerResponse} res
 */
async function rerank(ctx, body, res) {
  const b = readKeys(body, REQUEST_KEYS)
  const model = /** @type {RerankModel} */ (ctx.model(b.model, 'rerank'))
  if (typeof b.query !== 'string') throw invalid(`query: expected a string, got ${show(b.query)}`)
  if (b.query.length > ctx.limits.maxChars) {
    throw invalid(`query: at most ${ctx.limits.maxChars} characters, got ${b.query.length}`)
  }
  const documents = readDocuments(b.documents, ctx.limits)
  if (b.top_n !== undefined && b.top_n !== null && !(Number.isInteger(b.top_n) && b.top_n >= 1)) {
    throw invalid(`top_n: expected a positive integer, got ${show(b.top_n)}`)
  }
  if (b.return_documents !== undefined && typeof b.return_documents !== 'boolean') {
    throw invalid(`return_documents: expected a boolean, got ${show(b.return_documents)}`)
  }
  if (b.user !== undefined && typeof b.user !== 'string') throw invalid('user: expected a string')
  const { pipeline } = model
  const query = b.query
  const [ranked, tokens] = await Promise.all([
    pipeline.run({ query, documents }, { ...(b.top_n ? { topN: b.top_n } : {}), signal: hangUp(res) }),
    countTokens(
      pipeline.tokenizer,
      pipeline.maxSequenceLength,
      documents.map((d) => ({ text: query, textPair: d })),
    ),
  ])
  ctx.metrics.tokens(model.name, tokens, 0)
  sendJson(res, 200, {
    id: `rerank-${randomUUID().replaceAll('-', '')}`,
    model: model.name,
    results: ranked.map(({ index, score }) => ({
      index,
      relevance_score: score,
      ...(b.return_documents ? { document: { text: documents[index] } } : {}),
    })),
    usage: { total_tokens: tokens },
  })
}

const SCORE_KEYS = ['model', 'text_1', 'text_2', 'user']

/**
 * POST /v1/score
 * @param {import('./app').Context} ctx
 * @param {unknown} body
 * @param {import('node:http').ServerResponse} res
 */
async function score(ctx, body, res) {
  const b = readKeys(body, SCORE_KEYS)
  const model = /** @type {RerankModel} */ (ctx.model(b.model, 'rerank'))
  for (const key of ['text_1', 'text_2']) {
    if (b[key] === undefined) throw invalid(`${key}: required (a string or an array of strings)`)
  }
  const first = readTexts(b.text_1, ctx.limits, 'text_1')
  const second = readTexts(b.text_2, ctx.limits, 'text_2')
  if (first.length !== 1 && first.length !== second.length) {
    throw invalid(`text_1: one string, or as many as text_2 (${second.length}), got ${first.length}`)
  }
  if (b.user !== undefined && typeof b.user !== 'string') throw invalid('user: expected a string')
  const { pipeline } = model
  const pairs = second.map((text, i) => ({ text: first.length === 1 ? first[0] : first[i], textPair: text }))
  // One query: one ranking of every document; pairwise: one ranking per pair (they share forwards).
  const ranked = await Promise.all(
    first.length === 1
      ? [pipeline.run({ query: first[0], documents: second }, { signal: hangUp(res) })]
      : pairs.map((p) => pipeline.run({ query: p.text, documents: [p.textPair] }, { signal: hangUp(res) })),
  )
  /** @type {number[]} */
  const scores = new Array(pairs.length)
  if (first.length === 1) for (const r of ranked[0]) scores[r.index] = r.score
  else ranked.forEach((r, i) => (scores[i] = r[0].score))
  const tokens = await countTokens(pipeline.tokenizer, pipeline.maxSequenceLength, pairs)
  ctx.metrics.tokens(model.name, tokens, 0)
  sendJson(res, 200, {
    id: `score-${randomUUID().replaceAll('-', '')}`,
    object: 'list',
    created: Math.floor(Date.now() / 1000),
    model: model.name,
    data: scores.map((s, index) => ({ index, object: 'score', score: s })),
    usage: { prompt_tokens: tokens, total_tokens: tokens, completion_tokens: 0, prompt_tokens_details: null },
  })
}

module.exports = { rerank, rerankModel, score }

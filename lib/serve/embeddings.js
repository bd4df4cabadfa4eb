// @ts-check
'use strict'
// POST /v1/embeddings of torch-node serve over a torch.text.SentenceEncoder: OpenAI's
// `{object: 'list', data: [{object: 'embedding', embedding, index}], model, usage}`, the
// embedding as floats or base64 (the `openai` client's default). Requests that arrive together
// share forwards (the encoder's Batcher); past its queue the answer is 503 QueueFull at once.
const { HttpError, invalid, show, sendJson, readKeys } = require('./http')
const torch = require('../torch')

/**
 * @import { Tensor, text } from '../../index'
 */

/**
 * What the route needs of an embedder (`embeddingModel` makes one from a SentenceEncoder).
 * @typedef {object} EmbeddingModel
 * @property {'embeddings'} kind
 * @property {string} name
 * @property {number} dim
 * @property {(texts: string[], options: { signal: AbortSignal }) => Promise<Tensor | Float32Array>} encode
 *   float32 [n, dim]
 * @property {(texts: string[]) => Promise<number>} countTokens
 * @property {() => { active: number; queued: number }} stats
 * @property {() => void} dispose
 */

const REQUEST_KEYS = ['input', 'model', 'encoding_format', 'dimensions', 'user']
/** Up to this many characters in a request, its tokens are counted on the JS thread. */
const SYNC_COUNT_CHARS = 16 * 1024

/**
 * @param {string} name
 * @param {text.SentenceEncoder} encoder
 * @returns {EmbeddingModel}
 */
function embeddingModel(name, encoder) {
  const maxLength = encoder.maxSequenceLength
  return {
    kind: 'embeddings',
    name,
    dim: encoder.dim,
    encode: (texts, options) => encoder.encode(texts, options),
    async countTokens(texts) {
      const options = { truncation: true, maxLength }
      // A small request is counted here (microseconds); a large one on the executor, so that the
      // event loop never tokenizes megabytes, and small ones never queue behind a forward.
      if (texts.reduce((n, t) => n + t.length, 0) <= SYNC_COUNT_CHARS) {
        return texts.reduce((sum, t) => sum + encoder.tokenizer.encode(t, options).ids.length, 0)
      }
      const batch = await encoder.tokenizer.encodeBatch(texts, { ...options, padding: false })
      return batch.reduce((sum, e) => sum + e.ids.length, 0)
    },
    stats() {
      const { queued, inFlight } = encoder.stats()
      return { active: inFlight, queued }
    },
    dispose: () => encoder.dispose(),
  }
}

/**
 * The request's texts, checked: a non-empty string or a non-empty array of them.
 * @param {unknown} input
 * @param {{ maxItems: number; maxChars: number }} limits
 */
function readInput(input, limits) {
  const texts = typeof input === 'string' ? [input] : input
  if (!Array.isArray(texts)) {
    throw invalid(`input: expected a string or an array of strings, got ${input === null ? 'null' : typeof input}`)
  }
  if (texts.length === 0) throw invalid('input: expected at least one string, got an empty array')
  if (texts.length > limits.maxItems) {
    throw invalid(`input: at most ${limits.maxItems} items per request, got ${texts.length}`)
  }
  texts.forEach((text, i) => {
    const where = Array.isArray(input) ? `input[${i}]` : 'input'
    if (typeof text !== 'string') {
      const what =
        Array.isArray(text) || typeof text === 'number' ? 'token ids (send text)' : text === null ? 'null' : typeof text
      throw invalid(`${where}: expected a string, got ${what}`)
    }
    if (text.length === 0) throw invalid(`${where}: expected a non-empty string`)
    if (text.length > limits.maxChars)
      throw invalid(`${where}: at most ${limits.maxChars} characters, got ${text.length}`)
  })
  return /** @type {string[]} */ (texts)
}

/**
 * Rows of a [n, dim] float32 result (a Tensor or a Float32Array of n * dim) as Float32Arrays.
 * @param {Tensor | Float32Array} result
 * @param {number} n
 * @param {number} dim
 */
function rowsOf(result, n, dim) {
  let flat = result
  if (result instanceof torch().Tensor) {
    try {
      flat = /** @type {Float32Array} */ (result.toTypedArray())
    } finally {
      result.dispose()
    }
  }
  if (!(flat instanceof Float32Array) || flat.length !== n * dim) {
    throw new HttpError(
      500,
      'ShapeMismatch',
      `the encoder returned ${flat instanceof Float32Array ? flat.length : 'no'} values for ${n} texts of ${dim}`,
    )
  }
  return Array.from({ length: n }, (_, i) => flat.subarray(i * dim, (i + 1) * dim))
}

/**
 * POST /v1/embeddings
 * @param {import('./app').Context} ctx
 * @param {unknown} body
 * @param {import('node:http').ServerResponse} res
 */
async function embeddings(ctx, body, res) {
  const b = readKeys(body, REQUEST_KEYS)
  if (b.input === undefined) throw invalid('input: required (a string or an array of strings)')
  const model = /** @type {EmbeddingModel} */ (ctx.model(b.model, 'embeddings'))
  const format = b.encoding_format ?? 'float'
  if (format !== 'float' && format !== 'base64') {
    throw invalid(`encoding_format: expected "float" or "base64", got ${show(format)}`)
  }
  // The model's embeddings have one size; a request for another is refused rather than ignored.
  if (b.dimensions !== undefined && b.dimensions !== model.dim) {
    throw invalid(`dimensions: this model's embeddings have ${model.dim}, got ${show(b.dimensions)}`)
  }
  if (b.user !== undefined && typeof b.user !== 'string') throw invalid('user: expected a string')
  const texts = readInput(b.input, ctx.limits)
  // A client that hangs up while its texts wait for a batch leaves the queue at once.
  const gone = new AbortController()
  res.on('close', () => {
    if (!res.writableEnded) gone.abort()
  })
  const [result, tokens] = await Promise.all([model.encode(texts, { signal: gone.signal }), model.countTokens(texts)])
  const data = rowsOf(result, texts.length, model.dim).map((row, index) => ({
    object: 'embedding',
    index,
    embedding:
      format === 'base64'
        ? Buffer.from(row.buffer, row.byteOffset, row.byteLength).toString('base64')
        : Array.from(row),
  }))
  ctx.metrics.tokens(model.name, tokens, 0)
  sendJson(res, 200, {
    object: 'list',
    data,
    model: model.name,
    usage: { prompt_tokens: tokens, total_tokens: tokens },
  })
}

module.exports = { embeddingModel, embeddings }

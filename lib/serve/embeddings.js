// @ts-check
'use strict'
// POST /v1/embeddings of torch-node serve over a torch.text.SentenceEncoder: OpenAI's
// `{object: 'list', data: [{object: 'embedding', embedding, index}], model, usage}`, the
// embedding as floats or base64 (the `openai` client's default). Requests that arrive together
// share forwards (the encoder's Batcher); past its queue the answer is 503 QueueFull at once.
// A CLIP or SigLIP folder embeds images too, in the texts' space: an `input` item that is a
// `data:image/...;base64,` URL or an `{type: 'image_url', image_url: {url}}` part, or vLLM's
// multimodal form, `messages` whose content is one image_url (or text) part each.
const { HttpError, invalid, show, sendJson, readKeys } = require('./http')
const torch = require('../torch')
const media = require('./media')

/**
 * @import { BatcherStats, Tensor, text } from '../../index'
 * @import { ImageFeatureExtractionPipeline } from '../vision/image-feature-extraction'
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
 * @property {boolean} [images] True: `encode` takes image items too (CLIP, SigLIP).
 */
/** An `input` item of an image model: a text, or an image's bytes. @typedef {string | { image: Buffer }} Item */

const REQUEST_KEYS = ['input', 'messages', 'model', 'encoding_format', 'dimensions', 'user']
const DATA_URL = /^data:image\/[\w.+-]+;base64,/
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

/** An image the decoder refuses is the request's fault: 400 with its code. @param {any} e */
function badImage(e) {
  throw e?.code === 'InvalidImage' ? new HttpError(400, 'InvalidImage', e.message) : e
}

/**
 * An EmbeddingModel over a CLIP or SigLIP folder's ImageFeatureExtractionPipeline: texts through
 * the text tower, images through the image tower, in request order; tokens are the texts'.
 * @param {string} name
 * @param {ImageFeatureExtractionPipeline} clip
 * @returns {EmbeddingModel}
 */
function clipEmbeddingModel(name, clip) {
  const isText = (/** @type {Item} */ x) => typeof x === 'string'
  return {
    kind: 'embeddings',
    name,
    dim: clip.dim,
    images: true,
    async encode(items, options) {
      const all = /** @type {Item[]} */ (/** @type {unknown} */ (items))
      const texts = /** @type {string[]} */ (all.filter(isText))
      const images = all.filter((x) => !isText(x)).map((x) => /** @type {{ image: Buffer }} */ (x).image)
      const [t, i] = await Promise.all([
        texts.length ? clip.embedText(texts, options) : null,
        images.length ? /** @type {Promise<Tensor>} */ (clip.run(images, options)).catch(badImage) : null,
      ])
      const rows = [
        rowsOf(t ?? new Float32Array(0), texts.length, clip.dim),
        rowsOf(i ?? new Float32Array(0), images.length, clip.dim),
      ]
      const out = new Float32Array(all.length * clip.dim)
      const next = [0, 0]
      all.forEach((x, k) => {
        const side = isText(x) ? 0 : 1
        out.set(rows[side][next[side]++], k * clip.dim)
      })
      return out
    },
    async countTokens(items) {
      const all = /** @type {Item[]} */ (/** @type {unknown} */ (items))
      return clip.countTokens(/** @type {string[]} */ (all.filter(isText)))
    },
    stats() {
      const { text, image } = /** @type {{ text: BatcherStats, image: BatcherStats }} */ (clip.stats())
      return { active: text.inFlight + image.inFlight, queued: text.queued + image.queued }
    },
    dispose: () => clip.dispose(),
  }
}

/**
 * An image model's item: a text, an image data URL, or a content part (`{type: 'text', text}`,
 * `{type: 'image_url', image_url: {url}}`) as vLLM's multimodal embeddings take them; an
 * `image_url` part's http(s) URL as `{url}`, to fetch, where `policy` fetches from its host (a 400
 * otherwise).
 * @param {unknown} item @param {string} where @param {{ maxChars: number }} limits
 * @param {import('./media').FetchPolicy} policy
 * @returns {Item | { url: URL; where: string }}
 */
function readItem(item, where, limits, policy) {
  if (typeof item === 'string') {
    const match = DATA_URL.exec(item)
    if (match) return { image: Buffer.from(item.slice(match[0].length), 'base64') }
    if (item.length === 0) throw invalid(`${where}: expected a non-empty string`)
    if (item.length > limits.maxChars)
      throw invalid(`${where}: at most ${limits.maxChars} characters, got ${item.length}`)
    return item
  }
  const part = /** @type {any} */ (item)
  if (part !== null && typeof part === 'object' && part.type === 'text')
    return readItem(part.text, `${where}.text`, limits, policy)
  if (part !== null && typeof part === 'object' && part.type === 'image_url') {
    const url = typeof part.image_url === 'string' ? part.image_url : part.image_url?.url
    const http = typeof url === 'string' ? media.httpUrl(url) : null
    if (http) {
      if (!media.allowed(http, policy)) throw media.refused(`${where}.image_url.url`, http, policy)
      return { url: http, where: `${where}.image_url.url` }
    }
    if (typeof url !== 'string' || !DATA_URL.test(url)) {
      throw invalid(`${where}.image_url.url: expected a data:image/...;base64, or http(s) URL`)
    }
    return readItem(url, where, limits, policy)
  }
  throw invalid(
    `${where}: expected a string, a data:image/...;base64, URL or a {type: 'text' | 'image_url'} part, got ${show(item)}`,
  )
}

/**
 * An image model's items from `input` or vLLM's `messages` (one embedding per message, whose
 * content is a string or one part), their http(s) images fetched under the server's policy.
 * @param {Record<string, unknown>} b
 * @param {Required<import('./requests').ServeLimits>} limits
 * @param {import('./media').FetchPolicy} policy
 * @returns {Promise<Item[]>}
 */
async function readItems(b, limits, policy) {
  const items = readParts(b, limits, policy)
  const urls = items.filter((x) => typeof x === 'object' && 'url' in x).length
  if (urls > limits.maxImages) {
    throw invalid(`input: at most ${limits.maxImages} image URLs to fetch in one request, got ${urls}`)
  }
  for (const [i, item] of items.entries()) {
    if (typeof item === 'object' && 'url' in item) {
      const { url, where } = item
      const image = await media.fetchImage(url, {
        policy,
        maxBytes: limits.maxImageBytes,
        timeoutMs: limits.imageFetchTimeoutMs,
        where,
      })
      items[i] = { image }
    }
  }
  return /** @type {Item[]} */ (items)
}

/**
 * `readItems`' items as given (http(s) images as `{url, where}`).
 * @param {Record<string, unknown>} b @param {{ maxItems: number; maxChars: number }} limits
 * @param {import('./media').FetchPolicy} policy
 */
function readParts(b, limits, policy) {
  if ((b.input === undefined) === (b.messages === undefined)) {
    throw invalid("input or messages: give one (input: strings, image data URLs or parts; messages: vLLM's form)")
  }
  const list = b.input !== undefined ? (Array.isArray(b.input) ? b.input : [b.input]) : b.messages
  const name = b.input !== undefined ? 'input' : 'messages'
  if (!Array.isArray(list) || list.length === 0) throw invalid(`${name}: expected a non-empty array`)
  if (list.length > limits.maxItems)
    throw invalid(`${name}: at most ${limits.maxItems} items per request, got ${list.length}`)
  return list.map((x, i) => {
    const where = `${name}[${i}]`
    if (name === 'input') return readItem(x, where, limits, policy)
    const content = /** @type {any} */ (x)?.content
    const parts = typeof content === 'string' ? [content] : content
    if (!Array.isArray(parts) || parts.length !== 1) {
      throw invalid(`${where}.content: expected a string or one part (CLIP embeds a text or an image, not both)`)
    }
    return readItem(parts[0], `${where}.content[0]`, limits, policy)
  })
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
  if (b.input === undefined && b.messages === undefined) {
    throw invalid('input: required (a string or an array of strings)')
  }
  const model = /** @type {EmbeddingModel} */ (ctx.model(b.model, 'embeddings'))
  if (!model.images && b.messages !== undefined) throw invalid('messages: this model embeds text only; send input')
  const format = b.encoding_format ?? 'float'
  if (format !== 'float' && format !== 'base64') {
    throw invalid(`encoding_format: expected "float" or "base64", got ${show(format)}`)
  }
  // The model's embeddings have one size; a request for another is refused rather than ignored.
  if (b.dimensions !== undefined && b.dimensions !== model.dim) {
    throw invalid(`dimensions: this model's embeddings have ${model.dim}, got ${show(b.dimensions)}`)
  }
  if (b.user !== undefined && typeof b.user !== 'string') throw invalid('user: expected a string')
  const texts = /** @type {string[]} */ (
    model.images ? await readItems(b, ctx.limits, ctx.fetchImages) : readInput(b.input, ctx.limits)
  )
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

module.exports = { embeddingModel, clipEmbeddingModel, embeddings }

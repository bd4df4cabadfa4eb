'use strict'
// An embeddings service with Express that speaks OpenAI's embeddings API, so the official
// `openai` client (and every tool built on it: LangChain, LlamaIndex, RAG pipelines) uses it as
// it is: `new OpenAI({ baseURL: 'http://localhost:3000/v1', apiKey: 'unused' })`.
//   POST /v1/embeddings  {input: string | string[], model, encoding_format?: 'float' | 'base64',
//                         dimensions?, user?}
//     -> {object: 'list', data: [{object: 'embedding', embedding, index}], model,
//         usage: {prompt_tokens, total_tokens}}
//   GET /v1/models, GET /healthz
// The model is a torch-node text-model folder (`npx torch-node export <hf-dir> <folder>`), run by
// torch.text.SentenceEncoder: requests that arrive together share forwards (length-bucketed), and
// when more wait than its queue holds the service answers 503 QueueFull at once.
//   MODEL_DIR=models/golden/text/minilm node examples/embeddings-server.js
//                      (PORT, HOST, MODEL_NAME, MAX_BATCH_SIZE, MAX_DELAY_MS, MAX_QUEUE, DTYPE)
//   curl -s localhost:3000/v1/embeddings -H 'content-type: application/json' \
//        -d '{"input": ["a sentence", "another"], "model": "minilm"}'
const path = require('node:path')
const express = require('express')
const { notFound, errorHandler } = require('./openai-errors')
const torch = require('..')

/** Limits on a request: OpenAI's own item limit, and characters per input (~ 4 per token). */
const LIMITS = Object.freeze({ maxItems: 2048, maxChars: 32768, maxBodyBytes: '16mb' })
const REQUEST_KEYS = ['input', 'model', 'encoding_format', 'dimensions', 'user']
/** Up to this many characters in a request, its tokens are counted on the JS thread. */
const SYNC_COUNT_CHARS = 16 * 1024

function httpError(status, code, message) {
  return Object.assign(new Error(message), { status, code })
}

/** The request's texts, checked: a non-empty string or a non-empty array of them. */
function readInput(input, limits) {
  const texts = typeof input === 'string' ? [input] : input
  if (!Array.isArray(texts)) {
    throw httpError(
      400,
      'InvalidArg',
      `input: expected a string or an array of strings, got ${input === null ? 'null' : typeof input}`,
    )
  }
  if (texts.length === 0) throw httpError(400, 'InvalidArg', 'input: expected at least one string, got an empty array')
  if (texts.length > limits.maxItems) {
    throw httpError(400, 'InvalidArg', `input: at most ${limits.maxItems} items per request, got ${texts.length}`)
  }
  texts.forEach((text, i) => {
    const where = Array.isArray(input) ? `input[${i}]` : 'input'
    if (typeof text !== 'string') {
      const what =
        Array.isArray(text) || typeof text === 'number' ? 'token ids (send text)' : text === null ? 'null' : typeof text
      throw httpError(400, 'InvalidArg', `${where}: expected a string, got ${what}`)
    }
    if (text.length === 0) throw httpError(400, 'InvalidArg', `${where}: expected a non-empty string`)
    if (text.length > limits.maxChars) {
      throw httpError(400, 'InvalidArg', `${where}: at most ${limits.maxChars} characters, got ${text.length}`)
    }
  })
  return texts
}

/** Checks the body's other keys; returns the encoding format. */
function readRequest(body, dim, limits) {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    throw httpError(400, 'InvalidArg', 'the body must be a JSON object: {"input": ..., "model": ...}')
  }
  const unknown = Object.keys(body).filter((k) => !REQUEST_KEYS.includes(k))
  if (unknown.length) {
    throw httpError(
      400,
      'InvalidArg',
      `unknown key ${JSON.stringify(unknown[0])}: accepted keys are ${REQUEST_KEYS.join(', ')}`,
    )
  }
  if (body.input === undefined) throw httpError(400, 'InvalidArg', 'input: required (a string or an array of strings)')
  const format = body.encoding_format ?? 'float'
  if (format !== 'float' && format !== 'base64') {
    throw httpError(400, 'InvalidArg', `encoding_format: expected "float" or "base64", got ${JSON.stringify(format)}`)
  }
  // The model's embeddings have one size; a request for another is refused rather than ignored.
  if (body.dimensions !== undefined && body.dimensions !== dim) {
    throw httpError(
      400,
      'InvalidArg',
      `dimensions: this model's embeddings have ${dim}, got ${JSON.stringify(body.dimensions)}`,
    )
  }
  if (body.user !== undefined && typeof body.user !== 'string')
    throw httpError(400, 'InvalidArg', 'user: expected a string')
  return { texts: readInput(body.input, limits), format }
}

/** Rows of a [n, dim] float32 result (a Tensor or a Float32Array of n * dim) as Float32Arrays. */
function rowsOf(result, n, dim) {
  let flat = result
  if (result instanceof torch.Tensor) {
    try {
      flat = result.toTypedArray()
    } finally {
      result.dispose()
    }
  }
  if (!(flat instanceof Float32Array) || flat.length !== n * dim) {
    throw httpError(500, 'ShapeMismatch', `the encoder returned ${flat?.length} values for ${n} texts of ${dim}`)
  }
  return Array.from({ length: n }, (_, i) => flat.subarray(i * dim, (i + 1) * dim))
}

/**
 * The Express app around an embedder: `{ name, dim, encode(texts, {signal}) -> Promise<Tensor
 * [n, dim] | Float32Array>, countTokens(texts) -> Promise<number> }`.
 */
function createApp(embedder, limits = LIMITS) {
  const app = express()
  app.locals.modelName = embedder.name
  app.get('/healthz', (req, res) => res.json({ status: 'ok' }))
  app.get('/v1/models', (req, res) => {
    res.json({ object: 'list', data: [{ id: embedder.name, object: 'model', created: 0, owned_by: 'torch-node' }] })
  })
  app.post('/v1/embeddings', express.json({ limit: limits.maxBodyBytes }), async (req, res, next) => {
    try {
      const { texts, format } = readRequest(req.body, embedder.dim, limits)
      if (req.body.model !== undefined && req.body.model !== embedder.name) {
        throw httpError(
          404,
          'ModelNotFound',
          `model: this service serves ${JSON.stringify(embedder.name)}, got ${JSON.stringify(req.body.model)}`,
        )
      }
      // A client that hangs up while its texts wait for a batch leaves the queue at once.
      const gone = new AbortController()
      res.on('close', () => {
        if (!res.writableEnded) gone.abort()
      })
      const [result, tokens] = await Promise.all([
        embedder.encode(texts, { signal: gone.signal }),
        embedder.countTokens(texts),
      ])
      const rows = rowsOf(result, texts.length, embedder.dim)
      const data = rows.map((row, index) => ({
        object: 'embedding',
        index,
        embedding:
          format === 'base64'
            ? Buffer.from(row.buffer, row.byteOffset, row.byteLength).toString('base64')
            : Array.from(row),
      }))
      res.json({ object: 'list', data, model: embedder.name, usage: { prompt_tokens: tokens, total_tokens: tokens } })
    } catch (e) {
      next(e)
    }
  })
  app.use(notFound)
  app.use(errorHandler)
  return app
}

/** The embedder over a torch.text.SentenceEncoder: its tokenizer counts the tokens it embeds. */
function sentenceEmbedder(encoder, name) {
  const maxLength = encoder.maxSequenceLength
  return {
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
  }
}

/**
 * Loads the model folder (off the event loop) and listens. Options: `modelDir` (required),
 * `name` (the model id clients send; default the folder's name), `port` (0: any free one),
 * `host`, `dtype`, `batch` (SentenceEncoder options: maxBatchSize, maxDelayMs, maxQueue),
 * `limits` ({maxItems, maxChars, maxBodyBytes}). Resolves to `{ server, url, close(), encoder }`.
 */
async function start({ modelDir, name, port = 3000, host = '127.0.0.1', dtype, batch, limits } = {}) {
  if (typeof modelDir !== 'string')
    throw Object.assign(new Error('modelDir: expected the path of a torch-node text-model folder'), {
      code: 'InvalidArg',
    })
  const encoder = await torch.text.SentenceEncoder.load(modelDir, {
    maxBatchSize: 32,
    maxDelayMs: 2,
    maxQueue: 1024,
    ...batch,
    ...(dtype && { dtype }),
  })
  const app = createApp(sentenceEmbedder(encoder, name || path.basename(path.resolve(modelDir))), {
    ...LIMITS,
    ...limits,
  })
  const server = await new Promise((resolve, reject) => {
    const s = app.listen(port, host, (err) => (err ? reject(err) : resolve(s)))
  })
  const url = `http://${host}:${server.address().port}`
  const close = () =>
    new Promise((resolve) => {
      server.close(() => {
        encoder.dispose()
        resolve()
      }) // queued requests reject with Closed
      server.closeAllConnections()
    })
  return { server, url, close, encoder, name: app.locals.modelName }
}

module.exports = { start, createApp, sentenceEmbedder, LIMITS }

if (require.main === module) {
  const env = process.env
  start({
    modelDir: env.MODEL_DIR || path.join(__dirname, '..', 'models', 'golden', 'text', 'minilm'),
    name: env.MODEL_NAME,
    port: env.PORT === undefined ? 3000 : Number(env.PORT),
    host: env.HOST || '127.0.0.1',
    dtype: env.DTYPE,
    batch: Object.fromEntries(
      [
        ['maxBatchSize', 'MAX_BATCH_SIZE'],
        ['maxDelayMs', 'MAX_DELAY_MS'],
        ['maxQueue', 'MAX_QUEUE'],
      ]
        .filter(([, envName]) => env[envName] !== undefined)
        .map(([key, envName]) => [key, Number(env[envName])]),
    ),
  }).then(
    ({ url, name }) =>
      console.log(`embeddings of model ${JSON.stringify(name)} on ${url}/v1/embeddings (GET /v1/models, /healthz)`),
    (e) => {
      console.error(`embeddings-server: ${e.code || 'Error'}: ${String(e.message).split('\n')[0]}`)
      process.exit(1)
    },
  )
}

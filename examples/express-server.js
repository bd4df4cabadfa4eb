'use strict'
// An image classification service with Express: the model is loaded once at start-up; each
// request's image is decoded and resized off the event loop (torch.image.load), and requests
// that arrive together share one forward through a torch.Batcher (a batch-8 forward costs far
// less per image than eight batch-1 forwards). When more requests wait than the batcher's
// maxQueue, the service answers 503 QueueFull at once instead of queueing without bound.
//   node examples/express-server.js        (PORT, HOST, MAX_IMAGE_BYTES, MODEL, MAX_BATCH_SIZE,
//                                           MAX_DELAY_MS, MAX_QUEUE from the environment)
//   curl -s --data-binary @data/chelsea.png -H 'content-type: image/png' localhost:3000/v1/classify
//   curl -s -F image=@data/chelsea.png 'localhost:3000/v1/classify?topk=3'
const path = require('node:path')
const express = require('express')
const busboy = require('busboy')
const torch = require('..')
const { modelPath, LITE0_PREPROCESS } = require('../lib/bundled')

// torchvision's classic ImageNet evaluation transform, for a MODEL of your own (as classify's default).
const IMAGENET_PREPROCESS = Object.freeze({ resize: 256, centerCrop: 224, mean: 'imagenet' })

const RAW_TYPES = ['image/*', 'application/octet-stream']

function httpError(status, code, message) {
  return Object.assign(new Error(message), { status, code })
}

/** The one file of a multipart/form-data request, as a Buffer (413 past `maxBytes`). */
function readMultipartFile(req, maxBytes) {
  return new Promise((resolve, reject) => {
    let parser
    try {
      parser = busboy({
        headers: req.headers,
        limits: { fileSize: maxBytes, files: 1, fields: 16, fieldSize: 64 * 1024 },
      })
    } catch (e) {
      // a missing or malformed boundary
      return reject(httpError(400, 'InvalidArg', `multipart: ${e.message.replace(/^Multipart: /, '')}`))
    }
    let file = null
    let failure = null
    parser.on('file', (field, stream) => {
      const chunks = []
      stream.on('data', (chunk) => chunks.push(chunk))
      stream.on('limit', () => {
        failure = httpError(413, 'PayloadTooLarge', `the image is over ${maxBytes} bytes`)
      })
      stream.on('close', () => {
        file = Buffer.concat(chunks)
      })
    })
    parser.on('filesLimit', () => {
      failure = failure || httpError(400, 'InvalidArg', 'multipart: one image per request')
    })
    parser.on('error', (e) => reject(httpError(400, 'InvalidArg', `multipart: ${e.message}`)))
    // Answer only once the whole body is read, so the client is never cut off mid-upload.
    parser.on('close', () => {
      if (failure) reject(failure)
      else if (file === null)
        reject(httpError(400, 'InvalidArg', 'multipart: expected a file part (e.g. curl -F image=@photo.jpg)'))
      else resolve(file)
    })
    req.pipe(parser)
  })
}

/** `?topk=N` (default 5, at most one per label). */
function topkOf(query, labels) {
  if (query.topk === undefined) return 5
  if (typeof query.topk !== 'string' || !/^[1-9][0-9]*$/.test(query.topk)) {
    throw httpError(400, 'InvalidArg', `topk: expected a positive integer, got ${JSON.stringify(query.topk)}`)
  }
  const topk = Number(query.topk)
  if (topk > labels.length)
    throw httpError(400, 'InvalidArg', `topk: ${topk} is more than the model's ${labels.length} classes`)
  return topk
}

/** The `topk` most probable classes of one image's logits [1, classes], most probable first. */
function topClasses(logits, topk, labels) {
  const tensors = [logits]
  try {
    if (!(logits instanceof torch.Tensor) || logits.ndim !== 2 || logits.shape[1] !== labels.length) {
      throw httpError(
        500,
        'ShapeMismatch',
        `the model returned ${logits instanceof torch.Tensor ? `shape [${logits.shape}]` : 'no tensor'}; expected logits [1, ${labels.length}]`,
      )
    }
    const probabilities = logits.softmax(1)
    const { values, indices } = probabilities.topk(topk)
    tensors.push(probabilities, values, indices)
    const p = values.toArray()[0]
    return indices.toArray()[0].map((index, k) => ({ label: labels[index], index, probability: p[k] }))
  } finally {
    for (const t of tensors) if (t instanceof torch.Tensor) t.dispose()
  }
}

/**
 * The Express app around a torch.Batcher over an image classifier (logits [N, classes]).
 * `preprocess`: torch.image options that make a model input [1, 3, H, W]; `labels`: one per class.
 */
function createApp(batcher, { maxBytes, preprocess, labels = torch.vision.imagenetLabels }) {
  const app = express()
  app.get('/healthz', (req, res) => res.json({ status: 'ok' }))
  app.post('/v1/classify', express.raw({ type: RAW_TYPES, limit: maxBytes }), async (req, res, next) => {
    let input
    try {
      const topk = topkOf(req.query, labels)
      let image
      // As type-is (under req.is) decides: a body has a length or is chunked; without one, req.is is false.
      const hasBody = req.headers['transfer-encoding'] !== undefined || req.headers['content-length'] !== undefined
      if (!hasBody) throw httpError(400, 'InvalidImage', 'the request has no body: send an image')
      if (req.is('multipart/form-data')) image = await readMultipartFile(req, maxBytes)
      else if (req.is(RAW_TYPES))
        image = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0) // an empty body
      else
        throw httpError(
          415,
          'UnsupportedMediaType',
          'send the image as the body (image/* or application/octet-stream) or as multipart/form-data',
        )
      input = await torch.image.load(image, preprocess)
      // A client that hangs up while its request waits for a batch leaves the queue at once.
      const gone = new AbortController()
      res.on('close', () => {
        if (!res.writableEnded) gone.abort()
      })
      const logits = await batcher.run(input, { signal: gone.signal })
      res.json({ predictions: topClasses(logits, topk, labels) })
    } catch (e) {
      next(e)
    } finally {
      if (input) input.dispose()
    }
  })
  app.use((req, res) =>
    res.status(404).json({ error: { code: 'NotFound', message: `no route ${req.method} ${req.path}` } }),
  )
  // Errors as JSON: body-parser's (413 entity.too.large), ours, and torch-node's coded ones
  // (InvalidImage, InvalidArg: the client's fault; QueueFull: overloaded, come back later;
  // anything else is ours).
  // eslint-disable-next-line no-unused-vars
  app.use((err, req, res, next) => {
    let status = err.status || err.statusCode
    let code = err.code
    if (err.type === 'entity.too.large') code = 'PayloadTooLarge'
    else if (!status && code === 'QueueFull') {
      status = 503
      res.set('Retry-After', '1')
    } else if (!status) status = code === 'InvalidImage' || code === 'InvalidArg' ? 400 : 500
    if (typeof code !== 'string') code = status === 500 ? 'Internal' : 'BadRequest'
    res.status(status).json({ error: { code, message: err.message } })
  })
  return app
}

/**
 * Loads the model (off the event loop) and listens. Options: `port` (0: any free one), `host`,
 * `model` (default: the bundled EfficientNet-Lite0, with its own normalization; another model
 * gets torchvision's ImageNet pre-processing), `maxBytes` (largest image accepted; 10 MiB),
 * `batch` (torch.Batcher options; default `{maxBatchSize: 8, maxDelayMs: 5, maxQueue: 256}`).
 * Resolves to `{ server, url, close(), model, batcher }`.
 */
async function start({ port = 3000, host = '127.0.0.1', model, maxBytes = 10 * 1024 * 1024, batch } = {}) {
  const file = model || modelPath()
  if (!Number.isInteger(maxBytes) || maxBytes < 1) {
    throw Object.assign(new Error(`maxBytes: expected a positive integer, got ${maxBytes}`), { code: 'InvalidArg' })
  }
  const classifier = await torch.ScriptModule.load(file)
  let batcher
  try {
    batcher = new torch.Batcher(classifier, { maxBatchSize: 8, maxDelayMs: 5, maxQueue: 256, ...batch })
  } catch (e) {
    classifier.dispose()
    throw e
  }
  const app = createApp(batcher, { maxBytes, preprocess: model ? IMAGENET_PREPROCESS : LITE0_PREPROCESS })
  const server = await new Promise((resolve, reject) => {
    const s = app.listen(port, host, (err) => (err ? reject(err) : resolve(s)))
  })
  const url = `http://${host}:${server.address().port}`
  const close = () =>
    new Promise((resolve) => {
      server.close(() =>
        batcher.close().then(() => {
          classifier.dispose()
          resolve()
        }),
      )
      server.closeAllConnections() // idle keep-alive sockets would hold close() open
    })
  return { server, url, close, model: path.basename(file), batcher }
}

module.exports = { start, createApp }

if (require.main === module) {
  const env = process.env
  start({
    port: env.PORT === undefined ? 3000 : Number(env.PORT),
    host: env.HOST || '127.0.0.1',
    model: env.MODEL,
    maxBytes: env.MAX_IMAGE_BYTES === undefined ? undefined : Number(env.MAX_IMAGE_BYTES),
    batch: Object.fromEntries(
      [
        ['maxBatchSize', 'MAX_BATCH_SIZE'],
        ['maxDelayMs', 'MAX_DELAY_MS'],
        ['maxQueue', 'MAX_QUEUE'],
      ]
        .filter(([, name]) => env[name] !== undefined)
        .map(([key, name]) => [key, Number(env[name])]),
    ),
  }).then(
    ({ url, model }) => console.log(`classifying with ${model} on ${url} (POST /v1/classify, GET /healthz), batched`),
    (e) => {
      console.error(`express-server: ${e.code || 'Error'}: ${String(e.message).split('\n')[0]}`)
      process.exit(1)
    },
  )
}

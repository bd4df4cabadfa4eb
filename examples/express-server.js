'use strict'
// An image classification service with Express: the model is loaded once at start-up, and
// decoding, resizing and the forward pass run on the libuv thread pool (torch.vision.classify),
// so the event loop keeps serving while images are classified.
//   node examples/express-server.js        (PORT, HOST, MAX_IMAGE_BYTES, MODEL from the environment)
//   curl -s --data-binary @data/chelsea.png -H 'content-type: image/png' localhost:3000/v1/classify
//   curl -s -F image=@data/chelsea.png 'localhost:3000/v1/classify?topk=3'
const path = require('node:path')
const express = require('express')
const busboy = require('busboy')
const torch = require('..')
const { modelPath, LITE0_PREPROCESS } = require('../lib/bundled')

const RAW_TYPES = ['image/*', 'application/octet-stream']

function httpError(status, code, message) {
  return Object.assign(new Error(message), { status, code })
}

/** The one file of a multipart/form-data request, as a Buffer (413 past `maxBytes`). */
function readMultipartFile(req, maxBytes) {
  return new Promise((resolve, reject) => {
    let parser
    try {
      parser = busboy({ headers: req.headers, limits: { fileSize: maxBytes, files: 1, fields: 16, fieldSize: 64 * 1024 } })
    } catch (e) { // a missing or malformed boundary
      return reject(httpError(400, 'InvalidArg', `multipart: ${e.message.replace(/^Multipart: /, '')}`))
    }
    let file = null
    let failure = null
    parser.on('file', (field, stream) => {
      const chunks = []
      stream.on('data', (chunk) => chunks.push(chunk))
      stream.on('limit', () => { failure = httpError(413, 'PayloadTooLarge', `the image is over ${maxBytes} bytes`) })
      stream.on('close', () => { file = Buffer.concat(chunks) })
    })
    parser.on('filesLimit', () => { failure = failure || httpError(400, 'InvalidArg', 'multipart: one image per request') })
    parser.on('error', (e) => reject(httpError(400, 'InvalidArg', `multipart: ${e.message}`)))
    // Answer only once the whole body is read, so the client is never cut off mid-upload.
    parser.on('close', () => {
      if (failure) reject(failure)
      else if (file === null) reject(httpError(400, 'InvalidArg', 'multipart: expected a file part (e.g. curl -F image=@photo.jpg)'))
      else resolve(file)
    })
    req.pipe(parser)
  })
}

/** `?topk=N` (default 5); classify refuses what the model cannot answer. */
function topkOf(query) {
  if (query.topk === undefined) return 5
  if (typeof query.topk !== 'string' || !/^[1-9][0-9]*$/.test(query.topk)) {
    throw httpError(400, 'InvalidArg', `topk: expected a positive integer, got ${JSON.stringify(query.topk)}`)
  }
  return Number(query.topk)
}

/** The Express app around a loaded module. */
function createApp(classifier, { maxBytes, preprocess }) {
  const app = express()
  app.get('/healthz', (req, res) => res.json({ status: 'ok' }))
  app.post('/v1/classify', express.raw({ type: RAW_TYPES, limit: maxBytes }), async (req, res, next) => {
    try {
      const topk = topkOf(req.query)
      let image
      // As type-is (under req.is) decides: a body has a length or is chunked; without one, req.is is false.
      const hasBody = req.headers['transfer-encoding'] !== undefined || req.headers['content-length'] !== undefined
      if (!hasBody) throw httpError(400, 'InvalidImage', 'the request has no body: send an image')
      if (req.is('multipart/form-data')) image = await readMultipartFile(req, maxBytes)
      else if (req.is(RAW_TYPES)) image = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0) // an empty body
      else throw httpError(415, 'UnsupportedMediaType', 'send the image as the body (image/* or application/octet-stream) or as multipart/form-data')
      const [predictions] = await torch.vision.classify(classifier, image, { topk, ...(preprocess && { preprocess }) })
      res.json({ predictions })
    } catch (e) {
      next(e)
    }
  })
  app.use((req, res) => res.status(404).json({ error: { code: 'NotFound', message: `no route ${req.method} ${req.path}` } }))
  // Errors as JSON: body-parser's (413 entity.too.large), ours, and torch-node's coded ones
  // (InvalidImage, InvalidArg: the client's fault; anything else is ours).
  app.use((err, req, res, next) => { // eslint-disable-line no-unused-vars
    let status = err.status || err.statusCode
    let code = err.code
    if (err.type === 'entity.too.large') code = 'PayloadTooLarge'
    else if (!status) status = code === 'InvalidImage' || code === 'InvalidArg' ? 400 : 500
    if (typeof code !== 'string') code = status === 500 ? 'Internal' : 'BadRequest'
    res.status(status).json({ error: { code, message: err.message } })
  })
  return app
}

/**
 * Loads the model (off the event loop) and listens. Options: `port` (0: any free one), `host`,
 * `model` (default: the bundled EfficientNet-Lite0, with its own normalization; another model
 * gets torchvision's ImageNet pre-processing), `maxBytes` (largest image accepted; 10 MiB).
 * Resolves to `{ server, url, close() }`.
 */
async function start({ port = 3000, host = '127.0.0.1', model, maxBytes = 10 * 1024 * 1024 } = {}) {
  const file = model || modelPath()
  if (!Number.isInteger(maxBytes) || maxBytes < 1) {
    throw Object.assign(new Error(`maxBytes: expected a positive integer, got ${maxBytes}`), { code: 'InvalidArg' })
  }
  const classifier = await torch.ScriptModule.load(file)
  const app = createApp(classifier, { maxBytes, preprocess: model ? undefined : LITE0_PREPROCESS })
  const server = await new Promise((resolve, reject) => {
    const s = app.listen(port, host, (err) => (err ? reject(err) : resolve(s)))
  })
  const url = `http://${host}:${server.address().port}`
  const close = () => new Promise((resolve) => {
    server.close(() => { classifier.dispose(); resolve() })
    server.closeAllConnections() // idle keep-alive sockets would hold close() open
  })
  return { server, url, close, model: path.basename(file) }
}

module.exports = { start, createApp }

if (require.main === module) {
  const env = process.env
  start({
    port: env.PORT === undefined ? 3000 : Number(env.PORT),
    host: env.HOST || '127.0.0.1',
    model: env.MODEL,
    maxBytes: env.MAX_IMAGE_BYTES === undefined ? undefined : Number(env.MAX_IMAGE_BYTES),
  }).then(
    ({ url, model }) => console.log(`classifying with ${model} on ${url} (POST /v1/classify, GET /healthz)`),
    (e) => {
      console.error(`express-server: ${e.code || 'Error'}: ${String(e.message).split('\n')[0]}`)
      process.exit(1)
    },
  )
}

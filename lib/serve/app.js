// @ts-check
'use strict'
// The request handler of torch-node serve: routes, the API key, model lookup by name, metrics,
// and the state a shutdown needs (the generations running, to abort at its deadline).
const { createHash, timingSafeEqual } = require('node:crypto')
const { HttpError, readJson, sendJson, sendError, show, authorization } = require('./http')
const { Metrics } = require('./metrics')
const { LIMITS } = require('./requests')
const chat = require('./chat')
const { embeddings } = require('./embeddings')
const { classify } = require('./classify')
const { rerank, score } = require('./rerank')
const responses = require('./responses')
const messages = require('./messages')

/**
 * @typedef {import('./chat').ChatModel | import('./embeddings').EmbeddingModel | import('./classify').ClassifyModel
 *   | import('./rerank').RerankModel} ServeModel
 * @typedef {Required<import('./requests').ServeLimits>} Limits
 */

/**
 * What the routes share.
 * @typedef {object} Context
 * @property {Limits} limits
 * @property {InstanceType<typeof import('./metrics').Metrics>} metrics
 * @property {Set<() => void>} running aborts of the generations in flight
 * @property {boolean} closing a shutdown began: new requests get 503
 * @property {InstanceType<typeof responses.ResponseStore>} responses kept for previous_response_id
 * @property {(name: unknown, kind: 'chat' | 'embeddings' | 'classify' | 'rerank') => ServeModel} model the model a
 *   request names
 */

const ROUTES = {
  'POST /v1/chat/completions': { limit: 'maxBodyBytes', run: chat.chatCompletions },
  'POST /v1/completions': { limit: 'maxBodyBytes', run: chat.completions },
  'POST /v1/responses': { limit: 'maxBodyBytes', run: responses.create },
  // Anthropic's Messages API: its errors in Anthropic's shape.
  'POST /v1/messages': { limit: 'maxBodyBytes', run: messages.create, sendError: messages.sendError },
  'POST /v1/messages/count_tokens': {
    limit: 'maxBodyBytes',
    run: messages.countTokens,
    sendError: messages.sendError,
  },
  'POST /v1/embeddings': { limit: 'maxEmbeddingsBodyBytes', run: embeddings },
  'POST /v1/classify': { limit: 'maxEmbeddingsBodyBytes', run: classify },
  // vLLM's paths for Jina's (/v1/rerank) and Cohere's (/v2/rerank) clients, and llama-server's /rerank.
  'POST /v1/rerank': { limit: 'maxEmbeddingsBodyBytes', run: rerank },
  'POST /v2/rerank': { limit: 'maxEmbeddingsBodyBytes', run: rerank },
  'POST /rerank': { limit: 'maxEmbeddingsBodyBytes', run: rerank },
  'POST /v1/score': { limit: 'maxEmbeddingsBodyBytes', run: score },
}
const KIND_ROUTES = {
  chat: '/v1/chat/completions, /v1/completions, /v1/responses and /v1/messages',
  embeddings: '/v1/embeddings',
  classify: '/v1/classify',
  rerank: '/v1/rerank and /v1/score',
}
const STORED = '/v1/responses/'

const digest = (/** @type {string} */ s) => createHash('sha256').update(s).digest()

/**
 * @param {{ models: ServeModel[]; apiKey?: string; limits?: import('./requests').ServeLimits }} options
 */
function createHandler({ models, apiKey, limits }) {
  const byName = new Map(models.map((m) => [m.name, m]))
  const key = apiKey === undefined ? null : digest(`Bearer ${apiKey}`)
  /** @type {Context} */
  const ctx = {
    limits: { ...LIMITS, ...limits },
    metrics: new Metrics(),
    running: new Set(),
    closing: false,
    responses: new responses.ResponseStore(),
    model(name, kind) {
      if (name === undefined) {
        const ofKind = models.filter((m) => m.kind === kind)
        if (ofKind.length === 1) return ofKind[0]
        if (ofKind.length === 0) throw new HttpError(404, 'ModelNotFound', `no model here serves ${KIND_ROUTES[kind]}`)
        const names = ofKind.map((m) => JSON.stringify(m.name)).join(', ')
        throw new HttpError(400, 'InvalidArg', `model: required: this server serves ${names}`)
      }
      const m = byName.get(/** @type {string} */ (name))
      if (!m) {
        const names = models.map((s) => JSON.stringify(s.name)).join(', ')
        throw new HttpError(404, 'ModelNotFound', `model: this server serves ${names}, got ${show(name)}`)
      }
      if (m.kind !== kind) {
        throw new HttpError(400, 'InvalidArg', `model: ${JSON.stringify(m.name)} serves ${KIND_ROUTES[m.kind]}`)
      }
      return m
    },
  }
  const modelObject = (/** @type {ServeModel} */ m) => ({
    id: m.name,
    object: 'model',
    created: 0,
    owned_by: 'torch-node',
  })

  /**
   * @param {import('node:http').IncomingMessage} req
   * @param {import('node:http').ServerResponse} res
   */
  async function handle(req, res) {
    const startedAt = performance.now()
    const path = (req.url ?? '/').split('?')[0]
    const routeKey = `${req.method} ${path}`
    const route = Object.hasOwn(ROUTES, routeKey) ? ROUTES[/** @type {keyof typeof ROUTES} */ (routeKey)] : null
    const stored = path.startsWith(STORED) && path.length > STORED.length
    const label =
      route || ['/health', '/metrics', '/v1/models'].includes(path) ? path : stored ? `${STORED}{id}` : 'other'
    ctx.metrics.inFlight++
    res.on('close', () => {
      ctx.metrics.inFlight--
      ctx.metrics.request(label, res.statusCode)
    })
    try {
      if (path === '/health' && req.method === 'GET') {
        return sendJson(res, ctx.closing ? 503 : 200, { status: ctx.closing ? 'shutting down' : 'ok' })
      }
      if (ctx.closing) throw new HttpError(503, 'Unavailable', 'the server is shutting down', { connection: 'close' })
      if (path === '/metrics' && req.method === 'GET') {
        const body = ctx.metrics.text(models)
        res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4; charset=utf-8' })
        return void res.end(body)
      }
      // every route's too: /v2/rerank and /rerank are outside /v1/
      if (key && (path.startsWith('/v1/') || route)) {
        const given = digest(authorization(req))
        if (!timingSafeEqual(given, key)) {
          throw new HttpError(
            401,
            'Unauthorized',
            'a missing or wrong API key (Authorization: Bearer <key>, or x-api-key)',
            {
              'www-authenticate': 'Bearer',
            },
          )
        }
      }
      if (req.method === 'GET' && path === '/v1/models') {
        return sendJson(res, 200, { object: 'list', data: models.map(modelObject) })
      }
      if (req.method === 'GET' && path.startsWith('/v1/models/')) {
        const id = path.slice('/v1/models/'.length)
        let name = id
        try {
          name = decodeURIComponent(id)
        } catch {} // not percent-encoding: the name as it is
        const m = byName.get(name)
        if (!m) throw new HttpError(404, 'ModelNotFound', `no model ${show(id)}`)
        return sendJson(res, 200, modelObject(m))
      }
      if (stored && (req.method === 'GET' || req.method === 'DELETE')) {
        const query = new URL(req.url ?? '/', 'http://localhost').searchParams
        return responses.stored(ctx, req.method, path.slice(STORED.length), query, res) // ids are [a-z0-9_]
      }
      if (!route) {
        const known = Object.keys(ROUTES).find((k) => k.endsWith(` ${path}`))
        if (known)
          throw new HttpError(405, 'MethodNotAllowed', `${path}: use ${known.split(' ')[0]}`, { allow: 'POST' })
        throw new HttpError(404, 'NotFound', `no route ${req.method} ${path}`)
      }
      const body = await readJson(req, ctx.limits[/** @type {keyof Limits} */ (route.limit)])
      await route.run(ctx, body, res, startedAt)
    } catch (e) {
      const own = /** @type {{ sendError?: typeof sendError } | null} */ (route)?.sendError
      ;(own ?? sendError)(res, e)
    }
  }
  return { handle, ctx }
}

/**
 * The `close({timeoutMs})` of a server answering with a handler's `ctx`: stops accepting, lets
 * the requests running finish up to the deadline, then aborts the generations still running
 * (a stream writes its error event and ends), gives them a second, and closes every connection;
 * then `disposed()`. Once: later calls get the same promise.
 * @param {import('node:http').Server} server
 * @param {Context} ctx
 * @param {() => void} disposed
 */
function closer(server, ctx, disposed) {
  /** @type {Promise<void> | null} */
  let closing = null
  // While closing, a connection is closed once its answer is out.
  server.on('request', (req, res) => {
    res.on('finish', () => {
      if (ctx.closing) setImmediate(() => server.closeIdleConnections())
    })
  })
  return ({ timeoutMs = 10_000 } = {}) =>
    (closing ??= (async () => {
      ctx.closing = true
      const closed = new Promise((resolve) => server.close(() => resolve(undefined)))
      server.closeIdleConnections()
      /** @type {NodeJS.Timeout | undefined} */
      let timer
      const wait = (/** @type {number} */ ms) =>
        new Promise((resolve) => {
          timer = setTimeout(resolve, ms, 'deadline')
        })
      if ((await Promise.race([closed, wait(timeoutMs)])) === 'deadline') {
        for (const stop of ctx.running) stop()
        await Promise.race([closed, wait(1000)])
        server.closeAllConnections()
        await closed
      }
      clearTimeout(timer)
      disposed()
    })())
}

module.exports = { createHandler, closer }

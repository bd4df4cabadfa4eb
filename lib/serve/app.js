// @ts-check
'use strict'
// The request handler of torch-node serve: routes, the API key, model lookup by name (models
// loaded on demand: lib/serve/models.js), metrics, and the state a shutdown needs (the generations
// running, to abort at its deadline).
const { createHash, timingSafeEqual } = require('node:crypto')
const { HttpError, readJson, sendJson, sendError, show, authorization } = require('./http')
const { Metrics } = require('./metrics')
const { ModelRegistry } = require('./models')
const { LIMITS } = require('./requests')
const { policyOf } = require('./media')
const chat = require('./chat')
const { embeddings } = require('./embeddings')
const { classify } = require('./classify')
const { rerank, score } = require('./rerank')
const responses = require('./responses')
const messages = require('./messages')
const audio = require('./audio')
const speech = require('./speech')

/**
 * @typedef {import('./chat').ChatModel | import('./embeddings').EmbeddingModel | import('./classify').ClassifyModel
 *   | import('./rerank').RerankModel | import('./audio').SpeechModel
 *   | import('./speech').SpeechSynthesisModel} ServeModel
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
 * @property {import('./media').FetchPolicy} fetchImages from where http(s) images in chats are fetched
 * @property {(name: unknown, kind: import('./models').ServedKind) => ServeModel} model the model a
 *   request names
 */

// `kind`: the kind of model a route's body names (`model`), loaded before the route runs.
// `read`: the body's reader when it is not JSON (the audio routes' multipart/form-data).
// `check`: what the route refuses of a body without its model, run before the model is acquired.
const ROUTES = {
  'POST /v1/chat/completions': {
    limit: 'maxBodyBytes',
    kind: 'chat',
    run: chat.chatCompletions,
    check: chat.checkChat,
  },
  'POST /v1/completions': { limit: 'maxBodyBytes', kind: 'chat', run: chat.completions, check: chat.checkCompletion },
  'POST /v1/responses': { limit: 'maxBodyBytes', kind: 'chat', run: responses.create, check: responses.check },
  // Anthropic's Messages API: its errors in Anthropic's shape.
  'POST /v1/messages': {
    limit: 'maxBodyBytes',
    kind: 'chat',
    run: messages.create,
    check: messages.check,
    sendError: messages.sendError,
  },
  'POST /v1/messages/count_tokens': {
    limit: 'maxBodyBytes',
    kind: 'chat',
    run: messages.countTokens,
    check: messages.checkCount,
    sendError: messages.sendError,
  },
  'POST /v1/embeddings': { limit: 'maxEmbeddingsBodyBytes', kind: 'embeddings', run: embeddings },
  'POST /v1/classify': { limit: 'maxEmbeddingsBodyBytes', kind: 'classify', run: classify },
  // vLLM's paths for Jina's (/v1/rerank) and Cohere's (/v2/rerank) clients, and llama-server's /rerank.
  'POST /v1/rerank': { limit: 'maxEmbeddingsBodyBytes', kind: 'rerank', run: rerank },
  'POST /v2/rerank': { limit: 'maxEmbeddingsBodyBytes', kind: 'rerank', run: rerank },
  'POST /rerank': { limit: 'maxEmbeddingsBodyBytes', kind: 'rerank', run: rerank },
  'POST /v1/score': { limit: 'maxEmbeddingsBodyBytes', kind: 'rerank', run: score },
  'POST /v1/audio/transcriptions': { read: audio.readForm, kind: 'audio', run: audio.transcriptions },
  'POST /v1/audio/translations': { read: audio.readForm, kind: 'audio', run: audio.translations },
  'POST /v1/audio/speech': { limit: 'maxBodyBytes', kind: 'speech', run: speech.create, check: speech.check },
}
const STORED = '/v1/responses/'

const digest = (/** @type {string} */ s) => createHash('sha256').update(s).digest()

/**
 * A chat model whose generations are timed into the metrics: the request's queue time, gaps
 * between tokens and end-to-end latency (its time to first token is chat.js's to record).
 * @param {import('./chat').ChatModel} served
 * @param {InstanceType<typeof Metrics>} metrics
 * @param {number} startedAt the request's arrival (performance.now())
 * @returns {import('./chat').ChatModel}
 */
function timed(served, metrics, startedAt) {
  const { name } = served
  /** @param {any} input @param {any} options */
  async function* generate(input, options) {
    const handed = performance.now()
    const it = served.generate(input, options)
    let last = -1
    try {
      for (;;) {
        const r = await it.next()
        const now = performance.now()
        if (last < 0) metrics.queued(name, (handed - startedAt) / 1000)
        if (r.done) {
          metrics.finished(name, r.value?.finishReason ?? 'stop', (now - startedAt) / 1000)
          return r.value
        }
        if (last >= 0) metrics.piece(name, (now - last) / 1000, r.value.tokens?.length ?? 1)
        last = now
        yield r.value
      }
    } finally {
      await it.return?.(/** @type {any} */ (undefined))
    }
  }
  return { ...served, generate: /** @type {any} */ (generate) }
}

/**
 * The handler of a server's requests. `models`: models loaded already (kept loaded); or
 * `registry`: the models by name, loaded on demand.
 * @param {{ models?: ServeModel[]; registry?: InstanceType<typeof ModelRegistry>; apiKey?: string;
 *   limits?: import('./requests').ServeLimits; fetchImages?: boolean | string[];
 *   metrics?: InstanceType<typeof Metrics> }} options
 * @returns {{ handle: (req: import('node:http').IncomingMessage, res: import('node:http').ServerResponse) => Promise<void>;
 *   ctx: Context; registry: InstanceType<typeof ModelRegistry> }}
 */
function createHandler({ models = [], registry, apiKey, limits, fetchImages, metrics = new Metrics() }) {
  const known = registry ?? new ModelRegistry(models.map((m) => ({ name: m.name, kind: m.kind, served: m })))
  const key = apiKey === undefined ? null : digest(`Bearer ${apiKey}`)
  /** @param {unknown} name @param {ServeModel['kind']} kind */
  const loaded = (name, kind) => {
    const entry = known.resolve(name, kind)
    if (!entry.served) throw new HttpError(503, 'Unavailable', `model ${JSON.stringify(entry.name)} is not loaded`)
    return entry.served
  }
  /** @type {Context} */
  const ctx = {
    limits: { ...LIMITS, ...limits },
    metrics,
    running: new Set(),
    closing: false,
    responses: new responses.ResponseStore(),
    fetchImages: policyOf(fetchImages),
    model: loaded,
  }
  /**
   * The context of one request: its chat models' generations are timed from its arrival.
   * (Object.create: `closing` and the rest stay live.)
   * @param {number} startedAt
   * @returns {Context}
   */
  const requestContext = (startedAt) => {
    const run = Object.create(ctx)
    run.model = (/** @type {unknown} */ name, /** @type {ServeModel['kind']} */ kind) => {
      const served = loaded(name, kind)
      return served.kind === 'chat' ? timed(served, metrics, startedAt) : served
    }
    return run
  }
  // llama-server's router mode says a model's state so: status.value loaded, loading or unloaded.
  const modelObject = (/** @type {import('./models').Entry} */ m) => ({
    id: m.name,
    object: 'model',
    created: 0,
    owned_by: 'torch-node',
    status: { value: m.state },
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
    /** @type {(() => void) | null} */
    let release = null
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
        const body = ctx.metrics.text(known.entries)
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
        return sendJson(res, 200, { object: 'list', data: known.entries.map(modelObject) })
      }
      if (req.method === 'GET' && path.startsWith('/v1/models/')) {
        const id = path.slice('/v1/models/'.length)
        let name = id
        try {
          name = decodeURIComponent(id)
        } catch {} // not percent-encoding: the name as it is
        const m = known.entries.find((e) => e.name === name)
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
      const { read, limit } = /** @type {{ read?: typeof audio.readForm; limit?: keyof Limits }} */ (route)
      const body = read ? await read(req) : await readJson(req, ctx.limits[/** @type {keyof Limits} */ (limit)])
      // The model the body names is loaded (or waited for) and held while the route runs. A body
      // that names none the route accepts goes on as it is: the route says what is wrong with it.
      /** @type {import('./models').Entry | null} */
      let entry = null
      try {
        entry = known.resolve(/** @type {any} */ (body)?.model, /** @type {ServeModel['kind']} */ (route.kind))
      } catch {}
      // A malformed body is its 4xx now, not after a wait for the model (a 503 QueueFull while many
      // requests wait for it to load).
      const { check } = /** @type {{ check?: (body: unknown, limits: Limits) => void }} */ (route)
      if (entry && check) check(body, ctx.limits)
      release = entry ? await known.acquire(entry) : null
      await route.run(requestContext(startedAt), /** @type {any} */ (body), res, startedAt)
    } catch (e) {
      const own = /** @type {{ sendError?: typeof sendError } | null} */ (route)?.sendError
      ;(own ?? sendError)(res, e)
    } finally {
      release?.()
    }
  }
  return { handle, ctx, registry: known }
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

module.exports = { createHandler, closer, timed }

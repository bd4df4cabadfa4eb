// @ts-check
'use strict'
// torch.serve: an OpenAI-compatible server over torch-node model folders (what `npx torch-node
// serve` runs, lib/serve/cli.js) — causal LMs on /v1/chat/completions, /v1/completions and
// /v1/responses, sentence encoders on /v1/embeddings, classifiers on /v1/classify and
// cross-encoders on /v1/rerank and /v1/score (docs/pipelines.md), Whisper on
// /v1/audio/transcriptions and /v1/audio/translations (docs/speech.md), in one process, on
// node:http. See docs/serving.md.
//   app.js         routes, API key, model lookup, metrics
//   models.js      the models by name, loaded on demand, unloaded when idle or for room
//   chat.js        chat and completions over torch.text.CausalLM (tools: lib/text/tool-calls.js)
//   responses.js   the Responses API, run as a chat completions request by chat.js
//   embeddings.js  embeddings over torch.text.SentenceEncoder
//   classify.js    classification over torch.pipeline('text-classification')
//   rerank.js      reranking and scores over torch.pipeline('text-ranking')
//   audio.js       speech to text over torch.pipeline('automatic-speech-recognition'); multipart bodies
//   requests.js    what a request may say, checked; the limits
//   http.js        JSON bodies, errors in OpenAI's shape, server-sent events
//   metrics.js     GET /metrics (Prometheus)
const fs = require('node:fs')
const http = require('node:http')
const nodePath = require('node:path')
const { codedError } = require('../errors')
const opt = require('../options')
const torch = require('../torch')
const { createHandler, closer } = require('./app')
const { Metrics } = require('./metrics')
const { ModelRegistry } = require('./models')
const { chatModel } = require('./chat')
const { embeddingModel, clipEmbeddingModel } = require('./embeddings')
const { ImageFeatureExtractionPipeline } = require('../vision/image-feature-extraction')
const { classifyModel } = require('./classify')
const { rerankModel } = require('./rerank')
const { speechModel } = require('./audio')
const { SpeechRecognitionPipeline } = require('../audio/speech-recognition')
const { speechSynthesisModel } = require('./speech')
const { TextToSpeechPipeline } = require('../audio/text-to-speech')
const { pipeline } = require('../text/pipeline')
const { LIMITS } = require('./requests')

/**
 * @import { text, audio } from '../../index'
 * @import { ServeLimits } from './requests'
 * @import { TextClassificationPipeline } from '../text/text-classification'
 * @import { TextRankingPipeline } from '../text/text-ranking'
 */

// The public types below become index.d.ts's declarations (tools/lib-typings.js).
/**
 * A model folder `torch.serve` loads, with its load options: a causal LM's (`CausalLM.load`:
 * `dtype`, `maxSequences`, `maxQueue`, `maxContext`) or a sentence encoder's or classifier's
 * (`SentenceEncoder.load`, `torch.pipeline`: `dtype`, `maxBatchSize`, `maxDelayMs`, `maxQueue`). The
 * kind is read from the folder's manifest.json.
 * @typedef {object} ServeModelSpec
 * @property {string} folder A folder written by `npx torch-node export`.
 * @property {'float32' | 'bfloat16' | 'float16'} [dtype]
 * @property {number} [maxSequences] Causal LMs: sequences generating at once.
 * @property {number} [maxContext] Causal LMs: the most tokens of a sequence.
 * @property {number} [maxQueue] Requests waiting before `QueueFull` (HTTP 503); Whisper: requests in flight
 *   past 1 + `maxQueue` (default 64).
 * @property {number} [maxBatchSize] Sentence encoders and classifiers: texts per forward (default 32).
 * @property {number} [maxDelayMs] Sentence encoders and classifiers: how long a batch waits to fill (default 2).
 * @property {number} [maxNewTokens] Whisper: at most this many tokens a transcript (default: the folder's bound).
 * @property {number} [maxDurationS] Whisper: longer audio is a 400 (default 1200 s, at most 10800). Text to
 *   speech: longer speech is a 400 (default 600 s, at most 3600).
 * @property {number} [maxChars] Text to speech: the longest input in characters (default 4096).
 * @property {string} [chatTemplate] Causal LMs: a chat template (Jinja text) to use instead of the folder's,
 *   e.g. one that renders tools for a model whose own does not (`CausalLM.load`'s `chatTemplate`; the CLI's
 *   `--chat-template NAME=FILE`).
 * @property {{ method: 'prompt-lookup'; maxDraft?: number; ngram?: number }} [speculative] Causal LMs:
 *   speculative decoding by prompt lookup (`CausalLM.load`'s `speculative`; the CLI's `--speculative`); the
 *   drafted and accepted tokens are on `/metrics`.
 * @property {{ maxTokens: number }} [prefixCache] Causal LMs: keep prompts' keys and values, up to `maxTokens`
 *   in all, for later prompts that start the same (`CausalLM.load`'s `prefixCache`; on in `torch.serve` with
 *   `maxTokens: 8192` unless given; `{ maxTokens: 0 }` turns it off).
 */
/**
 * Options of `torch.serve`; any other key is refused (`InvalidArg`).
 * @typedef {object} ServeOptions
 * @property {Record<string, string | ServeModelSpec>} models The models by the name clients send as `model`:
 *   a folder, or a folder with load options.
 * @property {string} [host] The address to bind (default `'127.0.0.1'`; `'0.0.0.0'` to face the network).
 * @property {number} [port] The port (default 0: any free one).
 * @property {string} [apiKey] Requests to `/v1/*` must send `Authorization: Bearer <apiKey>` (401 otherwise).
 * @property {ServeLimits} [limits] The limits on one request.
 * @property {boolean | string[]} [fetchImages] Fetch http(s) image URLs in chats (`image_url`, `input_image`,
 *   Anthropic `image` blocks) and CLIP embeddings requests (`image_url` parts):
 *   `true` from any host, or only from these hosts and their subdomains (vLLM's `--allowed-media-domains`);
 *   at most `limits.maxImageBytes` within `limits.imageFetchTimeoutMs`, 3 redirects (each host checked), an
 *   `image/*` answer. Default `false`: such a URL is a 400 (send `data:` URLs).
 * @property {boolean} [lazy] Load every model on its first request rather than at start (default false:
 *   the first `maxLoaded` models load at start, and a failure there rejects `serve`).
 * @property {number} [maxLoaded] Models loaded at once (default: all). A request for another waits until
 *   the least recently used one that runs nothing is unloaded; if all are busy, the least recently used one
 *   takes no new requests until its running ones end.
 * @property {number} [idleMs] Unload a model after this long without requests (default 0: never); the next
 *   request loads it again.
 * @property {number} [maxMemory] Bytes the models loaded at once may take (default: no bound), counting each as
 *   its folder's files plus, for a causal LM, its prefix cache's bound in keys and values. Before a load that
 *   would pass it, the least recently used models that run nothing are unloaded (a busy one drains first); a
 *   model larger than it alone is a 500 `ModelTooLarge`.
 */
/**
 * A model `torch.serve` loaded: a causal LM, a sentence encoder, a classifier's or Whisper's pipeline.
 * @typedef {text.CausalLM | text.SentenceEncoder | TextClassificationPipeline | TextRankingPipeline
 *   | audio.SpeechRecognitionPipeline | audio.TextToSpeechPipeline} ServeLoadedModel
 */
/**
 * A running `torch.serve` server.
 * @typedef {object} OpenAIServer
 * @property {string} url `http://host:port`; the OpenAI clients' `baseURL` is `url + '/v1'`.
 * @property {number} port
 * @property {{ close(callback?: () => void): unknown }} server The underlying `http.Server`.
 * @property {Record<string, ServeLoadedModel>} models The models by name, as loaded now: a model not loaded
 *   (`lazy`, `maxLoaded`, `idleMs`) reads `undefined` until a request loads it.
 * @property {(options?: { timeoutMs?: number }) => Promise<void>} close Stops accepting requests, lets
 *   those running finish for up to `timeoutMs` (default 10 000), then aborts the rest (a stream gets an error
 *   event and ends), closes the connections and disposes the models.
 */

// A spec's other keys go to the load of its kind as they are (CausalLM.load takes prefixCache
// too; ServeModelSpec above is to say so once index.d.ts is regenerated).
const KINDS = ['causal-lm', 'sentence-encoder', 'text-classifier', 'clip', 'whisper', 'text-to-speech']
// A server's chats share system prompts and histories, so its LMs keep a prefix cache unless told
// not to (vLLM's is on by default too). 8,192 tokens: one chat at SmolLM2's whole context, or ten
// turns of ten chats over a 1,000-token system prompt; 360 MiB in fp32, 180 MiB in bf16 for
// SmolLM2-135M (docs/generation.md#prefix-cache-measured has the sizes and figures).
const PREFIX_CACHE_TOKENS = 8192
const limitReader = opt.integer({ min: 1, expected: 'an integer ≥ 1' })
const SERVE_OPTIONS = opt.bag(
  {
    models: opt.check((v) => typeof v === 'object' && !Array.isArray(v) && Object.keys(v).length > 0, '{name: folder}'),
    host: opt.string,
    port: opt.integer({ min: 0, max: 65535, expected: 'a port number (0: any free one)' }),
    apiKey: opt.check((v) => typeof v === 'string' && v !== '', 'a non-empty string'),
    limits: opt.bag(Object.fromEntries(Object.keys(LIMITS).map((k) => [k, limitReader]))),
    lazy: opt.check((v) => typeof v === 'boolean', 'true or false'),
    maxLoaded: limitReader,
    idleMs: opt.integer({ min: 0, expected: 'milliseconds ≥ 0 (0: never)' }),
    maxMemory: opt.integer({ min: 1, expected: 'bytes ≥ 1' }),
    fetchImages: opt.check(
      (v) =>
        typeof v === 'boolean' ||
        (Array.isArray(v) && v.length > 0 && v.every((h) => typeof h === 'string' && /^[\w.-]+$/.test(h))),
      'true, false or a non-empty array of host names',
    ),
  },
  { required: ['models'] },
)

/**
 * The kind of model a folder holds (its manifest.json's `kind`: `causal-lm`, `sentence-encoder`).
 * @param {string} folder
 * @returns {unknown}
 */
function kindOf(folder) {
  return JSON.parse(fs.readFileSync(nodePath.join(folder, 'manifest.json'), 'utf8'))?.kind
}

/**
 * What a folder is served as: `chat` (causal LMs), `embeddings` (sentence encoders; CLIP and
 * SigLIP folders, whose images come as data URLs), `rerank`
 * (cross-encoders exported for text-ranking), `classify` (other classifiers) or `audio` (Whisper); null for a kind
 * serve does not serve. Throws what reading its manifest.json throws.
 * @param {string} folder
 * @returns {import('./models').ServedKind | null}
 */
function servedKind(folder) {
  const manifest = JSON.parse(fs.readFileSync(nodePath.join(folder, 'manifest.json'), 'utf8'))
  if (manifest?.kind === 'causal-lm') return 'chat'
  if (manifest?.kind === 'sentence-encoder' || manifest?.kind === 'clip') return 'embeddings'
  if (manifest?.kind === 'text-classifier') return manifest.task === 'text-ranking' ? 'rerank' : 'classify'
  if (manifest?.kind === 'whisper') return 'audio'
  if (manifest?.kind === 'text-to-speech') return 'speech'
  return null
}

const DTYPE_BYTES = { float32: 4, float16: 2, bfloat16: 2 }

/**
 * What a model counts against `maxMemory`, in bytes: its folder's files (the weights, which its
 * load holds in memory, dominate) and, for a causal LM, its prefix cache's bound in keys and
 * values (2 × layers × KV heads × head size × the dtype's bytes a token). Read from the folder,
 * not measured as RSS at load: it is known before the load (so room is made first), and exact
 * where an RSS delta would also count the requests running meanwhile and the allocator's pages.
 * The running sequences' KV caches are not counted (they grow with the requests).
 * @param {{ folder: string; options: Record<string, any>; kind: string }} spec
 * @returns {number}
 */
function sizeOf({ folder, options, kind }) {
  let bytes = 0
  /** @param {string} dir @param {number} depth */
  const walk = (dir, depth) => {
    for (const d of fs.readdirSync(dir, { withFileTypes: true })) {
      const at = nodePath.join(dir, d.name)
      if (d.isFile()) bytes += fs.statSync(at).size
      else if (d.isDirectory() && depth < 4) walk(at, depth + 1)
    }
  }
  walk(folder, 0)
  if (kind === 'causal-lm') {
    const m = JSON.parse(fs.readFileSync(nodePath.join(folder, 'manifest.json'), 'utf8'))
    const dtype = /** @type {keyof typeof DTYPE_BYTES} */ (options.dtype ?? m.dtype)
    const perToken = 2 * m.layers * m.kv_heads * m.head_dim * (DTYPE_BYTES[dtype] ?? 4)
    const tokens = options.prefixCache?.maxTokens ?? PREFIX_CACHE_TOKENS
    if (Number.isFinite(perToken) && Number.isFinite(tokens)) bytes += perToken * tokens
  }
  return bytes
}

/**
 * A model spec checked at start (its folder's manifest read, not its weights): what `load` takes.
 * @param {string} name
 * @param {unknown} spec
 * @param {Function} caller
 * @returns {{ folder: string; options: Record<string, any>; kind: string }}
 */
function checked(name, spec, caller) {
  const what = `serve: models[${JSON.stringify(name)}]`
  const given = typeof spec === 'string' ? { folder: spec } : spec
  if (given === null || typeof given !== 'object' || typeof (/** @type {any} */ (given).folder) !== 'string') {
    throw codedError('InvalidArg', `${what}: expected a folder or {folder, ...load options}`, caller)
  }
  const { folder, ...options } = /** @type {Record<string, any>} */ (given)
  let kind
  try {
    kind = kindOf(folder)
  } catch (e) {
    const why = /** @type {any} */ (e).code === 'ENOENT' ? 'no manifest.json' : /** @type {Error} */ (e).message
    throw codedError('ModelLoadError', `${what}: ${folder}: ${why} (a folder of \`npx torch-node export\`)`, caller)
  }
  if (!KINDS.includes(/** @type {string} */ (kind))) {
    throw codedError(
      'ModelLoadError',
      `${what}: ${folder}: a ${JSON.stringify(kind)} model; torch-node serve serves causal-lm, sentence-encoder, text-classifier, clip, whisper and text-to-speech folders`,
      caller,
    )
  }
  return { folder, options, kind: /** @type {string} */ (kind) }
}

/**
 * Loads one model folder (as `checked` read it), of the kind its manifest.json says.
 * @param {string} name
 * @param {{ folder: string; options: Record<string, any>; kind: string }} spec
 */
async function load(name, { folder, options, kind }) {
  const what = `serve: models[${JSON.stringify(name)}]`
  // The options go to the load as they are: its bag is the one list of what it takes, and its
  // unknown-key error names the accepted ones (a second list here drifted: prefixCache).
  const { text } = torch()
  const named = (/** @type {any} */ e) => {
    if (e instanceof Error) e.message = `${what}: ${e.message}`
    return e
  }
  if (kind === 'causal-lm') {
    const settings = { prefixCache: { maxTokens: PREFIX_CACHE_TOKENS }, ...options }
    const lm = await text.CausalLM.load(folder, settings).catch((e) => Promise.reject(named(e)))
    try {
      const tokenizer = text.Tokenizer.fromFile(folder)
      return { model: lm, served: chatModel(name, lm, tokenizer, options.chatTemplate) }
    } catch (e) {
      lm.dispose()
      throw e
    }
  }
  if (kind === 'text-classifier') {
    // A cross-encoder (exported for text-ranking) on /v1/rerank, any other classifier on /v1/classify.
    const ranking = JSON.parse(fs.readFileSync(nodePath.join(folder, 'manifest.json'), 'utf8')).task === 'text-ranking'
    const settings = { maxDelayMs: 2, ...options }
    if (ranking) {
      const ranker = await pipeline('text-ranking', folder, settings).catch((e) => Promise.reject(named(e)))
      return { model: ranker, served: rerankModel(name, ranker) }
    }
    const classifier = await pipeline('text-classification', folder, settings).catch((e) => Promise.reject(named(e)))
    return { model: classifier, served: classifyModel(name, classifier) }
  }
  if (kind === 'whisper') {
    // maxNewTokens and maxQueue are the server's (per request, in flight); the rest goes to the load.
    const { maxNewTokens, maxQueue, maxDurationS, ...rest } = options
    const asr = await SpeechRecognitionPipeline.load(folder, rest).catch((e) => Promise.reject(named(e)))
    try {
      return { model: asr, served: speechModel(name, asr, { maxNewTokens, maxQueue, maxDurationS }) }
    } catch (e) {
      asr.dispose()
      throw e
    }
  }
  if (kind === 'text-to-speech') {
    // maxChars, maxDurationS and maxQueue are the pipeline's load options.
    const tts = await TextToSpeechPipeline.load(folder, options).catch((e) => Promise.reject(named(e)))
    return { model: tts, served: speechSynthesisModel(name, tts) }
  }
  if (kind === 'clip') {
    const clip = await ImageFeatureExtractionPipeline.load(folder, { maxDelayMs: 2, ...options }).catch((e) =>
      Promise.reject(named(e)),
    )
    return { model: clip, served: clipEmbeddingModel(name, clip) }
  }
  const encoder = await text.SentenceEncoder.load(folder, {
    maxBatchSize: 32,
    maxDelayMs: 2,
    maxQueue: 1024,
    ...options,
  }).catch((e) => Promise.reject(named(e)))
  return { model: encoder, served: embeddingModel(name, encoder) }
}

/**
 * Loads the model folders (off the event loop, at start or on demand) and serves them with OpenAI's API:
 * `POST /v1/chat/completions`, `/v1/completions`, `/v1/responses` (OpenAI's Responses API) and
 * `/v1/messages` (Anthropic's Messages API) for causal LMs, `/v1/embeddings` (sentence encoders),
 * `/v1/rerank` and `/v1/score` (rerankers), `/v1/classify` (classifiers), `/v1/audio/transcriptions` and
 * `/v1/audio/translations` (Whisper, multipart/form-data); `GET /v1/models`,
 * `/health`, `/metrics`. The models load at start unless `lazy` (then each on its first request); a
 * load that fails at start rejects, one that fails later is a 500 for the requests that waited on it.
 * See docs/serving.md. Errors: `InvalidArg`, `ModelLoadError` (and a model's own load errors), and the
 * listen error (`EADDRINUSE`).
 * @param {ServeOptions} options
 * @returns {Promise<OpenAIServer>}
 */
async function serve(options) {
  const o = opt.read(options, SERVE_OPTIONS, 'serve: options', serve)
  const { host = '127.0.0.1', port = 0, maxLoaded = Infinity, idleMs = 0, maxMemory = Infinity } = o
  const specs = Object.entries(o.models).map(([name, spec]) => {
    const c = checked(name, spec, serve)
    return { name, spec: c, kind: /** @type {import('./models').ServedKind} */ (servedKind(c.folder)) }
  })
  const metrics = new Metrics({ maxMemory })
  const registry = new ModelRegistry(specs, {
    load,
    maxLoaded,
    maxMemory,
    sizeOf,
    idleMs,
    // As many requests wait for a load as the model takes before QueueFull once loaded: its
    // sequences (or batch) and its queue (CausalLM's and SentenceEncoder's defaults when not given).
    // Whisper's: the one running and its queue (a bad maxQueue is its load's to refuse, not a 503).
    maxWaiting: ({ kind, options: o }) =>
      kind === 'whisper'
        ? 1 + (Number.isInteger(o.maxQueue) && o.maxQueue >= 0 ? o.maxQueue : 64)
        : kind === 'causal-lm'
          ? (o.maxSequences ?? 4) + (o.maxQueue ?? 64)
          : (o.maxBatchSize ?? 32) + (o.maxQueue ?? 1024),
    events: {
      load: (name) => metrics.loaded(name),
      loadFailed: (name) => metrics.loadFailed(name),
      unload: (name, reason, served) => metrics.unloaded(name, reason, served),
    },
  })
  // Eager by default, as vLLM and llama-server: the first models that fit maxLoaded and maxMemory
  // load now (the first always: one larger than maxMemory alone rejects), and a failure is serve's
  // (the server does not start). Held and released, so --idle counts from now.
  if (!o.lazy) {
    const now = []
    let bytes = 0
    for (const e of registry.entries) {
      if (now.length === maxLoaded || (now.length > 0 && bytes + e.bytes > maxMemory)) break
      now.push(e)
      bytes += e.bytes
    }
    const held = await Promise.allSettled(now.map((e) => registry.acquire(e)))
    for (const r of held) if (r.status === 'fulfilled') r.value()
    const failed = held.find((r) => r.status === 'rejected')
    if (failed) {
      registry.close()
      const reason = /** @type {PromiseRejectedResult} */ (failed).reason
      // The load's own error (its code and message), not the HTTP answer made of it.
      throw reason.cause ?? reason
    }
  }
  const { handle, ctx } = createHandler({
    registry,
    metrics,
    apiKey: o.apiKey,
    limits: o.limits,
    fetchImages: o.fetchImages,
  })
  const server = http.createServer(handle)
  server.keepAliveTimeout = 60_000
  try {
    await new Promise((resolve, reject) => {
      server.once('error', reject)
      server.listen(port, host, () => resolve(undefined))
    })
  } catch (e) {
    registry.close()
    throw e
  }
  const address = /** @type {import('node:net').AddressInfo} */ (server.address())
  const shown = address.family === 'IPv6' ? `[${address.address}]` : address.address
  const close = closer(server, ctx, () => registry.close())
  /** @type {Record<string, ServeLoadedModel>} */
  const models = {}
  for (const entry of registry.entries) {
    Object.defineProperty(models, entry.name, {
      enumerable: true,
      get: () => /** @type {any} */ (entry.model) ?? undefined,
    })
  }
  return { url: `http://${shown}:${address.port}`, port: address.port, server, models, close }
}

module.exports = { serve, kindOf, servedKind }

'use strict'
// A chat service with Express that speaks OpenAI's chat and completions APIs, so the official
// `openai` client (and what is built on it) uses it as it is:
// `new OpenAI({ baseURL: 'http://localhost:3000/v1', apiKey: 'unused' })`.
//   POST /v1/chat/completions  {messages, model?, stream?, stream_options?: {include_usage},
//        max_tokens | max_completion_tokens, temperature, top_p, stop, seed, n: 1, user,
//        frequency_penalty: 0, presence_penalty: 0}
//     -> chat.completion, or with stream: true server-sent events of chat.completion.chunk
//        objects (`data: {...}\n\n`), ending with `data: [DONE]`
//   POST /v1/completions  {prompt: string, ...the same sampling keys} -> text_completion
//   GET /v1/models, GET /healthz
// The model is a torch-node causal-LM folder (`npx torch-node export <hf-dir> <folder>`), run by
// torch.text.CausalLM: MAX_SEQUENCES requests generate at once, MAX_QUEUE more wait, and past
// that the service answers 503 QueueFull at once. A client that disconnects aborts its
// generation, which frees its sequence for the next request.
//   MODEL_DIR=models/golden/lm/llama-tiny node examples/chat-server.js
//                      (PORT, HOST, MODEL_NAME, MAX_SEQUENCES, MAX_QUEUE, MAX_CONTEXT, DTYPE)
//   curl -sN localhost:3000/v1/chat/completions -H 'content-type: application/json' \
//        -d '{"messages": [{"role": "user", "content": "Hi!"}], "max_tokens": 16, "stream": true}'
const path = require('node:path')
const { randomUUID } = require('node:crypto')
const express = require('express')
const { notFound, errorHandler } = require('./openai-errors')
const torch = require('..')

const LIMITS = Object.freeze({ maxBodyBytes: '4mb', maxMessages: 1024, maxStops: 4 })
// Keys read the same way by both routes; each route adds its own.
const SAMPLING_KEYS = [
  'model',
  'stream',
  'stream_options',
  'max_tokens',
  'temperature',
  'top_p',
  'stop',
  'seed',
  'n',
  'user',
  'frequency_penalty',
  'presence_penalty',
]
const CHAT_KEYS = ['messages', 'max_completion_tokens', ...SAMPLING_KEYS]
const COMPLETION_KEYS = ['prompt', ...SAMPLING_KEYS]
const ROLES = ['system', 'developer', 'user', 'assistant']

function httpError(status, code, message) {
  return Object.assign(new Error(message), { status, code })
}
const invalid = (message) => httpError(400, 'InvalidArg', message)
const show = (v) => (v === undefined ? 'undefined' : JSON.stringify(v))

/** The chat messages as CausalLM reads them: `[{role, content: string}]`. */
function readMessages(messages, limits) {
  if (!Array.isArray(messages) || messages.length === 0) {
    throw invalid(`messages: expected a non-empty array of {role, content}, got ${show(messages)}`)
  }
  if (messages.length > limits.maxMessages) {
    throw invalid(`messages: at most ${limits.maxMessages} messages, got ${messages.length}`)
  }
  return messages.map((m, i) => {
    const where = `messages[${i}]`
    if (m === null || typeof m !== 'object' || Array.isArray(m)) throw invalid(`${where}: expected {role, content}`)
    const extra = Object.keys(m).filter((k) => k !== 'role' && k !== 'content' && k !== 'name')
    if (extra.length) throw invalid(`${where}: unsupported key ${show(extra[0])} (accepted: role, content, name)`)
    if (!ROLES.includes(m.role)) {
      throw invalid(`${where}.role: expected one of ${ROLES.join(', ')}, got ${show(m.role)}`)
    }
    let content = m.content
    // Content parts: text only (this model reads no images or audio).
    if (Array.isArray(content)) {
      content = content
        .map((part, j) => {
          if (part?.type !== 'text' || typeof part.text !== 'string') {
            throw invalid(`${where}.content[${j}]: expected {type: 'text', text: string}, got ${show(part)}`)
          }
          return part.text
        })
        .join('')
    }
    if (typeof content !== 'string') throw invalid(`${where}.content: expected a string, got ${show(m.content)}`)
    // Chat templates know system, user and assistant; OpenAI's newer 'developer' is the system role.
    return { role: m.role === 'developer' ? 'system' : m.role, content }
  })
}

/** Checks the body's keys and maps OpenAI's sampling fields to CausalLM's generation options. */
function readRequest(body, keys, limits) {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw invalid('the body must be a JSON object')
  const unknown = Object.keys(body).filter((k) => !keys.includes(k))
  if (unknown.length) throw invalid(`unknown key ${show(unknown[0])}: accepted keys are ${keys.join(', ')}`)
  // OpenAI's clients send null for "not given".
  const b = Object.fromEntries(Object.entries(body).filter(([, v]) => v !== null))
  const options = {}
  const number = (key, min, max, lowOpen = false) => {
    const v = b[key]
    if (v === undefined) return undefined
    if (typeof v !== 'number' || !Number.isFinite(v) || v > max || (lowOpen ? v <= min : v < min)) {
      throw invalid(`${key}: expected a number in ${lowOpen ? '(' : '['}${min}, ${max}], got ${show(v)}`)
    }
    return v
  }
  for (const key of ['max_tokens', 'max_completion_tokens']) {
    if (b[key] !== undefined && !(Number.isInteger(b[key]) && b[key] >= 1)) {
      throw invalid(`${key}: expected an integer ≥ 1, got ${show(b[key])}`)
    }
  }
  if (b.max_tokens !== undefined && b.max_completion_tokens !== undefined && b.max_tokens !== b.max_completion_tokens) {
    throw invalid('max_tokens and max_completion_tokens differ: send one of them')
  }
  const maxNewTokens = b.max_completion_tokens ?? b.max_tokens
  if (maxNewTokens !== undefined) options.maxNewTokens = maxNewTokens
  const temperature = number('temperature', 0, 2)
  if (temperature !== undefined) options.temperature = temperature
  const topP = number('top_p', 0, 1, true)
  if (topP !== undefined) options.topP = topP
  // These penalize by count; CausalLM's repetitionPenalty divides logits: not the same, so refused.
  for (const key of ['frequency_penalty', 'presence_penalty']) {
    if (number(key, -2, 2)) throw invalid(`${key}: not supported (only 0); this server has no ${key.replace('_', ' ')}`)
  }
  if (b.seed !== undefined) {
    if (!Number.isSafeInteger(b.seed) || b.seed < 0) {
      throw invalid(`seed: expected an integer ≥ 0, got ${show(b.seed)}`)
    }
    options.seed = b.seed
  }
  if (b.stop !== undefined) {
    const stops = typeof b.stop === 'string' ? [b.stop] : b.stop
    const bad = (s) => typeof s !== 'string' || s === ''
    if (!Array.isArray(stops) || stops.length > limits.maxStops || stops.some(bad)) {
      throw invalid(`stop: expected a non-empty string or an array of at most ${limits.maxStops}, got ${show(b.stop)}`)
    }
    if (stops.length) options.stop = stops
  }
  if (b.n !== undefined && b.n !== 1) throw invalid(`n: only 1 is supported, got ${show(b.n)}`)
  if (b.stream !== undefined && typeof b.stream !== 'boolean') {
    throw invalid(`stream: expected a boolean, got ${show(b.stream)}`)
  }
  const so = b.stream_options
  if (so !== undefined) {
    const ok =
      so !== null &&
      typeof so === 'object' &&
      Object.keys(so).every((k) => k === 'include_usage') &&
      (so.include_usage === undefined || typeof so.include_usage === 'boolean')
    if (!ok) throw invalid(`stream_options: expected {include_usage: boolean}, got ${show(so)}`)
    if (!b.stream) throw invalid('stream_options: only with stream: true')
  }
  if (b.user !== undefined && typeof b.user !== 'string') throw invalid('user: expected a string')
  if (b.model !== undefined && typeof b.model !== 'string') {
    throw invalid(`model: expected a string, got ${show(b.model)}`)
  }
  return { options, stream: b.stream === true, includeUsage: so?.include_usage === true, model: b.model }
}

const usageOf = (u) => ({
  prompt_tokens: u.promptTokens,
  completion_tokens: u.completionTokens,
  total_tokens: u.promptTokens + u.completionTokens,
})

/** Writes one server-sent event; waits while the socket's buffer is full (false: the client left). */
async function send(res, data) {
  if (res.destroyed) return false
  if (!res.write(`data: ${typeof data === 'string' ? data : JSON.stringify(data)}\n\n`)) {
    await new Promise((resolve) => {
      const done = () => {
        res.off('drain', done)
        res.off('close', done)
        resolve()
      }
      res.on('drain', done)
      res.on('close', done)
    })
  }
  return !res.destroyed
}

/**
 * The Express app around a model: `{ name, generate(input, options) }` where `generate` is
 * torch.text.CausalLM's (an async iterator of `{text}` pieces returning `{finishReason, usage}`).
 */
function createApp(model, limits = LIMITS) {
  const app = express()
  app.locals.modelName = model.name
  const json = express.json({ limit: limits.maxBodyBytes })
  app.get('/healthz', (req, res) => res.json({ status: 'ok' }))
  app.get('/v1/models', (req, res) => {
    res.json({ object: 'list', data: [{ id: model.name, object: 'model', created: 0, owned_by: 'torch-node' }] })
  })

  /** One request's generation, streamed or whole; `shape` writes the route's objects. */
  async function serve(req, res, input, request, shape) {
    if (request.model !== undefined && request.model !== model.name) {
      const message = `model: this service serves ${show(model.name)}, got ${show(request.model)}`
      throw httpError(404, 'ModelNotFound', message)
    }
    // A client that hangs up (while waiting for a slot, or mid-stream) aborts its generation.
    const gone = new AbortController()
    res.on('close', () => {
      if (!res.writableEnded) gone.abort()
    })
    const it = model.generate(input, { ...request.options, signal: gone.signal })
    const id = `${shape.prefix}-${randomUUID()}`
    const created = Math.floor(Date.now() / 1000)
    const head = { id, object: shape.chunkObject, created, model: model.name }
    // The first piece before any header, so QueueFull and a too long prompt are still HTTP errors.
    let r = await it.next()
    if (gone.signal.aborted) return void (await it.return?.())
    if (!request.stream) {
      let text = ''
      for (; !r.done; r = await it.next()) text += r.value.text
      if (gone.signal.aborted) return
      const { finishReason, usage } = r.value
      res.json({ ...head, object: shape.object, choices: [shape.choice(text, finishReason)], usage: usageOf(usage) })
      return
    }
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' })
    res.flushHeaders()
    try {
      if (shape.first && !(await send(res, { ...head, choices: [shape.first] }))) return
      for (; !r.done; r = await it.next()) {
        if (!(await send(res, { ...head, choices: [shape.delta(r.value.text, null)] }))) return
      }
      if (r.value.finishReason === 'aborted') return
      if (!(await send(res, { ...head, choices: [shape.delta('', r.value.finishReason)] }))) return
      if (request.includeUsage) await send(res, { ...head, choices: [], usage: usageOf(r.value.usage) })
      await send(res, '[DONE]')
      res.end()
    } catch (e) {
      // Headers are sent: the error goes in the stream, in OpenAI's shape, and the stream ends.
      await send(res, { error: { message: e.message, type: 'server_error', code: e.code ?? 'Internal' } })
      res.end()
    } finally {
      await it.return?.()
    }
  }

  app.post('/v1/chat/completions', json, async (req, res, next) => {
    try {
      const request = readRequest(req.body, CHAT_KEYS, limits)
      const messages = readMessages(req.body.messages, limits)
      await serve(req, res, messages, request, {
        prefix: 'chatcmpl',
        object: 'chat.completion',
        chunkObject: 'chat.completion.chunk',
        choice: (content, finishReason) => ({
          index: 0,
          message: { role: 'assistant', content, refusal: null },
          logprobs: null,
          finish_reason: finishReason,
        }),
        first: { index: 0, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null },
        delta: (content, finishReason) => ({
          index: 0,
          delta: finishReason ? {} : { content },
          logprobs: null,
          finish_reason: finishReason,
        }),
      })
    } catch (e) {
      next(e)
    }
  })

  app.post('/v1/completions', json, async (req, res, next) => {
    try {
      const request = readRequest(req.body, COMPLETION_KEYS, limits)
      let prompt = req.body.prompt
      if (Array.isArray(prompt) && prompt.length === 1 && typeof prompt[0] === 'string') prompt = prompt[0]
      if (typeof prompt !== 'string' || prompt === '') {
        throw invalid(`prompt: expected a non-empty string (one prompt per request), got ${show(req.body.prompt)}`)
      }
      const choice = (text, finishReason) => ({ index: 0, text, logprobs: null, finish_reason: finishReason })
      await serve(req, res, prompt, request, {
        prefix: 'cmpl',
        object: 'text_completion',
        chunkObject: 'text_completion',
        choice,
        delta: choice,
      })
    } catch (e) {
      next(e)
    }
  })

  app.use(notFound)
  app.use(errorHandler)
  return app
}

/**
 * Loads the model folder (off the event loop) and listens. Options: `modelDir` (required),
 * `name` (the model id; default the folder's name), `port` (0: any free one), `host`, and
 * CausalLM's load options `dtype`, `maxSequences`, `maxQueue`, `maxContext`; `limits`
 * ({maxBodyBytes, maxMessages, maxStops}). Resolves to `{ server, url, close(), lm, name }`.
 */
async function start({ modelDir, name, port = 3000, host = '127.0.0.1', limits, ...load } = {}) {
  if (typeof modelDir !== 'string') {
    const message = 'modelDir: expected the path of a torch-node causal-LM folder'
    throw Object.assign(new Error(message), { code: 'InvalidArg' })
  }
  const options = Object.fromEntries(Object.entries(load).filter(([, v]) => v !== undefined))
  const lm = await torch.text.CausalLM.load(modelDir, options)
  const modelName = name || path.basename(path.resolve(modelDir))
  const app = createApp({ name: modelName, generate: (input, o) => lm.generate(input, o) }, { ...LIMITS, ...limits })
  const server = await new Promise((resolve, reject) => {
    const s = app.listen(port, host, (err) => (err ? reject(err) : resolve(s)))
  })
  const url = `http://${host}:${server.address().port}`
  const close = () =>
    new Promise((resolve) => {
      server.close(() => {
        lm.dispose()
        resolve()
      })
      server.closeAllConnections()
    })
  return { server, url, close, lm, name: modelName }
}

module.exports = { start, createApp, readRequest, readMessages, LIMITS }

if (require.main === module) {
  const env = process.env
  const numberOf = (key) => (env[key] === undefined ? undefined : Number(env[key]))
  start({
    modelDir: env.MODEL_DIR || path.join(__dirname, '..', 'models', 'golden', 'lm', 'llama-tiny'),
    name: env.MODEL_NAME,
    port: env.PORT === undefined ? 3000 : Number(env.PORT),
    host: env.HOST || '127.0.0.1',
    dtype: env.DTYPE,
    maxSequences: numberOf('MAX_SEQUENCES'),
    maxQueue: numberOf('MAX_QUEUE'),
    maxContext: numberOf('MAX_CONTEXT'),
  }).then(
    ({ url, name }) => {
      console.log(`chat with model ${show(name)} on ${url}/v1/chat/completions (/v1/completions, GET /v1/models)`)
    },
    (e) => {
      console.error(`chat-server: ${e.code || 'Error'}: ${String(e.message).split('\n')[0]}`)
      process.exit(1)
    },
  )
}

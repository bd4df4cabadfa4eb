// @ts-check
'use strict'
// POST /v1/chat/completions and /v1/completions of torch-node serve over a torch.text.CausalLM:
// OpenAI's chat.completion / text_completion objects, or with `stream: true` server-sent events
// of chunks ending with `data: [DONE]`; tools rendered through the model's chat template (natively,
// off the event loop: CausalLM's `tools` option) and the model's tool calls parsed into `tool_calls`
// (lib/text/tool-calls.js). A template without tools gets llama.cpp's generic format: the tools in
// the system turn, the answer constrained to JSON.
const { randomUUID } = require('node:crypto')
const { HttpError, sendJson, sendEvent, startEvents, readKeys } = require('./http')
const R = require('./requests')
const media = require('./media')
const { formatOf, parseToolCalls, ToolCallStream, genericMessages, MARKERS } = require('../text/tool-calls')

/**
 * @import { ToolCallFormat } from '../text/tool-calls'
 * @import { text } from '../../index'
 */

/**
 * What the routes need of a causal LM (`chatModel` makes one from a CausalLM and its tokenizer).
 * @typedef {object} ChatModel
 * @property {'chat'} kind
 * @property {string} name
 * @property {ToolCallFormat | null} toolFormat null: the chat template does not render tools (they are
 *   served in the generic format)
 * @property {Map<number, string>} markers special tokens that decode to nothing but mark tool calls
 * @property {(messages: Array<Record<string, any>>, tools: Array<Record<string, any>> | null, plain: boolean)
 *   => Promise<any>} prompt the input of `generate` for a chat: its messages (the model renders them,
 *   with `options.tools`, natively)
 * @property {(messages: Array<Record<string, any>>, tools: Array<Record<string, any>> | null) => Promise<number[]>}
 *   tokenize a chat's prompt ids as `generate` runs them (made off the event loop)
 * @property {text.CausalLM['generate']} generate with `maxNewTokens`, a prompt that leaves fewer slots
 *   of the context is a 400 naming both (vLLM's words)
 * @property {() => { active: number; queued: number }} stats
 * @property {() => void} dispose
 */

/**
 * @param {string} name
 * @param {text.CausalLM} lm
 * @param {text.Tokenizer} tokenizer the folder's tokenizer, read at load: its chat template's tool format
 *   and the special tokens that mark tool calls
 * @param {string} [chatTemplate] the template the model was loaded with instead of the folder's
 * @returns {ChatModel}
 */
function chatModel(name, lm, tokenizer, chatTemplate) {
  const toolFormat = formatOf(chatTemplate ?? tokenizer.chatTemplate)
  /** @type {Map<number, string>} */
  const markers = new Map()
  for (const marker of toolFormat ? MARKERS[toolFormat] : []) {
    const id = tokenizer.tokenToId(marker)
    // A marker that is a special token is dropped by decoding: it is put back from the token ids.
    if (id !== null && tokenizer.decode([id], { skipSpecialTokens: true }) === '') markers.set(id, marker)
  }
  return {
    kind: 'chat',
    name,
    toolFormat,
    markers,
    // The chat (its tools in generate's options) goes to CausalLM as it is: rendered and tokenized
    // natively, off the event loop; a chat with images has its images decoded and expanded there.
    prompt: async (messages) => messages,
    tokenize: (messages, tools) =>
      lm.tokenize(/** @type {any} */ (messages), tools ? { tools: /** @type {any} */ (tools) } : undefined),
    async *generate(input, options) {
      // A request's max_tokens must fit beside its prompt (known once the model has tokenized it).
      const strict = options?.maxNewTokens === undefined ? options : { ...options, strictContext: true }
      try {
        return yield* lm.generate(input, strict)
      } catch (e) {
        throw tooLarge(e)
      }
    },
    stats: () => lm.stats(),
    dispose() {
      lm.dispose()
      tokenizer.dispose()
    },
  }
}

/**
 * CausalLM's `strictContext` refusal as OpenAI's parameter names it (vLLM's 400); any other error
 * as it is.
 * @param {unknown} e
 */
function tooLarge(e) {
  const error = /** @type {any} */ (e)
  const at = typeof error?.message === 'string' ? error.message.indexOf("'maxNewTokens' is too large: ") : -1
  if (error?.code !== 'InvalidArg' || at < 0) return e
  return new HttpError(400, 'InvalidArg', `'max_tokens'${error.message.slice(at + "'maxNewTokens'".length)}`)
}

const usageOf = (/** @type {{ promptTokens: number; completionTokens: number }} */ u) => ({
  prompt_tokens: u.promptTokens,
  completion_tokens: u.completionTokens,
  total_tokens: u.promptTokens + u.completionTokens,
})

/**
 * A tool call's id: OpenAI's shape, or 9 letters and digits for Mistral, whose templates refuse
 * any other id when the call comes back in the next turn.
 * @param {ToolCallFormat | null} format
 */
const callId = (format) => {
  const hex = randomUUID().replace(/-/g, '')
  return format === 'mistral' ? hex.slice(0, 9) : `call_${hex.slice(0, 24)}`
}

/**
 * OpenAI's objects for one route.
 * @typedef {object} Shape
 * @property {string} prefix
 * @property {string} object
 * @property {string} chunkObject
 * @property {(text: string, finishReason: string) => any} choice the whole answer's choice
 * @property {any} [first] the first chunk's choice
 * @property {(text: string) => any} delta a text chunk's choice
 * @property {(finishReason: string) => any} last the last chunk's choice
 */

/** @type {Shape} */
const COMPLETION = {
  prefix: 'cmpl',
  object: 'text_completion',
  chunkObject: 'text_completion',
  choice: (text, finishReason) => ({ index: 0, text, logprobs: null, finish_reason: finishReason }),
  delta: (text) => ({ index: 0, text, logprobs: null, finish_reason: null }),
  last: (finishReason) => ({ index: 0, text: '', logprobs: null, finish_reason: finishReason }),
}

/**
 * The chat route's objects; with tools, the answer's tool calls as OpenAI's `tool_calls`. An
 * answer cut by max_tokens (finish_reason `length`) drops the call it cut.
 * @param {ToolCallFormat | null} format
 * @param {boolean} parallel false: only the first call is kept
 * @returns {Shape & { calls: (events: any[]) => any[] }}
 */
function chatShape(format, parallel) {
  let calls = 0
  /** A streamed call's index in `tool_calls`, by its id in the ToolCallStream (none: left out). */
  const indexOf = /** @type {Map<number, number>} */ (new Map())
  const finish = (/** @type {string} */ reason) => (calls > 0 && reason === 'stop' ? 'tool_calls' : reason)
  const chunk = (/** @type {any} */ delta, /** @type {string | null} */ reason = null) => ({
    index: 0,
    delta,
    logprobs: null,
    finish_reason: reason,
  })
  return {
    prefix: 'chatcmpl',
    object: 'chat.completion',
    chunkObject: 'chat.completion.chunk',
    choice(text, finishReason) {
      /** @type {Record<string, any>} */
      const message = { role: 'assistant', content: text, refusal: null }
      if (format) {
        const parsed = parseToolCalls(text, format, { cut: finishReason === 'length' })
        const found = parallel ? parsed.toolCalls : parsed.toolCalls.slice(0, 1)
        message.content = parsed.content
        if (found.length) {
          calls = found.length
          message.tool_calls = found.map((c) => ({ id: callId(format), type: 'function', function: c }))
        }
      }
      return { index: 0, message, logprobs: null, finish_reason: finish(finishReason) }
    },
    first: chunk({ role: 'assistant', content: '' }),
    delta: (text) => chunk({ content: text }),
    last: (finishReason) => chunk({}, finish(finishReason)),
    // A call goes out as OpenAI streams one: its id and name with arguments '', then its
    // arguments in fragments as they are generated (ToolCallStream's begin and arguments events);
    // a call read only whole (not written name first) in one fragment.
    calls: (events) =>
      events.flatMap((e) => {
        if (e.type === 'text') return [chunk({ content: e.text })]
        const id = /** @type {number} */ (e.id)
        if (e.type === 'arguments' || (e.type === 'call' && e.streamed)) {
          const index = indexOf.get(id)
          if (index === undefined || e.type === 'call') return []
          return [chunk({ tool_calls: [{ index, function: { arguments: e.text } }] })]
        }
        if (!parallel && calls > 0) return []
        const index = calls++
        indexOf.set(id, index)
        const name = e.type === 'begin' ? e.name : e.call.name
        const begin = chunk({
          tool_calls: [{ index, id: callId(format), type: 'function', function: { name, arguments: '' } }],
        })
        if (e.type === 'begin') return [begin]
        return [begin, chunk({ tool_calls: [{ index, function: { arguments: e.call.arguments } }] })]
      }),
  }
}

/**
 * A token's log-probability as OpenAI writes it (`choices[].logprobs.content[]`).
 * @param {import('../text/causal-lm').TokenLogprob} e
 */
const openaiLogprob = (e) => ({
  token: e.text,
  logprob: e.logprob,
  bytes: e.bytes,
  top_logprobs: e.top.map((a) => ({ token: a.text, logprob: a.logprob, bytes: a.bytes })),
})

/**
 * One request's generation, streamed or whole: `request.n` choices, each its own sequence (choice
 * i > 0 seeded `seed + i`, so sampled choices differ), their chunks interleaved in a stream.
 * @param {import('./app').Context} ctx
 * @param {import('node:http').ServerResponse} res
 * @param {ChatModel} model
 * @param {any} input
 * @param {{ options: Record<string, any>; stream: boolean; includeUsage: boolean; n: number; logprobs?: boolean }} request
 * @param {() => Shape & { calls?: (events: any[]) => any[] }} makeShape a choice's objects (a chat's
 *   count its calls)
 * @param {ToolCallFormat | null} format tool calls to parse out of a stream
 * @param {number} startedAt when the request came (performance.now())
 */
async function generate(ctx, res, model, input, request, makeShape, format, startedAt) {
  // A client that hangs up (while waiting for a slot, or mid-stream) aborts its generation; so
  // does the end of a shutdown's grace period.
  const gone = new AbortController()
  res.on('close', () => {
    if (!res.writableEnded) gone.abort()
  })
  // Gone already (while its chat was being rendered and tokenized): nothing to generate for.
  if (res.socket === null || res.socket.destroyed) return
  const stop = () => gone.abort()
  ctx.running.add(stop)
  /** @type {Array<{ it: AsyncGenerator<any, any, undefined>; shape: ReturnType<typeof makeShape> }>} */
  const choices = []
  const head = {
    id: `${makeShape().prefix}-${randomUUID()}`,
    object: makeShape().chunkObject,
    created: Math.floor(Date.now() / 1000),
    model: model.name,
  }
  const withMarkers = (/** @type {{ text: string; tokens: number[] }} */ piece) => {
    if (model.markers.size === 0) return piece.text
    const marks = piece.tokens.flatMap((t) => (model.markers.has(t) ? [model.markers.get(t)] : []))
    return marks.join('') + piece.text
  }
  const at = (/** @type {any} */ choice, /** @type {number} */ index) => ({ ...choice, index })
  const shuttingDown = () => new HttpError(503, 'Unavailable', 'the server is shutting down')
  try {
    for (let i = 0; i < request.n; i++) {
      const seeded = i === 0 ? request.options : { ...request.options, seed: (request.options.seed ?? 0) + i }
      choices.push({ it: model.generate(input, { ...seeded, signal: gone.signal }), shape: makeShape() })
    }
    // The first pieces before any header, so QueueFull and a too long prompt are still HTTP errors.
    const firsts = await Promise.all(choices.map((c) => c.it.next()))
    if (!firsts[0].done) ctx.metrics.firstToken(model.name, (performance.now() - startedAt) / 1000)
    if (gone.signal.aborted) {
      if (ctx.closing && !res.headersSent) throw shuttingDown()
      return
    }
    /** @param {Array<{ usage: { promptTokens: number; completionTokens: number } }>} results */
    const usageOfAll = (results) => {
      const completionTokens = results.reduce((sum, r) => sum + r.usage.completionTokens, 0)
      const u = { promptTokens: results[0].usage.promptTokens, completionTokens }
      ctx.metrics.tokens(model.name, u.promptTokens, u.completionTokens)
      return usageOf(u)
    }
    if (!request.stream) {
      const answers = await Promise.all(
        choices.map(async (c, i) => {
          let text = ''
          /** @type {any[]} */
          const content = []
          let r = firsts[i]
          for (; !r.done; r = await c.it.next()) {
            text += withMarkers(r.value)
            for (const e of r.value.logprobs ?? []) content.push(openaiLogprob(e))
          }
          return { text, content, result: r.value }
        }),
      )
      const usage = usageOfAll(answers.map((a) => a.result))
      if (answers.some((a) => a.result.finishReason === 'aborted')) {
        if (ctx.closing && !res.headersSent) throw shuttingDown()
        return
      }
      const body = {
        ...head,
        object: choices[0].shape.object,
        choices: answers.map(({ text, content, result }, i) => {
          const choice = at(choices[i].shape.choice(text, result.finishReason), i)
          if (request.logprobs) choice.logprobs = { content, refusal: null }
          return choice
        }),
        usage,
      }
      return sendJson(res, 200, body)
    }
    startEvents(res)
    const send = async (/** @type {any[]} */ list) => {
      for (const choice of list) if (!(await sendEvent(res, { ...head, choices: [choice] }))) return false
      return true
    }
    const first = choices[0].shape.first
    if (first && !(await send(choices.map((_, i) => at(first, i))))) return
    /** One choice's chunks; its result, or null when the client went away. */
    const stream = async (/** @type {(typeof choices)[number]} */ c, /** @type {number} */ i) => {
      const calls = format && c.shape.calls ? new ToolCallStream(format, { partial: true }) : null
      // Tokens' log-probabilities go on the next chunk of their choice (a tool call's text can
      // wait for its end before any chunk goes).
      /** @type {any[]} */
      const pending = []
      const out = (/** @type {any[]} */ list) => {
        const chunks = list.map((x) => at(x, i))
        if (request.logprobs && pending.length && chunks.length) {
          chunks[0].logprobs = { content: pending.splice(0), refusal: null }
        }
        return chunks
      }
      let r = firsts[i]
      for (; !r.done; r = await c.it.next()) {
        const text = withMarkers(r.value)
        for (const e of r.value.logprobs ?? []) pending.push(openaiLogprob(e))
        const list = calls && c.shape.calls ? c.shape.calls(calls.push(text)) : [c.shape.delta(text)]
        if (!(await send(out(list)))) return null
      }
      const { finishReason } = r.value
      if (finishReason === 'aborted') return r.value
      if (calls && c.shape.calls && !(await send(out(c.shape.calls(calls.end({ cut: finishReason === 'length' }))))))
        return null
      if (!(await send(out([c.shape.last(finishReason)])))) return null
      return r.value
    }
    const results = await Promise.all(choices.map(stream))
    if (results.some((r) => r === null)) return
    const usage = usageOfAll(/** @type {any[]} */ (results))
    if (results.some((r) => r.finishReason === 'aborted')) {
      // Cut by the shutdown: said in the stream, in OpenAI's shape, so the client sees an error.
      if (ctx.closing) {
        await sendEvent(res, {
          error: { message: 'the server is shutting down', type: 'server_error', code: 'Unavailable' },
        })
      }
      return void res.end()
    }
    if (request.includeUsage) await sendEvent(res, { ...head, choices: [], usage })
    await sendEvent(res, '[DONE]')
    res.end()
  } catch (e) {
    // One choice failed: the others end too.
    gone.abort()
    if (!res.headersSent) throw e
    // Headers are sent: the error goes in the stream, in OpenAI's shape, and the stream ends.
    const error = /** @type {any} */ (e)
    await sendEvent(res, { error: { message: error.message, type: 'server_error', code: error.code ?? 'Internal' } })
    res.end()
  } finally {
    ctx.running.delete(stop)
    await Promise.all(choices.map((c) => c.it.return?.(/** @type {any} */ (undefined))))
  }
}

/**
 * What POST /v1/chat/completions refuses of a body before its model is needed: every reader the
 * route runs on it (so a malformed body is its 400 at once, not after waiting for the model to
 * load). Throws the route's HttpError.
 * @param {unknown} body
 * @param {Required<import('./requests').ServeLimits>} limits
 */
function checkChat(body, limits) {
  const b = readKeys(body, R.CHAT_KEYS)
  R.readSampling(b, limits)
  R.readLogprobs(b)
  const images = imagesOf(b.messages, limits)
  R.readMessages(images ? images.textOnly : b.messages, limits)
  const { forced } = R.readTools(b, limits)
  const responseFormat = R.readResponseFormat(b.response_format)
  if (forced && responseFormat) {
    throw new HttpError(400, 'InvalidArg', 'response_format: not with a forced tool_choice (the answer is tool calls)')
  }
}

/**
 * What POST /v1/completions refuses of a body before its model is needed (see `checkChat`).
 * @param {unknown} body
 * @param {Required<import('./requests').ServeLimits>} limits
 */
function checkCompletion(body, limits) {
  const b = readKeys(body, R.COMPLETION_KEYS)
  R.readSampling(b, limits)
  R.readPrompt(b.prompt)
}

/**
 * POST /v1/chat/completions
 * @param {import('./app').Context} ctx
 * @param {unknown} body
 * @param {import('node:http').ServerResponse} res
 * @param {number} startedAt
 */
async function chatCompletions(ctx, body, res, startedAt) {
  const b = readKeys(body, R.CHAT_KEYS)
  const request = R.readSampling(b, ctx.limits)
  const logprobs = R.readLogprobs(b)
  if (logprobs) request.options = { ...request.options, ...logprobs }
  const model = /** @type {ChatModel} */ (ctx.model(b.model, 'chat'))
  const images = imagesOf(b.messages, ctx.limits, ctx.fetchImages)
  const read = R.readMessages(images ? images.textOnly : b.messages, ctx.limits)
  const { plain } = read
  const { tools, parallel, forced } = R.readTools(b, ctx.limits)
  // (checkChat runs these readers before the model is acquired: keep the two in step.)
  // The read messages with the image parts back where they were (CausalLM decodes them).
  const responseFormat = R.readResponseFormat(b.response_format)
  if (forced && responseFormat) {
    throw new HttpError(400, 'InvalidArg', 'response_format: not with a forced tool_choice (the answer is tool calls)')
  }
  const format = tools ? (model.toolFormat ?? 'generic') : null
  // The generic format is JSON under a grammar whatever the choice (a call, or a text answer).
  const constrained = forced !== null || format === 'generic'
  if (format === 'generic' && responseFormat) {
    throw new HttpError(
      400,
      'InvalidArg',
      `response_format: not with tools on model ${JSON.stringify(model.name)}, whose chat template has no tool ` +
        'format (its answer is JSON: a tool call or a text response)',
    )
  }
  // Under a grammar, one call unless the client asks for more: a model free to add calls
  // (SmolLM2) repeats the same call until max_tokens. A named function is called once anyway.
  const named = forced !== null && typeof forced === 'object'
  const calls = constrained && !named ? b.parallel_tool_calls === true : parallel
  if (tools && constrained) {
    const toolChoice = forced ?? 'auto'
    request.options = {
      ...request.options,
      responseFormat: { type: 'tool_calls', tools, toolChoice, format, parallel: calls },
    }
  } else if (responseFormat) request.options = { ...request.options, responseFormat }
  // Fetched once the request is known good (http(s) images, where the server fetches them).
  if (images) await fetchImages(images.parts, ctx, res)
  const messages = images ? read.messages.map((m, i) => images.parts.get(i) ?? m) : read.messages
  let input
  if (model.toolFormat === null && (tools || !plain)) {
    // A template without tools: the generic format's chat, as plain turns.
    const only = named ? forced.function.name : null
    // Earlier calls are written as the model is asked to write them now (one, or a list).
    const list = tools !== null && calls && !named
    const chat = genericMessages(messages, tools, { parallel: list, text: forced === null, only })
    input = await model.prompt(chat, null, true)
  } else {
    input = await model.prompt(messages, tools, plain)
    // The model's template renders the tools (natively, as the chat starts).
    if (tools) request.options = { ...request.options, tools }
  }
  const chat = { ...request, logprobs: logprobs !== null }
  await generate(ctx, res, model, input, chat, () => chatShape(format, calls), format, startedAt)
}

/**
 * POST /v1/completions
 * @param {import('./app').Context} ctx
 * @param {unknown} body
 * @param {import('node:http').ServerResponse} res
 * @param {number} startedAt
 */
async function completions(ctx, body, res, startedAt) {
  const b = readKeys(body, R.COMPLETION_KEYS)
  const request = R.readSampling(b, ctx.limits)
  const model = /** @type {ChatModel} */ (ctx.model(b.model, 'chat'))
  await generate(ctx, res, model, R.readPrompt(b.prompt), request, () => COMPLETION, null, startedAt)
}

// `data:image/png;base64,...` (and jpeg, webp, gif: what torch.image.load decodes).
const DATA_URL = /^data:image\/[\w.+-]+;base64,/

/**
 * OpenAI's `image_url` content parts (`{type: 'image_url', image_url: {url}}`, or `image_url` the URL
 * itself) in `messages`, as CausalLM's image parts: `parts`, message index -> the message with its
 * content as `[{type: 'text', text} | {type: 'image', image: Buffer | URL}]` (a URL: an http(s)
 * image, fetched by `fetchImages` when the server fetches; a 400 here when `policy` is null, as
 * `undefined` leaves that to the route); `textOnly`, the messages with those parts left out (for
 * requests.js's checks). Null when no message has one. `detail` only "auto" (or none).
 * @param {unknown} messages
 * @param {{ maxImages: number }} limits at most `maxImages` images in all (a 400 past it)
 * @param {import('./media').FetchPolicy} [policy]
 * @returns {{ parts: Map<number, Record<string, any>>; textOnly: unknown[] } | null}
 */
function imagesOf(messages, limits, policy) {
  if (!Array.isArray(messages)) return null
  const isImage = (/** @type {any} */ p) => p !== null && typeof p === 'object' && p.type === 'image_url'
  if (!messages.some((m) => Array.isArray(m?.content) && m.content.some(isImage))) return null
  const count = messages.reduce((n, m) => n + (Array.isArray(m?.content) ? m.content.filter(isImage).length : 0), 0)
  if (count > limits.maxImages) {
    throw new HttpError(400, 'InvalidArg', `messages: at most ${limits.maxImages} images in one request, got ${count}`)
  }
  /** @type {Map<number, Record<string, any>>} */
  const parts = new Map()
  const textOnly = messages.map((m, i) => {
    if (!Array.isArray(m?.content) || !m.content.some(isImage)) return m
    if (m.role !== 'user') {
      throw new HttpError(400, 'InvalidArg', `messages[${i}]: image_url parts only in user messages`)
    }
    const content = m.content.map((/** @type {any} */ p, /** @type {number} */ j) =>
      isImage(p)
        ? { type: 'image', image: imageSource(p.image_url, `messages[${i}].content[${j}].image_url`, policy) }
        : p,
    )
    parts.set(i, { role: m.role, content })
    return { ...m, content: content.filter((/** @type {any} */ p) => p.type !== 'image') }
  })
  return { parts, textOnly }
}

/**
 * An `image_url` part's image: `image_url` the URL or `{url, detail}`. A data:image/...;base64
 * URL's bytes; an http(s) URL as a URL (a 400 when `policy` fetches from nowhere or not from its
 * host; `undefined`: the route decides). 400 `InvalidArg` naming `where` for anything else and a
 * `detail` other than "auto" (OpenAI's low and high change what the model sees; here each image is
 * read at its processor's one size).
 * @param {unknown} imageUrl
 * @param {string} where
 * @param {import('./media').FetchPolicy} [policy]
 * @returns {Buffer | URL}
 */
function imageSource(imageUrl, where, policy) {
  const given = /** @type {any} */ (imageUrl)
  const url = typeof given === 'string' ? given : given?.url
  if (typeof url !== 'string') throw new HttpError(400, 'InvalidArg', `${where}: expected {url: string}`)
  const detail = typeof given === 'string' ? undefined : given.detail
  if (detail !== undefined && detail !== null && detail !== 'auto') {
    throw new HttpError(400, 'InvalidArg', `${where}.detail: only "auto" is served, got ${JSON.stringify(detail)}`)
  }
  const match = DATA_URL.exec(url)
  if (match) return Buffer.from(url.slice(match[0].length), 'base64')
  const http = media.httpUrl(url)
  if (!http) {
    throw new HttpError(
      400,
      'InvalidArg',
      `${where}: expected a data:image/...;base64 URL or an http(s) URL, got ${JSON.stringify(url.slice(0, 40))}`,
    )
  }
  if (policy !== undefined && !media.allowed(http, policy)) throw media.refused(where, http, policy)
  return http
}

/**
 * `imagesOf`'s parts with their http(s) images fetched (one after another: a request's time bound
 * is each fetch's).
 * @param {Map<number, Record<string, any>>} parts
 * @param {import('./app').Context} ctx
 * @param {import('node:http').ServerResponse} res a client that hangs up stops the fetch
 */
async function fetchImages(parts, ctx, res) {
  const gone = new AbortController()
  const hangUp = () => {
    if (!res.writableEnded) gone.abort()
  }
  res.on('close', hangUp)
  try {
    await fetchEach(parts, ctx, gone.signal)
  } finally {
    res.off('close', hangUp)
  }
}

/**
 * @param {Map<number, Record<string, any>>} parts
 * @param {import('./app').Context} ctx
 * @param {AbortSignal} signal
 */
async function fetchEach(parts, ctx, signal) {
  for (const [i, message] of parts) {
    for (const [j, part] of message.content.entries()) {
      if (!(part.image instanceof URL)) continue
      const where = `messages[${i}].content[${j}].image_url`
      part.image = await media.fetchImage(part.image, {
        policy: ctx.fetchImages,
        maxBytes: ctx.limits.maxImageBytes,
        timeoutMs: ctx.limits.imageFetchTimeoutMs,
        where,
        signal,
      })
    }
  }
}

module.exports = { chatModel, chatCompletions, completions, checkChat, checkCompletion, imageSource }

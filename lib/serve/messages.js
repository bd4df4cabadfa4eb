// @ts-check
'use strict'
// POST /v1/messages: Anthropic's Messages API (what `@anthropic-ai/sdk`'s `messages.create` and
// `messages.stream` call), stateless, as vLLM and llama-server serve it. The request's system
// prompt, text, tool_use and tool_result blocks become a chat completions request that
// lib/serve/chat.js runs as its own (templates, tools, grammars, aborts, metrics); its
// chat.completion, or its chunks as they come, are mapped back to a message or to Anthropic's
// named stream events. Errors go out in Anthropic's shape ({type: 'error', error: {type, message}}).
const { randomUUID } = require('node:crypto')
const { HttpError, invalid, show, sendJson, eventText, readKeys, statusOf } = require('./http')
const { Relay } = require('./adapter')
const chat = require('./chat')
const R = require('./requests')

/**
 * @typedef {import('./app').Context} Context
 * @typedef {import('./chat').ChatModel} ChatModel
 * @typedef {Record<string, any>} Block a content block
 * @typedef {Record<string, any>} Message a chat completions message
 */

const REQUEST_KEYS = [
  'model',
  'messages',
  'system',
  'max_tokens',
  'temperature',
  'top_p',
  'top_k',
  'stop_sequences',
  'tools',
  'tool_choice',
  'metadata',
  'stream',
]
const COUNT_KEYS = ['model', 'messages', 'system', 'tools', 'tool_choice']
// Stop sequences are matched here, on the text as it comes (the engine's `stop` does not say which
// one it met, and `stop_sequence` names it); a bound on the work per piece.
const MAX_STOP_SEQUENCES = 32
/** @type {Array<[RegExp, string]>} */
const RENAMES = [
  [/^(tools\[\d+\])\.function\.parameters/, '$1.input_schema'],
  [/^(tools\[\d+\])\.function\./, '$1.'],
  [/^tool_choice\.function\.name/, 'tool_choice.name'],
  [/^parallel_tool_calls/, 'tool_choice.disable_parallel_tool_use'],
  [/^user:/, 'metadata.user_id:'],
]
const STOP_REASONS = { stop: 'end_turn', length: 'max_tokens', tool_calls: 'tool_use' }

const newId = (/** @type {string} */ prefix) => `${prefix}_${randomUUID().replace(/-/g, '').slice(0, 24)}`

/**
 * Checks a block's keys: `cache_control` is accepted on every block and dropped (a hint for
 * Anthropic's cache; this server's prefix cache needs none).
 * @param {Block} block
 * @param {string[]} keys
 * @param {string} where
 */
function blockKeys(block, keys, where) {
  const extra = Object.keys(block).find((k) => !keys.includes(k) && k !== 'cache_control' && block[k] !== null)
  if (extra) throw invalid(`${where}: unsupported key ${show(extra)} for a ${block.type} block`)
}

/**
 * Text blocks, joined: a string, or `{type: 'text', text}` blocks (images and documents are
 * refused: this server's models read text).
 * @param {unknown} content
 * @param {string} where
 */
function readText(content, where) {
  if (typeof content === 'string') return content
  if (!Array.isArray(content)) throw invalid(`${where}: expected a string or an array of text blocks`)
  return content.map((block, j) => textOf(block, `${where}[${j}]`)).join('')
}

/** What a refused block's message adds: documents are not read here. @param {unknown} type */
const textOnly = (type) => (type === 'document' ? ' (this server reads no documents)' : '')

const IMAGE_TYPES = ['image/jpeg', 'image/png', 'image/gif', 'image/webp']

/**
 * An image block (`{type: 'image', source: {type: 'base64', media_type, data} | {type: 'url', url}}`)
 * as chat completions' `image_url` part: a data: URL, or the URL (fetched where the server fetches).
 * @param {any} block @param {string} where
 */
function imagePart(block, where) {
  blockKeys(block, ['type', 'source'], where)
  const source = block.source
  if (source?.type === 'base64') {
    blockKeys(source, ['type', 'media_type', 'data'], `${where}.source`)
    if (!IMAGE_TYPES.includes(source.media_type)) {
      throw invalid(
        `${where}.source.media_type: expected one of ${IMAGE_TYPES.join(', ')}, got ${show(source.media_type)}`,
      )
    }
    if (typeof source.data !== 'string') throw invalid(`${where}.source.data: expected a base64 string`)
    return { type: 'image_url', image_url: { url: `data:${source.media_type};base64,${source.data}` } }
  }
  if (source?.type === 'url') {
    blockKeys(source, ['type', 'url'], `${where}.source`)
    if (typeof source.url !== 'string') throw invalid(`${where}.source.url: expected a string, got ${show(source.url)}`)
    return { type: 'image_url', image_url: { url: source.url } }
  }
  throw invalid(
    `${where}.source: expected {type: 'base64', media_type, data} or {type: 'url', url}, got ${show(source)}`,
  )
}

/** @param {any} block @param {string} where */
function textOf(block, where) {
  if (block?.type !== 'text') {
    throw invalid(`${where}.type: expected "text"${textOnly(block?.type)}, got ${show(block?.type)}`)
  }
  if (typeof block.text !== 'string') throw invalid(`${where}.text: expected a string, got ${show(block.text)}`)
  blockKeys(block, ['type', 'text', 'citations'], where)
  return block.text
}

/**
 * The conversation as chat completions messages: a user turn's tool_result blocks become `tool`
 * messages (an error's content prefixed `Error: `, so the model reads that the call failed), an
 * assistant turn's tool_use blocks its `tool_calls` (their `input` as a JSON string).
 * @param {unknown} system
 * @param {unknown} messages
 */
function readConversation(system, messages) {
  /** @type {Message[]} */
  const out = []
  if (system !== undefined) out.push({ role: 'system', content: readText(system, 'system') })
  if (!Array.isArray(messages) || messages.length === 0) {
    throw invalid(`messages: expected a non-empty array of {role, content}, got ${show(messages)}`)
  }
  /** @type {Set<string>} */
  const callIds = new Set()
  messages.forEach((m, i) => {
    const where = `messages[${i}]`
    if (m === null || typeof m !== 'object' || Array.isArray(m)) throw invalid(`${where}: expected {role, content}`)
    const extra = Object.keys(m).find((k) => k !== 'role' && k !== 'content')
    if (extra) throw invalid(`${where}: unsupported key ${show(extra)} (accepted: role, content)`)
    if (m.role !== 'user' && m.role !== 'assistant') {
      throw invalid(`${where}.role: expected "user" or "assistant", got ${show(m.role)}`)
    }
    if (typeof m.content === 'string') return void out.push({ role: m.role, content: m.content })
    if (!Array.isArray(m.content)) throw invalid(`${where}.content: expected a string or an array of blocks`)
    let text = ''
    // A user turn with images: its text and image parts in order (chat completions' content parts).
    /** @type {Array<Record<string, any>>} */
    let parts = []
    /** @type {Message[]} */
    const calls = []
    const flush = () => {
      if (parts.length) {
        if (text !== '') parts.push({ type: 'text', text })
        out.push({ role: 'user', content: parts })
      } else if (text !== '') out.push({ role: 'user', content: text })
      text = ''
      parts = []
    }
    m.content.forEach((/** @type {any} */ block, j) => {
      const at = `${where}.content[${j}]`
      const type = block?.type
      if (type === 'tool_use' && m.role === 'assistant') {
        blockKeys(block, ['type', 'id', 'name', 'input'], at)
        if (typeof block.id !== 'string' || block.id === '') throw invalid(`${at}.id: expected a string`)
        if (typeof block.name !== 'string') throw invalid(`${at}.name: expected a string, got ${show(block.name)}`)
        const input = block.input
        if (input === null || typeof input !== 'object' || Array.isArray(input)) {
          throw invalid(`${at}.input: expected an object, got ${show(input)}`)
        }
        callIds.add(block.id)
        calls.push({ id: block.id, type: 'function', function: { name: block.name, arguments: JSON.stringify(input) } })
      } else if (type === 'tool_result' && m.role === 'user') {
        blockKeys(block, ['type', 'tool_use_id', 'content', 'is_error'], at)
        if (typeof block.tool_use_id !== 'string' || !callIds.has(block.tool_use_id)) {
          throw invalid(
            `${at}.tool_use_id: expected the id of a tool_use block of an earlier turn, got ${show(block.tool_use_id)}`,
          )
        }
        if (block.is_error != null && typeof block.is_error !== 'boolean') {
          throw invalid(`${at}.is_error: expected a boolean, got ${show(block.is_error)}`)
        }
        const result = block.content == null ? '' : readText(block.content, `${at}.content`)
        flush()
        const content = block.is_error ? `Error: ${result}` : result
        out.push({ role: 'tool', tool_call_id: block.tool_use_id, content })
      } else if (type === 'text') {
        text += textOf(block, at)
      } else if (type === 'image' && m.role === 'user') {
        if (text !== '') parts.push({ type: 'text', text })
        text = ''
        parts.push(imagePart(block, at))
      } else {
        const types = m.role === 'user' ? '"text", "image" or "tool_result"' : '"text" or "tool_use"'
        throw invalid(`${at}.type: expected ${types} in a ${m.role} turn${textOnly(type)}, got ${show(type)}`)
      }
    })
    if (m.role === 'assistant') {
      out.push(
        calls.length ? { role: 'assistant', content: text, tool_calls: calls } : { role: 'assistant', content: text },
      )
    } else flush()
  })
  if (messages.at(-1)?.role === 'assistant') {
    throw invalid("messages: the last turn is the assistant's; continuing it (a prefill) is not supported here")
  }
  return out
}

/**
 * Anthropic's tools (`{name, description, input_schema}`) as chat completions' function tools.
 * @param {unknown} tools
 */
function readTools(tools) {
  if (tools === undefined) return undefined
  if (!Array.isArray(tools)) throw invalid(`tools: expected an array of tools, got ${show(tools)}`)
  return tools.map((t, i) => {
    if (t === null || typeof t !== 'object' || (t.type != null && t.type !== 'custom')) {
      throw invalid(
        `tools[${i}]: only custom tools {name, description, input_schema} are served here, got type ${show(t?.type)}`,
      )
    }
    blockKeys(t, ['type', 'name', 'description', 'input_schema'], `tools[${i}]`)
    /** @type {Record<string, any>} */
    const fn = { name: t.name }
    if (t.description != null) fn.description = t.description
    if (t.input_schema != null) fn.parameters = t.input_schema
    return { type: 'function', function: fn }
  })
}

/**
 * `tool_choice` as chat completions' `tool_choice` and `parallel_tool_calls`.
 * @param {unknown} choice
 */
function readToolChoice(choice) {
  if (choice === undefined) return {}
  const c = /** @type {any} */ (choice)
  const expected = "expected {type: 'auto' | 'any' | 'none'} or {type: 'tool', name}"
  if (c === null || typeof c !== 'object' || Array.isArray(c))
    throw invalid(`tool_choice: ${expected}, got ${show(choice)}`)
  const extra = Object.keys(c).find((k) => !['type', 'name', 'disable_parallel_tool_use'].includes(k) && c[k] !== null)
  if (extra || (c.type === 'tool') !== (typeof c.name === 'string')) {
    throw invalid(`tool_choice: ${expected}, got ${show(choice)}`)
  }
  const disable = c.disable_parallel_tool_use
  if (disable != null && typeof disable !== 'boolean') {
    throw invalid(`tool_choice.disable_parallel_tool_use: expected a boolean, got ${show(disable)}`)
  }
  /** @type {Record<string, any>} */
  const choices = { auto: 'auto', any: 'required', none: 'none' }
  const toolChoice = c.type === 'tool' ? { type: 'function', function: { name: c.name } } : choices[c.type]
  if (toolChoice === undefined) throw invalid(`tool_choice.type: ${expected}, got ${show(c.type)}`)
  return { tool_choice: toolChoice, parallel_tool_calls: disable === true && c.type !== 'none' ? false : undefined }
}

/**
 * The body's own fields, checked (chat.js checks the rest as it reads them).
 * @param {Record<string, any>} b
 */
function readFields(b) {
  if (b.max_tokens === undefined) throw invalid('max_tokens: required (the most tokens to generate)')
  const k = b.top_k
  if (k !== undefined && !(Number.isInteger(k) && k >= 0))
    throw invalid(`top_k: expected an integer ≥ 0, got ${show(k)}`)
  const stops = b.stop_sequences
  if (
    stops !== undefined &&
    (!Array.isArray(stops) || stops.length > MAX_STOP_SEQUENCES || stops.some((s) => typeof s !== 'string' || s === ''))
  ) {
    throw invalid(`stop_sequences: expected at most ${MAX_STOP_SEQUENCES} non-empty strings, got ${show(stops)}`)
  }
  const m = b.metadata
  if (m !== undefined) {
    const ok =
      m !== null && typeof m === 'object' && !Array.isArray(m) && Object.keys(m).every((key) => key === 'user_id')
    if (!ok || (m.user_id != null && typeof m.user_id !== 'string')) {
      throw invalid(`metadata: expected {user_id?: string}, got ${show(m)}`)
    }
  }
}

/**
 * The text of a generation cut at the first of `stops` (never emitted, as Anthropic does): the
 * longest tail that could begin one is held back until the next piece. `matched` names the one met.
 * @param {AsyncGenerator<{ text: string; tokens: number[] }, any>} inner
 * @param {string[]} stops
 * @param {AbortController} cut aborts the inner generation once a stop is met
 * @param {{ matched: string | null }} seen
 */
async function* stopAt(inner, stops, cut, seen) {
  try {
    return yield* cutAt(inner, stops, cut, seen)
  } finally {
    // Left early (the client went): the generation ends and frees its cache now.
    await inner.return?.(undefined)
  }
}

/**
 * stopAt's loop.
 * @param {AsyncGenerator<{ text: string; tokens: number[] }, any>} inner
 * @param {string[]} stops
 * @param {AbortController} cut
 * @param {{ matched: string | null }} seen
 */
async function* cutAt(inner, stops, cut, seen) {
  let held = ''
  /** @type {number[]} */
  let tokens = []
  let r = await inner.next()
  for (; !r.done; r = await inner.next()) {
    if (seen.matched !== null) continue // the abort ends it within a step
    held += r.value.text
    tokens = [...tokens, ...r.value.tokens]
    let at = -1
    for (const s of stops) {
      const i = held.indexOf(s)
      if (i !== -1 && (at === -1 || i < at)) [at, seen.matched] = [i, s]
    }
    if (at !== -1) {
      if (at > 0) yield { text: held.slice(0, at), tokens }
      cut.abort()
      continue
    }
    let keep = 0
    for (const s of stops) {
      for (let n = Math.min(s.length - 1, held.length); n > keep; n--) {
        if (held.endsWith(s.slice(0, n))) {
          keep = n
          break
        }
      }
    }
    if (held.length > keep) {
      yield { text: held.slice(0, held.length - keep), tokens }
      held = held.slice(held.length - keep)
      tokens = []
    }
  }
  if (seen.matched !== null) return { ...r.value, finishReason: 'stop' }
  if (held !== '' && r.value.finishReason !== 'aborted') yield { text: held, tokens }
  return r.value
}

/**
 * The context chat.js runs in: the same one (`Object.create`, so `closing` stays live), whose
 * model generates with `top_k` and the stop sequences, and says which stop sequence it met.
 * @param {Context} ctx
 * @param {{ topK?: number; stops: string[] }} extra
 * @param {{ matched: string | null; promptTokens: number }} seen
 * @returns {Context}
 */
function runContext(ctx, { topK, stops }, seen) {
  const run = Object.create(ctx)
  run.model = (/** @type {unknown} */ name, /** @type {'chat'} */ kind) => {
    const model = /** @type {ChatModel} */ (ctx.model(name, kind))
    return {
      ...model,
      /** @type {ChatModel['prompt']} */
      async prompt(messages, tools, plain) {
        const input = await model.prompt(messages, tools, plain)
        // Token ids (a chat with tools): message_start can say the prompt's length.
        if (Array.isArray(input) && typeof input[0] === 'number') seen.promptTokens = input.length
        return input
      },
      /** @type {ChatModel['generate']} */
      generate(input, options = {}) {
        const opts = topK === undefined ? options : { ...options, topK }
        if (stops.length === 0) return model.generate(input, opts)
        const cut = new AbortController()
        const signal = opts.signal ? AbortSignal.any([opts.signal, cut.signal]) : cut.signal
        return /** @type {any} */ (
          stopAt(/** @type {any} */ (model.generate(input, { ...opts, signal })), stops, cut, seen)
        )
      },
    }
  }
  return run
}

/**
 * A chat.completion's message as Anthropic's content blocks.
 * @param {{ content: string | null; tool_calls?: any[] }} message
 */
function blocksOf(message) {
  /** @type {Block[]} */
  const blocks = message.content ? [{ type: 'text', text: message.content }] : []
  for (const c of message.tool_calls ?? []) {
    blocks.push({ type: 'tool_use', id: c.id, name: c.function.name, input: JSON.parse(c.function.arguments) })
  }
  return blocks
}

/**
 * What the Relay hands over, mapped: a chat.completion to a message; chunks to Anthropic's events.
 * @param {import('node:http').ServerResponse} res
 * @param {Record<string, any>} head the message before its content
 * @param {{ matched: string | null; promptTokens: number }} seen
 */
function mapping(res, head, seen) {
  /** @param {string} type @param {Record<string, any>} fields */
  const emit = (type, fields) => res.write(eventText({ type, ...fields }, type))
  const stopOf = (/** @type {string} */ reason) => ({
    stop_reason:
      seen.matched !== null
        ? 'stop_sequence'
        : (STOP_REASONS[/** @type {keyof typeof STOP_REASONS} */ (reason)] ?? 'end_turn'),
    stop_sequence: seen.matched,
  })
  let index = -1
  /** @type {'text' | 'tool_use' | null} */
  let open = null
  let finishReason = 'stop'
  /** @type {any} */
  let usage = null
  const close = () => {
    if (open !== null) emit('content_block_stop', { index })
    open = null
  }
  /** @param {Block} block */
  const start = (block) => {
    close()
    index++
    open = /** @type {any} */ (block.type)
    emit('content_block_start', { index, content_block: block })
  }
  return {
    onStart() {
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' })
      res.flushHeaders()
      emit('message_start', { message: { ...head, usage: { input_tokens: seen.promptTokens, output_tokens: 0 } } })
      emit('ping', {})
    },
    /** @param {any} completion */
    onJson(completion) {
      const { message, finish_reason: reason } = completion.choices[0]
      const { prompt_tokens: input, completion_tokens: output } = completion.usage
      const body = {
        ...head,
        content: blocksOf(message),
        ...stopOf(reason),
        usage: { input_tokens: input, output_tokens: output },
      }
      sendJson(res, 200, body)
    },
    /** @param {any} chunk */
    onEvent(chunk) {
      if (chunk === null) return
      if (chunk.error) {
        close()
        const type = chunk.error.code === 'Unavailable' ? 'overloaded_error' : 'api_error'
        return emit('error', { error: { type, message: chunk.error.message } })
      }
      if (chunk.usage) usage = chunk.usage
      const choice = chunk.choices?.[0]
      if (!choice) return
      const { content, tool_calls: calls } = choice.delta
      if (content) {
        if (open !== 'text') start({ type: 'text', text: '' })
        emit('content_block_delta', { index, delta: { type: 'text_delta', text: content } })
      }
      for (const c of calls ?? []) {
        if (c.id) start({ type: 'tool_use', id: c.id, name: c.function.name, input: {} })
        const partial = c.function?.arguments
        if (partial) emit('content_block_delta', { index, delta: { type: 'input_json_delta', partial_json: partial } })
      }
      if (choice.finish_reason) finishReason = choice.finish_reason
    },
    onEnd() {
      // Ended without its usage: aborted (the client left, or the shutdown's error event went out).
      if (usage === null) return void res.end()
      close()
      const counts = { input_tokens: usage.prompt_tokens, output_tokens: usage.completion_tokens }
      emit('message_delta', { delta: stopOf(finishReason), usage: counts })
      emit('message_stop', {})
      res.end()
    },
  }
}

/**
 * The chat completions request a Messages request makes.
 * @param {Record<string, any>} b the body, its null values dropped
 */
function chatRequest(b) {
  const request = {
    model: b.model,
    messages: readConversation(b.system, b.messages),
    max_tokens: b.max_tokens,
    temperature: b.temperature,
    top_p: b.top_p,
    tools: readTools(b.tools),
    ...readToolChoice(b.tool_choice),
    user: b.metadata?.user_id ?? undefined,
    stream: b.stream,
    stream_options: b.stream ? { include_usage: true } : undefined,
  }
  return Object.fromEntries(Object.entries(request).filter(([, v]) => v !== undefined))
}

/** @param {unknown} e */
function renamed(e) {
  const error = /** @type {any} */ (e)
  if (typeof error?.message === 'string') {
    error.message = RENAMES.reduce((m, [from, to]) => m.replace(from, to), error.message)
  }
  return e
}

/**
 * What POST /v1/messages refuses of a body before its model is needed (app.js runs it ahead of a
 * model's load): the fields, and the chat as /v1/chat/completions checks one, in Anthropic's words.
 * @param {unknown} body
 * @param {Required<import('./requests').ServeLimits>} limits
 */
function check(body, limits) {
  try {
    const b = readKeys(body, REQUEST_KEYS)
    readFields(b)
    chat.checkChat(chatRequest(b), limits)
  } catch (e) {
    throw renamed(e)
  }
}

/**
 * What POST /v1/messages/count_tokens refuses of a body before its model is needed.
 * @param {unknown} body
 * @param {Required<import('./requests').ServeLimits>} limits
 */
function checkCount(body, limits) {
  const b = readKeys(body, COUNT_KEYS)
  const messages = readConversation(b.system, b.messages)
  const { tool_choice: choice } = readToolChoice(b.tool_choice)
  const tools = choice === 'none' ? undefined : readTools(b.tools)
  R.readMessages(messages, limits)
  R.readTools({ tools, tool_choice: choice }, limits)
}

/**
 * POST /v1/messages
 * @param {Context} ctx
 * @param {unknown} body
 * @param {import('node:http').ServerResponse} res
 * @param {number} startedAt
 */
async function create(ctx, body, res, startedAt) {
  const b = readKeys(body, REQUEST_KEYS)
  readFields(b)
  const request = chatRequest(b)
  const model = ctx.model(b.model, 'chat')
  /** @type {{ matched: string | null; promptTokens: number }} */
  const seen = { matched: null, promptTokens: 0 }
  const head = {
    id: newId('msg'),
    type: 'message',
    role: 'assistant',
    content: /** @type {Block[]} */ ([]),
    model: model.name,
    stop_reason: null,
    stop_sequence: null,
    usage: { input_tokens: 0, output_tokens: 0 },
  }
  const run = runContext(ctx, { topK: b.top_k || undefined, stops: b.stop_sequences ?? [] }, seen)
  const relay = new Relay(res, mapping(res, head, seen))
  try {
    await chat.chatCompletions(run, request, /** @type {any} */ (relay), startedAt)
  } catch (e) {
    throw renamed(e)
  }
}

/**
 * POST /v1/messages/count_tokens: the prompt's tokens as the model's chat template renders it
 * (with the tools where the template renders tools).
 * @param {Context} ctx
 * @param {unknown} body
 * @param {import('node:http').ServerResponse} res
 */
async function countTokens(ctx, body, res) {
  const b = readKeys(body, COUNT_KEYS)
  const model = /** @type {ChatModel} */ (ctx.model(b.model, 'chat'))
  const messages = readConversation(b.system, b.messages)
  const { tool_choice: choice } = readToolChoice(b.tool_choice)
  const tools = choice === 'none' ? undefined : readTools(b.tools)
  // chat.js's readers check the chat as the route would (tool ids, tool names and schemas).
  const { messages: chatMessages } = R.readMessages(messages, ctx.limits)
  const { tools: chatTools } = R.readTools({ tools, tool_choice: choice }, ctx.limits)
  let ids
  try {
    ids = await model.tokenize(chatMessages, model.toolFormat ? chatTools : null)
  } catch (e) {
    throw renamed(e)
  }
  sendJson(res, 200, { input_tokens: ids.length })
}

const ERROR_TYPES = {
  400: 'invalid_request_error',
  401: 'authentication_error',
  403: 'permission_error',
  404: 'not_found_error',
  413: 'request_too_large',
  429: 'rate_limit_error',
  503: 'overloaded_error',
}

/**
 * Answers an error in Anthropic's shape (`{type: 'error', error: {type, message}}`); a response
 * whose headers went out (a stream) just ends.
 * @param {import('node:http').ServerResponse} res
 * @param {any} e
 */
function sendError(res, e) {
  if (res.headersSent) return void res.end()
  const status = statusOf(e)
  const headers = { ...(e instanceof HttpError ? e.headers : {}) }
  if (status === 503) headers['retry-after'] ??= '1'
  const type =
    ERROR_TYPES[/** @type {keyof typeof ERROR_TYPES} */ (status)] ??
    (status >= 500 ? 'api_error' : 'invalid_request_error')
  const message = String(e?.message ?? e).split('\n')[0]
  sendJson(res, status, { type: 'error', error: { type, message } }, headers)
}

module.exports = { create, check, countTokens, checkCount, sendError }

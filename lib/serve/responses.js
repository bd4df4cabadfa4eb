// @ts-check
'use strict'
// POST /v1/responses: OpenAI's Responses API (what the AI SDK's default `createOpenAI()(model)`
// and the `openai` client's `responses.create`/`responses.stream` call) over the chat route. The
// request's input items become a chat completions request that lib/serve/chat.js runs as it runs
// its own (templates, tools, grammars, aborts, metrics); its chat.completion, or its chunks as they
// come, are mapped back to a response object or to Responses' named stream events. Responses are
// kept in memory (bounded in count and age) for `previous_response_id`, `item_reference` and
// GET /v1/responses/{id}.
const { randomUUID } = require('node:crypto')
const { HttpError, invalid, show, sendJson, eventText, readKeys } = require('./http')
const chat = require('./chat')
const { Relay } = require('./adapter')

/**
 * @typedef {import('./app').Context} Context
 * @typedef {Record<string, any>} Item an input or output item of the Responses API
 * @typedef {Record<string, any>} Message a chat completions message
 */

const REQUEST_KEYS = [
  'model',
  'input',
  'instructions',
  'max_output_tokens',
  'temperature',
  'top_p',
  'tools',
  'tool_choice',
  'parallel_tool_calls',
  'text',
  'stream',
  'previous_response_id',
  'store',
  'metadata',
  'user',
  'truncation',
  'include',
  'background',
  'service_tier',
]
/** @type {Array<[RegExp, string]>} */
const RENAMES = [
  [/^'max_tokens'/, "'max_output_tokens'"],
  [/^max_tokens:/, 'max_output_tokens:'],
  [/^(tools\[\d+\])\.function\./, '$1.'],
  [/^tool_choice\.function\.name/, 'tool_choice.name'],
  [/^response_format/, 'text.format'],
]
const ITEM_TYPES = 'message, function_call, function_call_output, item_reference'
const MESSAGE_ROLES = ['user', 'system', 'developer', 'assistant']

const hex = (/** @type {number} */ n) => randomUUID().replace(/-/g, '').slice(0, n)
const newId = (/** @type {string} */ prefix) => `${prefix}_${hex(32)}`

/**
 * The responses kept for `previous_response_id`: at most `maxEntries` holding at most `maxBytes`
 * of text they brought (a conversation shares its earlier messages with the response it
 * continues), each for `ttlMs` after it was made; the oldest goes first. Items are found by id
 * too (the AI SDK sends an earlier answer back as `{type: 'item_reference', id}`).
 */
class ResponseStore {
  /** @type {Map<string, { response: Item; conversation: Message[]; input: Item[]; items: Item[]; bytes: number; at: number }>} */
  #entries = new Map()
  /** @type {Map<string, { item: Item; response: string }>} */
  #items = new Map()
  #bytes = 0

  /** @param {{ maxEntries?: number; maxBytes?: number; ttlMs?: number; now?: () => number }} [options] */
  constructor({ maxEntries = 1000, maxBytes = 64 * 2 ** 20, ttlMs = 60 * 60 * 1000, now = Date.now } = {}) {
    this.maxEntries = maxEntries
    this.maxBytes = maxBytes
    this.ttlMs = ttlMs
    this.now = now
  }

  get size() {
    this.#prune()
    return this.#entries.size
  }

  /**
   * @param {Item} response
   * @param {Message[]} conversation the chat, instructions left out, answer included
   * @param {Item[]} input its input items
   * @param {number} bytes what it brings: its input and its answer, as JSON (one bigger than
   *   `maxBytes` is not kept)
   */
  put(response, conversation, input, bytes) {
    this.#prune()
    if (bytes > this.maxBytes) return
    while (this.#entries.size >= this.maxEntries || this.#bytes + bytes > this.maxBytes) {
      this.delete(/** @type {string} */ (this.#entries.keys().next().value))
    }
    const items = [...input, ...response.output]
    this.#entries.set(response.id, { response, conversation, input, items, bytes, at: this.now() })
    this.#bytes += bytes
    for (const item of items) this.#items.set(item.id, { item, response: response.id })
  }

  /** @param {string} id */
  get(id) {
    this.#prune()
    return this.#entries.get(id)
  }

  /** @param {string} id */
  item(id) {
    this.#prune()
    return this.#items.get(id)?.item
  }

  /** @param {string} id */
  delete(id) {
    const entry = this.#entries.get(id)
    if (!entry) return false
    this.#entries.delete(id)
    this.#bytes -= entry.bytes
    for (const item of entry.items) if (this.#items.get(item.id)?.response === id) this.#items.delete(item.id)
    return true
  }

  #prune() {
    const oldest = this.now() - this.ttlMs
    for (const [id, entry] of this.#entries) {
      if (entry.at > oldest) break
      this.delete(id)
    }
  }
}

/**
 * Text content parts, joined: a string, or parts of the given types (`input_text`,
 * `output_text`, `refusal`); images and files are refused (a user message's images go through
 * `chatParts`).
 * @param {unknown} content
 * @param {string[]} types
 * @param {string} where
 */
function readText(content, types, where) {
  if (typeof content === 'string') return content
  if (!Array.isArray(content)) throw invalid(`${where}: expected a string or an array of content parts`)
  return content
    .map((part, j) => {
      const type = part?.type
      if (!types.includes(type)) {
        throw invalid(`${where}[${j}].type: expected ${types.join(' or ')} (text only here), got ${show(type)}`)
      }
      const text = type === 'refusal' ? part.refusal : part.text
      if (typeof text !== 'string') throw invalid(`${where}[${j}]: expected its text as a string`)
      return text
    })
    .join('')
}

const isInputImage = (/** @type {any} */ p) => p !== null && typeof p === 'object' && p.type === 'input_image'

/**
 * A user message's `input_text` and `input_image` parts as chat completions' `text` and
 * `image_url` parts, checked by chat.js's `imageSource` as /v1/chat/completions' own (data: or
 * http(s) URLs; `detail` "auto" or none). An image by `file_id` is refused: this server keeps no files.
 * @param {any[]} content
 * @param {string} where
 * @param {import('./media').FetchPolicy} [policy] where http(s) images are fetched from (undefined: not
 *   checked here)
 */
function chatParts(content, where, policy) {
  return content.map((part, j) => {
    if (isInputImage(part)) {
      if (typeof part.image_url !== 'string') {
        throw invalid(
          `${where}[${j}].image_url: expected a data:image/...;base64 or http(s) URL (file_id is not served), got ${show(part.image_url)}`,
        )
      }
      const imageUrl = { url: part.image_url, detail: part.detail }
      chat.imageSource(imageUrl, `${where}[${j}]`, policy) // checked here, to name the input's part
      return { type: 'image_url', image_url: imageUrl }
    }
    if (part?.type !== 'input_text') {
      throw invalid(`${where}[${j}].type: expected input_text or input_image, got ${show(part?.type)}`)
    }
    if (typeof part.text !== 'string') throw invalid(`${where}[${j}]: expected its text as a string`)
    return { type: 'text', text: part.text }
  })
}

/**
 * The Responses input as chat messages (`arguments` kept a JSON string, as chat completions take
 * them), and as items, each with an id (given, or made as OpenAI makes them), in the shape OpenAI
 * lists them (`GET /v1/responses/ID/input_items`; kept for `item_reference`).
 * @param {unknown} input
 * @param {ResponseStore} store
 * @param {Set<string>} callIds the calls of the conversation so far (an output must answer one)
 * @param {import('./media').FetchPolicy} [policy] where http(s) images are fetched from (undefined: the
 *   chat route decides)
 */
function readInput(input, store, callIds, policy) {
  /** @type {Message[]} */
  const messages = []
  /** @type {Item[]} */
  const items = []
  if (typeof input === 'string') {
    messages.push({ role: 'user', content: input })
    const content = [{ type: 'input_text', text: input }]
    items.push({ id: newId('msg'), type: 'message', role: 'user', status: 'completed', content })
    return { messages, items }
  }
  if (!Array.isArray(input)) throw invalid(`input: expected a string or an array of items, got ${show(input)}`)
  /** @param {unknown} given @param {string} where */
  const read = (given, where) => {
    if (given === null || typeof given !== 'object' || Array.isArray(given)) {
      throw invalid(`${where}: expected an item ({role, content} or {type: ...}), got ${show(given)}`)
    }
    const item = /** @type {Item} */ (given)
    const type = item.type ?? (item.role !== undefined ? 'message' : undefined)
    if (type === 'item_reference') {
      const found = typeof item.id === 'string' ? store.item(item.id) : undefined
      if (!found) throw new HttpError(404, 'NotFound', `${where}.id: no stored item ${show(item.id)}`)
      return read(found, `${where} (${item.id})`)
    }
    const id = typeof item.id === 'string' && item.id !== '' ? item.id : null
    const last = messages.at(-1)
    if (type === 'message') {
      if (!MESSAGE_ROLES.includes(item.role)) {
        throw invalid(`${where}.role: expected one of ${MESSAGE_ROLES.join(', ')}, got ${show(item.role)}`)
      }
      const types = item.role === 'assistant' ? ['output_text', 'refusal'] : ['input_text']
      const images = item.role === 'user' && Array.isArray(item.content) && item.content.some(isInputImage)
      const text = images ? '' : readText(item.content, types, `${where}.content`)
      messages.push({ role: item.role, content: images ? chatParts(item.content, `${where}.content`, policy) : text })
      const content = typeof item.content === 'string' ? [{ type: types[0], text }] : item.content
      items.push({ id: id ?? newId('msg'), type, role: item.role, status: 'completed', content })
    } else if (type === 'function_call') {
      for (const key of ['call_id', 'name', 'arguments']) {
        if (typeof item[key] !== 'string') throw invalid(`${where}.${key}: expected a string, got ${show(item[key])}`)
      }
      callIds.add(item.call_id)
      const call = { id: item.call_id, type: 'function', function: { name: item.name, arguments: item.arguments } }
      // Calls after an assistant turn belong to it (chat completions: one message, content and tool_calls).
      if (last?.role === 'assistant') (last.tool_calls ??= []).push(call)
      else messages.push({ role: 'assistant', content: null, tool_calls: [call] })
      const { call_id: callId, name, arguments: args } = item
      items.push({ id: id ?? newId('fc'), type, status: 'completed', call_id: callId, name, arguments: args })
    } else if (type === 'function_call_output') {
      if (typeof item.call_id !== 'string' || !callIds.has(item.call_id)) {
        throw invalid(`${where}.call_id: expected the call_id of an earlier function_call, got ${show(item.call_id)}`)
      }
      const output = readText(item.output, ['input_text'], `${where}.output`)
      messages.push({ role: 'tool', tool_call_id: item.call_id, content: output })
      items.push({ id: id ?? newId('fco'), type, status: 'completed', call_id: item.call_id, output: item.output })
    } else {
      throw invalid(`${where}.type: expected one of ${ITEM_TYPES} (this server runs text models), got ${show(type)}`)
    }
  }
  input.forEach((item, i) => read(item, `input[${i}]`))
  return { messages, items }
}

/**
 * Responses' flat function tools (`{type: 'function', name, description, parameters, strict}`)
 * as chat completions' (`{type: 'function', function: {...}}`).
 * @param {unknown} tools
 */
function readTools(tools) {
  if (tools === undefined) return undefined
  if (!Array.isArray(tools)) throw invalid(`tools: expected an array of function tools, got ${show(tools)}`)
  return tools.map((t, i) => {
    if (t?.type !== 'function') {
      throw invalid(`tools[${i}].type: only function tools are served here, got ${show(t?.type)}`)
    }
    const extra = Object.keys(t).find((k) => !['type', 'name', 'description', 'parameters', 'strict'].includes(k))
    if (extra)
      throw invalid(`tools[${i}]: unsupported key ${show(extra)} (accepted: name, description, parameters, strict)`)
    const fn = Object.fromEntries(Object.entries(t).filter(([k, v]) => k !== 'type' && v !== null))
    return { type: 'function', function: fn }
  })
}

/** @param {unknown} choice */
function readToolChoice(choice) {
  if (choice === undefined || typeof choice === 'string') return choice
  const c = /** @type {any} */ (choice)
  if (c?.type === 'function' && typeof c.name === 'string') return { type: 'function', function: { name: c.name } }
  throw invalid(`tool_choice: expected "auto", "none", "required" or {type: 'function', name}, got ${show(choice)}`)
}

/**
 * `text: {format}` as chat completions' `response_format`.
 * @param {unknown} text
 */
function readFormat(text) {
  if (text === undefined) return undefined
  const t = /** @type {any} */ (text)
  if (t === null || typeof t !== 'object' || Array.isArray(t))
    throw invalid(`text: expected {format}, got ${show(text)}`)
  const extra = Object.keys(t).find((k) => k !== 'format' && t[k] !== null)
  if (extra) throw invalid(`text: unsupported key ${show(extra)} (accepted: format)`)
  const f = t.format
  if (f === undefined || f === null || f?.type === 'text') return undefined
  if (f?.type === 'json_object') return { type: 'json_object' }
  if (f?.type === 'json_schema') {
    const { type, ...schema } = f
    return { type, json_schema: Object.fromEntries(Object.entries(schema).filter(([, v]) => v !== null)) }
  }
  throw invalid(`text.format: expected {type: 'text' | 'json_object' | 'json_schema'}, got ${show(f)}`)
}

/**
 * The body's plain fields, checked; `truncation`, `background`, `include` and `service_tier` only
 * at the values that say how this server works anyway.
 * @param {Record<string, any>} b
 */
function readFields(b) {
  /** @type {Array<[string, (v: any) => boolean, string]>} */
  const only = [
    ['truncation', (v) => v === 'disabled', '"disabled"'],
    ['background', (v) => v === false, 'false'],
    ['include', (v) => Array.isArray(v) && v.length === 0, '[]'],
    ['service_tier', (v) => v === 'auto' || v === 'default', '"auto"'],
  ]
  for (const [key, ok, value] of only) {
    if (b[key] !== undefined && !ok(b[key])) throw invalid(`${key}: only ${value} is supported, got ${show(b[key])}`)
  }
  const m = b.metadata
  if (m !== undefined) {
    const entries = m !== null && typeof m === 'object' && !Array.isArray(m) ? Object.entries(m) : null
    if (
      !entries ||
      entries.length > 16 ||
      entries.some(([k, v]) => k.length > 64 || typeof v !== 'string' || v.length > 512)
    ) {
      throw invalid('metadata: expected at most 16 string values (keys up to 64 characters, values up to 512)')
    }
  }
  for (const key of ['store', 'stream', 'parallel_tool_calls']) {
    if (b[key] !== undefined && typeof b[key] !== 'boolean')
      throw invalid(`${key}: expected a boolean, got ${show(b[key])}`)
  }
  if (b.instructions !== undefined && typeof b.instructions !== 'string') {
    throw invalid(`instructions: expected a string, got ${show(b.instructions)}`)
  }
  const max = b.max_output_tokens
  if (max !== undefined && !(Number.isInteger(max) && max >= 1)) {
    throw invalid(`max_output_tokens: expected an integer ≥ 1, got ${show(max)}`)
  }
}

/**
 * The output items of an answer, built as its text and calls come (streamed: each step an event).
 */
class Output {
  /** @param {(type: string, fields: Record<string, any>) => void} emit */
  constructor(emit) {
    this.emit = emit
    /** @type {Item[]} */
    this.items = []
    /** @type {Item | null} */
    this.open = null
  }

  /** @param {string} delta */
  text(delta) {
    if (this.open?.type !== 'message') {
      this.close('completed')
      /** @type {Item} */
      const item = { id: newId('msg'), type: 'message', status: 'in_progress', role: 'assistant', content: [] }
      this.#add(item)
      const part = { type: 'output_text', text: '', annotations: [], logprobs: [] }
      item.content.push(part)
      this.emit('response.content_part.added', { ...this.#at(), content_index: 0, part: { ...part } })
    }
    const open = /** @type {Item} */ (this.open)
    open.content[0].text += delta
    if (delta) this.emit('response.output_text.delta', { ...this.#at(), content_index: 0, delta, logprobs: [] })
  }

  /** @param {string} callId @param {string} name */
  call(callId, name) {
    this.close('completed')
    this.#add({ id: newId('fc'), type: 'function_call', status: 'in_progress', call_id: callId, name, arguments: '' })
  }

  /** @param {string} delta */
  args(delta) {
    const open = /** @type {Item} */ (this.open)
    open.arguments += delta
    this.emit('response.function_call_arguments.delta', { ...this.#at(), delta })
  }

  /** Ends the item being written. @param {'completed' | 'incomplete'} status */
  close(status) {
    const item = this.open
    if (!item) return
    const at = this.#at()
    if (item.type === 'message') {
      const part = item.content[0]
      this.emit('response.output_text.done', { ...at, content_index: 0, text: part.text, logprobs: [] })
      this.emit('response.content_part.done', { ...at, content_index: 0, part: { ...part } })
    } else {
      this.emit('response.function_call_arguments.done', { ...at, name: item.name, arguments: item.arguments })
    }
    item.status = status
    this.open = null
    this.emit('response.output_item.done', { output_index: at.output_index, item: structuredClone(item) })
  }

  /** @param {Item} item */
  #add(item) {
    this.items.push(item)
    this.open = item
    const added = item.type === 'message' ? { ...item, content: [] } : { ...item }
    this.emit('response.output_item.added', { output_index: this.items.length - 1, item: added })
  }

  #at() {
    return { item_id: /** @type {Item} */ (this.open).id, output_index: this.items.length - 1 }
  }
}

/**
 * The answer's items as the chat message that continues the conversation.
 * @param {Item[]} items
 */
function answerMessage(items) {
  const text = items
    .filter((i) => i.type === 'message')
    .map((i) => i.content[0].text)
    .join('')
  const calls = items
    .filter((i) => i.type === 'function_call')
    .map((i) => ({ id: i.call_id, type: 'function', function: { name: i.name, arguments: i.arguments } }))
  return calls.length ? { role: 'assistant', content: text, tool_calls: calls } : { role: 'assistant', content: text }
}

/**
 * The chat completions request a Responses request makes.
 * @param {Record<string, any>} b the body, its null values dropped
 * @param {Message[]} conversation
 */
function chatRequest(b, conversation) {
  const instructions = b.instructions === undefined ? [] : [{ role: 'system', content: b.instructions }]
  const request = {
    model: b.model,
    messages: [...instructions, ...conversation],
    max_tokens: b.max_output_tokens,
    temperature: b.temperature,
    top_p: b.top_p,
    tools: readTools(b.tools),
    tool_choice: readToolChoice(b.tool_choice),
    parallel_tool_calls: b.parallel_tool_calls,
    response_format: readFormat(b.text),
    user: b.user,
    stream: b.stream,
    stream_options: b.stream ? { include_usage: true } : undefined,
  }
  return Object.fromEntries(Object.entries(request).filter(([, v]) => v !== undefined))
}

/**
 * The response object before its output: what the request asked, as OpenAI echoes it.
 * @param {Record<string, any>} b
 * @param {string} model
 */
const responseHead = (b, model) => ({
  id: newId('resp'),
  object: 'response',
  created_at: Math.floor(Date.now() / 1000),
  status: 'in_progress',
  background: false,
  error: null,
  incomplete_details: null,
  instructions: b.instructions ?? null,
  max_output_tokens: b.max_output_tokens ?? null,
  max_tool_calls: null,
  model,
  output: /** @type {Item[]} */ ([]),
  parallel_tool_calls: b.parallel_tool_calls ?? true,
  previous_response_id: b.previous_response_id ?? null,
  reasoning: { effort: null, summary: null },
  service_tier: 'default',
  store: b.store !== false,
  temperature: b.temperature ?? null,
  text: { format: b.text?.format ?? { type: 'text' } },
  tool_choice: b.tool_choice ?? 'auto',
  tools: b.tools ?? [],
  top_p: b.top_p ?? null,
  truncation: 'disabled',
  usage: /** @type {any} */ (null),
  user: b.user ?? null,
  metadata: b.metadata ?? {},
})

/**
 * What the Relay hands over, mapped: a chat.completion to a response object; chunks to
 * Responses' events as they come, each with its sequence number.
 * @param {import('node:http').ServerResponse} res
 * @param {ReturnType<typeof responseHead>} head
 * @param {(output: Item[], finishReason: string, usage: any) => Item} finished the response, kept
 */
function mapping(res, head, finished) {
  let sequence = 0
  /** @param {string} type @param {Record<string, any>} fields */
  const emit = (type, fields) => {
    res.write(eventText({ type, sequence_number: sequence++, ...fields }, type))
  }
  const output = new Output(emit)
  let finishReason = 'stop'
  let usage = null
  return {
    onStart() {
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' })
      res.flushHeaders()
      emit('response.created', { response: head })
      emit('response.in_progress', { response: head })
    },
    /** @param {any} completion */
    onJson(completion) {
      const { message, finish_reason: reason } = completion.choices[0]
      const whole = new Output(() => {})
      if (message.content || !message.tool_calls) whole.text(message.content ?? '')
      for (const c of message.tool_calls ?? []) {
        whole.call(c.id, c.function.name)
        whole.args(c.function.arguments)
      }
      whole.close(reason === 'length' ? 'incomplete' : 'completed')
      sendJson(res, 200, finished(whole.items, reason, completion.usage))
    },
    /** @param {any} chunk */
    onEvent(chunk) {
      if (chunk === null) return
      if (chunk.error) {
        output.close('incomplete')
        const { message, code } = chunk.error
        return emit('error', { code: code ?? null, message, param: null })
      }
      if (chunk.usage) usage = chunk.usage
      const choice = chunk.choices?.[0]
      if (!choice) return
      const { content, tool_calls: calls } = choice.delta
      if (content) output.text(content)
      for (const c of calls ?? []) {
        if (c.id) output.call(c.id, c.function.name)
        if (c.function?.arguments) output.args(c.function.arguments)
      }
      if (choice.finish_reason) finishReason = choice.finish_reason
    },
    onEnd() {
      // Ended without its usage: aborted (the client left, or the shutdown's error event went out).
      if (usage === null) return void res.end()
      if (output.items.length === 0) output.text('')
      output.close(finishReason === 'length' ? 'incomplete' : 'completed')
      const response = finished(output.items, finishReason, usage)
      emit(response.status === 'incomplete' ? 'response.incomplete' : 'response.completed', { response })
      res.end()
    },
  }
}

/**
 * What POST /v1/responses refuses of a body before its model is needed (app.js runs it ahead of a
 * model's load): the fields, the tools and the format, and an input that stands alone (no
 * `previous_response_id`, no stored item) read as the route reads it, its chat checked as
 * /v1/chat/completions checks one.
 * @param {unknown} body
 * @param {Required<import('./requests').ServeLimits>} limits
 */
function check(body, limits) {
  const b = readKeys(body, REQUEST_KEYS)
  readFields(b)
  const alone =
    b.previous_response_id === undefined &&
    b.input !== undefined &&
    !(Array.isArray(b.input) && b.input.some((/** @type {any} */ item) => item?.type === 'item_reference'))
  if (!alone) {
    readTools(b.tools)
    readToolChoice(b.tool_choice)
    readFormat(b.text)
    return
  }
  const { messages } = readInput(b.input, NO_STORE, new Set())
  if (messages.length === 0) throw invalid('input: no messages')
  try {
    chat.checkChat(chatRequest(b, messages), limits)
  } catch (e) {
    throw renamed(e)
  }
}
/** The store of a check: it holds nothing (an input that names a stored item is read by the route). */
const NO_STORE = /** @type {any} */ ({ item: () => undefined })

/**
 * POST /v1/responses
 * @param {Context} ctx
 * @param {unknown} body
 * @param {import('node:http').ServerResponse} res
 * @param {number} startedAt
 */
async function create(ctx, body, res, startedAt) {
  const b = readKeys(body, REQUEST_KEYS)
  readFields(b)
  const model = ctx.model(b.model, 'chat')
  const store = ctx.responses
  const previous = b.previous_response_id === undefined ? null : store.get(b.previous_response_id)
  if (b.previous_response_id !== undefined && !previous) {
    throw new HttpError(
      404,
      'NotFound',
      `previous_response_id: no stored response ${show(b.previous_response_id)} (the last 1,000 are kept, for an hour, ` +
        'unless sent with store: false)',
    )
  }
  if (b.input === undefined && !previous) throw invalid('input: required (a string or an array of items)')
  // The conversation so far (the previous response's, its instructions left out) and this input.
  const prior = previous?.conversation ?? []
  const callIds = new Set(prior.flatMap((m) => (m.tool_calls ?? []).map((/** @type {any} */ c) => c.id)))
  const given =
    b.input === undefined ? { messages: [], items: [] } : readInput(b.input, store, callIds, ctx.fetchImages)
  const conversation = [...prior, ...given.messages]
  if (conversation.length === 0) throw invalid('input: no messages')
  const request = chatRequest(b, conversation)
  const head = responseHead(b, model.name)
  /** @type {(output: Item[], finishReason: string, usage: any) => Item} */
  const finished = (output, finishReason, usage) => {
    const incomplete = finishReason === 'length'
    const response = {
      ...head,
      status: incomplete ? 'incomplete' : 'completed',
      incomplete_details: incomplete ? { reason: 'max_output_tokens' } : null,
      output,
      usage: {
        input_tokens: usage.prompt_tokens,
        input_tokens_details: { cached_tokens: 0 },
        output_tokens: usage.completion_tokens,
        output_tokens_details: { reasoning_tokens: 0 },
        total_tokens: usage.total_tokens,
      },
    }
    if (head.store) {
      const answer = answerMessage(output)
      const bytes = JSON.stringify(given.messages).length + JSON.stringify(answer).length
      store.put(response, [...conversation, answer], given.items, bytes)
    }
    return response
  }
  const relay = new Relay(res, mapping(res, head, finished))
  try {
    await chat.chatCompletions(ctx, request, /** @type {any} */ (relay), startedAt)
  } catch (e) {
    throw renamed(e)
  }
}

/** The chat route's refusals, named as this API names the fields. @param {unknown} e */
function renamed(e) {
  const error = /** @type {any} */ (e)
  if (typeof error?.message === 'string') {
    error.message = RENAMES.reduce((m, [from, to]) => m.replace(from, to), error.message)
  }
  return e
}

/**
 * GET /v1/responses/{id} (and DELETE): a stored response; GET /v1/responses/{id}/input_items:
 * its input items, a page at a time as OpenAI lists them (`order`, `limit`, `after`).
 * @param {Context} ctx
 * @param {string} method
 * @param {string} path what follows /v1/responses/
 * @param {URLSearchParams} query
 * @param {import('node:http').ServerResponse} res
 */
function stored(ctx, method, path, query, res) {
  const [id, sub, ...rest] = path.split('/')
  const entry = ctx.responses.get(id)
  if (!entry || rest.length || (sub !== undefined && (sub !== 'input_items' || method !== 'GET'))) {
    throw new HttpError(
      404,
      'NotFound',
      `no stored response ${show(id)}${sub === undefined ? '' : ` or no route ${sub}`}`,
    )
  }
  if (sub === 'input_items') return sendJson(res, 200, inputItems(entry.input, query))
  if (method === 'DELETE') {
    ctx.responses.delete(id)
    return sendJson(res, 200, { id, object: 'response', deleted: true })
  }
  sendJson(res, 200, entry.response)
}

/**
 * One page of input items: newest first unless `order=asc`, `limit` (1 to 100, default 20) after
 * the item `after`.
 * @param {Item[]} input
 * @param {URLSearchParams} query
 */
function inputItems(input, query) {
  const order = query.get('order') ?? 'desc'
  const limit = Number(query.get('limit') ?? 20)
  if (order !== 'asc' && order !== 'desc') throw invalid(`order: expected "asc" or "desc", got ${show(order)}`)
  if (!Number.isInteger(limit) || limit < 1 || limit > 100) {
    throw invalid(`limit: expected an integer from 1 to 100, got ${show(query.get('limit'))}`)
  }
  const all = order === 'asc' ? input : [...input].reverse()
  const after = query.get('after')
  const start = after === null ? 0 : all.findIndex((i) => i.id === after) + 1
  if (start === 0 && after !== null) throw invalid(`after: no input item ${show(after)} in this response`)
  const data = all.slice(start, start + limit)
  const page = { first_id: data[0]?.id ?? null, last_id: data.at(-1)?.id ?? null }
  return { object: 'list', data, ...page, has_more: start + limit < all.length }
}

module.exports = { create, check, stored, ResponseStore, readInput }

// @ts-check
'use strict'
// What torch-node serve reads from an OpenAI chat or completions request, checked: every key it
// does not implement is refused by name (400), never accepted and ignored.
const { invalid, show } = require('./http')

/**
 * The limits on one request (`limits` of `torch.serve`).
 * @typedef {object} ServeLimits
 * @property {number} [maxBodyBytes] The largest chat or completions body (default 4 MiB; bigger: 413).
 * @property {number} [maxEmbeddingsBodyBytes] The largest embeddings body (default 16 MiB).
 * @property {number} [maxMessages] Messages of one chat (default 1024).
 * @property {number} [maxStops] Stop strings (default 4, as OpenAI).
 * @property {number} [maxTools] Tools of one request (default 128, as OpenAI).
 * @property {number} [maxItems] Texts of one embeddings request (default 2048, as OpenAI).
 * @property {number} [maxChars] Characters of one text to embed (default 32768).
 * @property {number} [maxImageBytes] The largest image fetched from an http(s) URL (default 20 MiB, as
 *   OpenAI's); with `fetchImages` only.
 * @property {number} [imageFetchTimeoutMs] How long fetching one image may take, redirects included
 *   (default 10 000); with `fetchImages` only.
 * @property {number} [maxImages] Images of one chat request (`image_url`, `input_image`, `image` parts, data:
 *   or http(s)) and http(s) images of one embeddings request (default 32).
 */
const LIMITS = Object.freeze({
  maxBodyBytes: 4 * 2 ** 20,
  maxEmbeddingsBodyBytes: 16 * 2 ** 20,
  maxMessages: 1024,
  maxStops: 4,
  maxTools: 128,
  maxItems: 2048,
  maxChars: 32768,
  maxImageBytes: 20 * 2 ** 20,
  imageFetchTimeoutMs: 10_000,
  maxImages: 32,
})

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
const CHAT_KEYS = [
  'messages',
  'logprobs',
  'top_logprobs',
  'max_completion_tokens',
  'tools',
  'tool_choice',
  'parallel_tool_calls',
  'response_format',
  ...SAMPLING_KEYS,
]
const COMPLETION_KEYS = ['prompt', ...SAMPLING_KEYS]
const TOOL_NAME = /^[a-zA-Z0-9_-]{1,64}$/
/** The most choices (`n`) of one request: each is a sequence of its own. */
const MAX_CHOICES = 8
/** The most alternatives per token (`top_logprobs`), as OpenAI. */
const MAX_TOP_LOGPROBS = 20

/** @import { GenerateOptions } from '../text/causal-lm' */

/**
 * Maps OpenAI's sampling fields to CausalLM's generation options. The options' names and types are
 * declared once, by the native bag (`GenerateBag` in src/causal_lm.rs, index.d.ts's
 * `CausalLMGenerateOptions`): `options` is typed by it here, so a name it lacks fails the type check
 * (`npm run lint:types`), and the native bag checks the values again. (Handed on as a plain record:
 * chat.js adds the tools' options to it.)
 * @param {Record<string, any>} b the body, its null values dropped
 * @param {Required<ServeLimits>} limits
 * @returns {{ options: Record<string, any>; stream: boolean; includeUsage: boolean; n: number }}
 */
function readSampling(b, limits) {
  /** @type {GenerateOptions} */
  const options = {}
  /** @param {string} key @param {number} min @param {number} max @param {boolean} [lowOpen] */
  const number = (key, min, max, lowOpen = false) => {
    const v = b[key]
    if (v === undefined) return undefined
    if (typeof v !== 'number' || !Number.isFinite(v) || v > max || (lowOpen ? v <= min : v < min)) {
      throw invalid(`${key}: expected a number in ${lowOpen ? '(' : '['}${min}, ${max}], got ${show(v)}`)
    }
    return v
  }
  for (const key of ['max_tokens', 'max_completion_tokens']) {
    // A safe integer (what the model reads exactly), so that 1e308 is a 400 before the model is needed.
    if (b[key] !== undefined && !(Number.isSafeInteger(b[key]) && b[key] >= 1)) {
      throw invalid(`${key}: expected an integer ≥ 1, got ${show(b[key])}`)
    }
  }
  if (b.max_tokens !== undefined && b.max_completion_tokens !== undefined && b.max_tokens !== b.max_completion_tokens) {
    throw invalid('max_tokens and max_completion_tokens differ: send one of them')
  }
  // OpenAI's two names of CausalLM's maxNewTokens.
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
    if (!Number.isSafeInteger(b.seed) || b.seed < 0) throw invalid(`seed: expected an integer ≥ 0, got ${show(b.seed)}`)
    options.seed = b.seed
  }
  if (b.stop !== undefined) {
    const stops = typeof b.stop === 'string' ? [b.stop] : b.stop
    const bad = (/** @type {unknown} */ s) => typeof s !== 'string' || s === ''
    if (!Array.isArray(stops) || stops.length > limits.maxStops || stops.some(bad)) {
      throw invalid(`stop: expected a non-empty string or an array of at most ${limits.maxStops}, got ${show(b.stop)}`)
    }
    if (stops.length) options.stop = stops
  }
  if (b.n !== undefined && !(Number.isInteger(b.n) && b.n >= 1 && b.n <= MAX_CHOICES)) {
    throw invalid(`n: expected an integer in [1, ${MAX_CHOICES}], got ${show(b.n)}`)
  }
  if (b.stream !== undefined && typeof b.stream !== 'boolean')
    throw invalid(`stream: expected a boolean, got ${show(b.stream)}`)
  const so = b.stream_options
  if (so !== undefined) {
    const ok =
      typeof so === 'object' &&
      !Array.isArray(so) &&
      Object.keys(so).every((k) => k === 'include_usage') &&
      (so.include_usage === undefined || typeof so.include_usage === 'boolean')
    if (!ok) throw invalid(`stream_options: expected {include_usage: boolean}, got ${show(so)}`)
    if (!b.stream) throw invalid('stream_options: only with stream: true')
  }
  if (b.user !== undefined && typeof b.user !== 'string') throw invalid('user: expected a string')
  if (b.model !== undefined && typeof b.model !== 'string')
    throw invalid(`model: expected a string, got ${show(b.model)}`)
  return { options, stream: b.stream === true, includeUsage: so?.include_usage === true, n: b.n ?? 1 }
}

/**
 * `logprobs` and `top_logprobs` (chat) as CausalLM's `logprobs`/`topLogprobs`; null when not asked.
 * @param {Record<string, any>} b the body, its null values dropped
 * @returns {{ logprobs: true; topLogprobs: number } | null}
 */
function readLogprobs(b) {
  if (b.logprobs !== undefined && typeof b.logprobs !== 'boolean') {
    throw invalid(`logprobs: expected a boolean, got ${show(b.logprobs)}`)
  }
  const top = b.top_logprobs
  if (top !== undefined && !(Number.isInteger(top) && top >= 0 && top <= MAX_TOP_LOGPROBS)) {
    throw invalid(`top_logprobs: expected an integer in [0, ${MAX_TOP_LOGPROBS}], got ${show(top)}`)
  }
  if (top !== undefined && b.logprobs !== true) throw invalid('top_logprobs: only with logprobs: true')
  return b.logprobs === true ? { logprobs: true, topLogprobs: top ?? 0 } : null
}

/**
 * Text content: a string, or text parts (this server's models read no images or audio).
 * @param {unknown} content
 * @param {string} where
 */
function readContent(content, where) {
  if (Array.isArray(content)) {
    return content
      .map((part, j) => {
        if (part?.type !== 'text' || typeof part.text !== 'string') {
          throw invalid(`${where}[${j}]: expected {type: 'text', text: string}, got ${show(part)}`)
        }
        return part.text
      })
      .join('')
  }
  if (typeof content !== 'string') throw invalid(`${where}: expected a string, got ${show(content)}`)
  return content
}

const MESSAGE_KEYS = {
  system: ['role', 'content', 'name'],
  developer: ['role', 'content', 'name'],
  user: ['role', 'content', 'name'],
  assistant: ['role', 'content', 'name', 'tool_calls', 'refusal'],
  tool: ['role', 'content', 'tool_call_id', 'name'],
}

/**
 * An assistant turn's tool calls as chat templates read them (transformers' convention:
 * `arguments` an object, where OpenAI sends a JSON string).
 * @param {unknown} calls
 * @param {string} where
 * @param {Set<string>} ids the calls' ids, for the tool messages that answer them
 */
function readToolCalls(calls, where, ids) {
  if (!Array.isArray(calls) || calls.length === 0) throw invalid(`${where}: expected a non-empty array of tool calls`)
  return calls.map((c, j) => {
    const at = `${where}[${j}]`
    const f = c?.function
    if (c === null || typeof c !== 'object' || (c.type !== undefined && c.type !== 'function') || !f) {
      throw invalid(`${at}: expected {id, type: 'function', function: {name, arguments}}, got ${show(c)}`)
    }
    if (typeof c.id !== 'string' || c.id === '') throw invalid(`${at}.id: expected a string, got ${show(c.id)}`)
    if (typeof f.name !== 'string' || !TOOL_NAME.test(f.name)) {
      throw invalid(`${at}.function.name: expected a function name, got ${show(f.name)}`)
    }
    let args
    try {
      args = typeof f.arguments === 'string' ? JSON.parse(f.arguments) : undefined
    } catch {
      args = undefined
    }
    if (args === null || typeof args !== 'object' || Array.isArray(args)) {
      throw invalid(`${at}.function.arguments: expected a JSON object in a string, got ${show(f.arguments)}`)
    }
    ids.add(c.id)
    return { id: c.id, type: 'function', function: { name: f.name, arguments: args } }
  })
}

/**
 * The chat's messages: `plain` ([{role, content}] as CausalLM renders them) when no turn carries
 * tool calls, else as the chat template reads them (tool calls, tool results with their ids).
 * @param {unknown} messages
 * @param {Required<ServeLimits>} limits
 */
function readMessages(messages, limits) {
  if (!Array.isArray(messages) || messages.length === 0) {
    throw invalid(`messages: expected a non-empty array of {role, content}, got ${show(messages)}`)
  }
  if (messages.length > limits.maxMessages) {
    throw invalid(`messages: at most ${limits.maxMessages} messages, got ${messages.length}`)
  }
  /** @type {Set<string>} */
  const callIds = new Set()
  let plain = true
  const read = messages.map((m, i) => {
    const where = `messages[${i}]`
    if (m === null || typeof m !== 'object' || Array.isArray(m)) throw invalid(`${where}: expected {role, content}`)
    const role = m.role
    const keys = Object.hasOwn(MESSAGE_KEYS, role)
      ? MESSAGE_KEYS[/** @type {keyof typeof MESSAGE_KEYS} */ (role)]
      : null
    if (!keys)
      throw invalid(`${where}.role: expected one of ${Object.keys(MESSAGE_KEYS).join(', ')}, got ${show(role)}`)
    const given = Object.keys(m).filter((k) => m[k] !== null)
    const extra = given.filter((k) => !keys.includes(k))
    if (extra.length)
      throw invalid(`${where}: unsupported key ${show(extra[0])} for role ${role} (accepted: ${keys.join(', ')})`)
    // Chat templates know system, user and assistant; OpenAI's newer 'developer' is the system role.
    const out = /** @type {Record<string, any>} */ ({ role: role === 'developer' ? 'system' : role })
    if (role === 'assistant' && m.tool_calls != null) {
      plain = false
      out.content = m.content == null ? '' : readContent(m.content, `${where}.content`)
      out.tool_calls = readToolCalls(m.tool_calls, `${where}.tool_calls`, callIds)
      return out
    }
    out.content = readContent(m.content, `${where}.content`)
    if (role === 'tool') {
      plain = false
      if (typeof m.tool_call_id !== 'string' || !callIds.has(m.tool_call_id)) {
        throw invalid(
          `${where}.tool_call_id: expected the id of a tool call of an earlier assistant message, got ${show(m.tool_call_id)}`,
        )
      }
      out.tool_call_id = m.tool_call_id
      if (typeof m.name === 'string') out.name = m.name
    }
    return out
  })
  return { messages: read, plain }
}

/**
 * `tools` and `tool_choice`: the tools to render (none for `tool_choice: 'none'`).
 * @param {Record<string, any>} b
 * @param {Required<ServeLimits>} limits
 * @returns {{ tools: Array<Record<string, any>> | null; parallel: boolean;
 *   forced: 'required' | { type: 'function'; function: { name: string } } | null }} `forced`: the
 *   choice a grammar enforces
 */
function readTools(b, limits) {
  const choice = b.tool_choice
  if (b.tools === undefined) {
    if (choice !== undefined && choice !== 'none') throw invalid(`tool_choice: ${show(choice)} needs tools`)
    if (b.parallel_tool_calls !== undefined) throw invalid('parallel_tool_calls: only with tools')
    return { tools: null, parallel: true, forced: null }
  }
  if (!Array.isArray(b.tools) || b.tools.length === 0 || b.tools.length > limits.maxTools) {
    throw invalid(`tools: expected an array of 1 to ${limits.maxTools} tools, got ${show(b.tools)}`)
  }
  const names = new Set()
  const tools = b.tools.map((t, i) => {
    const where = `tools[${i}]`
    const f = t?.function
    if (t?.type !== 'function' || f === null || typeof f !== 'object' || Array.isArray(f)) {
      throw invalid(`${where}: expected {type: 'function', function: {name, description?, parameters?}}`)
    }
    const extra = Object.keys(t).filter((k) => k !== 'type' && k !== 'function')
    const fExtra = Object.keys(f).filter((k) => !['name', 'description', 'parameters', 'strict'].includes(k))
    if (extra.length || fExtra.length) {
      throw invalid(`${where}: unsupported key ${show(extra[0] ?? `function.${fExtra[0]}`)}`)
    }
    if (typeof f.name !== 'string' || !TOOL_NAME.test(f.name)) {
      throw invalid(`${where}.function.name: expected 1 to 64 letters, digits, _ or -, got ${show(f.name)}`)
    }
    if (names.has(f.name)) throw invalid(`${where}.function.name: ${show(f.name)} is given twice`)
    names.add(f.name)
    if (f.description != null && typeof f.description !== 'string') {
      throw invalid(`${where}.function.description: expected a string`)
    }
    const p = f.parameters
    if (p != null && (typeof p !== 'object' || Array.isArray(p))) {
      throw invalid(`${where}.function.parameters: expected a JSON Schema object, got ${show(p)}`)
    }
    // As the model reads it (serde's limit): deeper is refused here, not a stack overflow later.
    if (p != null && depth(p) > MAX_DEPTH) {
      throw invalid(`${where}.function.parameters: nested more than ${MAX_DEPTH} levels deep`)
    }
    if (f.strict != null && typeof f.strict !== 'boolean') throw invalid(`${where}.function.strict: expected a boolean`)
    const fn = /** @type {Record<string, any>} */ ({ name: f.name })
    if (f.description != null) fn.description = f.description
    fn.parameters = p ?? { type: 'object', properties: {} }
    if (f.strict != null) fn.strict = f.strict
    return { type: 'function', function: fn }
  })
  if (b.parallel_tool_calls !== undefined && typeof b.parallel_tool_calls !== 'boolean') {
    throw invalid(`parallel_tool_calls: expected a boolean, got ${show(b.parallel_tool_calls)}`)
  }
  const parallel = b.parallel_tool_calls !== false
  // strict: true promises arguments valid against `parameters`: a grammar over the output gives
  // that where a call is certain (tool_choice 'required' or a named function), not under 'auto',
  // where the model may answer in words.
  const strict = tools.findIndex((t) => t.function.strict === true)
  const forced = choice === 'required' || (choice !== null && typeof choice === 'object')
  if (strict !== -1 && !forced) {
    throw invalid(
      `tools[${strict}].function.strict: true needs tool_choice "required" or a named function (with "auto" the ` +
        'model may answer in words, and its arguments are not constrained); send false, or force the call',
    )
  }
  if (choice === undefined || choice === 'auto') return { tools, parallel, forced: null }
  // 'none': the model is not shown the tools, so it cannot call them.
  if (choice === 'none') return { tools: null, parallel, forced: null }
  const named = choice?.type === 'function' && typeof choice.function?.name === 'string' ? choice.function.name : null
  if (choice !== 'required' && named === null) {
    throw invalid(
      `tool_choice: expected "auto", "none", "required" or {type: 'function', function: {name}}, got ${show(choice)}`,
    )
  }
  if (named !== null && !names.has(named)) {
    throw invalid(`tool_choice.function.name: no tool named ${show(named)} in tools (${[...names].join(', ')})`)
  }
  // Forced: a grammar over the output (CausalLM's responseFormat `tool_calls`) makes it calls.
  /** @type {'required' | { type: 'function'; function: { name: string } }} */
  const forcedChoice = named === null ? 'required' : { type: 'function', function: { name: named } }
  return { tools, parallel, forced: forcedChoice }
}

/**
 * `response_format` as CausalLM's `responseFormat` (null for free text): `{type: 'text'}`,
 * `{type: 'json_object'}`, `{type: 'json_schema', json_schema: {name, schema, strict?}}`. The
 * schema itself is checked where it compiles (InvalidArg naming the part: a 400).
 * @param {unknown} format
 * @returns {Record<string, any> | null}
 */
function readResponseFormat(format) {
  if (format === undefined || format === null) return null
  const f = /** @type {any} */ (format)
  if (typeof f !== 'object' || Array.isArray(f))
    throw invalid(`response_format: expected an object, got ${show(format)}`)
  if (f.type === 'text') return null
  // As the model reads it (serde's limit): deeper is refused here, before the model is needed.
  if (depth(f) > MAX_DEPTH) throw invalid(`response_format: nested more than ${MAX_DEPTH} levels deep`)
  if (f.type === 'json_object' || f.type === 'json_schema') return f
  throw invalid(`response_format: expected {type: 'text' | 'json_object' | 'json_schema'}, got ${show(format)}`)
}

/** The deepest JSON the model reads (serde_json's recursion limit). */
const MAX_DEPTH = 128

/**
 * How deeply `v` nests (a parsed JSON body: no cycles), counted to just past `MAX_DEPTH`.
 * @param {unknown} v
 * @param {number} [at]
 * @returns {number}
 */
function depth(v, at = 0) {
  if (v === null || typeof v !== 'object' || at > MAX_DEPTH) return at
  let most = at + 1
  for (const x of Object.values(v)) {
    most = Math.max(most, depth(x, at + 1))
    if (most > MAX_DEPTH) break
  }
  return most
}

/**
 * `prompt`: one string (or a list of one).
 * @param {unknown} prompt
 */
function readPrompt(prompt) {
  const p = Array.isArray(prompt) && prompt.length === 1 && typeof prompt[0] === 'string' ? prompt[0] : prompt
  if (typeof p !== 'string' || p === '') {
    throw invalid(`prompt: expected a non-empty string (one prompt per request), got ${show(prompt)}`)
  }
  return p
}

module.exports = {
  LIMITS,
  CHAT_KEYS,
  COMPLETION_KEYS,
  readSampling,
  readLogprobs,
  readMessages,
  readTools,
  readResponseFormat,
  readPrompt,
}

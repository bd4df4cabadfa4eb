// @ts-check
'use strict'
// Tool calls in a causal LM's output, in the formats chat templates teach their models, turned
// into OpenAI's `tool_calls` ({name, arguments: a JSON string}) — whole (`parseToolCalls`) or as
// the text streams in (`ToolCallStream`; with `partial`, a call begins once its name is known and
// its arguments stream as they are generated, as vLLM's tool parsers stream them), for torch-node
// serve (lib/serve/chat.js).
//   hermes   `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`, one block per call:
//            Qwen2.5/Qwen3, Hermes, SmolLM3; SmolLM2 writes a JSON list in one block.
//   llama3   the whole answer is `{"name": ..., "parameters": {...}}` (after `<|python_tag|>`
//            when the template asks for it), several joined by `;` (Llama 3.1-3.3).
//   mistral  `[TOOL_CALLS][{"name": ..., "arguments": {...}}, ...]` (v3 tokenizers), or
//            `[TOOL_CALLS]name[ARGS]{...}` per call (v11+: Mistral Small 3.2, Magistral).
//   generic  llama.cpp's format for chat templates without tools (SmolLM2): the tools are
//            described in the system turn (`genericMessages`) and the whole answer is one JSON
//            object, `{"tool_calls": [...]}`, `{"tool_call": {...}}` or `{"response": "..."}`.
// The formats' strings are one table with the grammar that constrains the calls
// (data/tool_formats.json): the two cannot drift.
// What does not parse stays text: a model that writes a malformed call answers in words; a call
// cut by max_tokens (`cut`) is dropped, never passed on as text.

/** @typedef {'hermes' | 'llama3' | 'mistral' | 'generic'} ToolCallFormat */
/** @typedef {{ name: string; arguments: string }} ToolCall */
/**
 * What a stream of output reads as: text; a call's start (`begin`: its name is known and its
 * arguments begin), its arguments as they come (`arguments`, fragments that join to the call's
 * `arguments`), and the call whole (`call`; `streamed`: begin and arguments went out before it).
 * `id` numbers the calls of one output. Only a stream made with `{ partial: true }` has begin and
 * arguments events.
 * @typedef {{ type: 'text'; text: string }
 *   | { type: 'call'; call: ToolCall; id?: number; streamed?: boolean }
 *   | { type: 'begin'; id: number; name: string }
 *   | { type: 'arguments'; id: number; text: string }} ToolCallEvent
 */

const HERMES_OPEN = '<tool_call>'
const HERMES_CLOSE = '</tool_call>'
const PYTHON_TAG = '<|python_tag|>'
const MISTRAL_CALLS = '[TOOL_CALLS]'
const MISTRAL_ARGS = '[ARGS]'
const MISTRAL_CALL_ID = '[CALL_ID]'

/**
 * The formats: the strings the grammar writes (`begin`, `callPrefix`, `separator`, `end`, `one`
 * and `text` wrappers) and the marker tokens.
 * @type {Record<ToolCallFormat, { begin: string; end: string; argumentsKey: string; markers: string[];
 *   one?: { begin: string; end: string }; text?: { begin: string; end: string } }>}
 */
const TABLE = require('../../data/tool_formats.json')

/**
 * Marker tokens each format writes: a tokenizer that has them as special tokens drops them when
 * decoding, so the server puts them back (lib/serve/chat.js) before parsing.
 * @type {Record<ToolCallFormat, string[]>}
 */
const MARKERS = /** @type {any} */ (Object.fromEntries(Object.entries(TABLE).map(([name, f]) => [name, f.markers])))

const GENERIC = TABLE.generic
/** The key a wrapper opens (`{"tool_calls": [` → tool_calls). @param {string} begin */
const keyOf = (begin) => String(JSON.parse(begin.slice(begin.indexOf('"'), begin.indexOf(':'))))
const GENERIC_CALLS = keyOf(GENERIC.begin)
const GENERIC_CALL = keyOf(/** @type {{ begin: string }} */ (GENERIC.one).begin)
const GENERIC_TEXT = keyOf(/** @type {{ begin: string }} */ (GENERIC.text).begin)
/** Where a generic text answer's string starts. */
const REPLY_OPEN = `${/** @type {{ begin: string }} */ (GENERIC.text).begin}"`

/**
 * The variable a chat template reads its tools from: `tools` (transformers'
 * `apply_chat_template(tools=...)`), or SmolLM3's `xml_tools` (a list of functions, without
 * OpenAI's `{type, function}` around each); null when it reads neither (it would drop them).
 * @param {string | null | undefined} template
 * @returns {'tools' | 'xml_tools' | null}
 */
function toolsVariableOf(template) {
  if (typeof template !== 'string') return null
  // The code of the template: its {% %} and {{ }} blocks without their string literals (a
  // template's text, "<tools></tools> XML tags", names no variable).
  const code = (template.match(/\{%[\s\S]*?%\}|\{\{[\s\S]*?\}\}/g) ?? [])
    .join(' ')
    .replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'/g, '""')
  if (/(?<![\w.])tools\b/.test(code)) return 'tools'
  if (/(?<![\w.])xml_tools\b/.test(code)) return 'xml_tools'
  return null
}

/**
 * The tool-call format a chat template teaches, from its text; null when it reads no tools
 * (`toolsVariableOf`). A template that reads tools in a format not listed here gets `hermes`,
 * the most common one.
 * @param {string | null | undefined} template
 * @returns {ToolCallFormat | null}
 */
function formatOf(template) {
  if (typeof template !== 'string' || toolsVariableOf(template) === null) return null
  if (template.includes(MISTRAL_CALLS)) return 'mistral'
  if (template.includes(HERMES_OPEN)) return 'hermes'
  if (template.includes(PYTHON_TAG) || /"parameters"/.test(template)) return 'llama3'
  return 'hermes'
}

/**
 * A call object as a model writes it (`{name, arguments}`, `{name, parameters}`, or OpenAI's
 * `{function: {name, arguments}}`), or null.
 * @param {unknown} v
 * @returns {ToolCall | null}
 */
function callOf(v) {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) return null
  const o = /** @type {Record<string, any>} */ (v)
  const f = o.function && typeof o.function === 'object' ? o.function : o
  if (typeof f.name !== 'string' || f.name === '') return null
  const args = f.arguments ?? f.parameters ?? {}
  if (typeof args === 'string') return isJsonObject(args) ? { name: f.name, arguments: args } : null
  if (args === null || typeof args !== 'object' || Array.isArray(args)) return null
  return { name: f.name, arguments: JSON.stringify(args) }
}

/** @param {string} s */
function isJsonObject(s) {
  const v = parseJson(s)
  return v !== undefined && v !== null && typeof v === 'object' && !Array.isArray(v)
}

/** @param {string} s @returns {unknown} undefined when `s` is not JSON */
function parseJson(s) {
  try {
    return JSON.parse(s)
  } catch {
    return undefined
  }
}

/**
 * One call or a list of them, written as JSON; null unless every item is a call.
 * @param {string} json
 * @returns {ToolCall[] | null}
 */
function callsOfJson(json) {
  const v = parseJson(json.trim())
  const items = Array.isArray(v) ? v : [v]
  const calls = items.map(callOf)
  return calls.length > 0 && calls.every((c) => c !== null) ? /** @type {ToolCall[]} */ (calls) : null
}

/**
 * llama3: one JSON object, or several joined by `;` (each must be a call).
 * @param {string} text
 */
function llamaCalls(text) {
  const body = text.trim().replace(PYTHON_TAG, '').trim()
  if (!body.startsWith('{')) return null
  const whole = callsOfJson(body)
  if (whole) return whole
  const parts = body.split(/(?<=\})\s*;\s*(?=\{)/)
  const calls = parts.map((p) => callsOfJson(p))
  return calls.every((c) => c !== null) ? /** @type {ToolCall[][]} */ (calls).flat() : null
}

/**
 * mistral: what follows the first `[TOOL_CALLS]`.
 * @param {string} rest
 */
function mistralCalls(rest) {
  const body = rest.trim()
  if (body.startsWith('[') || body.startsWith('{')) return callsOfJson(body)
  /** @type {ToolCall[]} */
  const calls = []
  for (const part of body.split(MISTRAL_CALLS)) {
    const at = part.indexOf(MISTRAL_ARGS)
    if (at === -1) return null
    const name = part.slice(0, at).split(MISTRAL_CALL_ID)[0].trim()
    const args = part.slice(at + MISTRAL_ARGS.length).trim()
    if (name === '' || !isJsonObject(args)) return null
    calls.push({ name, arguments: JSON.stringify(JSON.parse(args)) })
  }
  return calls
}

/**
 * The complete items of a JSON array cut short: `rest` is the text after its `[`; an item the cut
 * went through is left out. Null when a complete item is not JSON.
 * @param {string} rest
 * @returns {unknown[] | null}
 */
function completeItems(rest) {
  /** @type {unknown[]} */
  const items = []
  let depth = 0
  let inString = false
  let escaped = false
  let start = 0
  for (let i = 0; i < rest.length; i++) {
    const c = rest[i]
    if (inString) {
      if (escaped) escaped = false
      else if (c === '\\') escaped = true
      else if (c === '"') inString = false
    } else if (c === '"') inString = true
    else if (c === '{' || c === '[') depth++
    else if ((c === '}' || c === ']') && depth > 0) depth--
    else if (depth === 0 && (c === ',' || c === ']')) {
      const item = parseJson(rest.slice(start, i))
      if (item === undefined) return rest.slice(start, i).trim() === '' && c === ']' ? items : null
      items.push(item)
      if (c === ']') return items
      start = i + 1
    }
  }
  return items
}

/**
 * The start of a JSON string's contents, decoded as far as it is complete: `{text, rest}` with
 * `rest` what is held back (an escape cut short), or `closed` once the closing quote is read.
 * @param {string} s after the opening quote
 * @returns {{ text: string; rest: string; closed: boolean }}
 */
function stringStart(s) {
  let text = ''
  let i = 0
  while (i < s.length) {
    const c = s[i]
    if (c === '"') return { text, rest: s.slice(i + 1), closed: true }
    if (c !== '\\') {
      text += c
      i++
      continue
    }
    // An escape: whole, and a high surrogate with its low half, or held back.
    const high = /^\\u[dD][89abAB][0-9a-fA-F]{2}/.test(s.slice(i))
    const size = s[i + 1] === 'u' ? (high ? 12 : 6) : 2
    if (i + size > s.length) break
    const decoded = parseJson(`"${s.slice(i, i + size)}"`)
    if (typeof decoded !== 'string') return { text, rest: '', closed: true } // not JSON: stop
    text += decoded
    i += size
  }
  return { text, rest: s.slice(i), closed: false }
}

/**
 * generic: the whole answer, one JSON object. A text answer is `{type: 'text'}`; a call list cut
 * short keeps its complete calls; anything else that does not parse is text, or nothing if cut.
 * @param {string} body
 * @param {boolean} cut
 * @returns {ToolCallEvent[]}
 */
function genericEvents(body, cut) {
  const text = body.trim()
  const v = parseJson(text)
  if (v !== null && typeof v === 'object' && !Array.isArray(v)) {
    const o = /** @type {Record<string, unknown>} */ (v)
    const list = Array.isArray(o[GENERIC_CALLS]) ? /** @type {unknown[]} */ (o[GENERIC_CALLS]) : null
    const calls = list ?? (GENERIC_CALL in o ? [o[GENERIC_CALL]] : null)
    if (calls) {
      const read = calls.map(callOf)
      if (read.length > 0 && read.every((c) => c !== null)) {
        return /** @type {ToolCall[]} */ (read).map((call) => ({ type: 'call', call }))
      }
    } else if (GENERIC_TEXT in o) {
      const reply = o[GENERIC_TEXT]
      return [{ type: 'text', text: typeof reply === 'string' ? reply : JSON.stringify(reply) }]
    }
    return [{ type: 'text', text }]
  }
  if (!cut) return text === '' ? [] : [{ type: 'text', text }]
  // Cut by max_tokens: the complete calls, or the text answer so far.
  if (text.startsWith(GENERIC.begin)) {
    const items = completeItems(text.slice(GENERIC.begin.length)) ?? []
    const read = items.map(callOf)
    return read.every((c) => c !== null) ? /** @type {ToolCall[]} */ (read).map((call) => ({ type: 'call', call })) : []
  }
  if (text.startsWith(REPLY_OPEN)) {
    const reply = stringStart(text.slice(REPLY_OPEN.length)).text
    return reply === '' ? [] : [{ type: 'text', text: reply }]
  }
  return []
}

/**
 * The tool calls in a whole output, and the text around them (null when only whitespace is
 * left beside calls, as OpenAI's `content`). An output with no call, or one that does not parse,
 * is all text. `cut`: the output was cut by max_tokens, and a call it cut is dropped.
 * @param {string} text
 * @param {ToolCallFormat} format
 * @param {{ cut?: boolean }} [options]
 * @returns {{ content: string | null; toolCalls: ToolCall[] }}
 */
function parseToolCalls(text, format, { cut = false } = {}) {
  const stream = new ToolCallStream(format)
  const events = [...stream.push(text), ...stream.end({ cut })]
  const toolCalls = events.flatMap((e) => (e.type === 'call' ? [e.call] : []))
  const joined = events.map((e) => (e.type === 'text' ? e.text : '')).join('')
  if (toolCalls.length === 0) return { content: joined, toolCalls }
  return { content: joined.trim() === '' ? null : joined.trim(), toolCalls }
}

/**
 * JSON as the grammar writes it (`", "` and `": "` between items, as Python's `json.dumps`).
 * @param {unknown} v
 * @returns {string}
 */
function dumps(v) {
  if (Array.isArray(v)) return `[${v.map(dumps).join(', ')}]`
  if (v !== null && typeof v === 'object') {
    return `{${Object.entries(v)
      .map(([k, x]) => `${JSON.stringify(k)}: ${dumps(x)}`)
      .join(', ')}}`
  }
  return JSON.stringify(v) ?? 'null'
}

/**
 * generic: calls as the model writes them, one (`{"tool_call": ...}`) or a list.
 * @param {Array<{ name: string; arguments: unknown }>} calls
 * @param {boolean} list
 */
function genericCalls(calls, list) {
  const one = /** @type {{ begin: string; end: string }} */ (GENERIC.one)
  if (!list && calls.length === 1) return `${one.begin}${dumps(calls[0])}${one.end}`
  return `${GENERIC.begin}${calls.map(dumps).join(', ')}${GENERIC.end}`
}

/**
 * A chat for a template without tools, in the generic format (llama.cpp's, from its chat
 * layer and minja's polyfills): the answer's shape and the tools described in the system turn
 * (after the chat's own system message), the assistant's earlier calls as the JSON it writes,
 * tool results as user turns of `{"tool_response": {tool, content, tool_call_id}}`.
 * @param {Array<Record<string, any>>} messages as lib/serve/requests.js reads them
 * @param {Array<Record<string, any>> | null} tools null: only the earlier turns are rewritten
 * @param {{ parallel: boolean; text: boolean; only?: string | null }} shape `parallel`: a list of
 *   calls; `text`: the model may answer in words; `only`: the one function it must call
 * @returns {Array<{ role: string; content: string }>}
 */
function genericMessages(messages, tools, { parallel, text, only = null }) {
  /** @type {Map<string, string>} */
  const names = new Map()
  const chat = messages.map((m) => {
    if (m.role === 'assistant' && Array.isArray(m.tool_calls)) {
      const calls = m.tool_calls.map((/** @type {any} */ c) => {
        names.set(c.id, c.function.name)
        return { name: c.function.name, arguments: c.function.arguments }
      })
      return { role: 'assistant', content: genericCalls(calls, parallel) }
    }
    if (m.role === 'tool') {
      const response = { tool: names.get(m.tool_call_id) ?? m.name, content: m.content, tool_call_id: m.tool_call_id }
      return { role: 'user', content: JSON.stringify({ tool_response: response }, null, 2) }
    }
    return { role: m.role, content: m.content }
  })
  if (!tools) return chat
  const shown = only === null ? tools : tools.filter((t) => t.function.name === only)
  const call = parallel ? GENERIC_CALLS : GENERIC_CALL
  const how = text
    ? `Respond in JSON format, either with \`${call}\` (a request to call tools) or with \`${GENERIC_TEXT}\` reply to the user's request`
    : `Respond in JSON format with \`${call}\` (a request to call tools)`
  const example = genericCalls([{ name: only ?? 'tool_name', arguments: { arg1: 'some_value' } }], parallel)
  const system =
    `${how}\n\nYou can call any of the following tools to satisfy the user's requests: ` +
    `${JSON.stringify(shown, null, 2)}\n\nExample tool call syntax:\n\n${example}`
  if (chat[0]?.role === 'system')
    return [{ role: 'system', content: `${chat[0].content}\n\n${system}` }, ...chat.slice(1)]
  return [{ role: 'system', content: system }, ...chat]
}

const NUMBER = /[-+0-9.eE]+/y
// eslint-disable-next-line no-control-regex -- JSON.stringify escapes control characters
const PLAIN_RUN = /[^"\\\u0000-\u001f\ud800-\udfff]+/y
const LITERAL = /[a-z]+/y

/**
 * A JSON value's text as `JSON.stringify(JSON.parse(text))` writes it (no whitespace between
 * tokens, strings' escapes rewritten, numbers as JavaScript prints them), as far as `s` (from `i`,
 * a `{`) is complete: a number, a literal or an escape that may go on is held back, so what a
 * longer `s` gives begins with what a shorter one gave (vLLM's streaming tool parsers send such
 * diffs). `end`: the index after the value's closing brace, -1 until it comes; `bad`: `s` is not
 * JSON there. Keys stay in the order written (JSON.stringify puts integer-like keys first).
 * @param {string} s
 * @param {number} i
 * @returns {{ text: string; end: number; bad: boolean }}
 */
function compactJson(s, i) {
  let text = ''
  let depth = 0
  while (i < s.length) {
    const c = s[i]
    if (c === '"') {
      // A string: its characters re-escaped one code point at a time, held back where cut.
      let j = i + 1
      let part = '"'
      for (;;) {
        if (j >= s.length) return { text: text + part, end: -1, bad: false }
        // A run of characters JSON.stringify leaves as they are, copied at once.
        PLAIN_RUN.lastIndex = j
        if (PLAIN_RUN.test(s)) {
          part += s.slice(j, PLAIN_RUN.lastIndex)
          j = PLAIN_RUN.lastIndex
          continue
        }
        const d = s[j]
        if (d === '"') break
        if (d === '\\') {
          const high = /^\\u[dD][89abAB][0-9a-fA-F]{2}/.test(s.slice(j, j + 6))
          const size = s[j + 1] === 'u' ? (high ? 12 : 6) : 2
          if (j + size > s.length) return { text: text + part, end: -1, bad: false }
          const decoded = parseJson(`"${s.slice(j, j + size)}"`)
          if (typeof decoded !== 'string') return { text: text + part, end: -1, bad: true }
          part += JSON.stringify(decoded).slice(1, -1)
          j += size
          continue
        }
        const code = d.charCodeAt(0)
        if (code < 0x20) return { text: text + part, end: -1, bad: true }
        // A surrogate pair stays whole (JSON.stringify escapes a lone half).
        const pair = code >= 0xd800 && code <= 0xdbff
        if (pair && j + 1 >= s.length) return { text: text + part, end: -1, bad: false }
        const ch = pair ? s.slice(j, j + 2) : d
        part += JSON.stringify(ch).slice(1, -1)
        j += ch.length
      }
      text += `${part}"`
      i = j + 1
    } else if (/[-0-9tfn]/.test(c)) {
      // A number or literal: whole once a character that cannot continue it follows.
      const word = /[a-z]/.test(c) ? LITERAL : NUMBER
      word.lastIndex = i
      const token = /** @type {RegExpExecArray} */ (word.exec(s))[0]
      if (i + token.length >= s.length) return { text, end: -1, bad: false }
      const v = parseJson(token)
      if (v === undefined || (typeof v !== 'number' && typeof v !== 'boolean' && v !== null)) {
        return { text, end: -1, bad: true }
      }
      text += JSON.stringify(v)
      i += token.length
    } else if (c === '{' || c === '[') {
      depth++
      text += c
      i++
    } else if (c === '}' || c === ']') {
      depth--
      text += c
      i++
      if (depth === 0) return { text, end: i, bad: false }
    } else if (c === ':' || c === ',') {
      text += c
      i++
    } else if (c === ' ' || c === '\n' || c === '\t' || c === '\r') i++
    else return { text, end: -1, bad: true }
  }
  return { text, end: -1, bad: false }
}

/** The index of the first character at or after `i` that is not whitespace. @param {string} s @param {number} i */
const skipSpace = (s, i) => {
  while (i < s.length && /\s/.test(s[i])) i++
  return i
}

/** A call object's start, as the formats write it: its name, then its arguments' `{`. */
const CALL_HEAD = /\{\s*"name"\s*:\s*("(?:[^"\\]|\\.)*")\s*,\s*"(?:arguments|parameters)"\s*:\s*(?=\{)/y

/** @typedef {{ name: string; arguments: string }} PartialCall the arguments so far, compacted */

/**
 * The calls seen so far in JSON call objects from `i`: one, or a list (`[` ... `, `) or
 * llama3's `;`-joined ones. Stops at the first thing that is not a call written name first.
 * @param {string} s
 * @param {number} i
 * @param {',' | ';'} separator
 * @returns {PartialCall[]}
 */
function partialCallsFrom(s, i, separator) {
  /** @type {PartialCall[]} */
  const calls = []
  i = skipSpace(s, i)
  if (s[i] === '[') i = skipSpace(s, i + 1)
  for (let n = 0; n < 1024; n++) {
    CALL_HEAD.lastIndex = i
    const m = CALL_HEAD.exec(s)
    if (!m) return calls
    const name = parseJson(m[1])
    if (typeof name !== 'string' || name === '') return calls
    const args = compactJson(s, CALL_HEAD.lastIndex)
    calls.push({ name, arguments: args.text })
    if (args.end === -1) return calls
    i = skipSpace(s, args.end)
    if (s[i] !== '}') return calls
    i = skipSpace(s, i + 1)
    if (s[i] !== separator) return calls
    i = skipSpace(s, i + 1)
  }
  return calls
}

/**
 * The calls seen so far in the text where a format's calls are (hermes: inside a block; llama3,
 * mistral: what follows the answer's start or `[TOOL_CALLS]`; generic: the whole answer).
 * @param {ToolCallFormat} format
 * @param {string} s
 * @returns {PartialCall[]}
 */
function partialCalls(format, s) {
  if (format === 'hermes') return partialCallsFrom(s, 0, ',')
  if (format === 'llama3') {
    const at = skipSpace(s, 0)
    return partialCallsFrom(s, s.startsWith(PYTHON_TAG, at) ? at + PYTHON_TAG.length : at, ';')
  }
  if (format === 'generic') {
    const list = /\s*\{\s*"tool_calls"\s*:\s*(?=\[)/y
    const one = /\s*\{\s*"tool_call"\s*:\s*(?=\{)/y
    if (list.exec(s)) return partialCallsFrom(s, list.lastIndex, ',')
    if (one.exec(s)) return partialCallsFrom(s, one.lastIndex, ',').slice(0, 1)
    return []
  }
  // mistral: a JSON list, or `name[ARGS]{...}` per call, each after a [TOOL_CALLS].
  const at = skipSpace(s, 0)
  if (s[at] === '[' || s[at] === '{') return partialCallsFrom(s, at, ',')
  /** @type {PartialCall[]} */
  const calls = []
  for (const part of s.split(MISTRAL_CALLS)) {
    const argsAt = part.indexOf(MISTRAL_ARGS)
    if (argsAt === -1) break
    const name = part.slice(0, argsAt).split(MISTRAL_CALL_ID)[0].trim()
    const open = skipSpace(part, argsAt + MISTRAL_ARGS.length)
    if (name === '' || part[open] !== '{') break
    const args = compactJson(part, open)
    calls.push({ name, arguments: args.text })
    if (args.end === -1) break
  }
  return calls
}

/** The length of the longest end of `s` that begins `marker` (text that may be a marker's start). */
function partialEnd(s, marker) {
  for (let n = Math.min(s.length, marker.length - 1); n > 0; n--) {
    if (marker.startsWith(s.slice(s.length - n))) return n
  }
  return 0
}

/**
 * Splits streamed text into text and tool calls as it arrives: text is passed on at once except
 * what may begin a call's marker; a call is passed on once it is complete (hermes: at its
 * `</tool_call>`; llama3, mistral and generic, whose calls end the answer: at `end()`; a generic
 * text answer is passed on as its string is decoded). Whitespace beside calls is dropped.
 * With `partial`, a call written name first (as every format's grammar writes it) also begins as
 * soon as its name is known and its arguments start, and its arguments go out as they come,
 * compacted as the whole call's are; the whole call then follows as `call` with `streamed`.
 * A streamed call is not taken back: if the rest of it turns out not to parse (only without a
 * grammar), or max_tokens cuts it, nothing more of it is passed on (the whole answer, not
 * streamed, would read it as text or drop it).
 */
class ToolCallStream {
  #format
  #buffer = ''
  /**
   * `text`: passing text on; `call`: inside a hermes block; `tail`: holding the rest until end;
   * `reply`: decoding a generic text answer's string; `done`: past it
   */
  #state = /** @type {'start' | 'text' | 'call' | 'tail' | 'reply' | 'done'} */ ('start')
  /** The output was cut by max_tokens (`end`): an unfinished call is dropped. */
  #cut = false
  /** Whitespace held back: dropped if a call follows. */
  #space = ''
  #calls = 0
  /** The last thing passed on was a call (the text after it starts without its whitespace). */
  #afterCall = false
  /** Begin and arguments events. */
  #partial = false
  /** The calls of the current block (hermes) or tail begun so far: their ids and arguments sent. */
  #begun = /** @type {Array<{ id: number; arguments: string }>} */ ([])
  #ids = 0

  /**
   * @param {ToolCallFormat} format
   * @param {{ partial?: boolean }} [options] `partial`: calls begin, and their arguments stream,
   *   before they are whole
   */
  constructor(format, { partial = false } = {}) {
    if (!Object.hasOwn(MARKERS, format)) throw new TypeError(`ToolCallStream: unknown format ${String(format)}`)
    this.#format = format
    this.#partial = partial
  }

  /**
   * Reads more of the output.
   * @param {string} text
   * @returns {ToolCallEvent[]}
   */
  push(text) {
    this.#buffer += text
    /** @type {ToolCallEvent[]} */
    const events = []
    for (;;) {
      const before = this.#state + this.#buffer.length
      this.#step(events, false)
      if (this.#state + this.#buffer.length === before) return events
    }
  }

  /**
   * The output ended: what was held back. `cut`: it was cut by max_tokens, and a call it cut is
   * dropped (never passed on as text).
   * @param {{ cut?: boolean }} [options]
   * @returns {ToolCallEvent[]}
   */
  end({ cut = false } = {}) {
    this.#cut = cut
    /** @type {ToolCallEvent[]} */
    const events = []
    this.#step(events, true)
    if (this.#buffer !== '') this.#text(events, this.#buffer)
    this.#buffer = ''
    if (this.#calls === 0 && this.#space) events.push({ type: 'text', text: this.#space })
    this.#space = ''
    return events
  }

  /** @param {ToolCallEvent[]} events @param {string} text */
  #text(events, text) {
    if (text === '') return
    const lead = this.#space + text
    const trimmed = lead.trimEnd()
    this.#space = lead.slice(trimmed.length)
    const out = this.#afterCall ? trimmed.trimStart() : trimmed
    if (out === '') return
    events.push({ type: 'text', text: out })
    this.#afterCall = false
  }

  /**
   * The calls of a block or tail, whole: those begun get what is left of their arguments.
   * @param {ToolCallEvent[]} events @param {ToolCall[]} calls
   */
  #emitCalls(events, calls) {
    this.#space = ''
    calls.forEach((call, i) => {
      const begun = this.#begun[i]
      if (!begun) return events.push({ type: 'call', call, id: this.#ids++ })
      const rest = call.arguments.startsWith(begun.arguments) ? call.arguments.slice(begun.arguments.length) : ''
      if (rest) events.push({ type: 'arguments', id: begun.id, text: rest })
      events.push({ type: 'call', call, id: begun.id, streamed: true })
    })
    this.#calls += Math.max(calls.length, this.#begun.length)
    this.#begun = []
    this.#afterCall = true
  }

  /**
   * Begins the calls seen so far in `region` and sends their new arguments.
   * @param {ToolCallEvent[]} events @param {string} region
   */
  #progress(events, region) {
    if (!this.#partial) return
    partialCalls(this.#format, region).forEach((seen, i) => {
      let begun = this.#begun[i]
      if (!begun) {
        this.#space = ''
        begun = { id: this.#ids++, arguments: '' }
        this.#begun.push(begun)
        events.push({ type: 'begin', id: begun.id, name: seen.name })
      }
      if (seen.arguments.length > begun.arguments.length && seen.arguments.startsWith(begun.arguments)) {
        events.push({ type: 'arguments', id: begun.id, text: seen.arguments.slice(begun.arguments.length) })
        begun.arguments = seen.arguments
      }
    })
  }

  /**
   * The end of a block or tail whose calls did not parse: its text, unless a call of it was begun
   * (it is not taken back) or max_tokens cut it.
   * @param {ToolCallEvent[]} events @param {string} text
   */
  #unparsed(events, text) {
    if (this.#begun.length > 0) {
      this.#calls += this.#begun.length
      this.#begun = []
      this.#space = ''
      this.#afterCall = true
      return
    }
    if (!this.#cut) this.#text(events, text)
  }

  /** One move of the state machine over the buffer. @param {ToolCallEvent[]} events @param {boolean} last */
  #step(events, last) {
    const b = this.#buffer
    if (this.#state === 'start') {
      // llama3 writes a call as the whole answer: decided by its first character.
      if (this.#format === 'llama3') {
        const lead = b.trimStart()
        if (lead === '' || (lead.length < PYTHON_TAG.length && PYTHON_TAG.startsWith(lead))) {
          if (last) this.#state = 'text'
          return
        }
        this.#state = lead.startsWith('{') || lead.startsWith(PYTHON_TAG) ? 'tail' : 'text'
      } else if (this.#format === 'generic') {
        // One JSON object: a text answer is streamed as its string decodes; calls wait for the end.
        const lead = b.trimStart()
        if (!last && REPLY_OPEN.startsWith(lead)) return
        if (lead.startsWith(REPLY_OPEN)) {
          this.#buffer = lead.slice(REPLY_OPEN.length)
          this.#state = 'reply'
        } else this.#state = 'tail'
      } else this.#state = 'text'
      return
    }
    if (this.#state === 'reply') {
      const { text, rest, closed } = stringStart(b)
      this.#text(events, text)
      this.#buffer = closed ? '' : rest
      if (closed) this.#state = 'done'
      else if (last) this.#buffer = ''
      return
    }
    if (this.#state === 'done') {
      this.#buffer = ''
      return
    }
    if (this.#state === 'text') {
      const open = this.#format === 'hermes' ? HERMES_OPEN : this.#format === 'mistral' ? MISTRAL_CALLS : null
      const at = open ? b.indexOf(open) : -1
      if (open && at !== -1) {
        this.#text(events, b.slice(0, at))
        this.#buffer = b.slice(at + open.length)
        this.#state = this.#format === 'hermes' ? 'call' : 'tail'
        return
      }
      const keep = open && !last ? partialEnd(b, open) : 0
      this.#text(events, b.slice(0, b.length - keep))
      this.#buffer = b.slice(b.length - keep)
      return
    }
    if (this.#state === 'call') {
      const at = b.indexOf(HERMES_CLOSE)
      const inside = at === -1 ? b : b.slice(0, at)
      this.#progress(events, inside)
      if (at === -1 && !last) return
      const calls = callsOfJson(inside)
      if (calls) this.#emitCalls(events, calls)
      else if (at !== -1 || !this.#cut || this.#begun.length > 0) {
        this.#unparsed(events, HERMES_OPEN + inside + (at === -1 ? '' : HERMES_CLOSE))
      }
      this.#buffer = at === -1 ? '' : b.slice(at + HERMES_CLOSE.length)
      this.#state = 'text'
      return
    }
    // 'tail': the calls run to the end of the answer.
    this.#progress(events, b)
    if (!last) return
    this.#buffer = ''
    this.#state = 'text'
    if (this.#format === 'generic') {
      const read = genericEvents(b, this.#cut)
      const calls = read.flatMap((e) => (e.type === 'call' ? [e.call] : []))
      if (calls.length > 0) return this.#emitCalls(events, calls)
      if (this.#begun.length > 0) return this.#unparsed(events, b)
      for (const e of read) if (e.type === 'text') this.#text(events, e.text)
      return
    }
    const calls = this.#format === 'llama3' ? llamaCalls(b) : mistralCalls(b)
    if (calls) return this.#emitCalls(events, calls)
    if (!this.#cut) return this.#unparsed(events, (this.#format === 'mistral' ? MISTRAL_CALLS : '') + b)
    // Cut: Mistral's list keeps its complete calls; a cut call is dropped.
    const list = this.#format === 'mistral' && b.trimStart().startsWith('[') ? b.trimStart().slice(1) : null
    const read = (list === null ? null : completeItems(list))?.map(callOf) ?? []
    if (read.length > 0 && read.every((c) => c !== null)) this.#emitCalls(events, /** @type {ToolCall[]} */ (read))
    else this.#unparsed(events, '')
  }
}

module.exports = { formatOf, toolsVariableOf, parseToolCalls, ToolCallStream, genericMessages, MARKERS, TABLE }

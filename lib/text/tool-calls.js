// @ts-check
'use strict'
// Tool calls in a causal LM's output, in the formats chat templates teach their models, turned
// into OpenAI's `tool_calls` ({name, arguments: a JSON string}) — whole (`parseToolCalls`) or as
// the text streams in (`ToolCallStream`), for torch-node serve (lib/serve/chat.js).
//   hermes   `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`, one block per call:
//            Qwen2.5/Qwen3, Hermes, SmolLM3; SmolLM2 writes a JSON list in one block.
//   llama3   the whole answer is `{"name": ..., "parameters": {...}}` (after `<|python_tag|>`
//            when the template asks for it), several joined by `;` (Llama 3.1-3.3).
//   mistral  `[TOOL_CALLS][{"name": ..., "arguments": {...}}, ...]` (v3 tokenizers), or
//            `[TOOL_CALLS]name[ARGS]{...}` per call (v11+: Mistral Small 3.2, Magistral).
// What does not parse stays text: a model that writes a malformed call answers in words.

/** @typedef {'hermes' | 'llama3' | 'mistral'} ToolCallFormat */
/** @typedef {{ name: string; arguments: string }} ToolCall */
/** @typedef {{ type: 'text'; text: string } | { type: 'call'; call: ToolCall }} ToolCallEvent */

const HERMES_OPEN = '<tool_call>'
const HERMES_CLOSE = '</tool_call>'
const PYTHON_TAG = '<|python_tag|>'
const MISTRAL_CALLS = '[TOOL_CALLS]'
const MISTRAL_ARGS = '[ARGS]'
const MISTRAL_CALL_ID = '[CALL_ID]'

/**
 * Marker tokens each format writes: a tokenizer that has them as special tokens drops them when
 * decoding, so the server puts them back (lib/serve/chat.js) before parsing.
 * @type {Record<ToolCallFormat, string[]>}
 */
const MARKERS = {
  hermes: [HERMES_OPEN, HERMES_CLOSE],
  llama3: [PYTHON_TAG],
  mistral: [MISTRAL_CALLS, MISTRAL_ARGS, MISTRAL_CALL_ID],
}

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
 * The tool calls in a whole output, and the text around them (null when only whitespace is
 * left beside calls, as OpenAI's `content`). An output with no call, or one that does not parse,
 * is all text.
 * @param {string} text
 * @param {ToolCallFormat} format
 * @returns {{ content: string | null; toolCalls: ToolCall[] }}
 */
function parseToolCalls(text, format) {
  const stream = new ToolCallStream(format)
  const events = [...stream.push(text), ...stream.end()]
  const toolCalls = events.flatMap((e) => (e.type === 'call' ? [e.call] : []))
  const joined = events.map((e) => (e.type === 'text' ? e.text : '')).join('')
  if (toolCalls.length === 0) return { content: joined, toolCalls }
  return { content: joined.trim() === '' ? null : joined.trim(), toolCalls }
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
 * `</tool_call>`; llama3 and mistral, whose calls end the answer: at `end()`). Whitespace beside
 * calls is dropped.
 */
class ToolCallStream {
  #format
  #buffer = ''
  /** `text`: passing text on; `call`: inside a hermes block; `tail`: holding the rest until end */
  #state = /** @type {'start' | 'text' | 'call' | 'tail'} */ ('start')
  /** Whitespace held back: dropped if a call follows. */
  #space = ''
  #calls = 0
  /** The last thing passed on was a call (the text after it starts without its whitespace). */
  #afterCall = false

  /** @param {ToolCallFormat} format */
  constructor(format) {
    if (!Object.hasOwn(MARKERS, format)) throw new TypeError(`ToolCallStream: unknown format ${String(format)}`)
    this.#format = format
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
   * The output ended: what was held back.
   * @returns {ToolCallEvent[]}
   */
  end() {
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

  /** @param {ToolCallEvent[]} events @param {ToolCall[]} calls */
  #emitCalls(events, calls) {
    this.#space = ''
    for (const call of calls) events.push({ type: 'call', call })
    this.#calls += calls.length
    this.#afterCall = true
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
      } else this.#state = 'text'
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
      if (at === -1 && !last) return
      const inside = at === -1 ? b : b.slice(0, at)
      const calls = callsOfJson(inside)
      if (calls) this.#emitCalls(events, calls)
      else this.#text(events, HERMES_OPEN + inside + (at === -1 ? '' : HERMES_CLOSE))
      this.#buffer = at === -1 ? '' : b.slice(at + HERMES_CLOSE.length)
      this.#state = 'text'
      return
    }
    // 'tail': the calls run to the end of the answer.
    if (!last) return
    const calls = this.#format === 'llama3' ? llamaCalls(b) : mistralCalls(b)
    if (calls) this.#emitCalls(events, calls)
    else this.#text(events, (this.#format === 'mistral' ? MISTRAL_CALLS : '') + b)
    this.#buffer = ''
    this.#state = 'text'
  }
}

module.exports = { formatOf, toolsVariableOf, parseToolCalls, ToolCallStream, MARKERS }

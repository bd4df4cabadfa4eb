// @ts-check
'use strict'
// torch.text.CausalLM: text generation from a folder written by python/export_causal_lm.py
// (`npx torch-node export`). The decode loop is native (src/causal_lm.rs over crates/core/src/generate/):
// each step runs on torch-node's executor and resubmits itself, and its text pieces come back
// to this thread through the addon's queue, so no JS round trip is needed per token. This file
// reads the options, bounds the sequences in flight (`maxSequences`, then a queue of `maxQueue`,
// then QueueFull), turns the pieces into an async iterator, and owns `signal`/`timeoutMs`.
// JS because the native class stays internal (an async iterator and a waiting queue are plain JS).
const { loadAddon } = require('../addon')
const { codedError, describe } = require('../errors')
const opt = require('../options')

const native = loadAddon()
const FAILED = native._failed

/** Calls a native method; its reported failure is thrown from here (src/napi/outcome.rs says why). */
function call(impl, self, args, where, caller) {
  const r = Reflect.apply(impl, self, args)
  if (r !== FAILED) return r
  const [code, detail] = native._takeError()
  if (code === null) throw detail
  throw codedError(code, `${where}: ${detail}`, caller)
}

const LOAD_OPTIONS = opt.bag({
  dtype: opt.oneOf(['float32', 'bfloat16', 'float16']),
  maxSequences: opt.integer({ min: 1 }),
  maxQueue: opt.either(
    [opt.integer({ min: 0 }), opt.check((v) => v === Infinity, 'Infinity')],
    'an integer ≥ 0 or Infinity',
  ),
  maxContext: opt.integer({ min: 2 }),
})
const LOAD = Symbol('CausalLM.load')
const DEFAULTS = { maxQueue: 64 }
const signalOption = opt.instance(AbortSignal, 'an AbortSignal')
const timeoutOption = opt.number({ min: 0, infinite: true, expected: 'a number of milliseconds ≥ 0' })

/** Largest delay setTimeout honours; a longer one would fire at once (TimeoutOverflowWarning). */
const MAX_TIMER_MS = 2 ** 31 - 1
/** A token id the native side reads exactly (u32: a larger id would wrap around). */
const MAX_TOKEN_ID = 2 ** 32 - 1

/**
 * InvalidArg for a string with a lone surrogate: JSON carries it as an escape that the native
 * side cannot read (as `torch.text.Tokenizer` says it).
 * @param {unknown} s @param {string} what
 */
function checkText(s, what, caller) {
  if (typeof s !== 'string') return
  const at = s.search(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/)
  if (at !== -1) {
    const unit = s.charCodeAt(at).toString(16).toUpperCase()
    throw codedError(
      'InvalidArg',
      `${what}: a lone surrogate (0x${unit}) at index ${at}: not valid Unicode text`,
      caller,
    )
  }
}

/**
 * The prompt as the native side reads it: `{text}`, `{messages}` or `{ids}`.
 * @param {unknown} input
 */
function promptOf(input, caller) {
  const what = 'CausalLM.generate: prompt'
  if (typeof input === 'string') {
    checkText(input, what, caller)
    return { text: input }
  }
  if (Array.isArray(input) && input.length > 0) {
    // Read once (a Proxy or getters answer the same thereafter); holes become undefined.
    const items = Array.from(input)
    if (items.every((t) => Number.isInteger(t) && t >= 0)) {
      const big = items.findIndex((t) => t > MAX_TOKEN_ID)
      if (big !== -1) {
        throw codedError('InvalidArg', `${what}: token id ${items[big]} is out of the vocabulary`, caller)
      }
      return { ids: items }
    }
    const isMessage = (/** @type {any} */ m) =>
      m !== null && typeof m === 'object' && typeof m.role === 'string' && typeof m.content === 'string'
    if (items.every(isMessage)) {
      items.forEach((m, i) => {
        checkText(m.role, `${what}[${i}].role`, caller)
        checkText(m.content, `${what}[${i}].content`, caller)
      })
      return { messages: items }
    }
  }
  throw codedError(
    'InvalidArg',
    'CausalLM.generate: prompt: expected a string, an array of {role, content} ' +
      `messages or of token ids, got ${describe(input)}`,
    caller,
  )
}

/**
 * Text generation from a causal LM folder. Made with `await CausalLM.load(folder, options)`.
 */
class CausalLM {
  #native
  #info
  #maxSequences
  #maxQueue
  #active = 0
  /** @type {Array<{resolve: () => void, reject: (e: Error) => void}>} */
  #waiting = []
  /** @type {Set<() => void>} aborts of the generations in flight */
  #running = new Set()
  #disposed = false

  /** @private Use `CausalLM.load`. */
  constructor(token, handle, options) {
    if (token !== LOAD) {
      throw codedError('InvalidArg', 'new CausalLM(): use await torch.text.CausalLM.load(folder)', CausalLM)
    }
    this.#native = handle
    this.#info = JSON.parse(call(handle.info, handle, [], 'CausalLM.load'))
    this.#maxSequences = this.#info.maxSequences
    this.#maxQueue = options.maxQueue
  }

  /**
   * Loads `folder` (manifest.json, model.pt2, tokenizer files, generation_config.json) on the
   * executor. Options: dtype (must be the export's), maxSequences (the most generations that share
   * each step: 4, or the export's --max-batch when smaller), maxQueue (64), maxContext.
   * @param {string} folder
   * @param {{dtype?: string, maxSequences?: number, maxQueue?: number, maxContext?: number}} [options]
   */
  static async load(folder, options) {
    const caller = CausalLM.load
    if (typeof folder !== 'string') {
      throw codedError('InvalidArg', `CausalLM.load: folder: expected a path, got ${describe(folder)}`, caller)
    }
    const o = { ...DEFAULTS, ...opt.read(options, LOAD_OPTIONS, 'CausalLM.load: options', caller) }
    const json = JSON.stringify({ dtype: o.dtype, maxContext: o.maxContext, maxSequences: o.maxSequences })
    let handle
    try {
      handle = await call(native._CausalLM.load, native._CausalLM, [folder, json], 'CausalLM.load', caller)
    } catch (e) {
      if (e instanceof Error && !e.message.startsWith('CausalLM')) e.message = `CausalLM.load: ${e.message}`
      throw e
    }
    return new CausalLM(LOAD, handle, o)
  }

  /** The longest sequence (prompt and output, in tokens) this instance serves. */
  get maxContext() {
    return this.#info.maxContext
  }

  /** The defaults from generation_config.json: maxNewTokens, temperature, topK, topP, minP, repetitionPenalty. */
  get defaults() {
    const { maxNewTokens, temperature, topK, topP, minP, repetitionPenalty } = this.#info
    return { maxNewTokens, temperature, topK, topP, minP, repetitionPenalty }
  }

  /** True once `dispose()` was called. */
  get isDisposed() {
    return this.#disposed
  }

  /**
   * Sequences generating now, calls waiting for a slot, and what the shared steps have run:
   * `steps` (decode steps: one program call each, for all the sequences then generating),
   * `rows` (the sequences those steps carried; rows / steps is the mean batch) and `prefills`
   * (prompts run).
   */
  stats() {
    const { steps, rows, prefills } = JSON.parse(call(this.#native.counts, this.#native, [], 'CausalLM.stats'))
    const active = this.#active
    return { active, queued: this.#waiting.length, maxSequences: this.#maxSequences, steps, rows, prefills }
  }

  /**
   * Streams the continuation of `input` (a string, `[{role, content}]` messages through the
   * chat template, or token ids) as `{text, tokens}` pieces; the iterator's return value is
   * `{finishReason, usage}`. Bad options throw here (`InvalidArg`); `QueueFull` and model
   * errors come from the first `next()`. Aborting (`signal`, `timeoutMs`) ends the iteration
   * with `finishReason: 'aborted'`.
   * @param {string | Array<{role: string, content: string}> | number[]} input
   * @param {object} [options]
   * @returns {AsyncGenerator<{text: string, tokens: number[]}, {finishReason: 'stop' | 'length' | 'aborted',
   *   usage: {promptTokens: number, completionTokens: number}}>}
   */
  generate(input, options) {
    return this.#run(this.#prepare(input, options, this.generate))
  }

  /**
   * The whole continuation: `{text, tokens, finishReason, usage: {promptTokens, completionTokens}}`.
   * @param {string | Array<{role: string, content: string}> | number[]} input
   * @param {object} [options]
   */
  async complete(input, options) {
    const it = this.#run(this.#prepare(input, options, this.complete))
    let text = ''
    const tokens = []
    for (;;) {
      const r = await it.next()
      if (r.done) return { text, tokens, ...r.value }
      text += r.value.text
      for (const t of r.value.tokens) tokens.push(t)
    }
  }

  /** Reads and checks a call's arguments: throws InvalidArg for what is wrong. */
  #prepare(input, options, caller) {
    if (this.#disposed) throw codedError('Disposed', 'CausalLM: this model was disposed', caller)
    const prompt = promptOf(input, caller)
    if (options !== undefined && options !== null && (typeof options !== 'object' || Array.isArray(options))) {
      throw codedError(
        'InvalidArg',
        `CausalLM.generate: options: expected an options object, got ${describe(options)}`,
        caller,
      )
    }
    const { signal, timeoutMs, ...sampling } = options ?? {}
    const what = 'CausalLM.generate: options'
    opt.read({ signal, timeoutMs }, opt.bag({ signal: signalOption, timeoutMs: timeoutOption }), what, caller)
    for (const [key, v] of Object.entries(sampling)) {
      // JSON would turn these into null (an option left out) or drop them.
      if ((typeof v === 'number' && !Number.isFinite(v)) || typeof v === 'bigint' || typeof v === 'function') {
        throw codedError('InvalidArg', `${what}.${key}: expected a finite number, got ${describe(v)}`, caller)
      }
      if (typeof v === 'string') checkText(v, `${what}.${key}`, caller)
      if (Array.isArray(v)) v.forEach((s, i) => checkText(s, `${what}.${key}[${i}]`, caller))
    }
    const json = JSON.stringify(sampling)
    call(this.#native.checkOptions, this.#native, [json], what, caller)
    return { prompt: JSON.stringify(prompt), options: json, signal, timeoutMs }
  }

  /** Waits for a sequence slot; QueueFull past `maxQueue` waiting calls. False: aborted meanwhile. */
  async #acquire(signal) {
    if (this.#active < this.#maxSequences) {
      this.#active++
      return true
    }
    if (this.#waiting.length >= this.#maxQueue) {
      throw codedError(
        'QueueFull',
        `CausalLM.generate: ${this.#active} sequences are generating and ` +
          `${this.#waiting.length} calls wait (maxSequences ${this.#maxSequences}, maxQueue ${this.#maxQueue})`,
      )
    }
    return new Promise((resolve, reject) => {
      const entry = {
        resolve: () => {
          signal?.removeEventListener('abort', onAbort)
          resolve(true)
        },
        reject: (/** @type {Error} */ e) => {
          signal?.removeEventListener('abort', onAbort)
          reject(e)
        },
      }
      const onAbort = () => {
        const at = this.#waiting.indexOf(entry)
        if (at !== -1) this.#waiting.splice(at, 1)
        resolve(false)
      }
      signal?.addEventListener('abort', onAbort, { once: true })
      this.#waiting.push(entry)
    })
  }

  #release() {
    const next = this.#waiting.shift()
    if (next)
      next.resolve() // the slot passes to it
    else this.#active--
  }

  /** One generation: its pieces as they come, then `{finishReason, usage}`. */
  async *#run({ prompt, options, signal, timeoutMs }) {
    const usage = { promptTokens: 0, completionTokens: 0 }
    const timer = new AbortController()
    const timeout =
      timeoutMs === undefined || timeoutMs > MAX_TIMER_MS ? null : setTimeout(() => timer.abort(), timeoutMs)
    const stopped = () => signal?.aborted || timer.signal.aborted
    try {
      // A generator made before dispose() and first read after it (the slots may never free).
      if (this.#disposed) throw codedError('Disposed', 'CausalLM.generate: this model was disposed')
      if (stopped() || !(await this.#acquire(AbortSignal.any([timer.signal, ...(signal ? [signal] : [])])))) {
        return { finishReason: 'aborted', usage }
      }
      if (this.#disposed) {
        this.#release()
        throw codedError('Disposed', 'CausalLM.generate: this model was disposed')
      }
      /** @type {any[]} */
      const pieces = []
      /** @type {(() => void) | null} */
      let wake = null
      let finished = false
      const onPiece = (/** @type {any} */ piece) => {
        pieces.push(piece)
        wake?.()
      }
      let generation
      try {
        generation = call(this.#native.start, this.#native, [prompt, options, onPiece], 'CausalLM.generate')
      } catch (e) {
        this.#release() // a prompt the native side refused: the slot is not used
        throw e
      }
      const abort = () => {
        generation.abort()
        wake?.()
      }
      this.#running.add(abort)
      signal?.addEventListener('abort', abort, { once: true })
      timer.signal.addEventListener('abort', abort, { once: true })
      try {
        for (;;) {
          if (stopped() || this.#disposed) return { finishReason: 'aborted', usage }
          const piece = pieces.shift()
          if (piece === undefined) {
            await new Promise((resolve) => {
              wake = () => resolve(undefined)
            })
            wake = null
            continue
          }
          if (piece.errorCode) {
            finished = true
            throw codedError(piece.errorCode, `CausalLM.generate: ${piece.errorMessage}`)
          }
          usage.promptTokens = piece.promptTokens
          usage.completionTokens += piece.tokens.length
          if (piece.finishReason) finished = true
          if (piece.text !== '' || piece.tokens.length > 0) yield { text: piece.text, tokens: piece.tokens }
          if (piece.finishReason) return { finishReason: piece.finishReason, usage }
        }
      } finally {
        // Ended early (break, abort, dispose): stop the steps and free the cache now.
        if (!finished) generation.abort()
        this.#running.delete(abort)
        signal?.removeEventListener('abort', abort)
        timer.signal.removeEventListener('abort', abort)
        this.#release()
      }
    } finally {
      if (timeout) clearTimeout(timeout)
    }
  }

  /**
   * Ends the generations in flight (`finishReason: 'aborted'`), rejects waiting calls (`Disposed`) and frees
   * the model.
   */
  dispose() {
    if (this.#disposed) return
    this.#disposed = true
    for (const abort of this.#running) abort()
    for (const w of this.#waiting.splice(0)) {
      w.reject(codedError('Disposed', 'CausalLM.generate: this model was disposed'))
    }
    this.#native.dispose()
  }
}
CausalLM.prototype[Symbol.dispose] = CausalLM.prototype.dispose

module.exports = { CausalLM }

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

// The public types below become index.d.ts's declarations (tools/lib-typings.js).
/**
 * Options of `torch.text.CausalLM.load`; any other key is refused (`InvalidArg`).
 * @typedef {object} CausalLMOptions
 * @property {'float32' | 'bfloat16' | 'float16'} [dtype] The export's dtype (the manifest's); another one is
 *   `InvalidArg`.
 * @property {number} [maxSequences] Sequences generating at once, sharing each decode step and one KV cache
 *   (default 4, or the export's `--max-batch` when smaller; more than `--max-batch` is `InvalidArg`).
 * @property {number} [maxQueue] Calls waiting for a sequence slot before `QueueFull` (default 64; `Infinity` for
 *   no bound).
 * @property {number} [maxContext] The most tokens of a sequence, prompt and output (default and upper bound: the
 *   exported limit).
 */
/**
 * Options of `CausalLM.generate`/`complete`; defaults from `generation_config.json`; any other key is `InvalidArg`.
 * @typedef {object} GenerateOptions
 * @property {number} [maxNewTokens] The most tokens to generate (default 256 or the config's).
 * @property {number} [temperature] 0: greedy.
 * @property {number} [topK] Keep the k likeliest tokens (0: off).
 * @property {number} [topP] Nucleus sampling, in (0, 1].
 * @property {number} [minP] Drop tokens below minP × the likeliest one's probability.
 * @property {number} [repetitionPenalty] transformers' repetition penalty (1: off).
 * @property {number} [seed] The same seed gives the same tokens.
 * @property {string | string[]} [stop] Stop strings: matched across tokens, never emitted (`finishReason: 'stop'`).
 * @property {AbortSignal} [signal] Ends the generation (`finishReason: 'aborted'`) and frees its cache.
 * @property {number} [timeoutMs] As `signal`, after this many milliseconds from the call.
 */
/**
 * A prompt: text, chat messages (rendered by the model's chat template) or token ids.
 * @typedef {string | Array<{ role: string; content: string }> | number[]} GeneratePrompt
 */
/**
 * Why a generation ended and what it counted.
 * @typedef {object} GenerateResult
 * @property {'stop' | 'length' | 'aborted'} finishReason
 * @property {{ promptTokens: number; completionTokens: number }} usage
 */

/**
 * Text generation from a causal LM folder (python/export_causal_lm.py); the decode loop runs on
 * the executor. See docs/generation.md. Made with `CausalLM.load`.
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

  /**
   * Throws `InvalidArg`: use `CausalLM.load`.
   * @private
   */
  constructor(token, handle, options) {
    if (token !== LOAD) {
      throw codedError('InvalidArg', 'new CausalLM(): use await torch.text.CausalLM.load(folder)', CausalLM)
    }
    this.#native = handle
    this.#info = JSON.parse(call(handle.info, handle, [], 'CausalLM.load'))
    this.#maxSequences = this.#info.maxSequences
    this.#maxQueue = options.maxQueue
  }

  // Reads manifest.json, model.pt2, the tokenizer files and generation_config.json.
  /**
   * Loads the folder on the executor. Errors: `ModelLoadError`, `InvalidArg`.
   * @param {string} folder
   * @param {CausalLMOptions} [options]
   * @returns {Promise<CausalLM>}
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

  /**
   * The longest sequence (prompt and output, in tokens) served.
   * @returns {number}
   */
  get maxContext() {
    return this.#info.maxContext
  }

  /**
   * The defaults from generation_config.json.
   * @returns {{ maxNewTokens: number; temperature: number; topK: number; topP: number; minP: number;
   *   repetitionPenalty: number }}
   */
  get defaults() {
    const { maxNewTokens, temperature, topK, topP, minP, repetitionPenalty } = this.#info
    return { maxNewTokens, temperature, topK, topP, minP, repetitionPenalty }
  }

  /** True once `dispose()` was called. */
  get isDisposed() {
    return this.#disposed
  }

  /**
   * Sequences generating and calls waiting; `steps` (decode steps, one program call each for all the sequences
   * then generating), `rows` (the sequences they carried: `rows / steps` is the mean batch) and `prefills`
   * (prompts run).
   * @returns {{ active: number; queued: number; maxSequences: number; steps: number; rows: number;
   *   prefills: number }}
   */
  stats() {
    const { steps, rows, prefills } = JSON.parse(call(this.#native.counts, this.#native, [], 'CausalLM.stats'))
    const active = this.#active
    return { active, queued: this.#waiting.length, maxSequences: this.#maxSequences, steps, rows, prefills }
  }

  // `input`: a string, `[{role, content}]` messages through the chat template, or token ids. Aborting
  // (`signal`, `timeoutMs`) ends the iteration with `finishReason: 'aborted'`.
  /**
   * Streams `{text, tokens}` pieces (split on whole characters); returns `{finishReason, usage}`.
   * Bad options throw `InvalidArg` here; `QueueFull` and model errors come from `next()`.
   * @param {GeneratePrompt} input
   * @param {GenerateOptions} [options]
   * @returns {AsyncGenerator<{ text: string; tokens: number[] }, GenerateResult, undefined>}
   */
  generate(input, options) {
    return this.#run(this.#prepare(input, options, this.generate))
  }

  /**
   * The whole continuation. Errors: `InvalidArg`, `QueueFull`, `Disposed`.
   * @param {GeneratePrompt} input
   * @param {GenerateOptions} [options]
   * @returns {Promise<GenerateResult & { text: string; tokens: number[] }>}
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

  /** Ends generations in flight (`'aborted'`), rejects waiting calls (`Disposed`), frees the model. */
  dispose() {
    if (this.#disposed) return
    this.#disposed = true
    for (const abort of this.#running) abort()
    for (const w of this.#waiting.splice(0)) {
      w.reject(codedError('Disposed', 'CausalLM.generate: this model was disposed'))
    }
    this.#native.dispose()
  }

  [Symbol.dispose]() {
    this.dispose()
  }
}

module.exports = { CausalLM }

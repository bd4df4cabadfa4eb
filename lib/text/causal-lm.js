// @ts-check
'use strict'
// torch.text.CausalLM: text generation from a folder written by python/export_causal_lm.py
// (`npx torch-node export`). The decode loop is native (src/causal_lm.rs over crates/core/src/generate/):
// each step runs on torch-node's executor and resubmits itself, and its text pieces come back
// to this thread through the addon's queue, so no JS round trip is needed per token. The native
// side reads the prompt and the options and owns the one queue (`maxSequences`, then `maxQueue`
// waiting, then QueueFull); this file turns the pieces into an async iterator and owns
// `signal`/`timeoutMs`. JS because the native class stays internal (an async iterator is plain JS).
const fs = require('node:fs')
const path = require('node:path')
const { loadAddon } = require('../addon')
const { codedError, describe, callNative: call } = require('../errors')
const opt = require('../options')
const torch = require('../torch')
const { imageSource } = require('../vision/model-folder')

const native = loadAddon()

const LOAD = Symbol('CausalLM.load')
const signalOption = opt.instance(AbortSignal, 'an AbortSignal')
const timeoutOption = opt.number({ min: 0, infinite: true, expected: 'a number of milliseconds ≥ 0' })
const CALL_OPTIONS = opt.bag({ signal: signalOption, timeoutMs: timeoutOption })

/** JSON.stringify's own failures, as V8 words them (the same on Node 20 to 26). */
const STRINGIFY_FAILURE =
  /^(TypeError: (Converting circular structure to JSON|Do not know how to serialize a BigInt)|RangeError: Maximum call stack size exceeded)/

/**
 * `responseFormat` as its JSON text (`jsonText`): the native side parses and checks it.
 * @param {unknown} format
 * @param {string} what
 * @param {Function} caller
 */
function formatJson(format, what, caller) {
  if (format === null || typeof format !== 'object' || Array.isArray(format)) {
    throw codedError(
      'InvalidArg',
      `${what}: options.responseFormat: expected an object with a 'type', got ${describe(format)}`,
      caller,
    )
  }
  return jsonText(format, `${what}: options.responseFormat`, caller)
}

/**
 * A value as JSON text, read once here (a getter's or a Proxy's throw stays the caller's own; a
 * cycle or a BigInt is InvalidArg naming `what`): the native side parses and checks it.
 * @param {unknown} value
 * @param {string} what
 * @param {Function} caller
 */
function jsonText(value, what, caller) {
  try {
    return JSON.stringify(value)
  } catch (e) {
    // JSON.stringify's own failures (V8's words): a cycle, a BigInt, nested too deep for the
    // stack. Anything else (a getter's or toJSON's throw, even a TypeError) stays the caller's.
    if (!(e instanceof Error) || !STRINGIFY_FAILURE.test(`${e.constructor.name}: ${e.message}`)) throw e
    throw codedError('InvalidArg', `${what}: not JSON (${e.message.split('\n')[0]})`, caller)
  }
}

/**
 * A chat without images as its messages' JSON text (every key of each message reaches the chat
 * template natively: tool calls, tool results), or undefined for any other prompt.
 * @param {unknown} prompt
 * @param {string} what
 * @param {Function} caller
 */
function chatJson(prompt, what, caller) {
  const isMessage = (/** @type {unknown} */ m) => m !== null && typeof m === 'object' && !Array.isArray(m)
  if (!Array.isArray(prompt) || prompt.length === 0 || !prompt.every(isMessage)) return undefined
  return jsonText(prompt, `${what}: prompt`, caller)
}

/** A native log-probability entry with its bytes' text (lossy where a token holds part of a character). */
const spell = (/** @type {any} */ e) => ({
  token: e.token,
  text: Buffer.from(e.bytes).toString('utf8'),
  logprob: e.logprob,
  bytes: e.bytes,
})
const spelled = (/** @type {any} */ e) => ({ ...spell(e), top: e.top.map(spell) })

/** Largest delay setTimeout honours; a longer one would fire at once (TimeoutOverflowWarning). */
const MAX_TIMER_MS = 2 ** 31 - 1

// The public types below become index.d.ts's declarations (tools/lib-typings.js).
/** @import { CausalLMOptions, CausalLMGenerateOptions } from '../../index' */
/**
 * What `CausalLM.generate`/`complete` take besides the native options.
 * @typedef {object} GenerateCallOptions
 * @property {AbortSignal} [signal] Ends the generation (`finishReason: 'aborted'`) and frees its cache.
 * @property {number} [timeoutMs] As `signal`, after this many milliseconds from the call.
 */
/**
 * Options of `CausalLM.generate`/`complete`; defaults from `generation_config.json`; any other key is `InvalidArg`.
 * @typedef {CausalLMGenerateOptions & GenerateCallOptions & { responseFormat?: ResponseFormat }} GenerateOptions
 */
/**
 * What a generation's output must be (`responseFormat`), enforced by a token mask at each step:
 * `json_object` any JSON object; `json_schema` a value valid against `schema` (OpenAI's
 * `{type, json_schema: {name, schema, strict}}` is taken as sent; `strict: false` ignores the
 * keywords that cannot be enforced instead of refusing them); `grammar` text of a Lark grammar
 * (llguidance's dialect); `regex` text matching `pattern`; `tool_calls` one call or more to
 * `tools` in the model's format (`toolChoice` `'required'` or a named function; `'auto'` in the
 * `generic` format, whose answer is either a call or `{"response": "..."}`). An invalid or
 * unsupported schema is `InvalidArg` naming the part.
 * @typedef {{ type: 'text' }
 *   | { type: 'json_object' }
 *   | { type: 'json_schema'; schema: object | boolean; strict?: boolean; name?: string; description?: string }
 *   | { type: 'json_schema'; json_schema: { name?: string; schema: object | boolean; strict?: boolean; description?: string } }
 *   | { type: 'grammar'; grammar: string }
 *   | { type: 'regex'; pattern: string }
 *   | { type: 'tool_calls'; tools: Array<{ type: 'function'; function: { name: string; description?: string; parameters?: object; strict?: boolean } }>; toolChoice: 'auto' | 'required' | { type: 'function'; function: { name: string } }; format: 'hermes' | 'llama3' | 'mistral' | 'generic'; parallel?: boolean }} ResponseFormat
 */
/**
 * A tool a chat template describes to the model (option `tools`): OpenAI's function tool, its
 * `parameters` a JSON schema.
 * @typedef {{ type: 'function'; function: { name: string; description?: string; parameters?: object; strict?: boolean } }} ChatTool
 */
/**
 * An image in a message's content: a path, a `data:image/...;base64,` URL, the file's bytes (PNG, JPEG,
 * WebP, ...: torch.image.load's formats and limits), or a uint8 RGB Tensor `[3, h, w]`.
 * @typedef {string | Uint8Array | import('../../index').Tensor} ChatImage
 */
/**
 * A part of a message's content: text, or an image (a vision-language model's: python/export_vlm.py).
 * @typedef {{ type: 'text'; text: string } | { type: 'image'; image: ChatImage }} ContentPart
 */
/**
 * A prompt: text, chat messages (rendered by the model's chat template; a vision-language model's
 * messages may hold images as content parts) or token ids.
 * @typedef {string | Array<{ role: string; content: string | ContentPart[] }> | number[]} GeneratePrompt
 */
/**
 * One generated token's log-probability (options `logprobs`, `topLogprobs`): the log-softmax of the
 * model's raw logits at its step, before the repetition penalty, temperature, top-k/p, min-p or
 * `responseFormat` change them (vLLM's default `raw_logprobs`). `text` is `bytes` as UTF-8 (a
 * byte-level token may hold part of a character: U+FFFD there); `top` the likeliest tokens at that
 * step, likeliest first (`topLogprobs` of them).
 * @typedef {object} TokenLogprob
 * @property {number} token
 * @property {string} text
 * @property {number} logprob
 * @property {number[]} bytes
 * @property {Array<{ token: number; text: string; logprob: number; bytes: number[] }>} top
 */
/**
 * A piece of a generation: text, its tokens and, with `logprobs`, theirs.
 * @typedef {{ text: string; tokens: number[]; logprobs?: TokenLogprob[] }} GeneratePiece
 */
/**
 * Why a generation ended and what it counted.
 * @typedef {object} GenerateResult
 * @property {'stop' | 'length' | 'aborted'} finishReason
 * @property {{ promptTokens: number; completionTokens: number }} usage
 */

/**
 * `CausalLM.program`: what the exported program is and runs on this CPU.
 * @typedef {object} ProgramInfo
 * @property {string} dtype The activations' and cache's dtype (`float32`, `bfloat16`, `float16`).
 * @property {string | null} quantization The weight-only scheme (`int8`, `int4-g32`, `int4-g128`), or null.
 * @property {{ isa: string; cpuFlags: string[] } | null} compiledFor The vector ISA the compiled code needs
 *   and its CPU flags (checked at load: a CPU without them is refused with `ModelLoadError`); null for
 *   folders exported before torch-node recorded it.
 * @property {string | null} exportedOn The CPU the folder was exported on.
 * @property {Record<string, { oneRow: string | null; rows: string }>} kernels What each kind of linear layer
 *   (`float`, `int8`, `int4`) multiplies through at one row and at 2 to 32 rows.
 * @property {boolean} nativeBf16 Whether this CPU computes bf16 natively (avx512_bf16 or amx_bf16).
 */

/**
 * Text generation from a causal LM folder (python/export_causal_lm.py); the decode loop runs on
 * the executor. See docs/generation.md. Made with `CausalLM.load`.
 */
class CausalLM {
  #native
  #info
  /** @type {any} the image processor (preprocess.pt) of a vision-language folder, else null */
  #preprocess = null
  /** @type {Set<() => void>} aborts of the generations in flight */
  #running = new Set()
  #disposed = false

  /**
   * Throws `InvalidArg`: use `CausalLM.load`.
   * @private
   */
  constructor(token, handle) {
    if (token !== LOAD) {
      throw codedError('InvalidArg', 'new CausalLM(): use await torch.text.CausalLM.load(folder)', CausalLM)
    }
    this.#native = handle
    this.#info = call(handle.info, handle, [], 'CausalLM.load')
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
    let handle
    try {
      handle = await call(native._CausalLM.load, native._CausalLM, [folder, options], 'CausalLM.load', caller)
    } catch (e) {
      if (e instanceof Error && !e.message.startsWith('CausalLM')) e.message = `CausalLM.load: ${e.message}`
      throw e
    }
    const lm = new CausalLM(LOAD, handle)
    const vision = readVision(folder)
    if (vision) {
      const { ScriptModule } = torch()
      try {
        lm.#preprocess = await ScriptModule.load(path.join(folder, vision.preprocess))
      } catch (e) {
        handle.dispose()
        throw codedError('ModelLoadError', `CausalLM.load: ${/** @type {Error} */ (e).message}`, caller)
      }
    }
    const { dtype, nativeBf16 } = lm.program
    if (dtype === 'bfloat16' && !nativeBf16) {
      process.emitWarning(
        `CausalLM.load: ${folder} was exported with bfloat16 activations and this CPU has no native bf16 ` +
          '(no avx512_bf16 or amx_bf16): it runs emulated, slower than float32 (export it here for float32)',
        { code: 'TORCH_NODE_BF16_EMULATED' },
      )
    }
    return lm
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

  /**
   * What the exported program is and runs on this CPU, from manifest.json: its activations' `dtype`, its
   * weight-only `quantization` (`'int8'`, `'int4-g32'`, `'int4-g128'`, or null), the vector ISA its compiled
   * code needs (`compiledFor`, e.g. `'avx2'`, with `cpuFlags` as /proc/cpuinfo names them, checked at load;
   * null for folders exported before it was recorded), the CPU it was exported on, what its linear layers
   * multiply through (`kernels`: `{float, int8?, int4?}` → `{oneRow, rows}`, e.g.
   * `'torch_node::rows_linear_int4_runs'`, whose kernel `torch.cpu.kernelCalls()` counts), and whether this CPU
   * computes bf16 natively (`nativeBf16`: a bfloat16 program on a CPU without it runs emulated, slower than
   * float32).
   * @returns {ProgramInfo}
   */
  get program() {
    const i = this.#info
    /** @type {Record<string, { one_row: string | null; rows: string }>} */
    const kernels = JSON.parse(i.kernels)
    return {
      dtype: i.dtype,
      quantization: i.quantization || null,
      compiledFor: i.compiledFor
        ? { isa: i.compiledFor, cpuFlags: i.compiledForFlags.split(' ').filter(Boolean) }
        : null,
      exportedOn: i.exportedOn || null,
      kernels: Object.fromEntries(Object.entries(kernels).map(([k, v]) => [k, { oneRow: v.one_row, rows: v.rows }])),
      nativeBf16: native.cpu.hasNativeBf16(),
    }
  }

  /**
   * Whether the model takes images in its messages (a folder python/export_vlm.py wrote).
   * @returns {boolean}
   */
  get acceptsImages() {
    return this.#preprocess !== null
  }

  /** True once `dispose()` was called. */
  get isDisposed() {
    return this.#disposed
  }

  /**
   * Sequences generating and calls waiting; `steps` (decode steps, one program call each for all the sequences
   * then generating), `rows` (the sequences they carried: `rows / steps` is the mean batch) and `prefills`
   * (prompts run); with the `prefixCache` load option, `prefixCache`: the tokens held (`tokens`, each shared
   * start once, in `entries` spans of whole 16-token blocks, at most `maxTokens`), the prompts looked up
   * (`queries`) and their tokens (`queriedTokens`), the prompts that reused a prefix (`hits`), the tokens they
   * did not run (`reusedTokens`) and the spans dropped to stay within the bound (`evictions`); with the
   * `speculative` load option, `speculative`: its settings, the tokens drafted by prompt lookup
   * (`proposedTokens`), those the model agreed with (`acceptedTokens`) and their share (`acceptance`).
   * @returns {{ active: number; queued: number; maxSequences: number; steps: number; rows: number;
   *   prefills: number; prefixCache?: { maxTokens: number; tokens: number; entries: number; queries: number;
   *   queriedTokens: number; hits: number; reusedTokens: number; evictions: number };
   *   speculative?: { maxDraft: number; ngram: number; proposedTokens: number; acceptedTokens: number;
   *   acceptance: number } }}
   */
  stats() {
    return call(this.#native.stats, this.#native, [], 'CausalLM.stats')
  }

  // `input`: a string, `[{role, content}]` messages through the chat template, or token ids. Aborting
  // (`signal`, `timeoutMs`) ends the iteration with `finishReason: 'aborted'`.
  /**
   * Streams `{text, tokens}` pieces (split on whole characters; with `logprobs`, each token's too);
   * returns `{finishReason, usage}`. Bad options throw `InvalidArg` here; `QueueFull` and model errors
   * come from `next()`.
   * @param {GeneratePrompt} input
   * @param {GenerateOptions} [options]
   * @returns {AsyncGenerator<GeneratePiece, GenerateResult, undefined>}
   */
  generate(input, options) {
    return this.#run(this.#prepare(input, options, this.generate))
  }

  /**
   * The whole continuation (with `logprobs`, each token's). Errors: `InvalidArg`, `QueueFull`, `Disposed`.
   * @param {GeneratePrompt} input
   * @param {GenerateOptions} [options]
   * @returns {Promise<GenerateResult & GeneratePiece>}
   */
  async complete(input, options) {
    const it = this.#run(this.#prepare(input, options, this.complete))
    let text = ''
    const tokens = []
    /** @type {TokenLogprob[] | undefined} */
    let logprobs
    for (;;) {
      const r = await it.next()
      if (r.done) return logprobs ? { text, tokens, logprobs, ...r.value } : { text, tokens, ...r.value }
      text += r.value.text
      for (const t of r.value.tokens) tokens.push(t)
      if (r.value.logprobs) (logprobs ??= []).push(...r.value.logprobs)
    }
  }

  /**
   * The prompt's token ids as `generate` runs them: text with the tokenizer's special tokens, a chat
   * through the chat template (with `options.tools` where it renders tools), made off the event loop
   * (for counting a prompt before generating it). A chat with images is `InvalidArg` (its image tokens
   * are expanded as it is generated). Errors: `InvalidArg`, `Disposed`.
   * @param {GeneratePrompt} input
   * @param {{ tools?: ChatTool[] }} [options]
   * @returns {Promise<number[]>}
   */
  async tokenize(input, options) {
    const caller = this.tokenize
    const what = 'CausalLM.tokenize'
    if (this.#disposed) throw codedError('Disposed', 'CausalLM: this model was disposed', caller)
    if (options !== undefined && options !== null && (typeof options !== 'object' || Array.isArray(options))) {
      throw codedError('InvalidArg', `${what}: options: expected an options object, got ${describe(options)}`, caller)
    }
    const prompt = Array.isArray(input) ? Array.from(/** @type {any[]} */ (input)) : input
    /** @type {Record<string, unknown>} the bag the native call reads: tools as JSON text */
    const rest = { ...options }
    if (rest.tools !== undefined) rest.tools = jsonText(rest.tools, `${what}: options.tools`, caller)
    if (imageParts(prompt, what, caller).length > 0) {
      throw codedError('InvalidArg', `${what}: a chat with images is tokenized as it is generated`, caller)
    }
    const chat = chatJson(prompt, what, caller)
    const args = chat === undefined ? [prompt, rest] : [null, rest, chat]
    return Array.from(await call(this.#native.tokenize, this.#native, args, what, caller))
  }

  /** Reads a call's arguments (the native side checks the prompt and its options): throws InvalidArg. */
  #prepare(input, options, caller) {
    if (this.#disposed) throw codedError('Disposed', 'CausalLM: this model was disposed', caller)
    const what = 'CausalLM.generate'
    if (options !== undefined && options !== null && (typeof options !== 'object' || Array.isArray(options))) {
      throw codedError('InvalidArg', `${what}: options: expected an options object, got ${describe(options)}`, caller)
    }
    // Read once, here: a Proxy or getters answer the same thereafter, and their throws stay the caller's own.
    const prompt = Array.isArray(input) ? Array.from(input) : input
    const { signal, timeoutMs, ...rest } = options ?? {}
    opt.read({ signal, timeoutMs }, CALL_OPTIONS, `${what}: options`, caller)
    if (rest.responseFormat !== undefined) rest.responseFormat = formatJson(rest.responseFormat, what, caller)
    if (rest.tools !== undefined) rest.tools = jsonText(rest.tools, `${what}: options.tools`, caller)
    const images = imageParts(prompt, what, caller)
    if (images.length === 0) {
      // A chat goes as JSON text: rendered (and tokenized) natively, off this thread, when it starts.
      const chat = chatJson(prompt, what, caller)
      const args = chat === undefined ? [prompt, rest] : [null, rest, chat]
      const request = call(this.#native.prepare, this.#native, args, what, caller)
      return { request, signal, timeoutMs }
    }
    if (!this.#preprocess) {
      throw codedError(
        'InvalidArg',
        `${what}: this model takes no images (a text-only export; a LLaVA checkpoint exported with ` +
          'python/export_vlm.py does)',
        caller,
      )
    }
    // The images are decoded and processed (off this thread) when the generation starts.
    const request = async () => {
      const settled = await Promise.allSettled(images.map((p) => this.#pixelValues(p.image, p.what)))
      const pixels = settled.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []))
      try {
        const failed = settled.find((r) => r.status === 'rejected')
        if (failed) throw failed.reason
        const withPixels = prompt.map((/** @type {any} */ m, /** @type {number} */ i) => {
          if (!Array.isArray(m?.content)) return m
          const content = m.content.map((/** @type {any} */ part, /** @type {number} */ k) => {
            const at = images.findIndex((p) => p.message === i && p.part === k)
            return at < 0 ? part : { type: 'image', image: pixels[at] }
          })
          return { role: m.role, content }
        })
        return call(this.#native.prepare, this.#native, [withPixels, rest], what)
      } finally {
        for (const p of pixels) p.dispose()
      }
    }
    return { request, signal, timeoutMs }
  }

  /**
   * An image's pixel_values (the folder's image processor over the decoded uint8 RGB image); InvalidArg
   * for what is not an image (torch.image.load's errors for undecodable bytes or too many pixels).
   * @param {unknown} image @param {string} what
   */
  async #pixelValues(image, what) {
    const { Tensor, image: images } = torch()
    let decoded
    if (image instanceof Tensor) {
      if (image.dtype !== 'uint8' || image.ndim !== 3 || image.shape[0] !== 3) {
        throw codedError(
          'InvalidArg',
          `${what}: expected a uint8 RGB Tensor [3, h, w], got ${image.dtype} [${image.shape}]`,
        )
      }
      decoded = image
    } else {
      const source = imageSource(image, what)
      try {
        decoded = await images.load(source, { dtype: 'uint8', layout: 'chw' })
      } catch (e) {
        // Undecodable bytes or an image past the decoder's pixel limit (InvalidImage) are a bad argument
        // here; a missing file keeps its IoError.
        const code = /** @type {any} */ (e)?.code
        if (!code) throw e
        throw codedError(code === 'InvalidImage' ? 'InvalidArg' : code, `${what}: ${/** @type {Error} */ (e).message}`)
      }
    }
    try {
      return /** @type {import('../../index').Tensor} */ (await this.#preprocess.forward(decoded))
    } finally {
      if (decoded !== image) decoded.dispose()
    }
  }

  /** One generation: its pieces as they come, then `{finishReason, usage}`. */
  async *#run({ request: prepared, signal, timeoutMs }) {
    const usage = { promptTokens: 0, completionTokens: 0 }
    const timer = new AbortController()
    const timeout =
      timeoutMs === undefined || timeoutMs > MAX_TIMER_MS ? null : setTimeout(() => timer.abort(), timeoutMs)
    const stopped = () => signal?.aborted || timer.signal.aborted
    try {
      // A generator made before dispose() and first read after it.
      if (this.#disposed) throw codedError('Disposed', 'CausalLM.generate: this model was disposed')
      if (stopped()) return { finishReason: 'aborted', usage }
      const request = typeof prepared === 'function' ? await prepared() : prepared
      if (stopped()) return { finishReason: 'aborted', usage }
      /** @type {any[]} */
      const pieces = []
      /** @type {(() => void) | null} */
      let wake = null
      let finished = false
      const onPiece = (/** @type {any} */ piece) => {
        pieces.push(piece)
        wake?.()
      }
      // QueueFull past maxSequences + maxQueue calls: the native queue decides.
      const generation = call(this.#native.start, this.#native, [request, onPiece], 'CausalLM.generate')
      const abort = () => {
        generation.abort()
        wake?.()
      }
      this.#running.add(abort)
      signal?.addEventListener('abort', abort, { once: true })
      timer.signal.addEventListener('abort', abort, { once: true })
      try {
        for (;;) {
          if (stopped()) return { finishReason: 'aborted', usage }
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
          if (piece.text !== '' || piece.tokens.length > 0) {
            const { text, tokens, logprobs } = piece
            yield logprobs ? { text, tokens, logprobs: logprobs.map(spelled) } : { text, tokens }
          }
          if (piece.finishReason) return { finishReason: piece.finishReason, usage }
        }
      } finally {
        // Ended early (break, abort): stop the steps and free the cache now, then wait for the
        // engine's last piece (at most one step away), so the slot is free when this ends.
        if (!finished) {
          generation.abort()
          while (!pieces.some((p) => p.finishReason || p.errorCode)) {
            await new Promise((resolve) => {
              wake = () => resolve(undefined)
            })
          }
          wake = null
        }
        this.#running.delete(abort)
        signal?.removeEventListener('abort', abort)
        timer.signal.removeEventListener('abort', abort)
      }
    } finally {
      if (timeout) clearTimeout(timeout)
    }
  }

  /**
   * Ends generations in flight (`'aborted'`, as their step ends) and waiting calls (`Disposed`); the model is
   * freed once the last generation has ended.
   */
  dispose() {
    if (this.#disposed) return
    this.#disposed = true
    this.#native.dispose()
    this.#preprocess?.dispose()
    for (const abort of this.#running) abort()
  }

  [Symbol.dispose]() {
    this.dispose()
  }
}

/**
 * manifest.json's `vision` (a folder python/export_vlm.py wrote), else null.
 * @param {string} folder @returns {{ preprocess: string } | null}
 */
function readVision(folder) {
  try {
    return JSON.parse(fs.readFileSync(path.join(folder, 'manifest.json'), 'utf8')).vision ?? null
  } catch {
    return null // the native load read it already: nothing to add
  }
}

/**
 * The image parts of a chat prompt: where each is and what to call it in a message.
 * @param {unknown} prompt @param {string} what @param {Function} caller
 * @returns {Array<{ message: number; part: number; image: unknown; what: string }>}
 */
function imageParts(prompt, what, caller) {
  const out = []
  if (!Array.isArray(prompt)) return out
  prompt.forEach((m, i) => {
    if (!Array.isArray(m?.content)) return
    m.content.forEach((/** @type {any} */ part, /** @type {number} */ k) => {
      if (part?.type !== 'image') return
      if (part.image === undefined || part.image === null) {
        throw codedError('InvalidArg', `${what}: prompt[${i}].content[${k}].image: expected an image`, caller)
      }
      out.push({ message: i, part: k, image: part.image, what: `${what}: prompt[${i}].content[${k}].image` })
    })
  })
  return out
}

module.exports = { CausalLM }

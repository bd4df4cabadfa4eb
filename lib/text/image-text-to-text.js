// @ts-check
'use strict'
// torch.pipeline('image-text-to-text', folder): transformers 5's ImageTextToTextPipeline in its chat
// form, over a vision-language export (python/export_vlm.py: LLaVA, Gemma 3, SmolVLM / Idefics3, Qwen2-VL), as
// a thin shape over torch.text.CausalLM: chat messages whose content parts may be images (transformers'
// `{type: 'image', url | path | image | base64}`), the answer `[{inputText, generatedText}]` with the
// assistant's turn appended to the chat (`returnFullText`, default true) or its text alone. Batching,
// queueing and abort are CausalLM's.
const { codedError, describe } = require('../errors')
const opt = require('../options')

/** @import { GenerateOptions, ChatImage } from './causal-lm' */
/** @import { text, CausalLMOptions } from '../../index' */

// The public types below become index.d.ts's declarations (tools/lib-typings.js).
/**
 * A content part as transformers' chat templates take it: text, or an image given by exactly one of
 * `image` (what `CausalLM.generate` takes: a path, a data URL, a Buffer, a uint8 RGB Tensor), `url` (a
 * path or a `data:image/...;base64,` URL; http(s) URLs are not fetched here), `path`, or `base64` (the
 * file's bytes, base64-encoded).
 * @typedef {{ type: 'text'; text: string } | { type: 'image'; image?: ChatImage; url?: string; path?: string; base64?: string }} ImageTextPart
 */
/**
 * A chat message: a string, or text and image parts in order.
 * @typedef {{ role: string; content: string | ImageTextPart[] }} ImageTextMessage
 */
/**
 * One answer: `inputText`, the chat as given; `generatedText`, the chat with the assistant's turn
 * appended (`{role: 'assistant', content}`), or with `returnFullText: false` that turn's text alone.
 * @typedef {{ inputText: ImageTextMessage[]; generatedText: string | ImageTextMessage[] }} ImageTextToTextResult
 */
/**
 * `run`'s options: CausalLM's generation options (`maxNewTokens`, `temperature`, `topK`, `topP`,
 * `minP`, `repetitionPenalty`, `seed`, `stop`, `responseFormat`, `signal`, `timeoutMs`) and
 * `returnFullText` (default true, as transformers).
 * @typedef {GenerateOptions & { returnFullText?: boolean }} ImageTextToTextOptions
 */

const LOAD = Symbol('ImageTextToTextPipeline.load')
const OWN = opt.bag({ returnFullText: opt.boolean })
const IMAGE_PART = opt.bag({ type: opt.any, image: opt.any, url: opt.any, path: opt.any, base64: opt.any })
const IMAGE_KEYS = /** @type {const} */ (['image', 'url', 'path', 'base64'])

/** @param {string} message @param {Function} [caller] */
const invalid = (message, caller) => codedError('InvalidArg', message, caller)

/** A chat: an array of {role, content} objects. @param {unknown} x */
const isChat = (x) =>
  Array.isArray(x) && x.length > 0 && typeof x[0] === 'object' && x[0] !== null && !Array.isArray(x[0])

/**
 * An image part as CausalLM takes it (`{type: 'image', image}`) from transformers' forms.
 * @param {any} part @param {string} what @param {Function} caller
 */
function imagePart(part, what, caller) {
  const p = opt.read(part, IMAGE_PART, what, caller)
  const given = IMAGE_KEYS.filter((k) => p[k] !== undefined)
  if (given.length !== 1) {
    throw invalid(`${what}: expected exactly one of image, url, path or base64, got ${given.length}`, caller)
  }
  const key = given[0]
  const value = p[key]
  if (key === 'image') return { type: 'image', image: value }
  if (typeof value !== 'string') throw invalid(`${what}.${key}: expected a string, got ${describe(value)}`, caller)
  if (key === 'base64') return { type: 'image', image: Buffer.from(value, 'base64') }
  if (key === 'url' && /^https?:\/\//i.test(value)) {
    throw invalid(`${what}.url: http(s) URLs are not fetched here; give a path, a data: URL or the bytes`, caller)
  }
  return { type: 'image', image: value }
}

/**
 * A chat as CausalLM's prompt: image parts in its form, other parts and string contents as given.
 * InvalidArg for a chat ending with the assistant's turn (transformers continues that turn; torch-node
 * does not yet).
 * @param {any[]} chat @param {string} what @param {Function} caller
 */
function prompt(chat, what, caller) {
  const last = chat[chat.length - 1]
  if (last?.role === 'assistant') {
    throw invalid(`${what}: the chat ends with the assistant's turn; continuing it is not supported`, caller)
  }
  return chat.map((m, i) => {
    if (m === null || typeof m !== 'object' || !Array.isArray(m.content)) return m
    const content = m.content.map((/** @type {any} */ part, /** @type {number} */ k) =>
      part?.type === 'image' ? imagePart(part, `${what}[${i}].content[${k}]`, caller) : part,
    )
    return { role: m.role, content }
  })
}

class ImageTextToTextPipeline {
  /** @type {text.CausalLM} */
  #lm

  /**
   * Throws `InvalidArg`: use `await torch.pipeline('image-text-to-text', folder)`.
   * @private
   * @param {symbol} token @param {text.CausalLM} lm
   */
  constructor(token, lm) {
    if (token !== LOAD) {
      throw invalid(
        "new ImageTextToTextPipeline(): use await torch.pipeline('image-text-to-text', folder)",
        ImageTextToTextPipeline,
      )
    }
    this.#lm = lm
  }

  /**
   * Loads a vision-language export with `CausalLM.load`'s options. Errors: `ModelLoadError` (also for
   * a text-only export), `InvalidArg`.
   * @param {string} folder
   * @param {CausalLMOptions} [options]
   * @returns {Promise<ImageTextToTextPipeline>}
   */
  static async load(folder, options) {
    const { text } = require('../torch')()
    const lm = await text.CausalLM.load(folder, options)
    if (!lm.acceptsImages) {
      lm.dispose()
      throw codedError(
        'ModelLoadError',
        `torch.pipeline('image-text-to-text'): ${folder} is a text-only export (no image processor); ` +
          "a vision-language checkpoint exported with `npx torch-node export` is, or use 'text-generation'",
        ImageTextToTextPipeline.load,
      )
    }
    return new ImageTextToTextPipeline(LOAD, lm)
  }

  /** `'image-text-to-text'`. */
  get task() {
    return 'image-text-to-text'
  }

  /** The CausalLM underneath: `generate` (streaming), `stats()`, `program`, its tokenizer. */
  get model() {
    return this.#lm
  }

  /**
   * Answers a chat whose messages may hold images; an array of chats gives an array of answers,
   * generated concurrently (sharing the model's steps). transformers' other form, images and a raw
   * text prompt given apart, is refused (`InvalidArg`): put the images in the chat. Errors:
   * `InvalidArg`, `QueueFull`, `Disposed`.
   * @param {ImageTextMessage[] | ImageTextMessage[][]} input
   * @param {ImageTextToTextOptions} [options]
   * @returns {Promise<ImageTextToTextResult[] | ImageTextToTextResult[][]>}
   */
  async run(input, options = {}) {
    const name = 'ImageTextToTextPipeline.run'
    if (options === null || typeof options !== 'object' || Array.isArray(options)) {
      throw invalid(`${name}: options: expected an object, got ${describe(options)}`, this.run)
    }
    // returnFullText is read here; the rest goes to CausalLM.complete, whose bag names what it takes.
    const { returnFullText, ...generate } = /** @type {ImageTextToTextOptions} */ (options)
    const full = opt.read({ returnFullText }, OWN, `${name}: options`, this.run).returnFullText ?? true
    const batched = Array.isArray(input) && input.length > 0 && input.every(isChat)
    if (!batched && !isChat(input)) {
      throw invalid(
        `${name}: expected chat messages (images as content parts) or an array of chats, got ${describe(input)}`,
        this.run,
      )
    }
    const chats = /** @type {any[][]} */ (batched ? input : [input])
    const prompts = chats.map((chat, i) => prompt(chat, batched ? `${name}: input[${i}]` : `${name}: input`, this.run))
    const answers = await Promise.all(
      prompts.map(async (p, i) => {
        const { text } = await this.#lm.complete(p, generate)
        const chat = chats[i]
        return [{ inputText: chat, generatedText: full ? [...chat, { role: 'assistant', content: text }] : text }]
      }),
    )
    return batched ? answers : answers[0]
  }

  /** Frees the model; generations running end with `finishReason: 'aborted'`. */
  dispose() {
    this.#lm.dispose()
  }

  [Symbol.dispose]() {
    this.dispose()
  }
}

module.exports.ImageTextToTextPipeline = ImageTextToTextPipeline

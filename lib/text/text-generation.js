// @ts-check
'use strict'
// torch.pipeline('text-generation', folder): transformers' TextGenerationPipeline over a causal-LM
// folder (`npx torch-node export`), as a thin shape over torch.text.CausalLM: a string is
// continued as it is (no chat template, as transformers does with a string), chat messages go
// through the model's chat template, and the answer is `[{generatedText}]` — the prompt and its
// continuation (`returnFullText`, default true), or for messages the conversation with the
// assistant's turn appended. Batching, queueing and abort are CausalLM's.
const { codedError, describe } = require('../errors')
const opt = require('../options')

/** @import { GenerateOptions } from './causal-lm' */
/** @import { text, CausalLMOptions } from '../../index' */

/**
 * A chat message as transformers' text-generation pipeline takes and returns it.
 * @typedef {{ role: string; content: string }} TextGenerationMessage
 */
/**
 * One answer: for a string prompt the text (the prompt and its continuation, or the continuation
 * alone with `returnFullText: false`); for messages the conversation with the assistant's turn appended
 * (the turn alone with `returnFullText: false`).
 * @typedef {{ generatedText: string | TextGenerationMessage[] }} TextGenerationResult
 */
/**
 * `run`'s options: CausalLM's generation options (`maxNewTokens`, `temperature`, `topK`, `topP`,
 * `minP`, `repetitionPenalty`, `seed`, `stop`, `responseFormat`, `signal`, `timeoutMs`) and
 * `returnFullText` (default true, as transformers).
 * @typedef {GenerateOptions & { returnFullText?: boolean }} TextGenerationOptions
 */

const LOAD = Symbol('TextGenerationPipeline.load')
const OWN = opt.bag({ returnFullText: opt.boolean })

/** A prompt of chat messages (an array of {role, content}), as opposed to text or token ids. @param {unknown} x */
const isMessages = (x) => Array.isArray(x) && x.length > 0 && typeof x[0] === 'object' && x[0] !== null

class TextGenerationPipeline {
  /** @type {text.CausalLM} */
  #lm

  /**
   * Throws `InvalidArg`: use `await torch.pipeline('text-generation', folder)`.
   * @private
   * @param {symbol} token @param {text.CausalLM} lm
   */
  constructor(token, lm) {
    if (token !== LOAD) {
      throw codedError(
        'InvalidArg',
        "new TextGenerationPipeline(): use await torch.pipeline('text-generation', folder)",
        TextGenerationPipeline,
      )
    }
    this.#lm = lm
  }

  /**
   * Loads a causal-LM folder with `CausalLM.load`'s options. Errors: `ModelLoadError`, `InvalidArg`.
   * @param {string} folder
   * @param {CausalLMOptions} [options]
   * @returns {Promise<TextGenerationPipeline>}
   */
  static async load(folder, options) {
    const { text } = require('../torch')()
    return new TextGenerationPipeline(LOAD, await text.CausalLM.load(folder, options))
  }

  /** `'text-generation'`. */
  get task() {
    return 'text-generation'
  }

  /** The CausalLM underneath: `generate` (streaming), `stats()`, `program`, its tokenizer. */
  get model() {
    return this.#lm
  }

  /**
   * Continues a string, or answers chat messages; an array of prompts (strings, or conversations)
   * gives an array of answers, generated concurrently. Errors: `InvalidArg`, `QueueFull`, `Disposed`.
   * @param {string | TextGenerationMessage[] | Array<string | TextGenerationMessage[]>} input
   * @param {TextGenerationOptions} [options]
   * @returns {Promise<TextGenerationResult[] | TextGenerationResult[][]>}
   */
  async run(input, options = {}) {
    if (options === null || typeof options !== 'object' || Array.isArray(options)) {
      throw codedError(
        'InvalidArg',
        `TextGenerationPipeline.run: options: expected an object, got ${describe(options)}`,
      )
    }
    // returnFullText is read here; the rest goes to CausalLM.complete, whose bag names what it takes.
    const { returnFullText, ...generate } = /** @type {TextGenerationOptions} */ (options)
    const own = opt.read({ returnFullText }, OWN, 'TextGenerationPipeline.run: options', this.run)
    const full = own.returnFullText ?? true
    const one = async (/** @type {unknown} */ prompt) => {
      if (typeof prompt !== 'string' && !isMessages(prompt)) {
        throw codedError(
          'InvalidArg',
          `TextGenerationPipeline.run: expected a string or chat messages, got ${describe(prompt)}`,
          this.run,
        )
      }
      const messages = /** @type {TextGenerationMessage[]} */ (prompt)
      const { text } = await this.#lm.complete(/** @type {any} */ (prompt), generate)
      if (typeof prompt === 'string') return [{ generatedText: full ? prompt + text : text }]
      const turn = { role: 'assistant', content: text }
      return [{ generatedText: full ? [...messages, turn] : [turn] }]
    }
    const batch = Array.isArray(input) && (input.length === 0 || typeof input[0] === 'string' || isMessages(input[0]))
    if (batch && !isMessages(input)) return Promise.all(input.map(one))
    return one(input)
  }

  /** Frees the model; generations running end with `finishReason: 'aborted'`. */
  dispose() {
    this.#lm.dispose()
  }

  [Symbol.dispose]() {
    this.dispose()
  }
}

module.exports.TextGenerationPipeline = TextGenerationPipeline

// @ts-check
'use strict'
// torch.pipeline('token-classification', folder): transformers' TokenClassificationPipeline (NER,
// PII, part of speech) over a folder `torch-node export` wrote from a *ForTokenClassification
// checkpoint: the program returns each token's logits (padded to maxSequenceLength, kind
// 'token-classifier'); the softmax, the subword test, the aggregation strategies and the grouping
// of B-/I- tags follow transformers 5's postprocess step by step. Offsets are the tokenizer's, as
// JS string indices (UTF-16), so `text.slice(start, end)` is the entity.
const fs = require('node:fs')
const path = require('node:path')
const { codedError } = require('../errors')
const opt = require('../options')
const { encode, rowsOf, softmax, EncoderPipeline, CALL_OPTIONS, readTexts } = require('./logits')
const { tokensToString } = require('./token-strings')

/** @import { text, Encoding } from '../../index' */

// The public types below become index.d.ts's declarations (tools/lib-typings.js).
/**
 * One token (`aggregationStrategy` 'none': `entity`, `index`) or one group of tokens (the other
 * strategies: `entityGroup`, the B-/I- prefix dropped).
 * @typedef {object} TokenClassificationEntity
 * @property {string} [entity] The token's label (config.json's `id2label`), with 'none'.
 * @property {string} [entityGroup] The group's label without its B-/I- prefix, with the other strategies.
 * @property {number} score The label's probability (a group's: the mean of its tokens' or words').
 * @property {number} [index] The token's position in the model's input (special tokens counted), with 'none'.
 * @property {string} word The token, or the group's tokens joined as the tokenizer's decoder joins them.
 * @property {number} start Where it starts in the text, as a JS string index.
 * @property {number} end Where it ends (exclusive): `text.slice(start, end)`.
 */
/**
 * Options of `TokenClassificationPipeline.run`; any other key is refused (`InvalidArg`).
 * @typedef {object} TokenClassificationOptions
 * @property {'none' | 'simple' | 'first' | 'average' | 'max'} [aggregationStrategy] transformers':
 *   'none' (default) one entity per token; 'simple' adjacent tokens of one tag grouped; 'first',
 *   'average', 'max' each word's label from its first token, its tokens' mean scores or its best
 *   token, then grouped.
 * @property {string[]} [ignoreLabels] Labels (or groups) left out. Default `['O']`.
 * @property {number} [stride] Label all of a text longer than the model's `maxSequenceLength`, as
 *   transformers' `stride`: windows of `maxSequenceLength` tokens (special tokens included), each
 *   overlapping the last by `stride` tokens, their entities merged (of overlapping ones the longer,
 *   then the higher score). Not with aggregationStrategy 'none'. Without it a text is truncated.
 * @property {AbortSignal} [signal] Aborting rejects with `Aborted` while the call's requests are still queued.
 * @property {number} [timeoutMs] The longest a request may wait in the queue, in milliseconds (then `Timeout`).
 */
/** @typedef {{aggregationStrategy?: 'none' | 'simple' | 'first' | 'average' | 'max', ignoreLabels?: string[], stride?: number, signal?: AbortSignal, timeoutMs?: number}} RunOptions */
/** @typedef {Pick<Encoding, 'ids' | 'typeIds' | 'tokens' | 'offsets' | 'specialTokensMask'>} Window */
/** @typedef {{word: string, scores: number[], start: number, end: number, index: number, isSubword: boolean}} PreEntity */
/** @typedef {{entity: string, score: number, index?: number, word: string, start: number, end: number}} Entity */

const STRATEGIES = /** @type {const} */ (['none', 'simple', 'first', 'average', 'max'])
const RUN_OPTIONS = opt.bag({
  aggregationStrategy: opt.oneOf([...STRATEGIES]),
  ignoreLabels: opt.arrayOf(opt.string, 'labels'),
  stride: opt.integer({ min: 0 }),
  ...CALL_OPTIONS,
})

/** @param {number[]} xs The index of the first largest (numpy's argmax). */
const argmax = (xs) => xs.reduce((best, x, i) => (x > xs[best] ? i : best), 0)
/** @param {number[]} xs numpy's nanmean. */
const nanmean = (xs) => {
  const kept = xs.filter((x) => !Number.isNaN(x))
  return kept.length === 0 ? NaN : kept.reduce((s, x) => s + x, 0) / kept.length
}
/** @param {string} s Its length in code points, as Python's len. */
const codePoints = (s) => [...s].length

/**
 * transformers' get_tag: B-/I- and the tag ('I' for a label without prefix).
 * @param {string} name @returns {[string, string]}
 */
function tagOf(name) {
  if (name.startsWith('B-')) return ['B', name.slice(2)]
  if (name.startsWith('I-')) return ['I', name.slice(2)]
  return ['I', name]
}

/**
 * A text's whole encoding cut as the tokenizers crate's truncation with `stride` and overflowing
 * tokens cuts it: the content (between the `specials` special tokens the template adds, `before`
 * of them first) in windows of `length` tokens, each starting `length - stride` after the last,
 * until one reaches the end; each window between the same special tokens.
 * @param {Encoding} full @param {number} specials @param {number} length @param {number} stride
 * @returns {Window[]}
 */
function windowsOf(full, specials, length, stride) {
  let before = 0
  while (before < specials && full.specialTokensMask[before]) before++
  const end = full.ids.length - (specials - before)
  const content = end - before
  if (content <= length) return [full]
  /** @type {(a: any[], from: number, to: number) => any[]} */
  const cut = (a, from, to) => [...a.slice(0, before), ...a.slice(before + from, before + to), ...a.slice(end)]
  const windows = []
  for (let start = 0; ; start += length - stride) {
    const stop = Math.min(start + length, content)
    windows.push({
      ids: cut(full.ids, start, stop),
      typeIds: cut(full.typeIds, start, stop),
      tokens: cut(full.tokens, start, stop),
      offsets: cut(full.offsets, start, stop),
      specialTokensMask: cut(full.specialTokensMask, start, stop),
    })
    if (stop === content) return windows
  }
}

/**
 * transformers' aggregate_overlapping_entities: by start; of entities that overlap, the longer one,
 * then the higher score.
 * @param {TokenClassificationEntity[]} entities @returns {TokenClassificationEntity[]}
 */
function mergeOverlapping(entities) {
  if (entities.length === 0) return entities
  // stable, as Python's sorted
  const sorted = [...entities].sort((a, b) => a.start - b.start)
  const out = []
  let previous = sorted[0]
  for (const e of sorted) {
    if (previous.start <= e.start && e.start < previous.end) {
      const length = e.end - e.start
      const previousLength = previous.end - previous.start
      if (length > previousLength || (length === previousLength && e.score > previous.score)) previous = e
    } else {
      out.push(previous)
      previous = e
    }
  }
  out.push(previous)
  return out
}

/**
 * Token classification over a folder written by `npx torch-node export` from a
 * `*ForTokenClassification` checkpoint. Concurrent `run` calls share forwards. Made with
 * `torch.pipeline('token-classification', folder)` (or `'ner'`).
 */
class TokenClassificationPipeline extends EncoderPipeline {
  /** @type {string[]} */ #labels
  /** @type {string | null} */ #subwordPrefix
  /** @type {number | null} */ #unkId
  /** @type {any} */ #decoder

  /**
   * Throws `InvalidArg`: use `torch.pipeline('token-classification', folder)`.
   * @private
   * @param {symbol} token @param {text.SentenceEncoder} encoder @param {string} folder
   */
  constructor(token, encoder, folder) {
    super(token, encoder, 'token-classification', TokenClassificationPipeline)
    const manifest = /** @type {any} */ (encoder.manifest)
    this.#labels = manifest.labels
    this.#subwordPrefix = manifest.continuingSubwordPrefix ?? null
    this.#unkId = manifest.unkTokenId ?? null
    // The decoder joins a word's or group's token strings (transformers' convert_tokens_to_string).
    const tokenizer = JSON.parse(fs.readFileSync(path.join(folder, manifest.tokenizer || 'tokenizer.json'), 'utf8'))
    this.#decoder = tokenizer.decoder ?? null
  }

  /** `'token-classification'`. */
  get task() {
    return 'token-classification'
  }

  /**
   * The labels, in the order of the model's logits (config.json's `id2label`).
   * @returns {string[]}
   */
  get labels() {
    return [...this.#labels]
  }

  /**
   * Labels each token of one text, or of each text of an array: the entities (an array of them per
   * text for an array), in text order. Errors: `InvalidArg`, `QueueFull`, `Aborted`, `Timeout`, `Disposed`.
   * @param {string | string[]} input
   * @param {TokenClassificationOptions} [options]
   * @returns {Promise<TokenClassificationEntity[] | TokenClassificationEntity[][]>}
   */
  async run(input, options) {
    const name = 'TokenClassificationPipeline.run'
    const caller = this.run
    const { texts, batched } = readTexts(input, name, caller)
    /** @type {RunOptions} */
    const o = opt.read(options, RUN_OPTIONS, `${name}: options`, caller)
    const strategy = o.aggregationStrategy ?? 'none'
    const ignore = o.ignoreLabels ?? ['O']
    const windowed = o.stride !== undefined ? this.#windows(texts, strategy, o, name, caller) : undefined
    /** @type {Window[][]} */
    const windows = windowed
      ? await windowed
      : (
          await encode(
            this.encoder,
            texts.map((text) => ({ text })),
            o,
            name,
            caller,
          )
        ).map((e) => [e])
    // rowsOf reads ids and typeIds only
    const rows = await rowsOf(this.encoder, /** @type {any} */ (windows.flat()), o, name)
    const rowWidth = this.encoder.dim
    let at = 0
    const results = texts.map((text, t) => {
      const entities = windows[t].flatMap((window) => {
        const row = rows.subarray(at * rowWidth, ++at * rowWidth)
        return this.#aggregate(this.#preEntities(text, window, row), strategy)
          .map(this.#publicEntity)
          .filter((e) => !ignore.includes(e.entity ?? e.entityGroup ?? ''))
      })
      return windows[t].length > 1 ? mergeOverlapping(entities) : entities
    })
    return batched ? results : results[0]
  }

  /**
   * Each text's windows for `stride` (windowsOf over its untruncated encoding); InvalidArg as
   * transformers refuses: with aggregationStrategy 'none', or a stride the windows cannot step over.
   * @param {string[]} texts @param {string} strategy @param {RunOptions} o @param {string} name
   * @param {Function} caller @returns {Promise<Window[][]>}
   */
  async #windows(texts, strategy, o, name, caller) {
    const stride = /** @type {number} */ (o.stride)
    if (strategy === 'none') {
      throw codedError(
        'InvalidArg',
        `${name}: options.stride: labels all of a long text, which needs an aggregationStrategy other than 'none'`,
        caller,
      )
    }
    const specials = this.encoder.tokenizer.encode('').ids.length
    const length = this.encoder.maxSequenceLength - specials
    if (stride >= length) {
      throw codedError(
        'InvalidArg',
        `${name}: options.stride: expected less than ${length} (maxSequenceLength ${this.encoder.maxSequenceLength} ` +
          `less ${specials} special tokens), got ${stride}`,
        caller,
      )
    }
    const full = await encode(
      this.encoder,
      texts.map((text) => ({ text })),
      o,
      name,
      caller,
      // untruncated (logits.js' encode passes truncation on to the tokenizer)
      /** @type {any} */ (false),
    )
    return full.map((e) => windowsOf(e, specials, length, stride))
  }

  /**
   * transformers' gather_pre_entities: each non-special token's word, scores (softmax), offsets and
   * whether it continues a word.
   * @param {string} text @param {Window} encoding @param {Float32Array} row @returns {PreEntity[]}
   */
  #preEntities(text, encoding, row) {
    const width = this.#labels.length
    const { ids, tokens, offsets, specialTokensMask } = encoding
    /** @type {PreEntity[]} */
    const out = []
    for (let index = 0; index < ids.length; index++) {
      if (specialTokensMask[index]) continue
      const [start, end] = offsets[index]
      const wordRef = text.slice(start, end)
      let word = tokens[index]
      let isSubword =
        this.#subwordPrefix !== null
          ? codePoints(word) !== codePoints(wordRef)
          : start > 0 && !text.slice(start - 1, start + 1).includes(' ')
      if (ids[index] === this.#unkId) {
        word = wordRef
        isSubword = false
      }
      const scores = softmax(row.subarray(index * width, (index + 1) * width))
      out.push({ word, scores, start, end, index, isSubword })
    }
    return out
  }

  /**
   * transformers' aggregate: 'none' one entity per token, 'simple' those grouped, the word strategies
   * words first (aggregate_words), then grouped.
   * @param {PreEntity[]} pre @param {typeof STRATEGIES[number]} strategy @returns {Array<Entity | Entity & {group: true}>}
   */
  #aggregate(pre, strategy) {
    /** @type {Entity[]} */
    let entities
    if (strategy === 'none' || strategy === 'simple') {
      entities = pre.map((p) => {
        const i = argmax(p.scores)
        return { entity: this.#labels[i], score: p.scores[i], index: p.index, word: p.word, start: p.start, end: p.end }
      })
    } else {
      /** @type {PreEntity[][]} */
      const words = []
      for (const p of pre) {
        if (words.length > 0 && p.isSubword) words[words.length - 1].push(p)
        else words.push([p])
      }
      entities = words.map((w) => this.#aggregateWord(w, strategy))
    }
    return strategy === 'none' ? entities : this.#group(entities)
  }

  /**
   * transformers' aggregate_word: one word's label and score by `strategy`.
   * @param {PreEntity[]} tokens @param {'first' | 'average' | 'max'} strategy @returns {Entity}
   */
  #aggregateWord(tokens, strategy) {
    let scores
    if (strategy === 'first') scores = tokens[0].scores
    else if (strategy === 'max') {
      // the token whose best score is highest (the first of equals, as Python's max)
      scores = tokens.reduce((best, t) => (Math.max(...t.scores) > Math.max(...best.scores) ? t : best)).scores
    } else scores = tokens[0].scores.map((_, l) => nanmean(tokens.map((t) => t.scores[l])))
    const i = argmax(scores)
    return {
      entity: this.#labels[i],
      score: scores[i],
      word: tokensToString(
        this.#decoder,
        tokens.map((t) => t.word),
      ),
      start: tokens[0].start,
      end: tokens[tokens.length - 1].end,
    }
  }

  /**
   * transformers' group_entities: adjacent entities of one tag (a B- starts a new group) as one.
   * @param {Entity[]} entities @returns {Array<Entity & {group: true}>}
   */
  #group(entities) {
    /** @type {Entity[][]} */
    const groups = []
    for (const e of entities) {
      const last = groups.at(-1)
      const [bi, tag] = tagOf(e.entity)
      if (last !== undefined && tag === tagOf(last[last.length - 1].entity)[1] && bi !== 'B') last.push(e)
      else groups.push([e])
    }
    return groups.map((g) => {
      const label = g[0].entity
      return {
        group: /** @type {const} */ (true),
        entity: label.includes('-') ? label.slice(label.indexOf('-') + 1) : label,
        score: nanmean(g.map((e) => e.score)),
        word: tokensToString(
          this.#decoder,
          g.map((e) => e.word),
        ),
        start: g[0].start,
        end: g[g.length - 1].end,
      }
    })
  }

  /**
   * An entity in the shape `run` returns (transformers' keys in camelCase).
   * @param {Entity & {group?: true}} e @returns {TokenClassificationEntity}
   */
  #publicEntity = (e) =>
    e.group
      ? { entityGroup: e.entity, score: e.score, word: e.word, start: e.start, end: e.end }
      : { entity: e.entity, score: e.score, index: e.index, word: e.word, start: e.start, end: e.end }
}

// One assignment per name: tsc takes a class exported so as a type too (not from an object literal).
module.exports.TokenClassificationPipeline = TokenClassificationPipeline

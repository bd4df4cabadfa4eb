// @ts-check
'use strict'
// transformers' VitsTokenizer (MMS-TTS) in JS: a character vocabulary, no merges, so it is a few
// string passes: normalize (vocabulary words kept, every other character lower-cased), characters
// outside the vocabulary dropped, Python's strip(), the tokenizer's added tokens (pad, unk) split
// out (as PreTrainedTokenizer.tokenize does: each one id, no blanks around it), and the blank (id 0) between characters
// (add_blank). Characters are code points, as Python's str indexes them. Phonemizing checkpoints
// (espeak) are refused by python/export_tts.py; uroman romanizing is refused here for non-ASCII text.
const { codedError } = require('../errors')

/** Python's str.isspace() characters: what str.strip() removes (JS's trim differs on 5 of them). */
// eslint-disable-next-line no-control-regex -- Python counts the separators \x1c-\x1f as spaces
const PY_SPACE = /^[\t\n\v\f\r\x1c-\x1f \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]$/u

/** The tokenizer settings python/export_tts.py writes into manifest.json (`tokenizer`). */
class VitsTokenizer {
  /** @type {Map<string, number>} */ #vocab
  /** @type {string[]} */ #words
  /** @type {[string, number][]} */ #split
  #addBlank
  #normalize
  #isUroman
  #language
  #unkId
  #blankId = 0

  /**
   * @param {Record<string, number>} vocab vocab.json
   * @param {{ addBlank: boolean; normalize: boolean; isUroman: boolean; language?: string | null;
   *   unkId: number; splitTokens?: Record<string, number>; words?: string[] }} settings
   */
  constructor(vocab, settings) {
    this.#vocab = new Map(Object.entries(vocab))
    // Longest first: the one a prefix trie would match at a position.
    this.#split = Object.entries(settings.splitTokens ?? {}).sort((a, b) => b[0].length - a[0].length)
    // normalize_text's words: vocab.json's, then the added tokens, in Python's order (the manifest's
    // `words`: a JS object would put integer-like keys such as "1" first).
    this.#words = settings.words ?? [...Object.keys(vocab), ...this.#split.map(([t]) => t)]
    this.#addBlank = settings.addBlank
    this.#normalize = settings.normalize
    this.#isUroman = settings.isUroman
    this.#language = settings.language ?? null
    this.#unkId = settings.unkId
  }

  /**
   * The input ids of `text`, as `VitsTokenizer(text).input_ids` (no special tokens; empty when no
   * character is left). Throws `InvalidArg` for non-ASCII text with a uroman checkpoint.
   * @param {string} text
   * @param {Function} [caller]
   * @returns {number[]}
   */
  encode(text, caller) {
    let s = this.#normalize ? this.#lowerCase(text) : text
    if (this.#language === 'ron') s = s.replaceAll('ț', 'ţ')
    if (this.#isUroman && Array.from(s).some((c) => /** @type {number} */ (c.codePointAt(0)) > 0x7f)) {
      throw codedError(
        'InvalidArg',
        'the checkpoint reads romanized text (is_uroman): romanize non-ASCII text first (uroman)',
        caller,
      )
    }
    if (this.#normalize) s = pyStrip(Array.from(s).filter((c) => this.#vocab.has(c)))
    const ids = []
    for (const piece of this.#pieces(s)) {
      if (typeof piece === 'number') ids.push(piece)
      else for (const id of this.#characters(piece)) ids.push(id)
    }
    return ids
  }

  /** VitsTokenizer.normalize_text: vocabulary words kept as written, other characters lower-cased. @param {string} text */
  #lowerCase(text) {
    const chars = Array.from(text)
    let out = ''
    for (let i = 0; i < chars.length;) {
      const word = this.#words.find((w) => startsAt(chars, i, w))
      if (word !== undefined) {
        out += word
        i += Array.from(word).length
      } else {
        out += chars[i].toLowerCase()
        i += 1
      }
    }
    return out
  }

  /**
   * The text cut at the special tokens (their ids) into runs of characters.
   * @param {string} s @returns {(string | number)[]}
   */
  #pieces(s) {
    if (this.#split.length === 0) return s === '' ? [] : [s]
    const out = []
    let run = ''
    for (let i = 0; i < s.length;) {
      const hit = this.#split.find(([t]) => s.startsWith(t, i))
      if (hit) {
        if (run) out.push(run)
        run = ''
        out.push(hit[1])
        i += hit[0].length
      } else {
        run += s[i]
        i += 1
      }
    }
    if (run) out.push(run)
    return out
  }

  /** VitsTokenizer._tokenize: one id a character, the blank around each. @param {string} run */
  #characters(run) {
    const ids = Array.from(run, (c) => this.#vocab.get(c) ?? this.#unkId)
    if (!this.#addBlank) return ids
    const out = [this.#blankId]
    for (const id of ids) out.push(id, this.#blankId)
    return out
  }
}

/** @param {string[]} chars @param {number} i @param {string} word */
function startsAt(chars, i, word) {
  let k = i
  for (const c of word) if (chars[k++] !== c) return false
  return true
}

/** Python's str.strip() over code points. @param {string[]} chars */
function pyStrip(chars) {
  let a = 0
  let b = chars.length
  while (a < b && PY_SPACE.test(chars[a])) a++
  while (b > a && PY_SPACE.test(chars[b - 1])) b--
  return chars.slice(a, b).join('')
}

module.exports.VitsTokenizer = VitsTokenizer

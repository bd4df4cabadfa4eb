// @ts-check
'use strict'
// Token strings joined back into text as the tokenizer's decoder (tokenizer.json's `decoder`) joins
// them: transformers' convert_tokens_to_string for a fast tokenizer, which token-classification
// uses for a word's or an entity group's `word` (whose parts may be words already joined, or the
// text under an [UNK], so ids cannot be decoded instead). The decoders of the `tokenizers` crate
// (decoders/*.rs), each a step over the list of strings; an unknown one joins the strings as they are.

// tokenizers' decoders/wordpiece.rs `cleanup` (transformers' clean_up_tokenization).
const CLEANUP = [
  [' .', '.'],
  [' ?', '?'],
  [' !', '!'],
  [' ,', ','],
  [" ' ", "'"],
  [" n't", "n't"],
  [" 'm", "'m"],
  [' do not', " don't"],
  [" 's", "'s"],
  [" 've", "'ve"],
  [" 're", "'re"],
]
/** @param {string} s */
const cleanup = (s) => CLEANUP.reduce((out, [from, to]) => out.replaceAll(from, to), s)

/** GPT-2's byte-to-character table (tokenizers' pre_tokenizers/byte_level.rs bytes_char), reversed. */
const CHAR_TO_BYTE = (() => {
  const bytes = []
  for (let b = 33; b <= 126; b++) bytes.push(b)
  for (let b = 161; b <= 172; b++) bytes.push(b)
  for (let b = 174; b <= 255; b++) bytes.push(b)
  const chars = [...bytes]
  let n = 0
  for (let b = 0; b < 256; b++) {
    if (!bytes.includes(b)) {
      bytes.push(b)
      chars.push(256 + n++)
    }
  }
  return new Map(chars.map((c, i) => [String.fromCodePoint(c), bytes[i]]))
})()

/**
 * One decoder step over the token strings (tokenizers' Decoder::decode_chain).
 * @param {any} decoder @param {string[]} tokens @returns {string[]}
 */
function decodeChain(decoder, tokens) {
  switch (decoder?.type) {
    case 'Sequence':
      return (decoder.decoders ?? []).reduce(
        (/** @type {string[]} */ t, /** @type {any} */ d) => decodeChain(d, t),
        tokens,
      )
    case 'WordPiece': {
      const prefix = decoder.prefix ?? '##'
      return tokens.map((token, i) => {
        const joined = i === 0 ? token : token.startsWith(prefix) ? token.slice(prefix.length) : ` ${token}`
        return decoder.cleanup === false ? joined : cleanup(joined)
      })
    }
    case 'ByteLevel': {
      // a token all of whose characters are in the table is those bytes, any other its UTF-8 (byte_level.rs)
      const bytes = tokens.flatMap((token) => {
        const mapped = [...token].map((c) => CHAR_TO_BYTE.get(c))
        return mapped.every((b) => b !== undefined) ? mapped : [...Buffer.from(token)]
      })
      return [Buffer.from(bytes).toString('utf8')]
    }
    case 'Metaspace': {
      const replacement = decoder.replacement ?? '▁'
      const strip = decoder.prepend_scheme !== 'never' && decoder.add_prefix_space !== false
      return tokens.map((token, i) => {
        const text = token.replaceAll(replacement, ' ')
        return i === 0 && strip && text.startsWith(' ') ? text.slice(1) : text
      })
    }
    case 'Replace':
      return typeof decoder.pattern?.String === 'string'
        ? tokens.map((t) => t.replaceAll(decoder.pattern.String, decoder.content))
        : tokens
    case 'Fuse':
      return [tokens.join('')]
    case 'Strip':
      return tokens.map((t) => {
        const chars = [...t]
        const start = Math.min(decoder.start ?? 0, chars.length)
        return chars.slice(start, Math.max(start, chars.length - (decoder.stop ?? 0))).join('')
      })
    default:
      return tokens
  }
}

/**
 * `tokens` as one string, as the tokenizer's decoder makes it (joined by spaces without one, as transformers).
 * @param {any} decoder tokenizer.json's `decoder` (null: none) @param {string[]} tokens
 */
const tokensToString = (decoder, tokens) => (decoder == null ? tokens.join(' ') : decodeChain(decoder, tokens).join(''))

module.exports = { tokensToString }

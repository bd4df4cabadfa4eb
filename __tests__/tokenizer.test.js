'use strict'
// torch.text.Tokenizer: parity with Python's `tokenizers` (ids, tokens, offsets mapped to JS
// indices, decoded strings) on WordPiece (all-MiniLM-L6-v2), byte-level BPE (SmolLM2) and
// Unigram tokenizers; batches and tensors as transformers makes them; chat templates as
// transformers' apply_chat_template renders them; hostile input in child processes.
// Goldens: models/make_tokenizer_goldens.py (npm run models); without them those tests skip.
const { describe, test } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { childOut } = require('./helpers')
const torch = require('..')

const { Tokenizer } = torch.text
const ROOT = path.join(__dirname, '..')
const DIR = path.join(ROOT, 'models', 'golden', 'tokenizers')
const GOLDENS = path.join(DIR, 'goldens.json')
const goldens = fs.existsSync(GOLDENS) ? JSON.parse(fs.readFileSync(GOLDENS, 'utf8')) : null
const skip = goldens ? false : 'no tokenizer goldens: run .libtorch/bin/python models/make_tokenizer_goldens.py'
const NAMES = goldens ? Object.keys(goldens.tokenizers) : []

/** A 2-D int64 tensor as rows of JS numbers. */
const rows = (t) => t.toArray().map((r) => r.map(Number))
const load = (name) => Tokenizer.fromFile(path.join(DIR, name, 'tokenizer.json'))

/** What a golden record and an Encoding share, in the Encoding's terms. */
function expected(rec, { tokens = true } = {}) {
  const out = {
    ids: rec.ids,
    offsets: rec.offsets_utf16,
    attentionMask: rec.attention_mask,
    typeIds: rec.type_ids,
    specialTokensMask: rec.special_tokens_mask,
  }
  if (tokens && rec.tokens) out.tokens = rec.tokens
  return out
}

function actual(enc, want) {
  return Object.fromEntries(Object.keys(want).map((k) => [k, enc[k]]))
}

/** Whether `s` holds a surrogate half without its other half. */
const hasLoneSurrogate = (s) => /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/.test(s)

describe('Tokenizer: parity with Python tokenizers', { skip }, () => {
  for (const name of NAMES) {
    const g = goldens?.tokenizers[name]
    describe(name, () => {
      const tok = load(name)

      test('vocabulary size', () => {
        assert.equal(tok.vocabSize, g.vocab_size)
      })

      test('the corpus: ids, tokens, JS offsets, masks, decoded text', () => {
        for (const rec of g.cases) {
          const enc = tok.encode(rec.text)
          const want = expected(rec)
          assert.deepEqual(actual(enc, want), want, `${name}/${rec.name}`)
          assert.deepEqual(
            tok.encode(rec.text, { addSpecialTokens: false }).ids,
            rec.ids_no_special,
            `${name}/${rec.name} without special tokens`,
          )
          assert.equal(tok.decode(enc.ids, { skipSpecialTokens: true }), rec.decoded, `${name}/${rec.name} decoded`)
          assert.equal(tok.decode(enc.ids), rec.decoded_with_special, `${name}/${rec.name} decoded with special tokens`)
        }
      })

      test('offsets are JS indices: each token slices whole characters out of its text', () => {
        for (const rec of g.cases) {
          const enc = tok.encode(rec.text)
          enc.offsets.forEach(([start, end], i) => {
            assert.ok(
              start >= 0 && start <= end && end <= rec.text.length,
              `${name}/${rec.name} token ${i}: [${start}, ${end})`,
            )
            assert.ok(
              !hasLoneSurrogate(rec.text.slice(start, end)),
              `${name}/${rec.name} token ${i} cuts a surrogate pair`,
            )
          })
        }
        // Where the tokenizer keeps the text as it is, the slice is the token itself.
        if (name === 'minilm') {
          const text = 'hello 🍕 日本'
          const enc = tok.encode(text, { addSpecialTokens: false })
          assert.deepEqual(
            enc.offsets.map(([s, e]) => text.slice(s, e)),
            ['hello', '[UNK]' === enc.tokens[1] ? '🍕' : enc.tokens[1], '日', '本'],
          )
        }
      })

      test('pairs: type ids, and offsets into each text', () => {
        for (const rec of g.pairs) {
          const enc = tok.encode(rec.text, { pair: rec.pair })
          const want = expected(rec)
          assert.deepEqual(actual(enc, want), want, `${name}/${rec.name}`)
        }
      })

      test('truncation at the limit, by each strategy', () => {
        for (const rec of g.truncation) {
          const options = { maxLength: rec.max_length, truncation: rec.strategy }
          if (rec.pair !== null) options.pair = rec.pair
          if (rec.error) {
            assert.throws(
              () => tok.encode(rec.text, options),
              { code: 'InvalidArg' },
              `${name} ${JSON.stringify(options)}`,
            )
            continue
          }
          const want = expected(rec)
          assert.deepEqual(actual(tok.encode(rec.text, options), want), want, `${name} ${JSON.stringify(options)}`)
        }
      })

      test('encodeBatch pads as transformers does (its pad token and side; longest, to a multiple of 8)', async () => {
        for (const b of g.batches) {
          const encs = await tok.encodeBatch(b.texts, {
            padding: 'longest',
            padToMultipleOf: b.pad_to_multiple_of ?? undefined,
          })
          assert.deepEqual(
            encs.map((e) => e.ids),
            b.ids,
          )
          assert.deepEqual(
            encs.map((e) => e.attentionMask),
            b.attention_mask,
          )
          const tensors = await tok.encodeBatch(b.texts, {
            returnTensors: true,
            padToMultipleOf: b.pad_to_multiple_of ?? undefined,
          })
          assert.equal(tensors.inputIds.dtype, 'int64')
          assert.deepEqual(rows(tensors.inputIds), b.ids)
          assert.deepEqual(rows(tensors.attentionMask), b.attention_mask)
          if (b.type_ids) assert.deepEqual(rows(tensors.tokenTypeIds), b.type_ids)
        }
      })

      test("returnTensors gives what transformers feeds a model (padding 'longest', truncation, maxLength)", async () => {
        const b = g.transformers_batch
        const t = await tok.encodeBatch(b.texts, { returnTensors: true, truncation: true, maxLength: b.max_length })
        assert.deepEqual(rows(t.inputIds), b.input_ids)
        assert.deepEqual(rows(t.attentionMask), b.attention_mask)
        if (b.token_type_ids) assert.deepEqual(rows(t.tokenTypeIds), b.token_type_ids)
        assert.deepEqual(
          t.lengths,
          b.attention_mask.map((m) => m.reduce((x, y) => x + y, 0)),
        )
      })

      test('encodeBatch of the corpus equals encode of each text, pairs and truncation too', async () => {
        // Enough texts for several chunks per thread (crates/core/src/text/tokenizer.rs joins their columns).
        const texts = [...g.cases, ...g.cases, ...g.cases].map((c) => c.text)
        const encs = await tok.encodeBatch(texts)
        assert.equal(encs.length, texts.length)
        encs.forEach((e, i) => assert.deepEqual(e.toJSON(), tok.encode(texts[i]).toJSON(), `text ${i}`))
        const pairs = g.pairs.map((p) => p.pair)
        const options = { truncation: true, maxLength: 12 }
        const paired = await tok.encodeBatch(
          g.pairs.map((p) => p.text),
          { pair: pairs, ...options },
        )
        paired.forEach((e, i) => {
          const want = tok.encode(g.pairs[i].text, { pair: pairs[i], ...options }).toJSON()
          assert.deepEqual(e.toJSON(), want, `pair ${i}`)
        })
      })
    })
  }

  test('an Encoding: its fields as plain arrays, made once; JSON and console.log show them', async () => {
    const tok = load('smollm2')
    const [a, b] = await tok.encodeBatch(['Hello 🍕 world', 'Émoji and 日本語'])
    const fields = ['ids', 'tokens', 'offsets', 'attentionMask', 'typeIds', 'specialTokensMask']
    for (const e of [a, b, tok.encode('Hello 🍕 world')]) {
      for (const k of fields) {
        assert.ok(Array.isArray(e[k]), k)
        assert.equal(e[k], e[k], `${k} is made once`)
        assert.equal(e[k].length, e.ids.length, k)
      }
      assert.deepEqual(Object.keys(e.toJSON()), fields)
      assert.deepEqual(JSON.parse(JSON.stringify(e)), e.toJSON())
      assert.match(require('node:util').inspect(e), /^Encoding \{\n? *ids: \[/)
    }
    assert.deepEqual(a.toJSON(), tok.encode('Hello 🍕 world').toJSON())
    assert.deepEqual(b.tokens.join(''), tok.encode('Émoji and 日本語').tokens.join(''))
    // Tokens holding part of the pizza's bytes span the whole character, as in Python.
    assert.deepEqual(
      a.offsets.map(([s, e]) => 'Hello 🍕 world'.slice(s, e)),
      ['Hello', ' 🍕', '🍕', '🍕', ' world'],
    )
    assert.deepEqual(a.tokens, ['Hello', 'ĠðŁ', 'į', 'ķ', 'Ġworld'])
    a.ids.push(0) // the arrays are the caller's, as a plain object's would be
    assert.equal(a.ids.at(-1), 0)
    assert.deepEqual(await tok.encodeBatch([]), [])
  })

  test('decodeBatch and Tensor ids', () => {
    const tok = load('smollm2')
    const texts = ['Hello world', 'Émoji 🍕 and 日本語']
    const ids = texts.map((t) => tok.encode(t).ids)
    assert.deepEqual(tok.decodeBatch(ids), texts)
    assert.equal(tok.decode(torch.tensor(BigInt64Array.from(ids[1], BigInt))), texts[1])
  })
})

describe('Tokenizer: a long text truncated is encoded from its start, to the same tokens', { skip }, () => {
  // Over 16 KiB, a text cut to maxLength tokens is encoded only up to a start that already
  // yields them (crates/core/src/text/prefix.rs); the result must be what encoding it whole
  // and truncating gives (ids, offsets, masks), which short texts still do.
  const unit =
    'The quick brown fox 🍕 jumps over 12,345 lazy dogs.  Naïve café — «quoted» [SEP] <|im_start|>\n' +
    'tabs\there; 中文字符 and ok. x̃ combining,   three spaces. '
  const texts = {
    prose: unit.repeat(300),
    'no spaces (never cut: encoded whole)': '中文字符'.repeat(6000),
    'a space run first': ' '.repeat(20_000) + unit.repeat(100),
  }
  const fields = (e) => ({ ids: e.ids, offsets: e.offsets, specialTokensMask: e.specialTokensMask, tokens: e.tokens })
  const head = (e, n) => Object.fromEntries(Object.entries(fields(e)).map(([k, v]) => [k, v.slice(0, n)]))

  for (const name of ['minilm', 'smollm2', 'unigram']) {
    test(`${name}: equal to the whole text's first tokens, with and without special tokens`, () => {
      const tok = load(name)
      for (const [what, text] of Object.entries(texts)) {
        const whole = tok.encode(text, { addSpecialTokens: false })
        for (const maxLength of [1, 7, 128, 512, 2000]) {
          const cut = tok.encode(text, { maxLength, addSpecialTokens: false })
          assert.deepEqual(fields(cut), head(whole, maxLength), `${what}, maxLength ${maxLength}`)
          // With special tokens: as the short start of the text (under 16 KiB, encoded whole) gives.
          const short = text.slice(0, 12_000)
          if (tok.encode(short, { addSpecialTokens: false }).ids.length > maxLength + 8) {
            const withSpecials = tok.encode(text, { maxLength })
            assert.deepEqual(fields(withSpecials), fields(tok.encode(short, { maxLength })), `${what}, ${maxLength}`)
          }
        }
      }
    })
  }
})

describe('Tokenizer: chat templates equal transformers apply_chat_template', { skip }, () => {
  for (const c of goldens?.chat ?? []) {
    const label = `${c.tokenizer}/${c.template}/${c.conversation}${c.add_generation_prompt ? '+gen' : ''}${c.tools ? '+tools' : ''}`
    test(label, () => {
      const tok = load(c.tokenizer)
      const options = { addGenerationPrompt: c.add_generation_prompt }
      if (c.tools) options.tools = c.tools
      if (c.chat_template) options.chatTemplate = c.chat_template
      if (c.error) {
        assert.throws(() => tok.applyChatTemplate(c.messages, options), { code: 'InvalidArg' })
      } else {
        assert.equal(tok.applyChatTemplate(c.messages, options), c.text)
      }
    })
  }
})

describe('Tokenizer: loading, special tokens, options', { skip }, () => {
  test('fromJSON takes a string or a Buffer, and tokenizer_config.json as options.config', () => {
    const file = path.join(DIR, 'unigram', 'tokenizer.json')
    const config = fs.readFileSync(path.join(DIR, 'unigram', 'tokenizer_config.json'))
    const a = Tokenizer.fromJSON(fs.readFileSync(file, 'utf8'))
    const b = Tokenizer.fromJSON(fs.readFileSync(file), { config })
    assert.deepEqual(a.encode('Hello world').ids, b.encode('Hello world').ids)
    assert.equal(a.padToken, null) // Unigram knows its unk token, not its pad token
    assert.equal(a.unkToken, '<unk>')
    assert.equal(b.padToken, '<pad>')
    assert.equal(b.bosToken, '<s>')
    assert.equal(b.eosToken, '</s>')
    assert.equal(b.modelMaxLength, 64)
    const c = Tokenizer.fromJSON(fs.readFileSync(file), { config: JSON.parse(config) })
    assert.equal(c.modelMaxLength, 64)
  })

  test('special tokens by role from tokenizer_config.json; ids both ways', () => {
    const tok = load('minilm')
    assert.deepEqual(
      { pad: tok.padToken, unk: tok.unkToken, bos: tok.bosToken, eos: tok.eosToken },
      { pad: '[PAD]', unk: '[UNK]', bos: null, eos: null },
    )
    assert.equal(tok.specialTokens().clsToken, '[CLS]')
    assert.equal(tok.tokenToId('[CLS]'), 101)
    assert.equal(tok.idToToken(101), '[CLS]')
    assert.equal(tok.tokenToId('no-such-token-here'), null)
    assert.equal(tok.idToToken(10 ** 9), null)
    assert.equal(tok.modelMaxLength, 512)
    const smol = load('smollm2')
    assert.equal(smol.eosToken, '<|im_end|>')
    assert.match(smol.chatTemplate, /im_start/)
  })

  test("left padding from padding_side; 'maxLength' padding; 'ragged' tensors for the Batcher", async () => {
    const tok = load('unigram') // its config says padding_side 'left', model_max_length 64
    const texts = ['Hello', 'Hello world, hello again']
    const { inputIds, attentionMask, lengths } = await tok.encodeBatch(texts, { returnTensors: true })
    const [short, long] = inputIds.toArray().map((r) => r.map(Number))
    assert.equal(short.length, long.length)
    const pad = tok.tokenToId('<pad>')
    assert.equal(short[0], pad)
    assert.deepEqual(short.slice(short.length - lengths[0]), tok.encode(texts[0]).ids)
    assert.deepEqual(
      attentionMask
        .toArray()[0]
        .map(Number)
        .slice(0, short.length - lengths[0])
        .filter((x) => x !== 0),
      [],
    )
    const fixed = await tok.encodeBatch(texts, { returnTensors: true, padding: 'maxLength', maxLength: 20 })
    assert.deepEqual(fixed.inputIds.shape, [2, 20])
    const ragged = await tok.encodeBatch(texts, { returnTensors: 'ragged' })
    assert.deepEqual(
      ragged.inputIds.map((t) => t.shape),
      [
        [1, lengths[0]],
        [1, lengths[1]],
      ],
    )
    assert.deepEqual(
      ragged.inputIds.map((t) => t.toArray()[0].map(Number)),
      texts.map((t) => tok.encode(t).ids),
    )
    assert.deepEqual(ragged.lengths, lengths)
  })

  test('maxLength alone truncates (as transformers); truncation needs a length', () => {
    const tok = load('minilm')
    assert.equal(tok.encode('a b c d e f g', { maxLength: 4 }).ids.length, 4)
    assert.equal(tok.encode('a b c d e f g', { truncation: false, maxLength: 4 }).ids.length, 9)
    assert.equal(tok.encode('word '.repeat(600), { truncation: true }).ids.length, 512) // model_max_length
    const unigram = Tokenizer.fromJSON(fs.readFileSync(path.join(DIR, 'unigram', 'tokenizer.json')))
    assert.throws(() => unigram.encode('x', { truncation: true }), {
      code: 'InvalidArg',
      message: /needs options.maxLength/,
    })
  })

  test('unknown option keys and bad values are InvalidArg', async () => {
    const tok = load('minilm')
    const bad = [
      () => tok.encode('x', { maxLenght: 3 }),
      () => tok.encode('x', { truncation: 'sideways' }),
      () => tok.encode('x', { maxLength: -1 }),
      () => tok.encode('x', { pair: 3 }),
      () => tok.encode(42),
      () => tok.decode([1, -2]),
      () => tok.decode([1.5]),
      () => tok.decode('1 2'),
      () => tok.decode(torch.ones([2])),
      () => tok.decode([1], { skipSpecial: true }),
      () => tok.applyChatTemplate('hi'),
      () => tok.applyChatTemplate([{ role: 'user', content: 'x' }]), // no template
      () => tok.applyChatTemplate(['x'], { chatTemplate: '{{ messages }}' }),
      () => tok.applyChatTemplate([{ f: () => 1 }], { chatTemplate: '{{ messages }}' }),
      () => Tokenizer.fromFile(42),
    ]
    for (const f of bad) assert.throws(f, { code: 'InvalidArg' }, f.toString())
    for (const options of [
      { padding: 'shortest' },
      { returnTensors: 'numpy' },
      { pair: ['only one'] },
      { returnTensors: 'ragged', padding: 'longest' },
      { signal: 'x' },
      { padding: 'maxLength' },
    ]) {
      await assert.rejects(
        tok.encodeBatch(['a', 'b'], options.padding === 'maxLength' ? { ...options, maxLength: 0 } : options),
        { code: 'InvalidArg' },
        JSON.stringify(options),
      )
    }
    await assert.rejects(tok.encodeBatch('not an array'), { code: 'InvalidArg' })
    await assert.rejects(tok.encodeBatch(['ok', 7]), { code: 'InvalidArg', message: /texts\[1\]: expected a string/ })
    await assert.rejects(tok.encodeBatch(['a', 'b c d'], { returnTensors: true, padding: false }), {
      code: 'ShapeMismatch',
    })
    assert.throws(() => new Tokenizer(), { code: 'InvalidArg' })
  })

  test('an aborted signal rejects encodeBatch with Aborted; dispose makes later calls Disposed', async () => {
    const tok = load('minilm')
    const ac = new AbortController()
    ac.abort()
    await assert.rejects(tok.encodeBatch(['a'], { signal: ac.signal }), { code: 'Aborted' })
    tok.dispose()
    assert.equal(tok.isDisposed, true)
    assert.throws(() => tok.encode('x'), { code: 'Disposed' })
    await assert.rejects(tok.encodeBatch(['x']), { code: 'Disposed' })
  })
})

/** Runs `source` in a child Node (with `torch`, `DIR`, `out(value)`, `caught(f)`); returns what it passed to `out`. */
function child(source, { timeout = 120_000 } = {}) {
  const code = `
    const torch = require(${JSON.stringify(ROOT)})
    const { Tokenizer } = torch.text
    const DIR = ${JSON.stringify(DIR)}
    const path = require('node:path')
    const out = (v) => process.stdout.write('\\nOUT ' + JSON.stringify(v) + '\\n')
    const caught = async (f) => { try { const v = await f(); return { value: typeof v === 'string' ? v.length : v } } catch (e) { return { code: e.code, message: e.message } } }
    ;(async () => { ${source} })().catch((e) => { console.error(e); process.exitCode = 1 })`
  return childOut(code, { timeout })
}

describe('Tokenizer: hostile input ends in coded errors, never a crash', { skip }, () => {
  test('lone surrogates in texts, pairs, batches, tokens and chat messages', () => {
    const r = child(`
      const tok = Tokenizer.fromFile(path.join(DIR, 'smollm2'))
      out([
        await caught(() => tok.encode('abc\\ud83d')),
        await caught(() => tok.encode('ok', { pair: '\\udc00x' })),
        await caught(() => tok.encodeBatch(['fine', 'bad \\ud800 one'])),
        await caught(() => tok.tokenToId('\\udfff')),
        await caught(() => tok.applyChatTemplate([{ role: 'user', content: '\\ud800' }])),
      ])`)
    for (const e of r) {
      assert.equal(e.code, 'InvalidArg', JSON.stringify(e))
      assert.match(e.message, /lone surrogate/)
    }
  })

  test('10 MB strings: encoded (sync and on the executor) without a crash', () => {
    // Whole (no maxLength) and cut; a 10 MB run of spaces (no cut: WordPiece drops it) and a
    // 1 MB one through byte-level BPE, which takes it as one piece (10 MB of it: 12 s).
    const r = child(`
      const tok = Tokenizer.fromFile(path.join(DIR, 'minilm'))
      const big = 'The quick brown fox 🍕 jumps. '.repeat(350_000) // ≈ 10.5 M UTF-16 units
      const enc = tok.encode(big, { maxLength: 512 })
      const whole = tok.encode(big.slice(0, 1 << 20))
      const spaces = tok.encode(' '.repeat(10 << 20), { maxLength: 8 })
      const smol = Tokenizer.fromFile(path.join(DIR, 'smollm2'))
      const batch = await smol.encodeBatch([' '.repeat(1 << 20), big], { returnTensors: true, maxLength: 8 })
      out({
        length: enc.ids.length,
        last: enc.offsets[510][1] <= big.length,
        whole: whole.ids.length > 200_000,
        spaces: spaces.ids.length,
        shape: batch.inputIds.shape,
      })`)
    assert.deepEqual(r, { length: 512, last: true, whole: true, spaces: 2, shape: [2, 8] })
  })

  test('non-string items, malformed and truncated tokenizer.json, a missing file', () => {
    const r = child(`
      const fs = require('node:fs')
      const json = fs.readFileSync(path.join(DIR, 'minilm', 'tokenizer.json'), 'utf8')
      const tok = Tokenizer.fromJSON(json)
      out([
        await caught(() => tok.encodeBatch(['a', null])),
        await caught(() => tok.encodeBatch([{ toString() { return 'x' } }])),
        await caught(() => tok.decodeBatch([[1, 2], 'x'])),
        await caught(() => Tokenizer.fromJSON(json.slice(0, json.length / 2))),
        await caught(() => Tokenizer.fromJSON('{"model": {"type": "WordPiece"}}')),
        await caught(() => Tokenizer.fromJSON('null')),
        await caught(() => Tokenizer.fromJSON(Buffer.from([0xff, 0xfe, 0x00]))),
        await caught(() => Tokenizer.fromJSON(json, { config: '{not json' })),
        await caught(() => Tokenizer.fromFile('/nonexistent/tokenizer.json')),
      ])`)
    assert.deepEqual(
      r.slice(0, 3).map((e) => e.code),
      ['InvalidArg', 'InvalidArg', 'InvalidArg'],
    )
    for (const e of r.slice(3)) assert.equal(e.code, 'ModelLoadError', JSON.stringify(e))
  })

  test('templates that raise, fail, loop or recurse', () => {
    const r = child(`
      const tok = Tokenizer.fromFile(path.join(DIR, 'smollm2'))
      const msgs = [{ role: 'user', content: 'hi' }]
      const t = (chatTemplate) => caught(() => tok.applyChatTemplate(msgs, { chatTemplate }))
      out([
        await t("{{ raise_exception('Conversation roles must alternate user/assistant') }}"),
        await t('{% for %}'),
        await t('{{ messages[0].content.nosuchmethod() }}'),
        await t('{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}'),
        await t('{{ strftime_now("%Q") }}'),
        await t('{{ strftime_now("%Y") | length }}'),
      ])`)
    assert.deepEqual(r[0], {
      code: 'InvalidArg',
      message: 'chat template: Conversation roles must alternate user/assistant',
    })
    for (const e of r.slice(1, 5)) assert.equal(e.code, 'InvalidArg', JSON.stringify(e))
    assert.deepEqual(r[5], { value: 1 }) // "4": a four-digit year
  })
})

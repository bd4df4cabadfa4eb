'use strict'
// torch.pipeline's zero-shot-classification, token-classification and fill-mask (issue 50) equal
// to transformers 5's own pipeline() on the same folders (models/make_pipeline_models.py's goldens:
// random-weight BERT, DistilBERT and RoBERTa heads, RoBERTa's with a byte-level BPE tokenizer, some
// exported as .pt2, some as TorchScript): labels, words and spans exactly (spans as JS string
// indices, the goldens' converted from Python's code points), scores within 1e-5; concurrent calls
// batched; options and bad input as coded errors.
const { describe, test, before, after, beforeEach, afterEach } = require('node:test')
const assert = require('node:assert/strict')
const { spawnSync } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')
const torch = require('..')
const { coded } = require('./helpers')
const { DIR, GOLDENS, TIMEOUT, TOLERANCE, assertQueueAbortDispose } = require('./pipeline-helpers')

const golden = fs.existsSync(GOLDENS) ? JSON.parse(fs.readFileSync(GOLDENS, 'utf8')) : null
const SKIP = !golden?.['mlm-roberta']
  ? 'no pipeline models: run `node tools/models.js --lazy` (models/make_pipeline_models.py)'
  : typeof torch.pipeline !== 'function'
    ? 'torch.pipeline is not wired in index.js'
    : false

/** Python's snake_case keys as the pipelines' camelCase. */
const camel = (k) => k.replace(/_([a-z])/g, (_, c) => c.toUpperCase())

// The largest score difference seen (each test reports its own as a diagnostic).
let worst = 0

/** `got` equal to Python's `want` (keys camelCased): scores within TOLERANCE, the rest exactly. */
function assertClose(got, want, what) {
  if (Array.isArray(want)) {
    assert.ok(Array.isArray(got), `${what}: expected an array, got ${JSON.stringify(got)}`)
    assert.equal(got.length, want.length, `${what}: length (${JSON.stringify(got)})`)
    want.forEach((w, i) => assertClose(got[i], w, `${what}[${i}]`))
  } else if (want !== null && typeof want === 'object') {
    const keys = Object.keys(want).map(camel)
    assert.deepEqual(Object.keys(got).sort(), keys.sort(), `${what}: keys`)
    for (const [k, v] of Object.entries(want)) assertClose(got[camel(k)], v, `${what}.${camel(k)}`)
  } else if (typeof want === 'number' && /(score|\])$/.test(what)) {
    assert.ok(Math.abs(got - want) <= TOLERANCE, `${what}: ${got} vs ${want}`)
    worst = Math.max(worst, Math.abs(got - want))
  } else {
    assert.equal(got, want, what)
  }
}

describe('torch.pipeline: zero-shot, token classification, fill-mask', { skip: SKIP }, () => {
  const g = golden
  const pipelines = {}
  before(async () => {
    const made = await Promise.all(
      [
        ['nli-bert', 'zero-shot-classification'],
        ['nli-distilbert', 'zero-shot-classification'],
        ['ner-bert', 'token-classification'],
        ['ner-distilbert', 'ner'],
        ['mlm-bert', 'fill-mask'],
        ['mlm-distilbert', 'fill-mask'],
        ['ner-roberta', 'token-classification'],
        ['mlm-roberta', 'fill-mask'],
      ].map(async ([name, task]) => [name, await torch.pipeline(task, path.join(DIR, name))]),
    )
    Object.assign(pipelines, Object.fromEntries(made))
  })
  after(() => Object.values(pipelines).forEach((p) => p.dispose()))
  beforeEach(() => (worst = 0))
  afterEach((t) => t.diagnostic(`largest score difference from Python: ${worst.toExponential(2)}`))

  for (const name of ['nli-bert', 'nli-distilbert']) {
    test(`zero-shot-classification (${name}): as transformers' pipeline()`, TIMEOUT, async () => {
      const p = pipelines[name]
      const want = g[name]
      const { zeroShotTexts: texts, zeroShotLabels: labels } = g.inputs
      assert.equal(p.task, 'zero-shot-classification')
      for (const [i, text] of texts.entries()) {
        assertClose(await p.run(text, { candidateLabels: labels }), want.default[i], `default[${i}]`)
        assertClose(await p.run(text, { candidateLabels: labels, multiLabel: true }), want.multiLabel[i], `multi[${i}]`)
      }
      const template = 'The topic of this text is {}.'
      assertClose(
        await p.run(texts[0], { candidateLabels: labels, hypothesisTemplate: template }),
        want.template,
        'template',
      )
      assertClose(await p.run(texts[0], { candidateLabels: ['sports'] }), want.oneLabel, 'one label')
      assertClose(
        await p.run(texts[1], { candidateLabels: 'sports, politics,cooking' }),
        want.commaLabels,
        'comma labels',
      )
      assertClose(await p.run(texts.slice(0, 2), { candidateLabels: labels }), want.batch, 'batch')
    })
  }

  for (const name of ['ner-bert', 'ner-distilbert', 'ner-roberta']) {
    test(`token-classification (${name}): every aggregationStrategy as transformers' pipeline()`, TIMEOUT, async () => {
      const p = pipelines[name]
      const want = g[name]
      const texts = g.inputs.nerTexts
      assert.equal(p.task, 'token-classification')
      assert.deepEqual(p.labels, ['O', 'B-PER', 'I-PER', 'B-ORG', 'I-ORG', 'B-LOC', 'I-LOC'])
      for (const strategy of ['none', 'simple', 'first', 'average', 'max']) {
        const got = await p.run(texts, { aggregationStrategy: strategy })
        assertClose(got, want[strategy], strategy)
      }
      assertClose(await p.run(texts[2], { ignoreLabels: [] }), want.allLabels[2], 'allLabels')
      // The spans index the JS string: an entity's text is text.slice(start, end).
      for (const e of await p.run(texts[2], { ignoreLabels: [] })) {
        assert.ok(e.start <= e.end && e.end <= texts[2].length)
      }
    })
  }

  for (const name of ['ner-bert', 'ner-distilbert', 'ner-roberta']) {
    test(
      `token-classification (${name}): stride over a text past maxSequenceLength as transformers'`,
      TIMEOUT,
      async () => {
        const p = pipelines[name]
        const text = g.inputs.nerLong
        // the text needs more than one window, else stride would test nothing
        assert.ok(p.tokenizer.encode(text, { truncation: false }).ids.length > p.maxSequenceLength)
        for (const [i, [strategy, stride, ignore]] of g.inputs.nerStrides.entries()) {
          const options = { aggregationStrategy: strategy, stride, ...(ignore ? { ignoreLabels: ignore } : {}) }
          assertClose(await p.run(text, options), g[name].stride[i], `stride ${JSON.stringify(options)}`)
        }
        // concurrent and batched calls: the same
        const [a, b] = await Promise.all(
          [0, 1].map(() => p.run([text, text], { aggregationStrategy: 'simple', stride: g.inputs.nerStrides[0][1] })),
        )
        assertClose(a[1], g[name].stride[0], 'batched')
        assertClose(b[0], g[name].stride[0], 'concurrent')
      },
    )
  }

  for (const name of ['mlm-bert', 'mlm-distilbert', 'mlm-roberta']) {
    test(`fill-mask (${name}): topK, targets, several masks as transformers' pipeline()`, TIMEOUT, async () => {
      const p = pipelines[name]
      const want = g[name]
      const { maskTargets: targets } = g.inputs
      const texts = g.inputs.maskTexts.map((t) => t.replaceAll('[MASK]', p.maskToken))
      assert.equal(p.task, 'fill-mask')
      assert.equal(p.maskToken, name === 'mlm-roberta' ? '<mask>' : '[MASK]')
      for (const [i, text] of texts.entries()) {
        assertClose(await p.run(text), want.default[i], `default[${i}]`)
        assertClose(await p.run(text, { topK: 3, targets }), want.targets[i], `targets[${i}]`)
      }
      assertClose(await p.run(texts.slice(0, 2), { topK: 2 }), want.batch, 'batch')
    })
  }

  test('concurrent calls share forwards and equal the single ones', TIMEOUT, async () => {
    const ner = pipelines['ner-bert']
    const texts = g.inputs.nerTexts
    const alone = await Promise.all(texts.map((t) => ner.run(t, { aggregationStrategy: 'simple' })))
    const together = await Promise.all(
      Array.from({ length: 24 }, (_, i) => ner.run(texts[i % texts.length], { aggregationStrategy: 'simple' })),
    )
    together.forEach((r, i) => assert.deepEqual(r, alone[i % texts.length]))
    const zs = pipelines['nli-bert']
    const labels = g.inputs.zeroShotLabels
    const results = await Promise.all(g.inputs.zeroShotTexts.map((t) => zs.run(t, { candidateLabels: labels })))
    results.forEach((r, i) => assertClose(r, g['nli-bert'].default[i], `concurrent[${i}]`))
  })

  test('bad input and options: coded errors', TIMEOUT, async () => {
    const zs = pipelines['nli-bert']
    await assert.rejects(zs.run('a', { candidateLabels: [] }), coded('InvalidArg', /at least one candidate label/))
    await assert.rejects(zs.run('a', { candidateLabels: ' , ' }), coded('InvalidArg', /at least one candidate label/))
    await assert.rejects(zs.run('a'), coded('InvalidArg', /candidateLabels/))
    await assert.rejects(zs.run('', { candidateLabels: ['x'] }), coded('InvalidArg', /one non-empty text/))
    await assert.rejects(
      zs.run('a', { candidateLabels: ['x'], hypothesisTemplate: 'no slot' }),
      coded('InvalidArg', /hypothesisTemplate/),
    )
    await assert.rejects(zs.run(['a', 3], { candidateLabels: ['x'] }), coded('InvalidArg', /input\[1\]/))
    const ner = pipelines['ner-bert']
    await assert.rejects(ner.run('a', { aggregationStrategy: 'mean' }), coded('InvalidArg', /aggregationStrategy/))
    await assert.rejects(ner.run(null), coded('InvalidArg', /input: expected a string/))
    const fill = pipelines['mlm-bert']
    await assert.rejects(fill.run('no mask here'), coded('InvalidArg', /no mask token \(\[MASK\]\)/))
    await assert.rejects(
      fill.run('[MASK] '.repeat(5)),
      coded('InvalidArg', /5 mask tokens; this export fills at most 4/),
    )
    await assert.rejects(fill.run('[MASK]', { topK: 0 }), coded('InvalidArg', /topK/))
    await assert.rejects(fill.run('[MASK]', { targets: ['   '] }), coded('InvalidArg', /no target is a token/))
    // A folder of another task, or a classifier without an entailment label.
    await assert.rejects(
      torch.pipeline('zero-shot-classification', path.join(DIR, 'sentiment')),
      coded('ModelLoadError', /NLI classifier/),
    )
    await assert.rejects(
      torch.pipeline('fill-mask', path.join(DIR, 'ner-bert')),
      coded('ModelLoadError', /exported for token-classification, not fill-mask/),
    )
    await assert.rejects(ner.run('a', { stride: 4 }), coded('InvalidArg', /stride: .*other than 'none'/))
    await assert.rejects(
      ner.run('a', { stride: 126, aggregationStrategy: 'simple' }),
      coded('InvalidArg', /less than 126/),
    )
    await assert.rejects(ner.run('a', { stride: -1, aggregationStrategy: 'simple' }), coded('InvalidArg', /stride/))
    // A short text with stride: one window, as without
    assert.deepEqual(
      await ner.run(g.inputs.nerTexts[1], { stride: 8, aggregationStrategy: 'simple' }),
      await ner.run(g.inputs.nerTexts[1], { aggregationStrategy: 'simple' }),
    )
    // A long text is truncated to maxSequenceLength, not refused.
    const long = 'Berlin '.repeat(2000)
    assert.equal((await ner.run(long, { ignoreLabels: [] })).length, ner.maxSequenceLength - 2)
  })

  test('export: the task from architectures; a head the checkpoint lacks refused', (t) => {
    const manifest = (name) => JSON.parse(fs.readFileSync(path.join(DIR, name, 'manifest.json'), 'utf8'))
    assert.deepEqual(
      ['ner-bert', 'mlm-distilbert', 'nli-bert'].map((n) => [manifest(n).task, manifest(n).kind]),
      [
        ['token-classification', 'token-classifier'],
        ['fill-mask', 'masked-lm'],
        ['text-classification', 'text-classifier'],
      ],
    )
    assert.equal(manifest('ner-bert').output.dim, manifest('ner-bert').maxSequenceLength * 7)
    assert.equal(manifest('mlm-bert').maskSlots, 4)
    const python = path.join(__dirname, '..', '.libtorch', 'bin', 'python')
    if (!fs.existsSync(python)) return t.skip('no .libtorch Python')
    const script = path.join(__dirname, '..', 'python', 'export_text.py')
    const out = path.join(DIR, 'never-written')
    const run = spawnSync(python, [script, path.join(DIR, 'ner-bert-src'), out, '--task', 'fill-mask'], {
      encoding: 'utf8',
    })
    assert.equal(run.status, 2, run.stderr)
    assert.match(run.stderr, /--task fill-mask takes a \*ForMaskedLM checkpoint .*BertForTokenClassification/)
    assert.equal(fs.existsSync(out), false)
  })

  test('QueueFull past maxQueue, AbortSignal, dispose', TIMEOUT, async () => {
    const p = await torch.pipeline('fill-mask', path.join(DIR, 'mlm-distilbert'), { maxQueue: 1 })
    await assertQueueAbortDispose(p, ['a [MASK]', 'b [MASK]', 'c [MASK]'], 'FillMaskPipeline')
  })
})

test("token strings joined as the tokenizers crate's decoders join them", () => {
  const { tokensToString } = require('../lib/text/token-strings')
  const wordPiece = { type: 'WordPiece', prefix: '##', cleanup: true }
  assert.equal(tokensToString(wordPiece, ['hug', '##ging', 'face', '.']), 'hugging face.')
  // a leading ## kept; the cleanup is per token, so "do not" stays (Python's tokenizers says the same)
  assert.equal(tokensToString(wordPiece, ['##ing', 'do', 'not', 'it', "'s", '.']), "##ing do not it's.")
  assert.equal(tokensToString({ type: 'ByteLevel' }, ['ĠNew', 'ĠYork', 'ĠâĿ', '¤ï¸ı']), ' New York ❤️')
  // a token with a character outside GPT-2's byte table (a word already decoded) is its own UTF-8
  assert.equal(tokensToString({ type: 'ByteLevel' }, [' and', ' café', 'Ġcaf', 'Ã©']), ' and café café')
  const metaspace = { type: 'Metaspace', replacement: '▁', prepend_scheme: 'always' }
  assert.equal(tokensToString(metaspace, ['▁New', '▁York']), 'New York')
  const sequence = {
    type: 'Sequence',
    decoders: [
      { type: 'Replace', pattern: { String: '▁' }, content: ' ' },
      { type: 'Fuse' },
      { type: 'Strip', content: ' ', start: 1, stop: 0 },
    ],
  }
  assert.equal(tokensToString(sequence, ['▁New', '▁York']), 'New York')
  assert.equal(tokensToString(null, ['a', 'b']), 'a b') // no decoder: transformers joins with spaces
})

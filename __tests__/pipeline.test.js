'use strict'
// torch.pipeline (issue 50, first slice): text-classification equal to transformers' own
// pipeline('text-classification', dir) and text-ranking equal to sentence-transformers'
// CrossEncoder(dir).rank (models/make_pipeline_models.py's goldens: random-weight BERT classifiers,
// one exported as .pt2 with no problem_type (softmax), one as TorchScript with multi-label
// (sigmoid), a CrossEncoder with one logit); feature-extraction through the same entry; batched
// and concurrent calls; options; QueueFull, abort, dispose; a folder of another task.
const { describe, test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { spawnSync } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const torch = require('..')
const { coded } = require('./helpers')
const { DIR, GOLDENS, TIMEOUT, TOLERANCE, assertQueueAbortDispose } = require('./pipeline-helpers')

const SENTENCE_ENCODER = path.join(__dirname, '..', 'models', 'golden', 'text', 'mpnet-random')
const SKIP = !fs.existsSync(GOLDENS)
  ? 'no pipeline models: run `node tools/models.js --lazy` (models/make_pipeline_models.py)'
  : typeof torch.pipeline !== 'function'
    ? 'torch.pipeline is not wired in index.js'
    : false

/** `got` and `want` ([{label, score}] or nested) with equal labels and scores within TOLERANCE. */
function assertScores(got, want, what) {
  assert.equal(Array.isArray(got), Array.isArray(want), `${what}: shape`)
  if (Array.isArray(want)) {
    assert.equal(got.length, want.length, `${what}: length`)
    want.forEach((w, i) => assertScores(got[i], w, `${what}[${i}]`))
    return
  }
  assert.deepEqual(Object.keys(got).sort(), Object.keys(want).sort(), `${what}: keys`)
  for (const [k, v] of Object.entries(want)) {
    if (typeof v === 'number') assert.ok(Math.abs(got[k] - v) <= TOLERANCE, `${what}.${k}: ${got[k]} vs ${v}`)
    else assert.equal(got[k], v, `${what}.${k}`)
  }
}

describe('torch.pipeline', { skip: SKIP }, () => {
  let g, sentiment, multilabel, reranker
  before(async () => {
    g = JSON.parse(fs.readFileSync(GOLDENS, 'utf8'))
    ;[sentiment, multilabel, reranker] = await Promise.all([
      torch.pipeline('text-classification', path.join(DIR, 'sentiment')),
      torch.pipeline('sentiment-analysis', path.join(DIR, 'multilabel')),
      torch.pipeline('rerank', path.join(DIR, 'reranker')),
    ])
  })
  after(() => [sentiment, multilabel, reranker].forEach((p) => p?.dispose()))

  test('text-classification: as transformers pipeline() by default, one input at a time', TIMEOUT, async () => {
    assert.equal(sentiment.task, 'text-classification')
    assert.deepEqual(sentiment.labels, ['NEGATIVE', 'NEUTRAL', 'POSITIVE'])
    assert.equal(sentiment.functionToApply, 'softmax')
    for (const [i, text] of g.inputs.texts.entries()) {
      assertScores(await sentiment.run(text), g.sentiment.default[i], `texts[${i}]`)
    }
  })

  test('text-classification: a batch, topK null (all labels, best first), each functionToApply', TIMEOUT, async () => {
    const texts = g.inputs.texts
    assertScores(await sentiment.run(texts), g.sentiment.default.flat(), 'default')
    assertScores(await sentiment.run(texts, { topK: null }), g.sentiment.all, 'topK null')
    assertScores(await sentiment.run(texts, { topK: Infinity }), g.sentiment.all, 'topK Infinity')
    for (const fn of ['softmax', 'sigmoid', 'none']) {
      const got = await sentiment.run(texts, { topK: null, functionToApply: fn })
      assertScores(got, g.sentiment.byFunction[fn], fn)
    }
    const two = await sentiment.run(texts[0], { topK: 2 })
    assertScores(two, g.sentiment.all[0].slice(0, 2), 'topK 2, one text')
  })

  test('text-classification: text pairs {text, textPair}, alone and mixed with texts', TIMEOUT, async () => {
    const pairs = g.inputs.pairs.map((p) => ({ text: p.text, textPair: p.text_pair }))
    assertScores(await sentiment.run(pairs, { topK: null }), g.sentiment.pairs, 'pairs')
    assertScores(await sentiment.run(pairs[1], { topK: null }), g.sentiment.pairs[1], 'one pair')
    const mixed = await sentiment.run([pairs[0], g.inputs.texts[2], pairs[1]], { topK: null })
    assertScores(mixed, [g.sentiment.pairs[0], g.sentiment.all[2], g.sentiment.pairs[1]], 'mixed')
  })

  test('multi-label (problem_type, TorchScript export): sigmoid by default', TIMEOUT, async () => {
    assert.equal(multilabel.functionToApply, 'sigmoid')
    assertScores(await multilabel.run(g.inputs.texts), g.multilabel.default.flat(), 'default')
    assertScores(await multilabel.run(g.inputs.texts, { topK: null }), g.multilabel.all, 'topK null')
  })

  test('concurrent callers share forwards and each gets its own answer', TIMEOUT, async () => {
    const texts = g.inputs.texts
    const before = sentiment.stats().batches
    const got = await Promise.all(texts.map((t) => sentiment.run(t, { topK: null })))
    assertScores(got, g.sentiment.all, 'concurrent')
    assert.ok(sentiment.stats().batches - before < texts.length, 'some calls shared a forward')
  })

  test('text-ranking: as sentence-transformers CrossEncoder.rank', TIMEOUT, async () => {
    const { query, documents } = g.inputs
    assert.equal(reranker.task, 'text-ranking')
    assertScores(await reranker.run({ query, documents }, { returnDocuments: true }), g.reranker.rank, 'rank')
    const top = await reranker.run({ query, documents }, { topN: 2 })
    assertScores(
      top,
      g.reranker.rank.slice(0, 2).map(({ index, score }) => ({ index, score })),
      'topN 2',
    )
    assert.deepEqual(await reranker.run({ query, documents: [] }), [])
    // the same model as a classifier: one label, sigmoid by default (transformers' rule)
    const asClassifier = await torch.pipeline('text-classification', path.join(DIR, 'reranker'))
    try {
      const scores = await asClassifier.run(documents.map((d) => ({ text: query, textPair: d })))
      scores.forEach((s, i) => assert.ok(Math.abs(s.score - g.reranker.predict[i]) <= TOLERANCE))
    } finally {
      asClassifier.dispose()
    }
  })

  test(
    'a CrossEncoder saved by sentence-transformers 6 (modules.json; TorchScript): the same ranking',
    TIMEOUT,
    async () => {
      const folder = path.join(DIR, 'reranker-st6')
      const manifest = JSON.parse(fs.readFileSync(path.join(folder, 'manifest.json'), 'utf8'))
      assert.deepEqual(
        [manifest.kind, manifest.task, manifest.programFormat],
        ['text-classifier', 'text-ranking', 'torchscript'],
      )
      const st6 = await torch.pipeline('text-ranking', folder)
      try {
        const { query, documents } = g.inputs
        assertScores(await st6.run({ query, documents }, { returnDocuments: true }), g.reranker.rank, 'rank')
      } finally {
        st6.dispose()
      }
    },
  )

  test('feature-extraction through the same entry: SentenceEncoder.encode', TIMEOUT, async () => {
    const fe = await torch.pipeline('feature-extraction', SENTENCE_ENCODER)
    const encoder = await torch.text.SentenceEncoder.load(SENTENCE_ENCODER)
    try {
      assert.equal(fe.task, 'feature-extraction')
      const [a, b] = [await fe.run(['one', 'two']), await encoder.encode(['one', 'two'])]
      assert.deepEqual(a.shape, b.shape)
      assert.deepEqual(a.toTypedArray(), b.toTypedArray())
    } finally {
      fe.dispose()
      encoder.dispose()
    }
  })

  test('arguments: unknown task, options, inputs; a folder of another task', async () => {
    await assert.rejects(torch.pipeline('summarization', DIR), coded('InvalidArg', /task: expected one of/))
    await assert.rejects(torch.pipeline('rerank', 3), coded('InvalidArg', /folder: expected a path/))
    await assert.rejects(
      torch.pipeline('text-classification', SENTENCE_ENCODER),
      coded('ModelLoadError', /exported for feature-extraction, not text-classification/),
    )
    await assert.rejects(
      torch.pipeline('text-ranking', path.join(DIR, 'sentiment')),
      coded('ModelLoadError', /exported for text-classification, not text-ranking/),
    )
    await assert.rejects(
      torch.pipeline('feature-extraction', path.join(DIR, 'sentiment')),
      coded('ModelLoadError', /exported for text-classification, not feature-extraction/),
    )
    await assert.rejects(
      torch.pipeline('text-classification', path.join(DIR, 'sentiment'), { maxQueue: 0 }),
      coded('InvalidArg', /maxQueue/),
    )
    await assert.rejects(sentiment.run(3), coded('InvalidArg', /input: expected a string or \{text, textPair\}/))
    await assert.rejects(
      sentiment.run([{ text: 'a', pair: 'b' }]),
      coded('InvalidArg', /input\[0\]: unknown option 'pair'/),
    )
    await assert.rejects(sentiment.run('a', { topK: 0 }), coded('InvalidArg', /options\.topK/))
    await assert.rejects(sentiment.run('a', { functionToApply: 'tanh' }), coded('InvalidArg', /functionToApply/))
    await assert.rejects(sentiment.run('a', { top_k: 2 }), coded('InvalidArg', /unknown option 'top_k'/))
    await assert.rejects(reranker.run({ query: 'q', documents: ['a', 1] }), coded('InvalidArg', /documents\[1\]/))
    await assert.rejects(reranker.run({ documents: [] }), coded('InvalidArg', /input\.query/))
    await assert.rejects(reranker.run({ query: 'q', documents: ['a'] }, { topN: 0 }), coded('InvalidArg', /topN/))
  })

  test('torch-node export --task: checked against the checkpoint before any compile', (t) => {
    const python = path.join(__dirname, '..', '.libtorch', 'bin', 'python')
    if (!fs.existsSync(python)) return t.skip('no .libtorch Python')
    const out = fs.mkdtempSync(path.join(os.tmpdir(), 'torch-node-pipeline-'))
    t.after(() => fs.rmSync(out, { recursive: true, force: true }))
    const bin = path.join(__dirname, '..', 'bin', 'torch-node.js')
    const run = (...args) =>
      spawnSync(process.execPath, [bin, 'export', ...args], {
        encoding: 'utf8',
        env: { ...process.env, PYTHON: python },
      })
    const ranking = run(path.join(DIR, 'sentiment-src'), out, '--task', 'text-ranking')
    assert.equal(ranking.status, 1, ranking.stderr) // the CLI: 1 when the model cannot be exported
    assert.match(
      ranking.stderr,
      /--task text-ranking takes a classifier with one logit \(a CrossEncoder\), this one has 3/,
    )
    const bad = run(path.join(DIR, 'sentiment-src'), out, '--task', 'ner')
    assert.equal(bad.status, 2)
    assert.match(
      bad.stderr,
      /--task: expected auto, feature-extraction, text-classification, text-ranking(, token-classification, fill-mask)?, got 'ner'/,
    )
  })

  test('QueueFull past maxQueue, AbortSignal, dispose', TIMEOUT, async () => {
    const p = await torch.pipeline('text-classification', path.join(DIR, 'sentiment'), { maxQueue: 1 })
    await assertQueueAbortDispose(p, ['running', 'queued', 'refused'], 'TextClassificationPipeline')
  })
})

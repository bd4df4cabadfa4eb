'use strict'
// CLIP and SigLIP (issue 50): zero-shot-image-classification equal to transformers 5's
// pipeline('zero-shot-image-classification', dir), image-feature-extraction and the text side equal
// to get_image_features / get_text_features, pixel_values equal to the checkpoint's image processor
// (models/make_clip_models.py's goldens: random-weight CLIPModel and SiglipModel exported as .pt2);
// concurrent calls batched; bad input, abort and dispose.
const { describe, test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { spawnSync } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')
const torch = require('..')
const { coded } = require('./helpers')
const { ZeroShotImageClassificationPipeline, fillTemplate } = require('../lib/vision/zero-shot-image-classification')
const { ImageFeatureExtractionPipeline } = require('../lib/vision/image-feature-extraction')
const { ClipModel } = require('../lib/vision/clip-model')

const DIR = path.join(__dirname, '..', 'models', 'golden', 'clip')
const GOLDENS = path.join(DIR, 'goldens.json')
const IMAGES = path.join(__dirname, '..', 'models', 'images')
const SKIP = fs.existsSync(GOLDENS) ? false : 'no CLIP models: run `node tools/models.js --lazy` (make_clip_models.py)'
// The bars: scores within 1e-5 of Python's (labels exactly), pixel_values within 1e-6.
const SCORES = 1e-5
const PIXELS = 1e-6
const TIMEOUT = { timeout: 120_000 }

/** The largest |a - b| over two nested arrays of numbers of the same shape. */
function maxDiff(a, b) {
  if (Array.isArray(b)) {
    assert.equal(a.length, b.length)
    return Math.max(0, ...b.map((v, i) => maxDiff(a[i], v)))
  }
  return Math.abs(a - b)
}

/** Equal labels in the same order, scores within SCORES. */
function assertRanked(got, want, what) {
  assert.deepEqual(
    got.map((r) => r.label),
    want.map((r) => r.label),
    `${what}: labels`,
  )
  const diff = maxDiff(
    got.map((r) => r.score),
    want.map((r) => r.score),
  )
  assert.ok(diff <= SCORES, `${what}: scores differ by ${diff}`)
}

const goldens = SKIP ? null : JSON.parse(fs.readFileSync(GOLDENS, 'utf8'))
const images = SKIP ? [] : goldens.inputs.images.map((n) => path.join(IMAGES, n))

for (const family of ['clip', 'siglip']) {
  describe(`${family}: against transformers`, { skip: SKIP }, () => {
    const folder = path.join(DIR, family)
    let zeroShot, features
    before(async () => {
      // The entry users reach: torch.pipeline (the classes' own load is the same).
      zeroShot = await torch.pipeline('zero-shot-image-classification', folder)
      features = await torch.pipeline('image-feature-extraction', folder)
      assert.ok(zeroShot instanceof ZeroShotImageClassificationPipeline)
      assert.ok(features instanceof ImageFeatureExtractionPipeline)
    })
    after(() => {
      zeroShot?.dispose()
      features?.dispose()
    })

    test('pixel_values equal the image processor', TIMEOUT, async () => {
      const model = await ClipModel.load(folder, undefined, ClipModel.load)
      try {
        const want = goldens[family].pixelValues
        for (const [i, image] of images.entries()) {
          const pixels = await model.pixelValues(image, {})
          assert.deepEqual(pixels.shape, goldens[family].pixelShape.slice(1))
          const diff = maxDiff(Array.from(pixels.toTypedArray()), want[i])
          pixels.dispose()
          assert.ok(diff <= PIXELS, `${goldens.inputs.images[i]}: pixel_values differ by ${diff}`)
        }
      } finally {
        model.dispose()
      }
    })

    test('zero-shot scores and labels equal the pipeline, default and custom template', TIMEOUT, async () => {
      const { labels, template } = goldens.inputs
      const batched = await zeroShot.run(images, { candidateLabels: labels })
      batched.forEach((r, i) => assertRanked(r, goldens[family].default[i], `default[${i}]`))
      for (const [i, image] of images.entries()) {
        const one = await zeroShot.run(image, { candidateLabels: labels, hypothesisTemplate: template })
        assertRanked(one, goldens[family].template[i], `template[${i}]`)
      }
      assert.equal(zeroShot.family, family)
      assert.equal(zeroShot.task, 'zero-shot-image-classification')
    })

    test('image and text features equal get_image_features / get_text_features', TIMEOUT, async () => {
      const image = await features.run(images)
      assert.deepEqual(image.shape, [images.length, features.dim])
      assert.ok(maxDiff(image.toArray(), goldens[family].imageFeatures) <= SCORES)
      const text = await features.embedText(goldens.inputs.texts)
      assert.ok(maxDiff(text.toArray(), goldens[family].textFeatures) <= SCORES)
      const unit = await features.run(fs.readFileSync(images[0]), { normalize: true })
      const row = /** @type {number[][]} */ (unit.toArray())[0]
      assert.ok(Math.abs(Math.hypot(...row) - 1) < 1e-6)
      for (const t of [image, text, unit]) t.dispose()
    })

    test('concurrent calls share forwards and get their own answers', TIMEOUT, async () => {
      const before = features.stats().image.batches ?? 0
      const data = `data:image/png;base64,${fs.readFileSync(images[1]).toString('base64')}`
      const outs = await Promise.all(Array.from({ length: 12 }, (_, i) => features.run(i % 2 ? data : images[i % 4])))
      outs.forEach((t, i) => {
        const want = goldens[family].imageFeatures[i % 2 ? 1 : i % 4]
        assert.ok(maxDiff(t.toArray()[0], want) <= SCORES, `call ${i}`)
        t.dispose()
      })
      const stats = features.stats().image
      if (stats.batches !== undefined) assert.ok(stats.batches - before < 12, `batches ${stats.batches - before}`)
    })
  })
}

describe('clip: bad input, abort, dispose', { skip: SKIP }, () => {
  let zeroShot
  before(async () => {
    zeroShot = await ZeroShotImageClassificationPipeline.load(path.join(DIR, 'clip'))
  })
  after(() => zeroShot?.dispose())

  test('callers scoring the same labels share their text embeddings (the text tower runs once)', TIMEOUT, async () => {
    const other = await ZeroShotImageClassificationPipeline.load(path.join(DIR, 'clip'))
    try {
      const labels = ['a cat', 'a dog', 'a car']
      const alone = await other.run(images[0], { candidateLabels: labels })
      const all = await Promise.all(images.map((image) => other.run(image, { candidateLabels: labels })))
      // Equal but for the image tower's batch (a batched matmul rounds apart).
      assert.deepEqual(
        all[0].map((r) => r.label),
        alone.map((r) => r.label),
      )
      all[0].forEach((r, i) => assert.ok(Math.abs(r.score - alone[i].score) < 1e-5))
      assert.equal(other.stats().text.rows, labels.length)
      await other.run(images[1], { candidateLabels: ['a cat', 'a boat'] })
      assert.equal(other.stats().text.rows, labels.length + 1)
    } finally {
      other.dispose()
    }
  })

  test('coded errors: labels, images, options, folders', TIMEOUT, async () => {
    const image = images[0]
    await assert.rejects(zeroShot.run(image), coded('InvalidArg', /candidateLabels/))
    await assert.rejects(zeroShot.run(image, { candidateLabels: [] }), coded('InvalidArg', /candidateLabels/))
    await assert.rejects(zeroShot.run(image, { candidateLabels: ['a'], topK: 2 }), coded('InvalidArg', /topK/))
    await assert.rejects(zeroShot.run([], { candidateLabels: ['a'] }), coded('InvalidArg', /at least one/))
    await assert.rejects(zeroShot.run(42, { candidateLabels: ['a'] }), coded('InvalidArg', /images/))
    const notImage = Buffer.from('not an image at all')
    await assert.rejects(zeroShot.run(notImage, { candidateLabels: ['a'] }), coded('InvalidImage'))
    const png = fs.readFileSync(images[0])
    await assert.rejects(zeroShot.run(png.subarray(0, 200), { candidateLabels: ['a'] }), coded('InvalidImage'))
    // A PNG header claiming 100000×100000 pixels: refused by the decoder's limits at once.
    const bomb = Buffer.from(png.subarray(0, 64))
    bomb.writeUInt32BE(100_000, 16)
    bomb.writeUInt32BE(100_000, 20)
    const started = Date.now()
    await assert.rejects(zeroShot.run(bomb, { candidateLabels: ['a'] }), coded('InvalidImage'))
    assert.ok(Date.now() - started < 1000)
    await assert.rejects(ZeroShotImageClassificationPipeline.load(IMAGES), coded('ModelLoadError'))
    await assert.rejects(
      ZeroShotImageClassificationPipeline.load(path.join(DIR, 'clip'), { maxBatchSize: 1000 }),
      coded('InvalidArg', /--max-batch/),
    )
    await assert.rejects(
      ZeroShotImageClassificationPipeline.load(path.join(DIR, 'clip'), { batch: 2 }),
      coded('InvalidArg'),
    )
    assert.throws(
      () => new ZeroShotImageClassificationPipeline(Symbol('x'), null),
      coded('InvalidArg', /torch\.pipeline/),
    )
    // more labels than the queue holds requests: they go as requests of up to maxBatchSize texts
    const many = Array.from({ length: 1500 }, (_, i) => `label ${i}${' x'.repeat(i % 7)}`)
    const ranked = await zeroShot.run(image, { candidateLabels: many })
    assert.equal(ranked.length, many.length)
    // still serving
    const ok = await zeroShot.run(image, { candidateLabels: ['cat', 'dog', '', 'x'.repeat(100_000)] })
    assert.equal(ok.length, 4)
    assert.ok(Math.abs(ok.reduce((s, r) => s + r.score, 0) - 1) < 1e-6)
  })

  test('an aborted signal rejects with Aborted; dispose rejects later calls with Disposed', TIMEOUT, async () => {
    const controller = new AbortController()
    controller.abort()
    await assert.rejects(
      zeroShot.run(images[0], { candidateLabels: ['a'], signal: controller.signal }),
      coded('Aborted'),
    )
    const other = await ImageFeatureExtractionPipeline.load(path.join(DIR, 'clip'))
    other.dispose()
    assert.equal(other.isDisposed, true)
    await assert.rejects(other.run(images[0]), coded('Disposed'))
    await assert.rejects(other.embedText('a'), coded('Disposed'))
  })

  test('export sends CLIP and SigLIP folders to export_clip.py and refuses what it does not take', () => {
    const { isClip } = require('../lib/cli')
    assert.equal(isClip(path.join(DIR, 'clip-src')), true)
    assert.equal(isClip(path.join(DIR, 'siglip-src')), true)
    assert.equal(isClip(IMAGES), false)
    const cli = path.join(__dirname, '..', 'bin', 'torch-node.js')
    for (const flags of [
      ['--quantize', 'int8'],
      ['--dtype', 'bfloat16'],
      ['--task', 'text-ranking'],
    ]) {
      const r = spawnSync(process.execPath, [
        cli,
        'export',
        path.join(DIR, 'clip-src'),
        path.join(DIR, 'unused'),
        ...flags,
      ])
      assert.equal(r.status, 2, `${flags}: ${r.stderr}`)
      assert.match(String(r.stderr), /not for CLIP or SigLIP models/)
    }
  })

  test("the template is filled as Python's str.format", () => {
    assert.equal(fillTemplate('This is a photo of {}.', 'cat'), 'This is a photo of cat.')
    assert.equal(fillTemplate('{{x}} {}', 'cat'), '{x} cat')
  })
})

void torch

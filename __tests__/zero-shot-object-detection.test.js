'use strict'
// Zero-shot object detection (issue 50's family): OWL-ViT and OWLv2 folders python/export_owl.py
// wrote, against transformers 5's pipeline('zero-shot-object-detection', dir) on four images of
// different sizes and shapes (models/make_clip_models.py's owl-goldens.json: random-weight
// detectors); concurrent callers batched and sharing the labels' embeddings; hostile input in a
// child process; abort and dispose.
const { describe, test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { spawnSync } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')
const torch = require('..')
const { coded } = require('./helpers')
const { childOut } = require('./helpers')
const { ZeroShotObjectDetectionPipeline, MAX_LABELS } = require('../lib/vision/zero-shot-object-detection')
const { OwlModel } = require('../lib/vision/owl-model')

const ROOT = path.join(__dirname, '..')
const DIR = path.join(ROOT, 'models', 'golden', 'clip')
const GOLDENS = path.join(DIR, 'owl-goldens.json')
const IMAGES = path.join(ROOT, 'models', 'images')
const SKIP = fs.existsSync(GOLDENS) ? false : 'no OWL models: run `node tools/models.js --lazy` (make_clip_models.py)'
// The bars: labels and integer boxes exact, in the same order; scores within 1e-5 of Python's;
// the boxes before truncation within 1e-4 px.
const SCORES = 1e-5
const PIXELS = 1e-4
const TIMEOUT = { timeout: 120_000 }

const goldens = SKIP ? null : JSON.parse(fs.readFileSync(GOLDENS, 'utf8'))

/** The goldens' images (crops of models/images/) as the test passes them: paths, the file's bytes, a transposed uint8 Tensor. */
async function images() {
  return Promise.all(
    goldens.inputs.images.map(async ([name, transposed], i) => {
      const file = path.join(DIR, name)
      if (transposed) {
        const chw = await torch.image.load(file, { dtype: 'uint8', layout: 'chw' })
        return chw.transpose(1, 2)
      }
      return i === 1 ? fs.readFileSync(file) : file
    }),
  )
}

/** Equal labels and boxes in the same order, scores within SCORES. */
function assertDetections(got, want, what) {
  assert.equal(got.length, want.length, `${what}: count`)
  assert.deepEqual(
    got.map((d) => [d.label, d.box]),
    want.map((d) => [d.label, d.box]),
    `${what}: labels and boxes`,
  )
  const diff = Math.max(0, ...got.map((d, i) => Math.abs(d.score - want[i].score)))
  assert.ok(diff <= SCORES, `${what}: scores differ by ${diff}`)
}

for (const family of ['owlvit', 'owlv2']) {
  describe(`${family}: against transformers`, { skip: SKIP }, () => {
    const folder = path.join(DIR, family)
    const { labels } = SKIP ? {} : goldens.inputs
    const threshold = SKIP ? 0 : goldens.inputs.threshold[family]
    let detector, inputs
    before(async () => {
      detector = await ZeroShotObjectDetectionPipeline.load(folder)
      inputs = await images()
    })
    after(() => {
      detector?.dispose()
      for (const x of inputs ?? []) if (x instanceof torch.Tensor) x.dispose()
    })

    test(
      'detections equal the pipeline: several images a call, each alone, topK, a comma string',
      TIMEOUT,
      async () => {
        assert.equal(detector.family, family)
        assert.equal(detector.task, 'zero-shot-object-detection')
        const want = goldens[family]
        const all = await detector.run(inputs, { candidateLabels: labels, threshold })
        assert.equal(all.length, inputs.length)
        all.forEach((d, i) => assertDetections(d, want.detections[i], `images[${i}]`))
        assert.ok(all.every((d) => d.length > 0))
        const one = await detector.run(inputs[2], { candidateLabels: labels, threshold })
        assertDetections(one, want.detections[2], 'alone')
        const top = await detector.run(inputs[0], { candidateLabels: labels, threshold, topK: 3 })
        assertDetections(top, want.topK, 'topK')
        const comma = await detector.run(inputs[0], { candidateLabels: 'cat,coffee', threshold })
        assertDetections(comma, want.commaString, 'comma string')
        const data = `data:image/png;base64,${fs.readFileSync(path.join(DIR, 'owl-astronaut.png')).toString('base64')}`
        assertDetections(
          await detector.run(data, { candidateLabels: goldens.inputs.defaultLabels }),
          want.defaultThreshold,
          'default 0.1',
        )
      },
    )

    test('boxes before truncation within 1e-4 px of post_process_object_detection', TIMEOUT, async () => {
      const model = await OwlModel.load(folder, undefined, OwlModel.load)
      try {
        for (const [i, image] of inputs.entries()) {
          const d = await model.detect(image, model.queries(labels, OwlModel.load), {}, OwlModel.load)
          const rows = []
          labels.forEach((label, q) => {
            for (let p = 0; p < d.patches; p++) {
              const score = d.scores[q * d.patches + p]
              if (score > threshold) rows.push({ score, label, box: Array.from(d.boxes.subarray(p * 4, p * 4 + 4)) })
            }
          })
          rows.sort((a, b) => b.score - a.score)
          const want = goldens[family].unrounded[i]
          assert.deepEqual(
            rows.map((r) => r.label),
            want.map((r) => r.label),
          )
          const diff = Math.max(...rows.flatMap((r, k) => r.box.map((x, j) => Math.abs(x - want[k].box[j]))))
          assert.ok(diff <= PIXELS, `images[${i}]: boxes differ by ${diff} px`)
        }
      } finally {
        model.dispose()
      }
    })

    test('concurrent callers share forwards and the labels’ embeddings', TIMEOUT, async () => {
      const other = await ZeroShotObjectDetectionPipeline.load(folder, { maxDelayMs: 20 })
      try {
        const calls = Array.from({ length: 9 }, (_, i) =>
          other.run(inputs[i % inputs.length], { candidateLabels: labels, threshold }),
        )
        const outs = await Promise.all(calls)
        outs.forEach((d, i) => assertDetections(d, goldens[family].detections[i % inputs.length], `call ${i}`))
        const stats = other.stats()
        assert.equal(stats.text.rows, labels.length, 'each label embedded once')
        assert.equal(stats.image.rows, 9)
        assert.ok(stats.image.batches < 9, `image batches ${stats.image.batches}`)
      } finally {
        other.dispose()
      }
    })
  })
}

describe('zero-shot-object-detection: hostile input, abort, dispose, export', { skip: SKIP }, () => {
  test('hostile input gets coded errors in a child process, which keeps serving', TIMEOUT, () => {
    const r = childOut(
      `
      const torch = require(${JSON.stringify(ROOT)})
      const fs = require('node:fs')
      const { ZeroShotObjectDetectionPipeline } = require(${JSON.stringify(path.join(ROOT, 'lib/vision/zero-shot-object-detection'))})
      const out = (v) => process.stdout.write('\\nOUT ' + JSON.stringify(v) + '\\n')
      const codeOf = (p) => p.then(() => 'resolved', (e) => e.code + ': ' + e.message)
      ;(async () => {
        const d = await ZeroShotObjectDetectionPipeline.load(${JSON.stringify(path.join(DIR, 'owlv2'))})
        const image = ${JSON.stringify(path.join(IMAGES, 'chelsea.png'))}
        const png = fs.readFileSync(image)
        const bomb = Buffer.from(png.subarray(0, 64))
        bomb.writeUInt32BE(100000, 16)
        bomb.writeUInt32BE(100000, 20)
        const many = Array.from({ length: ${MAX_LABELS + 1} }, (_, i) => 'label ' + i)
        const codes = {
          noLabels: await codeOf(d.run(image, { candidateLabels: [] })),
          noOptions: await codeOf(d.run(image)),
          notLabels: await codeOf(d.run(image, { candidateLabels: [1, 2] })),
          notImage: await codeOf(d.run(Buffer.from('not an image at all'), { candidateLabels: ['cat'] })),
          cut: await codeOf(d.run(png.subarray(0, 200), { candidateLabels: ['cat'] })),
          bomb: await codeOf(d.run(bomb, { candidateLabels: ['cat'] })),
          tooMany: await codeOf(d.run(image, { candidateLabels: many })),
          tooLong: await codeOf(d.run(image, { candidateLabels: ['cat', 'a very '.repeat(40) + 'long label'] })),
          floatTensor: await codeOf(d.run(torch.zeros([3, 8, 8]), { candidateLabels: ['cat'] })),
          emptyTensor: await codeOf(d.run(torch.zeros([3, 0, 8], { dtype: 'uint8' }), { candidateLabels: ['cat'] })),
          topK: await codeOf(d.run(image, { candidateLabels: ['cat'], topK: 0 })),
          threshold: await codeOf(d.run(image, { candidateLabels: ['cat'], threshold: '0.5' })),
          unknown: await codeOf(d.run(image, { candidateLabels: ['cat'], top_k: 2 })),
          noImages: await codeOf(d.run([], { candidateLabels: ['cat'] })),
        }
        // still serving, the most labels a call takes included
        const served = await d.run(image, { candidateLabels: many.slice(0, ${MAX_LABELS}), threshold: 0.99 })
        const again = await d.run(image, { candidateLabels: ['cat', ''], threshold: 0 })
        out({ codes, served: Array.isArray(served), again: again.length })
        d.dispose()
      })().catch((e) => { console.error(e); process.exitCode = 1 })`,
      { timeout: 110_000 },
    )
    const want = {
      noLabels: /^InvalidArg: .*candidateLabels: expected at least one label/,
      noOptions: /^InvalidArg: .*candidateLabels/,
      notLabels: /^InvalidArg: .*candidateLabels: expected a string or an array of strings/,
      notImage: /^InvalidImage/,
      cut: /^InvalidImage/,
      bomb: /^InvalidImage/,
      tooMany: new RegExp(`^InvalidArg: .*at most ${MAX_LABELS} labels a call, got ${MAX_LABELS + 1}`),
      tooLong: /^InvalidArg: candidate label 'a very a very .*' is \d+ tokens; this model reads at most 16/,
      floatTensor: /^InvalidArg: .*expected a uint8 RGB Tensor/,
      emptyTensor: /^InvalidArg: .*empty/,
      topK: /^InvalidArg: .*topK/,
      threshold: /^InvalidArg: .*threshold/,
      unknown: /^InvalidArg: .*unknown option 'top_k'/,
      noImages: /^InvalidArg: .*at least one image/,
    }
    for (const [k, re] of Object.entries(want)) assert.match(r.codes[k], re, k)
    assert.equal(r.served, true)
    // threshold 0: every patch of both labels (an empty label is a query too, as in transformers)
    assert.equal(r.again, 2 * 64)
  })

  test(
    'an aborted signal rejects with Aborted; dispose rejects later calls; new and wrong folders refused',
    TIMEOUT,
    async () => {
      const d = await ZeroShotObjectDetectionPipeline.load(path.join(DIR, 'owlvit'))
      const image = path.join(IMAGES, 'chelsea.png')
      const controller = new AbortController()
      controller.abort()
      await assert.rejects(d.run(image, { candidateLabels: ['cat'], signal: controller.signal }), coded('Aborted'))
      d.dispose()
      assert.equal(d.isDisposed, true)
      await assert.rejects(d.run(image, { candidateLabels: ['cat'] }), coded('Disposed'))
      assert.throws(
        () => new ZeroShotObjectDetectionPipeline(Symbol('x'), null),
        coded('InvalidArg', /torch\.pipeline/),
      )
      await assert.rejects(ZeroShotObjectDetectionPipeline.load(path.join(DIR, 'clip')), coded('ModelLoadError', /OWL/))
      await assert.rejects(ZeroShotObjectDetectionPipeline.load(IMAGES), coded('ModelLoadError'))
      await assert.rejects(
        ZeroShotObjectDetectionPipeline.load(path.join(DIR, 'owlvit'), { batch: 2 }),
        coded('InvalidArg'),
      )
    },
  )

  test('export_owl.py refuses a checkpoint that is not OWL-ViT or OWLv2 (status 2, one line)', () => {
    const python = process.env.PYTHON ?? path.join(ROOT, '.libtorch', 'bin', 'python')
    const script = path.join(ROOT, 'python', 'export_owl.py')
    const r = spawnSync(python, [script, path.join(DIR, 'clip-src'), path.join(DIR, 'unused')], { encoding: 'utf8' })
    assert.equal(r.status, 2, r.stderr)
    assert.match(r.stderr, /^export_owl\.py: .*are not OwlViTForObjectDetection or Owlv2ForObjectDetection\n$/)
  })
})

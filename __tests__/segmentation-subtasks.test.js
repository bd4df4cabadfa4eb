'use strict'
// image-segmentation's panoptic, instance and semantic subtasks (issue 50): a Mask2Former folder
// python/export_dense.py wrote from a random-weight checkpoint, against transformers 5's
// pipeline('image-segmentation') with each subtask and threshold (models/make_segmentation_models.py's
// goldens): labels in order, scores within 1e-5, masks exact; pixel_values equal the processor's;
// coded errors for a subtask or threshold the model or subtask does not take.
const { describe, test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const torch = require('..')
const { coded } = require('./helpers')
const { ImageSegmentationPipeline } = require('../lib/vision/image-segmentation')

const ROOT = path.join(__dirname, '..')
const DIR = path.join(ROOT, 'models', 'golden', 'segmentation')
const GOLDENS = path.join(DIR, 'goldens.json')
const IMAGES = path.join(ROOT, 'models', 'images')
const SKIP = fs.existsSync(GOLDENS)
  ? false
  : 'no Mask2Former model: run `node tools/models.js --lazy` (make_segmentation_models.py)'
const SCORE_TOLERANCE = 1e-5
const TIMEOUT = { timeout: 120_000 }

const goldens = SKIP ? null : JSON.parse(fs.readFileSync(GOLDENS, 'utf8'))
// name -> the fewest panoptic segments one image of the goldens must have (else they test little)
const MODELS = { mask2former: 3, detr: 1 }
const bytes = (b64) => new Uint8Array(Buffer.from(b64, 'base64'))

/** One call's segments against Python's: labels in order, scores within tolerance, masks exact. */
function assertSegments(got, want, what) {
  assert.deepEqual(
    got.map((s) => s.label),
    want.map((s) => s.label),
    `${what}: labels`,
  )
  got.forEach((s, i) => {
    if (want[i].score === null) assert.equal(s.score, null, `${what}: score`)
    else assert.ok(Math.abs(s.score - want[i].score) <= SCORE_TOLERANCE, `${what}: ${s.score} vs ${want[i].score}`)
    assert.equal(s.mask.dtype, 'uint8')
    assert.deepEqual(s.mask.toTypedArray(), bytes(want[i].mask), `${what}: mask '${s.label}'`)
  })
}

for (const [name, fewest] of Object.entries(MODELS)) {
  describe(`${name}: image-segmentation subtasks against transformers`, { skip: SKIP }, () => {
    const folder = path.join(DIR, name)
    const results = SKIP ? [] : goldens[name].results
    let pipe
    before(async () => {
      pipe = await ImageSegmentationPipeline.load(folder)
    })
    after(() => pipe?.dispose())

    test('pixel_values equal the image processor', TIMEOUT, async () => {
      const preprocess = await torch.ScriptModule.load(path.join(folder, 'preprocess.pt'))
      for (const want of results) {
        const decoded = await torch.image.load(path.join(IMAGES, want.image), { dtype: 'uint8', layout: 'chw' })
        const pixels = await preprocess.forward(decoded)
        assert.deepEqual(pixels.shape, want.pixelShape.slice(1))
        const expected = new Float32Array(bytes(want.pixelValues).buffer)
        const got = pixels.toTypedArray()
        let diff = 0
        for (let i = 0; i < expected.length; i++) diff = Math.max(diff, Math.abs(got[i] - expected[i]))
        assert.ok(diff <= 1e-6, `${want.image}: pixel_values differ by ${diff}`)
      }
      preprocess.dispose()
    })

    test('every subtask and threshold equals the pipeline', TIMEOUT, async () => {
      assert.deepEqual(pipe.subtasks, ['panoptic', 'instance', 'semantic'])
      let scored = 0
      for (const want of results) {
        for (const call of want.calls) {
          const got = await pipe.run(path.join(IMAGES, want.image), call.options)
          assertSegments(got, call.segments, `${want.image} ${JSON.stringify(call.options)}`)
          scored += got.filter((s) => s.score !== null).length
        }
      }
      assert.ok(scored >= 5, `only ${scored} scored segments: the goldens test little`)
      const panoptic = results.map((r) => r.calls[1].segments.length)
      assert.ok(Math.max(...panoptic) >= fewest, `panoptic segments per image ${panoptic}: the goldens test little`)
    })

    test('concurrent calls and an array of images share forwards', TIMEOUT, async () => {
      // the instance call with segments (goldens.calls is one list for every image)
      const at = goldens.calls.findIndex((c) => c.subtask === 'instance' && c.threshold < 0.5)
      const options = results[0].calls[at].options
      const images = results.map((r) => path.join(IMAGES, r.image))
      const n = images.length
      const outs = await Promise.all(Array.from({ length: 2 * n }, (_, i) => pipe.run(images[i % n], options)))
      outs.forEach((out, i) => assertSegments(out, results[i % n].calls[at].segments, `call ${i}`))
      const many = await pipe.run(images, options)
      many.forEach((out, i) => assertSegments(out, results[i].calls[at].segments, `images[${i}]`))
    })

    test('dispose: later calls reject with Disposed', TIMEOUT, async () => {
      const other = await ImageSegmentationPipeline.load(folder)
      other.dispose()
      await assert.rejects(other.run(path.join(IMAGES, results[0].image)), coded('Disposed'))
    })
  })
}

describe('image-segmentation subtasks: coded errors', { skip: SKIP }, () => {
  const results = SKIP ? [] : goldens.mask2former.results
  let pipe
  before(async () => {
    pipe = await ImageSegmentationPipeline.load(path.join(DIR, 'mask2former'))
  })
  after(() => pipe?.dispose())

  test('a subtask or threshold the model does not take, bad images', TIMEOUT, async () => {
    const image = path.join(IMAGES, results[0].image)
    await assert.rejects(pipe.run(image, { subtask: 'depth' }), coded('InvalidArg', /subtask/))
    await assert.rejects(pipe.run(image, { threshold: 'high' }), coded('InvalidArg', /threshold/))
    await assert.rejects(
      pipe.run(image, { subtask: 'instance', maskThreshold: 0.4 }),
      coded('InvalidArg', /maskThreshold: the instance subtask does not read it/),
    )
    await assert.rejects(
      pipe.run(image, { subtask: 'semantic', threshold: 0.4 }),
      coded('InvalidArg', /threshold: the semantic subtask does not read it/),
    )
    await assert.rejects(pipe.run(Buffer.from('not an image')), coded('InvalidImage'))
    await assert.rejects(pipe.run([]), coded('InvalidArg', /at least one/))
    const segformer = path.join(ROOT, 'models', 'golden', 'dense', 'segformer')
    if (fs.existsSync(segformer)) {
      const semantic = await ImageSegmentationPipeline.load(segformer)
      assert.deepEqual(semantic.subtasks, ['semantic'])
      await assert.rejects(semantic.run(image, { subtask: 'instance' }), coded('InvalidArg', /'semantic' only/))
      await assert.rejects(semantic.run(image, { threshold: 0.5 }), coded('InvalidArg', /does not read it/))
      semantic.dispose()
    }
    // DETR's instance segmentation is its panoptic one without fusing: it reads all three thresholds
    const detr = await ImageSegmentationPipeline.load(path.join(DIR, 'detr'))
    const options = { subtask: 'instance', threshold: 0.1, maskThreshold: 0.4, overlapMaskAreaThreshold: 0.3 }
    assert.ok(Array.isArray(await detr.run(image, options)))
    await assert.rejects(
      detr.run(image, { subtask: 'semantic', maskThreshold: 0.4 }),
      coded('InvalidArg', /does not read/),
    )
    detr.dispose()
  })
})

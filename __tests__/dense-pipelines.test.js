'use strict'
// depth-estimation and image-segmentation (issue 50): DPT, Depth Anything, Segformer and DPT
// segmentation folders python/export_dense.py wrote from random-weight checkpoints, against transformers 5's
// pipeline('depth-estimation') / pipeline('image-segmentation') (models/make_dense_models.py's
// goldens); concurrent calls batched; bad input, abort and dispose.
const { describe, test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { spawnSync } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const torch = require('..')
const { coded } = require('./helpers')
const { DepthEstimationPipeline, depthImage } = require('../lib/vision/depth-estimation')
const { ImageSegmentationPipeline } = require('../lib/vision/image-segmentation')

const ROOT = path.join(__dirname, '..')
const DIR = path.join(ROOT, 'models', 'golden', 'dense')
const GOLDENS = path.join(DIR, 'goldens.json')
const IMAGES = path.join(ROOT, 'models', 'images')
const SKIP = fs.existsSync(GOLDENS)
  ? false
  : 'no dense models: run `node tools/models.js --lazy` (make_dense_models.py)'
// predicted_depth within 1e-5 absolute or 1e-4 of the largest depth; pixel_values exactly.
const DEPTH_ABS = 1e-5
const DEPTH_REL = 1e-4
const TIMEOUT = { timeout: 120_000 }

const goldens = SKIP ? null : JSON.parse(fs.readFileSync(GOLDENS, 'utf8'))
const images = SKIP ? [] : goldens.images.map((n) => path.join(IMAGES, n))
const bytes = (b64) => new Uint8Array(Buffer.from(b64, 'base64'))
const floats = (b64) => new Float32Array(bytes(b64).buffer)

/** The largest |a - b| and the largest |b|. */
function maxDiff(a, b) {
  assert.equal(a.length, b.length)
  let diff = 0
  let scale = 0
  for (let i = 0; i < b.length; i++) {
    diff = Math.max(diff, Math.abs(a[i] - b[i]))
    scale = Math.max(scale, Math.abs(b[i]))
  }
  return { diff, scale }
}

/** How many elements differ, and by at most how much. */
function mismatches(a, b) {
  assert.equal(a.length, b.length)
  let count = 0
  let most = 0
  for (let i = 0; i < b.length; i++) {
    if (a[i] !== b[i]) count++
    most = Math.max(most, Math.abs(a[i] - b[i]))
  }
  return { count, most }
}

/**
 * One image's depth against Python's. `exact`: a traced program runs transformers' kernels, so
 * the uint8 image is equal; a .pt2's fused kernels move depths by ~1e-6, which can move a pixel
 * across a uint8 step: at most 1 step, at ≤ 0.01% of pixels.
 */
function assertDepth(got, want, exact, what) {
  assert.deepEqual(got.predictedDepth.shape, want.predictedDepthShape, `${what}: shape`)
  assert.equal(got.predictedDepth.dtype, 'float32')
  const { diff, scale } = maxDiff(got.predictedDepth.toTypedArray(), floats(want.predictedDepth))
  assert.ok(
    diff <= Math.max(DEPTH_ABS, DEPTH_REL * scale),
    `${what}: predicted_depth differs by ${diff} (max ${scale})`,
  )
  assert.equal(got.depth.dtype, 'uint8')
  assert.deepEqual(got.depth.shape, want.predictedDepthShape)
  const { count, most } = mismatches(got.depth.toTypedArray(), bytes(want.depth))
  if (exact) assert.equal(count, 0, `${what}: depth image differs at ${count} pixels`)
  assert.ok(most <= 1 && count <= 1e-4 * got.depth.numel(), `${what}: depth image: ${count} pixels, by ${most}`)
}

/**
 * One image's segments against Python's: labels in order, `score` null, and masks equal except
 * at `tolerated` of the pixels (0: exact).
 */
function assertSegments(got, want, tolerated, what) {
  assert.deepEqual(
    got.map((s) => s.label),
    want.map((s) => s.label),
    `${what}: labels`,
  )
  got.forEach((s, i) => {
    assert.equal(s.score, null)
    assert.equal(s.mask.dtype, 'uint8')
    const { count } = mismatches(s.mask.toTypedArray(), bytes(want[i].mask))
    assert.ok(count <= tolerated * s.mask.numel(), `${what}: mask '${s.label}' differs at ${count} pixels`)
  })
}

for (const name of ['dpt', 'depth-anything']) {
  describe(`${name}: depth-estimation against transformers`, { skip: SKIP }, () => {
    const folder = path.join(DIR, name)
    let pipe, exact
    before(async () => {
      pipe = await DepthEstimationPipeline.load(folder)
      exact = JSON.parse(fs.readFileSync(path.join(folder, 'manifest.json'), 'utf8')).model.programFormat !== 'pt2'
    })
    after(() => pipe?.dispose())

    test('pixel_values equal the image processor', TIMEOUT, async () => {
      const preprocess = await torch.ScriptModule.load(path.join(folder, 'preprocess.pt'))
      for (const [i, image] of images.entries()) {
        const want = goldens[name].results[i]
        const decoded = await torch.image.load(image, { dtype: 'uint8', layout: 'chw' })
        const pixels = await preprocess.forward(decoded)
        assert.deepEqual(pixels.shape, want.pixelShape.slice(1))
        assert.equal(maxDiff(pixels.toTypedArray(), floats(want.pixelValues)).diff, 0, goldens.images[i])
      }
      preprocess.dispose()
    })

    test('predicted_depth and the depth image equal the pipeline, one image at a time', TIMEOUT, async () => {
      for (const [i, image] of images.entries()) {
        assertDepth(await pipe.run(image), goldens[name].results[i], exact, goldens.images[i])
      }
      assert.equal(pipe.task, 'depth-estimation')
    })

    test('concurrent calls (paths, bytes, data URLs, tensors) share forwards', TIMEOUT, async () => {
      const before = pipe.stats().batches ?? 0
      const png = fs.readFileSync(images[1])
      const tensor = await torch.image.load(images[2], { dtype: 'uint8', layout: 'chw' })
      const inputs = [images[0], png, `data:image/png;base64,${png.toString('base64')}`, tensor]
      const which = [0, 1, 1, 2]
      const outs = await Promise.all(Array.from({ length: 12 }, (_, i) => pipe.run(inputs[i % 4])))
      outs.forEach((out, i) => assertDepth(out, goldens[name].results[which[i % 4]], false, `call ${i}`))
      const many = await pipe.run(images)
      many.forEach((out, i) => assertDepth(out, goldens[name].results[i], false, `images[${i}]`))
      const stats = pipe.stats()
      if (stats.batches !== undefined) assert.ok(stats.batches - before < 15, `batches ${stats.batches - before}`)
    })

    test('an RGBA PNG and a JPEG (as PIL decodes it) as the pipeline converts them to RGB', TIMEOUT, async () => {
      const extra = goldens[name].extraResults
      assert.equal(extra?.length, 2, 'goldens with extraResults: rerun models/make_dense_models.py')
      for (const want of extra) assertDepth(await pipe.run(path.join(DIR, want.image)), want, exact, want.image)
    })
  })
}

for (const name of ['segformer', 'dpt-segmentation']) {
  describe(`${name}: image-segmentation against transformers`, { skip: SKIP }, () => {
    const folder = path.join(DIR, name)
    let pipe
    before(async () => {
      pipe = await ImageSegmentationPipeline.load(folder)
    })
    after(() => pipe?.dispose())

    test('labels and masks equal the pipeline, one image at a time', TIMEOUT, async () => {
      for (const [i, image] of images.entries()) {
        assertSegments(await pipe.run(image), goldens[name].results[i].segments, 0, goldens.images[i])
      }
      assert.equal(pipe.task, 'image-segmentation')
      assert.equal(pipe.labels['1'], 'cat')
      const semantic = await pipe.run(images[0], { subtask: 'semantic' })
      assertSegments(semantic, goldens[name].results[0].segments, 0, 'subtask semantic')
      // an RGBA PNG (alpha dropped, as PIL's convert('RGB')) and a JPEG as PIL decodes it
      assert.equal(goldens[name].extraResults?.length, 2)
      for (const want of goldens[name].extraResults) {
        assertSegments(await pipe.run(path.join(DIR, want.image)), want.segments, 0, want.image)
      }
    })

    test('concurrent calls share forwards', TIMEOUT, async () => {
      const before = pipe.stats().batches ?? 0
      const outs = await Promise.all(Array.from({ length: 9 }, (_, i) => pipe.run(images[i % 3])))
      // A batch's convolutions round differently from a single image's: a pixel whose two best
      // labels tie within that may flip (1 pixel in 262144 measured on astronaut.png).
      outs.forEach((out, i) => assertSegments(out, goldens[name].results[i % 3].segments, 1e-4, `call ${i}`))
      const stats = pipe.stats()
      if (stats.batches !== undefined) assert.ok(stats.batches - before < 9, `batches ${stats.batches - before}`)
    })
  })
}

describe('dense pipelines: bad input, abort, dispose', { skip: SKIP }, () => {
  let depth, segment
  before(async () => {
    depth = await DepthEstimationPipeline.load(path.join(DIR, 'dpt'))
    segment = await ImageSegmentationPipeline.load(path.join(DIR, 'segformer'))
  })
  after(() => {
    depth?.dispose()
    segment?.dispose()
  })

  test('coded errors: images, options, folders', TIMEOUT, async () => {
    await assert.rejects(depth.run([]), coded('InvalidArg', /at least one/))
    await assert.rejects(depth.run(42), coded('InvalidArg', /images/))
    await assert.rejects(depth.run(torch.zeros([3, 4, 4])), coded('InvalidArg', /uint8 RGB Tensor/))
    await assert.rejects(depth.run(torch.zeros([4, 4], { dtype: 'uint8' })), coded('InvalidArg', /uint8 RGB Tensor/))
    await assert.rejects(depth.run(images[0], { topK: 2 }), coded('InvalidArg', /topK/))
    await assert.rejects(segment.run(images[0], { subtask: 'panoptic' }), coded('InvalidArg', /subtask/))
    await assert.rejects(depth.run(Buffer.from('not an image at all')), coded('InvalidImage'))
    const png = fs.readFileSync(images[0])
    await assert.rejects(segment.run(png.subarray(0, 200)), coded('InvalidImage'))
    // A PNG header claiming 100000×100000 pixels: refused by the decoder's limits at once.
    const bomb = Buffer.from(png.subarray(0, 64))
    bomb.writeUInt32BE(100_000, 16)
    bomb.writeUInt32BE(100_000, 20)
    const started = Date.now()
    await assert.rejects(depth.run(bomb), coded('InvalidImage'))
    assert.ok(Date.now() - started < 1000)
    await assert.rejects(DepthEstimationPipeline.load(IMAGES), coded('ModelLoadError'))
    await assert.rejects(DepthEstimationPipeline.load(path.join(DIR, 'segformer')), coded('ModelLoadError', /depth/))
    await assert.rejects(ImageSegmentationPipeline.load(path.join(DIR, 'dpt')), coded('ModelLoadError'))
    await assert.rejects(
      DepthEstimationPipeline.load(path.join(DIR, 'depth-anything'), { maxBatchSize: 1000 }),
      coded('InvalidArg', /--max-batch/),
    )
    await assert.rejects(DepthEstimationPipeline.load(path.join(DIR, 'dpt'), { batch: 2 }), coded('InvalidArg'))
    assert.throws(() => new DepthEstimationPipeline(Symbol('x'), null), coded('InvalidArg', /load/))
    // still serving; a tiny image
    const tiny = await depth.run(torch.full([3, 1, 2], 7, { dtype: 'uint8' }))
    assert.deepEqual(tiny.predictedDepth.shape, [1, 2])
  })

  test('an aborted signal rejects with Aborted; dispose rejects later calls with Disposed', TIMEOUT, async () => {
    const controller = new AbortController()
    controller.abort()
    await assert.rejects(depth.run(images[0], { signal: controller.signal }), coded('Aborted'))
    await assert.rejects(segment.run(images[0], { signal: controller.signal }), coded('Aborted'))
    const other = await ImageSegmentationPipeline.load(path.join(DIR, 'segformer'))
    other.dispose()
    assert.equal(other.isDisposed, true)
    await assert.rejects(other.run(images[0]), coded('Disposed'))
  })

  test("the depth image is numpy's float32 (d - min) / (max - min) * 255, truncated", () => {
    assert.deepEqual(Array.from(depthImage(new Float32Array([0, 0.5, 1, 0.25]))), [0, 127, 255, 63])
    assert.deepEqual(Array.from(depthImage(new Float32Array([2, 2]))), [0, 0]) // flat: 0 / 0
  })

  test('the exporter refuses a folder it does not take (exit 2, one line)', () => {
    const python = path.join(ROOT, '.libtorch', 'bin', 'python')
    if (!fs.existsSync(python)) return
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dense-'))
    fs.writeFileSync(path.join(dir, 'config.json'), JSON.stringify({ architectures: ['BertModel'] }))
    const r = spawnSync(python, [path.join(ROOT, 'python', 'export_dense.py'), dir, path.join(dir, 'out')])
    fs.rmSync(dir, { recursive: true, force: true })
    assert.equal(r.status, 2, String(r.stderr))
    assert.match(String(r.stderr), /^export_dense\.py: .*not one of DPTForDepthEstimation/)
  })
})

describe('torch-node export and torch.pipeline reach the depth and segmentation folders', { skip: SKIP }, () => {
  test('export sends their checkpoints to export_dense.py and refuses what it does not take', () => {
    const { imageExport } = require('../lib/cli')
    for (const name of ['dpt-src', 'depth-anything-src', 'segformer-src', 'dpt-segmentation-src']) {
      assert.equal(imageExport(path.join(DIR, name))?.exporter, 'dense', name)
    }
    assert.equal(imageExport(IMAGES), undefined)
    const cli = path.join(ROOT, 'bin', 'torch-node.js')
    for (const flags of [
      ['--quantize', 'int8'],
      ['--dtype', 'float16'],
      ['--task', 'fill-mask'],
    ]) {
      const out = path.join(os.tmpdir(), 'torch-node-dense-unused')
      const r = spawnSync(process.execPath, [cli, 'export', path.join(DIR, 'segformer-src'), out, ...flags])
      assert.equal(r.status, 2, `${flags}: ${r.stderr}`)
      assert.match(String(r.stderr), /not for depth or segmentation models/)
    }
  })

  test('torch.pipeline: the task names the class; a folder of another task is ModelLoadError', TIMEOUT, async () => {
    const depth = await torch.pipeline('depth-estimation', path.join(DIR, 'dpt'))
    const segment = await torch.pipeline('image-segmentation', path.join(DIR, 'segformer'))
    try {
      assert.ok(depth instanceof DepthEstimationPipeline)
      assert.ok(segment instanceof ImageSegmentationPipeline)
      await assert.rejects(torch.pipeline('depth-estimation', path.join(DIR, 'segformer')), coded('ModelLoadError'))
      await assert.rejects(torch.pipeline('image-segmentation', path.join(DIR, 'dpt')), coded('ModelLoadError'))
    } finally {
      depth.dispose()
      segment.dispose()
    }
  })
})

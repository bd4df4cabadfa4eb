'use strict'
// image-feature-extraction over vision backbones (issue 50): a ViTModel, a Dinov2Model
// (BitImageProcessor: shortest edge, center crop; position embeddings interpolated) and an
// IJepaModel (no pooler: pool is refused, as transformers raises) that
// python/export_vision.py wrote from random-weight checkpoints, against transformers 5's
// pipeline('image-feature-extraction')(image, return_tensors=True[, pool=True])
// (models/make_dense_models.py's backbone-goldens.json): within 1e-5; concurrent calls batched and
// equal to calls one at a time; bad input, options of the other kind, dispose.
const { describe, test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const torch = require('..')
const { coded } = require('./helpers')
const { ImageFeatureExtractionPipeline } = require('../lib/vision/image-feature-extraction')

const ROOT = path.join(__dirname, '..')
const DIR = path.join(ROOT, 'models', 'golden', 'dense')
const GOLDENS = path.join(DIR, 'backbone-goldens.json')
const IMAGES = path.join(ROOT, 'models', 'images')
const goldens = fs.existsSync(GOLDENS) ? JSON.parse(fs.readFileSync(GOLDENS, 'utf8')) : null
const SKIP = goldens ? false : 'no backbone models: run `node tools/models.js --lazy` (make_dense_models.py)'
const TOL = 1e-5
const TIMEOUT = { timeout: 120_000 }
// Generated beside the goldens (make_dense_models.py write_rgba), else the repository's. The JPEG
// is read as PIL decodes it (chelsea-jpg-pil.png): the decoders differ by a few steps
// (vision-pipelines.test.js measures by how much).
const imagePath = (name) => {
  const file = name === 'chelsea.jpg' ? 'chelsea-jpg-pil.png' : name
  return ['rgba.png', 'chelsea-jpg-pil.png'].includes(file) ? path.join(DIR, file) : path.join(IMAGES, file)
}
const floats = (b64) => new Float32Array(new Uint8Array(Buffer.from(b64, 'base64')).buffer)

/** The largest |a - b|, asserting the lengths equal. */
function maxDiff(a, b) {
  assert.equal(a.length, b.length)
  let diff = 0
  for (let i = 0; i < b.length; i++) diff = Math.max(diff, Math.abs(a[i] - b[i]))
  return diff
}

/** A tensor against a golden `{ shape, data }`: the same shape, values within TOL; disposes it. */
function assertGolden(t, want, what) {
  try {
    assert.equal(t.dtype, 'float32', what)
    assert.deepEqual(t.shape, want.shape, what)
    const diff = maxDiff(t.toTypedArray(), floats(want.data))
    assert.ok(diff <= TOL, `${what}: differs by ${diff}`)
  } finally {
    t.dispose()
  }
}

for (const name of ['vit-backbone', 'dinov2', 'ijepa']) {
  describe(`${name}: image-feature-extraction against transformers`, { skip: SKIP }, () => {
    const folder = path.join(DIR, name)
    let pipe
    before(async () => {
      pipe = await ImageFeatureExtractionPipeline.load(folder)
    })
    after(() => pipe?.dispose())

    test('pixel_values equal the image processor', TIMEOUT, async () => {
      const preprocess = await torch.ScriptModule.load(path.join(folder, 'preprocess.pt'))
      try {
        for (const want of goldens[name]) {
          const decoded = await torch.image.load(imagePath(want.image), { dtype: 'uint8', layout: 'chw' })
          const pixels = await preprocess.forward(decoded)
          assert.deepEqual(pixels.shape, want.pixelShape.slice(1), want.image)
          const diff = maxDiff(pixels.toTypedArray(), floats(want.pixelValues))
          assert.ok(diff <= 1e-6, `${want.image}: pixel_values differ by ${diff}`)
          decoded.dispose()
          pixels.dispose()
        }
      } finally {
        preprocess.dispose()
      }
    })

    test('last_hidden_state [1, T, H] and pool: pooler_output [1, H], one image at a time', TIMEOUT, async () => {
      const pooled = goldens[name][0].pooled
      assert.equal(pipe.task, 'image-feature-extraction')
      assert.equal(pipe.kind, 'backbone')
      assert.equal(pipe.family, null)
      assert.equal(pipe.dim, goldens[name][0].hidden.shape[2])
      assert.deepEqual(pipe.pooledShape, pooled ? pooled.shape.slice(1) : null)
      for (const want of goldens[name]) {
        const image = imagePath(want.image)
        assertGolden(await pipe.run(image), want.hidden, `${want.image} hidden`)
        assertGolden(await pipe.run(image, { pool: false }), want.hidden, `${want.image} pool false`)
        if (want.pooled) assertGolden(await pipe.run(image, { pool: true }), want.pooled, `${want.image} pooled`)
        else await assert.rejects(pipe.run(image, { pool: true }), coded('InvalidArg', /no pooler/))
      }
    })

    test(
      'an array of images and concurrent calls (paths, bytes, data URLs, tensors) share forwards',
      TIMEOUT,
      async () => {
        const wants = goldens[name]
        const files = wants.map((w) => imagePath(w.image))
        const pool = wants[0].pooled !== null
        const many = await pipe.run(files, { pool })
        assert.ok(Array.isArray(many) && many.length === files.length)
        many.forEach((t, i) => assertGolden(t, pool ? wants[i].pooled : wants[i].hidden, `images[${i}]`))
        // One at a time, then 12 calls at once: batched forwards answer as single ones (and the goldens).
        const single = []
        for (const f of files) {
          const t = await pipe.run(f)
          single.push(t.toTypedArray())
          t.dispose()
        }
        const png = fs.readFileSync(files[1])
        const tensor = await torch.image.load(files[2], { dtype: 'uint8', layout: 'chw' })
        const inputs = [files[0], png, `data:image/png;base64,${png.toString('base64')}`, tensor]
        const which = [0, 1, 1, 2]
        const before = pipe.stats().batches
        const outs = await Promise.all(Array.from({ length: 12 }, (_, i) => pipe.run(inputs[i % 4])))
        const batches = pipe.stats().batches - before
        tensor.dispose()
        outs.forEach((t, i) => {
          const got = t.toTypedArray()
          assert.ok(maxDiff(got, single[which[i % 4]]) <= TOL, `call ${i} against the single call`)
          assertGolden(t, wants[which[i % 4]].hidden, `call ${i}`)
        })
        assert.ok(batches < 12, `12 concurrent calls took ${batches} forwards`)
      },
    )
  })
}

describe('image-feature-extraction backbones: bad input, options, dispose', { skip: SKIP }, () => {
  test('coded errors: images, options of the other kind, text', TIMEOUT, async () => {
    const pipe = await ImageFeatureExtractionPipeline.load(path.join(DIR, 'vit-backbone'))
    const image = path.join(IMAGES, 'chelsea.png')
    try {
      await assert.rejects(pipe.run([]), coded('InvalidArg'))
      await assert.rejects(pipe.run(42), coded('InvalidArg'))
      await assert.rejects(pipe.run(Buffer.from('not an image')), coded('InvalidImage'))
      await assert.rejects(pipe.run(torch.zeros([3, 4, 4])), coded('InvalidArg'))
      await assert.rejects(pipe.run(image, { pool: 'yes' }), coded('InvalidArg'))
      await assert.rejects(pipe.run(image, { normalize: true }), coded('InvalidArg', /normalize is for CLIP/))
      await assert.rejects(pipe.run(image, { topK: 1 }), coded('InvalidArg'))
      await assert.rejects(pipe.embedText('a cat'), coded('InvalidArg', /no text tower/))
      await assert.rejects(pipe.countTokens(['a cat']), coded('InvalidArg', /no text tower/))
      assert.equal(pipe.tokenizer, null)
      assert.throws(() => new ImageFeatureExtractionPipeline(Symbol('x'), null), coded('InvalidArg'))
      await assert.rejects(ImageFeatureExtractionPipeline.load(path.join(DIR, 'vit')), coded('ModelLoadError'))
    } finally {
      pipe.dispose()
    }
  })

  test('a manifest without the output sizes: ModelLoadError', TIMEOUT, async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'backbone-'))
    const src = path.join(DIR, 'vit-backbone')
    for (const f of fs.readdirSync(src)) fs.copyFileSync(path.join(src, f), path.join(dir, f))
    const manifest = JSON.parse(fs.readFileSync(path.join(dir, 'manifest.json'), 'utf8'))
    try {
      for (const bad of [{ hiddenSize: 0 }, { hiddenSize: '32' }, { pooledShape: 'x' }, { pooledShape: [-1] }]) {
        fs.writeFileSync(path.join(dir, 'manifest.json'), JSON.stringify({ ...manifest, ...bad }))
        await assert.rejects(ImageFeatureExtractionPipeline.load(dir), coded('ModelLoadError', /hiddenSize/))
      }
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  })

  test('a CLIP folder refuses pool', TIMEOUT, async (t) => {
    const clip = path.join(ROOT, 'models', 'golden', 'clip', 'clip')
    if (!fs.existsSync(path.join(clip, 'manifest.json'))) return t.skip('no CLIP models (make_clip_models.py)')
    const pipe = await ImageFeatureExtractionPipeline.load(clip)
    try {
      assert.equal(pipe.kind, 'clip')
      assert.equal(pipe.pooledShape, null)
      await assert.rejects(
        pipe.run(path.join(IMAGES, 'chelsea.png'), { pool: true }),
        coded('InvalidArg', /pool is for/),
      )
    } finally {
      pipe.dispose()
    }
  })

  test('an aborted signal rejects with Aborted; dispose rejects later calls with Disposed', TIMEOUT, async () => {
    const pipe = await ImageFeatureExtractionPipeline.load(path.join(DIR, 'dinov2'))
    const image = path.join(IMAGES, 'chelsea.png')
    await assert.rejects(pipe.run(image, { signal: AbortSignal.abort() }), coded('Aborted'))
    pipe.dispose()
    assert.equal(pipe.isDisposed, true)
    await assert.rejects(pipe.run(image), coded('Disposed'))
  })
})

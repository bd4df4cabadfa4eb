'use strict'
// torch.vision.classify: the shape of its answer, that every option is honoured (compared with the
// same pipeline written out by hand with torch.image and forward), and coded errors for the rest.
const { describe, test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const torch = require('..')
const { coded } = require('./helpers')
const { LITE0_PREPROCESS } = require('../lib/bundled')

const ROOT = path.join(__dirname, '..')
const CHELSEA = path.join(ROOT, 'data', 'chelsea.png')
const COFFEE = path.join(ROOT, 'models', 'images', 'coffee.png')
const MODEL = path.join(ROOT, 'models', 'efficientnet_lite0_traced.pt')
const IMAGENET = { resize: 256, centerCrop: 224, mean: 'imagenet' }
const CATS = [281, 282, 283, 284, 285] // tabby, tiger cat, Persian, Siamese, Egyptian cat
const ESPRESSO = 967

function need(p) {
  assert.ok(fs.existsSync(p), `${p} is missing: run \`npm run models\``)
  return p
}

/** The softmax probabilities of every class, by hand: load, forward, softmax. */
async function probabilitiesByHand(module, source, options) {
  const x = await torch.image.load(source, options)
  const logits = await module.forward(x)
  const p = logits.softmax(1).toArray()[0]
  return p
}

function assertClose(actual, expected, tolerance, what) {
  assert.ok(Math.abs(actual - expected) <= tolerance, `${what}: ${actual} vs ${expected}`)
}

describe('torch.vision.imagenetLabels', () => {
  test('the 1000 ImageNet-1k classes in torchvision order, frozen', () => {
    const labels = torch.vision.imagenetLabels
    assert.equal(labels.length, 1000)
    assert.ok(labels.every((l) => typeof l === 'string' && l.length > 0))
    assert.equal(labels[0], 'tench')
    assert.equal(labels[285], 'Egyptian cat')
    assert.equal(labels[ESPRESSO], 'espresso')
    assert.equal(labels[999], 'toilet tissue')
    assert.ok(Object.isFrozen(labels))
  })
})

describe('torch.vision.classify', () => {
  let model
  before(async () => {
    model = await torch.ScriptModule.load(need(MODEL))
  })
  after(() => model.dispose())

  test('one array per image of {label, index, probability}, most probable first; chelsea is a cat', async () => {
    const result = await torch.vision.classify(model, CHELSEA)
    assert.equal(result.length, 1)
    const top = result[0]
    assert.equal(top.length, 5) // topk defaults to 5
    for (const p of top) {
      assert.deepEqual(Object.keys(p), ['label', 'index', 'probability'])
      assert.ok(Number.isInteger(p.index) && p.index >= 0 && p.index < 1000)
      assert.equal(p.label, torch.vision.imagenetLabels[p.index])
      assert.ok(p.probability > 0 && p.probability <= 1)
    }
    for (let k = 1; k < top.length; k++) assert.ok(top[k - 1].probability >= top[k].probability)
    assert.ok(CATS.includes(top[0].index), `top-1 ${top[0].label}`)
  })

  test('the default pre-processing is Resize(256) + CenterCrop(224) + ImageNet mean/std', async () => {
    const byHand = await probabilitiesByHand(model, CHELSEA, IMAGENET)
    const [top] = await torch.vision.classify(model, CHELSEA, { topk: 3 })
    for (const p of top) assertClose(p.probability, byHand[p.index], 1e-6, p.label)
  })

  test('preprocess replaces the default: EfficientNet-Lite0 normalization gives its numbers', async () => {
    const byHand = await probabilitiesByHand(model, CHELSEA, LITE0_PREPROCESS)
    const imagenet = await probabilitiesByHand(model, CHELSEA, IMAGENET)
    const [top] = await torch.vision.classify(model, CHELSEA, { topk: 3, preprocess: LITE0_PREPROCESS })
    for (const p of top) assertClose(p.probability, byHand[p.index], 1e-6, p.label)
    assert.ok(Math.abs(top[0].probability - imagenet[top[0].index]) > 1e-3, 'the two normalizations differ')
    // Replaced, not merged: without centerCrop the whole 300×449 resized photo goes in.
    const uncropped = { resize: 300, mean: 'imagenet' }
    const whole = await probabilitiesByHand(model, CHELSEA, uncropped)
    const [first] = await torch.vision.classify(model, CHELSEA, { topk: 1, preprocess: uncropped })
    assertClose(first[0].probability, whole[first[0].index], 1e-6, first[0].label)
    assert.ok(Math.abs(first[0].probability - imagenet[first[0].index]) > 1e-3, 'not the cropped input')
  })

  test('a batch of a path, a Buffer and a Uint8Array: one answer each, in order, as if alone', async () => {
    const bytes = fs.readFileSync(need(COFFEE))
    const result = await torch.vision.classify(model, [CHELSEA, bytes, new Uint8Array(fs.readFileSync(CHELSEA))], {
      topk: 2,
    })
    assert.equal(result.length, 3)
    assert.ok(CATS.includes(result[0][0].index))
    assert.equal(result[1][0].index, ESPRESSO)
    const [alone] = await torch.vision.classify(model, bytes, { topk: 2 })
    // Batch 3 against batch 1: the kernels block differently, so probabilities within 1e-5; the
    // order of the top 2 is compared exactly (coffee's classes are >= 0.05 apart).
    assert.deepEqual(
      result[1].map((p) => p.index),
      alone.map((p) => p.index),
    )
    result[1].forEach((p, k) => assertClose(p.probability, alone[k].probability, 1e-5, p.label))
    assert.deepEqual(
      result[2].map((p) => p.index),
      result[0].map((p) => p.index),
    )
  })

  test('a ready Tensor [N, 3, H, W] is used as it is, and left to its owner', async () => {
    const x = await torch.image.load(CHELSEA, IMAGENET)
    const byHand = await probabilitiesByHand(model, CHELSEA, IMAGENET)
    const [top] = await torch.vision.classify(model, x, { topk: 1 })
    assert.equal(top.length, 1)
    assertClose(top[0].probability, byHand[top[0].index], 1e-6, top[0].label)
    assert.equal(x.isDisposed, false)
    x.dispose()
  })

  test('topk: 1000 gives every class, summing to 1', async () => {
    const [all] = await torch.vision.classify(model, CHELSEA, { topk: 1000 })
    assert.equal(all.length, 1000)
    assert.deepEqual(new Set(all.map((p) => p.index)).size, 1000)
    assertClose(
      all.reduce((s, p) => s + p.probability, 0),
      1,
      1e-4,
      'sum',
    )
  })

  test('labels: names the classes of any classifier (here the 3-class fixture MLP)', async () => {
    const mlp = new torch.ScriptModule(path.join(ROOT, 'models', 'fixtures', 'mlp_traced.pt'))
    const x = torch.rand([2, 4])
    const result = await torch.vision.classify(mlp, x, { topk: 3, labels: ['ant', 'bee', 'cat'] })
    const p = mlp.forwardSync(x).softmax(1).toArray()
    assert.equal(result.length, 2)
    result.forEach((row, n) => {
      assert.deepEqual(row.map((c) => c.label).sort(), ['ant', 'bee', 'cat'])
      for (const c of row) {
        assert.equal(c.label, ['ant', 'bee', 'cat'][c.index])
        assertClose(c.probability, p[n][c.index], 1e-6, c.label)
      }
    })
    await assert.rejects(
      torch.vision.classify(mlp, x),
      coded('InvalidArg', /options\.labels: 1000 labels for a model with 3 classes/),
    )
    await assert.rejects(
      torch.vision.classify(mlp, torch.rand([2, 3, 4]), { labels: ['a', 'b', 'c'] }),
      coded('ShapeMismatch', /returned logits of shape \[2,3,3\]; expected \[2, classes\]/),
    )
    mlp.dispose()
  })

  test('signal: an aborted signal rejects with Aborted before any work; a live one is passed on', async () => {
    await assert.rejects(torch.vision.classify(model, CHELSEA, { signal: AbortSignal.abort() }), coded('Aborted'))
    const [top] = await torch.vision.classify(model, CHELSEA, { topk: 1, signal: new AbortController().signal })
    assert.ok(CATS.includes(top[0].index))
  })

  test('bad arguments reject (never throw) with coded one-line errors', async () => {
    const cases = [
      [[{}, CHELSEA], 'InvalidArg', /module: expected a ScriptModule, got an object/],
      [
        [model, 42],
        'InvalidArg',
        /images: expected a path, a Buffer\/Uint8Array, an array of them or a Tensor, got number/,
      ],
      [[model, {}], 'InvalidArg', /images: expected .* got an object/],
      [[model, []], 'InvalidArg', /images: expected at least one image/],
      [[model, CHELSEA, 5], 'InvalidArg', /options: expected an options object, got number 5/],
      [[model, CHELSEA, { top: 1 }], 'InvalidArg', /unknown option 'top'; accepted: topk, labels, preprocess, signal/],
      [[model, CHELSEA, { topk: 0 }], 'InvalidArg', /options\.topk: expected a positive integer, got 0/],
      [[model, CHELSEA, { topk: 1.5 }], 'InvalidArg', /options\.topk/],
      [[model, CHELSEA, { topk: '3' }], 'InvalidArg', /options\.topk: expected a positive integer, got a string/],
      [[model, CHELSEA, { topk: 1001 }], 'InvalidArg', /options\.topk: 1001 is more than the model's 1000 classes/],
      [[model, CHELSEA, { labels: 'abc' }], 'InvalidArg', /options\.labels: expected an array of strings/],
      [[model, CHELSEA, { labels: [1, 2] }], 'InvalidArg', /options\.labels: expected an array of strings/],
      [
        [model, CHELSEA, { preprocess: 'imagenet' }],
        'InvalidArg',
        /options\.preprocess: expected torch\.image options/,
      ],
      [[model, CHELSEA, { preprocess: { resize: -1 } }], 'InvalidArg', /resize/],
      [[model, CHELSEA, { preprocess: { flip: true } }], 'InvalidArg', /unknown option 'flip'/],
      [
        [model, torch.zeros([1, 3, 224, 224]), { preprocess: IMAGENET }],
        'InvalidArg',
        /a Tensor input is used as it is/,
      ],
      [[model, torch.tensor(1)], 'InvalidArg', /a Tensor input needs a batch dimension/],
      [[model, CHELSEA, { signal: 'stop' }], 'InvalidArg', /options\.signal: expected an AbortSignal, got a string/],
      [[model, Buffer.from('not an image')], 'InvalidImage', /cannot decode the image/],
      [[model, [CHELSEA, 'no/such/file.png']], 'InvalidArg', /cannot read image 'no\/such\/file\.png'/],
    ]
    for (const [args, code, message] of cases) {
      const promise = torch.vision.classify(...args)
      assert.ok(promise instanceof Promise)
      await assert.rejects(promise, coded(code, message))
    }
  })

  test('leaves no tensors behind, answered or failed', async () => {
    await torch.vision.classify(model, CHELSEA) // first-call allocations (TorchScript's profiling) settle
    // Collect earlier tests' garbage first: finalizers run inside GC, so a collection during the
    // loop would otherwise lower the count below \`before\` (seen on Node 24).
    global.gc()
    const before = torch.memory().tensors
    for (let i = 0; i < 3; i++) {
      await torch.vision.classify(model, [CHELSEA, CHELSEA], { topk: 2 })
      await assert.rejects(torch.vision.classify(model, CHELSEA, { topk: 1001 }), coded('InvalidArg'))
    }
    global.gc()
    assert.equal(torch.memory().tensors, before)
  })
})

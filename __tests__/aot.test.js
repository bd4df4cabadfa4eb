'use strict'
// AOTInductor packages (`.pt2`, issue #11): ResNet-18 exported with a dynamic batch dimension
// and compiled by models/make_models.py at install (machine code for this CPU: never
// committed), checked against the same goldens as the TorchScript file; a two-input,
// two-output program with a shared dynamic batch; the inputs that must be refused (issue #18:
// both are compiled the default way, whose input checks record a lower bound of 2).
const { describe, test } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const torch = require('..')

const MODELS = path.join(__dirname, '..', 'models')
const RESNET = path.join(MODELS, 'resnet18.pt2') // x: float32 [batch, 3, 224, 224] -> [batch, 1000]
const TWO_IO = path.join(MODELS, 'two_io.pt2') // (x, y: float32 [b, 3], b in 1..64) -> (x + y, x * y)
const MISSING = [RESNET, TWO_IO].filter((p) => !fs.existsSync(p))
const SKIP = MISSING.length > 0 && `not generated (the model script could not compile them): ${MISSING.join(', ')}`

const f32 = (name) => {
  const b = fs.readFileSync(path.join(MODELS, 'golden', name))
  return new Float32Array(b.buffer, b.byteOffset, b.byteLength / 4)
}
const maxDiff = (a, b) => a.sub(b).abs().max().item()

describe('AOTModule', { skip: SKIP }, () => {
  test('ResNet-18 at batch 1 and 8 matches Python within 1e-5 (sync and async; batch 1 was refused before #18)', async () => {
    const input = torch.tensor(f32('resnet18_input_b8.f32'), { shape: [8, 3, 224, 224] })
    const m = await torch.AOTModule.load(RESNET)
    assert.ok(m instanceof torch.AOTModule)
    const out8 = await m.forward(input)
    assert.deepEqual(out8.shape, [8, 1000])
    assert.ok(maxDiff(out8, torch.tensor(f32('resnet18_output_b8.f32'), { shape: [8, 1000] })) < 1e-5)
    const out1 = m.forwardSync(input.narrow(0, 0, 1))
    assert.ok(maxDiff(out1, torch.tensor(f32('resnet18_output_b1.f32'), { shape: [1, 1000] })) < 1e-5)
  })

  test('several inputs and outputs; views are accepted; metadata says what the package records', () => {
    const m = new torch.AOTModule(TWO_IO)
    const x = torch.arange(0, 6, { dtype: 'float32' }).view(2, 3)
    const [sum, product] = m.forwardSync(x, torch.full([2, 3], 2))
    assert.deepEqual(sum.toArray(), [[2, 3, 4], [5, 6, 7]])
    assert.deepEqual(product.toArray(), [[0, 2, 4], [6, 8, 10]])
    assert.deepEqual(m.forwardSync(torch.arange(0, 6, { dtype: 'float32' }).view(3, 2).t(), torch.zeros([2, 3]))[0].toArray(), [[0, 2, 4], [1, 3, 5]])
    const meta = m.metadata()
    assert.equal(meta.AOTI_DEVICE_KEY, 'cpu')
    assert.equal(typeof meta.in_spec, 'string')
    assert.equal(m.device, 'cpu')
  })

  test('a dynamic batch runs at every size Python runs it, 1 included (sync and async)', async () => {
    const m = new torch.AOTModule(TWO_IO)
    // Exact: an elementwise add and multiply of small integers, the same at every batch size.
    for (const n of [1, 2, 37, 64]) {
      const x = torch.arange(0, 3 * n, { dtype: 'float32' }).view(n, 3)
      const [sum, product] = m.forwardSync(x, torch.full([n, 3], 2))
      assert.deepEqual(sum.toArray(), x.add(2).toArray())
      const [, again] = await m.forward(x, torch.full([n, 3], 2))
      assert.deepEqual(again.toArray(), product.toArray())
    }
    // A one-row view of a bigger tensor (strides of the big one along the size-1 dimension).
    assert.deepEqual(m.forwardSync(torch.ones([5, 3]).narrow(0, 2, 1), torch.ones([1, 3]))[0].toArray(), [[2, 2, 2]])
    // ResNet-18 compiled the default way (Dim min=1): batch 2 and 15, the largest it records.
    const r = new torch.AOTModule(RESNET)
    for (const n of [2, 15]) assert.deepEqual(r.forwardSync(torch.rand([n, 3, 224, 224])).shape, [n, 1000])
  })

  test('wrong shapes, dtypes, counts and values are coded errors, never a crash', async () => {
    const m = new torch.AOTModule(TWO_IO)
    const ok = torch.ones([2, 3])
    const expected = /expected shape \[1\.\.64, 3\]/
    const bad = [
      [[torch.ones([2, 4]), ok], 'ShapeMismatch', /input 0: expected shape \[1\.\.64, 3\], got \[2, 4\] \(dimension 1 must be 3\)$/],
      [[torch.ones([1]), ok], 'ShapeMismatch', /input 0: expected 2 dimensions \[1\.\.64, 3\], got shape \[1\]$/],
      [[torch.ones([2, 3, 1]), ok], 'ShapeMismatch', /expected 2 dimensions/],
      [[torch.ones([]), ok], 'ShapeMismatch', /expected 2 dimensions \[1\.\.64, 3\], got shape \[\]/],
      // Out of the range the package was compiled for: Dim(min=1, max=64); 0 is specialized away.
      [[torch.ones([65, 3]), torch.ones([65, 3])], 'ShapeMismatch', /got \[65, 3\] \(dimension 0 is 65, outside the 1\.\.64 this package was compiled for\)$/],
      [[torch.ones([0, 3]), torch.ones([0, 3])], 'ShapeMismatch', /dimension 0 is 0, outside the 1\.\.64/],
      // x and y share the batch: the kernels loop over x's, so a shorter y would be read past its end.
      [[torch.ones([3, 3]), ok], 'ShapeMismatch', /input 1: expected shape \[1\.\.64, 3\], got \[2, 3\] \(dimension 0 must equal input 0's dimension 0, 3\)$/],
      [[torch.ones([2, 3], { dtype: 'float64' }), ok], 'DTypeMismatch', /input 0: expected dtype float32, got float64$/],
      [[ok, torch.ones([2, 3], { dtype: 'int64' })], 'DTypeMismatch', /input 1: expected dtype float32, got int64$/],
      [[ok], 'InvalidArg', /inputs vector size to be 2, but got 1/],
      [[ok, ok, ok], 'InvalidArg', /inputs vector size to be 2, but got 3/],
      [[ok, 2], 'InvalidArg', /input 1: expected a Tensor/],
    ]
    for (const [inputs, code, message] of bad) {
      assert.throws(() => m.forwardSync(...inputs), (e) => e.code === code && message.test(e.message) && !e.message.includes('\n'), `${code} ${message}`)
      await assert.rejects(m.forward(...inputs), (e) => e.code === code && message.test(e.message))
    }
    const r = new torch.AOTModule(RESNET)
    assert.throws(() => r.forwardSync(torch.ones([1, 3, 224, 225])), { code: 'ShapeMismatch', message: /got \[1, 3, 224, 225\] \(dimension 3 must be 224\)/ })
    assert.throws(() => m.forwardSync(torch.ones([2, 4]), ok), { code: 'ShapeMismatch', message: expected })
    // Upper bounds are kept as recorded, even where narrower than the export's Dim(max=64):
    // this ResNet-18 records 15 (NNPACK's batch >= 16 test in ATen's convolution choice), and a
    // bound of the same form guards reads of fixed-size weights in other programs.
    assert.throws(() => r.forwardSync(torch.ones([16, 3, 224, 224])), { code: 'ShapeMismatch', message: /dimension 0 is 16, outside the 1\.\.15 this package was compiled for/ })
  })

  test('load errors: a missing file, a TorchScript file, options', async () => {
    await assert.rejects(torch.AOTModule.load(path.join(MODELS, 'nope.pt2')), { code: 'ModelLoadError', message: /No such file/ })
    assert.throws(() => new torch.AOTModule(path.join(MODELS, 'fixtures', 'mlp_traced.pt')), { code: 'ModelLoadError' })
    assert.throws(() => new torch.AOTModule(MODELS), { code: 'ModelLoadError', message: /directory/ })
    assert.throws(() => new torch.AOTModule(TWO_IO, { optimize: true }), { code: 'InvalidArg', message: /optimize/ })
    assert.throws(() => new torch.AOTModule(42), { code: 'InvalidArg' })
    assert.throws(() => torch.AOTModule(TWO_IO), { code: 'InvalidArg', message: /new/ })
    await assert.rejects(torch.AOTModule.load(TWO_IO, { signal: AbortSignal.abort() }), { code: 'Aborted' })
  })

  test('dispose: calls in flight finish, later calls throw Disposed; Symbol.dispose', async () => {
    const m = new torch.AOTModule(TWO_IO)
    const pending = m.forward(torch.ones([2, 3]), torch.ones([2, 3]))
    m[Symbol.dispose]()
    assert.equal((await pending).length, 2)
    assert.equal(m.isDisposed, true)
    assert.throws(() => m.forwardSync(torch.ones([2, 3]), torch.ones([2, 3])), { code: 'Disposed' })
  })
})

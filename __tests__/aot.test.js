'use strict'
// AOTInductor packages (`.pt2`, issue #11): ResNet-18 exported with a dynamic batch dimension
// and compiled by models/make_models.py at install (machine code for this CPU: never
// committed), checked against the same goldens as the TorchScript file; a two-input,
// two-output program; the inputs the compiled code must refuse.
const { describe, test } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const torch = require('..')

const MODELS = path.join(__dirname, '..', 'models')
const RESNET = path.join(MODELS, 'resnet18.pt2') // x: float32 [batch, 3, 224, 224] -> [batch, 1000]
const TWO_IO = path.join(MODELS, 'two_io.pt2') // (x, y: float32 [2, 3]) -> (x + y, x * y)
const MISSING = [RESNET, TWO_IO].filter((p) => !fs.existsSync(p))
const SKIP = MISSING.length > 0 && `not generated (the model script could not compile them): ${MISSING.join(', ')}`

const f32 = (name) => {
  const b = fs.readFileSync(path.join(MODELS, 'golden', name))
  return new Float32Array(b.buffer, b.byteOffset, b.byteLength / 4)
}
const maxDiff = (a, b) => a.sub(b).abs().max().item()

describe('AOTModule', { skip: SKIP }, () => {
  test('ResNet-18 at batch 1 and 8 matches Python within 1e-5 (sync and async)', async () => {
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

  test('wrong shapes, dtypes, counts and values are coded errors, never a crash', async () => {
    const m = new torch.AOTModule(TWO_IO)
    const ok = torch.ones([2, 3])
    const bad = [
      [[torch.ones([2, 4]), ok], 'ShapeMismatch', /unmatched dim value/],
      [[torch.ones([1]), ok], /ShapeMismatch|InvalidArg/, /./],
      [[torch.ones([2, 3], { dtype: 'float64' }), ok], 'DTypeMismatch', /unmatched dtype/],
      [[ok], 'InvalidArg', /inputs vector size to be 2, but got 1/],
      [[ok, ok, ok], 'InvalidArg', /inputs vector size to be 2, but got 3/],
      [[ok, 2], 'InvalidArg', /input 1: expected a Tensor/],
    ]
    for (const [inputs, code, message] of bad) {
      assert.throws(() => m.forwardSync(...inputs), (e) => (code instanceof RegExp ? code.test(e.code) : e.code === code) && message.test(e.message))
      await assert.rejects(m.forward(...inputs), (e) => typeof e.code === 'string')
    }
    // The compiled program checks the size ranges it was specialized for: AOTInductor bounds this
    // ResNet-18's dynamic batch at 15 (a kernel choice), whatever the export's Dim allowed.
    const r = new torch.AOTModule(RESNET)
    assert.throws(() => r.forwardSync(torch.ones([16, 3, 224, 224])), { code: 'ShapeMismatch', message: /dim value is too large/ })
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

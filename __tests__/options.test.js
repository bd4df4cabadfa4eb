'use strict'
// Options objects: a misspelt or unsupported key is an InvalidArg naming it and listing the
// accepted ones (never silently ignored); `shape` views data of any form as that shape.
const { describe, test } = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const torch = require('..')
const { coded } = require('./helpers')

const MLP = path.join(__dirname, '..', 'models', 'fixtures', 'mlp_traced.pt')

describe('unknown option keys', () => {
  const cases = [
    ['ones', () => torch.ones([2], { dtpye: 'float64' }), 'dtpye', 'dtype, device, requiresGrad'],
    ['zeros', () => torch.zeros([2], { shape: [2] }), 'shape', 'dtype, device, requiresGrad'],
    ['arange', () => torch.arange(0, 4, { devcie: 'cpu' }), 'devcie', 'dtype, device, requiresGrad'],
    ['full', () => torch.full([2], 1, { requires_grad: true }), 'requires_grad', 'dtype, device, requiresGrad'],
    ['tensor', () => torch.tensor([1, 2], { shpae: [2, 1] }), 'shpae', 'dtype, device, requiresGrad, shape'],
    ['fromBuffer', () => torch.fromBuffer(new Float32Array(4), [4], { device: 'cpu' }), 'device', 'dtype, byteOffset'],
    ['to', () => torch.ones([2]).to({ dtype: 'float64', non_blocking: true }), 'non_blocking', 'device, dtype'],
    ['ScriptModule', () => new torch.ScriptModule(MLP, { optimise: true }), 'optimise', 'device, maxBytes, optimize, channelsLast, dtype, warmup, example'],
    ['AOTModule', () => new torch.AOTModule(MLP, { optimize: true }), 'optimize', 'device'],
  ]
  for (const [name, call, key, accepted] of cases) {
    test(`${name}: '${key}' is refused, naming the accepted keys`, () => {
      assert.throws(call, coded('InvalidArg', new RegExp(`unknown option '${key}'; accepted: ${accepted}$`)))
    })
  }

  test('ScriptModule.load rejects an unknown option', async () => {
    await assert.rejects(torch.ScriptModule.load(MLP, { optimise: true }), coded('InvalidArg', /unknown option 'optimise'; accepted: device, maxBytes, optimize, channelsLast, dtype, warmup, example, signal/))
  })

  test('accepted keys, inherited properties and symbols are fine', () => {
    const proto = { notAnOption: 1 }
    const opts = Object.assign(Object.create(proto), { dtype: 'float64' })
    opts[Symbol('tag')] = 1
    assert.equal(torch.ones([2], opts).dtype, 'float64')
    assert.equal(torch.ones([2], { dtype: undefined, device: 'cpu', requiresGrad: false }).dtype, 'float32')
  })
})

describe('tensor(data, {shape})', () => {
  test('nested arrays are viewed as the shape, like a TypedArray', () => {
    const t = torch.tensor([1, 2, 3, 4], { shape: [2, 2] })
    assert.deepEqual(t.shape, [2, 2])
    assert.equal(t.toString(), 'tensor([[1., 2.],\n        [3., 4.]])')
    assert.deepEqual(torch.tensor([[1, 2], [3, 4]], { shape: [4] }).toArray(), [1, 2, 3, 4])
    assert.deepEqual(torch.tensor(Int32Array.of(1, 2, 3, 4, 5, 6), { shape: [3, 2] }).shape, [3, 2])
    assert.deepEqual(torch.tensor(torch.arange(0, 6), { shape: [2, 3] }).shape, [2, 3])
  })

  test('a count mismatch is a ShapeMismatch', () => {
    assert.throws(() => torch.tensor([1, 2, 3], { shape: [2, 2] }), coded('ShapeMismatch', /3 elements cannot be viewed as \[2, 2\]/))
    assert.throws(() => torch.tensor(new Float32Array(5), { shape: [2, 2] }), coded('ShapeMismatch', /5 elements/))
  })
})

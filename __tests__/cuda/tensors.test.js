'use strict'
// CUDA tensors: every dtype to and from the device, views, borrowing, half precision, autograd,
// and a device that does not exist (dispose() and device memory: memory.test.js). Skips without
// CUDA.
const { test } = require('node:test')
const assert = require('node:assert/strict')
const { torch, skip, close, coded } = require('./common')

const DTYPES = ['float32', 'float64', 'float16', 'bfloat16', 'int8', 'uint8', 'int16', 'int32', 'int64', 'bool']
// Exactly representable in every dtype above (bool: nonzero is true).
const VALUES = [
  [0, 1, 2],
  [3, 4, 5],
]

test('every dtype goes to the GPU and back unchanged', { skip }, () => {
  for (const dtype of DTYPES) {
    const cpu = torch.tensor(VALUES, { dtype })
    const gpu = cpu.to('cuda')
    assert.equal(gpu.device, 'cuda:0', dtype)
    assert.equal(gpu.dtype, dtype)
    assert.deepEqual(gpu.shape, [2, 3])
    const expected = cpu.toArray()
    assert.deepEqual(gpu.toArray(), expected, `${dtype} toArray`)
    assert.deepEqual(gpu.cpu().toArray(), expected, `${dtype} cpu()`)
    assert.deepEqual([...gpu.toTypedArray()], [...cpu.toTypedArray()], `${dtype} toTypedArray`)
    // made on the device directly, and moved with a dtype change in one call
    assert.deepEqual(torch.tensor(VALUES, { dtype, device: 'cuda' }).toArray(), expected, `${dtype} made there`)
    assert.equal(cpu.to({ device: 'cuda:0', dtype: 'float32' }).dtype, 'float32')
    assert.deepEqual(gpu.cuda().device, 'cuda:0')
  }
  assert.equal(torch.zeros([2], { device: 'cuda' }).device, 'cuda:0')
  assert.equal(torch.ones([2], { device: 'cuda:0', dtype: 'int64' }).sum().item(), 2)
})

test('views of CUDA tensors, and contiguous()', { skip }, () => {
  const x = torch.arange(24, { device: 'cuda', dtype: 'float32' }).reshape(2, 3, 4)
  const t = x.transpose(0, 2)
  assert.equal(t.device, 'cuda:0')
  assert.equal(t.isContiguous(), false)
  assert.equal(t.sharesStorage(x), true)
  const c = t.contiguous()
  assert.equal(c.isContiguous(), true)
  assert.equal(c.sharesStorage(x), false)
  assert.deepEqual(c.toArray(), t.toArray())
  assert.deepEqual(t.cpu().toArray(), x.cpu().transpose(0, 2).toArray())
  assert.deepEqual(x.narrow(2, 1, 2).toArray(), x.cpu().narrow(2, 1, 2).toArray())
  assert.deepEqual(x.select(0, 1).view(12).toArray(), x.cpu().select(0, 1).view(12).toArray())
  assert.deepEqual(x.slice(2, 0, 4, 2).toArray(), x.cpu().slice(2, 0, 4, 2).toArray())
  // a write through a view shows in its base, on the device
  const base = torch.zeros([4], { device: 'cuda' })
  const view = base.narrow(0, 1, 2)
  view.add(5) // out of place: the base is unchanged
  assert.deepEqual(base.toArray(), [0, 0, 0, 0])
})

test('fromBuffer memory is copied to the GPU, and a CUDA tensor lends no memory to JS', { skip }, () => {
  // docs/memory.md: borrowing needs CPU memory; moving to CUDA copies, and asTypedArray copies.
  const buf = new Float32Array([1, 2, 3, 4])
  const borrowed = torch.fromBuffer(buf, [2, 2])
  const gpu = borrowed.cuda()
  buf[0] = 100
  assert.equal(borrowed.toArray()[0][0], 100) // the CPU tensor borrows
  assert.equal(gpu.toArray()[0][0], 1) // the CUDA one is a copy
  const lent = gpu.asTypedArray()
  assert.ok(lent instanceof Float32Array)
  assert.deepEqual([...lent], [1, 2, 3, 4])
  lent[1] = 50 // a copy: the device memory is unchanged
  assert.equal(gpu.toArray()[0][1], 2)
})

test('float16 and bfloat16 math on the GPU is close to float32', { skip }, () => {
  torch.manualSeed(0)
  const a = torch.randn([64, 64])
  const b = torch.randn([64, 64])
  const exact = a.matmul(b).toArray()
  for (const [dtype, tol] of [
    ['float16', 0.1],
    ['bfloat16', 0.5],
  ]) {
    const y = a.to({ device: 'cuda', dtype }).matmul(b.to({ device: 'cuda', dtype }))
    assert.equal(y.dtype, dtype)
    close(y.to('float32').toArray(), exact, tol, dtype)
    const s = a.to({ device: 'cuda', dtype }).softmax(1).to('float32').sum(1).toArray()
    close(s, new Array(64).fill(1), 0.02, `${dtype} softmax`)
  }
})

test('autograd on the GPU gives the CPU gradients', { skip }, () => {
  const data = [
    [0.5, -1.5],
    [2, 0.25],
  ]
  const grads = ['cpu', 'cuda'].map((device) => {
    const x = torch.tensor(data, { device, requiresGrad: true })
    const y = x.mul(x).sigmoid().sum()
    y.backward()
    assert.equal(x.grad.device, device === 'cpu' ? 'cpu' : 'cuda:0')
    return x.grad.toArray()
  })
  close(grads[1], grads[0], 1e-6, 'grad')
})

test('a CUDA device this machine lacks is DeviceUnavailable, with the count', { skip }, () => {
  const n = torch.cuda.deviceCount()
  assert.ok(n >= 1)
  const missing = `cuda:${n}`
  const message = new RegExp(`cuda:${n} does not exist; this machine has ${n} CUDA device`)
  assert.throws(() => torch.ones([2], { device: missing }), coded('DeviceUnavailable', message))
  assert.throws(() => torch.ones([2]).to(missing), coded('DeviceUnavailable', message))
  assert.throws(() => torch.ones([2]).cuda(missing), coded('DeviceUnavailable', message))
  if (n === 1) assert.throws(() => torch.ones([2], { device: 'cuda:1' }), coded('DeviceUnavailable'))
})

test('tensors on two devices in one op are DeviceMismatch', { skip }, () => {
  assert.throws(() => torch.ones([2], { device: 'cuda' }).add(torch.ones([2])), coded('DeviceMismatch'))
})

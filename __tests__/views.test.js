'use strict'
// Tensors are views onto storage (PyTorch's model): shape, strides and a storage offset over a
// flat buffer. View ops share that buffer; copies get their own. Every expected repr, shape,
// stride and offset below was printed by PyTorch 2.13 for the same operation.
const { test, describe } = require('node:test')
const assert = require('node:assert/strict')
const torch = require('..')
const { coded } = require('./helpers')

/** Python's `t[i, j, ...]` as a 0-dim view: select down each index in turn. */
function at(t, ...index) {
  return index.reduce((view, i) => view.select(0, i), t)
}

/** Asserts a tensor's layout and repr in one go. */
function assertLayout(t, { shape, strides, offset, contiguous, repr }, message = '') {
  if (shape !== undefined) assert.deepEqual(t.shape, shape, `${message} shape`)
  if (strides !== undefined) assert.deepEqual(t.strides, strides, `${message} strides`)
  if (offset !== undefined) assert.equal(t.storageOffset, offset, `${message} storageOffset`)
  if (contiguous !== undefined) assert.equal(t.isContiguous(), contiguous, `${message} isContiguous()`)
  if (repr !== undefined) assert.equal(t.toString(), repr, `${message} toString()`)
}

describe('seed examples: a tensor is a view onto storage', () => {
  // a = torch.tensor([[1., 2., 3.], [4., 5., 6.]])
  test('a 2x3 tensor: storage [1..6], offset 0, strides [3, 1]', () => {
    const a = torch.tensor([
      [1, 2, 3],
      [4, 5, 6],
    ])
    assertLayout(a, {
      shape: [2, 3],
      strides: [3, 1],
      offset: 0,
      contiguous: true,
      repr: 'tensor([[1., 2., 3.],\n        [4., 5., 6.]])',
    })
    const storage = a.storage()
    assert.equal(storage.toString(), 'tensor([1., 2., 3., 4., 5., 6.])')
    assertLayout(storage, { shape: [6], strides: [1], offset: 0 })
    assert.ok(storage.sharesStorage(a))
  })

  test('writing a[1, 1] shows in a.storage()', () => {
    const a = torch.tensor([
      [1, 2, 3],
      [4, 5, 6],
    ])
    const element = at(a, 1, 1)
    assertLayout(element, { shape: [], strides: [], offset: 4 })
    assert.equal(element.fill_(50), element)
    assert.equal(a.toString(), 'tensor([[ 1.,  2.,  3.],\n        [ 4., 50.,  6.]])')
    assert.equal(a.storage().toString(), 'tensor([ 1.,  2.,  3.,  4., 50.,  6.])')
  })

  test('a[1:] starts at offset 3 of the same storage', () => {
    const a = torch.tensor([
      [1, 2, 3],
      [4, 50, 6],
    ])
    const b = a.slice(0, 1)
    assertLayout(b, { shape: [1, 3], strides: [3, 1], offset: 3, repr: 'tensor([[ 4., 50.,  6.]])' })
    assert.ok(b.sharesStorage(a))
    assert.ok(a.sharesStorage(b))
    assert.equal(b.storage().toString(), 'tensor([ 1.,  2.,  3.,  4., 50.,  6.])')
    at(b, 0, 0).fill_(-4)
    assert.equal(a.toString(), 'tensor([[ 1.,  2.,  3.],\n        [-4., 50.,  6.]])')
  })

  test('a.T has strides [1, 3] and is not contiguous; contiguous() copies in storage order', () => {
    const a = torch.tensor([
      [1, 2, 3],
      [4, 50, 6],
    ])
    const t = a.t()
    assertLayout(t, {
      shape: [3, 2],
      strides: [1, 3],
      offset: 0,
      contiguous: false,
      repr: 'tensor([[ 1.,  4.],\n        [ 2., 50.],\n        [ 3.,  6.]])',
    })
    assert.ok(t.sharesStorage(a))
    assert.equal(t.storage().toString(), 'tensor([ 1.,  2.,  3.,  4., 50.,  6.])')
    const c = t.contiguous()
    assertLayout(c, {
      shape: [3, 2],
      strides: [2, 1],
      offset: 0,
      contiguous: true,
      repr: 'tensor([[ 1.,  4.],\n        [ 2., 50.],\n        [ 3.,  6.]])',
    })
    assert.equal(c.storage().toString(), 'tensor([ 1.,  4.,  2., 50.,  3.,  6.])')
    assert.equal(c.sharesStorage(a), false)
    at(c, 0, 0).fill_(99)
    assert.equal(a.toString(), 'tensor([[ 1.,  2.,  3.],\n        [ 4., 50.,  6.]])')
  })

  test('clone() copies: no shared storage, writes do not propagate', () => {
    const a = torch.tensor([
      [1, 2, 3],
      [4, 50, 6],
    ])
    const k = a.clone()
    assert.equal(k.sharesStorage(a), false)
    assertLayout(k, { shape: [2, 3], strides: [3, 1], offset: 0 })
    at(k, 0, 0).fill_(-1)
    assert.equal(k.toString(), 'tensor([[-1.,  2.,  3.],\n        [ 4., 50.,  6.]])')
    assert.equal(a.toString(), 'tensor([[ 1.,  2.,  3.],\n        [ 4., 50.,  6.]])')
    assert.equal(k.storage().toString(), 'tensor([-1.,  2.,  3.,  4., 50.,  6.])')
    a.fill_(0)
    assert.equal(k.toString(), 'tensor([[-1.,  2.,  3.],\n        [ 4., 50.,  6.]])')
  })

  test('a boolean mask copies: a[a > 2]', () => {
    const a = torch.tensor([
      [1, 2, 3],
      [4, 50, 6],
    ])
    const mask = a.gt(2)
    assert.equal(mask.toString(), 'tensor([[False, False,  True],\n        [ True,  True,  True]])')
    const picked = a.maskedSelect(mask)
    assertLayout(picked, { shape: [4], strides: [1], offset: 0, repr: 'tensor([ 3.,  4., 50.,  6.])' })
    assert.equal(picked.sharesStorage(a), false)
    picked.select(0, 0).fill_(0)
    assert.equal(a.toString(), 'tensor([[ 1.,  2.,  3.],\n        [ 4., 50.,  6.]])')
  })

  test('pow copies; pow_ writes in place and returns the same object', () => {
    const a = torch.tensor([
      [1, 2, 3],
      [4, 50, 6],
    ])
    const p = a.pow(2)
    assert.equal(p.sharesStorage(a), false)
    assert.equal(
      p.toString(),
      'tensor([[1.0000e+00, 4.0000e+00, 9.0000e+00],\n        [1.6000e+01, 2.5000e+03, 3.6000e+01]])',
    )
    assert.equal(a.toString(), 'tensor([[ 1.,  2.,  3.],\n        [ 4., 50.,  6.]])')

    const q = torch.tensor([
      [1, 2],
      [3, 4],
    ])
    const view = q.view(-1)
    assert.equal(q.pow_(2), q)
    assert.equal(q.toString(), 'tensor([[ 1.,  4.],\n        [ 9., 16.]])')
    assert.equal(q.storage().toString(), 'tensor([ 1.,  4.,  9., 16.])')
    assert.equal(view.toString(), 'tensor([ 1.,  4.,  9., 16.])')
  })

  test('torch.cat copies', () => {
    const a = torch.tensor([
      [1, 2, 3],
      [4, 50, 6],
    ])
    const c = torch.cat([a, a])
    assert.equal(
      c.toString(),
      'tensor([[ 1.,  2.,  3.],\n        [ 4., 50.,  6.],\n        [ 1.,  2.,  3.],\n        [ 4., 50.,  6.]])',
    )
    assert.equal(c.sharesStorage(a), false)
    at(c, 0, 0).fill_(-1)
    assert.equal(a.toString(), 'tensor([[ 1.,  2.,  3.],\n        [ 4., 50.,  6.]])')
    assert.equal(c.storage().toString(), 'tensor([-1.,  2.,  3.,  4., 50.,  6.,  1.,  2.,  3.,  4., 50.,  6.])')
  })

  describe('a 3x4 int64 tensor: torch.arange(12).reshape(3, 4)', () => {
    const make = () => torch.arange(12).reshape(3, 4)
    const base = 'tensor([[ 0,  1,  2,  3],\n        [ 4,  5,  6,  7],\n        [ 8,  9, 10, 11]])'

    test('is int64, contiguous, strides [4, 1]', () => {
      const a = make()
      assert.equal(a.dtype, 'int64')
      assertLayout(a, { shape: [3, 4], strides: [4, 1], offset: 0, contiguous: true, repr: base })
      assert.equal(a.storage().toString(), 'tensor([ 0,  1,  2,  3,  4,  5,  6,  7,  8,  9, 10, 11])')
    })

    test('a[1:3, 1:3]: offset 5, strides [4, 1], shared storage', () => {
      const a = make()
      const s = a.slice(0, 1, 3).slice(1, 1, 3)
      assertLayout(s, {
        shape: [2, 2],
        strides: [4, 1],
        offset: 5,
        contiguous: false,
        repr: 'tensor([[ 5,  6],\n        [ 9, 10]])',
      })
      assert.ok(s.sharesStorage(a))
      assert.equal(s.storage().toString(), 'tensor([ 0,  1,  2,  3,  4,  5,  6,  7,  8,  9, 10, 11])')
      at(s, 0, 0).fill_(-5)
      assert.equal(a.toString(), 'tensor([[ 0,  1,  2,  3],\n        [ 4, -5,  6,  7],\n        [ 8,  9, 10, 11]])')
    })

    test('a.t(): strides [1, 4]', () => {
      const a = make()
      assertLayout(a.t(), {
        shape: [4, 3],
        strides: [1, 4],
        offset: 0,
        contiguous: false,
        repr: 'tensor([[ 0,  4,  8],\n        [ 1,  5,  9],\n        [ 2,  6, 10],\n        [ 3,  7, 11]])',
      })
      assert.ok(a.t().sharesStorage(a))
    })

    test('writing through b = a[1, :] changes a', () => {
      const a = make()
      const b = a.select(0, 1)
      assertLayout(b, { shape: [4], strides: [1], offset: 4, repr: 'tensor([4, 5, 6, 7])' })
      assert.equal(b.mul_(10), b)
      assert.equal(a.toString(), 'tensor([[ 0,  1,  2,  3],\n        [40, 50, 60, 70],\n        [ 8,  9, 10, 11]])')
      at(b, 1).fill_(-50)
      assert.equal(
        a.toString(),
        'tensor([[  0,   1,   2,   3],\n        [ 40, -50,  60,  70],\n        [  8,   9,  10,  11]])',
      )
    })
  })
})

/** Fresh base tensors for each view case (the cases write into them). */
function bases() {
  return {
    x: torch.arange(24, { dtype: 'float32' }).reshape(2, 3, 4),
    c: torch.tensor([[1], [2], [3]]),
    m: torch.arange(9, { dtype: 'float32' }).reshape(3, 3),
    r: torch.arange(6, { dtype: 'float32' }),
  }
}

// x after `result.zero_()` where the result is all of x, and where it is a copy (or empty).
const X_ZEROED = new Array(24).fill(0)
const X_UNCHANGED = Array.from({ length: 24 }, (_, i) => i)

// [{ label: op over the bases }, what PyTorch gives]: the ops in one entry give the same tensor
// (aliases such as view(6, 4) and flatten(0, 1)), each its own test. `shares`: whether the result
// is a view of the base's storage; `baseAfterZero`: the base's elements (row-major) after
// `result.zero_()`, unchanged where the result is a copy.
const VIEW_CASES = [
  [
    {
      'view(6, 4)': ({ x }) => x.view(6, 4),
      'view([-1, 4])': ({ x }) => x.view([-1, 4]),
      'flatten(0, 1)': ({ x }) => x.flatten(0, 1),
    },
    {
      base: 'x',
      shape: [6, 4],
      strides: [4, 1],
      offset: 0,
      contiguous: true,
      shares: true,
      repr: 'tensor([[ 0.,  1.,  2.,  3.],\n        [ 4.,  5.,  6.,  7.],\n        [ 8.,  9., 10., 11.],\n        [12., 13., 14., 15.],\n        [16., 17., 18., 19.],\n        [20., 21., 22., 23.]])',
      baseAfterZero: X_ZEROED,
    },
  ],
  [
    {
      'view(4, -1)': ({ x }) => x.view(4, -1),
      'reshape(4, 6) of a contiguous tensor is a view': ({ x }) => x.reshape(4, 6),
    },
    {
      base: 'x',
      shape: [4, 6],
      strides: [6, 1],
      offset: 0,
      contiguous: true,
      shares: true,
      repr: 'tensor([[ 0.,  1.,  2.,  3.,  4.,  5.],\n        [ 6.,  7.,  8.,  9., 10., 11.],\n        [12., 13., 14., 15., 16., 17.],\n        [18., 19., 20., 21., 22., 23.]])',
      baseAfterZero: X_ZEROED,
    },
  ],
  [
    {
      'view(-1)': ({ x }) => x.view(-1),
      'flatten()': ({ x }) => x.flatten(),
    },
    {
      base: 'x',
      shape: [24],
      strides: [1],
      offset: 0,
      contiguous: true,
      shares: true,
      repr: 'tensor([ 0.,  1.,  2.,  3.,  4.,  5.,  6.,  7.,  8.,  9., 10., 11., 12., 13.,\n        14., 15., 16., 17., 18., 19., 20., 21., 22., 23.])',
      baseAfterZero: X_ZEROED,
    },
  ],
  [
    {
      'reshape([2, -1]) is a view': ({ x }) => x.reshape([2, -1]),
      'flatten(1)': ({ x }) => x.flatten(1),
    },
    {
      base: 'x',
      shape: [2, 12],
      strides: [12, 1],
      offset: 0,
      contiguous: true,
      shares: true,
      repr: 'tensor([[ 0.,  1.,  2.,  3.,  4.,  5.,  6.,  7.,  8.,  9., 10., 11.],\n        [12., 13., 14., 15., 16., 17., 18., 19., 20., 21., 22., 23.]])',
      baseAfterZero: X_ZEROED,
    },
  ],
  [
    { 'transpose(0, 1)': ({ x }) => x.transpose(0, 1) },
    {
      base: 'x',
      shape: [3, 2, 4],
      strides: [4, 12, 1],
      offset: 0,
      contiguous: false,
      shares: true,
      repr: 'tensor([[[ 0.,  1.,  2.,  3.],\n         [12., 13., 14., 15.]],\n\n        [[ 4.,  5.,  6.,  7.],\n         [16., 17., 18., 19.]],\n\n        [[ 8.,  9., 10., 11.],\n         [20., 21., 22., 23.]]])',
      baseAfterZero: X_ZEROED,
    },
  ],
  [
    {
      'reshape(-1) of a transposed tensor copies': ({ x }) => x.transpose(0, 1).reshape(-1),
      'flatten() of a transposed tensor copies': ({ x }) => x.transpose(0, 1).flatten(),
    },
    {
      base: 'x',
      shape: [24],
      strides: [1],
      offset: 0,
      contiguous: true,
      shares: false,
      repr: 'tensor([ 0.,  1.,  2.,  3., 12., 13., 14., 15.,  4.,  5.,  6.,  7., 16., 17.,\n        18., 19.,  8.,  9., 10., 11., 20., 21., 22., 23.])',
      baseAfterZero: X_UNCHANGED,
    },
  ],
  [
    { 'reshape([6, -1]) of a transposed tensor copies': ({ x }) => x.transpose(0, 1).reshape([6, -1]) },
    {
      base: 'x',
      shape: [6, 4],
      strides: [4, 1],
      offset: 0,
      contiguous: true,
      shares: false,
      repr: 'tensor([[ 0.,  1.,  2.,  3.],\n        [12., 13., 14., 15.],\n        [ 4.,  5.,  6.,  7.],\n        [16., 17., 18., 19.],\n        [ 8.,  9., 10., 11.],\n        [20., 21., 22., 23.]])',
      baseAfterZero: X_UNCHANGED,
    },
  ],
  [
    {
      'transpose(0, 2)': ({ x }) => x.transpose(0, 2),
      'permute(-1, 1, 0)': ({ x }) => x.permute(-1, 1, 0),
    },
    {
      base: 'x',
      shape: [4, 3, 2],
      strides: [1, 4, 12],
      offset: 0,
      contiguous: false,
      shares: true,
      repr:
        'tensor([[[ 0., 12.],\n         [ 4., 16.],\n         [ 8., 20.]],\n\n        [[ 1., 13.],\n         [ 5., 17.],\n         [ 9., 21.]],\n\n' +
        '        [[ 2., 14.],\n         [ 6., 18.],\n         [10., 22.]],\n\n        [[ 3., 15.],\n         [ 7., 19.],\n         [11., 23.]]])',
      baseAfterZero: X_ZEROED,
    },
  ],
  [
    { 'transpose(-1, -2)': ({ x }) => x.transpose(-1, -2) },
    {
      base: 'x',
      shape: [2, 4, 3],
      strides: [12, 1, 4],
      offset: 0,
      contiguous: false,
      shares: true,
      repr: 'tensor([[[ 0.,  4.,  8.],\n         [ 1.,  5.,  9.],\n         [ 2.,  6., 10.],\n         [ 3.,  7., 11.]],\n\n        [[12., 16., 20.],\n         [13., 17., 21.],\n         [14., 18., 22.],\n         [15., 19., 23.]]])',
      baseAfterZero: X_ZEROED,
    },
  ],
  [
    {
      'permute(2, 0, 1)': ({ x }) => x.permute(2, 0, 1),
      'permute([2, 0, 1])': ({ x }) => x.permute([2, 0, 1]),
    },
    {
      base: 'x',
      shape: [4, 2, 3],
      strides: [1, 12, 4],
      offset: 0,
      contiguous: false,
      shares: true,
      repr: 'tensor([[[ 0.,  4.,  8.],\n         [12., 16., 20.]],\n\n        [[ 1.,  5.,  9.],\n         [13., 17., 21.]],\n\n        [[ 2.,  6., 10.],\n         [14., 18., 22.]],\n\n        [[ 3.,  7., 11.],\n         [15., 19., 23.]]])',
      baseAfterZero: X_ZEROED,
    },
  ],
  [
    { 'narrow(2, 1, 2)': ({ x }) => x.narrow(2, 1, 2) },
    {
      base: 'x',
      shape: [2, 3, 2],
      strides: [12, 4, 1],
      offset: 1,
      contiguous: false,
      shares: true,
      repr: 'tensor([[[ 1.,  2.],\n         [ 5.,  6.],\n         [ 9., 10.]],\n\n        [[13., 14.],\n         [17., 18.],\n         [21., 22.]]])',
      baseAfterZero: [0, 0, 0, 3, 4, 0, 0, 7, 8, 0, 0, 11, 12, 0, 0, 15, 16, 0, 0, 19, 20, 0, 0, 23],
    },
  ],
  [
    {
      'narrow(1, -2, 2)': ({ x }) => x.narrow(1, -2, 2),
      'slice(1, -2): x[:, -2:]': ({ x }) => x.slice(1, -2),
    },
    {
      base: 'x',
      shape: [2, 2, 4],
      strides: [12, 4, 1],
      offset: 4,
      contiguous: false,
      shares: true,
      repr: 'tensor([[[ 4.,  5.,  6.,  7.],\n         [ 8.,  9., 10., 11.]],\n\n        [[16., 17., 18., 19.],\n         [20., 21., 22., 23.]]])',
      baseAfterZero: [0, 1, 2, 3, 0, 0, 0, 0, 0, 0, 0, 0, 12, 13, 14, 15, 0, 0, 0, 0, 0, 0, 0, 0],
    },
  ],
  [
    { 'select(1, -1)': ({ x }) => x.select(1, -1) },
    {
      base: 'x',
      shape: [2, 4],
      strides: [12, 1],
      offset: 8,
      contiguous: false,
      shares: true,
      repr: 'tensor([[ 8.,  9., 10., 11.],\n        [20., 21., 22., 23.]])',
      baseAfterZero: [0, 1, 2, 3, 4, 5, 6, 7, 0, 0, 0, 0, 12, 13, 14, 15, 16, 17, 18, 19, 0, 0, 0, 0],
    },
  ],
  [
    { 'select(0, 1)': ({ x }) => x.select(0, 1) },
    {
      base: 'x',
      shape: [3, 4],
      strides: [4, 1],
      offset: 12,
      contiguous: true,
      shares: true,
      repr: 'tensor([[12., 13., 14., 15.],\n        [16., 17., 18., 19.],\n        [20., 21., 22., 23.]])',
      baseAfterZero: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
    },
  ],
  [
    { 'slice(2, 0, -1, 2): x[:, :, 0:-1:2]': ({ x }) => x.slice(2, 0, -1, 2) },
    {
      base: 'x',
      shape: [2, 3, 2],
      strides: [12, 4, 2],
      offset: 0,
      contiguous: false,
      shares: true,
      repr: 'tensor([[[ 0.,  2.],\n         [ 4.,  6.],\n         [ 8., 10.]],\n\n        [[12., 14.],\n         [16., 18.],\n         [20., 22.]]])',
      baseAfterZero: [0, 1, 0, 3, 0, 5, 0, 7, 0, 9, 0, 11, 0, 13, 0, 15, 0, 17, 0, 19, 0, 21, 0, 23],
    },
  ],
  [
    { 'slice(2, 1, 100): end clamped': ({ x }) => x.slice(2, 1, 100) },
    {
      base: 'x',
      shape: [2, 3, 3],
      strides: [12, 4, 1],
      offset: 1,
      contiguous: false,
      shares: true,
      repr: 'tensor([[[ 1.,  2.,  3.],\n         [ 5.,  6.,  7.],\n         [ 9., 10., 11.]],\n\n        [[13., 14., 15.],\n         [17., 18., 19.],\n         [21., 22., 23.]]])',
      baseAfterZero: [0, 0, 0, 0, 4, 0, 0, 0, 8, 0, 0, 0, 12, 0, 0, 0, 16, 0, 0, 0, 20, 0, 0, 0],
    },
  ],
  [
    { 'slice(2, -100, 2): start clamped': ({ x }) => x.slice(2, -100, 2) },
    {
      base: 'x',
      shape: [2, 3, 2],
      strides: [12, 4, 1],
      offset: 0,
      contiguous: false,
      shares: true,
      repr: 'tensor([[[ 0.,  1.],\n         [ 4.,  5.],\n         [ 8.,  9.]],\n\n        [[12., 13.],\n         [16., 17.],\n         [20., 21.]]])',
      baseAfterZero: [0, 0, 2, 3, 0, 0, 6, 7, 0, 0, 10, 11, 0, 0, 14, 15, 0, 0, 18, 19, 0, 0, 22, 23],
    },
  ],
  [
    { 'slice(2, null, null, 3): x[:, :, ::3]': ({ x }) => x.slice(2, null, null, 3) },
    {
      base: 'x',
      shape: [2, 3, 2],
      strides: [12, 4, 3],
      offset: 0,
      contiguous: false,
      shares: true,
      repr: 'tensor([[[ 0.,  3.],\n         [ 4.,  7.],\n         [ 8., 11.]],\n\n        [[12., 15.],\n         [16., 19.],\n         [20., 23.]]])',
      baseAfterZero: [0, 1, 2, 0, 0, 5, 6, 0, 0, 9, 10, 0, 0, 13, 14, 0, 0, 17, 18, 0, 0, 21, 22, 0],
    },
  ],
  [
    { 'slice(0, 5): empty': ({ x }) => x.slice(0, 5) },
    {
      base: 'x',
      shape: [0, 3, 4],
      strides: [12, 4, 1],
      offset: 24,
      contiguous: true,
      shares: true,
      repr: 'tensor([], size=(0, 3, 4))',
      baseAfterZero: X_UNCHANGED,
    },
  ],
  [
    { 'unsqueeze(1)': ({ x }) => x.unsqueeze(1) },
    {
      base: 'x',
      shape: [2, 1, 3, 4],
      strides: [12, 12, 4, 1],
      offset: 0,
      contiguous: true,
      shares: true,
      repr: 'tensor([[[[ 0.,  1.,  2.,  3.],\n          [ 4.,  5.,  6.,  7.],\n          [ 8.,  9., 10., 11.]]],\n\n\n        [[[12., 13., 14., 15.],\n          [16., 17., 18., 19.],\n          [20., 21., 22., 23.]]]])',
      baseAfterZero: X_ZEROED,
    },
  ],
  [
    { 'unsqueeze(-1)': ({ x }) => x.unsqueeze(-1) },
    {
      base: 'x',
      shape: [2, 3, 4, 1],
      strides: [12, 4, 1, 1],
      offset: 0,
      contiguous: true,
      shares: true,
      repr:
        'tensor([[[[ 0.],\n          [ 1.],\n          [ 2.],\n          [ 3.]],\n\n         [[ 4.],\n          [ 5.],\n          [ 6.],\n          [ 7.]],\n\n         [[ 8.],\n          [ 9.],\n          [10.],\n          [11.]]],\n\n\n' +
        '        [[[12.],\n          [13.],\n          [14.],\n          [15.]],\n\n         [[16.],\n          [17.],\n          [18.],\n          [19.]],\n\n         [[20.],\n          [21.],\n          [22.],\n          [23.]]]])',
      baseAfterZero: X_ZEROED,
    },
  ],
  [
    {
      'unsqueeze(1).squeeze()': ({ x }) => x.unsqueeze(1).squeeze(),
      'unsqueeze(1).squeeze(1)': ({ x }) => x.unsqueeze(1).squeeze(1),
      'squeeze(0) of a size-2 dim is a no-op view': ({ x }) => x.squeeze(0),
      'detach()': ({ x }) => x.detach(),
      'contiguous() of a contiguous tensor is itself': ({ x }) => x.contiguous(),
      "to('float32') of a float32 tensor is itself": ({ x }) => x.to('float32'),
    },
    {
      base: 'x',
      shape: [2, 3, 4],
      strides: [12, 4, 1],
      offset: 0,
      contiguous: true,
      shares: true,
      repr: 'tensor([[[ 0.,  1.,  2.,  3.],\n         [ 4.,  5.,  6.,  7.],\n         [ 8.,  9., 10., 11.]],\n\n        [[12., 13., 14., 15.],\n         [16., 17., 18., 19.],\n         [20., 21., 22., 23.]]])',
      baseAfterZero: X_ZEROED,
    },
  ],
  [
    {
      'expand(3, 4)': ({ c }) => c.expand(3, 4),
      'expand(-1, 4)': ({ c }) => c.expand(-1, 4),
    },
    {
      base: 'c',
      shape: [3, 4],
      strides: [1, 0],
      offset: 0,
      contiguous: false,
      shares: true,
      repr: 'tensor([[1., 1., 1., 1.],\n        [2., 2., 2., 2.],\n        [3., 3., 3., 3.]])',
      baseAfterZero: [0, 0, 0],
    },
  ],
  [
    { 'expand([2, 3, 4]): a new leading dim': ({ c }) => c.expand([2, 3, 4]) },
    {
      base: 'c',
      shape: [2, 3, 4],
      strides: [0, 1, 0],
      offset: 0,
      contiguous: false,
      shares: true,
      repr: 'tensor([[[1., 1., 1., 1.],\n         [2., 2., 2., 2.],\n         [3., 3., 3., 3.]],\n\n        [[1., 1., 1., 1.],\n         [2., 2., 2., 2.],\n         [3., 3., 3., 3.]]])',
      baseAfterZero: [0, 0, 0],
    },
  ],
  [
    {
      'unflatten(2, [2, 2])': ({ x }) => x.unflatten(2, [2, 2]),
      'unflatten(-1, [-1, 2])': ({ x }) => x.unflatten(-1, [-1, 2]),
    },
    {
      base: 'x',
      shape: [2, 3, 2, 2],
      strides: [12, 4, 2, 1],
      offset: 0,
      contiguous: true,
      shares: true,
      repr:
        'tensor([[[[ 0.,  1.],\n          [ 2.,  3.]],\n\n         [[ 4.,  5.],\n          [ 6.,  7.]],\n\n         [[ 8.,  9.],\n          [10., 11.]]],\n\n\n' +
        '        [[[12., 13.],\n          [14., 15.]],\n\n         [[16., 17.],\n          [18., 19.]],\n\n         [[20., 21.],\n          [22., 23.]]]])',
      baseAfterZero: X_ZEROED,
    },
  ],
  [
    { 'diagonal()': ({ m }) => m.diagonal() },
    {
      base: 'm',
      shape: [3],
      strides: [4],
      offset: 0,
      contiguous: false,
      shares: true,
      repr: 'tensor([0., 4., 8.])',
      baseAfterZero: [0, 1, 2, 3, 0, 5, 6, 7, 0],
    },
  ],
  [
    { 'diagonal(1)': ({ m }) => m.diagonal(1) },
    {
      base: 'm',
      shape: [2],
      strides: [4],
      offset: 1,
      contiguous: false,
      shares: true,
      repr: 'tensor([1., 5.])',
      baseAfterZero: [0, 0, 2, 3, 4, 0, 6, 7, 8],
    },
  ],
  [
    { 'diagonal(-1)': ({ m }) => m.diagonal(-1) },
    {
      base: 'm',
      shape: [2],
      strides: [4],
      offset: 3,
      contiguous: false,
      shares: true,
      repr: 'tensor([3., 7.])',
      baseAfterZero: [0, 1, 2, 0, 4, 5, 6, 0, 8],
    },
  ],
  [
    { 'diagonal(0, 1, 2)': ({ x }) => x.diagonal(0, 1, 2) },
    {
      base: 'x',
      shape: [2, 3],
      strides: [12, 5],
      offset: 0,
      contiguous: false,
      shares: true,
      repr: 'tensor([[ 0.,  5., 10.],\n        [12., 17., 22.]])',
      baseAfterZero: [0, 1, 2, 3, 4, 0, 6, 7, 8, 9, 0, 11, 0, 13, 14, 15, 16, 0, 18, 19, 20, 21, 0, 23],
    },
  ],
  [
    { 'diagonal(1, 0, 2)': ({ x }) => x.diagonal(1, 0, 2) },
    {
      base: 'x',
      shape: [3, 2],
      strides: [4, 13],
      offset: 1,
      contiguous: false,
      shares: true,
      repr: 'tensor([[ 1., 14.],\n        [ 5., 18.],\n        [ 9., 22.]])',
      baseAfterZero: [0, 0, 2, 3, 4, 0, 6, 7, 8, 0, 10, 11, 12, 13, 0, 15, 16, 17, 0, 19, 20, 21, 0, 23],
    },
  ],
  [
    { 'asStrided([2, 2], [1, 2], 1)': ({ r }) => r.asStrided([2, 2], [1, 2], 1) },
    {
      base: 'r',
      shape: [2, 2],
      strides: [1, 2],
      offset: 1,
      contiguous: false,
      shares: true,
      repr: 'tensor([[1., 3.],\n        [2., 4.]])',
      baseAfterZero: [0, 0, 0, 0, 0, 5],
    },
  ],
  [
    { 'asStrided([3, 2], [2, 1])': ({ r }) => r.asStrided([3, 2], [2, 1]) },
    {
      base: 'r',
      shape: [3, 2],
      strides: [2, 1],
      offset: 0,
      contiguous: true,
      shares: true,
      repr: 'tensor([[0., 1.],\n        [2., 3.],\n        [4., 5.]])',
      baseAfterZero: [0, 0, 0, 0, 0, 0],
    },
  ],
  [
    { 'asStrided([3], [0], 2): stride 0': ({ r }) => r.asStrided([3], [0], 2) },
    {
      base: 'r',
      shape: [3],
      strides: [0],
      offset: 2,
      contiguous: false,
      shares: true,
      repr: 'tensor([2., 2., 2.])',
      baseAfterZero: [0, 1, 0, 3, 4, 5],
    },
  ],
]

describe('view ops share storage and match PyTorch', () => {
  for (const [label, op, expected] of VIEW_CASES.flatMap(([ops, expected]) =>
    Object.entries(ops).map(([label, op]) => [label, op, expected]),
  )) {
    test(label, () => {
      const b = bases()
      const base = b[expected.base]
      const before = Array.from(base.toTypedArray())
      const t = op(b)
      assertLayout(t, expected)
      assert.equal(t.sharesStorage(base), expected.shares, 'sharesStorage')
      assert.equal(base.sharesStorage(t), expected.shares, 'sharesStorage (reversed)')
      assert.deepEqual(Array.from(base.toTypedArray()), before, 'making the view leaves the base as it was')
      if (expected.shares) {
        // The view's storage() is the base's whole storage.
        assert.equal(t.storage().toString(), base.storage().toString(), 'storage()')
      }
      assert.equal(t.zero_(), t)
      assert.deepEqual(Array.from(base.toTypedArray()), expected.baseAfterZero, 'base after result.zero_()')
    })
  }

  test('view(a, b) and view([a, b]) are the same view', () => {
    const x = torch.arange(6, { dtype: 'float32' })
    for (const v of [x.view(2, 3), x.view([2, 3]), x.view(-1, 3), x.view([2, -1])]) {
      assertLayout(v, {
        shape: [2, 3],
        strides: [3, 1],
        offset: 0,
        repr: 'tensor([[0., 1., 2.],\n        [3., 4., 5.]])',
      })
      assert.ok(v.sharesStorage(x))
    }
  })

  test('a view of a view still shares the first storage and adds up offsets', () => {
    const x = torch.arange(24, { dtype: 'float32' }).reshape(2, 3, 4)
    // x[1, 1:, ::2].T
    const v = x.select(0, 1).slice(0, 1).slice(1, null, null, 2).t()
    assertLayout(v, {
      shape: [2, 2],
      strides: [2, 4],
      offset: 16,
      contiguous: false,
      repr: 'tensor([[16., 20.],\n        [18., 22.]])',
    })
    assert.ok(v.sharesStorage(x))
    at(v, 1, 1).fill_(-1)
    assert.equal(at(x, 1, 2, 2).item(), -1)
  })

  test('chunk: views along a dim, the last one shorter', () => {
    const x = torch.arange(24, { dtype: 'float32' }).reshape(2, 3, 4)
    const parts = x.chunk(3, 1)
    assert.equal(parts.length, 3)
    const reprs = [
      'tensor([[[ 0.,  1.,  2.,  3.]],\n\n        [[12., 13., 14., 15.]]])',
      'tensor([[[ 4.,  5.,  6.,  7.]],\n\n        [[16., 17., 18., 19.]]])',
      'tensor([[[ 8.,  9., 10., 11.]],\n\n        [[20., 21., 22., 23.]]])',
    ]
    parts.forEach((p, i) => {
      assertLayout(p, { shape: [2, 1, 4], strides: [12, 4, 1], offset: 4 * i, contiguous: false, repr: reprs[i] })
      assert.ok(p.sharesStorage(x))
    })
    parts[2].fill_(0)
    assert.equal(x.slice(1, 2).sum().item(), 0)

    const r = torch.arange(5, { dtype: 'float32' })
    const halves = r.chunk(2)
    assert.deepEqual(
      halves.map((p) => p.toString()),
      ['tensor([0., 1., 2.])', 'tensor([3., 4.])'],
    )
    assert.deepEqual(
      halves.map((p) => p.storageOffset),
      [0, 3],
    )
    assert.ok(halves.every((p) => p.sharesStorage(r)))
  })

  test('split: by size (the last piece shorter) and by a list of sizes', () => {
    const x = torch.arange(24, { dtype: 'float32' }).reshape(2, 3, 4)
    const bySize = x.split(2, 2)
    assert.equal(bySize.length, 2)
    assertLayout(bySize[0], {
      shape: [2, 3, 2],
      strides: [12, 4, 1],
      offset: 0,
      repr: 'tensor([[[ 0.,  1.],\n         [ 4.,  5.],\n         [ 8.,  9.]],\n\n        [[12., 13.],\n         [16., 17.],\n         [20., 21.]]])',
    })
    assertLayout(bySize[1], {
      shape: [2, 3, 2],
      strides: [12, 4, 1],
      offset: 2,
      repr: 'tensor([[[ 2.,  3.],\n         [ 6.,  7.],\n         [10., 11.]],\n\n        [[14., 15.],\n         [18., 19.],\n         [22., 23.]]])',
    })
    const byList = x.split([1, 2], 1)
    assert.equal(byList.length, 2)
    assertLayout(byList[0], {
      shape: [2, 1, 4],
      strides: [12, 4, 1],
      offset: 0,
      repr: 'tensor([[[ 0.,  1.,  2.,  3.]],\n\n        [[12., 13., 14., 15.]]])',
    })
    assertLayout(byList[1], {
      shape: [2, 2, 4],
      strides: [12, 4, 1],
      offset: 4,
      repr: 'tensor([[[ 4.,  5.,  6.,  7.],\n         [ 8.,  9., 10., 11.]],\n\n        [[16., 17., 18., 19.],\n         [20., 21., 22., 23.]]])',
    })
    for (const p of [...bySize, ...byList]) assert.ok(p.sharesStorage(x))

    const r = torch.arange(5, { dtype: 'float32' })
    const pieces = r.split(2)
    assert.deepEqual(
      pieces.map((p) => p.toString()),
      ['tensor([0., 1.])', 'tensor([2., 3.])', 'tensor([4.])'],
    )
    assert.deepEqual(
      pieces.map((p) => p.storageOffset),
      [0, 2, 4],
    )
    pieces[1].add_(10)
    assert.equal(r.toString(), 'tensor([ 0.,  1., 12., 13.,  4.])')
  })

  test('expand: stride 0 repeats one element; writing it shows in every row', () => {
    const c = torch.tensor([[1], [2], [3]])
    const e = c.expand(3, 4)
    assert.deepEqual(e.strides, [1, 0])
    assert.equal(e.storage().toString(), 'tensor([1., 2., 3.])')
    at(c, 1, 0).fill_(20)
    assert.equal(
      e.toString(),
      'tensor([[ 1.,  1.,  1.,  1.],\n        [20., 20., 20., 20.],\n        [ 3.,  3.,  3.,  3.]])',
    )
  })

  test('expand(...).fill_(v) fills through the stride-0 view, as in PyTorch', () => {
    const c = torch.tensor([[1], [2]])
    const e = c.expand(2, 3)
    assert.equal(e.fill_(7), e)
    assert.equal(c.toString(), 'tensor([[7.],\n        [7.]])')
    assert.equal(e.toString(), 'tensor([[7., 7., 7.],\n        [7., 7., 7.]])')
  })

  test('in-place arithmetic on an expanded view is refused (overlapping memory), as in PyTorch', () => {
    const e = torch.tensor([[1], [2]]).expand(2, 3)
    assert.throws(
      () => e.add_(1),
      (err) => {
        assert.ok(err instanceof Error)
        assert.ok(typeof err.code === 'string')
        assert.match(err.message, /more than one element of the written-to tensor refers to a single memory location/)
        return true
      },
    )
  })

  test('detach(): shares storage, cut from autograd', () => {
    const x = torch.tensor([1, 2, 3], { requiresGrad: true })
    const d = x.detach()
    assert.equal(d.requiresGrad, false)
    assert.ok(d.sharesStorage(x))
    assertLayout(d, { shape: [3], strides: [1], offset: 0, repr: 'tensor([1., 2., 3.])' })
    d.select(0, 0).fill_(10)
    assert.equal(x.toString(), 'tensor([10.,  2.,  3.], requires_grad=True)')
  })

  test('sharesStorage is false between unrelated tensors, even equal ones', () => {
    const a = torch.ones([3])
    const b = torch.ones([3])
    assert.equal(a.sharesStorage(b), false)
    assert.ok(a.sharesStorage(a))
  })
})

// Copies: their own storage, and writes on either side are not seen by the other.
const COPY_CASES = [
  [
    'clone()',
    (a) => a.clone(),
    {
      shape: [2, 3],
      strides: [3, 1],
      offset: 0,
      dtype: 'float32',
      repr: 'tensor([[1., 2., 3.],\n        [4., 5., 6.]])',
      storage: 'tensor([1., 2., 3., 4., 5., 6.])',
    },
  ],
  [
    'clone() of a transposed view keeps its strides',
    (a) => a.t().clone(),
    {
      shape: [3, 2],
      strides: [1, 3],
      offset: 0,
      dtype: 'float32',
      repr: 'tensor([[1., 4.],\n        [2., 5.],\n        [3., 6.]])',
      storage: 'tensor([1., 2., 3., 4., 5., 6.])',
    },
  ],
  [
    'contiguous() of a transposed view',
    (a) => a.t().contiguous(),
    {
      shape: [3, 2],
      strides: [2, 1],
      offset: 0,
      dtype: 'float32',
      repr: 'tensor([[1., 4.],\n        [2., 5.],\n        [3., 6.]])',
      storage: 'tensor([1., 4., 2., 5., 3., 6.])',
    },
  ],
  [
    'contiguous() of an expanded view',
    (a) => a.slice(0, 0, 1).expand(3, 3).contiguous(),
    {
      shape: [3, 3],
      strides: [3, 1],
      offset: 0,
      dtype: 'float32',
      repr: 'tensor([[1., 2., 3.],\n        [1., 2., 3.],\n        [1., 2., 3.]])',
      storage: 'tensor([1., 2., 3., 1., 2., 3., 1., 2., 3.])',
    },
  ],
  [
    'maskedSelect(a.gt(2))',
    (a) => a.maskedSelect(a.gt(2)),
    {
      shape: [4],
      strides: [1],
      offset: 0,
      dtype: 'float32',
      repr: 'tensor([3., 4., 5., 6.])',
      storage: 'tensor([3., 4., 5., 6.])',
    },
  ],
  [
    'maskedSelect with a broadcast mask',
    (a) => a.maskedSelect(torch.tensor([true, false, true])),
    {
      shape: [4],
      strides: [1],
      offset: 0,
      dtype: 'float32',
      repr: 'tensor([1., 3., 4., 6.])',
      storage: 'tensor([1., 3., 4., 6.])',
    },
  ],
  [
    'indexSelect(1, [2, 0])',
    (a) => a.indexSelect(1, torch.tensor([2, 0], { dtype: 'int64' })),
    {
      shape: [2, 2],
      strides: [2, 1],
      offset: 0,
      dtype: 'float32',
      repr: 'tensor([[3., 1.],\n        [6., 4.]])',
      storage: 'tensor([3., 1., 6., 4.])',
    },
  ],
  [
    'indexSelect(0, [1, 1, 0])',
    (a) => a.indexSelect(0, torch.tensor([1, 1, 0], { dtype: 'int64' })),
    {
      shape: [3, 3],
      strides: [3, 1],
      offset: 0,
      dtype: 'float32',
      repr: 'tensor([[4., 5., 6.],\n        [4., 5., 6.],\n        [1., 2., 3.]])',
      storage: 'tensor([4., 5., 6., 4., 5., 6., 1., 2., 3.])',
    },
  ],
  [
    'torch.cat([a, a], 1)',
    (a) => torch.cat([a, a], 1),
    {
      shape: [2, 6],
      strides: [6, 1],
      offset: 0,
      dtype: 'float32',
      repr: 'tensor([[1., 2., 3., 1., 2., 3.],\n        [4., 5., 6., 4., 5., 6.]])',
      storage: 'tensor([1., 2., 3., 1., 2., 3., 4., 5., 6., 4., 5., 6.])',
    },
  ],
  [
    'torch.cat of views',
    (a) => torch.cat([a.select(0, 1), a.select(1, 0)]),
    {
      shape: [5],
      strides: [1],
      offset: 0,
      dtype: 'float32',
      repr: 'tensor([4., 5., 6., 1., 4.])',
      storage: 'tensor([4., 5., 6., 1., 4.])',
    },
  ],
  [
    'torch.stack([a, a])',
    (a) => torch.stack([a, a]),
    {
      shape: [2, 2, 3],
      strides: [6, 3, 1],
      offset: 0,
      dtype: 'float32',
      repr: 'tensor([[[1., 2., 3.],\n         [4., 5., 6.]],\n\n        [[1., 2., 3.],\n         [4., 5., 6.]]])',
      storage: 'tensor([1., 2., 3., 4., 5., 6., 1., 2., 3., 4., 5., 6.])',
    },
  ],
  [
    'torch.stack([a, a], 1)',
    (a) => torch.stack([a, a], 1),
    {
      shape: [2, 2, 3],
      strides: [6, 3, 1],
      offset: 0,
      dtype: 'float32',
      repr: 'tensor([[[1., 2., 3.],\n         [1., 2., 3.]],\n\n        [[4., 5., 6.],\n         [4., 5., 6.]]])',
      storage: 'tensor([1., 2., 3., 1., 2., 3., 4., 5., 6., 4., 5., 6.])',
    },
  ],
  [
    'torch.stack([a, a], -1)',
    (a) => torch.stack([a, a], -1),
    {
      shape: [2, 3, 2],
      strides: [6, 2, 1],
      offset: 0,
      dtype: 'float32',
      repr: 'tensor([[[1., 1.],\n         [2., 2.],\n         [3., 3.]],\n\n        [[4., 4.],\n         [5., 5.],\n         [6., 6.]]])',
      storage: 'tensor([1., 1., 2., 2., 3., 3., 4., 4., 5., 5., 6., 6.])',
    },
  ],
  [
    "to('float64')",
    (a) => a.to('float64'),
    {
      shape: [2, 3],
      strides: [3, 1],
      offset: 0,
      dtype: 'float64',
      repr: 'tensor([[1., 2., 3.],\n        [4., 5., 6.]], dtype=torch.float64)',
      storage: 'tensor([1., 2., 3., 4., 5., 6.], dtype=torch.float64)',
    },
  ],
  [
    "to('int32')",
    (a) => a.to('int32'),
    {
      shape: [2, 3],
      strides: [3, 1],
      offset: 0,
      dtype: 'int32',
      repr: 'tensor([[1, 2, 3],\n        [4, 5, 6]], dtype=torch.int32)',
      storage: 'tensor([1, 2, 3, 4, 5, 6], dtype=torch.int32)',
    },
  ],
]

describe('copies get their own storage', () => {
  for (const [label, op, expected] of COPY_CASES) {
    test(label, () => {
      const a = torch.tensor([
        [1, 2, 3],
        [4, 5, 6],
      ])
      const t = op(a)
      assertLayout(t, expected)
      assert.equal(t.dtype, expected.dtype)
      assert.equal(t.sharesStorage(a), false, 'sharesStorage')
      assert.equal(t.storage().toString(), expected.storage, 'storage()')
      const copied = t.toString()
      a.fill_(-7)
      assert.equal(t.toString(), copied, 'writing the source does not change the copy')
      a.copy_(
        torch.tensor([
          [1, 2, 3],
          [4, 5, 6],
        ]),
      )
      t.zero_()
      assert.equal(
        a.toString(),
        'tensor([[1., 2., 3.],\n        [4., 5., 6.]])',
        'writing the copy does not change the source',
      )
    })
  }

  test('to() with nothing to change returns a tensor on the same storage, as PyTorch returns self', () => {
    const a = torch.tensor([
      [1, 2, 3],
      [4, 5, 6],
    ])
    for (const t of [a.to('float32'), a.to({ dtype: 'float32' }), a.to('cpu'), a.cpu()]) {
      assert.ok(t.sharesStorage(a))
      assertLayout(t, { shape: [2, 3], strides: [3, 1], offset: 0 })
    }
  })

  test('contiguous() of a contiguous view is that view (no copy)', () => {
    const x = torch.arange(12, { dtype: 'float32' }).reshape(3, 4)
    const row = x.select(0, 1)
    const c = row.contiguous()
    assert.ok(c.sharesStorage(x))
    assertLayout(c, { shape: [4], strides: [1], offset: 4, repr: 'tensor([4., 5., 6., 7.])' })
  })

  test('a view of a copy shares the copy, not the source', () => {
    const a = torch.tensor([
      [1, 2, 3],
      [4, 5, 6],
    ])
    const c = a.clone()
    const v = c.select(0, 1)
    assert.ok(v.sharesStorage(c))
    assert.equal(v.sharesStorage(a), false)
  })
})

describe('errors', () => {
  const a = () =>
    torch.tensor([
      [1, 2, 3],
      [4, 5, 6],
    ])

  test('select: an index out of range is InvalidArg (positive and negative)', () => {
    assert.throws(() => a().select(0, 5), coded('InvalidArg', /index 5.*out of range.*size 2/))
    assert.throws(() => a().select(0, -3), coded('InvalidArg', /-3/))
    assert.throws(() => a().select(1, 3), coded('InvalidArg', /3/))
    assert.throws(() => a().select(2, 0), coded('InvalidArg', /dim.*2.*out of range/))
    assert.throws(() => a().select(0, 1.5), coded('InvalidArg', /integer.*1\.5/))
  })

  test('view: a shape with the wrong element count is ShapeMismatch', () => {
    assert.throws(() => a().view(4, 4), coded('ShapeMismatch', /shape '\[4, 4\]' is invalid for input of size 6/))
    assert.throws(() => a().view(4, -1), coded('ShapeMismatch', /invalid for input of size 6/))
    assert.throws(() => a().reshape(4, 4), coded('ShapeMismatch', /invalid for input of size 6/))
  })

  test('view: a non-contiguous tensor that cannot be viewed is ShapeMismatch (use reshape)', () => {
    assert.throws(() => a().t().view(6), coded('ShapeMismatch', /reshape/))
    assert.deepEqual(a().t().reshape(6).toArray(), [1, 4, 2, 5, 3, 6])
  })

  test('view/reshape: bad sizes are InvalidArg', () => {
    assert.throws(() => a().view(-1, -1), coded('InvalidArg'))
    assert.throws(() => a().view(-2, 3), coded('InvalidArg'))
    assert.throws(() => a().view(1.5, 4), coded('InvalidArg', /1\.5/))
    assert.throws(() => a().reshape([2, 'x']), coded('InvalidArg'))
  })

  test('dims out of range are InvalidArg', () => {
    assert.throws(() => a().transpose(0, 3), coded('InvalidArg', /3/))
    assert.throws(() => a().transpose(-3, 0), coded('InvalidArg', /-3/))
    assert.throws(() => a().permute(0, 2), coded('InvalidArg'))
    assert.throws(() => a().permute(0), coded('InvalidArg'))
    assert.throws(() => a().narrow(2, 0, 1), coded('InvalidArg'))
    assert.throws(() => a().squeeze(5), coded('InvalidArg'))
    assert.throws(() => a().unsqueeze(5), coded('InvalidArg'))
    assert.throws(() => a().unsqueeze(-4), coded('InvalidArg'))
    assert.throws(() => a().slice(2), coded('InvalidArg'))
    assert.throws(() => a().flatten(0, 5), coded('InvalidArg'))
    assert.throws(() => a().unflatten(5, [1]), coded('InvalidArg'))
    assert.throws(() => a().chunk(2, 2), coded('InvalidArg'))
    assert.throws(() => a().split(1, 2), coded('InvalidArg'))
    assert.throws(() => a().diagonal(0, 0, 2), coded('InvalidArg'))
    assert.throws(() => a().indexSelect(2, torch.tensor([0], { dtype: 'int64' })), coded('InvalidArg'))
    assert.throws(() => torch.cat([a(), a()], 5), coded('InvalidArg'))
    assert.throws(() => torch.stack([a(), a()], 5), coded('InvalidArg'))
  })

  test('bad slice steps, chunk counts and split sizes are InvalidArg', () => {
    assert.throws(() => a().slice(0, 0, 2, 0), coded('InvalidArg', /step/))
    assert.throws(() => a().slice(0, 0, 2, -1), coded('InvalidArg', /step/))
    assert.throws(() => a().chunk(0), coded('InvalidArg'))
    assert.throws(() => a().split(0), coded('InvalidArg'))
    assert.throws(() => a().split([1, -1]), coded('InvalidArg'))
    assert.throws(() => a().asStrided([2], [-1]), coded('InvalidArg'))
    assert.throws(() => torch.cat([]), coded('InvalidArg'))
    assert.throws(() => torch.stack([]), coded('InvalidArg'))
  })

  test('shapes that do not fit are ShapeMismatch', () => {
    assert.throws(() => a().expand(3, 3), coded('ShapeMismatch'))
    assert.throws(() => a().expand(3), coded('ShapeMismatch'))
    assert.throws(() => a().split([1, 2]), coded('ShapeMismatch', /sum/))
    assert.throws(() => a().t().t().t().view(-1), coded('ShapeMismatch'))
    assert.throws(() => torch.cat([a(), torch.ones([2, 2])]), coded('ShapeMismatch'))
    assert.throws(() => a().maskedSelect(torch.ones([4], { dtype: 'bool' })), coded('ShapeMismatch'))
    assert.throws(() => torch.ones([2, 2, 2]).t(), coded('ShapeMismatch', /<= 2 dimensions/))
  })

  test('narrow: start + length past the end is rejected', () => {
    // PyTorch: RuntimeError "start (1) + length (5) exceeds dimension size (2)." — a bad
    // argument or a shape misfit; either code reads right, a bare ForwardError would not.
    assert.throws(
      () => a().narrow(0, 1, 5),
      (err) => {
        assert.ok(['InvalidArg', 'ShapeMismatch'].includes(err.code), `code ${err.code}: ${err.message}`)
        assert.match(err.message, /exceeds dimension size/)
        return true
      },
    )
  })

  test('indexSelect: an index of the wrong dtype is DTypeMismatch', () => {
    assert.throws(() => a().indexSelect(0, torch.tensor([0])), coded('DTypeMismatch'))
  })

  test('a disposed tensor cannot be viewed', () => {
    const t = a()
    const v = t.view(-1)
    t.dispose()
    assert.throws(() => t.view(-1), coded('Disposed'))
    assert.throws(() => t.select(0, 0), coded('Disposed'))
    // A view made before dispose() keeps the storage alive.
    assert.equal(v.toString(), 'tensor([1., 2., 3., 4., 5., 6.])')
  })

  // Codes the addon gets wrong today: each is a bad argument to a tensor op (no model involved),
  // yet it surfaces as ForwardError ("any other error raised inside a model"), ShapeMismatch
  // for an index, or napi's raw NumberExpected.
  test('permute with a repeated dim is InvalidArg', () => {
    assert.throws(() => a().permute(0, 0), coded('InvalidArg', /duplicate/))
  })

  test('narrow with a start out of range is InvalidArg, as select is', () => {
    assert.throws(() => a().narrow(0, 5, 0), coded('InvalidArg', /start/))
    assert.throws(() => a().narrow(0, -5, 1), coded('InvalidArg', /start/))
  })

  test('narrow with a negative length is InvalidArg', () => {
    assert.throws(() => a().narrow(0, 0, -1), coded('InvalidArg', /length/))
  })

  test('indexSelect with an index out of range is InvalidArg', () => {
    assert.throws(() => a().indexSelect(0, torch.tensor([5], { dtype: 'int64' })), coded('InvalidArg'))
    assert.throws(() => a().indexSelect(0, torch.tensor([-1], { dtype: 'int64' })), coded('InvalidArg'))
  })

  test('diagonal of one dim with itself is InvalidArg', () => {
    assert.throws(() => a().diagonal(0, 0, 0), coded('InvalidArg', /identical/))
  })

  test('flatten with startDim after endDim is InvalidArg', () => {
    assert.throws(() => a().flatten(1, 0), coded('InvalidArg', /start_dim|startDim/))
  })

  test('unflatten into sizes that do not multiply up is ShapeMismatch', () => {
    assert.throws(() => a().unflatten(1, [2, 2]), coded('ShapeMismatch', /multiply/))
  })

  test('stack of tensors with different shapes is ShapeMismatch, as cat', () => {
    assert.throws(() => torch.stack([a(), torch.ones([2, 2])]), coded('ShapeMismatch', /equal size/))
  })

  test('asStrided past the end of storage is ShapeMismatch or InvalidArg, not ForwardError', () => {
    assert.throws(
      () => a().asStrided([10], [1]),
      (err) => {
        assert.ok(['InvalidArg', 'ShapeMismatch'].includes(err.code), `code ${err.code}: ${err.message}`)
        assert.match(err.message, /out of bounds/)
        return true
      },
    )
  })

  test('maskedSelect with a non-bool mask is DTypeMismatch', () => {
    assert.throws(() => a().maskedSelect(torch.ones([2, 3])), coded('DTypeMismatch', /BoolTensor|bool/))
  })

  test('a missing or non-numeric dim/index is InvalidArg', () => {
    assert.throws(() => a().slice(0, 'a'), coded('InvalidArg'))
    assert.throws(() => a().transpose(0), coded('InvalidArg'))
    assert.throws(() => a().narrow(0, 1), coded('InvalidArg'))
  })
})

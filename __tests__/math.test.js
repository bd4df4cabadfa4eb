'use strict'
// Math with broadcasting and tensor-or-number operands, type promotion, in-place ops, autograd
// (including the saliency ∂y/∂x of a TorchScript model) and torch.tidy. Every expected repr and
// value below was printed by PyTorch 2.13 for the same inputs.
const path = require('node:path')
const { test, describe } = require('node:test')
const assert = require('node:assert/strict')
const torch = require('..')
const { coded } = require('./helpers')

const MLP = path.join(__dirname, '..', 'models', 'fixtures', 'mlp_traced.pt')

/** Asserts two (nested) number arrays are equal within `tol` per element. */
function assertClose(actual, expected, tol = 1e-6, message = '') {
  const a = [actual].flat(Infinity)
  const e = [expected].flat(Infinity)
  assert.equal(a.length, e.length, `${message} length`)
  for (let i = 0; i < e.length; i++) {
    assert.ok(Math.abs(a[i] - e[i]) <= tol, `${message}[${i}]: ${a[i]} is not within ${tol} of ${e[i]}`)
  }
}

// a = torch.tensor([[1., 2., 3.], [4., 5., 6.]]); b = torch.tensor([10., 20., 30.]); col = torch.tensor([[1.], [2.]])
const A = () =>
  torch.tensor([
    [1, 2, 3],
    [4, 5, 6],
  ])
const B = () => torch.tensor([10, 20, 30])
const COL = () => torch.tensor([[1], [2]])

describe('binary ops broadcast and take a tensor or a number', () => {
  test('add', () => {
    assert.equal(A().add(B()).toString(), 'tensor([[11., 22., 33.],\n        [14., 25., 36.]])')
    assert.equal(A().add(COL()).toString(), 'tensor([[2., 3., 4.],\n        [6., 7., 8.]])')
    assert.equal(A().add(2).toString(), 'tensor([[3., 4., 5.],\n        [6., 7., 8.]])')
    assert.equal(A().add(torch.tensor(10)).toString(), 'tensor([[11., 12., 13.],\n        [14., 15., 16.]])')
    assert.equal(
      A()
        .t()
        .add(torch.tensor([100, 200]))
        .toString(),
      'tensor([[101., 204.],\n        [102., 205.],\n        [103., 206.]])',
    )
  })

  test('sub', () => {
    assert.equal(A().sub(B()).toString(), 'tensor([[ -9., -18., -27.],\n        [ -6., -15., -24.]])')
    // [[1], [2]] - [10, 20, 30] broadcasts both ways to 2x3
    const d = COL().sub(B())
    assert.deepEqual(d.shape, [2, 3])
    assert.equal(d.toString(), 'tensor([[ -9., -19., -29.],\n        [ -8., -18., -28.]])')
    assert.equal(torch.tensor(10).sub(A()).toString(), 'tensor([[9., 8., 7.],\n        [6., 5., 4.]])')
  })

  test('mul', () => {
    assert.equal(A().mul(B()).toString(), 'tensor([[ 10.,  40.,  90.],\n        [ 40., 100., 180.]])')
    assert.deepEqual(A().mul(-1).toArray(), [
      [-1, -2, -3],
      [-4, -5, -6],
    ])
  })

  test('div (true division)', () => {
    const q = A().div(B())
    assert.equal(q.toString(), 'tensor([[0.1000, 0.1000, 0.1000],\n        [0.4000, 0.2500, 0.2000]])')
    assertClose(q.toArray(), [
      [0.10000000149011612, 0.10000000149011612, 0.10000000149011612],
      [0.4000000059604645, 0.25, 0.20000000298023224],
    ])
    const t = A().div(3)
    assert.equal(t.toString(), 'tensor([[0.3333, 0.6667, 1.0000],\n        [1.3333, 1.6667, 2.0000]])')
    assertClose(t.toArray(), [
      [0.3333333432674408, 0.6666666865348816, 1.0],
      [1.3333333730697632, 1.6666666269302368, 2.0],
    ])
  })

  test('pow: number and tensor exponents', () => {
    assert.equal(A().pow(2).toString(), 'tensor([[ 1.,  4.,  9.],\n        [16., 25., 36.]])')
    assert.equal(A().pow(0.5).toString(), 'tensor([[1.0000, 1.4142, 1.7321],\n        [2.0000, 2.2361, 2.4495]])')
    const p = A().pow(torch.tensor([1, 2, 0.5]))
    assert.equal(p.toString(), 'tensor([[ 1.0000,  4.0000,  1.7321],\n        [ 4.0000, 25.0000,  2.4495]])')
    assertClose(p.toArray(), [
      [1.0, 4.0, 1.7320507764816284],
      [4.0, 25.0, 2.4494898319244385],
    ])
  })

  test('the operands are not modified', () => {
    const a = A()
    const b = B()
    for (const op of ['add', 'sub', 'mul', 'div', 'pow']) {
      const r = a[op](b)
      assert.equal(r.sharesStorage(a), false, op)
      assert.equal(r.sharesStorage(b), false, op)
    }
    assert.deepEqual(a.toArray(), [
      [1, 2, 3],
      [4, 5, 6],
    ])
    assert.deepEqual(b.toArray(), [10, 20, 30])
  })

  test('shapes that do not broadcast are ShapeMismatch', () => {
    assert.throws(
      () => A().add(torch.ones([2])),
      coded('ShapeMismatch', /size of tensor a \(3\) must match the size of tensor b \(2\)/),
    )
    assert.throws(() => A().mul(torch.ones([4, 3])), coded('ShapeMismatch'))
  })
})

describe('matmul', () => {
  test('matrix @ matrix, matrix @ vector, vector @ vector', () => {
    const a = A()
    assert.equal(a.matmul(a.t()).toString(), 'tensor([[14., 32.],\n        [32., 77.]])')
    assert.equal(a.matmul(torch.tensor([1, 0, -1])).toString(), 'tensor([-2., -2.])')
    const dot = torch.tensor([1, 2, 3]).matmul(torch.tensor([4, 5, 6]))
    assert.deepEqual(dot.shape, [])
    assert.equal(dot.toString(), 'tensor(32.)')
  })

  test('batched, broadcasting the matrix', () => {
    const x = torch.arange(12, { dtype: 'float32' }).reshape(2, 2, 3)
    const w = torch.arange(6, { dtype: 'float32' }).reshape(3, 2)
    assert.equal(
      x.matmul(w).toString(),
      'tensor([[[10., 13.],\n         [28., 40.]],\n\n        [[46., 67.],\n         [64., 94.]]])',
    )
  })

  test('inner sizes that differ are ShapeMismatch', () => {
    assert.throws(() => A().matmul(A()), coded('ShapeMismatch', /2x3 and 2x3/))
  })
})

describe('element-wise functions', () => {
  const x = () => torch.tensor([-2, -0.5, 0, 0.5, 2])
  const y = () => torch.tensor([0.25, 1, 2, 4, 10])
  const cases = [
    [
      'exp',
      x,
      'tensor([0.1353, 0.6065, 1.0000, 1.6487, 7.3891])',
      [0.1353352814912796, 0.6065306663513184, 1.0, 1.6487212181091309, 7.389056205749512],
    ],
    ['abs', x, 'tensor([2.0000, 0.5000, 0.0000, 0.5000, 2.0000])', [2.0, 0.5, 0.0, 0.5, 2.0]],
    ['neg', x, 'tensor([ 2.0000,  0.5000, -0.0000, -0.5000, -2.0000])', [2.0, 0.5, -0.0, -0.5, -2.0]],
    ['relu', x, 'tensor([0.0000, 0.0000, 0.0000, 0.5000, 2.0000])', [0.0, 0.0, 0.0, 0.5, 2.0]],
    [
      'sigmoid',
      x,
      'tensor([0.1192, 0.3775, 0.5000, 0.6225, 0.8808])',
      [0.11920291930437088, 0.3775406777858734, 0.5, 0.622459352016449, 0.8807970285415649],
    ],
    [
      'tanh',
      x,
      'tensor([-0.9640, -0.4621,  0.0000,  0.4621,  0.9640])',
      [-0.9640275835990906, -0.46211716532707214, 0.0, 0.46211716532707214, 0.9640275835990906],
    ],
    [
      'log',
      y,
      'tensor([-1.3863,  0.0000,  0.6931,  1.3863,  2.3026])',
      [-1.3862943649291992, 0.0, 0.6931471824645996, 1.3862943649291992, 2.3025851249694824],
    ],
    [
      'sqrt',
      y,
      'tensor([0.5000, 1.0000, 1.4142, 2.0000, 3.1623])',
      [0.5, 1.0, 1.4142135381698608, 2.0, 3.1622776985168457],
    ],
  ]
  for (const [name, input, repr, values] of cases) {
    test(name, () => {
      const t = input()
      const r = t[name]()
      assert.equal(r.toString(), repr)
      assertClose(r.toArray(), values)
      assert.equal(r.dtype, 'float32')
      assert.equal(r.sharesStorage(t), false)
    })
  }

  test('neg(0) is -0, as PyTorch prints it', () => {
    assert.ok(Object.is(torch.tensor([0]).neg().item(), -0))
  })

  test('sqrt(-1) is nan, log(0) is -inf', () => {
    assert.equal(torch.tensor([-1]).sqrt().toString(), 'tensor([nan])')
    assert.ok(Number.isNaN(torch.tensor([-1]).sqrt().item()))
    assert.equal(torch.tensor([0]).log().toString(), 'tensor([-inf])')
    assert.equal(torch.tensor([0]).log().item(), -Infinity)
  })

  test('element-wise functions of integer tensors give float32 (sqrt, exp) or keep the dtype (abs, neg)', () => {
    const i = torch.tensor([1, 2], { dtype: 'int32' })
    assert.equal(i.exp().toString(), 'tensor([2.7183, 7.3891])')
    assert.equal(torch.tensor([1, 2], { dtype: 'int64' }).sqrt().toString(), 'tensor([1.0000, 1.4142])')
    assert.equal(i.abs().toString(), 'tensor([1, 2], dtype=torch.int32)')
    assert.equal(i.neg().toString(), 'tensor([-1, -2], dtype=torch.int32)')
  })
})

describe('softmax / logSoftmax', () => {
  test('softmax over the last dim by default, or over dim 0', () => {
    const a = A()
    for (const s of [a.softmax(), a.softmax(-1), a.softmax(1)]) {
      assert.equal(s.toString(), 'tensor([[0.0900, 0.2447, 0.6652],\n        [0.0900, 0.2447, 0.6652]])')
      assertClose(s.toArray(), [
        [0.09003057330846786, 0.2447284758090973, 0.6652409434318542],
        [0.09003057330846786, 0.2447284758090973, 0.6652409434318542],
      ])
      assertClose(s.sum(-1).toArray(), [1, 1])
    }
    const s0 = a.softmax(0)
    assert.equal(s0.toString(), 'tensor([[0.0474, 0.0474, 0.0474],\n        [0.9526, 0.9526, 0.9526]])')
    assertClose(s0.toArray(), [
      [0.04742587357759476, 0.04742587357759476, 0.04742587357759476],
      [0.9525741338729858, 0.9525741338729858, 0.9525741338729858],
    ])
    assert.equal(torch.zeros([2, 2]).softmax().toString(), 'tensor([[0.5000, 0.5000],\n        [0.5000, 0.5000]])')
  })

  test('logSoftmax', () => {
    const a = A()
    const l = a.logSoftmax()
    assert.equal(l.toString(), 'tensor([[-2.4076, -1.4076, -0.4076],\n        [-2.4076, -1.4076, -0.4076]])')
    assertClose(l.toArray(), [
      [-2.4076058864593506, -1.4076058864593506, -0.40760594606399536],
      [-2.4076058864593506, -1.4076058864593506, -0.40760594606399536],
    ])
    const l0 = a.logSoftmax(0)
    assert.equal(l0.toString(), 'tensor([[-3.0486, -3.0486, -3.0486],\n        [-0.0486, -0.0486, -0.0486]])')
    assertClose(l0.toArray(), [
      [-3.0485873222351074, -3.0485873222351074, -3.0485873222351074],
      [-0.04858732968568802, -0.04858732968568802, -0.04858732968568802],
    ])
    assertClose(a.logSoftmax(1).exp().toArray(), a.softmax(1).toArray())
  })
})

describe('reductions', () => {
  test('sum: all, one dim, a list of dims, keepdim, negative dim', () => {
    const a = A()
    assert.equal(a.sum().toString(), 'tensor(21.)')
    assert.deepEqual(a.sum().shape, [])
    assert.equal(a.sum(0).toString(), 'tensor([5., 7., 9.])')
    assert.equal(a.sum(1).toString(), 'tensor([ 6., 15.])')
    assert.equal(a.sum(-1).toString(), 'tensor([ 6., 15.])')
    assert.equal(a.sum([0, 1]).toString(), 'tensor(21.)')
    assert.equal(a.sum([0, 1], true).toString(), 'tensor([[21.]])')
    const k = a.sum(1, true)
    assert.deepEqual(k.shape, [2, 1])
    assert.equal(k.toString(), 'tensor([[ 6.],\n        [15.]])')
    assert.equal(a.sum(0, true).toString(), 'tensor([[5., 7., 9.]])')
    assert.equal(a.sum(null).toString(), 'tensor(21.)')
  })

  test('sum of an integer tensor is int64, as in PyTorch', () => {
    const s = torch.tensor([1, 2], { dtype: 'int32' }).sum()
    assert.equal(s.dtype, 'int64')
    assert.equal(s.toString(), 'tensor(3)')
  })

  test('mean: all, one dim, keepdim, a list of dims', () => {
    const a = A()
    assert.equal(a.mean().toString(), 'tensor(3.5000)')
    assert.equal(a.mean(0).toString(), 'tensor([2.5000, 3.5000, 4.5000])')
    assert.equal(a.mean(1, true).toString(), 'tensor([[2.],\n        [5.]])')
    assert.equal(a.mean([0, 1]).toString(), 'tensor(3.5000)')
  })

  test('mean of an integer tensor is DTypeMismatch (PyTorch: could not infer output dtype)', () => {
    assert.throws(() => torch.tensor([1, 2], { dtype: 'int32' }).mean(), coded('DTypeMismatch', /mean/))
  })

  // m = torch.tensor([[3., 7., 1.], [9., 2., 9.]])
  const M = () =>
    torch.tensor([
      [3, 7, 1],
      [9, 2, 9],
    ])

  test('max(): the largest element, a 0-dim tensor', () => {
    const r = M().max()
    assert.ok(r instanceof torch.Tensor)
    assert.deepEqual(r.shape, [])
    assert.equal(r.toString(), 'tensor(9.)')
  })

  test('max(dim) and max(dim, keepdim): {values, indices}', () => {
    const r = M().max(1)
    assert.deepEqual(Object.keys(r).sort(), ['indices', 'values'])
    assert.equal(r.values.toString(), 'tensor([7., 9.])')
    assert.equal(r.indices.toString(), 'tensor([1, 0])')
    assert.equal(r.indices.dtype, 'int64')
    const k = M().max(1, true)
    assert.equal(k.values.toString(), 'tensor([[7.],\n        [9.]])')
    assert.equal(k.indices.toString(), 'tensor([[1],\n        [0]])')
    const r0 = M().max(0)
    assert.equal(r0.values.toString(), 'tensor([9., 7., 9.])')
    assert.equal(r0.indices.toString(), 'tensor([1, 0, 1])')
  })

  test('max(other): the element-wise maximum, broadcasting', () => {
    const r = M().max(torch.tensor([5, 5, 5]))
    assert.ok(r instanceof torch.Tensor)
    assert.equal(r.toString(), 'tensor([[5., 7., 5.],\n        [9., 5., 9.]])')
  })

  test('min(), min(dim), min(other)', () => {
    assert.equal(M().min().toString(), 'tensor(1.)')
    const r = M().min(1)
    assert.equal(r.values.toString(), 'tensor([1., 2.])')
    assert.equal(r.indices.toString(), 'tensor([2, 1])')
    assert.equal(
      M()
        .min(torch.tensor([5, 5, 5]))
        .toString(),
      'tensor([[3., 5., 1.],\n        [5., 2., 5.]])',
    )
  })

  test('argmax / argmin: flattened, along a dim, keepdim', () => {
    assert.equal(M().argmax().toString(), 'tensor(3)')
    assert.equal(M().argmax(1).toString(), 'tensor([1, 0])')
    assert.equal(M().argmax(0, true).toString(), 'tensor([[1, 0, 1]])')
    assert.equal(M().argmin().toString(), 'tensor(2)')
    assert.equal(M().argmin(1).toString(), 'tensor([2, 1])')
    assert.equal(M().argmax().dtype, 'int64')
  })

  test('topk: the k largest, sorted, with indices; along a dim', () => {
    const t = torch.tensor([1, 5, 3, 4, 2])
    const r = t.topk(3)
    assert.equal(r.values.toString(), 'tensor([5., 4., 3.])')
    assert.equal(r.indices.toString(), 'tensor([1, 3, 2])')
    const m = M().topk(2)
    assert.equal(m.values.toString(), 'tensor([[7., 3.],\n        [9., 9.]])')
    assert.equal(m.indices.toString(), 'tensor([[1, 0],\n        [0, 2]])')
    const m0 = M().topk(1, 0)
    assert.equal(m0.values.toString(), 'tensor([[9., 7., 9.]])')
    assert.equal(m0.indices.toString(), 'tensor([[1, 0, 1]])')
  })

  test('sort: ascending by default, descending, along a dim', () => {
    const t = torch.tensor([1, 5, 3, 4, 2])
    const r = t.sort()
    assert.equal(r.values.toString(), 'tensor([1., 2., 3., 4., 5.])')
    assert.equal(r.indices.toString(), 'tensor([0, 4, 2, 3, 1])')
    const d = t.sort(-1, true)
    assert.equal(d.values.toString(), 'tensor([5., 4., 3., 2., 1.])')
    assert.equal(d.indices.toString(), 'tensor([1, 3, 2, 4, 0])')
    const m = M().sort(0)
    assert.equal(m.values.toString(), 'tensor([[3., 2., 1.],\n        [9., 7., 9.]])')
    assert.equal(m.indices.toString(), 'tensor([[0, 1, 0],\n        [1, 0, 1]])')
    assert.deepEqual(t.toArray(), [1, 5, 3, 4, 2], 'sort does not modify its input')
  })
})

describe('comparisons', () => {
  const expected = {
    eq: [
      'tensor([[False, False,  True],\n        [False, False, False]])',
      'tensor([[ True, False,  True],\n        [False,  True, False]])',
    ],
    ne: [
      'tensor([[ True,  True, False],\n        [ True,  True,  True]])',
      'tensor([[False,  True, False],\n        [ True, False,  True]])',
    ],
    lt: [
      'tensor([[ True,  True, False],\n        [False, False, False]])',
      'tensor([[False,  True, False],\n        [False, False, False]])',
    ],
    le: [
      'tensor([[ True,  True,  True],\n        [False, False, False]])',
      'tensor([[ True,  True,  True],\n        [False,  True, False]])',
    ],
    gt: [
      'tensor([[False, False, False],\n        [ True,  True,  True]])',
      'tensor([[False, False, False],\n        [ True, False,  True]])',
    ],
    ge: [
      'tensor([[False, False,  True],\n        [ True,  True,  True]])',
      'tensor([[ True, False,  True],\n        [ True,  True,  True]])',
    ],
  }
  for (const [op, [withNumber, withTensor]] of Object.entries(expected)) {
    test(`${op}: with a number and with a broadcast tensor, giving bool`, () => {
      const n = A()[op](3)
      assert.equal(n.dtype, 'bool')
      assert.equal(n.toString(), withNumber)
      const t = A()[op](torch.tensor([1, 5, 3]))
      assert.equal(t.dtype, 'bool')
      assert.equal(t.toString(), withTensor)
    })
  }

  test('across dtypes, as in PyTorch', () => {
    const i = torch.tensor([1, 2], { dtype: 'int32' })
    assert.equal(i.gt(1.5).toString(), 'tensor([False,  True])')
    assert.equal(i.eq(torch.tensor([1, 2])).toString(), 'tensor([True, True])')
  })
})

describe('where', () => {
  test('torch.where(cond, x, 0), torch.where(cond, x, y)', () => {
    const a = A()
    assert.equal(torch.where(a.gt(3), a, 0).toString(), 'tensor([[0., 0., 0.],\n        [4., 5., 6.]])')
    assert.equal(torch.where(a.gt(3), a, a.neg()).toString(), 'tensor([[-1., -2., -3.],\n        [ 4.,  5.,  6.]])')
  })

  test('x.where(cond, y), broadcasting y', () => {
    const a = A()
    assert.equal(
      a.where(a.lt(3), torch.tensor([-1, -2, -3])).toString(),
      'tensor([[ 1.,  2., -3.],\n        [-1., -2., -3.]])',
    )
  })

  test('the condition and the other operand broadcast', () => {
    const c = torch.tensor([[true, false, true]])
    assert.equal(
      torch.where(c, A(), torch.tensor([[-1], [-2]])).toString(),
      'tensor([[ 1., -1.,  3.],\n        [ 4., -2.,  6.]])',
    )
  })

  test('an integer x with an integer number stays integer', () => {
    const i = torch.tensor([1, 2], { dtype: 'int32' })
    assert.equal(torch.where(i.gt(1), i, 0).toString(), 'tensor([0, 2], dtype=torch.int32)')
  })
})

describe('clamp and rounding', () => {
  test('clamp(min, max), clamp(min), clamp(null, max)', () => {
    assert.equal(A().clamp(2, 5).toString(), 'tensor([[2., 2., 3.],\n        [4., 5., 5.]])')
    assert.equal(A().clamp(3).toString(), 'tensor([[3., 3., 3.],\n        [4., 5., 6.]])')
    assert.equal(A().clamp(null, 3).toString(), 'tensor([[1., 2., 3.],\n        [3., 3., 3.]])')
    assert.equal(A().clamp(undefined, 3).toString(), 'tensor([[1., 2., 3.],\n        [3., 3., 3.]])')
  })

  // r = torch.tensor([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, 0.49, -0.51])
  const R = () => torch.tensor([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, 0.49, -0.51])

  test('round is half-to-even (and keeps the sign of zero)', () => {
    const r = R().round()
    assert.equal(r.toString(), 'tensor([-2., -2., -0.,  0.,  2.,  2.,  4.,  0., -1.])')
    // deepStrictEqual tells -0 from 0
    assert.deepEqual(r.toArray(), [-2, -2, -0, 0, 2, 2, 4, 0, -1])
  })

  test('floor', () => {
    assert.equal(R().floor().toString(), 'tensor([-3., -2., -1.,  0.,  1.,  2.,  3.,  0., -1.])')
  })

  test('ceil', () => {
    const c = R().ceil()
    assert.equal(c.toString(), 'tensor([-2., -1., -0.,  1.,  2.,  3.,  4.,  1., -0.])')
    assert.deepEqual(c.toArray(), [-2, -1, -0, 1, 2, 3, 4, 1, -0])
  })

  test('round of an integer tensor keeps it', () => {
    assert.equal(torch.tensor([1, 2], { dtype: 'int64' }).round().toString(), 'tensor([1, 2])')
  })
})

describe('type promotion, as with Python scalars', () => {
  const i32 = () => torch.tensor([1, 2], { dtype: 'int32' })

  test('int32 with an integer number stays int32', () => {
    for (const op of ['add', 'sub', 'mul', 'pow']) assert.equal(i32()[op](2).dtype, 'int32', op)
    assert.equal(i32().add(2).toString(), 'tensor([3, 4], dtype=torch.int32)')
    assert.equal(i32().mul(2).toString(), 'tensor([2, 4], dtype=torch.int32)')
    assert.equal(i32().sub(1).toString(), 'tensor([0, 1], dtype=torch.int32)')
    assert.equal(i32().pow(2).toString(), 'tensor([1, 4], dtype=torch.int32)')
  })

  test('int32 with a fractional number gives float32 (the default dtype), not float64', () => {
    assert.equal(i32().add(2.5).dtype, 'float32')
    assert.equal(i32().add(2.5).toString(), 'tensor([3.5000, 4.5000])')
    assert.equal(i32().pow(0.5).toString(), 'tensor([1.0000, 1.4142])')
    assert.equal(torch.tensor([true, false]).add(1.5).toString(), 'tensor([2.5000, 1.5000])')
    assert.equal(torch.where(i32().gt(1), i32(), 0.5).toString(), 'tensor([0.5000, 2.0000])')
  })

  test('int32 with a fractional number gives a floating result with the right values', () => {
    assertClose(i32().add(2.5).toArray(), [3.5, 4.5])
    assert.ok(i32().add(2.5).dtype.startsWith('float'))
  })

  test('div of integers is true division, float32', () => {
    assert.equal(i32().div(2).dtype, 'float32')
    assert.equal(i32().div(2).toString(), 'tensor([0.5000, 1.0000])')
    const i64 = torch.tensor([1, 2], { dtype: 'int64' })
    assert.equal(i64.div(2).toString(), 'tensor([0.5000, 1.0000])')
    assert.equal(i64.mul(2).toString(), 'tensor([2, 4])')
  })

  test('tensor with tensor: the wider dtype wins; a 0-dim tensor does not widen within a category', () => {
    const i64 = torch.tensor([1, 2], { dtype: 'int64' })
    const f32 = torch.tensor([1, 2])
    const f64 = torch.tensor([1, 2], { dtype: 'float64' })
    assert.equal(i64.add(i32()).toString(), 'tensor([2, 4])')
    assert.equal(i32().add(f64).toString(), 'tensor([2., 4.], dtype=torch.float64)')
    assert.equal(f32.add(f64).toString(), 'tensor([2., 4.], dtype=torch.float64)')
    assert.equal(f32.add(torch.tensor(1, { dtype: 'float64' })).toString(), 'tensor([2., 3.])')
    assert.equal(i32().add(torch.tensor(1)).toString(), 'tensor([2., 3.])')
    assert.equal(
      i32()
        .add(torch.tensor(1, { dtype: 'int64' }))
        .toString(),
      'tensor([2, 3], dtype=torch.int32)',
    )
    const u8 = torch.tensor([1, 2], { dtype: 'uint8' })
    const i8 = torch.tensor([1, 2], { dtype: 'int8' })
    assert.equal(u8.add(i8).toString(), 'tensor([2, 4], dtype=torch.int16)')
    const f16 = torch.tensor([1, 2], { dtype: 'float16' })
    assert.equal(f16.add(2.5).toString(), 'tensor([3.5000, 4.5000], dtype=torch.float16)')
    assert.equal(f16.add(f32).toString(), 'tensor([2., 4.])')
  })

  test('bool with an integer number gives int64', () => {
    assert.equal(torch.tensor([true, false]).add(1).toString(), 'tensor([2, 1])')
  })

  test('integer to a negative integer power is an error, as in PyTorch', () => {
    assert.throws(() => torch.tensor([1, 2], { dtype: 'int64' }).pow(-1), /negative integer powers/)
  })
})

describe('in-place ops', () => {
  test('add_ sub_ mul_ div_ pow_ clamp_ fill_ zero_ copy_ return the same object', () => {
    const t = A()
    const ops = [
      ['add_', [1]],
      ['sub_', [1]],
      ['mul_', [2]],
      ['div_', [2]],
      ['pow_', [2]],
      ['clamp_', [0, 10]],
      ['fill_', [3]],
      ['zero_', []],
      ['copy_', [torch.ones([3])]],
    ]
    for (const [op, args] of ops) assert.equal(t[op](...args), t, op)
  })

  test('they chain and write the same storage (views see the change; layout unchanged)', () => {
    const t = A()
    const flat = t.view(-1)
    const row = t.select(0, 1)
    assert.equal(row.add_(1), row)
    assert.equal(t.toString(), 'tensor([[1., 2., 3.],\n        [5., 6., 7.]])')
    assert.equal(t.add_(1).mul_(2).sub_(1).div_(2), t)
    assert.equal(t.toString(), 'tensor([[1.5000, 2.5000, 3.5000],\n        [5.5000, 6.5000, 7.5000]])')
    assert.equal(flat.toString(), 'tensor([1.5000, 2.5000, 3.5000, 5.5000, 6.5000, 7.5000])')
    assert.ok(flat.sharesStorage(t))
    assert.deepEqual(t.shape, [2, 3])
    assert.deepEqual(t.strides, [3, 1])
    assert.equal(t.storageOffset, 0)
  })

  test('they write through views into the base tensor', () => {
    const t = A()
    t.select(0, 1).add_(1)
    t.add_(1).mul_(2).sub_(1).div_(2)
    t.select(1, 0).fill_(0)
    assert.equal(t.toString(), 'tensor([[0.0000, 2.5000, 3.5000],\n        [0.0000, 6.5000, 7.5000]])')
    t.slice(1, 1).zero_()
    assert.equal(t.toString(), 'tensor([[0., 0., 0.],\n        [0., 0., 0.]])')
    t.t().copy_(torch.tensor([1, 2, 3]).unsqueeze(1))
    assert.equal(t.toString(), 'tensor([[1., 2., 3.],\n        [1., 2., 3.]])')
    t.pow_(2).clamp_(2, 5)
    assert.equal(t.toString(), 'tensor([[2., 4., 5.],\n        [2., 4., 5.]])')
    t.copy_(7)
    assert.equal(t.toString(), 'tensor([[7., 7., 7.],\n        [7., 7., 7.]])')
    t.diagonal().copy_(torch.tensor([-1, -2]))
    assert.equal(t.toString(), 'tensor([[-1.,  7.,  7.],\n        [ 7., -2.,  7.]])')
  })

  test('with broadcast tensor operands', () => {
    const u = A()
    u.add_(torch.tensor([10, 20, 30]))
    assert.equal(u.toString(), 'tensor([[11., 22., 33.],\n        [14., 25., 36.]])')
    u.sub_(torch.tensor([[1], [2]]))
    assert.equal(u.toString(), 'tensor([[10., 21., 32.],\n        [12., 23., 34.]])')
    u.mul_(torch.tensor([1, 0.5, 2]))
    assert.equal(u.toString(), 'tensor([[10.0000, 10.5000, 64.0000],\n        [12.0000, 11.5000, 68.0000]])')
    u.div_(torch.tensor([[2], [4]]))
    assert.equal(u.toString(), 'tensor([[ 5.0000,  5.2500, 32.0000],\n        [ 3.0000,  2.8750, 17.0000]])')
    u.pow_(torch.tensor([1, 2, 0.5]))
    assert.equal(u.toString(), 'tensor([[ 5.0000, 27.5625,  5.6569],\n        [ 3.0000,  8.2656,  4.1231]])')
    u.clamp_(null, 10)
    assert.equal(u.toString(), 'tensor([[ 5.0000, 10.0000,  5.6569],\n        [ 3.0000,  8.2656,  4.1231]])')
    u.clamp_(5)
    assert.equal(u.toString(), 'tensor([[ 5.0000, 10.0000,  5.6569],\n        [ 5.0000,  8.2656,  5.0000]])')
    u.clamp_(6, 7)
    assert.equal(u.toString(), 'tensor([[6., 7., 6.],\n        [6., 7., 6.]])')
  })

  test('an integer tensor keeps its dtype; copy_ casts (truncating) and broadcasts', () => {
    const i = torch.tensor([1, 2, 3], { dtype: 'int32' })
    i.add_(2).mul_(3).sub_(1)
    assert.equal(i.toString(), 'tensor([ 8, 11, 14], dtype=torch.int32)')
    i.copy_(torch.tensor([1.7, -2.7, 3.5]))
    assert.equal(i.toString(), 'tensor([ 1, -2,  3], dtype=torch.int32)')
    i.fill_(4).pow_(2)
    assert.equal(i.toString(), 'tensor([16, 16, 16], dtype=torch.int32)')
    const z = torch.zeros([2, 3])
    z.copy_(torch.tensor([1, 2, 3], { dtype: 'int64' }))
    assert.equal(z.toString(), 'tensor([[1., 2., 3.],\n        [1., 2., 3.]])')
  })

  test('an operand that would need a bigger output shape is ShapeMismatch', () => {
    assert.throws(() => torch.tensor([1, 2]).add_(torch.ones([2, 2])), coded('ShapeMismatch', /broadcast shape/))
  })

  test('an in-place op whose result cannot be cast back to an integer tensor is DTypeMismatch', () => {
    const i = torch.tensor([1, 2], { dtype: 'int32' })
    assert.throws(() => i.div_(2), coded('DTypeMismatch', /can't be cast/))
    assert.throws(() => i.add_(2.5), coded('DTypeMismatch', /result type Float can't be cast/))
    assert.throws(() => i.add_(torch.tensor([1, 2])), coded('DTypeMismatch', /can't be cast/))
  })

  test('clamp_ of an integer tensor with a fractional bound is an error, as in PyTorch', () => {
    assert.throws(() => torch.tensor([1, 2], { dtype: 'int32' }).clamp_(1.5), /can't be cast/)
  })
})

describe('autograd', () => {
  test('y = (x * x).sum(): repr with grad_fn, backward, x.grad = 2x', () => {
    const x = torch.tensor([1, 2, 3], { requiresGrad: true })
    assert.equal(x.toString(), 'tensor([1., 2., 3.], requires_grad=True)')
    assert.equal(x.grad, null)
    const y = x.mul(x).sum()
    assert.equal(y.toString(), 'tensor(14., grad_fn=<SumBackward0>)')
    assert.equal(y.requiresGrad, true)
    assert.equal(y.backward(), undefined)
    assert.ok(x.grad instanceof torch.Tensor)
    assert.equal(x.grad.toString(), 'tensor([2., 4., 6.])')
    assert.deepEqual(x.grad.toArray(), [2, 4, 6])
    assert.equal(x.grad.requiresGrad, false)
  })

  test('gradients accumulate over backward() calls', () => {
    const x = torch.tensor([1, 2, 3], { requiresGrad: true })
    x.mul(x).sum().backward()
    x.mul(3).sum().backward()
    assert.deepEqual(x.grad.toArray(), [5, 7, 9])
  })

  test('backward(gradient) for a non-scalar output', () => {
    const x = torch.tensor([1, 2, 3], { requiresGrad: true })
    const y = x.mul(2)
    assert.equal(y.toString(), 'tensor([2., 4., 6.], grad_fn=<MulBackward0>)')
    y.backward(torch.tensor([1, 0.5, 0.25]))
    assert.equal(x.grad.toString(), 'tensor([2.0000, 1.0000, 0.5000])')
  })

  test('backward() of a non-scalar without a gradient is ShapeMismatch', () => {
    const x = torch.tensor([1, 2], { requiresGrad: true })
    assert.throws(() => x.mul(2).backward(), coded('ShapeMismatch', /gradient/))
  })

  test('grad_fn names in reprs match PyTorch', () => {
    const w = torch.tensor([1, 2, 3], { requiresGrad: true })
    assert.equal(w.mul(w).toString(), 'tensor([1., 4., 9.], grad_fn=<MulBackward0>)')
    assert.equal(w.exp().toString(), 'tensor([ 2.7183,  7.3891, 20.0855], grad_fn=<ExpBackward0>)')
    assert.equal(w.mean().toString(), 'tensor(2., grad_fn=<MeanBackward0>)')
    assert.equal(w.add(1).toString(), 'tensor([2., 3., 4.], grad_fn=<AddBackward0>)')
    assert.equal(w.view(3, 1).toString(), 'tensor([[1.],\n        [2.],\n        [3.]], grad_fn=<ViewBackward0>)')
    assert.equal(w.select(0, 1).toString(), 'tensor(2., grad_fn=<SelectBackward0>)')
    assert.equal(w.max().toString(), 'tensor(3., grad_fn=<MaxBackward1>)')
    assert.equal(w.max(0).values.toString(), 'tensor(3., grad_fn=<MaxBackward0>)')
    assert.equal(w.softmax(0).toString(), 'tensor([0.0900, 0.2447, 0.6652], grad_fn=<SoftmaxBackward0>)')
    assert.equal(w.relu().toString(), 'tensor([1., 2., 3.], grad_fn=<ReluBackward0>)')
    assert.equal(w.mul(2).sum().mul(3).toString(), 'tensor(36., grad_fn=<MulBackward0>)')
  })

  test('pow(number) records PowBackward0 (pow.Tensor_Scalar), as in PyTorch', () => {
    const w = torch.tensor([1, 2, 3], { requiresGrad: true })
    assert.equal(w.pow(2).toString(), 'tensor([1., 4., 9.], grad_fn=<PowBackward0>)')
  })

  test('clone() records CloneBackward0, as in PyTorch', () => {
    const w = torch.tensor([1, 2, 3], { requiresGrad: true })
    assert.equal(w.clone().toString(), 'tensor([1., 2., 3.], grad_fn=<CloneBackward0>)')
  })

  test('pow(number) and clone() are differentiable', () => {
    const w = torch.tensor([1, 2, 3], { requiresGrad: true })
    w.pow(2).sum().backward()
    assert.deepEqual(w.grad.toArray(), [2, 4, 6])
    const v = torch.tensor([1, 2, 3], { requiresGrad: true })
    v.clone().mul(3).sum().backward()
    assert.deepEqual(v.grad.toArray(), [3, 3, 3])
  })

  test('detach(): requiresGrad false, shares storage', () => {
    const x = torch.tensor([1, 2, 3], { requiresGrad: true })
    const d = x.detach()
    assert.equal(d.requiresGrad, false)
    assert.ok(d.sharesStorage(x))
    assert.equal(d.toString(), 'tensor([1., 2., 3.])')
    assert.equal(d.mul(2).requiresGrad, false)
  })

  test('requiresGrad_() returns this and turns recording on (and off)', () => {
    const z = torch.tensor([1, 2])
    assert.equal(z.requiresGrad, false)
    assert.equal(z.requiresGrad_(), z)
    assert.equal(z.requiresGrad, true)
    assert.equal(z.toString(), 'tensor([1., 2.], requires_grad=True)')
    z.mul(z).sum().backward()
    assert.deepEqual(z.grad.toArray(), [2, 4])
    assert.equal(z.requiresGrad_(false), z)
    assert.equal(z.requiresGrad, false)
  })

  test('requiresGrad_() on an integer tensor is DTypeMismatch', () => {
    assert.throws(() => torch.tensor([1, 2], { dtype: 'int64' }).requiresGrad_(), coded('DTypeMismatch'))
  })

  test('backward() on a tensor that does not require grad is InvalidArg', () => {
    assert.throws(() => torch.tensor([1, 2]).sum().backward(), coded('InvalidArg', /require/))
  })
})

describe('saliency: ∂(top logit)/∂x through a TorchScript model', () => {
  // torch.manual_seed(0); torch.randn(1, 4)
  const X = [1.5409960746765137, -0.293428897857666, -2.1787893772125244, 0.5684312582015991]
  // m = torch.jit.load('mlp_traced.pt'); x = torch.tensor([X], requires_grad=True); m(x).max().backward(); x.grad
  const GRAD_TOP = [0.02357618510723114, 0.11117898672819138, -0.11678675562143326, 0.04026779532432556]
  // ... m(x)[0, 0].backward()
  const GRAD_0 = [-0.1489185094833374, -0.17357170581817627, 0.057296909391880035, 0.07013639807701111]

  test('manualSeed(0) + randn([1, 4]) gives the same x as PyTorch', () => {
    torch.manualSeed(0)
    const x = torch.randn([1, 4], { requiresGrad: true })
    assert.deepEqual(Array.from(x.toTypedArray()), X)
    assert.equal(x.toString(), 'tensor([[ 1.5410, -0.2934, -2.1788,  0.5684]], requires_grad=True)')
  })

  test('y.max().backward(): x.grad has shape [1, 4], is non-zero, and matches PyTorch', async () => {
    const model = await torch.ScriptModule.load(MLP)
    const x = torch.tensor([X], { requiresGrad: true })
    const y = await model.forward(x)
    assert.equal(y.toString(), 'tensor([[-0.0290, -0.0604,  0.3135]], grad_fn=<AddmmBackward0>)')
    assert.equal(y.requiresGrad, true)
    const top = y.max()
    assert.equal(top.toString(), 'tensor(0.3135, grad_fn=<MaxBackward1>)')
    top.backward()
    assert.ok(x.grad)
    assert.deepEqual(x.grad.shape, [1, 4])
    assert.ok(x.grad.abs().sum().item() > 0)
    assertClose(Array.from(x.grad.toTypedArray()), GRAD_TOP, 1e-6, 'x.grad')
    assert.equal(x.grad.toString(), 'tensor([[ 0.0236,  0.1112, -0.1168,  0.0403]])')
  })

  test('y.select(1, k) for k = argmax gives the same gradient; k = 0 another one', async () => {
    const model = await torch.ScriptModule.load(MLP)
    torch.manualSeed(0)
    const x = torch.randn([1, 4], { requiresGrad: true })
    const y = await model.forward(x)
    const k = y.argmax(1).item()
    assert.equal(k, 2)
    y.select(1, k).sum().backward()
    assertClose(Array.from(x.grad.toTypedArray()), GRAD_TOP, 1e-6, 'x.grad (select)')

    const x0 = torch.tensor([X], { requiresGrad: true })
    const y0 = model.forwardSync(x0)
    at2(y0, 0, 0).backward()
    assertClose(Array.from(x0.grad.toTypedArray()), GRAD_0, 1e-6, 'x.grad (logit 0)')
  })

  test('forward without any requiresGrad input gives an output that does not require grad', async () => {
    const model = await torch.ScriptModule.load(MLP)
    const y = await model.forward(torch.tensor([X]))
    assert.equal(y.requiresGrad, false)
    assert.equal(y.toString(), 'tensor([[-0.0290, -0.0604,  0.3135]])')
    assert.throws(() => y.max().backward(), coded('InvalidArg'))
    const ys = model.forwardSync(torch.tensor([X]))
    assert.equal(ys.requiresGrad, false)
  })
})

/** Python's `t[i, j]` for a 2-D tensor. */
function at2(t, i, j) {
  return t.select(0, i).select(0, j)
}

describe('torch.tidy', () => {
  const gc = () => {
    if (typeof global.gc === 'function') global.gc()
  }

  test('disposes tensors created inside except the returned one', () => {
    gc()
    const before = torch.memory().tensors
    let a, b
    const kept = torch.tidy(() => {
      a = torch.ones([3])
      b = a.add(1)
      return b.mul(2)
    })
    assert.equal(a.isDisposed, true)
    assert.equal(b.isDisposed, true)
    assert.equal(kept.isDisposed, false)
    assert.equal(kept.toString(), 'tensor([4., 4., 4.])')
    assert.equal(torch.memory().tensors, before + 1)
    kept.dispose()
    assert.equal(torch.memory().tensors, before)
  })

  test('keeps tensors in returned arrays and objects, and max(dim) results', () => {
    let t
    const r = torch.tidy(() => {
      t = torch.tensor([
        [1, 2],
        [3, 4],
      ])
      return { m: t.max(1), list: [t.sum(), 5], n: 'x' }
    })
    assert.equal(t.isDisposed, true)
    assert.equal(r.m.values.isDisposed, false)
    assert.equal(r.m.indices.isDisposed, false)
    assert.equal(r.list[0].isDisposed, false)
    assert.equal(r.m.values.toString(), 'tensor([2., 4.])')
    assert.equal(r.list[0].toString(), 'tensor(10.)')
    assert.equal(r.list[1], 5)
    assert.equal(r.n, 'x')
  })

  test('leaves tensors created outside alone, even when used or modified inside', () => {
    const outside = torch.ones([2])
    torch.tidy(() => {
      outside.add_(1)
      outside.mul(3)
    })
    assert.equal(outside.isDisposed, false)
    assert.equal(outside.toString(), 'tensor([2., 2.])')
  })

  test('an in-place op returned from tidy keeps its tensor', () => {
    let t
    const r = torch.tidy(() => {
      t = torch.ones([2])
      return t.add_(1)
    })
    assert.equal(r, t)
    assert.equal(t.isDisposed, false)
    assert.equal(t.toString(), 'tensor([2., 2.])')
  })

  test('nested: the inner scope frees its own; what it returns belongs to the outer one', () => {
    gc()
    const before = torch.memory().tensors
    let outerT, innerT, innerKept, innerDisposedAtEnd
    const result = torch.tidy(() => {
      outerT = torch.ones([2])
      innerKept = torch.tidy(() => {
        innerT = torch.zeros([2])
        return innerT.add(1)
      })
      innerDisposedAtEnd = innerT.isDisposed
      assert.equal(innerKept.isDisposed, false)
      return innerKept.add(outerT)
    })
    assert.equal(innerDisposedAtEnd, true)
    assert.equal(outerT.isDisposed, true)
    assert.equal(innerKept.isDisposed, true, 'returned by the inner tidy only: the outer one frees it')
    assert.equal(result.isDisposed, false)
    assert.equal(result.toString(), 'tensor([2., 2.])')
    assert.equal(torch.memory().tensors, before + 1)
  })

  test('an exception inside still cleans up, and propagates', () => {
    gc()
    const before = torch.memory().tensors
    let t
    assert.throws(
      () =>
        torch.tidy(() => {
          t = torch.ones([2])
          throw new Error('boom')
        }),
      /boom/,
    )
    assert.equal(t.isDisposed, true)
    assert.equal(torch.memory().tensors, before)
    // The scope was closed: later tensors are not tracked by it.
    const after = torch.ones([1])
    assert.equal(after.isDisposed, false)
  })

  test('returning a Promise is InvalidArg (and the scope is cleaned up)', () => {
    let t
    assert.throws(
      () =>
        torch.tidy(() => {
          t = torch.ones([2])
          return Promise.resolve(t)
        }),
      coded('InvalidArg', /Promise/),
    )
    assert.equal(t.isDisposed, true)
    assert.throws(() => torch.tidy(async () => 1), coded('InvalidArg', /Promise/))
  })

  test('a non-function is InvalidArg', () => {
    assert.throws(() => torch.tidy(5), coded('InvalidArg', /function/))
  })

  test('a disposed tensor from tidy throws Disposed when used', () => {
    let t
    torch.tidy(() => {
      t = torch.ones([2])
    })
    assert.throws(() => t.add(1), coded('Disposed'))
  })
})

'use strict'
// Tensors: factories, data in and out, dtype/device conversion, a few ops, lifetime.
const { test, describe } = require('node:test')
const assert = require('node:assert/strict')
const torch = require('..')

/** Asserts two number arrays are equal within `tol` per element. */
function assertClose(actual, expected, tol = 1e-6, message = '') {
  assert.equal(actual.length, expected.length, `${message} length`)
  for (let i = 0; i < expected.length; i++) {
    assert.ok(
      Math.abs(actual[i] - expected[i]) <= tol,
      `${message}[${i}]: ${actual[i]} is not within ${tol} of ${expected[i]}`,
    )
  }
}

/** Asserts every element of a (nested) array satisfies `pred`. */
function assertEvery(nested, pred, message) {
  for (const v of nested.flat(Infinity)) assert.ok(pred(v), `${message}: ${v}`)
}

describe('factories', () => {
  test('ones / zeros / empty: shapes and default dtype float32', () => {
    for (const make of [torch.ones, torch.zeros, torch.empty]) {
      const t = make([2, 3])
      assert.deepEqual(t.shape, [2, 3], make.name)
      assert.equal(t.dtype, 'float32', make.name)
      assert.equal(t.device, 'cpu', make.name)
      assert.equal(t.requiresGrad, false, make.name)
      assert.deepEqual(make(4).shape, [4], `${make.name}(4)`)
      assert.deepEqual(make([]).shape, [], `${make.name}([])`)
      assert.deepEqual(make([2, 0, 3]).shape, [2, 0, 3], `${make.name}([2, 0, 3])`)
    }
    assert.deepEqual(torch.ones([2, 3]).toArray(), [
      [1, 1, 1],
      [1, 1, 1],
    ])
    assert.deepEqual(torch.zeros([3]).toArray(), [0, 0, 0])
    assert.equal(torch.empty([5]).numel(), 5)
  })

  test('options object: dtype', () => {
    assert.equal(torch.ones([2], { dtype: 'int64' }).dtype, 'int64')
    assert.deepEqual(torch.ones([2], { dtype: 'int64' }).toArray(), [1, 1])
    assert.equal(torch.zeros([2], { dtype: 'float64' }).dtype, 'float64')
    assert.equal(torch.empty([2], { dtype: 'int32' }).dtype, 'int32')
    assert.equal(torch.ones([2], { dtype: 'bool' }).dtype, 'bool')
    assert.deepEqual(torch.ones([2], { dtype: 'bool' }).toArray(), [true, true])
    assert.equal(torch.rand([2], { dtype: 'float64' }).dtype, 'float64')
    assert.equal(torch.randn([2], { dtype: 'float16' }).dtype, 'float16')
  })

  test('requiresGrad: options object and the torchjs boolean form', () => {
    assert.equal(torch.ones([2, 3], true).requiresGrad, true)
    assert.equal(torch.ones([2, 3], false).requiresGrad, false)
    assert.equal(torch.ones([2, 3], { requiresGrad: true }).requiresGrad, true)
    for (const make of [torch.zeros, torch.empty, torch.rand, torch.randn]) {
      assert.equal(make([2], true).requiresGrad, true, make.name)
      assert.equal(make([2]).requiresGrad, false, make.name)
    }
    assert.equal(torch.full([2], 1.5, true).requiresGrad, true)
    assert.equal(torch.full([2], 1.5, { requiresGrad: true }).requiresGrad, true)
  })

  test('requiresGrad on an integer dtype throws', () => {
    assert.throws(() => torch.ones([2], { dtype: 'int64', requiresGrad: true }), { code: 'DTypeMismatch' })
  })

  test('full', () => {
    const t = torch.full([2, 2], 7)
    assert.equal(t.dtype, 'float32')
    assert.deepEqual(t.toArray(), [
      [7, 7],
      [7, 7],
    ])
    assert.deepEqual(torch.full(3, 2.5).toArray(), [2.5, 2.5, 2.5])
    assert.equal(torch.full([2], 2.5, { dtype: 'float64' }).dtype, 'float64')
    assert.deepEqual(torch.full([2], 3, { dtype: 'int32' }).toArray(), [3, 3])
    const b = torch.full([2], true)
    assert.equal(b.dtype, 'bool')
    assert.deepEqual(b.toArray(), [true, true])
    assert.deepEqual(torch.full([2], false).toArray(), [false, false])
  })

  test('rand: shape, float32, values in [0, 1)', () => {
    const t = torch.rand([100, 10])
    assert.deepEqual(t.shape, [100, 10])
    assert.equal(t.dtype, 'float32')
    assertEvery(t.toArray(), (v) => v >= 0 && v < 1, 'rand value out of [0, 1)')
    assert.deepEqual(torch.rand(3).shape, [3])
  })

  test('randn: shape, float32, roughly standard normal', () => {
    const t = torch.randn([100, 100])
    assert.deepEqual(t.shape, [100, 100])
    assert.equal(t.dtype, 'float32')
    const v = Array.from(t.toTypedArray())
    const mean = v.reduce((a, b) => a + b, 0) / v.length
    const variance = v.reduce((a, b) => a + (b - mean) ** 2, 0) / v.length
    assert.ok(Math.abs(mean) < 0.1, `mean ${mean}`)
    assert.ok(Math.abs(variance - 1) < 0.1, `variance ${variance}`)
    assert.ok(
      v.some((x) => x < 0),
      'randn should produce negative values',
    )
  })

  test('randint: int64 by default, values in [low, high)', () => {
    const t = torch.randint(0, 10, [3, 4])
    assert.deepEqual(t.shape, [3, 4])
    assert.equal(t.dtype, 'int64')
    assertEvery(t.toArray(), (v) => Number.isInteger(v) && v >= 0 && v < 10, 'randint(0, 10) value')
    const u = torch.randint(-5, 5, [1000], { dtype: 'int32' })
    assert.equal(u.dtype, 'int32')
    assertEvery(u.toArray(), (v) => v >= -5 && v < 5, 'randint(-5, 5) value')
    assert.deepEqual(torch.randint(0, 2, 7).shape, [7])
  })

  test('manualSeed makes rand / randn / randint reproducible (same values as PyTorch)', () => {
    torch.manualSeed(42)
    const a = torch.rand([5]).toArray()
    const a2 = torch.rand([5]).toArray()
    torch.manualSeed(42)
    const b = torch.rand([5]).toArray()
    assert.deepEqual(a, b)
    assert.notDeepEqual(a, a2)
    // torch.manual_seed(42); torch.rand(5).tolist()
    assert.deepEqual(
      a,
      [0.8822692632675171, 0.9150039553642273, 0.38286375999450684, 0.9593056440353394, 0.3904482126235962],
    )
    // torch.manual_seed(0); torch.randn(3).tolist()
    torch.manualSeed(0)
    assert.deepEqual(torch.randn([3]).toArray(), [1.5409960746765137, -0.293428897857666, -2.1787893772125244])
    // torch.manual_seed(7); torch.randint(0, 10, (5,)).tolist()
    torch.manualSeed(7)
    assert.deepEqual(torch.randint(0, 10, [5]).toArray(), [5, 2, 1, 6, 3])
  })

  test('arange: int64 for integer bounds, float32 otherwise', () => {
    const a = torch.arange(5)
    assert.equal(a.dtype, 'int64')
    assert.deepEqual(a.toArray(), [0, 1, 2, 3, 4])
    assert.deepEqual(torch.arange(2, 8).toArray(), [2, 3, 4, 5, 6, 7])
    assert.deepEqual(torch.arange(2, 8, 2).toArray(), [2, 4, 6])
    assert.deepEqual(torch.arange(5, 0, -1).toArray(), [5, 4, 3, 2, 1])
    const f = torch.arange(0, 1, 0.25)
    assert.equal(f.dtype, 'float32')
    assert.deepEqual(f.toArray(), [0, 0.25, 0.5, 0.75])
    assert.equal(torch.arange(0, 5, 0.5).dtype, 'float32')
    assert.deepEqual(torch.arange(0, 5, 0.5).shape, [10])
    assert.equal(torch.arange(0.5, 3).dtype, 'float32')
    assert.equal(torch.arange(0, 5, 1, { dtype: 'float64' }).dtype, 'float64')
    assert.deepEqual(torch.arange(0).shape, [0])
  })

  test('linspace: float32, both ends included', () => {
    const t = torch.linspace(0, 1, 5)
    assert.equal(t.dtype, 'float32')
    assert.deepEqual(t.toArray(), [0, 0.25, 0.5, 0.75, 1])
    assert.deepEqual(torch.linspace(-1, 1, 3).toArray(), [-1, 0, 1])
    assert.deepEqual(torch.linspace(0, 1, 1).toArray(), [0])
    assert.equal(torch.linspace(0, 1, 4, { dtype: 'float64' }).dtype, 'float64')
  })

  test('eye', () => {
    const t = torch.eye(3)
    assert.equal(t.dtype, 'float32')
    assert.deepEqual(t.toArray(), [
      [1, 0, 0],
      [0, 1, 0],
      [0, 0, 1],
    ])
    assert.deepEqual(torch.eye(2, 3).toArray(), [
      [1, 0, 0],
      [0, 1, 0],
    ])
    assert.deepEqual(torch.eye(3, 2).shape, [3, 2])
    assert.equal(torch.eye(2, 2, { dtype: 'int64' }).dtype, 'int64')
  })
})

describe('tensor(): data in', () => {
  test('nested arrays of numbers -> float32', () => {
    const t = torch.tensor([
      [1, 2, 3],
      [4, 5, 6],
    ])
    assert.equal(t.dtype, 'float32')
    assert.deepEqual(t.shape, [2, 3])
    assert.deepEqual(t.toArray(), [
      [1, 2, 3],
      [4, 5, 6],
    ])
    assert.deepEqual(torch.tensor([1.5, -2]).toArray(), [1.5, -2])
  })

  test('nested arrays of booleans -> bool', () => {
    const t = torch.tensor([
      [true, false],
      [false, true],
    ])
    assert.equal(t.dtype, 'bool')
    assert.deepEqual(t.toArray(), [
      [true, false],
      [false, true],
    ])
  })

  test('nested arrays of BigInts -> int64 (exact beyond 2^53)', () => {
    const t = torch.tensor([
      [1n, 2n],
      [3n, -4n],
    ])
    assert.equal(t.dtype, 'int64')
    assert.deepEqual(t.toArray(), [
      [1, 2],
      [3, -4],
    ])
    const big = 2n ** 60n + 1n
    assert.deepEqual(Array.from(torch.tensor([big, -big]).toTypedArray()), [big, -big])
  })

  test('an empty array -> shape [0], float32', () => {
    const t = torch.tensor([])
    assert.deepEqual(t.shape, [0])
    assert.equal(t.dtype, 'float32')
  })

  test('a ragged nested array throws', () => {
    assert.throws(() => torch.tensor([[1, 2], [3]]), { code: 'InvalidArg' })
  })

  test('a scalar -> 0-dim tensor', () => {
    const f = torch.tensor(3.5)
    assert.deepEqual(f.shape, [])
    assert.equal(f.ndim, 0)
    assert.equal(f.numel(), 1)
    assert.equal(f.dtype, 'float32')
    assert.equal(f.item(), 3.5)
    const b = torch.tensor(true)
    assert.equal(b.dtype, 'bool')
    assert.equal(b.item(), true)
    const i = torch.tensor(5n)
    assert.equal(i.dtype, 'int64')
    assert.equal(i.item(), 5)
  })

  test('TypedArrays keep their dtype', () => {
    const cases = [
      [Float32Array, 'float32'],
      [Float64Array, 'float64'],
      [Int8Array, 'int8'],
      [Uint8Array, 'uint8'],
      [Int16Array, 'int16'],
      [Int32Array, 'int32'],
      [BigInt64Array, 'int64'],
    ]
    for (const [Class, dtype] of cases) {
      const src = Class === BigInt64Array ? BigInt64Array.from([1n, 2n, 3n]) : Class.from([1, 2, 3])
      const t = torch.tensor(src)
      assert.equal(t.dtype, dtype, Class.name)
      assert.deepEqual(t.shape, [3], Class.name)
      assert.deepEqual(t.toArray(), [1, 2, 3], Class.name)
      const back = t.toTypedArray()
      assert.ok(back instanceof Class, `${Class.name} round trip gave ${back.constructor.name}`)
      assert.deepEqual(Array.from(back), Array.from(src), Class.name)
    }
  })

  test('a TypedArray is copied', () => {
    const src = new Float32Array([1, 2])
    const t = torch.tensor(src)
    src[0] = 99
    assert.deepEqual(t.toArray(), [1, 2])
  })

  test('a flat TypedArray with {shape}', () => {
    const t = torch.tensor(new Int32Array([1, 2, 3, 4, 5, 6]), { shape: [2, 3] })
    assert.deepEqual(t.shape, [2, 3])
    assert.deepEqual(t.toArray(), [
      [1, 2, 3],
      [4, 5, 6],
    ])
    assert.deepEqual(torch.tensor(new Float32Array([]), { shape: [0, 3] }).shape, [0, 3])
    assert.deepEqual(torch.tensor(new Float32Array([7]), { shape: [] }).shape, [])
    assert.throws(() => torch.tensor(new Float32Array(6), { shape: [4, 2] }), { code: 'ShapeMismatch' })
  })

  test('a TypedArray subarray reads only its own elements', () => {
    const t = torch.tensor(new Float32Array([1, 2, 3, 4]).subarray(1, 3))
    assert.deepEqual(t.toArray(), [2, 3])
  })

  test('a TypedArray with {dtype} converts', () => {
    const t = torch.tensor(new Float32Array([1.5, -2.5]), { dtype: 'float64' })
    assert.equal(t.dtype, 'float64')
    assert.deepEqual(t.toArray(), [1.5, -2.5])
    assert.deepEqual(torch.tensor(new Uint8Array([1, 0, 2]), { dtype: 'bool' }).toArray(), [true, false, true])
  })

  test('Uint16Array needs dtype float16/bfloat16 and is read as raw bits', () => {
    assert.equal(torch.tensor(new Uint16Array([0x3c00]), { dtype: 'float16' }).item(), 1)
    assert.deepEqual(
      torch.tensor(new Uint16Array([0x3c00, 0xc000, 0x3800]), { dtype: 'float16' }).toArray(),
      [1, -2, 0.5],
    )
    assert.equal(torch.tensor(new Uint16Array([0x3f80]), { dtype: 'bfloat16' }).item(), 1)
    assert.deepEqual(
      torch.tensor(new Uint16Array([0x3f80, 0xc000, 0x4380]), { dtype: 'bfloat16' }).toArray(),
      [1, -2, 256],
    )
    assert.throws(() => torch.tensor(new Uint16Array([1])), { code: 'InvalidArg' })
    assert.throws(() => torch.tensor(new Uint16Array([1]), { dtype: 'int32' }), { code: 'InvalidArg' })
  })

  test('another Tensor -> a copy', () => {
    const a = torch.tensor([
      [1, 2],
      [3, 4],
    ])
    const b = torch.tensor(a)
    assert.notEqual(b, a)
    assert.deepEqual(b.shape, a.shape)
    assert.equal(b.dtype, a.dtype)
    assert.deepEqual(b.toArray(), a.toArray())
    a.dispose()
    assert.equal(b.isDisposed, false)
    assert.deepEqual(b.toArray(), [
      [1, 2],
      [3, 4],
    ])
    const c = torch.tensor(b, { dtype: 'int32' })
    assert.equal(c.dtype, 'int32')
    assert.deepEqual(c.toArray(), [
      [1, 2],
      [3, 4],
    ])
  })

  // Numbers are float64 in JS and must not pass through float32 on the way to a wider dtype:
  // torch.tensor([0.1], dtype=torch.float64).item() == 0.1 in Python, and so on.
  test('numbers with dtype float64 convert exactly, as in PyTorch', () => {
    assert.equal(torch.tensor([0.1], { dtype: 'float64' }).item(), 0.1)
    assert.equal(torch.tensor(0.1, { dtype: 'float64' }).item(), 0.1)
    assert.deepEqual(torch.tensor([[1 / 3]], { dtype: 'float64' }).toArray(), [[1 / 3]])
  })

  test('numbers with dtype int32 convert exactly, as in PyTorch', () => {
    assert.equal(torch.tensor([16777217], { dtype: 'int32' }).item(), 16777217)
    assert.deepEqual(
      Array.from(torch.tensor([-2147483648, 2147483647], { dtype: 'int32' }).toTypedArray()),
      [-2147483648, 2147483647],
    )
  })

  test('numbers with dtype int64 convert exactly, as in PyTorch', () => {
    assert.deepEqual(Array.from(torch.tensor([2 ** 53 - 1, -(2 ** 53 - 1)], { dtype: 'int64' }).toTypedArray()), [
      2n ** 53n - 1n,
      -(2n ** 53n - 1n),
    ])
    assert.deepEqual(Array.from(torch.tensor(16777217, { dtype: 'int64' }).toTypedArray()), [16777217n])
  })
})

describe('data out: every dtype', () => {
  // [dtype, nested data, TypedArray class, expected flat TypedArray contents, expected toArray()]
  const F16 = { one: 0x3c00, half: 0x3800, minusTwo: 0xc000, max: 0x7bff }
  const BF16 = { one: 0x3f80, half: 0x3f00, minusTwo: 0xc000, n256: 0x4380 }
  const cases = [
    [
      'float32',
      [
        [1.5, -2],
        [0.25, 3],
      ],
      Float32Array,
      [1.5, -2, 0.25, 3],
      [
        [1.5, -2],
        [0.25, 3],
      ],
    ],
    [
      'float64',
      [
        [1.5, -2],
        [0.25, 3],
      ],
      Float64Array,
      [1.5, -2, 0.25, 3],
      [
        [1.5, -2],
        [0.25, 3],
      ],
    ],
    [
      'float16',
      [
        [1, 0.5],
        [-2, 65504],
      ],
      Uint16Array,
      [F16.one, F16.half, F16.minusTwo, F16.max],
      [
        [1, 0.5],
        [-2, 65504],
      ],
    ],
    [
      'bfloat16',
      [
        [1, 0.5],
        [-2, 256],
      ],
      Uint16Array,
      [BF16.one, BF16.half, BF16.minusTwo, BF16.n256],
      [
        [1, 0.5],
        [-2, 256],
      ],
    ],
    [
      'int8',
      [
        [-128, -1],
        [0, 127],
      ],
      Int8Array,
      [-128, -1, 0, 127],
      [
        [-128, -1],
        [0, 127],
      ],
    ],
    [
      'uint8',
      [
        [0, 1],
        [128, 255],
      ],
      Uint8Array,
      [0, 1, 128, 255],
      [
        [0, 1],
        [128, 255],
      ],
    ],
    [
      'int16',
      [
        [-32768, -1],
        [0, 32767],
      ],
      Int16Array,
      [-32768, -1, 0, 32767],
      [
        [-32768, -1],
        [0, 32767],
      ],
    ],
    [
      'int32',
      [
        [-65536, -1],
        [0, 65536],
      ],
      Int32Array,
      [-65536, -1, 0, 65536],
      [
        [-65536, -1],
        [0, 65536],
      ],
    ],
    [
      'int64',
      [
        [1, -2],
        [300, 4096],
      ],
      BigInt64Array,
      [1n, -2n, 300n, 4096n],
      [
        [1, -2],
        [300, 4096],
      ],
    ],
    [
      'bool',
      [
        [true, false],
        [false, true],
      ],
      Uint8Array,
      [1, 0, 0, 1],
      [
        [true, false],
        [false, true],
      ],
    ],
  ]

  for (const [dtype, data, Class, flat, nested] of cases) {
    test(`${dtype}: toTypedArray() is a ${Class.name}, toArray() nests`, () => {
      const t = torch.tensor(data, { dtype })
      assert.equal(t.dtype, dtype)
      assert.deepEqual(t.shape, [2, 2])
      const typed = t.toTypedArray()
      assert.ok(typed instanceof Class, `${dtype}: got ${typed.constructor.name}, expected ${Class.name}`)
      assert.deepEqual(Array.from(typed), flat)
      assert.deepEqual(t.toArray(), nested)
      // and back again from the TypedArray
      const again = torch.tensor(typed, { dtype, shape: [2, 2] })
      assert.equal(again.dtype, dtype)
      assert.deepEqual(again.toArray(), nested)
    })
  }

  test('toArray() of a 0-dim tensor is a plain value', () => {
    assert.equal(torch.tensor(2.5).toArray(), 2.5)
    assert.equal(torch.tensor(true).toArray(), true)
  })

  test('float16/bfloat16 bits round-trip through Uint16Array', () => {
    const bits = new Uint16Array([0x3c00, 0x3555, 0xfbff])
    assert.deepEqual(Array.from(torch.tensor(bits, { dtype: 'float16' }).toTypedArray()), Array.from(bits))
    assert.deepEqual(Array.from(torch.tensor(bits, { dtype: 'bfloat16' }).toTypedArray()), Array.from(bits))
  })
})

describe('properties', () => {
  test('shape, dtype, device, ndim, requiresGrad, numel()', () => {
    const t = torch.zeros([2, 3, 4])
    assert.deepEqual(t.shape, [2, 3, 4])
    assert.equal(t.dtype, 'float32')
    assert.equal(t.device, 'cpu')
    assert.equal(t.ndim, 3)
    assert.equal(t.requiresGrad, false)
    assert.equal(t.numel(), 24)
    assert.equal(torch.zeros([2, 0]).numel(), 0)
    assert.equal(torch.tensor(1).numel(), 1)
    assert.equal(torch.tensor(1).ndim, 0)
  })

  test('item()', () => {
    assert.equal(torch.tensor(2.5).item(), 2.5)
    assert.equal(torch.ones([1, 1]).item(), 1)
    assert.equal(torch.tensor([7], { dtype: 'int32' }).item(), 7)
    assert.equal(torch.tensor(false).item(), false)
    assert.ok(Number.isNaN(torch.tensor(NaN).item()))
    assert.throws(() => torch.ones([2]).item(), { code: 'ShapeMismatch' })
  })
})

describe('conversion', () => {
  test("to('float64'), to({dtype}), to('cpu'), cpu()", () => {
    const t = torch.tensor([1.5, -2.5])
    const d = t.to('float64')
    assert.equal(d.dtype, 'float64')
    assert.deepEqual(d.toArray(), [1.5, -2.5])
    const i = t.to({ dtype: 'int32' })
    assert.equal(i.dtype, 'int32')
    assert.deepEqual(i.toArray(), [1, -2])
    assert.equal(t.to('cpu').device, 'cpu')
    assert.deepEqual(t.to('cpu').toArray(), [1.5, -2.5])
    assert.equal(t.cpu().device, 'cpu')
    assert.deepEqual(t.cpu().toArray(), [1.5, -2.5])
    assert.equal(t.to('bool').dtype, 'bool')
    assert.equal(t.dtype, 'float32', 'to() does not change the original')
  })

  test('to() with an unknown name throws', () => {
    assert.throws(() => torch.ones([2]).to('float33'), { code: 'InvalidArg' })
  })
})

describe('ops', () => {
  test('softmax matches a hand-computed softmax and sums to 1 along dim', () => {
    const x = [1, 2, 3]
    const e = x.map(Math.exp)
    const sum = e.reduce((a, b) => a + b)
    const expected = e.map((v) => v / sum)
    const s = torch.tensor(x).softmax(0)
    assert.equal(s.dtype, 'float32')
    assertClose(s.toArray(), expected, 1e-6, 'softmax([1, 2, 3])')

    const m = torch.tensor([
      [1, 2, 3],
      [0, 0, 0],
      [-1, 5, 2],
    ])
    for (const row of m.softmax(1).toArray()) assertClose([row.reduce((a, b) => a + b)], [1], 1e-6, 'row sum')
    for (const row of m.softmax(-1).toArray()) assertClose([row.reduce((a, b) => a + b)], [1], 1e-6, 'row sum')
    const cols = m.softmax(0).toArray()
    for (let j = 0; j < 3; j++) assertClose([cols[0][j] + cols[1][j] + cols[2][j]], [1], 1e-6, 'column sum')
    assertClose(m.softmax(1).toArray()[0], expected, 1e-6, 'row 0')
  })

  test('logSoftmax is log(softmax)', () => {
    const x = [1, 2, 3]
    const lse = Math.log(x.map(Math.exp).reduce((a, b) => a + b))
    const ls = torch.tensor(x).logSoftmax(0)
    assert.equal(ls.dtype, 'float32')
    assertClose(
      ls.toArray(),
      x.map((v) => v - lse),
      1e-6,
      'logSoftmax([1, 2, 3])',
    )
    assertClose(
      torch
        .tensor([[1, 2, 3]])
        .logSoftmax(-1)
        .toArray()[0],
      x.map((v) => v - lse),
      1e-6,
      'dim -1',
    )
  })

  test('argmax: flattened, along a dim, keepdim', () => {
    const t = torch.tensor([
      [1, 5, 3],
      [9, 2, 4],
    ])
    const flat = t.argmax()
    assert.deepEqual(flat.shape, [])
    assert.equal(flat.dtype, 'int64')
    assert.equal(flat.item(), 3)
    assert.deepEqual(t.argmax(1).toArray(), [1, 0])
    assert.deepEqual(t.argmax(0).toArray(), [1, 0, 1])
    assert.deepEqual(t.argmax(-1).toArray(), [1, 0])
    const kept = t.argmax(1, true)
    assert.deepEqual(kept.shape, [2, 1])
    assert.deepEqual(kept.toArray(), [[1], [0]])
    assert.deepEqual(t.argmax(1, false).shape, [2])
  })

  test('topk(k, dim) matches a sort done in JS', () => {
    // distinct values, shuffled deterministically
    const rows = 4
    const cols = 9
    const values = Array.from({ length: rows * cols }, (_, i) => ((i * 17) % (rows * cols)) * 0.5 - 3)
    const nested = Array.from({ length: rows }, (_, r) => values.slice(r * cols, (r + 1) * cols))
    const t = torch.tensor(nested)
    const k = 3
    const { values: v, indices: ix } = t.topk(k, 1)
    assert.deepEqual(v.shape, [rows, k])
    assert.deepEqual(ix.shape, [rows, k])
    assert.equal(ix.dtype, 'int64')
    assert.equal(v.dtype, 'float32')
    const expectedIdx = nested.map((row) =>
      row
        .map((x, i) => i)
        .sort((a, b) => row[b] - row[a])
        .slice(0, k),
    )
    const expectedVal = nested.map((row, r) => expectedIdx[r].map((i) => row[i]))
    assert.deepEqual(ix.toArray(), expectedIdx)
    assert.deepEqual(v.toArray(), expectedVal)

    // along dim 0
    const t0 = t.topk(2, 0)
    const colsIdx = []
    for (let j = 0; j < cols; j++) {
      const col = nested.map((row) => row[j])
      colsIdx.push(
        col
          .map((x, i) => i)
          .sort((a, b) => col[b] - col[a])
          .slice(0, 2),
      )
    }
    assert.deepEqual(t0.indices.toArray(), [colsIdx.map((c) => c[0]), colsIdx.map((c) => c[1])])
  })

  test('topk(k) on a vector uses the last dim', () => {
    // torch.tensor([0.3, -1.2, 2.5, 0.9, 1.7, -0.4]).topk(3)
    const { values, indices } = torch.tensor([0.3, -1.2, 2.5, 0.9, 1.7, -0.4]).topk(3)
    assert.deepEqual(indices.toArray(), [2, 4, 3])
    assert.deepEqual(values.toArray(), [2.5, 1.7000000476837158, 0.8999999761581421])
  })
})

describe('lifetime and memory', () => {
  test('dispose() sets isDisposed, is idempotent, later use throws Disposed', () => {
    const t = torch.ones([3])
    assert.equal(t.isDisposed, false)
    t.dispose()
    assert.equal(t.isDisposed, true)
    t.dispose()
    assert.equal(t.isDisposed, true)
    assert.throws(() => t.shape, { code: 'Disposed' })
    assert.throws(() => t.toArray(), { code: 'Disposed' })
    assert.throws(() => t.numel(), { code: 'Disposed' })
  })

  test('memory(): one more tensor after creating one, one fewer after dispose', () => {
    if (typeof global.gc === 'function') global.gc()
    const before = torch.memory()
    assert.equal(typeof before.tensors, 'number')
    assert.equal(typeof before.bytes, 'number')
    const t = torch.ones([10]) // 10 float32 = 40 bytes
    const during = torch.memory()
    assert.equal(during.tensors, before.tensors + 1)
    assert.equal(during.bytes, before.bytes + 40)
    t.dispose()
    const after = torch.memory()
    assert.equal(after.tensors, before.tensors)
    assert.equal(after.bytes, before.bytes)
    t.dispose() // idempotent: no double count
    assert.deepEqual(torch.memory(), after)
  })
})

describe('runtime', () => {
  test('setNumThreads / getNumThreads', () => {
    const n = torch.getNumThreads()
    assert.ok(Number.isInteger(n) && n >= 1, `getNumThreads() = ${n}`)
    try {
      torch.setNumThreads(1)
      assert.equal(torch.getNumThreads(), 1)
    } finally {
      torch.setNumThreads(n)
    }
    assert.equal(torch.getNumThreads(), n)
  })

  test('cuda.isAvailable() is a boolean; deviceCount() is 0 without CUDA', () => {
    const available = torch.cuda.isAvailable()
    assert.equal(typeof available, 'boolean')
    const count = torch.cuda.deviceCount()
    assert.ok(Number.isInteger(count))
    if (available) assert.ok(count > 0)
    else assert.equal(count, 0)
  })

  test(
    'a CUDA tensor without CUDA throws DeviceUnavailable',
    { skip: torch.cuda.isAvailable() && 'CUDA is available' },
    () => {
      assert.throws(() => torch.ones([2], { device: 'cuda' }), { code: 'DeviceUnavailable' })
      assert.throws(() => torch.ones([2]).cuda(), { code: 'DeviceUnavailable' })
    },
  )
})

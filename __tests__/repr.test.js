'use strict'
// Tensor printing: `toString()` and `util.inspect` must match Python's `repr(tensor)` exactly.
// The expected strings come from models/golden/repr.json, written by models/make_models.py
// (`npm run models`): a JSON array of {name, shape, dtype, requires_grad, data, repr}, where
// `data` is the flat row-major contents and NaN/±Infinity are the strings "nan"/"inf"/"-inf".
const { test, describe } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const util = require('node:util')
const torch = require('..')

const GOLDEN = path.join(__dirname, '..', 'models', 'golden', 'repr.json')
const FLOAT_DTYPES = new Set(['float32', 'float64', 'float16', 'bfloat16'])

function loadGolden() {
  if (!fs.existsSync(GOLDEN)) {
    throw new Error(
      `${path.relative(process.cwd(), GOLDEN)} is missing: run \`npm run models\` ` +
        'to generate the golden files (models/make_models.py)',
    )
  }
  return JSON.parse(fs.readFileSync(GOLDEN, 'utf8'))
}

/** A JSON element as a JS number: "nan"/"inf"/"-inf" become NaN/±Infinity. */
function toNumber(v) {
  if (v === 'nan') return NaN
  if (v === 'inf') return Infinity
  if (v === '-inf') return -Infinity
  return v
}

/** Builds the tensor a golden case describes. */
function build(c) {
  const { shape, dtype } = c
  if (dtype === 'bool') {
    return torch.tensor(
      Uint8Array.from(c.data, (b) => (b ? 1 : 0)),
      { dtype: 'bool', shape },
    )
  }
  // The JSON values are the exact element values; float64 converts to every dtype exactly.
  const data = Float64Array.from(c.data, toNumber)
  if (FLOAT_DTYPES.has(dtype)) {
    return torch.tensor(data, { dtype, shape, requiresGrad: c.requires_grad })
  }
  return torch.tensor(data, { dtype, shape })
}

describe('repr golden cases (models/golden/repr.json)', () => {
  let cases
  try {
    cases = loadGolden()
  } catch (e) {
    test('golden file', () => {
      throw e
    })
    return
  }

  test('golden file has cases', () => {
    assert.ok(Array.isArray(cases) && cases.length > 0, 'repr.json should be a non-empty array')
  })

  for (const c of cases) {
    test(c.name, () => {
      const t = build(c)
      assert.deepEqual(t.shape, c.shape, 'shape')
      assert.equal(t.dtype, c.dtype, 'dtype')
      assert.equal(t.requiresGrad, c.requires_grad, 'requiresGrad')
      assert.equal(t.toString(), c.repr)
      assert.equal(util.inspect(t), c.repr)
      t.dispose()
    })
  }
})

describe('repr hand cases', () => {
  test('ones([2, 2])', () => {
    const t = torch.ones([2, 2])
    assert.equal(t.toString(), 'tensor([[1., 1.],\n        [1., 1.]])')
    assert.equal(util.inspect(t), t.toString())
  })

  test('String(t) and template literals use toString', () => {
    const t = torch.tensor([1.5, 2])
    assert.equal(String(t), 'tensor([1.5000, 2.0000])')
    assert.equal(`${t}`, 'tensor([1.5000, 2.0000])')
  })

  test('requires-grad tensor', () => {
    assert.equal(torch.ones([2], true).toString(), 'tensor([1., 1.], requires_grad=True)')
    assert.equal(
      torch.tensor([1, 2.5], { requiresGrad: true }).toString(),
      'tensor([1.0000, 2.5000], requires_grad=True)',
    )
    assert.equal(
      torch.zeros([2], { dtype: 'float64', requiresGrad: true }).toString(),
      'tensor([0., 0.], dtype=torch.float64, requires_grad=True)',
    )
  })

  test('non-default dtypes are named', () => {
    assert.equal(torch.ones([2], { dtype: 'int32' }).toString(), 'tensor([1, 1], dtype=torch.int32)')
    assert.equal(torch.ones([2], { dtype: 'int64' }).toString(), 'tensor([1, 1])')
    assert.equal(torch.full([2], true).toString(), 'tensor([True, True])')
    assert.equal(torch.tensor(7, { dtype: 'float16' }).toString(), 'tensor(7., dtype=torch.float16)')
  })

  test('util.inspect inside an object and an array (console.log)', () => {
    const t = torch.tensor([
      [1, 2],
      [3, 4],
    ])
    assert.equal(util.inspect({ x: torch.tensor([1, 2]) }), '{ x: tensor([1., 2.]) }')
    assert.equal(util.inspect([torch.tensor(3)]), '[ tensor(3.) ]')
    // Multi-line reprs are embedded as they are.
    assert.ok(util.inspect({ t }).includes('tensor([[1., 2.],\n'))
    assert.equal(util.format('%o', torch.tensor(1)).includes('tensor(1.)'), true)
  })

  test('a disposed tensor prints as tensor(<disposed>) instead of throwing', () => {
    const t = torch.ones([1])
    t.dispose()
    assert.equal(t.toString(), 'tensor(<disposed>)')
    assert.equal(util.inspect(t), 'tensor(<disposed>)')
  })
})

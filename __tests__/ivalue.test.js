'use strict'
// IValue round trips through the TorchScript fixtures, checked against models/fixtures/golden.json
// (written by models/make_models.py, which also declares every method's signature).
const { describe, test } = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const torch = require('..')

// ---------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------

const fixture = (name) => path.join(__dirname, '..', 'models', 'fixtures', name)
const golden = require(fixture('golden.json'))

const isTensorJson = (v) =>
  v !== null && typeof v === 'object' && !Array.isArray(v) && 'shape' in v && 'dtype' in v && 'data' in v

/** Nests a flat row-major array into `shape` (a scalar for shape []). */
function nest(data, shape) {
  if (shape.length === 0) return data[0]
  const [n, ...rest] = shape
  const step = rest.reduce((a, b) => a * b, 1)
  return Array.from({ length: n }, (_, i) => nest(data.slice(i * step, (i + 1) * step), rest))
}

/** A Tensor from golden JSON `{shape, dtype, data}`. */
const fromJson = ({ shape, dtype, data }) => torch.tensor(nest(data, shape), { dtype })

/** Golden JSON argument list -> JS values (tensor objects become Tensors). */
const goldenArgs = (args) => args.map((a) => (isTensorJson(a) ? fromJson(a) : a))

/** A tensor's flat values via toArray(). */
const flat = (t) => [t.toArray()].flat(Infinity)

/** A Tensor as `{tensor: {shape, dtype, data}}`, comparable with deepStrictEqual. */
function tensorPlain(t) {
  assert.ok(t instanceof torch.Tensor, `expected a Tensor, got ${typeof t}`)
  return { tensor: { shape: t.shape, dtype: t.dtype, data: flat(t) } }
}

/**
 * A value with every Tensor replaced by tensorPlain(), keeping its container kinds (Array, Map,
 * plain object); any other object is returned as is, so deepStrictEqual still sees its prototype.
 */
function plain(v) {
  if (v instanceof torch.Tensor) return tensorPlain(v)
  if (Array.isArray(v)) return v.map(plain)
  if (v instanceof Map) return new Map([...v].map(([k, x]) => [plain(k), plain(x)]))
  if (v !== null && typeof v === 'object' && Object.getPrototypeOf(v) === Object.prototype) {
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, plain(x)]))
  }
  return v
}

/** Golden JSON output -> the shape plain() gives (tensor objects become {tensor: ...}). */
function goldenPlain(v) {
  if (isTensorJson(v)) return { tensor: { shape: v.shape, dtype: v.dtype, data: v.data } }
  if (Array.isArray(v)) return v.map(goldenPlain)
  if (v !== null && typeof v === 'object') {
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, goldenPlain(x)]))
  }
  return v
}

function assertTensorEquals(actual, expectedJson) {
  assert.deepStrictEqual(tensorPlain(actual), goldenPlain(expectedJson))
}

function assertTensorClose(actual, expectedJson, tol) {
  assert.deepStrictEqual(actual.shape, expectedJson.shape)
  assert.equal(actual.dtype, expectedJson.dtype)
  const values = flat(actual)
  assert.equal(values.length, expectedJson.data.length)
  values.forEach((v, i) => {
    assert.ok(Math.abs(v - expectedJson.data[i]) <= tol, `element ${i}: ${v} vs ${expectedJson.data[i]}`)
  })
}

/**
 * The tests of one fixture, named after its file: its module loaded once, methodNames() checked
 * against the golden list, then `body(module, goldens)` adds the fixture's own tests.
 */
function describeFixture(key, body) {
  const G = golden[key]
  describe(G.file, () => {
    const m = new torch.ScriptModule(fixture(G.file))
    test('methodNames() sorted equals the golden list', () => {
      assert.deepStrictEqual([...m.methodNames()].sort(), G.methods)
    })
    body(m, G)
  })
}

// ---------------------------------------------------------------------------------------
// ivalues_scripted.pt
// ---------------------------------------------------------------------------------------

describeFixture('ivalues_scripted', (m, G) => {
  for (const name of ['forward', 'forward_negative']) {
    const { args, output } = G[name]

    test(`${name}: forwardSync equals the golden output`, () => {
      const out = m.forwardSync(...goldenArgs(args))
      assert.ok(Array.isArray(out), 'a Tuple comes back as an array')
      assert.deepStrictEqual(plain(out), goldenPlain(output))
    })

    test(`${name}: forward (async) equals the golden output`, async () => {
      const out = await m.forward(...goldenArgs(args))
      assert.deepStrictEqual(plain(out), goldenPlain(output))
    })
  }

  test('forward output: the Dict[str, Tensor] is a plain object, the Optional is null when None', () => {
    const out = m.forwardSync(...goldenArgs(G.forward_negative.args))
    assert.equal(Object.getPrototypeOf(out[7]), Object.prototype)
    assert.deepStrictEqual(Object.keys(out[7]), ['sum', 'doubled'])
    assert.equal(out[5], null)
  })

  // [method, input, expected output (defaults to the input)]
  const t23 = () =>
    torch.tensor([
      [1.5, -2, 0],
      [3, 4.25, -0.5],
    ])
  const echoes = [
    ['echo_int', 42],
    ['echo_int', 0],
    ['echo_int', -7],
    ['echo_int', Number.MAX_SAFE_INTEGER],
    ['echo_int', -Number.MAX_SAFE_INTEGER],
    ['int_only', 21, 42],
    ['echo_float', 1.5],
    ['echo_float', -0.1],
    ['echo_float', 2, 2], // an integral number where the schema says float
    ['echo_float', 1e-300],
    ['echo_float', Infinity],
    ['echo_float', NaN],
    ['half', 3, 1.5],
    ['type_of_number', 2, 'float'],
    ['echo_bool', true],
    ['echo_bool', false],
    ['echo_str', 'hello'],
    ['echo_str', ''],
    ['echo_str', 'héllo wörld ✓ 🚀'],
    ['echo_optional', null],
    ['echo_optional', 5],
    ['none_out', undefined, null],
    ['echo_tensor', t23()],
    [
      'echo_tensor',
      torch.tensor(
        [
          [1, -2],
          [3, 40],
        ],
        { dtype: 'int64' },
      ),
    ],
    ['echo_tensor', torch.tensor([true, false, true])],
    ['echo_tensor', torch.tensor([0.1, 0.2], { dtype: 'float64' })],
    ['echo_tensor', torch.tensor(7.5)],
    ['echo_list_int', [1, 2, -3]],
    ['echo_list_int', []],
    ['echo_list_float', [1.5, 2, -0.25]],
    ['echo_list_bool', [true, false, true]],
    ['echo_list_str', ['a', '', 'ü']],
    ['echo_list_tensor', [t23(), torch.ones([1], { dtype: 'int64' })]],
    ['echo_list_tensor', []],
    ['echo_tuple', [7, 'seven', t23()]],
    ['echo_dict_str_tensor', { a: t23(), b: torch.zeros([2]) }],
    ['echo_dict_str_float', { a: 1.5, b: 2, c: -0.25 }],
    [
      'echo_dict_int_str',
      new Map([
        [1, 'one'],
        [-2, 'minus two'],
        [0, ''],
      ]),
    ],
    [
      'echo_dict_int_str',
      { 1: 'one', 22: 'twenty-two' },
      new Map([
        [1, 'one'],
        [22, 'twenty-two'],
      ]),
    ],
    [
      'echo_nested',
      {
        a: [
          [1, null],
          [2, torch.ones([2])],
        ],
        b: [],
      },
    ],
    ['sum_list', [torch.ones([2]), torch.ones([2])], torch.full([2], 2)],
  ]

  const label = (v) => {
    if (v instanceof torch.Tensor) return `Tensor${JSON.stringify(v.shape)} ${v.dtype}`
    if (v instanceof Map) return `Map(${v.size})`
    if (typeof v === 'number' || v === undefined) return String(v)
    try {
      const s = JSON.stringify(v, (_, x) => (x instanceof torch.Tensor ? `Tensor${JSON.stringify(x.shape)}` : x))
      return s.length > 60 ? `${s.slice(0, 57)}...` : s
    } catch {
      return typeof v
    }
  }
  const argsOf = (input) => (input === undefined ? [] : [input])

  describe('echo methods (runMethodSync) return their input', () => {
    for (const [method, input, ...rest] of echoes) {
      const expected = rest.length ? rest[0] : input
      test(`${method}(${label(input)})`, () => {
        const out = m.runMethodSync(method, ...argsOf(input))
        assert.deepStrictEqual(plain(out), plain(expected))
      })
    }
  })

  test('echo methods (runMethod, async) return their input', async () => {
    for (const [method, input, ...rest] of echoes) {
      const expected = rest.length ? rest[0] : input
      const out = await m.runMethod(method, ...argsOf(input))
      assert.deepStrictEqual(plain(out), plain(expected), `${method}(${label(input)})`)
    }
  })

  test('containers come back as the right kinds', () => {
    assert.ok(Array.isArray(m.runMethodSync('echo_tuple', [1, 's', torch.ones([1])])))
    const d = m.runMethodSync('echo_dict_str_float', { x: 1 })
    assert.equal(Object.getPrototypeOf(d), Object.prototype)
    assert.ok(m.runMethodSync('echo_dict_int_str', new Map([[3, 'c']])) instanceof Map)
    const nested = m.runMethodSync('echo_nested', { a: [[1, null]] })
    assert.equal(Object.getPrototypeOf(nested), Object.prototype)
    assert.deepStrictEqual(nested, { a: [[1, null]] })
  })

  test('a float argument keeps its fraction and an int result is a number', () => {
    assert.equal(m.runMethodSync('half', 5), 2.5)
    assert.equal(typeof m.runMethodSync('echo_int', 3), 'number')
    assert.equal(m.runMethodSync('echo_int', 10n), 10)
  })
})

// ---------------------------------------------------------------------------------------
// extra_method.pt
// ---------------------------------------------------------------------------------------

describeFixture('extra_method', (m, G) => {
  test('forward equals the golden output (sync and async)', async () => {
    assertTensorEquals(m.forwardSync(...goldenArgs(G.forward.args)), G.forward.output)
    assertTensorEquals(await m.forward(...goldenArgs(G.forward.args)), G.forward.output)
  })

  test('scale equals the golden output (sync and async)', async () => {
    assertTensorEquals(m.runMethodSync('scale', ...goldenArgs(G.scale.args)), G.scale.output)
    assertTensorEquals(await m.runMethod('scale', ...goldenArgs(G.scale.args)), G.scale.output)
  })

  test('add_one equals the golden output (sync and async)', async () => {
    assert.equal(m.runMethodSync('add_one', ...G.add_one.args), G.add_one.output)
    assert.equal(await m.runMethod('add_one', ...G.add_one.args), G.add_one.output)
  })

  test('namedParameters() names, shapes and values equal the golden ones, in order', () => {
    const params = m.namedParameters()
    assert.deepStrictEqual(
      Object.keys(params),
      G.named_parameters.map((p) => p.name),
    )
    for (const { name, ...json } of G.named_parameters) {
      assertTensorEquals(params[name], json)
    }
  })

  test('parameters() and numParameters()', () => {
    const params = m.parameters()
    assert.equal(params.length, G.named_parameters.length)
    params.forEach((p, i) => assertTensorEquals(p, G.named_parameters[i]))
    const total = G.named_parameters.reduce((n, p) => n + p.data.length, 0)
    assert.equal(total, 9)
    assert.equal(m.numParameters(), total)
  })
})

// ---------------------------------------------------------------------------------------
// mlp_traced.pt
// ---------------------------------------------------------------------------------------

describeFixture('mlp_traced', (m, G) => {
  test('forward equals the golden output within 1e-6 (sync and async)', async () => {
    const x = fromJson(G.input)
    assertTensorClose(m.forwardSync(x), G.output, 1e-6)
    assertTensorClose(await m.forward(x), G.output, 1e-6)
  })
})

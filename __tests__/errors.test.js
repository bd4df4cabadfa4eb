'use strict'
// Bad inputs: every one must surface as a JS Error with a documented `code` and a one-line
// message that says what went wrong. One table row = one test.
const { describe, test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const crypto = require('node:crypto')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const torch = require('..')

// ---------------------------------------------------------------------------------------
// Helpers and fixtures
// ---------------------------------------------------------------------------------------

const fixture = (name) => path.join(__dirname, '..', 'models', 'fixtures', name)
const MLP = fixture('mlp_traced.pt') // forward(input: Tensor[N, 4] float32) -> Tensor[N, 3]
const IVALUES = fixture('ivalues_scripted.pt')
const HAS_CUDA = torch.cuda.isAvailable()
const NO_CUDA_ONLY = HAS_CUDA && 'CUDA is available here; these rows test its absence'

const mlpBytes = fs.readFileSync(MLP)
const truncatedBytes = mlpBytes.subarray(0, Math.floor(mlpBytes.length / 2))
const tmpDir = fs.mkdtempSync(path.join(os.tmpdir(), 'torch-node-errors-'))
const MISSING = path.join(tmpDir, 'does-not-exist.pt')
const GARBAGE = path.join(tmpDir, 'garbage.pt')
const TRUNCATED = path.join(tmpDir, 'truncated.pt')
const garbageBytes = crypto.randomBytes(512)
garbageBytes[0] = 0 // never the ZIP magic 'PK' by chance
fs.writeFileSync(GARBAGE, garbageBytes)
fs.writeFileSync(TRUNCATED, truncatedBytes)

const mlp = new torch.ScriptModule(MLP)
const ivalues = new torch.ScriptModule(IVALUES)
const matrix = () => torch.ones([2, 3])

function disposedTensor() {
  const t = torch.ones([2, 4])
  t.dispose()
  return t
}

function disposedModule() {
  const m = new torch.ScriptModule(MLP)
  m.dispose()
  return m
}

/** The error `fn` throws or its promise rejects with, or undefined. */
async function errorOf(fn) {
  try {
    await fn()
  } catch (err) {
    return err
  }
  return undefined
}

/** An assert.throws / assert.rejects validator: an Error with this code and message. */
function matches(code, message) {
  return (err) => {
    assert.ok(err instanceof Error, `expected an Error, got ${String(err)}`)
    assert.equal(err.code, code, `code (message: ${err.message})`)
    assert.match(err.message, message)
    return true
  }
}

after(() => fs.rmSync(tmpDir, { recursive: true, force: true }))

// ---------------------------------------------------------------------------------------
// The table. `async: true` rows call a promise-returning API and must reject (not throw).
// ---------------------------------------------------------------------------------------

const loading = [
  {
    name: 'missing model file',
    fn: () => new torch.ScriptModule(MISSING),
    code: 'ModelLoadError',
    message: /does-not-exist\.pt.*no such file/i,
  },
  {
    name: 'a directory as model path',
    fn: () => new torch.ScriptModule(tmpDir),
    code: 'ModelLoadError',
    message: /directory/,
  },
  {
    name: 'garbage file (random bytes)',
    fn: () => new torch.ScriptModule(GARBAGE),
    code: 'ModelLoadError',
    message: /garbage\.pt/,
  },
  {
    name: 'truncated model file',
    fn: () => new torch.ScriptModule(TRUNCATED),
    code: 'ModelLoadError',
    message: /truncated\.pt/,
  },
  {
    name: 'truncated model as a Buffer',
    fn: () => new torch.ScriptModule(truncatedBytes),
    code: 'ModelLoadError',
    message: new RegExp(`buffer of ${truncatedBytes.length} bytes`),
  },
  {
    name: 'an empty Buffer',
    fn: () => new torch.ScriptModule(Buffer.alloc(0)),
    code: 'ModelLoadError',
    message: /empty/,
  },
  { name: 'a number as source', fn: () => new torch.ScriptModule(42), code: 'InvalidArg', message: /source.*number/ },
  {
    name: 'async load of a missing file',
    async: true,
    fn: () => torch.ScriptModule.load(MISSING),
    code: 'ModelLoadError',
    message: /does-not-exist\.pt.*no such file/i,
  },
  {
    name: 'async load of a number',
    async: true,
    fn: () => torch.ScriptModule.load(42),
    code: 'InvalidArg',
    message: /source.*number/,
  },
]

const calling = [
  {
    name: 'wrong input shape to the MLP',
    fn: () => mlp.forwardSync(torch.ones([2, 5])),
    code: 'ShapeMismatch',
    message: /2x5/,
  },
  {
    name: 'wrong input shape to the MLP (async)',
    async: true,
    fn: () => mlp.forward(torch.ones([2, 5])),
    code: 'ShapeMismatch',
    message: /2x5/,
  },
  {
    name: 'int64 input to the float32 MLP',
    fn: () => mlp.forwardSync(torch.ones([2, 4], { dtype: 'int64' })),
    code: 'DTypeMismatch',
    message: /Long.*Float|Float.*Long|int64/,
  },
  {
    name: 'int64 input where mean() needs a float',
    fn: () => ivalues.forwardSync(torch.ones([2, 2], { dtype: 'int64' }), 1),
    code: 'DTypeMismatch',
    message: /mean/,
  },
  {
    name: 'mismatched shapes inside a scripted method',
    fn: () => ivalues.runMethodSync('sum_list', [torch.ones([2]), torch.ones([3])]),
    code: 'ShapeMismatch',
    message: /sum_list.*size/,
  },
  {
    name: 'forward with 0 arguments',
    fn: () => mlp.forwardSync(),
    code: 'InvalidArg',
    message: /missing argument 'input'/,
  },
  {
    name: 'forward with 2 arguments',
    fn: () => mlp.forwardSync(torch.ones([2, 4]), torch.ones([2, 4])),
    code: 'InvalidArg',
    message: /takes 1 argument.*got 2/,
  },
  {
    name: 'unknown method (runMethodSync)',
    fn: () => ivalues.runMethodSync('no_such_method', 1),
    code: 'MethodNotFound',
    message: /no_such_method/,
  },
  {
    name: 'unknown method (runMethod)',
    async: true,
    fn: () => ivalues.runMethod('no_such_method', 1),
    code: 'MethodNotFound',
    message: /no_such_method/,
  },
  {
    name: 'a number as method name',
    fn: () => ivalues.runMethodSync(5),
    code: 'InvalidArg',
    message: /name|method|string/i,
  },
  {
    name: 'a float where an int is declared',
    fn: () => ivalues.runMethodSync('echo_int', 2.5),
    code: 'InvalidArg',
    message: /'x'.*echo_int.*int.*2\.5/,
  },
  {
    name: 'a string where a Tensor is declared',
    fn: () => mlp.forwardSync('not a tensor'),
    code: 'InvalidArg',
    message: /'input'.*Tensor.*string/,
  },
  {
    name: 'a number where a bool is declared',
    fn: () => ivalues.runMethodSync('echo_bool', 1),
    code: 'InvalidArg',
    message: /'x'.*bool/,
  },
  {
    name: 'a string inside List[int]',
    fn: () => ivalues.runMethodSync('echo_list_int', [1, 'a']),
    code: 'InvalidArg',
    message: /'x'.*\[1\].*int/,
  },
  {
    name: 'a short Tuple[int, str, Tensor]',
    fn: () => ivalues.runMethodSync('echo_tuple', [1, 's']),
    code: 'InvalidArg',
    message: /'x'.*length 3.*length 2/,
  },
  {
    name: 'a BigInt out of int64 range',
    fn: () => ivalues.runMethodSync('echo_int', 2n ** 70n),
    code: 'InvalidArg',
    message: /int64 range/,
  },
]

const shapesAndDims = [
  { name: 'negative dim in a shape', fn: () => torch.ones([2, -1]), code: 'InvalidArg', message: /shape\[1\].*-1/ },
  {
    name: 'fractional dim in a shape',
    fn: () => torch.ones([1.5]),
    code: 'InvalidArg',
    message: /shape\[0\].*integer.*1\.5/,
  },
  { name: 'NaN dim in a shape', fn: () => torch.ones([NaN]), code: 'InvalidArg', message: /shape\[0\].*NaN/ },
  {
    name: 'non-numeric dim in a shape',
    fn: () => torch.ones(['a']),
    code: 'InvalidArg',
    message: /shape\[0\].*string/,
  },
  { name: 'a string as shape', fn: () => torch.ones('x'), code: 'InvalidArg', message: /shape.*string/ },
  {
    name: 'softmax(5) on a 2-D tensor',
    fn: () => matrix().softmax(5),
    code: 'InvalidArg',
    message: /softmax.*5.*out of range/,
  },
  { name: 'softmax(0.5)', fn: () => matrix().softmax(0.5), code: 'InvalidArg', message: /softmax.*integer.*0\.5/ },
  {
    name: 'argmax(-3) on a 2-D tensor',
    fn: () => matrix().argmax(-3),
    code: 'InvalidArg',
    message: /argmax.*-3.*out of range/,
  },
  { name: 'topk(k) with k > size', fn: () => matrix().topk(10), code: 'InvalidArg', message: /topk.*10/ },
  { name: 'ragged nested array', fn: () => torch.tensor([[1, 2], [3]]), code: 'InvalidArg', message: /ragged/ },
  {
    name: 'item() on a multi-element tensor',
    fn: () => matrix().item(),
    code: 'ShapeMismatch',
    message: /item.*6 elements/,
  },
  { name: 'randint(5, 2, [3])', fn: () => torch.randint(5, 2, [3]), code: 'InvalidArg', message: /randint.*5.*2/ },
]

const dtypesAndDevices = [
  { name: 'unknown dtype', fn: () => torch.ones([1], { dtype: 'float128' }), code: 'InvalidArg', message: /float128/ },
  {
    name: 'requiresGrad on an int64 tensor',
    fn: () => torch.ones([2], { dtype: 'int64', requiresGrad: true }),
    code: 'DTypeMismatch',
    message: /requiresGrad.*int64/,
  },
  { name: 'unknown device', fn: () => torch.ones([1], { device: 'tpu' }), code: 'InvalidArg', message: /tpu/ },
  { name: 'to() an unknown device', fn: () => matrix().to('tpu'), code: 'InvalidArg', message: /tpu/ },
  {
    name: 'ones() on CUDA',
    fn: () => torch.ones([1], { device: 'cuda' }),
    skip: NO_CUDA_ONLY,
    code: 'DeviceUnavailable',
    message: /CUDA/,
  },
  { name: 'tensor.cuda()', fn: () => matrix().cuda(), skip: NO_CUDA_ONLY, code: 'DeviceUnavailable', message: /CUDA/ },
  {
    name: "tensor.to('cuda:1')",
    fn: () => matrix().to('cuda:1'),
    skip: NO_CUDA_ONLY,
    code: 'DeviceUnavailable',
    message: /CUDA/,
  },
  {
    name: 'new ScriptModule on CUDA',
    fn: () => new torch.ScriptModule(MLP, { device: 'cuda' }),
    skip: NO_CUDA_ONLY,
    code: 'DeviceUnavailable',
    message: /CUDA/,
  },
  {
    name: 'ScriptModule.load on CUDA',
    async: true,
    fn: () => torch.ScriptModule.load(MLP, { device: 'cuda' }),
    skip: NO_CUDA_ONLY,
    code: 'DeviceUnavailable',
    message: /CUDA/,
  },
]

const lifetimes = [
  { name: 'shape of a disposed tensor', fn: () => disposedTensor().shape, code: 'Disposed', message: /disposed/ },
  { name: 'numel() of a disposed tensor', fn: () => disposedTensor().numel(), code: 'Disposed', message: /disposed/ },
  {
    name: 'a disposed tensor passed to forward',
    fn: () => mlp.forwardSync(disposedTensor()),
    code: 'Disposed',
    message: /input 0.*disposed/,
  },
  {
    name: 'forwardSync on a disposed module',
    fn: () => disposedModule().forwardSync(torch.ones([2, 4])),
    code: 'Disposed',
    message: /ScriptModule.*disposed/,
  },
  {
    name: 'methodNames on a disposed module',
    fn: () => disposedModule().methodNames(),
    code: 'Disposed',
    message: /ScriptModule.*disposed/,
  },
  {
    name: 'async forward on a disposed module',
    async: true,
    fn: () => disposedModule().forward(torch.ones([2, 4])),
    code: 'Disposed',
    message: /ScriptModule.*disposed/,
  },
  {
    name: 'Tensor method on a plain object',
    fn: () => torch.Tensor.prototype.numel.call({}),
    code: 'InvalidArg',
    message: /numel: called on an object; call it on a Tensor/,
  },
  {
    name: 'ScriptModule method on a Tensor',
    fn: () => torch.ScriptModule.prototype.forwardSync.call(torch.ones([1])),
    code: 'InvalidArg',
    message: /forwardSync.*Tensor/,
  },
]

const groups = { loading, calling, shapesAndDims, dtypesAndDevices, lifetimes }
const rows = Object.values(groups).flat()

// ---------------------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------------------

describe('errors', () => {
  test('the table has at least 30 rows with unique names', () => {
    assert.ok(rows.length >= 30, `${rows.length} rows`)
    assert.equal(new Set(rows.map((r) => r.name)).size, rows.length)
  })

  for (const [group, groupRows] of Object.entries(groups)) {
    describe(group, () => {
      for (const row of groupRows) {
        const opts = { skip: row.skip }
        if (row.async) {
          test(row.name, opts, () => assert.rejects(row.fn, matches(row.code, row.message)))
        } else {
          test(row.name, opts, () => assert.throws(row.fn, matches(row.code, row.message)))
        }
      }
    })
  }

  test('no message has a newline or a C++ backtrace', async () => {
    const checked = []
    for (const row of rows.filter((r) => !r.skip)) {
      const err = await errorOf(row.fn)
      assert.ok(err instanceof Error, `${row.name}: no error`)
      checked.push(row.name)
      assert.doesNotMatch(err.message, /[\r\n]/, `${row.name}: ${JSON.stringify(err.message)}`)
      assert.doesNotMatch(err.message, /Exception raised from/, row.name)
      assert.doesNotMatch(err.message, /frame #/, row.name)
      assert.ok(err.message.length > 0, row.name)
    }
    assert.ok(checked.length >= 30)
  })
})

describe('errors are thrown from JS, never from native code (src/outcome.rs)', () => {
  const native = require('../torch-node.node')
  const failures = {
    'a libtorch error': () => torch.ones([2, 3]).view(7),
    'an argument error': () => torch.ones([2], { dtype: 'float33' }),
    'a failed load': () => new torch.ScriptModule(MISSING),
    'a getter': () => torch.ones([2]).device,
  }
  for (const [what, fn] of Object.entries(failures)) {
    test(`${what}: the stack starts at the caller`, () => {
      const err = errorOfSync(fn)
      if (what === 'a getter') return assert.equal(err, null) // a getter that works
      assert.ok(err instanceof Error && typeof err.code === 'string', String(err))
      assert.match(err.stack.split('\n')[1], /errors\.test\.js/, err.stack)
    })
  }
  test('the native export returns the failure sentinel and stashes the error', () => {
    assert.equal(native.ones([2, 3], { dtype: 'float33' }), native._failed) // index.js wraps a copy
    const [code, message] = native._takeError()
    assert.equal(code, 'InvalidArg')
    assert.match(message, /float33/)
    assert.equal(native._takeError()[0], 'Internal') // taken once
  })
  test("what the caller's own getter threw comes back as is", () => {
    const mine = new RangeError('mine')
    assert.throws(
      () =>
        torch.ones([2], {
          get dtype() {
            throw mine
          },
        }),
      (e) => e === mine,
    )
  })
})

function errorOfSync(fn) {
  try {
    fn()
    return null
  } catch (e) {
    return e
  }
}

describe('dispose while a call is in flight', () => {
  let input, expected
  before(() => {
    input = torch.tensor([
      [1, 2, 3, 4],
      [-1, 0, 0.5, 2],
    ])
    expected = mlp.forwardSync(input).toArray()
  })

  test('the in-flight forward resolves; later calls throw Disposed', async () => {
    const m = new torch.ScriptModule(MLP)
    const pending = m.forward(input)
    m.dispose()
    assert.equal(m.isDisposed, true)
    assert.throws(() => m.forwardSync(input), matches('Disposed', /disposed/))
    const out = await pending
    assert.deepEqual(out.shape, [2, 3])
    assert.deepEqual(out.toArray(), expected)
  })
})

test('native messages describe a value as lib/errors.js does', () => {
  const { describe: jsDescribe } = require('../lib/errors')
  const values = [
    5,
    -0,
    2.5,
    1e21,
    1e-7,
    Infinity,
    -Infinity,
    NaN,
    'yes',
    10n,
    Symbol('s'),
    () => {},
    [],
    {},
    Object.create(null),
    torch.ones([1]),
    new torch.ScriptModule(MLP),
    new Float32Array(2),
    new Int32Array(1),
    new Uint8Array(1),
  ]
  for (const [i, v] of values.entries()) {
    // keepdim takes a boolean: every other value is refused with "got <what it is>".
    assert.throws(
      () => torch.ones([2]).sum(0, v),
      (e) => {
        assert.equal(e.code, 'InvalidArg')
        assert.equal(e.message, `sum: keepdim: expected a boolean, got ${jsDescribe(v)}`)
        return true
      },
      `value ${i}`,
    )
  }
})

test("a TorchScript argument of the wrong type is described in the same words (the schema's coercion)", () => {
  const { describe: jsDescribe } = require('../lib/errors')
  const m = new torch.ScriptModule(IVALUES)
  // (A Map is read as a Dict before the schema is checked: it reads as `an object` there.)
  for (const v of [10n, true, 2.5, [1], { a: 1 }, null, torch.ones([1])]) {
    assert.throws(() => m.runMethodSync('echo_str', v), {
      code: 'InvalidArg',
      message: `argument 'x' of echo_str(): expected str, got ${jsDescribe(v)}`,
    })
  }
})

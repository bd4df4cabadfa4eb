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
    [
      'ScriptModule',
      () => new torch.ScriptModule(MLP, { optimise: true }),
      'optimise',
      'device, maxBytes, optimize, channelsLast, dtype, warmup, example',
    ],
    ['AOTModule', () => new torch.AOTModule(MLP, { optimize: true }), 'optimize', 'device'],
  ]
  for (const [name, call, key, accepted] of cases) {
    test(`${name}: '${key}' is refused, naming the accepted keys`, () => {
      assert.throws(call, coded('InvalidArg', new RegExp(`unknown option '${key}'; accepted: ${accepted}$`)))
    })
  }

  test('ScriptModule.load rejects an unknown option', async () => {
    await assert.rejects(
      torch.ScriptModule.load(MLP, { optimise: true }),
      coded(
        'InvalidArg',
        /unknown option 'optimise'; accepted: device, maxBytes, optimize, channelsLast, dtype, warmup, example, signal/,
      ),
    )
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
    assert.deepEqual(
      torch
        .tensor(
          [
            [1, 2],
            [3, 4],
          ],
          { shape: [4] },
        )
        .toArray(),
      [1, 2, 3, 4],
    )
    assert.deepEqual(torch.tensor(Int32Array.of(1, 2, 3, 4, 5, 6), { shape: [3, 2] }).shape, [3, 2])
    assert.deepEqual(torch.tensor(torch.arange(0, 6), { shape: [2, 3] }).shape, [2, 3])
  })

  test('a count mismatch is a ShapeMismatch', () => {
    assert.throws(
      () => torch.tensor([1, 2, 3], { shape: [2, 2] }),
      coded('ShapeMismatch', /3 elements cannot be viewed as \[2, 2\]/),
    )
    assert.throws(() => torch.tensor(new Float32Array(5), { shape: [2, 2] }), coded('ShapeMismatch', /5 elements/))
  })
})

// The option bags written in JS read through one reader (lib/options.js), worded as the native
// one, and refuse unknown keys in every nested entry (issue 24).
describe('JS option bags (lib/options.js)', () => {
  const fs = require('node:fs')
  const os = require('node:os')
  const seq = [torch.ones([2]), torch.ones([1])]
  const tmp = () => fs.mkdtempSync(path.join(os.tmpdir(), 'torch-node-options-'))

  test('worded as the native reader: not an object, a wrong type, a misspelt key', () => {
    const tail = (f) => {
      try {
        f()
      } catch (e) {
        assert.equal(e.code, 'InvalidArg', e.message)
        return e.message.replace(/^.*?(options\b)/, '$1')
      }
      assert.fail('no error')
    }
    const mlp = new torch.ScriptModule(MLP)
    // Native: new ScriptModule(path, options); JS: new Batcher(module, options), padSequence.
    assert.equal(
      tail(() => new torch.Batcher(mlp, 5)),
      tail(() => new torch.ScriptModule(MLP, 5)),
    )
    assert.equal(
      tail(() => new torch.Batcher(mlp, 'x')),
      tail(() => new torch.ScriptModule(MLP, 'x')),
    )
    const same = (js, native) =>
      assert.equal(tail(js).replace(/options\.\w+/, 'options.K'), tail(native).replace(/options\.\w+/, 'options.K'))
    same(
      () => torch.padSequence(seq, { batchFirst: 'yes' }),
      () => new torch.ScriptModule(MLP, { channelsLast: 'yes' }),
    )
    const triton = (o) => () =>
      torch.oip.writeTritonRepository(tmp(), { name: 'm', model: mlp, example: torch.ones([1, 4]), ...o })
    same(triton({ maxBatchSize: -1 }), () => new torch.ScriptModule(MLP, { maxBytes: -1 }))
    same(triton({ maxBatchSize: 1.5 }), () => new torch.ScriptModule(MLP, { maxBytes: 1.5 }))
    same(triton({ maxBatchSize: 'x' }), () => new torch.ScriptModule(MLP, { maxBytes: 'x' }))
    assert.match(
      tail(() => torch.padSequence(seq, { batch_first: true })),
      /^options: unknown option 'batch_first'; accepted: batchFirst, paddingValue, paddingSide$/,
    )
  })

  test('null and undefined are an option left out, as in the native reader', async () => {
    const mlp = new torch.ScriptModule(MLP)
    assert.deepEqual(torch.padSequence(seq, null).shape, [2, 2])
    assert.deepEqual(torch.padSequence(seq, { batchFirst: null, paddingValue: undefined }).shape, [2, 2])
    const b = new torch.Batcher(mlp, null)
    assert.deepEqual((await b.run(torch.ones([1, 4]))).shape, [1, 3])
    await b.close()
    assert.equal(new torch.Batcher(mlp, { maxBatchSize: null }).stats().requests, 0)
  })

  test('unknown keys in every nested entry are InvalidArg naming the key and the accepted ones', async () => {
    const mlp = new torch.ScriptModule(MLP)
    const dir = tmp()
    const triton = (o) => () =>
      torch.oip.writeTritonRepository(dir, { name: 'm', model: mlp, example: torch.ones([1, 4]), ...o })
    const serve = (model) => () => torch.oip.router({ models: { m: { model: mlp, ...model } } })
    const cases = [
      [
        triton({ inputs: [{ name: 'x', shpae: [4] }] }),
        "writeTritonRepository: options.inputs[0]: unknown option 'shpae'; accepted: name, datatype, dims, shape",
      ],
      [
        triton({ outputs: [{ name: 'y', dims: [3], extra: 1 }] }),
        "writeTritonRepository: options.outputs[0]: unknown option 'extra'; accepted: name, datatype, dims, shape",
      ],
      [
        triton({ dynamicBatching: { maxQueueDelay: 1 } }),
        "writeTritonRepository: options.dynamicBatching: unknown option 'maxQueueDelay'; accepted: maxQueueDelayMicroseconds, preferredBatchSize",
      ],
      [
        serve({ inputs: [{ name: 'x', shape: [-1, 4], batch: true }] }),
        "oip.router: models.m.inputs[0]: unknown option 'batch'; accepted: name, datatype, shape",
      ],
      [
        serve({ inputs: [{ name: 'x', shape: [-1, 4] }], outputs: [{ name: 'y', dtype: 'FP32' }] }),
        "oip.router: models.m.outputs[0]: unknown option 'dtype'; accepted: name, datatype, shape (the protocol's metadata calls it 'datatype': 'FP32', 'INT64', ...)",
      ],
      [
        serve({ examples: [] }),
        "oip.router: models.m: unknown option 'examples'; accepted: model, inputs, outputs, version, example",
      ],
      [
        () => torch.oip.router({ models: {}, port: 1 }),
        "oip.router: options: unknown option 'port'; accepted: models, maxBodyBytes",
      ],
      [
        () => new torch.Batcher(mlp, { padValue: 0, mask: { inverted: true } }),
        "Batcher: options.mask: unknown option 'inverted'; accepted: index, dtype, invert",
      ],
      [
        () => torch.padSequence(seq, { side: 'left' }),
        "padSequence: options: unknown option 'side'; accepted: batchFirst, paddingValue, paddingSide",
      ],
    ]
    for (const [call, message] of cases) assert.throws(call, { code: 'InvalidArg', message }, message)
    const rejects = [
      [
        torch.oip.serve({ models: {}, prot: 1 }),
        "oip.serve: options: unknown option 'prot'; accepted: models, port, host, maxBodyBytes, grpcPort",
      ],
      [
        torch.RemoteModule.load('http://127.0.0.1:1', 'm', { timeout: 5 }),
        "RemoteModule.load: options: unknown option 'timeout'; accepted: protocol, binary, version, headers, timeoutMs, signal",
      ],
      [
        torch.vision.classify(mlp, torch.ones([1, 4]), { top: 1 }),
        "classify: options: unknown option 'top'; accepted: topk, labels, preprocess, signal",
      ],
    ]
    for (const [promise, message] of rejects) await assert.rejects(promise, { code: 'InvalidArg', message }, message)
  })

  test('types and ranges: what was expected, and what came', async () => {
    const mlp = new torch.ScriptModule(MLP)
    assert.throws(() => torch.oip.router({ models: {}, maxBodyBytes: 0 }), {
      code: 'InvalidArg',
      message: 'oip.router: options.maxBodyBytes: expected a positive byte count, got 0',
    })
    await assert.rejects(torch.oip.serve({ models: {}, grpcPort: 70000 }), {
      code: 'InvalidArg',
      message: 'oip.serve: options.grpcPort: expected a port number (0: any free one), got 70000',
    })
    await assert.rejects(torch.oip.serve({ models: {}, host: 5 }), {
      code: 'InvalidArg',
      message: 'oip.serve: options.host: expected a string, got number 5',
    })
    await assert.rejects(torch.oip.serve({}), {
      code: 'InvalidArg',
      message: 'oip.serve: options.models: expected {name: model}, got undefined',
    })
    await assert.rejects(torch.RemoteModule.load('http://127.0.0.1:1', 'm', { protocol: 'smtp' }), {
      code: 'InvalidArg',
      message: `RemoteModule.load: options.protocol: expected 'http' or 'grpc', got "smtp"`,
    })
    await assert.rejects(torch.RemoteModule.load('http://127.0.0.1:1', 'm', { binary: 1 }), {
      code: 'InvalidArg',
      message: 'RemoteModule.load: options.binary: expected a boolean, got number 1',
    })
    await assert.rejects(torch.RemoteModule.load('http://127.0.0.1:1', 'm', { timeoutMs: 0 }), {
      code: 'InvalidArg',
      message: 'RemoteModule.load: options.timeoutMs: expected a positive number of milliseconds, got 0',
    })
    await assert.rejects(torch.RemoteModule.load('http://127.0.0.1:1', 'm', { headers: { a: {} } }), {
      code: 'InvalidArg',
      message: /options\.headers: expected an object of header values/,
    })
    const dir = tmp()
    assert.throws(
      () =>
        torch.oip.writeTritonRepository(dir, { name: 'm', model: mlp, example: torch.ones([1, 4]), maxBatchSize: -1 }),
      { code: 'InvalidArg', message: 'writeTritonRepository: options.maxBatchSize: must be non-negative, got -1' },
    )
    assert.throws(() => torch.oip.writeTritonRepository(dir, { name: 'm', model: mlp, inputs: [{ dims: [4.5] }] }), {
      code: 'InvalidArg',
      message: 'writeTritonRepository: options.inputs[0].dims[0]: expected an integer, got 4.5',
    })
    await assert.rejects(new torch.Batcher(mlp).run(torch.ones([1, 4]), { timeoutMs: -1 }), {
      code: 'InvalidArg',
      message: 'Batcher.run: options.timeoutMs: expected a number of milliseconds ≥ 0, got -1',
    })
  })

  test('no hand-written unknown-key loop is left in lib/: every bag goes through lib/options.js', () => {
    const lib = path.join(__dirname, '..', 'lib')
    const files = fs.readdirSync(lib, { recursive: true }).filter((f) => f.endsWith('.js') && f !== 'options.js')
    const loops = files.filter((f) => /unknown (option|key) '\$\{/.test(fs.readFileSync(path.join(lib, f), 'utf8')))
    assert.deepEqual(loops, [])
  })
})

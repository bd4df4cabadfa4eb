'use strict'
// Load-time preparation for inference (issue #10): `optimize` (freeze + optimize_for_inference),
// `channelsLast`, `dtype: 'bfloat16'`, `warmup`/`example` — outputs checked against the goldens
// that Python wrote for the same model and input (models/make_models.py).
const { describe, test } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const torch = require('..')

const MODELS = path.join(__dirname, '..', 'models')
const RESNET = path.join(MODELS, 'resnet18_traced.pt')
const EXTRA = path.join(MODELS, 'fixtures', 'extra_method.pt')
const f32 = (name) => {
  const b = fs.readFileSync(path.join(MODELS, 'golden', name))
  return new Float32Array(b.buffer, b.byteOffset, b.byteLength / 4)
}
const input = torch.tensor(f32('resnet18_input_b8.f32').slice(0, 3 * 224 * 224), { shape: [1, 3, 224, 224] })
const golden = torch.tensor(f32('resnet18_output_b1.f32'), { shape: [1, 1000] })
const maxDiff = (a, b) => a.sub(b).abs().max().item()
const BF16 = torch.cpu.hasNativeBf16()

describe('optimize: freeze + optimize_for_inference', () => {
  const m = new torch.ScriptModule(RESNET, { optimize: true })

  test('same outputs as Python to 1e-4 (sync and async)', async () => {
    assert.ok(maxDiff(m.forwardSync(input), golden) < 1e-4)
    const n = await torch.ScriptModule.load(RESNET, { optimize: true, channelsLast: true })
    assert.ok(maxDiff(await n.forward(input), golden) < 1e-4)
  })

  test('a frozen module refuses to move, train or be saved, with a reason', () => {
    for (const f of [() => m.to('cpu'), () => m.train(), () => m.save('/tmp/never-written.pt')]) {
      assert.throws(f, { code: 'InvalidArg', message: /loaded with \{optimize: true\}/ })
    }
    m.eval() // fine: it already is
    assert.deepEqual(m.parameters(), []) // parameters became constants
  })

  test('exported methods other than forward survive freezing', () => {
    const e = new torch.ScriptModule(EXTRA, { optimize: true })
    assert.equal(e.runMethodSync('add_one', 41), 42)
  })
})

describe("optimize: 'fuse' (freeze + oneDNN Graph fusion during warm-up)", () => {
  test('same outputs as Python to 1e-4; other input shapes still run (unfused)', () => {
    const m = new torch.ScriptModule(RESNET, { optimize: 'fuse', example: input })
    assert.ok(maxDiff(m.forwardSync(input), golden) < 1e-4)
    assert.deepEqual(m.forwardSync(torch.cat([input, input], 0)).shape, [2, 1000])
    assert.throws(() => m.save('/tmp/never-written.pt'), { code: 'InvalidArg', message: /optimize: true/ })
  })

  test('needs an example; other strings are refused', () => {
    assert.throws(() => new torch.ScriptModule(RESNET, { optimize: 'fuse' }), {
      code: 'InvalidArg',
      message: /needs options\.example/,
    })
    assert.throws(() => new torch.ScriptModule(RESNET, { optimize: 'fuse', example: input, warmup: 0 }), {
      code: 'InvalidArg',
      message: /needs options\.example/,
    })
    assert.throws(() => new torch.ScriptModule(RESNET, { optimize: 'yes' }), {
      code: 'InvalidArg',
      message: /true, false or 'fuse'/,
    })
  })

  test('the fusion pass is off again after the load: a plain module is not fused', () => {
    new torch.ScriptModule(RESNET, { optimize: 'fuse', example: input })
    const plain = new torch.ScriptModule(RESNET)
    // The default path reproduces Python's output bit for bit; a fused graph differs by ~1e-6.
    for (let i = 0; i < 3; i++) assert.equal(maxDiff(plain.forwardSync(input), golden), 0)
  })
})

describe('channelsLast', () => {
  test('same outputs to 1e-4; the input tensor is left as it was', () => {
    const m = new torch.ScriptModule(RESNET, { channelsLast: true })
    const strides = input.strides
    assert.ok(maxDiff(m.forwardSync(input), golden) < 1e-4)
    assert.deepEqual(input.strides, strides)
  })
})

describe("dtype: 'bfloat16'", () => {
  test(BF16 ? 'float32 in and out, top-1 as Python, logits within 0.1' : 'refused on a CPU without native bf16', () => {
    const opts = { dtype: 'bfloat16', optimize: true, channelsLast: true }
    if (!BF16)
      return assert.throws(() => new torch.ScriptModule(RESNET, opts), {
        code: 'DeviceUnavailable',
        message: /no native bfloat16/,
      })
    const out = new torch.ScriptModule(RESNET, opts).forwardSync(input)
    assert.equal(out.dtype, 'float32')
    assert.equal(out.argmax().item(), golden.argmax().item())
    assert.ok(maxDiff(out, golden) < 0.1, String(maxDiff(out, golden)))
  })
})

describe('warmup and example', () => {
  test('runs forward at load; a bad example fails the load with the call error', async () => {
    const m = await torch.ScriptModule.load(RESNET, { example: input, warmup: 3 })
    assert.ok(maxDiff(m.forwardSync(input), golden) < 1e-5)
    new torch.ScriptModule(RESNET, { example: [input] }) // example alone: 2 warm-up calls
    await assert.rejects(torch.ScriptModule.load(RESNET, { example: torch.ones([1, 4, 224, 224]) }), {
      code: 'ShapeMismatch',
      message: /options\.example: the warm-up call failed/,
    })
  })

  test('bad option values are refused, never ignored', () => {
    const bad = [
      [{ warmup: 2 }, /needs options\.example/],
      [{ warmup: -1, example: input }, /0 to 1000/],
      [{ dtype: 'float16' }, /'float32' or 'bfloat16'/],
      [{ optimize: 1 }, /options\.optimize: expected a boolean/],
      [{ channelsLast: 1 }, /options\.channelsLast: expected a boolean/],
      [{ optimise: true }, /optimise/],
    ]
    for (const [opts, message] of bad) {
      assert.throws(() => new torch.ScriptModule(RESNET, opts), { code: 'InvalidArg', message }, JSON.stringify(opts))
    }
  })
})

describe('torch.cpu', () => {
  test("capabilities() is libtorch's map; hasNativeBf16() reads it", () => {
    const caps = torch.cpu.capabilities()
    assert.equal(typeof caps.avx2, 'boolean')
    assert.equal(typeof caps.cpu_name, 'string')
    assert.equal(typeof caps.num_logical_cores, 'number')
    assert.equal(torch.cpu.hasNativeBf16(), caps.avx512_bf16 === true || caps.amx_bf16 === true)
  })
})

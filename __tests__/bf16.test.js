'use strict'
// bfloat16 where the CPU computes it natively (avx512_bf16 or amx_bf16 in /proc/cpuinfo; issue
// 34): tensor kernels, a TorchScript vision model run in bf16, a conv net compiled in bf16
// (.pt2), and a text encoder exported in bf16. Each tolerance is measured, not guessed: a kernel's against fp32 on the same bf16-rounded
// inputs (one rounding of the output: 2^-8 relative), a model's against the error Python's own
// bf16 run of that model makes (models/make_models.py, models/make_text_models.py write it into
// the goldens). Elsewhere every test skips, with the reason. The causal LM's bf16 export is
// tested in __tests__/lm-families.test.js.
const { describe, test } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const torch = require('..')

const MODELS = path.join(__dirname, '..', 'models')
const TEXT = path.join(MODELS, 'golden', 'text')
const NATIVE = torch.cpu.hasNativeBf16()
const NO_BF16 = NATIVE ? false : 'this CPU has no native bf16 (no avx512_bf16 or amx_bf16 in /proc/cpuinfo)'
// Python's bf16 error on a model is one sample of the rounding; libtorch's kernels (oneDNN, other
// blockings) round elsewhere. Within MARGIN times Python's own error counts as the same accuracy.
const MARGIN = 2
const readJson = (file) => JSON.parse(fs.readFileSync(file, 'utf8'))
const f32 = (name) => {
  const b = fs.readFileSync(path.join(MODELS, 'golden', name))
  return new Float32Array(b.buffer, b.byteOffset, b.byteLength / 4)
}
const maxDiff = (a, b) => a.sub(b).abs().max().item()

describe('bf16 tensor kernels', { skip: NO_BF16 }, () => {
  torch.manualSeed(0)
  const a = torch.randn([64, 256])
  const b = torch.randn([256, 96])
  // The bf16 inputs, widened back: what an exact kernel would multiply.
  const a16 = a.to('bfloat16')
  const b16 = b.to('bfloat16')
  const exact = a16.to('float32').matmul(b16.to('float32'))

  test('matmul: bf16 out, within one bf16 rounding of fp32 on the same inputs', () => {
    const out = a16.matmul(b16)
    assert.equal(out.dtype, 'bfloat16')
    // fp32 accumulation, one rounding to bf16 (8 significant bits): |err| ≤ 2^-8 |x| (+ the fp32
    // accumulation order, far below that).
    const err = out.to('float32').sub(exact).abs()
    const bound = exact
      .abs()
      .mul(2 ** -8)
      .add(1e-3)
    assert.equal(err.gt(bound).sum().item(), 0, `max error ${err.max().item()}`)
  })

  test('softmax and sum in bf16 follow fp32 within bf16 rounding', () => {
    const x = a16.mul(0.5)
    const p = x.softmax(1)
    assert.equal(p.dtype, 'bfloat16')
    const want = x.to('float32').softmax(1)
    assert.ok(maxDiff(p.to('float32'), want) <= 2 ** -8 * want.max().item() + 1e-4)
    const rows = p.to('float32').sum(1)
    assert.ok(maxDiff(rows, torch.ones([64])) < 64 * 2 ** -8)
  })

  test('a bf16 tensor round-trips through float32 exactly', () => {
    assert.deepEqual(a16.to('float32').to('bfloat16').toArray(), a16.toArray())
  })
})

describe('bf16 TorchScript vision (ResNet-18, dtype: bfloat16)', { skip: NO_BF16 }, () => {
  const resnet = path.join(MODELS, 'resnet18_traced.pt')
  const meta = fs.existsSync(path.join(MODELS, 'golden', 'resnet18.json'))
    ? readJson(path.join(MODELS, 'golden', 'resnet18.json'))
    : {}
  const skip =
    !fs.existsSync(resnet) || meta.bf16_eager_max_diff_b1 === undefined
      ? 'no resnet18_traced.pt or its bf16 golden: run `npm run models`'
      : false

  test("within 2× Python's own bf16 error of the fp32 golden, top-1 as Python", { skip }, async () => {
    const input = torch.tensor(f32('resnet18_input_b8.f32').slice(0, 3 * 224 * 224), { shape: [1, 3, 224, 224] })
    const golden = torch.tensor(f32('resnet18_output_b1.f32'), { shape: [1, 1000] })
    for (const opts of [{ dtype: 'bfloat16' }, { dtype: 'bfloat16', optimize: true, channelsLast: true }]) {
      const m = await torch.ScriptModule.load(resnet, opts)
      const out = await m.forward(input)
      assert.equal(out.dtype, 'float32')
      const err = maxDiff(out, golden)
      const tolerance = MARGIN * meta.bf16_eager_max_diff_b1
      assert.ok(err <= tolerance, `${JSON.stringify(opts)}: max logit difference ${err} > ${tolerance}`)
      assert.equal(out.argmax().item(), golden.argmax().item())
      m.dispose()
    }
  })
})

describe('bf16 .pt2 vision (a conv net compiled in bf16 by AOTInductor)', { skip: NO_BF16 }, () => {
  const file = path.join(MODELS, 'convnet_bf16.pt2')
  const goldenFile = path.join(MODELS, 'golden', 'pt2_bf16.json')
  const skip =
    !fs.existsSync(file) || !fs.existsSync(goldenFile)
      ? 'no convnet_bf16.pt2: run `npm run models` (models/make_models.py --part pt2-bf16)'
      : false

  test("bf16 in and out, within 2× Python's eager bf16 error of fp32; async = sync", { skip }, async () => {
    const golden = readJson(goldenFile)
    const x = torch.tensor(golden.input.data, { shape: golden.input.shape }).to('bfloat16')
    const reference = torch.tensor(golden.reference.data, { shape: golden.reference.shape })
    const m = await torch.AOTModule.load(file)
    try {
      const out = await m.forward(x)
      assert.equal(out.dtype, 'bfloat16')
      assert.deepEqual(out.shape, golden.reference.shape)
      const err = maxDiff(out.to('float32'), reference)
      const tolerance = MARGIN * golden.bf16_eager_max_diff
      assert.ok(
        err <= tolerance,
        `max difference ${err} > ${tolerance} (Python eager bf16: ${golden.bf16_eager_max_diff})`,
      )
      assert.deepEqual(m.forwardSync(x).toArray(), out.toArray())
    } finally {
      m.dispose()
    }
  })
})

describe('bf16 text encoder (.pt2 exported with --dtype bfloat16)', { skip: NO_BF16 }, () => {
  const dir = path.join(TEXT, 'mpnet-random-bf16')
  const goldenFile = path.join(TEXT, 'mpnet-random-bf16.golden.json')
  const skip =
    !fs.existsSync(path.join(dir, 'manifest.json')) || !fs.existsSync(goldenFile)
      ? 'no bf16 text model: run `npm run models` (models/make_text_models.py)'
      : false

  test("embeddings within 2× sentence-transformers' own bf16 error of its fp32 ones", { skip }, async () => {
    const golden = readJson(goldenFile)
    const encoder = await torch.text.SentenceEncoder.load(dir)
    try {
      assert.equal(encoder.manifest.dtype, 'bfloat16')
      const out = await encoder.encode(golden.sentences)
      assert.equal(out.dtype, 'float32')
      const want = torch.tensor(golden.embeddings)
      const err = maxDiff(out, want)
      const tolerance = MARGIN * golden.bf16EagerMaxDiff
      assert.ok(err <= tolerance, `max difference ${err} > ${tolerance} (Python bf16: ${golden.bf16EagerMaxDiff})`)
    } finally {
      encoder.dispose()
    }
  })

  test('a float32 export refuses dtype bfloat16 with the way out', { skip }, async () => {
    await assert.rejects(torch.text.SentenceEncoder.load(path.join(TEXT, 'mpnet-random'), { dtype: 'bfloat16' }), {
      code: 'InvalidArg',
      message: /export again with --dtype bfloat16/,
    })
  })
})

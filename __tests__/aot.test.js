'use strict'
// AOTInductor packages (`.pt2`, issue #11): ResNet-18 exported with a dynamic batch dimension
// and compiled by models/make_models.py at install (machine code for this CPU: never
// committed), checked against the same goldens as the TorchScript file; a two-input,
// two-output program with a shared dynamic batch; the inputs that must be refused (issue #18:
// both are compiled the default way, whose input checks record a lower bound of 2). Issue #24:
// upper bounds that only record a compiler assumption (ResNet-18's 15) are dropped, those that
// guard a fixed-size table (pos_embed.pt2's sequence) kept.
const { describe, test } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const torch = require('..')
const { childOut } = require('./helpers')

const MODELS = path.join(__dirname, '..', 'models')
const RESNET = path.join(MODELS, 'resnet18.pt2') // x: float32 [batch, 3, 224, 224] -> [batch, 1000]
const TWO_IO = path.join(MODELS, 'two_io.pt2') // (x, y: float32 [b, 3], b in 1..64) -> (x + y, x * y)
// ids: int64 [batch, seq] -> tokens(ids) + positions[:seq]: float32 [batch, seq, 8], positions 16 rows
const POS = path.join(MODELS, 'pos_embed.pt2')
// x: float32 [b, 3, 4, 5], compiled channels-last -> x * (c + 1) + c on channel c
const NHWC = path.join(MODELS, 'channels_last.pt2')
const MISSING = [RESNET, TWO_IO, POS, NHWC].filter((p) => !fs.existsSync(p))
const SKIP = MISSING.length > 0 && `not generated (the model script could not compile them): ${MISSING.join(', ')}`

const f32 = (name) => {
  const b = fs.readFileSync(path.join(MODELS, 'golden', name))
  return new Float32Array(b.buffer, b.byteOffset, b.byteLength / 4)
}
const maxDiff = (a, b) => a.sub(b).abs().max().item()

describe('AOTModule', { skip: SKIP }, () => {
  test('ResNet-18 at batch 1 and 8 matches Python within 1e-5 (sync and async; batch 1 was refused before #18)', async () => {
    const input = torch.tensor(f32('resnet18_input_b8.f32'), { shape: [8, 3, 224, 224] })
    const m = await torch.AOTModule.load(RESNET)
    assert.ok(m instanceof torch.AOTModule)
    const out8 = await m.forward(input)
    assert.deepEqual(out8.shape, [8, 1000])
    assert.ok(maxDiff(out8, torch.tensor(f32('resnet18_output_b8.f32'), { shape: [8, 1000] })) < 1e-5)
    const out1 = m.forwardSync(input.narrow(0, 0, 1))
    assert.ok(maxDiff(out1, torch.tensor(f32('resnet18_output_b1.f32'), { shape: [1, 1000] })) < 1e-5)
  })

  test("ResNet-18 at batch 16, 32 and 64, past the 15 its checks record, gives Python's output within 1e-4 (issue #24)", async () => {
    // The 15 is ATen's convolution backend choice evaluated on the symbolic batch while compiling;
    // the export records 1..64, and Python's aoti_load_package runs these batches.
    const input8 = torch.tensor(f32('resnet18_input_b8.f32'), { shape: [8, 3, 224, 224] })
    const input64 = torch.cat(
      [0, 1, 2, 3, 4, 5, 6, 7].map((k) => input8.mul(1 - k / 16)),
      0,
    )
    const m = new torch.AOTModule(RESNET)
    for (const n of [16, 32, 64]) {
      const out = n === 32 ? await m.forward(input64.narrow(0, 0, n)) : m.forwardSync(input64.narrow(0, 0, n))
      assert.deepEqual(out.shape, [n, 1000])
      const diff = maxDiff(out, torch.tensor(f32(`resnet18_pt2_output_b${n}.f32`), { shape: [n, 1000] }))
      assert.ok(diff < 1e-4, `batch ${n}: max |torch-node - Python| = ${diff}`)
    }
  })

  test('a sequence bounded by a positions table: longer ones refused, any batch runs (issue #24)', async () => {
    const { cases } = JSON.parse(fs.readFileSync(path.join(MODELS, 'golden', 'pt2.json'), 'utf8'))['pos_embed.pt2']
    const m = await torch.AOTModule.load(POS)
    const ids = torch.tensor(cases.b3_s16.ids, { dtype: 'int64' })
    const golden = torch.tensor(cases.b3_s16.output, { shape: [3, 16, 8] })
    assert.ok(maxDiff(m.forwardSync(ids), golden) < 1e-6)
    const short = m.forwardSync(torch.tensor(cases.b1_s5.ids, { dtype: 'int64' }))
    assert.ok(maxDiff(short, torch.tensor(cases.b1_s5.output, { shape: [1, 5, 8] })) < 1e-6)
    // Batch 70, past the Dim's max=64: nothing reads fixed-size memory along the batch.
    const rows = Array.from({ length: 70 }, (_, i) => i % 3)
    const many = await m.forward(
      torch.cat(
        rows.map((r) => ids.narrow(0, r, 1)),
        0,
      ),
    )
    assert.ok(
      maxDiff(
        many,
        torch.cat(
          rows.map((r) => golden.narrow(0, r, 1)),
          0,
        ),
      ) < 1e-6,
    )
    // The kernel reads positions[x1] for x1 < seq: 17 rows would read past the table's 16.
    for (const seq of [17, 200]) {
      const long = torch.zeros([2, seq], { dtype: 'int64' })
      const message = new RegExp(
        `input 0: expected shape \\[1\\.\\., 1\\.\\.16\\], got \\[2, ${seq}\\] \\(dimension 1 is ${seq}, outside the 1\\.\\.16 this package was compiled for\\)$`,
      )
      assert.throws(() => m.forwardSync(long), { code: 'ShapeMismatch', message })
      await assert.rejects(m.forward(long), { code: 'ShapeMismatch', message })
    }
    assert.throws(() => m.forwardSync(torch.zeros([2, 0], { dtype: 'int64' })), {
      code: 'ShapeMismatch',
      message: /dimension 1 is 0, outside the 1\.\.16/,
    })
  })

  test('several inputs and outputs; views are accepted; metadata says what the package records', () => {
    const m = new torch.AOTModule(TWO_IO)
    const x = torch.arange(0, 6, { dtype: 'float32' }).view(2, 3)
    const [sum, product] = m.forwardSync(x, torch.full([2, 3], 2))
    assert.deepEqual(sum.toArray(), [
      [2, 3, 4],
      [5, 6, 7],
    ])
    assert.deepEqual(product.toArray(), [
      [0, 2, 4],
      [6, 8, 10],
    ])
    assert.deepEqual(
      m.forwardSync(torch.arange(0, 6, { dtype: 'float32' }).view(3, 2).t(), torch.zeros([2, 3]))[0].toArray(),
      [
        [0, 2, 4],
        [1, 3, 5],
      ],
    )
    const meta = m.metadata()
    assert.equal(meta.AOTI_DEVICE_KEY, 'cpu')
    assert.equal(typeof meta.in_spec, 'string')
    assert.equal(m.device, 'cpu')
  })

  test('a package compiled channels-last takes inputs in any memory format, and views', async () => {
    const m = new torch.AOTModule(NHWC)
    const expected = (x) =>
      x.mul(torch.tensor([1, 2, 3]).view(1, 3, 1, 1)).add(torch.tensor([0, 1, 2]).view(1, 3, 1, 1))
    const nchw = torch.arange(0, 2 * 3 * 4 * 5, { dtype: 'float32' }).view(2, 3, 4, 5)
    // the same values in NHWC memory, seen as NCHW (Python's channels_last)
    const nhwc = nchw.permute(0, 2, 3, 1).contiguous().permute(0, 3, 1, 2)
    // a view that is neither: every other row of a taller tensor
    const strided = torch
      .arange(0, 2 * 3 * 8 * 5, { dtype: 'float32' })
      .view(2, 3, 8, 5)
      .slice(2, 0, 8, 2)
    for (const [name, x] of [
      ['NCHW', nchw],
      ['NHWC', nhwc],
      ['a strided view', strided],
    ]) {
      assert.deepEqual(m.forwardSync(x).toArray(), expected(x).toArray(), name)
      assert.deepEqual((await m.forward(x)).toArray(), expected(x).toArray(), name)
    }
    // the memory format does not excuse a wrong shape
    assert.throws(() => m.forwardSync(torch.zeros([2, 3, 5, 4])), { code: 'ShapeMismatch', message: /dimension 2/ })
  })

  test('a dynamic batch runs at every size Python runs it, 1 included (sync and async)', async () => {
    const m = new torch.AOTModule(TWO_IO)
    // Exact: an elementwise add and multiply of small integers, the same at every batch size.
    // 100: past the Dim's max=64, as Python's runner runs it (the kernels are sized by x's batch).
    for (const n of [1, 2, 37, 64, 100]) {
      const x = torch.arange(0, 3 * n, { dtype: 'float32' }).view(n, 3)
      const [sum, product] = m.forwardSync(x, torch.full([n, 3], 2))
      assert.deepEqual(sum.toArray(), x.add(2).toArray())
      const [, again] = await m.forward(x, torch.full([n, 3], 2))
      assert.deepEqual(again.toArray(), product.toArray())
    }
    // A one-row view of a bigger tensor (strides of the big one along the size-1 dimension).
    assert.deepEqual(m.forwardSync(torch.ones([5, 3]).narrow(0, 2, 1), torch.ones([1, 3]))[0].toArray(), [[2, 2, 2]])
    // ResNet-18 compiled the default way (Dim min=1, recorded as 2): batch 2 and 15.
    const r = new torch.AOTModule(RESNET)
    for (const n of [2, 15]) assert.deepEqual(r.forwardSync(torch.rand([n, 3, 224, 224])).shape, [n, 1000])
  })

  test('wrong shapes, dtypes, counts and values are coded errors, never a crash', async () => {
    const m = new torch.AOTModule(TWO_IO)
    const ok = torch.ones([2, 3])
    // The batch's recorded max=64 guards no memory (see the test above): the range is 1.. .
    const expected = /expected shape \[1\.\., 3\]/
    const bad = [
      [
        [torch.ones([2, 4]), ok],
        'ShapeMismatch',
        /input 0: expected shape \[1\.\., 3\], got \[2, 4\] \(dimension 1 must be 3\)$/,
      ],
      [[torch.ones([1]), ok], 'ShapeMismatch', /input 0: expected 2 dimensions \[1\.\., 3\], got shape \[1\]$/],
      [[torch.ones([2, 3, 1]), ok], 'ShapeMismatch', /expected 2 dimensions/],
      [[torch.ones([]), ok], 'ShapeMismatch', /expected 2 dimensions \[1\.\., 3\], got shape \[\]/],
      // 0 is specialized away by torch.export: the program was never traced for it.
      [
        [torch.ones([0, 3]), torch.ones([0, 3])],
        'ShapeMismatch',
        /got \[0, 3\] \(dimension 0 is 0, outside the 1\.\. this package was compiled for\)$/,
      ],
      // x and y share the batch: the kernels loop over x's, so a shorter y would be read past its end.
      [
        [torch.ones([3, 3]), ok],
        'ShapeMismatch',
        /input 1: expected shape \[1\.\., 3\], got \[2, 3\] \(dimension 0 must equal input 0's dimension 0, 3\)$/,
      ],
      [
        [torch.ones([2, 3], { dtype: 'float64' }), ok],
        'DTypeMismatch',
        /input 0: expected dtype float32, got float64$/,
      ],
      [[ok, torch.ones([2, 3], { dtype: 'int64' })], 'DTypeMismatch', /input 1: expected dtype float32, got int64$/],
      [[ok], 'InvalidArg', /inputs vector size to be 2, but got 1/],
      [[ok, ok, ok], 'InvalidArg', /inputs vector size to be 2, but got 3/],
      [[ok, 2], 'InvalidArg', /input 1: expected a Tensor/],
    ]
    for (const [inputs, code, message] of bad) {
      assert.throws(
        () => m.forwardSync(...inputs),
        (e) => e.code === code && message.test(e.message) && !e.message.includes('\n'),
        `${code} ${message}`,
      )
      await assert.rejects(m.forward(...inputs), (e) => e.code === code && message.test(e.message))
    }
    const r = new torch.AOTModule(RESNET)
    assert.throws(() => r.forwardSync(torch.ones([1, 3, 224, 225])), {
      code: 'ShapeMismatch',
      message: /got \[1, 3, 224, 225\] \(dimension 3 must be 224\)/,
    })
    assert.throws(() => m.forwardSync(torch.ones([2, 4]), ok), { code: 'ShapeMismatch', message: expected })
  })

  test('load errors: a missing file, a TorchScript file, options', async () => {
    await assert.rejects(torch.AOTModule.load(path.join(MODELS, 'nope.pt2')), {
      code: 'ModelLoadError',
      message: /No such file/,
    })
    assert.throws(() => new torch.AOTModule(path.join(MODELS, 'fixtures', 'mlp_traced.pt')), { code: 'ModelLoadError' })
    assert.throws(() => new torch.AOTModule(MODELS), { code: 'ModelLoadError', message: /directory/ })
    assert.throws(() => new torch.AOTModule(TWO_IO, { optimize: true }), { code: 'InvalidArg', message: /optimize/ })
    assert.throws(() => new torch.AOTModule(42), { code: 'InvalidArg' })
    assert.throws(() => torch.AOTModule(TWO_IO), { code: 'InvalidArg', message: /new/ })
    await assert.rejects(torch.AOTModule.load(TWO_IO, { signal: AbortSignal.abort() }), { code: 'Aborted' })
  })

  test('dispose: calls in flight finish, later calls throw Disposed; Symbol.dispose', async () => {
    const m = new torch.AOTModule(TWO_IO)
    const pending = m.forward(torch.ones([2, 3]), torch.ones([2, 3]))
    m[Symbol.dispose]()
    assert.equal((await pending).length, 2)
    assert.equal(m.isDisposed, true)
    assert.throws(() => m.forwardSync(torch.ones([2, 3]), torch.ones([2, 3])), { code: 'Disposed' })
  })

  test('after a load, the weights are resident once: the package .so pages they were copied from are given back', () => {
    // In a child: this process has other models' pages mapped. RssFile is the file-backed part
    // of the resident set; ResNet-18's weights are 45 MB, copied at load out of the .so.
    const out = childOut(
      `const torch = require(${JSON.stringify(path.join(__dirname, '..'))})
      const fs = require('node:fs')
      const status = () => fs.readFileSync('/proc/self/status', 'utf8').split('\\n')
      const kb = (key) => parseInt(status().find((l) => l.startsWith(key + ':')).slice(key.length + 1), 10)
      const file0 = kb('RssFile'), anon0 = kb('RssAnon')
      torch.AOTModule.load(${JSON.stringify(RESNET)}).then((m) => {
        const y = m.forwardSync(torch.ones([1, 3, 224, 224]))
        console.log('OUT ' + JSON.stringify({ file: kb('RssFile') - file0, anon: kb('RssAnon') - anon0, shape: y.shape }))
      })`,
      { timeout: 60_000 },
    )
    assert.deepEqual(out.shape, [1, 1000])
    assert.ok(out.anon > 40_000, `the weights' copy: +${out.anon} kB anonymous`)
    assert.ok(out.file < 20_000, `+${out.file} kB file-backed after the load: the .so's weight pages stayed`)
  })

  test('a process that ends without dispose() leaves no extracted package in the temporary folder', () => {
    // libtorch's loader extracts a package into $TMPDIR/aotinductor_*/ and removed it only when
    // the module was freed: process.exit(), a throw or a kill left it there (SmolLM2: 1.1 GB).
    const ends = {
      exit: 'process.exit(3)',
      throw: "throw new Error('uncaught')",
      kill: "process.kill(process.pid, 'SIGKILL')",
    }
    for (const [how, end] of Object.entries(ends)) {
      const tmp = fs.mkdtempSync(path.join(require('node:os').tmpdir(), 'torch-node-aot-exit-'))
      const r = require('node:child_process').spawnSync(
        process.execPath,
        [
          '-e',
          `const torch = require(${JSON.stringify(path.join(__dirname, '..'))})
          const m = new torch.AOTModule(${JSON.stringify(TWO_IO)})
          const [sum] = m.forwardSync(torch.ones([2, 3]), torch.ones([2, 3]))
          console.log('OUT ' + sum.sum().item())
          ${end}`,
        ],
        { encoding: 'utf8', timeout: 60_000, env: { ...process.env, TMPDIR: tmp } },
      )
      const left = fs.readdirSync(tmp)
      fs.rmSync(tmp, { recursive: true, force: true })
      assert.match(r.stdout, /^OUT 12$/m, `${how}: ${r.status} ${r.signal}\n${r.stderr}`)
      assert.deepEqual(left, [], `${how}: left behind in the temporary folder`)
    }
  })
})

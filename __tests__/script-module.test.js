'use strict'
// ResNet-18 and EfficientNet-Lite0 against Python's golden outputs, sync and async, from a path
// and from a Buffer; loading off the event loop; the event loop keeps turning while forwards wait
// for the executor (held still with helpers.holdExecutor: no race against the clock).
const { describe, test, before } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const torch = require('..')
const { holdExecutor, stateOf } = require('./helpers')

const MODELS = path.join(__dirname, '..', 'models')
const GOLDEN = path.join(MODELS, 'golden')
const RESNET = path.join(MODELS, 'resnet18_traced.pt')
const EFFNET = path.join(MODELS, 'efficientnet_lite0_traced.pt')
const TOLERANCE = 1e-5

function floats(file) {
  const p = path.join(GOLDEN, file)
  assert.ok(fs.existsSync(p), `${p} is missing: run \`npm run models\``)
  const b = fs.readFileSync(p)
  return new Float32Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength))
}

function assertClose(actual, expected, what) {
  assert.equal(actual.length, expected.length, `${what}: length`)
  let worst = 0
  for (let i = 0; i < actual.length; i++) worst = Math.max(worst, Math.abs(actual[i] - expected[i]))
  assert.ok(worst <= TOLERANCE, `${what}: max |difference| ${worst} > ${TOLERANCE}`)
}

const IMAGE = 3 * 224 * 224

describe('ResNet-18 (traced, seed 0) equals Python', () => {
  let input8, out1, out8, model
  before(() => {
    input8 = floats('resnet18_input_b8.f32')
    out1 = floats('resnet18_output_b1.f32')
    out8 = floats('resnet18_output_b8.f32')
    model = new torch.ScriptModule(RESNET)
  })
  const batch = (n) => torch.tensor(input8.subarray(0, n * IMAGE), { shape: [n, 3, 224, 224] })

  test('batch 1, forwardSync from a path', () => {
    const y = model.forwardSync(batch(1))
    assert.deepEqual(y.shape, [1, 1000])
    assertClose(y.toTypedArray(), out1, 'batch 1 logits')
  })

  test('batch 8, async forward from a path', async () => {
    const y = await model.forward(batch(8))
    assert.deepEqual(y.shape, [8, 1000])
    assertClose(y.toTypedArray(), out8, 'batch 8 logits')
  })

  test('batch 1 and 8 from a Buffer, loaded with ScriptModule.load', async () => {
    const fromBuffer = await torch.ScriptModule.load(fs.readFileSync(RESNET))
    assertClose((await fromBuffer.forward(batch(1))).toTypedArray(), out1, 'batch 1 (buffer, async)')
    assertClose(fromBuffer.forwardSync(batch(8)).toTypedArray(), out8, 'batch 8 (buffer, sync)')
    const syncLoaded = new torch.ScriptModule(fs.readFileSync(RESNET))
    assertClose(syncLoaded.forwardSync(batch(1)).toTypedArray(), out1, 'batch 1 (buffer, new)')
  })

  test('the top-5 of the golden logits', () => {
    const { values, indices } = model.forwardSync(batch(1)).topk(5)
    const expected = Array.from(out1.keys())
      .sort((a, b) => out1[b] - out1[a])
      .slice(0, 5)
    assert.deepEqual(indices.toArray()[0], expected)
    assertClose(
      values.toTypedArray(),
      expected.map((i) => out1[i]),
      'top-5 values',
    )
  })

  test('the event loop keeps ticking while three forwards wait for the executor', { timeout: 120_000 }, async () => {
    // The executor is held, so the forwards cannot end before the test has seen the loop turn: a
    // forward that ran on the JS thread would have ended inside forward(), one that blocked the
    // loop waiting for the executor would never let the timer below tick (and would time out).
    const hold = await holdExecutor(torch)
    let pending = []
    try {
      pending = [model.forward(batch(8)), model.forward(batch(8)), model.forward(batch(8))]
      assert.equal(torch.executorStats().queued, 3, 'queued on the executor, not run on this thread')
      let ticks = 0
      await new Promise((resolve) => {
        const timer = setInterval(() => {
          if (++ticks === 5) resolve(clearInterval(timer))
        }, 5)
      })
      assert.deepEqual(await Promise.all(pending.map(stateOf)), ['pending', 'pending', 'pending'])
    } finally {
      await hold.release()
      await Promise.allSettled(pending)
    }
    for (const y of await Promise.all(pending)) assertClose(y.toTypedArray(), out8, 'concurrent batch 8')
  })

  test('inference runs without autograd: outputs do not require grad', () => {
    const y = model.forwardSync(batch(1))
    assert.equal(y.requiresGrad, false)
    assert.equal(y.toString().includes('grad_fn'), false)
  })

  test('parameters are reachable', () => {
    assert.equal(model.numParameters(), 11689512)
    const params = model.namedParameters()
    assert.deepEqual(params['conv1.weight'].shape, [64, 3, 7, 7])
    assert.deepEqual(params['fc.bias'].shape, [1000])
    assert.deepEqual(model.methodNames(), ['forward'])
    assert.equal(model.device, 'cpu')
  })
})

describe('EfficientNet-Lite0 (real ImageNet weights) equals Python', () => {
  test('batch 1 logits within 1e-5', async () => {
    const model = await torch.ScriptModule.load(EFFNET)
    const x = torch.tensor(floats('efficientnet_lite0_input_b1.f32'), { shape: [1, 3, 224, 224] })
    const y = await model.forward(x)
    assert.deepEqual(y.shape, [1, 1000])
    assertClose(y.toTypedArray(), floats('efficientnet_lite0_output_b1.f32'), 'EfficientNet logits')
  })
})

describe('modules', () => {
  test('eval/train toggle the training flag', () => {
    const m = new torch.ScriptModule(path.join(MODELS, 'fixtures', 'mlp_traced.pt'))
    m.train()
    assert.equal(m.isTraining, true)
    m.eval()
    assert.equal(m.isTraining, false)
  })

  test('save writes a module that loads back', (t) => {
    const m = new torch.ScriptModule(path.join(MODELS, 'fixtures', 'extra_method.pt'))
    const out = path.join(require('node:os').tmpdir(), `torch-node-save-${process.pid}.pt`)
    t.after(() => fs.rmSync(out, { force: true }))
    m.save(out)
    const again = new torch.ScriptModule(out)
    assert.equal(again.runMethodSync('add_one', 1), 2)
  })

  test('signature(): argument names and TorchScript types, as the schema declares them', () => {
    const m = new torch.ScriptModule(path.join(MODELS, 'fixtures', 'ivalues_scripted.pt'))
    assert.deepEqual(m.signature(), {
      name: 'forward',
      args: [
        { name: 'x', type: 'Tensor', hasDefault: false },
        { name: 'n', type: 'int', hasDefault: false },
      ],
      returns: 'Tuple[Tensor, int, float, bool, str, Optional[Tensor], List[int], Dict[str, Tensor]]',
    })
    assert.deepEqual(m.signature('forward'), m.signature())
    assert.throws(() => m.signature('nope'), { code: 'MethodNotFound', message: /no method 'nope'; it has: forward/ })
    assert.throws(() => m.signature(3), { code: 'InvalidArg', message: /signature: method: expected a string/ })
  })

  test('to("cpu") keeps working; CUDA fails cleanly where there is none', { skip: torch.cuda.isAvailable() }, () => {
    const m = new torch.ScriptModule(path.join(MODELS, 'fixtures', 'mlp_traced.pt'))
    m.to('cpu')
    assert.equal(m.device, 'cpu')
    assert.throws(() => m.to('cuda'), { code: 'DeviceUnavailable' })
  })

  test('on a GPU machine, a module moved to CUDA runs CUDA inputs', { skip: !torch.cuda.isAvailable() }, () => {
    const m = new torch.ScriptModule(path.join(MODELS, 'fixtures', 'mlp_traced.pt'), { device: 'cuda' })
    const y = m.forwardSync(torch.ones([2, 4], { device: 'cuda' }))
    assert.equal(y.device, 'cuda:0')
    const cpu = new torch.ScriptModule(path.join(MODELS, 'fixtures', 'mlp_traced.pt')).forwardSync(torch.ones([2, 4]))
    assertClose(y.cpu().toTypedArray(), cpu.toTypedArray(), 'CUDA vs CPU')
  })
})

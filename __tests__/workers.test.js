'use strict'
// The addon in worker_threads: it loads in several workers at once, tensors in different workers
// share a SharedArrayBuffer's memory, TorchScript modules run in a worker, and workers exit
// cleanly (code 0) while the main thread keeps working.
const { describe, test } = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const { Worker } = require('node:worker_threads')
const torch = require('..')

const ROOT = path.join(__dirname, '..')
const MLP = path.join(ROOT, 'models', 'fixtures', 'mlp_traced.pt')
const GOLDEN = require('../models/fixtures/golden.json').mlp_traced

/**
 * Runs `source` in a worker (with `torch`, `workerData`, `parentPort` in scope) and resolves to
 * `{messages, code}` once it exits. Errors thrown inside reject.
 */
function runWorker(source, workerData, timeoutMs = 30_000) {
  const code = `
    'use strict'
    const { workerData, parentPort } = require('node:worker_threads')
    const torch = require(${JSON.stringify(ROOT)})
    ;(async () => { ${source} })().catch((e) => { parentPort.postMessage({ error: String(e && e.stack || e) }); process.exitCode = 1 })
  `
  return new Promise((resolve, reject) => {
    const worker = new Worker(code, { eval: true, workerData })
    const messages = []
    const timer = setTimeout(() => {
      worker.terminate()
      reject(new Error(`worker timed out; messages so far: ${JSON.stringify(messages)}`))
    }, timeoutMs)
    worker.on('message', (m) => messages.push(m))
    worker.on('error', (e) => {
      clearTimeout(timer)
      reject(e)
    })
    worker.on('exit', (code) => {
      clearTimeout(timer)
      const failed = messages.find((m) => m && m.error)
      if (failed) reject(new Error(`worker failed: ${failed.error}`))
      else resolve({ messages, code })
    })
  })
}

/** The main thread still does tensor work and runs a module. */
function assertMainThreadWorks() {
  const t = torch.tensor([
    [1, 2],
    [3, 4],
  ])
  assert.deepEqual(t.matmul(t).toArray(), [
    [7, 10],
    [15, 22],
  ])
  assert.equal(t.toString(), 'tensor([[1., 2.],\n        [3., 4.]])')
  const arr = new Float32Array([1, 2, 3])
  torch.fromBuffer(arr, [3]).mul_(2)
  assert.deepEqual(Array.from(arr), [2, 4, 6])
  const model = new torch.ScriptModule(MLP)
  const out = model.forwardSync(torch.tensor(Float32Array.from(GOLDEN.input.data), { shape: GOLDEN.input.shape }))
  assertClose(out.toTypedArray(), GOLDEN.output.data)
  if (typeof global.gc === 'function') global.gc()
}

function assertClose(actual, expected, tol = 1e-5) {
  assert.equal(actual.length, expected.length)
  for (let i = 0; i < actual.length; i++) {
    assert.ok(Math.abs(actual[i] - expected[i]) <= tol, `[${i}]: ${actual[i]} vs ${expected[i]}`)
  }
}

describe('worker_threads', () => {
  test('the addon loads in 3 workers at once; each makes a tensor', async () => {
    const results = await Promise.all(
      [0, 1, 2].map((i) =>
        runWorker(
          `
      const t = torch.arange(0, 3, { dtype: 'float32' }).add(workerData.i)
      parentPort.postMessage({ repr: t.toString(), shape: t.shape, sum: t.sum().item() })
    `,
          { i },
        ),
      ),
    )
    results.forEach(({ messages, code }, i) => {
      assert.equal(code, 0, `worker ${i} exit code`)
      assert.equal(messages.length, 1)
      const expected = torch.arange(0, 3, { dtype: 'float32' }).add(i)
      assert.equal(messages[0].repr, expected.toString())
      assert.deepEqual(messages[0].shape, [3])
      assert.equal(messages[0].sum, 3 + 3 * i)
    })
    assertMainThreadWorks()
  })

  test("tensors over one SharedArrayBuffer in two workers see each other's writes", async () => {
    const data = new SharedArrayBuffer(4 * 4)
    const sync = new Int32Array(new SharedArrayBuffer(4)) // stage counter
    // Stages: 0 → B has its tensor (1) → A wrote 1..4 (2) → B read and multiplied by 10 (3).
    const helpers = `
      const stage = workerData.sync
      function waitWhile(value) {
        while (Atomics.load(stage, 0) === value) {
          if (Atomics.wait(stage, 0, value, 10_000) === 'timed-out') throw new Error('timed out at stage ' + value)
        }
      }
      function advance(to) { Atomics.store(stage, 0, to); Atomics.notify(stage, 0) }
    `
    const writer = runWorker(
      `${helpers}
      const a = torch.fromBuffer(workerData.data, [4])
      waitWhile(0)
      a.copy_(torch.tensor([1, 2, 3, 4]))
      advance(2)
      waitWhile(2)
      parentPort.postMessage({ seen: a.toArray(), repr: a.toString() })
    `,
      { data, sync },
    )
    const reader = runWorker(
      `${helpers}
      const b = torch.fromBuffer(new Float32Array(workerData.data), [2, 2])
      advance(1)
      waitWhile(1)
      const seen = b.toArray()
      b.mul_(10)
      advance(3)
      parentPort.postMessage({ seen })
    `,
      { data, sync },
    )
    const [w, r] = await Promise.all([writer, reader])
    assert.equal(w.code, 0)
    assert.equal(r.code, 0)
    assert.deepEqual(
      r.messages[0].seen,
      [
        [1, 2],
        [3, 4],
      ],
      "the reader saw the writer's copy_",
    )
    assert.deepEqual(w.messages[0].seen, [10, 20, 30, 40], "the writer saw the reader's mul_")
    // The main thread sees the same memory, through JS and through its own tensor.
    assert.deepEqual(Array.from(new Float32Array(data)), [10, 20, 30, 40])
    assert.deepEqual(torch.fromBuffer(data, [4]).toArray(), [10, 20, 30, 40])
    assertMainThreadWorks()
  })

  test('the main thread and a worker share a SharedArrayBuffer through tensors', async () => {
    const data = new SharedArrayBuffer(8 * 4)
    const mine = torch.fromBuffer(data, [8])
    mine.copy_(torch.arange(0, 8, { dtype: 'float32' }))
    const { messages, code } = await runWorker(
      `
      const t = torch.fromBuffer(workerData.data, [2, 4])
      parentPort.postMessage({ seen: t.toArray() })
      t.select(0, 1).fill_(-1)
    `,
      { data },
    )
    assert.equal(code, 0)
    assert.deepEqual(messages[0].seen, [
      [0, 1, 2, 3],
      [4, 5, 6, 7],
    ])
    assert.deepEqual(mine.toArray(), [0, 1, 2, 3, -1, -1, -1, -1])
  })

  test('a ScriptModule loads and runs in a worker', async () => {
    const { messages, code } = await runWorker(
      `
      const input = torch.tensor(Float32Array.from(workerData.input.data), { shape: workerData.input.shape })
      const model = new torch.ScriptModule(workerData.path)
      const sync = model.forwardSync(input)
      const asyncOut = await model.forward(input)
      const loaded = await torch.ScriptModule.load(workerData.path)
      const viaLoad = await loaded.forward(torch.fromBuffer(Float32Array.from(workerData.input.data), workerData.input.shape))
      parentPort.postMessage({
        methods: model.methodNames(),
        sync: Array.from(sync.toTypedArray()),
        async: Array.from(asyncOut.toTypedArray()),
        viaLoad: Array.from(viaLoad.toTypedArray()),
        shape: sync.shape,
      })
    `,
      { path: MLP, input: GOLDEN.input },
    )
    assert.equal(code, 0)
    const m = messages[0]
    assert.deepEqual(m.methods, ['forward'])
    assert.deepEqual(m.shape, GOLDEN.output.shape)
    assertClose(m.sync, GOLDEN.output.data)
    assertClose(m.async, GOLDEN.output.data)
    assertClose(m.viaLoad, GOLDEN.output.data)
    assertMainThreadWorks()
  })

  test('workers exit with code 0 while still holding tensors, borrowed buffers and lent arrays', async () => {
    const runs = await Promise.all(
      [0, 1, 2].map(() =>
        runWorker(
          `
      const kept = []
      for (let i = 0; i < 20; i++) kept.push(torch.randn([64, 64]).matmul(torch.randn([64, 64])))
      const borrowed = torch.fromBuffer(new Float32Array(1024).fill(1), [32, 32])
      const view = borrowed.slice(0, 4)
      const lent = torch.ones([256]).asTypedArray()
      const model = new torch.ScriptModule(workerData.path)
      const pending = model.forward(torch.fromBuffer(new Float32Array(8), [2, 4]))
      const out = await pending
      parentPort.postMessage({ ok: view.sum().item() === 28 * 32 && lent[0] === 1 && out.shape[0] === 2 })
      // Exit without disposing anything.
    `,
          { path: MLP },
        ),
      ),
    )
    for (const { messages, code } of runs) {
      assert.equal(code, 0)
      assert.deepEqual(messages, [{ ok: true }])
    }
    assertMainThreadWorks()
  })

  test('a worker terminated mid-loop does not disturb the main thread', async () => {
    const worker = new Worker(
      `
      const { parentPort } = require('node:worker_threads')
      const torch = require(${JSON.stringify(ROOT)})
      const arr = new Float32Array(3 * 224 * 224)
      for (let i = 0; ; i++) {
        const t = torch.fromBuffer(arr, [1, 3, 224, 224])
        t.add_(1)
        t.mul(2).sum()
        // Said from inside the loop: it is running when the parent terminates it.
        if (i === 10) parentPort.postMessage('in the loop')
      }
    `,
      { eval: true },
    )
    await new Promise((resolve, reject) => {
      worker.once('message', resolve)
      worker.once('error', reject)
    })
    const exit = new Promise((resolve) => worker.once('exit', resolve))
    await worker.terminate()
    assert.equal(typeof (await exit), 'number')
    assertMainThreadWorks()
  })

  test('the main thread keeps working after all workers exited, across GCs', async () => {
    for (let i = 0; i < 3; i++) {
      if (typeof global.gc === 'function') global.gc()
      await new Promise((r) => setImmediate(r))
      assertMainThreadWorks()
    }
    const model = await torch.ScriptModule.load(MLP)
    const out = await model.forward(torch.fromBuffer(Float32Array.from(GOLDEN.input.data), GOLDEN.input.shape))
    assertClose(out.toTypedArray(), GOLDEN.output.data)
  })
})

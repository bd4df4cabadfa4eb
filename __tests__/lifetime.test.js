'use strict'
// Lifetime on the Node line running the suite (`.ci/run` runs it under 20, 22, 24 and 26):
// processes and workers exit promptly whatever they hold at the end; hostile arguments (getters
// and Proxies that throw) while tensors are being collected never bring a fatal error from a
// finalizer; no libtorch error outlives its call. Each case runs in a child process with a
// timeout, so a hang or an abort fails the test instead of the suite.
const { describe, test } = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const { nodeChild, exitLimit } = require('./helpers')

const ROOT = path.join(__dirname, '..')
const MLP = path.join(ROOT, 'models', 'fixtures', 'mlp_traced.pt')
const RESNET = path.join(ROOT, 'models', 'resnet18_traced.pt')

/**
 * Runs `source` (with `torch` in scope) in a child Node of this line. Resolves to
 * `{code, signal, stdout, stderr, lastWorkMs}`: `lastWorkMs` is how long the process lived after
 * it printed `LAST_WORK` (its last piece of work). Kills it after `timeoutMs`.
 */
function child(source, options) {
  return nodeChild(`const torch = require(${JSON.stringify(ROOT)});\n${source}`, options)
}

/**
 * Asserts a clean, prompt exit: code 0, no signal, no fatal or panic text, gone within `withinMs`
 * plus the machine's own exit time (`exitLimit`).
 */
async function assertExited(r, withinMs = 1000) {
  const info = `code ${r.code} signal ${r.signal}\nstdout: ${r.stdout.slice(-2000)}\nstderr: ${r.stderr.slice(-2000)}`
  assert.equal(r.signal, null, `killed (a hang?): ${info}`)
  assert.equal(r.code, 0, info)
  assert.doesNotMatch(r.stderr, /panicked|FATAL|Check failed|Segmentation|Aborted/, info)
  const limit = await exitLimit(withinMs)
  if (r.lastWorkMs !== null)
    assert.ok(r.lastWorkMs < limit, `exited ${r.lastWorkMs} ms after its last work (limit ${limit})\n${info}`)
}

describe(`processes exit promptly on Node ${process.versions.node}`, () => {
  const holdings = {
    'a tensor over borrowed JS memory': `
      const a = torch.fromBuffer(new Float32Array(1024).fill(1), [32, 32])
      const view = a.slice(0, 4).t()
      console.log(view.sum().item(), 'LAST_WORK')`,
    'a SharedArrayBuffer borrowed by several tensors': `
      const sab = new SharedArrayBuffer(64)
      const ts = [torch.fromBuffer(sab, [16]), torch.fromBuffer(new Float32Array(sab), [4, 4])]
      ts[0].fill_(2)
      console.log(ts[1].sum().item(), 'LAST_WORK')`,
    'a lent asTypedArray array': `
      const lent = torch.ones([256]).asTypedArray()
      const t = torch.arange(0, 8, { dtype: 'float32' })
      const alias = t.asTypedArray()
      t.dispose()
      console.log(lent[0] + alias[7], 'LAST_WORK')`,
    'a module and a finished forward over borrowed input': `
      ;(async () => {
        const m = await torch.ScriptModule.load(${JSON.stringify(MLP)})
        const out = await m.forward(torch.fromBuffer(new Float32Array(8), [2, 4]))
        console.log(out.shape, 'LAST_WORK')
      })()`,
    'a forward still in flight when the script ends': `
      const m = new torch.ScriptModule(${JSON.stringify(MLP)})
      const x = torch.fromBuffer(new Float32Array(8), [2, 4])
      m.forward(x).then((out) => console.log(out.shape, 'LAST_WORK'))`,
    'tensors freed by GC finalizers during the run': `
      for (let i = 0; i < 300; i++) torch.fromBuffer(new Float32Array(1 << 14), [1 << 14]).mul(2)
      global.gc()
      console.log('LAST_WORK')`,
  }
  for (const [what, source] of Object.entries(holdings)) {
    test(`a script holding ${what}`, async () => {
      await assertExited(await child(source, { args: ['--expose-gc'] }))
    })
  }

  test('a script whose last tensors are collected at exit while GC finalizers are enabled and disabled', async () => {
    const source = `
      const keep = []
      for (let i = 0; i < 50; i++) keep.push(torch.fromBuffer(new Float64Array(64), [8, 8]).t())
      console.log('LAST_WORK')`
    await assertExited(await child(source))
    const deferred = await child(source, { env: { TORCH_NODE_GC_FINALIZERS: '0' } })
    await assertExited(deferred)
  })
})

describe(`workers exit promptly on Node ${process.versions.node}`, () => {
  /** The parent script: starts a worker running `workerSource`, prints its exit code. */
  function parent(workerSource, afterStart = '') {
    return `
      const { Worker } = require('node:worker_threads')
      const w = new Worker(${JSON.stringify(`const torch = require(${JSON.stringify(ROOT)});\n`)} + ${JSON.stringify(workerSource)}, { eval: true })
      w.on('error', (e) => { console.error('worker error', e); process.exitCode = 1 })
      w.on('exit', (code) => console.log('worker exit', code, 'LAST_WORK'))
      ${afterStart}`
  }

  test('a worker that borrowed JS memory, lent an array and ran a module, then ended', async () => {
    const r = await child(
      parent(`
      const a = torch.fromBuffer(new Float32Array(64).fill(1), [8, 8])
      const lent = torch.ones([16]).asTypedArray()
      const m = new torch.ScriptModule(${JSON.stringify(MLP)})
      m.forward(torch.fromBuffer(new Float32Array(8), [2, 4])).then((out) => {
        require('node:worker_threads').parentPort.postMessage(a.sum().item() + lent[0] + out.shape[0])
      })`),
    )
    await assertExited(r)
    assert.match(r.stdout, /worker exit 0/)
  })

  test('a worker terminated during a forward over borrowed memory', async () => {
    const model = require('node:fs').existsSync(RESNET) ? RESNET : MLP
    const shape = model === RESNET ? [4, 3, 224, 224] : [2, 4]
    const r = await child(
      parent(
        `
      const { parentPort } = require('node:worker_threads')
      const m = new torch.ScriptModule(${JSON.stringify(model)})
      const n = ${JSON.stringify(shape)}.reduce((a, b) => a * b)
      const input = torch.fromBuffer(new Float32Array(n), ${JSON.stringify(shape)})
      let started = false
      ;(async () => {
        for (;;) {
          const p = m.forward(input)
          if (!started) { started = true; parentPort.postMessage('started') }
          await p
        }
      })()`,
        // A forward of the loop is queued or running whenever the worker's JS is interrupted.
        `w.once('message', () => w.terminate())`,
      ),
      { timeoutMs: 60_000 },
    )
    await assertExited(r, 3000)
    assert.match(r.stdout, /worker exit 1/)
  })

  test('a worker terminated in a synchronous fromBuffer loop', async () => {
    const r = await child(
      parent(
        `
      const { parentPort } = require('node:worker_threads')
      const arr = new Float32Array(3 * 64 * 64)
      for (let i = 0; ; i++) {
        torch.fromBuffer(arr, [3, 64, 64]).add_(1).mul(2).transpose(1, 2)
        // Said from inside the loop: it is running when the parent terminates it.
        if (i === 10) parentPort.postMessage('in the loop')
      }`,
        `w.once('message', () => w.terminate())`,
      ),
    )
    await assertExited(r)
    assert.match(r.stdout, /worker exit 1/)
  })
})

describe('no fatal error from finalizers when JS code throws inside a call', () => {
  test('20,000 hostile calls under GC pressure end with no crash, hang or stray exception', async () => {
    // Each call reads an argument through JS that throws (a getter, a Proxy trap, a throwing
    // iterator); the native side must return at once with that exception pending, while tensors
    // dropped on every iteration are being finalized during GC.
    const source = `
      const ITER = 20000
      const mark = new Error('user getter')
      const thrower = () => { throw mark }
      const trapAll = new Proxy({}, { get: thrower, has: thrower, ownKeys: thrower, getOwnPropertyDescriptor: thrower })
      const arrayProxy = new Proxy([1, 2], { get: (t, k) => (k === 'length' ? 2 : thrower()) })
      const getterOpts = { get dtype() { throw mark } }
      const m = new torch.ScriptModule(${JSON.stringify(MLP)})
      const base = torch.ones([4, 4])
      const calls = [
        () => torch.ones([2, 2], getterOpts),
        () => torch.zeros([2], trapAll),
        () => torch.fromBuffer(new Float32Array(8), [8], getterOpts),
        () => torch.fromBuffer(new Float32Array(8), [8], { get byteOffset() { throw mark } }),
        () => torch.tensor([1, 2, 3], getterOpts),
        () => torch.tensor([[1, 2], arrayProxy]),
        () => torch.tensor(arrayProxy),
        () => base.sum(arrayProxy),
        () => base.permute(arrayProxy),
        () => base.view(arrayProxy),
        () => base.to(getterOpts),
        () => m.forwardSync(trapAll),
        () => m.forwardSync({ a: 1, get b() { throw mark } }),
        () => m.forward([arrayProxy]),
        () => torch.ScriptModule.load(${JSON.stringify(MLP)}, getterOpts),
        () => torch.full([2], 1, getterOpts),
        () => torch.arange(0, 4, getterOpts),
      ]
      let ours = 0, theirs = 0, fine = 0
      const pending = []
      for (let i = 0; i < ITER; i++) {
        torch.ones([64, 64]).mul(2) // garbage with native memory: keeps GC and finalizers busy
        if (i % 97 === 0) global.gc()
        try {
          const r = calls[i % calls.length]()
          if (r && typeof r.then === 'function') pending.push(r.catch((e) => e))
          fine++
        } catch (e) {
          if (e === mark) ours++
          else theirs++
        }
      }
      Promise.all(pending).then((settled) => {
        console.log(JSON.stringify({ ours, theirs, fine, settled: settled.length }), 'LAST_WORK')
      })`
    const r = await child(source, { args: ['--expose-gc'], timeoutMs: 240_000 })
    await assertExited(r, 5000)
    const stats = JSON.parse(r.stdout.trim().split('\n').pop().replace(' LAST_WORK', ''))
    assert.ok(stats.ours > 10_000, `the user's own exception came back ${stats.ours} times: ${r.stdout}`)
  })
})

describe('no libtorch error outlives its call', () => {
  // Also the fatal of issue #6: with `--expose-gc` this loop died in 1 of 16 runs on Node 20
  // (2 of 30 on 22, 1 of 16 on 26) while errors were thrown from native code; see src/outcome.rs.
  test('failing ops (integer pow by negatives, bad clamp, CUDA without CUDA) then unrelated ops: no panic, no fatal', async () => {
    const r = await child(
      `
      const failures = [
        () => torch.tensor([1, 2, 3], { dtype: 'int64' }).pow(-1),
        () => torch.tensor([1, 2], { dtype: 'int32' }).pow_(-2),
        () => torch.arange(0, 1e20, 1),
        () => torch.full([2 ** 40, 2 ** 30], 1),
        () => torch.full([2], 1, { device: 'cuda' }),
        () => torch.arange(0, 4, 1, { device: 'cuda:3' }),
        () => torch.linspace(0, 1, 4, { device: 'cuda' }),
        () => torch.ones([2]).fill_(torch.ones([3])),
        () => torch.ones([2, 3]).matmul(torch.ones([2, 3])),
      ]
      let errors = 0
      for (let round = 0; round < 200; round++) {
        for (const f of failures) {
          try { f() } catch (e) { if (!e.code) throw e; errors++ }
          // Unrelated work that would trip over a pending error (tch's Scalar drop panics).
          torch.ones([3]).add(1).clamp(0, 1.5).pow(2).fill_(2)
          torch.arange(0, 5).sum().item()
        }
      }
      console.log(errors, 'LAST_WORK')`,
      { args: ['--expose-gc'] },
    )
    await assertExited(r)
    assert.equal(Number(r.stdout.split(' ')[0]), 200 * 9, r.stdout)
  })
})

describe('Symbol.dispose', () => {
  test('Tensor and ScriptModule dispose through Symbol.dispose; `using` works where the line has it (24+)', () => {
    const torch = require('..')
    const t = torch.ones([2])
    t[Symbol.dispose]()
    assert.ok(t.isDisposed)
    const m = new torch.ScriptModule(MLP)
    m[Symbol.dispose]()
    assert.ok(m.isDisposed)
    let hasUsing = true
    try {
      new Function('{ using x = null }')
    } catch {
      hasUsing = false
    }
    if (Number(process.versions.node.split('.')[0]) >= 24) assert.ok(hasUsing, 'Node 24+ has `using`')
    if (hasUsing) {
      const scoped = new Function(
        'torch',
        'path',
        `
        let seen
        { using t = torch.ones([3]); using m = new torch.ScriptModule(path); seen = [t, m] }
        return seen`,
      )
      const [t2, m2] = scoped(torch, MLP)
      assert.ok(t2.isDisposed && m2.isDisposed)
    }
  })
})

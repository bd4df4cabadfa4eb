'use strict'
// Memory accounting (`torch.memory()`) and bounded RSS: temporaries that are never disposed are
// freed by the garbage collector fast enough that a tight synchronous loop stays bounded; dispose
// and tidy keep it flat. The RSS loops run in child processes so each measurement is isolated.
const { describe, test } = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const { spawnSync } = require('node:child_process')
const torch = require('..')

const ROOT = path.join(__dirname, '..')
const MiB = 2 ** 20
const SHAPE = [1, 3, 224, 224]
const IMAGE_BYTES = 3 * 224 * 224 * 4

describe('memory() accounting', () => {
  test('a new tensor adds one tensor and its bytes; dispose takes them away', () => {
    const before = torch.memory()
    const t = torch.zeros([10, 10])
    const during = torch.memory()
    assert.equal(during.tensors, before.tensors + 1)
    assert.equal(during.bytes, before.bytes + 400)
    t.dispose()
    assert.deepEqual(torch.memory(), before)
    t.dispose() // idempotent: no double count
    assert.deepEqual(torch.memory(), before)
  })

  test('bytes follow the dtype', () => {
    const before = torch.memory()
    const tensors = [
      torch.zeros([8], { dtype: 'float64' }),
      torch.zeros([8], { dtype: 'int64' }),
      torch.zeros([8], { dtype: 'int16' }),
      torch.zeros([8], { dtype: 'bool' }),
    ]
    const during = torch.memory()
    assert.equal(during.tensors, before.tensors + 4)
    assert.equal(during.bytes, before.bytes + 64 + 64 + 16 + 8)
    for (const t of tensors) t.dispose()
    assert.deepEqual(torch.memory(), before)
  })

  test('a big tensor counts its full size', () => {
    const before = torch.memory()
    const t = torch.ones(SHAPE)
    assert.equal(torch.memory().bytes - before.bytes, IMAGE_BYTES)
    t.dispose()
    assert.equal(torch.memory().bytes, before.bytes)
  })

  test('views count as tensors but add no bytes; a view keeps its storage counted', () => {
    const base = torch.zeros([4, 4])
    const before = torch.memory()
    const views = [
      base.slice(0, 1),
      base.select(0, 2),
      base.t(),
      base.view(16),
      base.narrow(1, 0, 2),
      base.expand(2, 4, 4),
    ]
    const during = torch.memory()
    assert.equal(during.tensors, before.tensors + views.length)
    assert.equal(during.bytes, before.bytes)
    for (const v of views) v.dispose()
    assert.deepEqual(torch.memory(), before)
    // Disposing the base while a view lives: the view keeps the storage alive, so its bytes
    // stay counted (V8 keeps seeing them) until the view goes too.
    const v = base.slice(0, 2)
    base.dispose()
    assert.equal(torch.memory().bytes, before.bytes)
    assert.deepEqual(v.toArray(), [
      [0, 0, 0, 0],
      [0, 0, 0, 0],
    ])
    v.dispose()
    assert.equal(torch.memory().bytes, before.bytes - 64)
  })

  test('an operation result counts; a fromBuffer tensor counts its tensor', () => {
    const a = torch.ones([5])
    const before = torch.memory()
    const b = a.mul(2)
    assert.equal(torch.memory().tensors, before.tensors + 1)
    assert.equal(torch.memory().bytes, before.bytes + 20)
    b.dispose()
    const f = torch.fromBuffer(new Float32Array(5), [5])
    assert.equal(torch.memory().tensors, before.tensors + 1)
    f.dispose()
    assert.deepEqual(torch.memory(), before)
    a.dispose()
  })

  test('tidy leaves only what it returns', () => {
    const before = torch.memory()
    const kept = torch.tidy(() => {
      const x = torch.ones([10])
      const y = x.mul(3).add(1)
      return y.sub(1)
    })
    const after = torch.memory()
    assert.equal(after.tensors, before.tensors + 1)
    assert.equal(after.bytes, before.bytes + 40)
    assert.deepEqual(kept.toArray(), new Array(10).fill(3))
    kept.dispose()
    assert.deepEqual(torch.memory(), before)
  })

  test(
    'a dropped tensor leaves the count once collected',
    { skip: typeof global.gc !== 'function' && 'run with --expose-gc' },
    async () => {
      global.gc()
      await new Promise((r) => setImmediate(r))
      const before = torch.memory()
      ;(() => {
        torch.ones([1000])
      })()
      assert.equal(torch.memory().tensors, before.tensors + 1)
      let back = false
      for (let i = 0; i < 100 && !back; i++) {
        global.gc()
        await new Promise((r) => setTimeout(r, 5))
        back = torch.memory().tensors === before.tensors
      }
      assert.ok(back, `still ${torch.memory().tensors} tensors, expected ${before.tensors}`)
      assert.equal(torch.memory().bytes, before.bytes)
    },
  )
})

describe('memory() per thread, views counted by storage', () => {
  test("memory() counts this thread's tensors only, not a worker's", async () => {
    const { Worker } = require('node:worker_threads')
    const before = torch.memory()
    const w = new Worker(
      `
      const torch = require(${JSON.stringify(ROOT)})
      const keep = [torch.ones([1000]), torch.ones([1000])]
      require('node:worker_threads').parentPort.postMessage(torch.memory())
      setTimeout(() => keep.length, 200)`,
      { eval: true },
    )
    const inWorker = await new Promise((resolve, reject) => {
      w.once('message', resolve)
      w.once('error', reject)
    })
    assert.deepEqual(torch.memory(), before, "the worker's tensors are not counted here")
    assert.equal(inWorker.tensors, 2)
    assert.equal(inWorker.bytes, 8000)
    await new Promise((resolve) => w.once('exit', resolve))
  })

  test('tidy returning views of big temporaries: RSS stays bounded (views keep their storage counted)', () => {
    const code = `
      const torch = require(${JSON.stringify(ROOT)})
      const base = process.memoryUsage().rss
      let peak = base
      for (let i = 0; i < 1000; i++) {
        torch.tidy(() => torch.rand([1000, 1000]).select(0, 0))
        if (i % 10 === 0) peak = Math.max(peak, process.memoryUsage().rss)
      }
      console.log(JSON.stringify({ base, peak }))`
    const r = spawnSync(process.execPath, ['-e', code], { encoding: 'utf8', timeout: 120_000 })
    assert.equal(r.status, 0, r.stderr)
    const { base, peak } = JSON.parse(r.stdout.trim().split('\n').pop())
    // Each temporary is 4 MB; before, disposing the base hid the view's 4 MB from V8: 1.3 GB peak.
    assert.ok((peak - base) / MiB < 400, `RSS grew by ${((peak - base) / MiB).toFixed(0)} MiB`)
  })
})

/**
 * Runs a loop of `iterations` temporaries of shape 1×3×224×224 in a fresh Node process and
 * returns its RSS in MiB: `baseline` (right after loading torch-node and making one tensor) and
 * `peak` (the max of samples taken every 100 iterations, and at the end).
 */
function measure(mode, iterations, env = {}) {
  const body = {
    // Never disposed: the GC (finalizers run during collection) has to keep up.
    none: 'torch.ones(SHAPE).mul(2)',
    // Both tensors of the iteration disposed explicitly.
    dispose: 'const a = torch.ones(SHAPE); const t = a.mul(2); a.dispose(); t.dispose()',
    // Returns nothing, so tidy disposes both tensors (a returned tensor would escape it).
    tidy: 'torch.tidy(() => { torch.ones(SHAPE).mul(2) })',
  }[mode]
  const code = `
    const torch = require(${JSON.stringify(ROOT)})
    const SHAPE = ${JSON.stringify(SHAPE)}
    const first = torch.full(SHAPE, 2)
    const baseline = process.memoryUsage().rss
    let peak = baseline
    const start = Date.now()
    for (let i = 0; i < ${iterations}; i++) {
      ${body}
      if (i % 100 === 0) peak = Math.max(peak, process.memoryUsage().rss)
    }
    peak = Math.max(peak, process.memoryUsage().rss)
    const live = torch.memory()
    if (first.sum().item() !== ${2 * 3 * 224 * 224}) throw new Error('wrong result')
    console.log(JSON.stringify({ baseline, peak, ms: Date.now() - start, live }))
  `
  const r = spawnSync(process.execPath, ['-e', code], {
    env: { ...process.env, ...env },
    encoding: 'utf8',
    timeout: 120_000,
    maxBuffer: 1 << 20,
  })
  if (r.status !== 0) {
    throw new Error(`child (${mode}) exited with ${r.status} ${r.signal ?? ''}\n${r.stdout}\n${r.stderr}`)
  }
  const line = r.stdout.trim().split('\n').pop()
  const { baseline, peak, ms, live } = JSON.parse(line)
  return { baseline: baseline / MiB, peak: peak / MiB, growth: (peak - baseline) / MiB, ms, live }
}

const fmt = (m) =>
  `baseline ${m.baseline.toFixed(0)} MiB, peak ${m.peak.toFixed(0)} MiB ` +
  `(+${m.growth.toFixed(0)} MiB) in ${m.ms} ms`

// libtorch alone takes ~400 MiB of RSS once loaded, so the dispose/tidy bounds are on the growth
// above the baseline measured in the child right after loading torch-node and making a tensor.
describe('RSS stays bounded over 20,000 temporaries of 1×3×224×224 (child processes)', () => {
  const ITERATIONS = 20_000 // 2 tensors of 588 KiB per iteration: ~23 GiB allocated in all

  test('without dispose: peak RSS under 1 GiB', (t) => {
    const m = measure('none', ITERATIONS)
    t.diagnostic(`no dispose: ${fmt(m)}`)
    assert.ok(m.peak < 1024, `peak RSS ${m.peak.toFixed(0)} MiB >= 1024 MiB`)
  })

  // A leak is told exactly by the live-tensor count (only \`first\` is left); the RSS bound is
  // on what the native allocator keeps. Under load from other processes one CI run reached +311
  // MiB with dispose() and +304 with tidy, one of 10 runs beside a core burner +547 MiB with tidy
  // (V8's heap unchanged: the native allocator's), where quiet runs give +11..+40 MiB; leaking a
  // twentieth of the temporaries would be +1.1 GiB. Measured again once past the bound.
  const bounded = (t, mode) => {
    let m = measure(mode, ITERATIONS)
    t.diagnostic(`${mode}: ${fmt(m)}`)
    assert.deepEqual(m.live, { tensors: 1, bytes: 3 * 224 * 224 * 4 }, 'tensors left alive')
    if (m.growth >= 600) {
      m = measure(mode, ITERATIONS)
      t.diagnostic(`${mode}, measured again: ${fmt(m)}`)
    }
    assert.ok(m.growth < 600, `RSS grew by ${m.growth.toFixed(0)} MiB (>= 600) on two runs`)
  }

  test('with dispose(): no tensor left alive, RSS growth under 600 MiB above the baseline', (t) =>
    bounded(t, 'dispose'))

  test('with tidy: no tensor left alive, RSS growth under 600 MiB above the baseline', (t) => bounded(t, 'tidy'))
})

'use strict'
// torch-node's executor: every forward, load and image decode runs on its own native threads,
// never on libuv's pool (which fs, dns.lookup, zlib and crypto share), and the number of
// threads that enter libtorch stays instances × intra-op threads. Checked in child processes,
// where the thread pool and the executor settings are fresh. No test races work against the
// clock: the executor is held still with helpers.holdExecutor, libuv's workers with named pipes
// they block on (helpers.namedPipe), until the test has seen what it checks.
const { describe, test } = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const { spawnSync } = require('node:child_process')
const torch = require('..')

const ROOT = path.join(__dirname, '..')
const MLP = path.join(ROOT, 'models', 'fixtures', 'mlp_traced.pt')
const HELPERS = JSON.stringify(path.join(__dirname, 'helpers.js'))

/** Runs `code` in a child Node with `env` added; returns its last stdout line, parsed. */
function child(code, env = {}) {
  const r = spawnSync(
    process.execPath,
    ['--expose-gc', '-e', `const torch = require(${JSON.stringify(ROOT)});\n${code}`],
    {
      encoding: 'utf8',
      timeout: 120_000,
      env: { ...process.env, ...env },
    },
  )
  assert.equal(r.status, 0, `child failed (status ${r.status}, signal ${r.signal}):\n${r.stderr}`)
  return JSON.parse(r.stdout.trim().split('\n').pop())
}

// Threads of this process by name: libuv names its workers `libuv-worker`, ours are
// `torch-node`, and OpenMP's team threads inherit the name of the thread that started them.
const THREAD_NAMES = `
  const threadNames = () => require('node:fs').readdirSync('/proc/self/task').map((t) => {
    try { return require('node:fs').readFileSync('/proc/self/task/' + t + '/comm', 'utf8').trim() } catch { return '' }
  })
  const count = (name) => threadNames().filter((n) => n === name).length`

describe('executor', () => {
  test('settings: setInstances, setNumThreads, executorStats; bad values are InvalidArg', () => {
    const out = child(`
      const before = torch.executorStats()
      torch.setInstances(2)
      const two = torch.executorStats()
      torch.setNumThreads(1)
      console.log(JSON.stringify({ before, two, instances: torch.getInstances(), threads: torch.getNumThreads() }))`)
    assert.equal(out.before.instances, 1)
    assert.ok(out.before.threads >= 1)
    assert.equal(out.two.instances, 2)
    assert.equal(out.two.threads, Math.max(1, Math.floor(out.before.threads / 2)), 'default: cores ÷ instances')
    assert.equal(out.instances, 2)
    assert.equal(out.threads, 1)
    for (const bad of [0, -1, 1.5, 'two', 1e6]) {
      assert.throws(
        () => torch.setInstances(bad),
        (e) => e.code === 'InvalidArg' && /setInstances: n/.test(e.message),
        String(bad),
      )
    }
  })

  test('TORCH_NODE_INSTANCES sets the default instance count', () => {
    assert.equal(child('console.log(torch.getInstances())', { TORCH_NODE_INSTANCES: '3' }), 3)
  })

  test('sync and async calls run on torch-node threads: instances × threads of them, no OpenMP team elsewhere', () => {
    const out = child(`${THREAD_NAMES}
      torch.setInstances(1)
      torch.setNumThreads(2)
      ;(async () => {
        const m = new torch.ScriptModule(${JSON.stringify(MLP)})
        const x = torch.rand([4096, 4])
        for (let i = 0; i < 20; i++) { m.forwardSync(x); await m.forward(x) }
        await Promise.all(Array.from({ length: 20 }, () => m.forward(x)))
        torch.rand([1000, 1000]).matmul(torch.rand([1000, 1000])).sum() // on the JS thread: one thread
        console.log(JSON.stringify({ ours: count('torch-node'), libuv: count('libuv-worker'), names: threadNames() }))
      })()`)
    // The executor thread plus at most one OpenMP worker it started (2 intra-op threads).
    assert.ok(out.ours >= 1 && out.ours <= 2, `torch-node threads: ${out.ours} (${out.names})`)
    // libuv starts its pool lazily; none of its workers may have started an OpenMP team.
    assert.ok(out.libuv <= 4, `libuv threads: ${out.libuv} (${out.names})`)
  })

  test('forwards get through while every libuv thread is busy', () => {
    const out = child(
      `
      const fs = require('node:fs')
      const { namedPipe } = require(${HELPERS})
      // Each of libuv's 2 workers blocks opening a named pipe for reading until the pipe has a
      // writer, which it gets only once the forward and the image load have finished.
      const pipes = [namedPipe(), namedPipe()]
      const order = []
      const busy = pipes.map((p) => fs.promises.open(p.path, 'r').then((fd) => { order.push('pool'); return fd.close() }))
      const m = new torch.ScriptModule(${JSON.stringify(MLP)})
      const work = [
        m.forward(torch.rand([2, 4])).then(() => order.push('forward')),
        torch.image.load(${JSON.stringify(path.join(ROOT, 'data', 'chelsea.png'))}).then(() => order.push('image')),
      ]
      Promise.all(work)
        .then(() => {
          // Opening for writing returns at once: each pipe's reader is already waiting.
          for (const p of pipes) fs.closeSync(fs.openSync(p.path, 'w'))
          return Promise.all(busy)
        })
        .then(() => {
          for (const p of pipes) p.remove()
          console.log(JSON.stringify(order))
        })`,
      { UV_THREADPOOL_SIZE: '2' },
    )
    assert.deepEqual(out.slice(-2), ['pool', 'pool'], `the forward and the image waited for libuv's pool: ${out}`)
    assert.deepEqual(out.slice(0, 2).sort(), ['forward', 'image'])
  })

  test('a file read is not starved by queued forwards', () => {
    const out = child(`
      const { holdExecutor } = require(${HELPERS})
      ;(async () => {
        const m = new torch.ScriptModule(${JSON.stringify(MLP)})
        const x = torch.rand([8, 4])
        const hold = await holdExecutor(torch)
        let done = 0
        const all = Array.from({ length: 6 }, () => m.forward(x).then(() => done++))
        await require('node:fs').promises.readFile(${JSON.stringify(__filename)})
        const seen = { done, queued: torch.executorStats().queued }
        await hold.release()
        await Promise.all(all)
        console.log(JSON.stringify({ ...seen, total: done }))
      })()`)
    // The six forwards wait on the executor, none on libuv's pool: the read did not wait for them.
    assert.deepEqual(out, { done: 0, queued: 6, total: 6 })
  })

  test('an abort while queued rejects at once; the queued call never runs', () => {
    const out = child(`
      const { holdExecutor } = require(${HELPERS})
      ;(async () => {
        const m = new torch.ScriptModule(${JSON.stringify(MLP)})
        const x = torch.rand([2, 4])
        const hold = await holdExecutor(torch)
        const events = []
        const first = m.forward(x).then(() => events.push('first'))
        const ac = new AbortController()
        const queued = m.forward(x, { signal: ac.signal }).then(() => events.push('queued resolved'), (e) => events.push('queued ' + e.code))
        ac.abort()
        await new Promise((resolve) => setImmediate(resolve))
        const whileHeld = [...events]
        await hold.release()
        await Promise.all([first, queued])
        console.log(JSON.stringify({ whileHeld, events }))
      })()`)
    assert.deepEqual(out, { whileHeld: ['queued Aborted'], events: ['queued Aborted', 'first'] })
  })

  test("a worker terminated while its forward runs: its teardown waits for the forward (the input is the worker's memory)", () => {
    const out = child(`
      const { Worker } = require('node:worker_threads')
      const results = []
      const once = () => new Promise((resolve) => {
        const w = new Worker(\`
          const torch = require(${JSON.stringify(ROOT)})
          const { parentPort } = require('node:worker_threads')
          const m = new torch.ScriptModule(${JSON.stringify(MLP)})
          const input = torch.fromBuffer(new Float32Array((1 << 21) * 4).fill(1), [1 << 21, 4])
          m.forward(input)
          parentPort.postMessage('started')
        \`, { eval: true })
        w.once('message', () => w.terminate())
        w.once('exit', resolve)
      })
      const { until } = require(${HELPERS})
      ;(async () => {
        for (let i = 0; i < 3; i++) await once()
        await until(() => torch.executorStats().running === 0)
        console.log(JSON.stringify(torch.executorStats()))
      })()`)
    // Before the fix the forward kept reading the worker's freed ArrayBuffer after it exited
    // (SIGSEGV at times, on Node 22: child() asserts a clean exit); now the worker's exit waits
    // until it has finished (the next test sees that order). The executor counts a job as
    // running until its closure has returned, a moment after it let the worker go: so the
    // count is read once it settles, not at the exit event.
    assert.deepEqual([out.running, out.queued], [0, 0], JSON.stringify(out))
  })

  test('a worker terminated while its call runs: its exit waits for the call, then its queue is dropped', () => {
    const out = child(`
      const fs = require('node:fs')
      const { Worker } = require('node:worker_threads')
      const { namedPipe, until } = require(${HELPERS})
      const pipe = namedPipe()
      ;(async () => {
        const w = new Worker(\`
          const torch = require(${JSON.stringify(ROOT)})
          const { parentPort } = require('node:worker_threads')
          const m = new torch.ScriptModule(${JSON.stringify(MLP)})
          // Runs on the executor and blocks reading the pipe until the parent writes to it.
          torch.image.load(\${JSON.stringify(pipe.path)}).catch(() => {})
          // Queued behind it, over the worker's own memory: skipped once the worker is gone.
          m.forward(torch.fromBuffer(new Float32Array(8).fill(1), [2, 4]))
          parentPort.postMessage('started')
        \`, { eval: true })
        let exited = false
        const exit = new Promise((resolve) => w.once('exit', () => resolve(exited = true)))
        await new Promise((resolve) => w.once('message', resolve))
        await until(() => torch.executorStats().running === 1 && torch.executorStats().queued === 1)
        w.terminate()
        for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve))
        const whileRunning = { exited, ...torch.executorStats() }
        await fs.promises.writeFile(pipe.path, '')
        await exit
        pipe.remove()
        await until(() => torch.executorStats().queued === 0 && torch.executorStats().running === 0)
        console.log(JSON.stringify({ whileRunning }))
      })()`)
    // The worker's teardown waited for its running call (the load): it cannot have exited before.
    assert.deepEqual([out.whileRunning.exited, out.whileRunning.running], [false, 1], JSON.stringify(out))
  })

  test('the process exits once async work completes, and waits for it', () => {
    const out = spawnSync(
      process.execPath,
      [
        '-e',
        `
      const torch = require(${JSON.stringify(ROOT)})
      torch.ScriptModule.load(${JSON.stringify(MLP)}).then((m) => m.forward(torch.ones([2, 4]))).then((y) => console.log(y.shape.join('x')))`,
      ],
      {
        encoding: 'utf8',
        timeout: 60_000,
      },
    )
    assert.equal(out.status, 0, out.stderr)
    assert.equal(out.stdout.trim(), '2x3')
  })
})

'use strict'
// torch-node's executor: every forward, load and image decode runs on its own native threads,
// never on libuv's pool (which fs, dns.lookup, zlib and crypto share), and the number of
// threads that enter libtorch stays instances × intra-op threads. Checked in child processes,
// where the thread pool and the executor settings are fresh.
const { describe, test } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { spawnSync } = require('node:child_process')
const torch = require('..')

const ROOT = path.join(__dirname, '..')
const MLP = path.join(ROOT, 'models', 'fixtures', 'mlp_traced.pt')
const RESNET = path.join(ROOT, 'models', 'resnet18_traced.pt')

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
      const crypto = require('node:crypto')
      const m = new torch.ScriptModule(${JSON.stringify(MLP)})
      const x = torch.rand([2, 4])
      // Size the hashing so one call takes about 2 s here (measured on this thread first).
      let t0 = performance.now(); crypto.pbkdf2Sync('p', 's', 20000, 32, 'sha512')
      const iterations = Math.ceil(20000 * 2000 / Math.max(1, performance.now() - t0))
      const order = []
      const busy = Array.from({ length: 2 }, () => new Promise((resolve) =>
        crypto.pbkdf2('p', 's', iterations, 32, 'sha512', () => { order.push('pool'); resolve() })))
      m.forward(x).then(() => order.push('forward'))
      torch.image.load(${JSON.stringify(path.join(ROOT, 'data', 'chelsea.png'))}).then(() => order.push('image'))
      Promise.all(busy).then(() => console.log(JSON.stringify(order)))`,
      { UV_THREADPOOL_SIZE: '2' },
    )
    assert.deepEqual(out.slice(-2), ['pool', 'pool'], `the forward and the image waited for libuv's pool: ${out}`)
    assert.deepEqual(out.slice(0, 2).sort(), ['forward', 'image'])
  })

  test(
    'a file read is not starved by queued forwards',
    { skip: !fs.existsSync(RESNET) && 'models/resnet18_traced.pt not generated' },
    () => {
      const out = child(`
      const m = new torch.ScriptModule(${JSON.stringify(RESNET)})
      const x = torch.rand([8, 3, 224, 224])
      let done = 0
      const all = Array.from({ length: 6 }, () => m.forward(x).then(() => done++))
      require('node:fs').promises.readFile(${JSON.stringify(__filename)}).then(() => {
        const seen = done
        Promise.all(all).then(() => console.log(JSON.stringify({ doneWhenRead: seen, total: done })))
      })`)
      assert.equal(out.total, 6)
      assert.ok(out.doneWhenRead < 6, `the read waited for ${out.doneWhenRead} of 6 forwards`)
    },
  )

  test('an abort while queued rejects at once; the queued call never runs', () => {
    const out = child(`
      const m = new torch.ScriptModule(${JSON.stringify(MLP)})
      const big = torch.rand([1 << 21, 4])
      const events = []
      const first = m.forward(big).then(() => events.push('first'))
      const ac = new AbortController()
      const queued = m.forward(big, { signal: ac.signal }).then(() => events.push('queued resolved'), (e) => events.push('queued ' + e.code))
      setImmediate(() => ac.abort())
      Promise.all([first, queued]).then(() => console.log(JSON.stringify({ events })))`)
    assert.deepEqual(out.events, ['queued Aborted', 'first'])
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
        w.once('exit', () => { results.push(torch.executorStats()); resolve() })
      })
      ;(async () => { for (let i = 0; i < 3; i++) await once(); console.log(JSON.stringify(results)) })()`)
    // Before the fix the forward kept reading the worker's freed ArrayBuffer after it exited
    // (SIGSEGV at times, on Node 22); now the worker's exit waits until it has finished.
    for (const s of out) assert.equal(s.running, 0, JSON.stringify(out))
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

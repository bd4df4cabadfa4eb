'use strict'
// Concurrency and sustained load: many async forwards on one module at once, disposal while
// they are in flight, forwards from several worker threads, and RSS over 10,000 async forwards.
// Results must equal the serial ones exactly: every call has the same input shape, so the same
// kernels and the same arithmetic (across batch sizes they would differ in the last bits).
const { describe, test } = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const { spawnSync } = require('node:child_process')
const { Worker } = require('node:worker_threads')
const torch = require('..')

const ROOT = path.join(__dirname, '..')
const MLP = path.join(ROOT, 'models', 'fixtures', 'mlp_traced.pt')

/** Input i: a [2, 4] tensor whose values depend on i. */
const input = (i) => torch.arange(0, 8, { dtype: 'float32' }).add(i).div(10).view([2, 4])

describe('concurrency and sustained load', () => {
  test('200 concurrent async forwards on one module equal the serial results', async () => {
    const m = await torch.ScriptModule.load(MLP)
    const serial = Array.from({ length: 200 }, (_, i) => m.forwardSync(input(i)).toArray())
    const outs = await Promise.all(Array.from({ length: 200 }, (_, i) => m.forward(input(i))))
    outs.forEach((o, i) => assert.deepEqual(o.toArray(), serial[i], `call ${i}`))
  })

  test('disposing the module and the inputs while forwards are in flight: they all resolve', async () => {
    const m = await torch.ScriptModule.load(MLP)
    const expected = m.forwardSync(input(1)).toArray()
    const inputs = Array.from({ length: 50 }, () => input(1))
    const pending = inputs.map((x) => m.forward(x))
    inputs.forEach((x) => x.dispose())
    m.dispose()
    for (const o of await Promise.all(pending)) assert.deepEqual(o.toArray(), expected)
    assert.throws(
      () => m.forwardSync(input(1)),
      (e) => e.code === 'Disposed',
    )
  })

  test('forwards from 4 worker threads at once equal the serial results', async () => {
    const m = new torch.ScriptModule(MLP)
    const serial = Array.from({ length: 20 }, (_, i) => m.forwardSync(input(i)).toArray())
    const runs = await Promise.all(
      [0, 1, 2, 3].map(
        () =>
          new Promise((resolve, reject) => {
            const w = new Worker(
              `
        const torch = require(${JSON.stringify(ROOT)})
        const { parentPort } = require('node:worker_threads')
        const input = ${input.toString()}
        ;(async () => {
          const m = await torch.ScriptModule.load(${JSON.stringify(MLP)})
          const outs = await Promise.all(Array.from({ length: 20 }, (_, i) => m.forward(input(i))))
          parentPort.postMessage(outs.map((o) => o.toArray()))
        })()`,
              { eval: true },
            )
            w.once('message', resolve)
            w.once('error', reject)
          }),
      ),
    )
    for (const outs of runs) assert.deepEqual(outs, serial)
  })

  test('10,000 async forwards: no tensor left alive, RSS grows less than 5% after warm-up (child process)', () => {
    const code = `
      const torch = require(${JSON.stringify(ROOT)})
      ;(async () => {
        const m = await torch.ScriptModule.load(${JSON.stringify(MLP)})
        const x = torch.rand([64, 4])
        const round = async (n) => {
          for (let i = 0; i < n; i += 100) {
            const outs = await Promise.all(Array.from({ length: 100 }, () => m.forward(x)))
            for (const o of outs) o.dispose()
          }
        }
        // Warm-up: allocator pools, the executor and JS queue, JIT caches; RSS levels off after
        // about 10,000 calls (measured: +6.0 MiB at 10k, +8.3 at 30k, +8.9 from 40k to 60k).
        await round(10000)
        global.gc()
        const warm = process.memoryUsage().rss
        await round(10000)
        global.gc()
        console.log(JSON.stringify({ warm, after: process.memoryUsage().rss, live: torch.memory() }))
      })()`
    const measure = () => {
      const r = spawnSync(process.execPath, ['--expose-gc', '-e', code], { encoding: 'utf8', timeout: 180_000 })
      assert.equal(r.status, 0, r.stderr)
      const { warm, after, live } = JSON.parse(r.stdout.trim().split('\n').pop())
      return { growth: (after - warm) / warm, warm, after, live }
    }
    // A leak is told exactly by the live tensors (only `x` is left). RSS also carries what the
    // native allocator keeps, which moved +7.6% once under CI's load (Node 26; quiet runs
    // +1..3%): the bound must hold on one of two runs.
    let m = measure()
    assert.deepEqual(m.live, { tensors: 1, bytes: 64 * 4 * 4 }, 'tensors left alive')
    if (m.growth >= 0.05) m = measure()
    assert.ok(
      m.growth < 0.05,
      `RSS grew ${(m.growth * 100).toFixed(1)}% (${(m.warm / 2 ** 20).toFixed(0)} -> ${(m.after / 2 ** 20).toFixed(0)} MiB) on two runs`,
    )
  })
})

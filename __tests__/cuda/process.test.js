'use strict'
// CUDA across threads and at exit: worker threads running CUDA forwards beside the main thread,
// and process.exit() while a CUDA forward runs (the process must exit with its code, not hang or
// crash in CUDA's teardown). Each case runs in a child process. Skips without CUDA.
const { test } = require('node:test')
const assert = require('node:assert/strict')
const { spawnSync } = require('node:child_process')
const { PACKAGE, skipFixtures: skip, fixture, golden } = require('./common')

/** Runs `source` (CommonJS, `torch` in scope) in a child Node; returns its status and output. */
function child(source, env = {}) {
  const code = `const torch = require(${JSON.stringify(PACKAGE)});\n${source}`
  const r = spawnSync(process.execPath, ['-e', code], {
    encoding: 'utf8',
    env: { ...process.env, ...env },
    timeout: 120_000,
  })
  return { status: r.status, signal: r.signal, stdout: r.stdout, stderr: r.stderr }
}

test('worker threads run CUDA forwards beside the main thread, with the same results', { skip }, () => {
  const r = child(
    `
    const { Worker } = require('node:worker_threads')
    const input = ${JSON.stringify(golden.conv.input)}
    const work = \`
      const torch = require(${JSON.stringify(PACKAGE)})
      const { parentPort, workerData } = require('node:worker_threads')
      ;(async () => {
        const m = await torch.ScriptModule.load(workerData.file, { device: 'cuda' })
        let y
        for (let i = 0; i < 20; i++) y = await m.forward(torch.tensor(workerData.input, { device: 'cuda' }))
        parentPort.postMessage(y.toArray())
        m.dispose()
      })()
    \`
    ;(async () => {
      const workers = [0, 1, 2].map(() => new Worker(work, { eval: true, workerData: { file: ${JSON.stringify(fixture('traced.pt'))}, input } }))
      const m = await torch.ScriptModule.load(${JSON.stringify(fixture('traced.pt'))}, { device: 'cuda' })
      const mine = (await m.forward(torch.tensor(input, { device: 'cuda' }))).toArray()
      const theirs = await Promise.all(workers.map((w) => new Promise((resolve, reject) => { w.once('message', resolve); w.once('error', reject) })))
      await Promise.all(workers.map((w) => new Promise((resolve) => w.once('exit', resolve))))
      console.log(JSON.stringify({ mine, theirs }))
    })().catch((e) => { console.error(e); process.exit(1) })
    `,
  )
  assert.equal(r.status, 0, `status ${r.status} signal ${r.signal}: ${r.stderr}`)
  const { mine, theirs } = JSON.parse(r.stdout.trim().split('\n').pop())
  assert.equal(theirs.length, 3)
  for (const t of theirs) assert.deepEqual(t, mine)
})

test('process.exit() while a CUDA forward runs exits with its code', { skip }, () => {
  const r = child(
    `
    ;(async () => {
      const m = await torch.AOTModule.load(${JSON.stringify(fixture('conv-cuda.pt2'))}, { device: 'cuda' })
      const x = torch.randn([64, 3, 8, 8], { device: 'cuda' }) // the package's input shape
      const calls = Array.from({ length: 2000 }, () => m.forward(x)) // seconds of work queued
      calls.forEach((p) => p.catch(() => {}))
      while (torch.executorStats().running === 0) await new Promise((resolve) => setImmediate(resolve))
      console.log('exiting while running')
      process.exit(7)
    })().catch((e) => { console.error(e); process.exit(1) })
    `,
  )
  assert.equal(r.signal, null, `killed by ${r.signal} (a hang or crash at exit): ${r.stderr}`)
  assert.equal(r.status, 7, r.stderr)
  assert.match(r.stdout, /exiting while running/)
})

test('process.exit() during a CUDA TorchScript forward in a worker exits with its code', { skip }, () => {
  const r = child(
    `
    const { Worker } = require('node:worker_threads')
    const work = \`
      const torch = require(${JSON.stringify(PACKAGE)})
      const { parentPort } = require('node:worker_threads')
      ;(async () => {
        const m = await torch.ScriptModule.load(${JSON.stringify(fixture('traced.pt'))}, { device: 'cuda' })
        const x = torch.randn([256, 3, 224, 224], { device: 'cuda' })
        await m.forward(x)
        parentPort.postMessage('ran one')
        for (;;) await m.forward(x)
      })()
    \`
    const w = new Worker(work, { eval: true })
    w.once('message', () => process.exit(5)) // its next forward is queued or running
    `,
  )
  assert.equal(r.signal, null, `killed by ${r.signal}: ${r.stderr}`)
  assert.equal(r.status, 5, r.stderr)
})

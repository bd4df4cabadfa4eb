'use strict'
// Shared by the test files (not a test file itself: npm test runs *.test.js).
const assert = require('node:assert/strict')
const { execFileSync, spawn, spawnSync } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { httpGet, tritonEnv, writePythonBackendModel, TWO_IO } = require('../tools/triton-env')
const { coded } = require('./coded')

/**
 * Waits until `ready()` holds, checking between turns of the event loop: how a test waits for an
 * observable state (a Batcher's or the executor's stats, a call recorded by a fake module) instead
 * of for some milliseconds. No deadline of its own: the test's `timeout` bounds the wait, so a slow
 * or busy machine waits longer instead of failing.
 * @param {() => boolean} ready
 */
async function until(ready) {
  while (!ready()) await new Promise((resolve) => setTimeout(resolve, 1))
}

/**
 * Whether `promise` has settled, once the callbacks due now have run: 'pending', 'fulfilled' or
 * 'rejected'. For "rejected at once" (an abort listener settles its promise inside `abort()`) and
 * "still pending" (behind a hold): both are facts by then, not races. Call it in the same turn as
 * whatever may reject the promise (for several, `Promise.all(promises.map(stateOf))`): it is also
 * the promise's rejection handler.
 */
async function stateOf(promise) {
  let state = 'pending'
  promise.then(
    () => (state = 'fulfilled'),
    () => (state = 'rejected'),
  )
  await new Promise((resolve) => setImmediate(resolve))
  return state
}

/**
 * A fresh named pipe (mkfifo(1); POSIX). Opening it for reading blocks the opening thread until
 * a writer opens it, and a read then blocks until every writer has closed it: a way to hold a
 * thread (an executor instance, a libuv worker) until the test lets it go. `remove()` deletes it.
 */
function namedPipe() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'torch-node-pipe-'))
  const pipe = path.join(dir, 'pipe')
  execFileSync('mkfifo', [pipe])
  return { path: pipe, remove: () => fs.rmSync(dir, { recursive: true, force: true }) }
}

/**
 * Holds torch-node's executor (its one instance, the default) until `release()`, so that the
 * calls a test makes meanwhile wait in the executor's queue, where `torch.executorStats().queued`
 * counts them: a queued call then stays queued for as long as the test needs, whatever the
 * machine's speed. The hold is the public API's own work: a `torch.image.load` of a named pipe,
 * whose read blocks the instance until `release()` closes the pipe (the load then fails, as an
 * empty file would, and is dropped). Resolves once the hold runs (none queued, one running).
 * `release()` resolves once the instance is past the hold; calling it again is harmless.
 * @param {typeof import('..')} torch
 */
async function holdExecutor(torch) {
  assert.equal(torch.getInstances(), 1, 'holdExecutor holds the one executor instance: setInstances(1)')
  const pipe = namedPipe()
  const load = torch.image.load(pipe.path).then(
    () => assert.fail('a load of an empty pipe succeeded'),
    (e) => e,
  )
  await until(() => {
    const s = torch.executorStats()
    return s.queued === 0 && s.running === 1
  })
  let released = null
  return {
    release() {
      released ??= (async () => {
        // Opens the pipe for writing (the instance is blocked opening it for reading) and closes
        // it: the instance reads an empty file and goes on with its queue.
        await fs.promises.writeFile(pipe.path, '')
        await load
        pipe.remove()
      })()
      return released
    },
  }
}

/**
 * Runs `cmd` with `env` over this process's environment; resolves to {code, signal, stdout,
 * stderr} and kills it at `timeoutMs`. spawn(), not spawnSync: a server in this process (for
 * instance torch.oip.serve answering the child) and its timers go on running meanwhile.
 */
function runChild(cmd, args, env, timeoutMs) {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    child.stdout.setEncoding('utf8').on('data', (c) => {
      stdout += c
    })
    child.stderr.setEncoding('utf8').on('data', (c) => {
      stderr += c
    })
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs)
    child.on('close', (code, signal) => {
      clearTimeout(timer)
      resolve({ code, signal, stdout, stderr })
    })
  })
}

/**
 * Runs the script `code` with `node -e` in a child of this Node line (`args` before `-e`, `env`
 * over this process's), from the repository root. Resolves to `{code, signal, stdout, stderr,
 * lastWorkMs}`: `lastWorkMs`, how long it lived after first printing `LAST_WORK` (null if it
 * never did). Killed at `timeoutMs`: a hang ends as signal SIGKILL.
 */
function nodeChild(code, { timeoutMs = 30_000, args = [], env = {} } = {}) {
  return new Promise((resolve) => {
    const root = path.join(__dirname, '..')
    const p = spawn(process.execPath, [...args, '-e', code], { cwd: root, env: { ...process.env, ...env } })
    let stdout = ''
    let stderr = ''
    let lastWork = null
    p.stdout.on('data', (d) => {
      stdout += d
      if (lastWork === null && stdout.includes('LAST_WORK')) lastWork = Date.now()
    })
    p.stderr.on('data', (d) => {
      stderr += d
    })
    const timer = setTimeout(() => p.kill('SIGKILL'), timeoutMs)
    p.on('close', (code, signal) => {
      clearTimeout(timer)
      resolve({ code, signal, stdout, stderr, lastWorkMs: lastWork === null ? null : Date.now() - lastWork })
    })
  })
}

let baseline = null
/**
 * How long a child that loaded torch and did nothing lives after its `LAST_WORK` on this machine
 * now (the slowest of 3; measured once per test file): Node's and libtorch's own teardown, which
 * a loaded machine stretches. The exit tests allow `withinMs` plus 5 times it, so they catch an
 * exit held up by work (a step, a thread join) without racing the machine's load.
 * @returns {Promise<number>}
 */
function exitBaseline() {
  baseline ??= (async () => {
    const code = `require(${JSON.stringify(path.join(__dirname, '..'))}).ones([2]).sum().item(); console.log('LAST_WORK')`
    let worst = 0
    for (let i = 0; i < 3; i++) worst = Math.max(worst, (await nodeChild(code)).lastWorkMs ?? 0)
    return worst
  })()
  return baseline
}

/** The exit limit for `withinMs` on this machine now (`exitBaseline`). */
async function exitLimit(withinMs) {
  return withinMs + 5 * (await exitBaseline())
}

/**
 * Runs the script `code` in a child Node (`nodeArgs` before `-e`) and returns the value it last
 * printed as a line `OUT <json>`, after asserting that it exited cleanly with no panic or fatal
 * error: how the hostile tests prove that a call ends in a coded error, never a crash.
 */
function childOut(code, { timeout, nodeArgs = [] }) {
  const r = spawnSync(process.execPath, [...nodeArgs, '-e', code], { encoding: 'utf8', timeout, maxBuffer: 16 << 20 })
  const info = `status ${r.status} signal ${r.signal}\n${r.stdout.slice(-3000)}\n${r.stderr.slice(-3000)}`
  assert.equal(r.signal, null, info)
  assert.equal(r.status, 0, info)
  assert.doesNotMatch(r.stderr, /panicked|FATAL|Check failed/, info)
  const line = r.stdout
    .split('\n')
    .reverse()
    .find((l) => l.startsWith('OUT '))
  assert.ok(line, info)
  return JSON.parse(line.slice(4))
}

/** Triton's statistics for `model` on a startTriton() server: inference_count (requests' rows), execution_count, ... */
async function tritonStats(server, model) {
  const r = await httpGet(`${server.httpUrl}/v2/models/${model}/stats`, 10_000)
  assert.equal(r.status, 200, r.body)
  return JSON.parse(r.body).model_stats[0]
}

/**
 * Triton's statistics for `model` once they count `count` more inferences than `before` (or
 * after 5 s): Triton counts an execution after it has sent its responses.
 */
async function tritonStatsAfter(server, model, before, count) {
  let now = await tritonStats(server, model)
  for (let i = 0; i < 50 && now.inference_count - before.inference_count < count; i++) {
    await new Promise((resolve) => setTimeout(resolve, 100))
    now = await tritonStats(server, model)
  }
  return now
}

/** The Triton suites' environment (tools/triton-env.js) and why they skip, when they do. */
function tritonSuite(resnet) {
  const env = tritonEnv()
  const skip =
    mainLineOnly("the peers' interop (oip.test.js runs RemoteModule and oip.serve over HTTP and gRPC)") ||
    (!env.ok ? env.reason : !fs.existsSync(resnet) ? 'models/resnet18_traced.pt not generated (npm run models)' : null)
  return { env, skip }
}

/**
 * Writes the model repository the Triton suites serve through the Python backend: `resnet18`
 * ([3, 224, 224] -> [1000], up to 8 a batch), `two_io` (two [-1] FP32 in, two out) and
 * `text_encoder` ((ids int64 [B, L], mask bool [B, L]) -> (hidden [B, L, 8], pooled [B, 8])).
 * `twoIoDynamicBatching`: whether Triton may batch two_io's requests too.
 */
function writeTritonTestModels(repo, { resnet, twoIo, textEncoder, twoIoDynamicBatching = false }) {
  // A long queue delay, so that concurrent requests meet in one batch even on a busy machine.
  writePythonBackendModel(repo, 'resnet18', {
    ptPath: resnet,
    inputs: [{ datatype: 'FP32', dims: [3, 224, 224] }],
    outputs: [{ datatype: 'FP32', dims: [1000] }],
    maxBatchSize: 8,
    dynamicBatching: { maxQueueDelayMicroseconds: 100_000 },
  })
  writePythonBackendModel(repo, 'two_io', {
    ptPath: twoIo,
    ...TWO_IO,
    maxBatchSize: 8,
    dynamicBatching: twoIoDynamicBatching,
  })
  writePythonBackendModel(repo, 'text_encoder', {
    ptPath: textEncoder,
    inputs: [
      { datatype: 'INT64', dims: [-1] },
      { datatype: 'BOOL', dims: [-1] },
    ],
    outputs: [
      { datatype: 'FP32', dims: [-1, 8] },
      { datatype: 'FP32', dims: [8] },
    ],
    maxBatchSize: 4,
  })
  return repo
}

/**
 * Runs `node bench/<script> --tiny --out <a fresh folder>/nested/<resultsName>` and asserts it
 * ended on its own with status 0 and said it wrote the file; then hands `check` its stdout and
 * the file. The folder is removed after.
 */
function runTinyBench(script, resultsName, timeoutMs, check) {
  const root = path.join(__dirname, '..')
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'torch-node-bench-'))
  const out = path.join(dir, 'nested', resultsName)
  try {
    const r = spawnSync(process.execPath, [path.join(root, 'bench', script), '--tiny', '--out', out], {
      cwd: root,
      encoding: 'utf8',
      timeout: timeoutMs,
    })
    assert.equal(r.signal, null, `killed by ${r.signal} (hung?)\n${r.stdout}\n${r.stderr}`)
    assert.equal(r.status, 0, `exit ${r.status}\n${r.stdout}\n${r.stderr}`)
    assert.match(r.stdout, new RegExp(`^wrote ${out.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} `, 'm'))
    check(r.stdout, fs.readFileSync(out, 'utf8'))
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
}

/**
 * Asserts that a finished child (`{code, signal, stdout, stderr}`) exited 0; else fails with the
 * ends of its output.
 * @param {{code: number | null, signal?: string | null, stdout: string, stderr: string}} r @param {string} what
 */
function assertExited0(r, what) {
  assert.equal(r.code, 0, `${what}: exit ${r.code ?? r.signal}\n${r.stdout.slice(-2000)}\n${r.stderr.slice(-2000)}`)
}

/**
 * A skip reason under another Node line than the main one (`npm run test:node -- 24`), for the
 * tests whose subject does not depend on the Node line (`what`: the benches, a real peer's
 * interop, Python's exporters): they run on the main line (`npm test`); the Node side they use
 * is tested on every line by other tests. False on the main line.
 */
function mainLineOnly(what) {
  const line = process.env.TORCH_NODE_TEST_LINE
  return !!line && `${what}: tested on the main line (npm test), not again under Node ${line}`
}

module.exports = {
  exitLimit,
  mainLineOnly,
  coded,
  until,
  stateOf,
  namedPipe,
  holdExecutor,
  runChild,
  nodeChild,
  childOut,
  tritonStats,
  tritonStatsAfter,
  tritonSuite,
  writeTritonTestModels,
  runTinyBench,
  assertExited0,
}

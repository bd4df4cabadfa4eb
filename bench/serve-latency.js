'use strict'
// Batch-1 latency of one ResNet-18 forward, side by side in a fresh process, for the targets of
// `npm run bench:serve` (bench/serve.js runs this as a child and reads the JSON it prints last):
// `await model.forward(x)` (on torch-node's executor) against `model.forwardSync(x)` on the same
// module, and against Python's torch.jit.load + inference_mode on the same file
// (bench/torchscript_child.py, a persistent child timing its own calls with perf_counter).
//
//   node bench/serve-latency.js [--rounds 30] [--warmup 3] [--gap-ms 10] [--threads N] [--no-python]
//
// Interleaved rounds as bench/compare.js runs them: each round times every contender once, in an
// order rotated by one each round, `gap-ms` apart; the ratios are the medians of the per-round
// ratios (drift in the machine's speed hits both sides of a round alike).
const fs = require('node:fs')
const path = require('node:path')
const torch = require('..')
const { options, runMain } = require('./cli')
const { pythonCommand, startTorchscriptChild } = require('./torchscript-child')

const ROOT = path.join(__dirname, '..')
const MODEL = path.join(ROOT, 'models', 'resnet18_traced.pt')
const GOLDEN = path.join(ROOT, 'models', 'golden')
const SHAPE = [1, 3, 224, 224]

const opt = options(['rounds', 'warmup', 'gap-ms', 'threads'], ['no-python'])
const rounds = Number(opt.rounds ?? 30)
const warmup = Number(opt.warmup ?? 3)
const gapMs = Number(opt['gap-ms'] ?? 10)

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
const msSince = (t0) => Number(process.hrtime.bigint() - t0) / 1e6
const median = (xs) => {
  const s = xs.filter(Number.isFinite).sort((a, b) => a - b)
  if (!s.length) return NaN
  const m = s.length >> 1
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2
}

/** The first image of the golden batch as a Float32Array of its own (aligned, 4-byte elements). */
function firstImage(buffer) {
  const bytes = 3 * 224 * 224 * 4
  return new Float32Array(buffer.buffer.slice(buffer.byteOffset, buffer.byteOffset + bytes))
}

/** Python's forward as a contender: `call()` resolves to its own perf_counter milliseconds. */
async function pythonContender(threads) {
  const python = pythonCommand()
  if (!python) throw new Error('no .libtorch/ virtualenv and LIBTORCH_USE_PYTORCH unset')
  if (!fs.existsSync(path.join(GOLDEN, 'resnet18_input_b8.f32')))
    throw new Error('models/golden/resnet18_input_b8.f32 is missing (npm run models)')
  const { child, next } = startTorchscriptChild(python, MODEL, GOLDEN, threads)
  const info = JSON.parse(await next())
  return {
    name: 'python',
    info,
    call: async () => {
      child.stdin.write('run 1\n')
      return Number(await next())
    },
    // Waited for, so that its CPU time counts as this process's children's (bench/serve.js
    // subtracts it when it reports what other processes used).
    close: () =>
      new Promise((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) return resolve()
        child.once('exit', resolve)
        child.stdin.end('quit\n')
      }),
  }
}

async function main() {
  const threads = Number(opt.threads ?? torch.getNumThreads())
  torch.setNumThreads(threads)
  const input = fs.existsSync(path.join(GOLDEN, 'resnet18_input_b8.f32'))
    ? firstImage(fs.readFileSync(path.join(GOLDEN, 'resnet18_input_b8.f32')))
    : torch.randn(SHAPE).toTypedArray()
  const x = torch.fromBuffer(input, SHAPE)
  const module = await torch.ScriptModule.load(MODEL)
  const timed = (fn) => async () => {
    const t0 = process.hrtime.bigint()
    const y = await fn()
    const ms = msSince(t0)
    y.dispose()
    return ms
  }
  const contenders = [
    { name: 'forwardSync', call: timed(() => module.forwardSync(x)) },
    { name: 'forward', call: timed(() => module.forward(x)) },
  ]
  let pythonSkipped = opt['no-python'] ? 'skipped (--no-python)' : null
  if (!pythonSkipped) {
    try {
      contenders.push(await pythonContender(threads))
    } catch (e) {
      pythonSkipped = `n/a (${String(e.message).split('\n')[0]})`
    }
  }
  for (const c of contenders) for (let i = 0; i < warmup; i++) await c.call()
  const times = new Map(contenders.map((c) => [c.name, []]))
  for (let r = 0; r < rounds; r++) {
    for (let i = 0; i < contenders.length; i++) {
      const c = contenders[(i + r) % contenders.length]
      await sleep(gapMs)
      times.get(c.name).push(await c.call())
    }
  }
  for (const c of contenders) await c.close?.()
  const ratio = (a, b) =>
    times.has(a) && times.has(b) ? median(times.get(a).map((t, r) => t / times.get(b)[r])) : null
  const python = contenders.find((c) => c.name === 'python')
  console.log(
    JSON.stringify({
      rounds,
      threads: torch.getNumThreads(),
      instances: torch.getInstances(),
      medianMs: Object.fromEntries([...times].map(([name, t]) => [name, median(t)])),
      forwardVsSync: ratio('forward', 'forwardSync'),
      forwardVsPython: ratio('forward', 'python'),
      syncVsPython: ratio('forwardSync', 'python'),
      python: python ? python.info : pythonSkipped,
    }),
  )
}

runMain(main)

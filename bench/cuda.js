'use strict'
// GPU benchmarks (issue 35): torch-node against Python on the same GPU, in one run, the Python
// peer in its own process (bench/cuda_peer.py), ratios side by side.
//
//   node bench/cuda.js [--python PY] [--work DIR] [--out FILE.md] [--iters N] [--deadline-s S]
//
// ResNet-50, float16, channels-last, random weights (made by the peer: `prepare`):
//   batch 1 latency and batch 64 images/s: torch-node `forwardSync`/`forward` of the traced
//   module against Python eager; torch-node's `.pt2` (AOTInductor, compiled there) against
//   `torch.compile`. Every call copies its output to the host, on both sides (that waits for the
//   GPU).
// CausalLM, SmolLM2-135M's shape, bf16: transformers' `generate` (1 and 32 streams) is measured;
// torch-node's CausalLM runs on the CPU only (it has no device option yet), so its side says so.
// Without CUDA it prints why and exits 0 (what `__tests__/cuda/bench.test.js` checks on CPU).
// --deadline-s: no measurement starts after that many seconds (the GPU check's time limit);
// what was skipped is in the table.
const { spawnSync } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')
const { options, writeResults, runMain } = require('./cli')

const ROOT = path.join(__dirname, '..')
const torch = require(path.resolve(process.env.TORCH_NODE_PACKAGE || ROOT))

const args = options(['python', 'work', 'out', 'iters', 'deadline-s'])
const PYTHON = args.python || path.join(ROOT, '.libtorch', 'bin', 'python')
const WORK = path.resolve(args.work || path.join(ROOT, 'bench', 'cuda-work'))
const OUT = args.out ? path.resolve(args.out) : null
if (OUT) fs.mkdirSync(path.dirname(OUT), { recursive: true })
const ITERS = Number(args.iters || 50)
const DEADLINE_S = Number(args['deadline-s'] || Infinity)
const started = Date.now()
const elapsed = () => (Date.now() - started) / 1000

/** Runs the peer; returns its last JSON line, or { error } with its stderr's tail. */
function peer(...peerArgs) {
  // Killed 30 s past the deadline at the latest: the GPU check's time limit ends the whole run.
  const timeout = Number.isFinite(DEADLINE_S) ? Math.round(Math.max(30, DEADLINE_S - elapsed() + 30) * 1000) : undefined
  const r = spawnSync(PYTHON, [path.join(__dirname, 'cuda_peer.py'), ...peerArgs], {
    encoding: 'utf8',
    maxBuffer: 64 << 20,
    timeout,
  })
  if (r.error) return { error: `${r.error.message}` }
  const line = r.stdout
    .trim()
    .split('\n')
    .reverse()
    .find((l) => l.startsWith('{'))
  if (r.status !== 0 || !line) return { error: (r.stderr || `exit ${r.status}`).trim().split('\n').slice(-3).join(' ') }
  return JSON.parse(line)
}

/** Median latency (ms) over `iters` calls of `fn` after 5 warm-ups, and calls/s. */
async function measure(fn, iters = ITERS) {
  for (let i = 0; i < 5; i++) await fn()
  const times = []
  const t0 = process.hrtime.bigint()
  for (let i = 0; i < iters; i++) {
    const t = process.hrtime.bigint()
    await fn()
    times.push(Number(process.hrtime.bigint() - t) / 1e6)
  }
  const total = Number(process.hrtime.bigint() - t0) / 1e9
  times.sort((a, b) => a - b)
  return { medianMs: times[Math.floor(times.length / 2)], perS: iters / total }
}

/** A channels-last float16 batch on the GPU: NHWC memory seen as NCHW (as Python's channels_last). */
function input(batch) {
  return torch.randn([batch, 224, 224, 3], { device: 'cuda', dtype: 'float16' }).permute(0, 3, 1, 2)
}

const rows = []
const fmt = (x, digits = 2) => (typeof x === 'number' ? x.toFixed(digits) : x)
function row(what, node, python, unit, higherIsBetter) {
  const ratio =
    typeof node === 'number' && typeof python === 'number'
      ? `${(higherIsBetter ? node / python : python / node).toFixed(2)}×`
      : '—'
  rows.push(`| ${what} | ${fmt(node)} | ${fmt(python)} | ${unit} | ${ratio} |`)
  console.log(`${what}: torch-node ${fmt(node)}, Python ${fmt(python)} ${unit} (${ratio})`)
  // Written after every row: a run cut short by the GPU check's time limit keeps what it measured.
  if (OUT) fs.writeFileSync(OUT, results())
}

function results() {
  return (
    `# GPU benchmarks (bench/cuda.js)\n\n${new Date().toISOString().slice(0, 10)}, libtorch ${torch.version}; ` +
    'ratios: torch-node ÷ Python for throughput, Python ÷ torch-node for latency (above 1: torch-node faster).\n\n' +
    '| what | torch-node | Python | unit | ratio |\n|---|---|---|---|---|\n' +
    rows.join('\n') +
    '\n'
  )
}
const timeLeft = () => elapsed() < DEADLINE_S

async function resnet(kind) {
  const file = path.join(WORK, kind === 'pt2' ? 'resnet50-fp16.pt2' : 'resnet50-fp16.pt')
  const m =
    kind === 'pt2'
      ? await torch.AOTModule.load(file, { device: 'cuda' })
      : await torch.ScriptModule.load(file, { device: 'cuda' })
  const python = (batch) =>
    timeLeft()
      ? peer(
          'resnet',
          WORK,
          '--batch',
          String(batch),
          '--iters',
          String(ITERS),
          ...(kind === 'pt2' ? ['--compiled'] : []),
        )
      : { error: 'skipped: time' }
  const peerName = kind === 'pt2' ? 'torch.compile' : 'eager'
  const name = kind === 'pt2' ? '`.pt2` (AOTInductor)' : 'TorchScript'
  const one = input(1)
  const sync = await measure(() => m.forwardSync(one).cpu())
  const async = await measure(async () => (await m.forward(one)).cpu())
  const p1 = python(1)
  row(
    `ResNet-50 fp16, batch 1, ${name} forwardSync vs Python ${peerName}`,
    sync.medianMs,
    p1.median_ms ?? p1.error,
    'ms',
    false,
  )
  row(
    `ResNet-50 fp16, batch 1, ${name} forward (async) vs Python ${peerName}`,
    async.medianMs,
    p1.median_ms ?? p1.error,
    'ms',
    false,
  )
  if (!timeLeft()) {
    m.dispose()
    return row(`ResNet-50 fp16, batch 64, ${name}`, 'skipped: time', '', '', false)
  }
  const sixtyFour = input(64)
  const b64 = await measure(async () => (await m.forward(sixtyFour)).cpu(), Math.max(10, ITERS / 2))
  const p64 = python(64)
  row(
    `ResNet-50 fp16, batch 64, ${name} vs Python ${peerName}`,
    b64.perS * 64,
    p64.images_per_s ?? p64.error,
    'images/s',
    true,
  )
  m.dispose()
}

async function main() {
  if (!torch.cuda.isAvailable()) {
    console.log(`bench/cuda.js: skipped: no CUDA device (torch.cuda.isAvailable() is false; libtorch ${torch.version})`)
    return
  }
  console.log(`libtorch ${torch.version}, ${torch.cuda.deviceCount()} CUDA device(s); Python: ${PYTHON}`)
  const prep = peer('prepare', WORK)
  if (prep.error) throw new Error(`bench/cuda_peer.py prepare failed: ${prep.error}`)
  console.log(`models made (seconds): ${JSON.stringify(prep)}`)
  await resnet('pt')
  if (timeLeft()) await resnet('pt2')
  else row('ResNet-50 fp16, `.pt2` vs torch.compile', 'skipped: time', '', '', false)
  for (const streams of [1, 32]) {
    const p = timeLeft()
      ? peer('lm', WORK, '--streams', String(streams), '--tokens', '128')
      : { error: 'skipped: time' }
    row(
      `CausalLM (SmolLM2-135M shape, bf16), ${streams} stream(s), 128 tokens`,
      'not run: CausalLM has no CUDA device option yet',
      p.tokens_per_s ?? p.error,
      'tokens/s',
      true,
    )
  }
  if (OUT) writeResults(OUT, results(), elapsed())
  else console.log(`\n${results()}`)
}

runMain(main)

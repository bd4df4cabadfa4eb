'use strict'
// `npm run bench:multimodal`: speech to text through torch.pipeline('automatic-speech-recognition')
// against Python transformers' pipeline() on the same checkpoint (issue 51), ratios side by side.
// The checkpoint (made once by bench/multimodal_child.py prepare into the git-ignored
// models/golden/bench-multimodal): a random-weight Whisper of whisper-tiny's layers and widths
// over the fixture tokenizer, 10 s of the test signal, greedy, language "en", a fixed number of
// new tokens (end of text suppressed: both sides do the same work, checked). Each contender in its
// own process; rows: one call at a time, and 8 at once (Python: the 8 clips as one list with
// batch_size=8). Rounds are interleaved; medians. Real-time factor = processing time / audio time.
// Not here yet: the image chat, and the Node peers (transformers.js needs Whisper in its ONNX
// layout; no whisper.cpp binding installs without a network download of its model).
//   node bench/multimodal.js [--rounds 3] [--one 3] [--many 8] [--new-tokens 32] [--threads <cores>]
//                            [--max-seconds 900] [--out bench/multimodal-results.md]
const { execFileSync } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { options, writeResults, runMain } = require('./cli')
const machine = require('./machine')
const { pythonCommand, lineChild } = require('./torchscript-child')

const ROOT = path.join(__dirname, '..')
const FIXTURES = path.join(ROOT, 'models', 'golden', 'bench-multimodal')
const SECONDS = 10 // bench/multimodal_child.py's clip
const opt = options(['rounds', 'one', 'many', 'new-tokens', 'threads', 'max-seconds', 'out'])
const cpu = machine.cpuinfo()
const config = {
  rounds: Number(opt.rounds ?? 3),
  one: Number(opt.one ?? 3),
  many: Number(opt.many ?? 8),
  newTokens: Number(opt['new-tokens'] ?? 32),
  threads: Number(opt.threads ?? cpu.cores),
  maxSeconds: Number(opt['max-seconds'] ?? 900),
  out: path.resolve(opt.out ?? path.join(__dirname, 'multimodal-results.md')),
}
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]
const env = { ...process.env, OMP_NUM_THREADS: String(config.threads), HF_HUB_OFFLINE: '1' }

/** The checkpoint and its torch-node export, made once each. */
function prepare(python) {
  if (!fs.existsSync(path.join(FIXTURES, 'whisper-src', 'model.safetensors'))) {
    console.log('making the bench checkpoint (bench/multimodal_child.py: once)')
    execFileSync(python, [path.join(__dirname, 'multimodal_child.py'), 'prepare', FIXTURES], { stdio: 'inherit', env })
  }
  if (!fs.existsSync(path.join(FIXTURES, 'whisper', 'manifest.json'))) {
    console.log('torch-node export whisper (once)')
    const cli = path.join(ROOT, 'bin', 'torch-node.js')
    const args = [cli, 'export', path.join(FIXTURES, 'whisper-src'), path.join(FIXTURES, 'whisper')]
    execFileSync(process.execPath, args, { stdio: 'inherit', env: { ...env, PYTHON: python } })
  }
}

/** A child speaking the line protocol: resolves once it printed its ready line. */
async function startChild(name, cmd, args) {
  const { child, next, request } = lineChild(name, cmd, args, { cwd: ROOT, env })
  let ready = await next()
  while (!ready.startsWith('{')) ready = await next() // libraries' own start-up lines
  return { name, child, request }
}

async function main() {
  const t0 = performance.now()
  const deadline = t0 + config.maxSeconds * 1e3
  const python = pythonCommand()
  if (!python) throw new Error('bench:multimodal needs the dev virtualenv (.libtorch) for its checkpoint: npm install')
  prepare(python)
  const task = 'automatic-speech-recognition'
  const n = String(config.newTokens)
  const contenders = [
    await startChild('torch-node', process.execPath, [
      path.join(__dirname, 'multimodal-child.js'),
      'torch-node',
      task,
      path.join(FIXTURES, 'whisper'),
      n,
    ]),
    await startChild('Python transformers', python, [
      path.join(__dirname, 'multimodal_child.py'),
      'serve',
      task,
      path.join(FIXTURES, 'whisper-src'),
      String(config.threads),
      n,
    ]),
  ]
  const ms = new Map(contenders.map((c) => [c.name, { one: [], many: [], tokens: 0 }]))
  try {
    for (const c of contenders) ms.get(c.name).tokens = Number(await c.request('tokens'))
    for (let r = 0; r < config.rounds && performance.now() < deadline; r++) {
      for (const c of contenders) {
        ms.get(c.name).one.push(Number(await c.request(`one ${config.one} ${r}`)) / config.one)
        ms.get(c.name).many.push(Number(await c.request(`many ${config.many} ${r}`)) / config.many)
      }
      process.stdout.write(`round ${r + 1}/${config.rounds}\r`)
    }
  } finally {
    for (const c of contenders) {
      c.child.stdin.write('quit\n')
      c.child.kill()
    }
  }
  const load = os.loadavg()
  const rows = [...ms].map(([name, x]) => ({ name, one: median(x.one), many: median(x.many), tokens: x.tokens }))
  const out = [
    `# bench:multimodal — ${new Date().toISOString().slice(0, 10)}`,
    '',
    `- CPU: ${cpu.model} (vendor ${cpu.vendor}), ${cpu.cores} cores; load average at start ${load.map((x) => x.toFixed(1)).join(' / ')} (1/5/15 min)`,
    `- Node ${process.version}, torch-node ${require('../package.json').version}; threads ${config.threads}; rounds ${ms.get('torch-node').one.length} (medians of interleaved rounds)`,
    `- speech to text: a random-weight Whisper of whisper-tiny's layers and widths, ${SECONDS} s clip, greedy, ${config.newTokens} new tokens per call`,
    '',
    `| contender | decoder tokens per call | one at a time: ms per clip (real-time factor) | ${config.many} at once: ms per clip (real-time factor) |`,
    '|---|---|---|---|',
    ...rows.map(
      (r) =>
        `| ${r.name} | ${r.tokens} | ${r.one.toFixed(0)} (${(r.one / SECONDS / 1e3).toFixed(3)}) | ${r.many.toFixed(0)} (${(r.many / SECONDS / 1e3).toFixed(3)}) |`,
    ),
    '',
  ]
  const [ours, py] = rows
  out.push(
    `- torch-node / Python transformers (speed, higher is faster): one at a time ${(py.one / ours.one).toFixed(2)}× (target ≥ 1.0×), ${config.many} at once ${(py.many / ours.many).toFixed(2)}× (target ≥ 2×)`,
    '',
  )
  console.log(`\n${out.join('\n')}`)
  writeResults(config.out, `${out.join('\n')}\n`, (performance.now() - t0) / 1e3)
}

runMain(main)

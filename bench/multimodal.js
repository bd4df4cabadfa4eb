'use strict'
// `npm run bench:multimodal`: speech to text through torch.pipeline('automatic-speech-recognition')
// against Python transformers' pipeline() on the same checkpoint (issue 51), ratios side by side.
// The checkpoint (made once by bench/multimodal_child.py prepare into the git-ignored
// models/golden/bench-multimodal): a random-weight Whisper of whisper-tiny's layers and widths
// over the fixture tokenizer, 10 s of the test signal, greedy, language "en", a fixed number of
// new tokens (end of text suppressed: both sides do the same work, checked). Each contender in its
// own process; rows: one call at a time, and 8 at once (Python: the 8 clips as one list with
// batch_size=8). Rounds are interleaved; medians. Real-time factor = processing time / audio time.
// Image chat: torch.text.CausalLM on a python/export_vlm.py folder against transformers'
// SmolVLMForConditionalGeneration.generate on the same random-weight checkpoint (made once by
// bench/multimodal_child.py prepare-vlm: SmolVLM-256M's tower and SmolLM2-135M's decoder widths),
// chelsea.png and a question, greedy; 8 at once: torch-node's 8 concurrent callers sharing decode
// steps, Python's 8 chats as one padded batch. --vlm-src/--vlm-folder take another checkpoint and
// its export (e.g. models/golden/vlm/smolvlm-tiny{-src,} for a quick check of the bench itself).
// Not here yet: time to first token, and the Node peers (transformers.js needs Whisper in its ONNX
// layout; no whisper.cpp binding installs without a network download of its model).
//   node bench/multimodal.js [--tasks asr,vlm] [--rounds 3] [--one 3] [--many 8] [--new-tokens 32]
//                            [--threads <cores>] [--vlm-src DIR --vlm-folder DIR]
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
const opt = options([
  'tasks',
  'rounds',
  'one',
  'many',
  'new-tokens',
  'threads',
  'vlm-src',
  'vlm-folder',
  'max-seconds',
  'out',
])
const cpu = machine.cpuinfo()
const config = {
  rounds: Number(opt.rounds ?? 3),
  one: Number(opt.one ?? 3),
  many: Number(opt.many ?? 8),
  newTokens: Number(opt['new-tokens'] ?? 32),
  threads: Number(opt.threads ?? cpu.cores),
  maxSeconds: Number(opt['max-seconds'] ?? 900),
  out: path.resolve(opt.out ?? path.join(__dirname, 'multimodal-results.md')),
  tasks: String(opt.tasks ?? 'asr,vlm').split(','),
  vlmSrc: path.resolve(opt['vlm-src'] ?? path.join(FIXTURES, 'smolvlm-src')),
  vlmFolder: path.resolve(opt['vlm-folder'] ?? path.join(FIXTURES, 'smolvlm')),
}
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]
const env = { ...process.env, OMP_NUM_THREADS: String(config.threads), HF_HUB_OFFLINE: '1' }

/** The image-chat checkpoint and its export (python/export_vlm.py), made once each. */
function prepareVlm(python) {
  if (!fs.existsSync(path.join(config.vlmSrc, 'model.safetensors'))) {
    console.log('making the image-chat bench checkpoint (bench/multimodal_child.py prepare-vlm: once)')
    execFileSync(python, [path.join(__dirname, 'multimodal_child.py'), 'prepare-vlm', FIXTURES], {
      stdio: 'inherit',
      env,
    })
  }
  if (!fs.existsSync(path.join(config.vlmFolder, 'manifest.json'))) {
    console.log('python/export_vlm.py smolvlm (once)')
    const args = [path.join(ROOT, 'python', 'export_vlm.py'), config.vlmSrc, config.vlmFolder, '--max-batch', '16']
    execFileSync(python, args, { stdio: 'inherit', env })
  }
}

/** The speech checkpoint and its torch-node export, made once each. */
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

/** Interleaved rounds of `one` and `many` over `contenders`: per contender medians (ms per call). */
async function measure(contenders, deadline) {
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
  const rounds = ms.get(contenders[0].name).one.length
  return {
    rounds,
    rows: [...ms].map(([name, x]) => ({ name, one: median(x.one), many: median(x.many), tokens: x.tokens })),
  }
}

/** torch-node's and Python's children for `task` on (`folder`, `src`). */
async function contendersFor(python, task, folder, src) {
  const n = String(config.newTokens)
  return [
    await startChild('torch-node', process.execPath, [
      path.join(__dirname, 'multimodal-child.js'),
      'torch-node',
      task,
      folder,
      n,
    ]),
    await startChild('Python transformers', python, [
      path.join(__dirname, 'multimodal_child.py'),
      'serve',
      task,
      src,
      String(config.threads),
      n,
    ]),
  ]
}

const ratio = (py, ours, key) => (py[key] / ours[key]).toFixed(2)

async function main() {
  const t0 = performance.now()
  const deadline = t0 + config.maxSeconds * 1e3
  const python = pythonCommand()
  if (!python) throw new Error('bench:multimodal needs the dev virtualenv (.libtorch) for its checkpoint: npm install')
  const load = os.loadavg()
  const out = [
    `# bench:multimodal — ${new Date().toISOString().slice(0, 10)}`,
    '',
    `- CPU: ${cpu.model} (vendor ${cpu.vendor}), ${cpu.cores} cores; load average at start ${load.map((x) => x.toFixed(1)).join(' / ')} (1/5/15 min)`,
    `- Node ${process.version}, torch-node ${require('../package.json').version}; threads ${config.threads}; medians of interleaved rounds`,
    '',
  ]
  if (config.tasks.includes('asr')) {
    prepare(python)
    const task = 'automatic-speech-recognition'
    const { rounds, rows } = await measure(
      await contendersFor(python, task, path.join(FIXTURES, 'whisper'), path.join(FIXTURES, 'whisper-src')),
      deadline,
    )
    const [ours, py] = rows
    out.push(
      `- speech to text: a random-weight Whisper of whisper-tiny's layers and widths, ${SECONDS} s clip, greedy, ${config.newTokens} new tokens per call; ${rounds} rounds`,
      '',
      `| contender | decoder tokens per call | one at a time: ms per clip (real-time factor) | ${config.many} at once: ms per clip (real-time factor) |`,
      '|---|---|---|---|',
      ...rows.map(
        (r) =>
          `| ${r.name} | ${r.tokens} | ${r.one.toFixed(0)} (${(r.one / SECONDS / 1e3).toFixed(3)}) | ${r.many.toFixed(0)} (${(r.many / SECONDS / 1e3).toFixed(3)}) |`,
      ),
      '',
      `- torch-node / Python transformers (speed, higher is faster): one at a time ${ratio(py, ours, 'one')}× (target ≥ 1.0×), ${config.many} at once ${ratio(py, ours, 'many')}× (target ≥ 2×)`,
      '',
    )
  }
  if (config.tasks.includes('vlm')) {
    prepareVlm(python)
    const { rounds, rows } = await measure(
      await contendersFor(python, 'image-text-to-text', config.vlmFolder, config.vlmSrc),
      deadline,
    )
    const [ours, py] = rows
    if (ours.tokens !== py.tokens)
      throw new Error(`image chat: torch-node made ${ours.tokens} tokens, Python ${py.tokens}`)
    const perSecond = (r, key) => ((r.tokens / r[key]) * 1e3).toFixed(1)
    out.push(
      `- image chat: ${path.basename(config.vlmSrc)} (random weights), chelsea.png and a question, greedy, at most ${config.newTokens} new tokens (${ours.tokens} made by both); ${rounds} rounds`,
      '',
      `| contender | one at a time: ms per chat (new tokens/s) | ${config.many} at once: ms per chat (new tokens/s per chat) |`,
      '|---|---|---|',
      ...rows.map(
        (r) =>
          `| ${r.name} | ${r.one.toFixed(0)} (${perSecond(r, 'one')}) | ${r.many.toFixed(0)} (${perSecond(r, 'many')}) |`,
      ),
      '',
      `- torch-node / Python transformers (speed, higher is faster): one at a time ${ratio(py, ours, 'one')}× (target ≥ 1.0×), ${config.many} at once ${ratio(py, ours, 'many')}× (target ≥ 2×)`,
      '',
    )
  }
  console.log(`\n${out.join('\n')}`)
  writeResults(config.out, `${out.join('\n')}\n`, (performance.now() - t0) / 1e3)
}

runMain(main)

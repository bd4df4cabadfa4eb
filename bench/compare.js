'use strict'
// `npm run bench`: ResNet-18 (models/resnet18_traced.pt, 224×224) side by side in ONE process
// run — torch-node (forwardSync, forward, and the load options optimize / channelsLast / bf16),
// Python TorchScript on the same file (a persistent child, bench/torchscript_child.py), and
// onnxruntime-node on the same weights exported to ONNX (models/resnet18.onnx) — at batch 1 and 8.
//
// Rounds are interleaved: each round runs every contender once, in an order rotated by one each
// round, with a short pause between calls (so thread pools that spin after a call — OpenMP's,
// onnxruntime's — have gone idle before the next contender starts). Per contender: the median of
// its round times, and the median of its per-round ratios to onnxruntime-node (the same round, so
// drift in clock speed or in the machine's load hits both sides). Outputs are checked against the
// Python goldens (models/golden/resnet18_output_b*.f32): max |Δ| and top-1 agreement.
// Then JS↔tensor crossing costs, and the image pipeline (bench/image.js, run as a child).
// Prints Markdown tables and writes them with the machine's details to bench/results.md.
//
//   node bench/compare.js [--rounds 20] [--batches 1,8] [--threads <cores>] [--warmup 3]
//                         [--gap-ms 10] [--no-python] [--image-rounds 3] [--crossing-rounds 5]
//                         [--no-fma-peak] [--out bench/results.md] [--tiny]
// --tiny: 1 round, batch 1, no Python, no image pipeline, few crossing calls, no measured FMA
// peak (the test uses it). The measured peak compiles bench/fma-peak.c with `cc` when there is one.
const { spawnSync } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const torch = require('..')
const { options, writeResults, runMain } = require('./cli')
const machine = require('./machine')
const { pythonCommand, startTorchscriptChild } = require('./torchscript-child')

const ROOT = path.join(__dirname, '..')
const MODEL = path.join(ROOT, 'models', 'resnet18_traced.pt')
const ONNX_MODEL = path.join(ROOT, 'models', 'resnet18.onnx')
const GOLDEN = path.join(ROOT, 'models', 'golden')
// Multiply-adds of torchvision's ResNet-18 at 224×224 (convolutions + fc, counted with forward
// hooks): the "1.82 GFLOPs" usually quoted. Peaks below count an FMA as 2 FLOP, so the
// achieved figures do too.
const GMAC_PER_IMAGE = 1.814
const GFLOP_PER_IMAGE = 2 * GMAC_PER_IMAGE
const IMAGE_ELEMENTS = 3 * 224 * 224

const opt = options(
  ['rounds', 'batches', 'threads', 'warmup', 'gap-ms', 'image-rounds', 'crossing-rounds', 'out'],
  ['no-python', 'no-fma-peak', 'tiny'],
)
const tiny = !!opt.tiny
const cpu = machine.cpuinfo()
const config = {
  rounds: Number(opt.rounds ?? (tiny ? 1 : 20)),
  batches: (opt.batches ?? (tiny ? '1' : '1,8')).split(',').map(Number),
  threads: Number(opt.threads ?? cpu.cores),
  warmup: Number(opt.warmup ?? (tiny ? 1 : 3)),
  gapMs: Number(opt['gap-ms'] ?? 10),
  python: !opt['no-python'] && !tiny,
  fmaPeak: !opt['no-fma-peak'] && !tiny,
  imageRounds: Number(opt['image-rounds'] ?? (tiny ? 0 : 3)),
  crossingRounds: Number(opt['crossing-rounds'] ?? (tiny ? 1 : 5)),
  crossingIterations: tiny ? 20 : 200,
  out: path.resolve(opt.out ?? path.join(__dirname, 'results.md')),
}
for (const b of config.batches)
  if (!(b >= 1 && b <= 8)) throw new Error(`--batches: ${b} (1..8: the golden input has 8 images)`)

const now = () => process.hrtime.bigint()
const msSince = (t0) => Number(process.hrtime.bigint() - t0) / 1e6
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
const turn = () => new Promise((resolve) => setImmediate(resolve))
const median = (xs) => {
  const s = xs.filter(Number.isFinite).sort((a, b) => a - b)
  if (!s.length) return NaN
  const m = s.length >> 1
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2
}
const readF32 = (name) => {
  const buf = fs.readFileSync(path.join(GOLDEN, name))
  return new Float32Array(buf.buffer, buf.byteOffset, buf.byteLength / 4)
}

/** Max |Δ| and how many rows share the golden's argmax. */
function compare(output, golden, batch) {
  let maxAbsDiff = 0
  let top1Agree = 0
  for (let i = 0; i < batch; i++) {
    let a = 0
    let g = 0
    for (let j = 0; j < 1000; j++) {
      const k = i * 1000 + j
      maxAbsDiff = Math.max(maxAbsDiff, Math.abs(output[k] - golden[k]))
      if (output[k] > output[i * 1000 + a]) a = j
      if (golden[k] > golden[i * 1000 + g]) g = j
    }
    if (a === g) top1Agree++
  }
  return { maxAbsDiff, top1Agree }
}

// ---------------------------------------------------------------------------------------------
// Contenders. setup() returns { call(batch) -> ms, check(batch) -> {maxAbsDiff, top1Agree},
// loadMs, firstCallMs, close() } or throws; a throw makes the row "n/a (reason)".

const input8 = fs.existsSync(path.join(GOLDEN, 'resnet18_input_b8.f32')) ? readF32('resnet18_input_b8.f32') : null
const inputOf = (batch) => input8.subarray(0, batch * IMAGE_ELEMENTS)
const goldenOf = (batch) => readF32(batch === 1 ? 'resnet18_output_b1.f32' : 'resnet18_output_b8.f32')

/** n/a text for an error thrown while setting a contender up. */
function unavailable(err) {
  if (err.code === 'InvalidArg' && /unknown option/.test(err.message)) return 'n/a (option not available)'
  return `n/a (${err.code ? `${err.code}: ` : ''}${String(err.message).split('\n')[0]})`
}

const torchModules = new Map() // options JSON -> Promise<{ module, loadMs, firstCallMs }>
function torchModule(options, key = JSON.stringify(options)) {
  if (!torchModules.has(key)) {
    torchModules.set(
      key,
      (async () => {
        let t0 = now()
        const module = await torch.ScriptModule.load(MODEL, options)
        const loadMs = msSince(t0)
        const x = torch.fromBuffer(inputOf(1), [1, 3, 224, 224])
        t0 = now()
        module.forwardSync(x).dispose()
        return { module, loadMs, firstCallMs: msSince(t0) }
      })(),
    )
  }
  return torchModules.get(key)
}

function torchNodeContender(name, options, { async = false, skip = null } = {}) {
  return {
    name,
    skip,
    async setup() {
      const inputs = new Map(config.batches.map((b) => [b, torch.fromBuffer(inputOf(b), [b, 3, 224, 224])]))
      // `optimize: 'fuse'` fuses the graph for the warm-up example's shapes: one module per batch.
      const fused = options.optimize === 'fuse'
      const loaded = new Map(
        await Promise.all(
          config.batches.map(async (b) => [
            b,
            fused
              ? await torchModule({ ...options, example: inputs.get(b) }, `${name} batch ${b}`)
              : await torchModule(options),
          ]),
        ),
      )
      const { loadMs, firstCallMs } = loaded.get(config.batches[0])
      const call = async (batch) => {
        const module = loaded.get(batch).module
        const x = inputs.get(batch)
        const t0 = now()
        const y = async ? await module.forward(x) : module.forwardSync(x)
        const ms = msSince(t0)
        y.dispose()
        return ms
      }
      const check = (batch) => {
        const y = loaded.get(batch).module.forwardSync(inputs.get(batch))
        const values = Float32Array.from(y.toTypedArray())
        const dtype = y.dtype
        y.dispose()
        return {
          ...compare(values, goldenOf(batch), batch),
          ...(dtype === 'float32' ? {} : { note: `output dtype ${dtype}` }),
        }
      }
      return { call, check, loadMs, firstCallMs, close() {} }
    },
  }
}

const pythonContender = {
  name: 'Python TorchScript (traced, inference_mode)',
  skip: null,
  async setup() {
    const python = pythonCommand()
    if (!python) throw new Error('no .libtorch/ virtualenv and LIBTORCH_USE_PYTORCH unset')
    const { child, next, request } = startTorchscriptChild(python, MODEL, GOLDEN, config.threads)
    const t0 = now()
    const ready = JSON.parse(await next())
    this.info = ready
    const loadMs = msSince(t0) // includes starting Python and importing torch; ready.loadMs is jit.load alone
    const first = Number(await request('run 1'))
    return {
      call: async (batch) => Number(await request(`run ${batch}`)),
      check: async (batch) => JSON.parse(await request(`check ${batch}`)),
      loadMs: ready.loadMs,
      loadNote: `process start + import torch: ${loadMs.toFixed(0)} ms`,
      firstCallMs: first,
      close() {
        child.stdin.end('quit\n')
      },
    }
  },
}

let ortVersion = null
const ortContender = {
  name: 'onnxruntime-node fp32',
  skip: null,
  async setup() {
    const ort = require('onnxruntime-node')
    ortVersion = ort.env?.versions?.node ?? require('onnxruntime-node/package.json').version
    if (!fs.existsSync(ONNX_MODEL)) {
      throw new Error(
        `${path.relative(ROOT, ONNX_MODEL)} is missing: run \`.libtorch/bin/python models/make_models.py --onnx-only\``,
      )
    }
    let t0 = now()
    const session = await ort.InferenceSession.create(ONNX_MODEL, {
      intraOpNumThreads: config.threads,
      interOpNumThreads: 1,
      executionMode: 'sequential',
      graphOptimizationLevel: 'all',
      // ONNX Runtime's pool threads spin after each run by default; in this shared process that
      // would steal the cores from the call measured next (torch-node's), so they sleep instead.
      extra: { session: { intra_op: { allow_spinning: '0' }, inter_op: { allow_spinning: '0' } } },
    })
    const loadMs = msSince(t0)
    const [inputName] = session.inputNames
    const [outputName] = session.outputNames
    const inputs = new Map(config.batches.map((b) => [b, new ort.Tensor('float32', inputOf(b), [b, 3, 224, 224])]))
    const run = async (batch) => (await session.run({ [inputName]: inputs.get(batch) }))[outputName]
    t0 = now()
    const first = await run(1)
    const firstCallMs = msSince(t0)
    first.dispose?.()
    const call = async (batch) => {
      const t = now()
      const y = await run(batch)
      const ms = msSince(t)
      y.dispose?.()
      return ms
    }
    const check = async (batch) => compare(await (await run(batch)).getData(), goldenOf(batch), batch)
    return {
      call,
      check,
      loadMs,
      firstCallMs,
      close() {
        session.release?.()
      },
    }
  },
}

const bf16 = machine.bf16Support(cpu)
const bf16Skip = bf16.native ? null : `skipped: this CPU has no native bf16 (${bf16.how})`
const contenders = [
  ortContender,
  torchNodeContender('torch-node forwardSync', {}),
  torchNodeContender('torch-node forward (async)', {}, { async: true }),
  torchNodeContender('torch-node optimize', { optimize: true }),
  torchNodeContender('torch-node optimize + channelsLast', { optimize: true, channelsLast: true }),
  torchNodeContender("torch-node optimize 'fuse' (oneDNN Graph)", { optimize: 'fuse' }),
  torchNodeContender(
    'torch-node bf16 (optimize + dtype bfloat16)',
    { optimize: true, dtype: 'bfloat16' },
    { skip: bf16Skip },
  ),
  torchNodeContender(
    'torch-node bf16 + channelsLast',
    { optimize: true, channelsLast: true, dtype: 'bfloat16' },
    { skip: bf16Skip },
  ),
  ...(config.python ? [pythonContender] : []),
]
const BASELINE = ortContender
const isBf16 = (c) => /bf16/.test(c.name)

// ---------------------------------------------------------------------------------------------

async function benchModels() {
  const live = []
  for (const c of contenders) {
    if (c.skip) {
      c.status = c.skip
      continue
    }
    try {
      c.run = await c.setup()
      live.push(c)
    } catch (err) {
      c.status = unavailable(err)
    }
  }
  const results = {}
  for (const batch of config.batches) {
    for (const c of live) for (let i = 0; i < config.warmup; i++) await c.run.call(batch)
    const accuracy = new Map()
    for (const c of live) accuracy.set(c, await c.run.check(batch))
    const times = new Map(live.map((c) => [c, []]))
    for (let r = 0; r < config.rounds; r++) {
      for (let i = 0; i < live.length; i++) {
        const c = live[(i + r) % live.length]
        await sleep(config.gapMs)
        times.get(c).push(await c.run.call(batch))
      }
    }
    results[batch] = { times, accuracy }
  }
  for (const c of live) c.run.close()
  return { live, results }
}

/** µs per call, over interleaved rounds (rotated order), of the ways data crosses JS ↔ tensor. */
async function benchCrossing() {
  const shape = [1, 3, 224, 224]
  const array = new Float32Array(IMAGE_ELEMENTS)
  for (let i = 0; i < array.length; i++) array[i] = Math.sin(i)
  const source = torch.tensor(array, { shape })
  const cases = [
    ['torch.tensor(Float32Array, {shape}) (copy in) + dispose', () => torch.tensor(array, { shape }).dispose()],
    ['torch.fromBuffer(Float32Array, shape) (no copy) + dispose', () => torch.fromBuffer(array, shape).dispose()],
    ['tensor.toTypedArray() (copy out)', () => source.toTypedArray()],
    ['tensor.asTypedArray() (no copy)', () => source.asTypedArray()],
  ]
  let ort = null
  try {
    ort = require('onnxruntime-node')
  } catch {}
  if (ort)
    cases.push([
      'onnxruntime-node new Tensor(Float32Array) (no copy), for reference',
      () => new ort.Tensor('float32', array, shape),
    ])
  const times = cases.map(() => [])
  const round = (fn) => {
    const t0 = now()
    for (let i = 0; i < config.crossingIterations; i++) fn()
    return Number(process.hrtime.bigint() - t0) / 1e3 / config.crossingIterations
  }
  for (const [, fn] of cases) {
    round(fn)
    await turn()
  } // warm-up
  for (let r = 0; r < config.crossingRounds; r++) {
    for (let i = 0; i < cases.length; i++) {
      const k = (i + r) % cases.length
      times[k].push(round(cases[k][1]))
      await turn() // lets fromBuffer's and asTypedArray's references be released between rounds
    }
  }
  source.dispose()
  return cases.map(([label], k) => ({ label, us: median(times[k]) }))
}

function benchImage() {
  if (config.imageRounds <= 0) return { skipped: 'skipped (--image-rounds 0)' }
  if (!fs.existsSync(path.join(ROOT, 'models', 'images', 'coffee_1280x800.jpg')))
    return { skipped: 'skipped: models/images/ missing (npm run models)' }
  const r = spawnSync(
    process.execPath,
    [path.join(__dirname, 'image.js'), '--rounds', String(config.imageRounds), '--iterations', '20'],
    { encoding: 'utf8' },
  )
  if (r.status !== 0) return { skipped: `failed: ${(r.stderr || '').trim().split('\n').pop()}` }
  return {
    lines: r.stdout
      .trim()
      .split('\n')
      .filter((l) => /^(round|median)/.test(l)),
  }
}

// ---------------------------------------------------------------------------------------------
// Report

const fmt = (x, digits = 2) => (Number.isFinite(x) ? x.toFixed(digits) : '–')
const table = (header, rows) =>
  [
    `| ${header.join(' | ')} |`,
    `|${header.map((h, i) => (i === 0 ? '---' : '---:')).join('|')}|`,
    ...rows.map((r) => `| ${r.join(' | ')} |`),
  ].join('\n')

function modelTables({ results }, peak) {
  const out = []
  for (const batch of config.batches) {
    const { times, accuracy } = results[batch]
    const base = times.get(BASELINE)
    const py = times.get(pythonContender)
    const rows = contenders.map((c) => {
      if (!times.has(c)) return [c.name, c.status, '', '', '', '', '', '']
      const t = times.get(c)
      const ratio = (ref) => (ref ? fmt(median(t.map((x, r) => x / ref[r]))) + '×' : '–')
      const ms = median(t)
      const gflops = (batch * GFLOP_PER_IMAGE) / (ms / 1e3)
      const peakOf = isBf16(c) ? peak.bf16Gflops : peak.fp32Gflops
      const measuredOf = peak.measured?.[isBf16(c) ? 'bf16' : 'fp32']
      const acc = accuracy.get(c)
      return [
        c.name,
        fmt(ms),
        ratio(base),
        ratio(py),
        fmt(gflops, 0),
        (peakOf ? `${fmt((100 * gflops) / peakOf, 0)}%` : '–') +
          (measuredOf ? ` / ${fmt((100 * gflops) / measuredOf, 0)}%` : '') +
          ` ${isBf16(c) ? 'bf16' : 'fp32'}`,
        acc.maxAbsDiff.toExponential(1) + (acc.note ? ` (${acc.note})` : ''),
        `${acc.top1Agree}/${batch}`,
      ]
    })
    out.push(
      `### Batch ${batch} (${config.rounds} interleaved round${config.rounds === 1 ? '' : 's'}, ${config.threads} thread${config.threads === 1 ? '' : 's'})\n`,
    )
    out.push(
      table(
        [
          'contender',
          'median ms',
          'vs onnxruntime (median of round ratios)',
          'vs Python',
          'GFLOP/s',
          'of peak (nominal / measured)',
          'max abs diff vs golden',
          'top-1 = golden',
        ],
        rows,
      ),
    )
    out.push('')
  }
  const setupRows = contenders
    .filter((c) => c.run)
    .map((c) => [
      c.name,
      fmt(c.run.loadMs, 0) + (c.run.loadNote ? ` (${c.run.loadNote})` : ''),
      fmt(c.run.firstCallMs, 1),
    ])
  out.push('### Load and first call (batch 1)\n')
  out.push(table(['contender', 'load ms', 'first call ms'], setupRows))
  out.push('\nforwardSync and forward share one module (the first call is paid once).')
  return out.join('\n')
}

function machineSection(peak, loadStart, loadEnd) {
  const relevant = ['avx2', 'fma', 'avx512f', 'avx512_vnni', 'avx512_bf16', 'amx_bf16', 'amx_tile'].filter((f) =>
    cpu.flags.has(f),
  )
  const lines = [
    `- CPU: ${cpu.model} (vendor ${cpu.vendor}, family ${cpu.family}, model ${cpu.modelNumber}), ${cpu.cores} cores available, ${fmt(cpu.mhz / 1000, 2)} GHz in /proc/cpuinfo; flags: ${relevant.join(' ')}`,
    `- Threads: ${config.threads} (torch-node \`setNumThreads\` → getNumThreads() = ${torch.getNumThreads()}; onnxruntime intraOpNumThreads ${config.threads}, interOpNumThreads 1; Python \`torch.set_num_threads(${config.threads})\`)`,
    `- Node ${process.version}, torch-node ${require('../package.json').version}, libtorch ${pythonContender.info?.torch ?? '2.13 (see .libtorch)'}, onnxruntime-node ${ortVersion ?? 'not loaded'}`,
    `- Load average (1 min) at start / end: ${fmt(loadStart, 2)} / ${fmt(loadEnd, 2)}${loadStart > 0.5 ? ' — **the machine was busy; treat the numbers with care**' : ''}`,
    `- Native bf16: ${bf16.native ? `yes (${bf16.how})` : `no (${bf16.how})`}`,
  ]
  const peakText = [
    `**Peak.** ${peak.cores} cores × ${fmt(peak.ghz, 2)} GHz × FLOP/cycle/core, taking the CPU to be ${peak.arch}: ${peak.basis}.`,
    `fp32: ${peak.fp32Gflops ? `${peak.cores} × ${fmt(peak.ghz, 2)} × ${peak.fp32} = **${fmt(peak.fp32Gflops, 0)} GFLOP/s**` : 'unknown'}; ` +
      `bf16: ${peak.bf16Gflops ? `${peak.cores} × ${fmt(peak.ghz, 2)} × ${peak.bf16} = **${fmt(peak.bf16Gflops, 0)} GFLOP/s**` : 'no native bf16'}.`,
    `The clock is /proc/cpuinfo's \`cpu MHz\` (under a hypervisor, the nominal clock; cores boosting above it make the real peak higher).`,
    peak.measured?.error
      ? `Measured peak: ${peak.measured.error}.`
      : peak.measured
        ? `**Measured** (bench/fma-peak.c, \`cc -O2 -march=native\`, 12 independent FMA chains per core, ${peak.cores} copies at once): ` +
          `fp32 **${fmt(peak.measured.fp32, 0)} GFLOP/s**${peak.measured.bf16 ? `, bf16 (VDPBF16PS) **${fmt(peak.measured.bf16, 0)} GFLOP/s**` : ''}` +
          (peak.fp32 && peak.measured.fp32
            ? `, i.e. an effective ${fmt(peak.measured.fp32 / peak.cores / peak.fp32, 2)} GHz at ${peak.fp32} FLOP/cycle.`
            : '.')
        : 'Measured peak: not run (--no-fma-peak or --tiny).',
    `ResNet-18 at 224×224 is ${GMAC_PER_IMAGE} G multiply-adds per image (the usual "1.82 GFLOPs"); counted as peaks are, with an FMA as 2 FLOP, that is ${fmt(GFLOP_PER_IMAGE, 2)} GFLOP per image, and GFLOP/s = batch × ${fmt(GFLOP_PER_IMAGE, 2)} / median time.`,
  ]
  return lines.join('\n') + '\n\n' + peakText.join(' ')
}

async function main() {
  const started = Date.now()
  if (!input8) throw new Error('models/golden/resnet18_input_b8.f32 is missing: run `npm run models`')
  torch.setNumThreads(config.threads)
  const loadStart = os.loadavg()[0]
  const peak = machine.peak(cpu, config.threads)
  if (config.fmaPeak) peak.measured = await machine.measuredPeak(config.threads)
  console.log(
    `ResNet-18 224×224, ${config.threads} threads on ${cpu.cores} cores (${cpu.model}), rounds ${config.rounds}, batches ${config.batches.join(',')}`,
  )
  if (loadStart > 0.5) console.log(`warning: load average ${loadStart.toFixed(2)}: another process is using the CPU`)

  const models = await benchModels()
  const modelText = modelTables(models, peak)
  console.log('\n' + modelText)

  const crossing = await benchCrossing()
  const crossingText = table(
    ['1×3×224×224 float32 (588 KiB)', 'µs per call'],
    crossing.map((c) => [c.label, fmt(c.us, 2)]),
  )
  console.log('\n### JS ↔ tensor crossing\n\n' + crossingText)

  const image = benchImage()
  const imageText = image.skipped
    ? `Image pipeline: ${image.skipped}.`
    : `\`node bench/image.js --rounds ${config.imageRounds} --iterations 20\` (also \`npm run bench:image\`): 1280×800 JPEG → normalized [1, 3, 224, 224] (Resize 256, CenterCrop 224, ImageNet normalization), torch.image.loadSync vs PIL + torchvision:\n\n` +
      image.lines.map((l) => `    ${l}`).join('\n')
  console.log('\n### Image pipeline\n\n' + imageText)

  const loadEnd = os.loadavg()[0]
  const seconds = (Date.now() - started) / 1000
  const onnxCheck = contenders.includes(ortContender) && models.results[config.batches[0]].accuracy.get(ortContender)
  const doc = [
    '# torch-node benchmark results',
    '',
    `Written by \`npm run bench\` (\`node bench/compare.js${process.argv.slice(2).length ? ' ' + process.argv.slice(2).join(' ') : ''}\`) on ${new Date().toISOString()}, in ${fmt(seconds, 0)} s. Lower ratios are faster; only ratios carry over between machines.`,
    '',
    '## Machine',
    '',
    machineSection(peak, loadStart, loadEnd),
    '',
    '## ResNet-18, 224×224',
    '',
    'Same weights everywhere: models/resnet18_traced.pt (seed-0 torchvision ResNet-18) and models/resnet18.onnx exported from it; input models/golden/resnet18_input_b8.f32 (first images). ' +
      'Each round runs every contender once, in rotated order, ' +
      `${config.gapMs} ms apart; ` +
      'times are per call (torch-node: around forwardSync / `await forward`, output disposed after; Python: `perf_counter` around the call inside the child; onnxruntime-node: around `await session.run`). ' +
      '"vs onnxruntime" is the median over rounds of (this contender ÷ onnxruntime-node in the same round). ' +
      `The accuracy columns compare one output with the goldens Python wrote (torch.jit.load + no_grad)${onnxCheck ? `; the ONNX export differs from TorchScript by at most ${onnxCheck.maxAbsDiff.toExponential(1)} at batch ${config.batches[0]}` : ''}.`,
    '',
    modelText,
    '',
    '## JS ↔ tensor crossing',
    '',
    `Median over ${config.crossingRounds} interleaved round(s) of ${config.crossingIterations} calls.`,
    '',
    crossingText,
    '',
    '## Image pipeline',
    '',
    imageText,
    '',
  ].join('\n')
  writeResults(config.out, doc, seconds)
}

runMain(main)

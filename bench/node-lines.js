'use strict'
// Memory and exit figures per Node line, for docs/memory.md's "Who frees what, and when":
//   node bench/node-lines.js [majors...]      (default: 20 or whatever runs this, 22, 24, 26)
// For each line, in child processes: peak RSS of 20,000 temporary 1×3×224×224 results in a
// synchronous loop (no dispose / dispose() / tidy) with finalizers during GC (the default), and
// 3,000 with TORCH_NODE_GC_FINALIZERS=0; and how long a script that borrowed JS memory takes to exit.
const { spawnSync } = require('node:child_process')
const path = require('node:path')
const { nodeBinary } = require('../tools/node-lines')

const ROOT = path.join(__dirname, '..')
const MiB = 2 ** 20
const ITERATIONS = Number(process.env.ITERATIONS || 20_000)

const BODIES = {
  none: 'torch.ones(SHAPE).mul(2)',
  dispose: 'const a = torch.ones(SHAPE); const t = a.mul(2); a.dispose(); t.dispose()',
  tidy: 'torch.tidy(() => { torch.ones(SHAPE).mul(2) })',
}

function loop(node, mode, env = {}, iterations = ITERATIONS) {
  const code = `
    const torch = require(${JSON.stringify(ROOT)})
    const SHAPE = [1, 3, 224, 224]
    torch.ones(SHAPE).mul(2)
    const baseline = process.memoryUsage().rss
    let peak = baseline
    const start = Date.now()
    for (let i = 0; i < ${iterations}; i++) {
      ${BODIES[mode]}
      if (i % 100 === 0) peak = Math.max(peak, process.memoryUsage().rss)
    }
    console.log(JSON.stringify({ baseline, peak: Math.max(peak, process.memoryUsage().rss), ms: Date.now() - start }))`
  const r = spawnSync(node, ['-e', code], { env: { ...process.env, ...env }, encoding: 'utf8', timeout: 600_000 })
  if (r.status !== 0) return `failed (${r.status ?? r.signal})`
  const m = JSON.parse(r.stdout.trim().split('\n').pop())
  return `${(m.peak / MiB).toFixed(0)} MiB (base ${(m.baseline / MiB).toFixed(0)}, ${(m.ms / 1000).toFixed(1)} s)`
}

function exitAfterBorrow(node) {
  const code = `
    const torch = require(${JSON.stringify(ROOT)})
    const t = torch.fromBuffer(new Float32Array(16), [4, 4]).t()
    const lent = torch.ones([4]).asTypedArray()
    t.sum(); process.stdout.write(String(Date.now()))`
  const r = spawnSync(node, ['-e', code], { encoding: 'utf8', timeout: 30_000 })
  if (r.status !== 0) return r.signal ? 'never exits (killed after 30 s)' : `exit ${r.status}`
  return `exits ${Date.now() - Number(r.stdout)} ms after its last work`
}

const majors = process.argv.slice(2)
const lines = majors.length
  ? majors
  : [process.versions.node.split('.')[0], '22', '24', '26'].filter((m, i, all) => all.indexOf(m) === i)
for (const major of lines) {
  const node = major === process.versions.node.split('.')[0] ? process.execPath : nodeBinary(major)
  const version = spawnSync(node, ['--version'], { encoding: 'utf8' }).stdout.trim()
  console.log(`Node ${version}`)
  for (const mode of Object.keys(BODIES)) console.log(`  ${ITERATIONS} temporaries, ${mode}: peak ${loop(node, mode)}`)
  // Deferred finalizers free nothing until the loop ends: ~1.2 GiB per 1,000 iterations, so a
  // shorter loop (20,000 would need ~23 GiB).
  const deferred = Math.min(ITERATIONS, 3000)
  console.log(
    `  ${deferred} temporaries, none, TORCH_NODE_GC_FINALIZERS=0: peak ${loop(node, 'none', { TORCH_NODE_GC_FINALIZERS: '0' }, deferred)}`,
  )
  console.log(`  script with borrowed memory and a lent array: ${exitAfterBorrow(node)}`)
}

'use strict'
// bench/compare.js (`npm run bench`) in its tiny mode, in a child process: it prints the ResNet-18
// table and the crossing table, writes the results file where --out says, and does not crash on
// contenders it cannot run (they become "n/a" / "skipped" rows). No timing is asserted.
const { test } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { runTinyBench, mainLineOnly } = require('./helpers')

const ROOT = path.join(__dirname, '..')
const haveModel =
  fs.existsSync(path.join(ROOT, 'models', 'resnet18_traced.pt')) &&
  fs.existsSync(path.join(ROOT, 'models', 'golden', 'resnet18_input_b8.f32'))
const CONTENDERS = [
  'onnxruntime-node fp32',
  'torch-node forwardSync',
  'torch-node forward (async)',
  'torch-node optimize',
  'torch-node optimize + channelsLast',
  'torch-node bf16 (optimize + dtype bfloat16)',
  'torch-node bf16 + channelsLast',
]

test(
  'bench/compare.js --tiny prints the tables and writes --out',
  { skip: mainLineOnly('a benchmark, a developer tool') || (!haveModel && 'models not generated (npm run models)') },
  () => {
    runTinyBench('compare.js', 'results.md', 180_000, (stdout, doc) => {
      assert.match(stdout, /^### Batch 1 \(1 interleaved round, \d+ threads?\)$/m)
      assert.match(stdout, /^\| contender \| median ms \| vs onnxruntime/m)
      assert.doesNotMatch(stdout, /Python TorchScript/, 'no Python child in tiny mode')
      for (const name of CONTENDERS) {
        // A row per contender: a time, or a reason it did not run.
        const row = stdout.split('\n').find((l) => l.startsWith(`| ${name} |`))
        assert.ok(row, `a row for ${name}:\n${stdout}`)
        assert.match(row, /^\| [^|]+ \| (\d+\.\d\d \| (\d+\.\d\d×|–) \||n\/a \(|skipped: )/, row)
      }
      assert.match(stdout, /^\| torch\.fromBuffer\(Float32Array, shape\) \(no copy\) \+ dispose \| \d+\.\d\d \|$/m)

      assert.match(doc, /^# torch-node benchmark results$/m)
      assert.match(doc, /^- CPU: .+ cores available/m)
      assert.match(doc, /^- Threads: \d+/m)
      assert.match(doc, new RegExp(`^- Node ${process.version.replace(/\./g, '\\.')},`, 'm'))
      assert.match(doc, /\*\*Peak\.\*\*/)
      assert.match(doc, /^\| torch-node forwardSync \| \d+\.\d\d \|/m, 'forwardSync always runs')
      assert.ok(doc.includes('## JS ↔ tensor crossing'))
    })
  },
)

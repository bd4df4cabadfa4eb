'use strict'
// The GPU benchmarks (bench/cuda.js, bench/cuda_peer.py) where there is no GPU: they must start,
// say why they measure nothing, and exit 0 (a GPU machine runs them for real: tools/device-check.sh).
const { test } = require('node:test')
const assert = require('node:assert/strict')
const { spawnSync } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')
const { torch, PACKAGE } = require('./common')

const ROOT = path.join(__dirname, '..', '..')
const PYTHON = process.env.PYTHON || path.join(ROOT, '.libtorch', 'bin', 'python')
const onGpu = torch.cuda.isAvailable() ? 'a GPU is here: tools/device-check-run.sh runs the benchmarks for real' : false

test('bench/cuda.js starts and skips cleanly without CUDA', { skip: onGpu }, () => {
  const r = spawnSync(process.execPath, [path.join(ROOT, 'bench', 'cuda.js'), '--iters', '3'], {
    encoding: 'utf8',
    env: { ...process.env, TORCH_NODE_PACKAGE: PACKAGE },
  })
  assert.equal(r.status, 0, r.stderr)
  assert.match(
    r.stdout,
    /bench\/cuda\.js: skipped: no CUDA device \(torch\.cuda\.isAvailable\(\) is false; libtorch 2\.\d+\.\d+\)/,
  )
})

test('bench/cuda.js refuses an option it does not know', { skip: onGpu }, () => {
  const r = spawnSync(process.execPath, [path.join(ROOT, 'bench', 'cuda.js'), '--itres', '3'], { encoding: 'utf8' })
  assert.notEqual(r.status, 0)
  assert.match(r.stderr, /itres/)
})

test(
  'bench/cuda_peer.py parses and lists its commands',
  { skip: onGpu || (!fs.existsSync(PYTHON) && `no ${PYTHON}`) },
  () => {
    const r = spawnSync(PYTHON, [path.join(ROOT, 'bench', 'cuda_peer.py'), '--help'], { encoding: 'utf8' })
    assert.equal(r.status, 0, r.stderr)
    assert.match(r.stdout, /\{prepare,resnet,lm\}/)
  },
)

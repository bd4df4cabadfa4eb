'use strict'
// The persistent Python TorchScript child (bench/torchscript_child.py) that bench/compare.js
// and bench/serve-latency.js time against: which Python runs it, and a line protocol to it.
const { spawn } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')
const readline = require('node:readline')

const ROOT = path.join(__dirname, '..')

/** The Python with torch 2.13: LIBTORCH_USE_PYTORCH's, else the dev virtualenv's, else null. */
function pythonCommand() {
  if (process.env.LIBTORCH_USE_PYTORCH) return process.env.PYTHON || 'python3'
  const venv = path.join(ROOT, '.libtorch', 'bin', 'python')
  return fs.existsSync(venv) ? venv : null
}

/**
 * Starts the child on `model` with `threads` intra-op threads: `{child, next, request}`, where
 * `next()` resolves to its next output line and `request(line)` sends a line and awaits the answer.
 */
function startTorchscriptChild(python, model, golden, threads) {
  const child = spawn(python, [path.join(__dirname, 'torchscript_child.py'), model, golden, String(threads)], {
    stdio: ['pipe', 'pipe', 'pipe'],
    env: { ...process.env, OMP_NUM_THREADS: String(threads) },
  })
  let stderr = ''
  child.stderr.on('data', (d) => {
    stderr += d
  })
  const lines = readline.createInterface({ input: child.stdout })[Symbol.asyncIterator]()
  const next = async () => {
    const { value, done } = await lines.next()
    if (done) throw new Error(`the Python child exited: ${stderr.trim().split('\n').pop()}`)
    return value
  }
  const request = async (line) => {
    child.stdin.write(`${line}\n`)
    return next()
  }
  return { child, next, request }
}

module.exports = { pythonCommand, startTorchscriptChild }

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
 * Spawns a child that speaks a line protocol: `{child, next, request}`, where `next()` resolves
 * to its next stdout line (and rejects with `name` and the end of its stderr once it exited) and
 * `request(line)` sends a line and awaits the answer.
 * @param {string} name @param {string} cmd @param {string[]} args @param {object} options spawn's
 */
function lineChild(name, cmd, args, options) {
  const child = spawn(cmd, args, { ...options, stdio: ['pipe', 'pipe', 'pipe'] })
  let stderr = ''
  child.stderr.on('data', (d) => {
    stderr += d
  })
  const lines = readline.createInterface({ input: child.stdout })[Symbol.asyncIterator]()
  const next = async () => {
    const { value, done } = await lines.next()
    if (done) throw new Error(`${name} exited: ${stderr.trim().split('\n').slice(-3).join(' | ')}`)
    return value
  }
  const request = async (line) => {
    child.stdin.write(`${line}\n`)
    return next()
  }
  return { child, next, request }
}

/**
 * Starts the child on `model` with `threads` intra-op threads (a `lineChild`).
 */
function startTorchscriptChild(python, model, golden, threads) {
  return lineChild(
    'the Python child',
    python,
    [path.join(__dirname, 'torchscript_child.py'), model, golden, String(threads)],
    { env: { ...process.env, OMP_NUM_THREADS: String(threads) } },
  )
}

module.exports = { pythonCommand, lineChild, startTorchscriptChild }

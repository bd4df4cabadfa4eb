'use strict'
// Shared by the CUDA suite (__tests__/cuda/*.test.js; not a test file itself). The suite runs
// against the package in TORCH_NODE_PACKAGE (tools/device-check.sh stages one for the GPU
// machine) or this checkout, and the fixtures in TORCH_NODE_CUDA_FIXTURES, made on the GPU
// machine by its own Python (tools/compat_models.py --cuda). Where torch.cuda.isAvailable() is
// false every test skips, saying why.
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { coded } = require('../coded')

const PACKAGE = path.resolve(process.env.TORCH_NODE_PACKAGE || path.join(__dirname, '..', '..'))
const torch = require(PACKAGE)
const FIXTURES = process.env.TORCH_NODE_CUDA_FIXTURES ? path.resolve(process.env.TORCH_NODE_CUDA_FIXTURES) : null

/** false where the suite can run, else why it cannot (node:test's `skip`). */
const skip = torch.cuda.isAvailable()
  ? false
  : `no CUDA device (torch.cuda.isAvailable() is false; libtorch ${torch.version}): the CUDA suite runs on a GPU machine (tools/device-check.sh)`

/** As `skip`, and also when the GPU machine's fixtures are not there. */
const skipFixtures =
  skip ||
  (FIXTURES && fs.existsSync(path.join(FIXTURES, 'golden.json'))
    ? false
    : 'TORCH_NODE_CUDA_FIXTURES is not set to the folder tools/compat_models.py --cuda wrote (tools/device-check.sh does it)')

const golden = skipFixtures ? null : JSON.parse(fs.readFileSync(path.join(FIXTURES, 'golden.json'), 'utf8'))
const fixture = (name) => path.join(/** @type {string} */ (FIXTURES), name)

/** |a - b| ≤ tol elementwise over nested arrays (numbers or booleans). */
function close(actual, expected, tol, where = '') {
  if (Array.isArray(expected)) {
    assert.ok(Array.isArray(actual), `${where}: expected an array, got ${actual}`)
    assert.equal(actual.length, expected.length, `${where}: length`)
    expected.forEach((e, i) => close(actual[i], e, tol, `${where}[${i}]`))
  } else if (typeof expected === 'boolean') assert.equal(actual, expected, where)
  else assert.ok(Math.abs(actual - expected) <= tol, `${where}: ${actual} vs ${expected} (tolerance ${tol})`)
}

/** The largest |a - b| over two nested arrays of the same shape. */
function maxDiff(a, b) {
  if (Array.isArray(a)) return Math.max(0, ...a.map((x, i) => maxDiff(x, b[i])))
  return Math.abs(a - b)
}

module.exports = { torch, PACKAGE, FIXTURES, skip, skipFixtures, golden, fixture, close, maxDiff, coded }

'use strict'
// A bounded, reproducible run of the property-based fuzzer (tools/fuzz.js): every export and
// Tensor/ScriptModule method called with hostile arguments, in child processes on this Node
// line. Any crash, hang or error without a `code` fails the test; the failure message carries
// a standalone reproduction for each finding. Longer runs: `node tools/fuzz.js --calls 20000`.
const { test } = require('node:test')
const assert = require('node:assert/strict')
const { fuzz, format } = require('../tools/fuzz')

// Fixed so that a failure here is the same failure on every machine; change it only together
// with the generators (tools/fuzz-values.js), whose output it selects.
const SEED = 20261122
const CALLS = 3000

test(
  `fuzz: ${CALLS} hostile calls (seed ${SEED}) crash nothing, hang nothing, and throw only coded Errors`,
  { timeout: 180_000 },
  async () => {
    const result = await fuzz({ calls: CALLS, seed: SEED, jobs: 2 })
    assert.ok(result.stats.children >= Math.ceil(CALLS / 250), 'every batch ran in a child')
    assert.equal(result.stats.setupErrors, 0, 'the generators only build values that can be built')
    assert.deepEqual(
      result.findings.map((f) => `${f.kind}: ${f.label}`),
      [],
      format(result),
    )
  },
)

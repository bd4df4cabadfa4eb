'use strict'
// What the torch.pipeline tests over models/make_pipeline_models.py's folders share
// (pipeline.test.js, pipeline-tasks.test.js).
const assert = require('node:assert/strict')
const path = require('node:path')
const { coded } = require('./helpers')

const DIR = path.join(__dirname, '..', 'models', 'golden', 'pipeline')
const GOLDENS = path.join(DIR, 'goldens.json')
const TIMEOUT = { timeout: 120_000 }
// The bar: scores within 1e-5 of Python's, labels exactly.
const TOLERANCE = 1e-5

/**
 * A pipeline loaded with `{ maxQueue: 1 }`: three concurrent runs of `inputs`, of which the third
 * finds the queue full; an aborted signal rejects with `Aborted`; after dispose (twice: by
 * Symbol.dispose, then dispose()) a run rejects with `Disposed`. `name`: the class, as errors say it.
 */
async function assertQueueAbortDispose(p, inputs, name) {
  // The first runs at once, the second waits in the Batcher, the third finds its queue full.
  const results = await Promise.allSettled(inputs.map((x) => p.run(x)))
  assert.deepEqual(
    results.map((r) => r.status),
    ['fulfilled', 'fulfilled', 'rejected'],
  )
  assert.equal(results[2].reason.code, 'QueueFull')
  const ac = new AbortController()
  ac.abort()
  await assert.rejects(p.run(inputs[0], { signal: ac.signal }), coded('Aborted', new RegExp(`${name}\\.run`)))
  p[Symbol.dispose]()
  p.dispose()
  assert.equal(p.isDisposed, true)
  await assert.rejects(p.run(inputs[0]), coded('Disposed', new RegExp(`${name}\\.run: the pipeline was disposed`)))
}

module.exports = { DIR, GOLDENS, TIMEOUT, TOLERANCE, assertQueueAbortDispose }

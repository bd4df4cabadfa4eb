'use strict'
// torch.Batcher (issue 17): every request gets exactly its own rows (against single runs), a bad
// request fails alone, QueueFull, abort and timeout while queued, close(), stats, variable-length
// inputs padded with a mask (the committed text encoder against single runs and Python), and the
// AOTModule path. No test measures time: queue states are held still with a gated fake module
// (its forward waits until the test opens the gate), and every wait is bounded by `timeout`.
const { describe, test } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const torch = require('..')
const { coded } = require('./helpers')

const MODELS = path.join(__dirname, '..', 'models')
const FIXTURES = path.join(MODELS, 'fixtures')
const ENCODER = require(path.join(FIXTURES, 'sequences.json')).text_encoder
const TIMEOUT = { timeout: 60_000 }

const maxDiff = (a, b) => a.sub(b).abs().max().item()
/** Matrix kernels block differently by batch size (ARCHITECTURE.md §8): compare within 1e-5. */
function assertClose(actual, expected, what, tolerance = 1e-5) {
  assert.deepEqual(actual.shape, expected.shape, `${what}: shape`)
  const diff = maxDiff(actual, expected)
  assert.ok(diff <= tolerance, `${what}: max difference ${diff} > ${tolerance}`)
}
const ids = (list) => torch.tensor([list.map(BigInt)])
const goldenTensor = (g) => torch.tensor(g.data, { shape: g.shape })

/**
 * A fake module whose forward waits for `open()`: the test decides when batches finish. It
 * records each call's input shapes and the most calls it had running at once.
 */
function gated(reply = (x) => x.mul(2)) {
  let open
  let gate = new Promise((resolve) => {
    open = resolve
  })
  const module = {
    calls: [],
    running: 0,
    mostRunning: 0,
    async forward(...inputs) {
      this.calls.push(inputs.map((x) => (x instanceof torch.Tensor ? x.shape : x)))
      this.running++
      this.mostRunning = Math.max(this.mostRunning, this.running)
      await gate
      this.running--
      return reply(...inputs)
    },
  }
  return {
    module,
    open: () => open(),
    reset: () => {
      gate = new Promise((resolve) => {
        open = resolve
      })
    },
  }
}

/** Lets timers and promise callbacks run (setImmediate: after the timers of this turn). */
const settle = () => new Promise((resolve) => setImmediate(resolve))

describe('Batcher: batching', TIMEOUT, () => {
  test('each request gets exactly its own rows; one forward per batch of ≤ maxBatchSize rows', async () => {
    const mlp = new torch.ScriptModule(path.join(FIXTURES, 'mlp_traced.pt'))
    const seen = []
    const module = {
      forward: (x) => {
        seen.push(x.shape[0])
        return mlp.forward(x)
      },
    } // counts rows per forward
    const batcher = new torch.Batcher(module, { maxBatchSize: 8, maxDelayMs: 50 })
    torch.manualSeed(1)
    const inputs = Array.from({ length: 12 }, (_, i) => torch.randn([1 + (i % 3), 4])) // 24 rows
    const outputs = await Promise.all(inputs.map((x) => batcher.run(x)))
    inputs.forEach((x, i) => assertClose(outputs[i], mlp.forwardSync(x), `request ${i}`))
    // All twelve (1, 2, 3, 1, 2, 3, ... rows) were queued in one turn; a batch takes requests in
    // arrival order while they fit in 8 rows, and a request is never split.
    assert.deepEqual(seen, [7, 8, 6, 3], 'rows per forward')
    const stats = batcher.stats()
    assert.deepEqual(
      {
        requests: stats.requests,
        completed: stats.completed,
        batches: stats.batches,
        rows: stats.rows,
        meanBatchSize: stats.meanBatchSize,
      },
      { requests: 12, completed: 12, batches: 4, rows: 24, meanBatchSize: 6 },
    )
    await batcher.close()
  })

  test('outputs are split through tuples, lists, objects and Maps; other values are shared', async () => {
    const module = {
      async forward(x) {
        return [x.mul(2), { sum: x.sum(1), list: [x.add(1)], label: 'v1' }, new Map([[7, x.neg()]]), 3, null]
      },
    }
    const batcher = new torch.Batcher(module, { maxDelayMs: 50, maxBatchSize: 3 })
    const a = torch.tensor([[1, 2]])
    const b = torch.tensor([
      [3, 4],
      [5, 6],
    ])
    const [outA, outB] = await Promise.all([batcher.run(a), batcher.run(b)])
    assert.deepEqual(outA[0].toArray(), [[2, 4]])
    assert.deepEqual(outB[0].toArray(), [
      [6, 8],
      [10, 12],
    ])
    assert.deepEqual(outB[1].sum.toArray(), [7, 11])
    assert.deepEqual(outA[1].list[0].toArray(), [[2, 3]])
    assert.equal(outB[1].label, 'v1')
    assert.deepEqual(outB[2].get(7).toArray(), [
      [-3, -4],
      [-5, -6],
    ])
    assert.deepEqual(outA.slice(3), [3, null])
    assert.ok(outB[0].sharesStorage(outA[0]), 'views of the batch output, not copies')
    await batcher.close()
  })

  test('non-tensor inputs: equal ones share a batch, different ones do not (method option)', async () => {
    const m = new torch.ScriptModule(path.join(FIXTURES, 'extra_method.pt')) // scale(x, factor) = x * factor
    const calls = []
    const module = {
      forward: m.forward.bind(m),
      runMethod: (name, x, f) => {
        calls.push([name, x.shape[0], f])
        return m.runMethod(name, x, f)
      },
    }
    const batcher = new torch.Batcher(module, { method: 'scale', maxDelayMs: 50, maxBatchSize: 4 })
    const x = torch.ones([1, 3])
    const out = await Promise.all([
      batcher.run(x, 2),
      batcher.run(x, 3),
      batcher.run(x, 2),
      batcher.run(x, 2),
      batcher.run(x, 2),
    ])
    assert.deepEqual(
      out.map((t) => t.toArray()[0][0]),
      [2, 3, 2, 2, 2],
    )
    assert.deepEqual(calls.sort(), [
      ['scale', 1, 3],
      ['scale', 4, 2],
    ])
    await batcher.close()
  })

  test('never more than `concurrency` batches in flight; requests keep collecting meanwhile', async () => {
    const { module, open } = gated()
    const batcher = new torch.Batcher(module, { maxBatchSize: 2, maxDelayMs: 0, concurrency: 2 })
    const runs = Array.from({ length: 9 }, (_, i) => batcher.run(torch.full([1, 1], i)))
    await settle()
    assert.equal(module.running, 2)
    assert.deepEqual(batcher.stats().queued, 5)
    open()
    const out = await Promise.all(runs)
    assert.deepEqual(
      out.map((t) => t.item()),
      [0, 2, 4, 6, 8, 10, 12, 14, 16],
    )
    assert.equal(module.mostRunning, 2)
    assert.deepEqual(
      module.calls.map(([shape]) => shape[0]),
      [2, 2, 2, 2, 1],
    )
    await batcher.close()
  })
})

describe('Batcher: failure isolation', TIMEOUT, () => {
  test('a request with a wrong dtype, trailing shape or a non-tensor input fails alone', async () => {
    const mlp = new torch.ScriptModule(path.join(FIXTURES, 'mlp_traced.pt'))
    const batcher = new torch.Batcher(mlp, { maxBatchSize: 16, maxDelayMs: 50 })
    const good = Array.from({ length: 4 }, () => torch.randn([1, 4]))
    const results = await Promise.allSettled([
      batcher.run(good[0]),
      batcher.run(torch.ones([1, 4], { dtype: 'int64' })),
      batcher.run(good[1]),
      batcher.run(torch.ones([1, 5])),
      batcher.run(good[2]),
      batcher.run('not a tensor', torch.ones([1, 4])),
      batcher.run(good[3]),
    ])
    const failures = results.filter((r) => r.status === 'rejected').map((r) => r.reason.code)
    assert.deepEqual(failures, ['DTypeMismatch', 'ShapeMismatch', 'InvalidArg'])
    results
      .filter((r) => r.status === 'fulfilled')
      .forEach((r, i) => assertClose(r.value, mlp.forwardSync(good[i]), `good ${i}`))
    const stats = batcher.stats()
    assert.equal(stats.failed, 3)
    assert.equal(stats.retried, 0, 'each bad request had a batch of its own')
    await batcher.close()
  })

  test('a batched forward that throws is rerun one by one: only the culprit fails', async () => {
    const encoder = new torch.ScriptModule(path.join(FIXTURES, 'text_encoder.pt'))
    const batcher = new torch.Batcher(encoder, { padValue: 0, mask: true, maxDelayMs: 50, maxBatchSize: 3 })
    const results = await Promise.allSettled([
      batcher.run(ids([1, 2, 3])),
      batcher.run(ids([4, 99])),
      batcher.run(ids([5])),
    ])
    assert.equal(results[0].status, 'fulfilled')
    assert.equal(results[2].status, 'fulfilled')
    assert.equal(results[1].status, 'rejected')
    assert.equal(results[1].reason.code, 'ShapeMismatch')
    assert.match(results[1].reason.message, /index 99 is out of bounds/)
    const [hidden] = results[0].value
    assertClose(hidden, encoder.forwardSync(ids([1, 2, 3]), torch.full([1, 3], true))[0], 'a survivor vs a single run')
    assert.deepEqual(
      { batches: batcher.stats().batches, retried: batcher.stats().retried, failed: batcher.stats().failed },
      { batches: 1, retried: 1, failed: 1 },
    )
    await batcher.close()
  })

  test('an input disposed while queued fails its own request only; a disposed module fails all at once', async () => {
    const mlp = new torch.ScriptModule(path.join(FIXTURES, 'mlp_traced.pt'))
    const batcher = new torch.Batcher(mlp, { maxDelayMs: 50 })
    const doomed = torch.ones([1, 4])
    const runs = [batcher.run(torch.ones([1, 4])), batcher.run(doomed), batcher.run(torch.ones([1, 4]))]
    doomed.dispose()
    const results = await Promise.allSettled(runs)
    assert.deepEqual(
      results.map((r) => r.status),
      ['fulfilled', 'rejected', 'fulfilled'],
    )
    assert.equal(results[1].reason.code, 'Disposed')
    assert.equal(batcher.stats().retried, 1)
    const runs2 = [batcher.run(torch.ones([1, 4])), batcher.run(torch.ones([1, 4]))]
    mlp.dispose()
    for (const r of await Promise.allSettled(runs2)) assert.equal(r.reason.code, 'Disposed')
    assert.equal(batcher.stats().retried, 1, 'not retried one by one')
  })

  test('malformed requests are refused before queueing, with coded errors', async () => {
    const batcher = new torch.Batcher(gated().module)
    const disposed = torch.ones([1, 2])
    disposed.dispose()
    await assert.rejects(batcher.run(), coded('InvalidArg', /expected the model inputs, got none/))
    await assert.rejects(batcher.run(3, 'x'), coded('InvalidArg', /no tensor input/))
    await assert.rejects(batcher.run(torch.tensor(1)), coded('ShapeMismatch', /input 0 is a 0-dim tensor/))
    await assert.rejects(batcher.run(torch.ones([0, 2])), coded('ShapeMismatch', /no rows/))
    await assert.rejects(
      batcher.run(torch.ones([2, 2]), torch.ones([3, 2])),
      coded('ShapeMismatch', /input 1 has 3 rows \(dim 0\), an input before it 2/),
    )
    await assert.rejects(batcher.run(disposed), coded('Disposed', /input 0 was disposed/))
    await assert.rejects(batcher.run(torch.ones([1]), { timeoutMs: -1 }), coded('InvalidArg', /options\.timeoutMs/))
    await assert.rejects(
      batcher.run(torch.ones([1]), { signal: 'no' }),
      coded('InvalidArg', /options\.signal: expected an AbortSignal/),
    )
    assert.equal(batcher.stats().failed, 8)
    assert.equal(batcher.stats().batches, 0)
  })

  test('an output that cannot be split is a ShapeMismatch naming its path, even for a lone request', async () => {
    const ivalues = new torch.ScriptModule(path.join(FIXTURES, 'ivalues_scripted.pt')) // returns (..., {sum: 0-dim, ...})
    const b1 = new torch.Batcher(ivalues, { maxDelayMs: 0 })
    await assert.rejects(
      b1.run(torch.ones([2, 2]), 1),
      coded('ShapeMismatch', /^Batcher: output\[7\]\.sum: a 0-dim tensor cannot be split into the batch's 2 rows/),
    )
    const b2 = new torch.Batcher({ forward: async (x) => [x, x.narrow(0, 0, 1)] }, { maxDelayMs: 50 })
    const both = await Promise.allSettled([b2.run(torch.ones([2, 3])), b2.run(torch.ones([1, 3]))])
    for (const r of both)
      assert.match(r.reason.message, /^Batcher: output\[1\]: shape \[1,3\] cannot be split into the batch's 3 rows/)
    assert.equal(b2.stats().retried, 0, 'a split error is not retried')
  })
})

describe('Batcher: backpressure, abort, timeout, close', TIMEOUT, () => {
  test('maxQueue full: QueueFull at once; the queued ones still complete', async () => {
    const { module, open } = gated()
    const batcher = new torch.Batcher(module, { maxBatchSize: 1, maxQueue: 2, concurrency: 1 })
    const running = batcher.run(torch.ones([1, 1])) // dispatched at once: a full batch
    const queued = [batcher.run(torch.ones([1, 1])), batcher.run(torch.ones([1, 1]))]
    await assert.rejects(
      batcher.run(torch.ones([1, 1])),
      coded('QueueFull', /queue is full \(2 waiting, options\.maxQueue\)/),
    )
    assert.deepEqual([batcher.stats().inFlight, batcher.stats().queued, batcher.stats().rejected], [1, 2, 1])
    open()
    assert.equal((await running).item(), 2)
    await Promise.all(queued)
    assert.equal(batcher.stats().completed, 3)
  })

  test('abort or timeout while queued: removed and rejected at once; a running request finishes', async () => {
    const { module, open } = gated()
    const batcher = new torch.Batcher(module, { maxBatchSize: 1, concurrency: 1 })
    const running = new AbortController()
    const first = batcher.run(torch.ones([1, 1]), { signal: running.signal })
    const queued = new AbortController()
    const aborted = batcher.run(torch.ones([1, 1]), { signal: queued.signal })
    const timedOut = batcher.run(torch.ones([1, 1]), { timeoutMs: 1 })
    const kept = batcher.run(torch.full([1, 1], 5), { timeoutMs: 600_000, signal: new AbortController().signal })
    assert.equal(batcher.stats().queued, 3)
    queued.abort()
    running.abort() // too late: its batch runs
    await assert.rejects(aborted, coded('Aborted', /aborted while the request was queued/))
    await assert.rejects(timedOut, coded('Timeout', /waited 1 ms in the queue/))
    await assert.rejects(batcher.run(torch.ones([1, 1]), { signal: AbortSignal.abort() }), coded('Aborted'))
    assert.equal(batcher.stats().queued, 1)
    open()
    assert.equal((await first).item(), 2)
    assert.equal((await kept).item(), 10)
    const stats = batcher.stats()
    assert.deepEqual([stats.aborted, stats.timedOut, stats.completed, stats.batches], [2, 1, 2, 2])
  })

  test('close(): queued requests rejected, running ones finish, later runs rejected; stats add up', async () => {
    const { module, open } = gated()
    const batcher = new torch.Batcher(module, { maxBatchSize: 1, concurrency: 1 })
    const running = batcher.run(torch.ones([1, 1]))
    const queued = [batcher.run(torch.ones([1, 1])), batcher.run(torch.ones([1, 1]))]
    let closed = false
    const closing = batcher.close().then(() => {
      closed = true
    })
    assert.equal(batcher.close(), batcher.close(), 'one promise')
    assert.equal(batcher.isClosed, true)
    for (const p of queued) await assert.rejects(p, coded('Closed', /closed before this request ran/))
    await assert.rejects(batcher.run(torch.ones([1, 1])), coded('Closed', /the batcher is closed/))
    await settle()
    assert.equal(closed, false, 'close() waits for the running batch')
    open()
    assert.equal((await running).item(), 2)
    await closing
    const s = batcher.stats()
    assert.deepEqual([s.completed, s.closed, s.queued, s.inFlight], [1, 3, 0, 0])
    assert.equal(
      s.requests,
      s.completed + s.failed + s.rejected + s.timedOut + s.aborted + s.closed + s.queued + s.running,
    )
  })

  test('Symbol.asyncDispose and Symbol.dispose close it', async () => {
    const a = new torch.Batcher(gated().module)
    await a[Symbol.asyncDispose]()
    assert.equal(a.isClosed, true)
    const b = new torch.Batcher(gated().module)
    b[Symbol.dispose]()
    await assert.rejects(b.run(torch.ones([1])), coded('Closed'))
  })
})

describe('Batcher: variable-length inputs', TIMEOUT, () => {
  const encoder = new torch.ScriptModule(path.join(FIXTURES, 'text_encoder.pt'))
  const alone = (list) => encoder.forwardSync(ids(list), torch.full([1, list.length], true))

  test('the text encoder over padded token ids equals single runs and Python within 1e-5', async () => {
    const shapes = []
    const module = {
      forward: (x, mask) => {
        shapes.push([x.shape, mask.dtype])
        return encoder.forward(x, mask)
      },
    }
    const batcher = new torch.Batcher(module, { padValue: 0, mask: true, maxDelayMs: 50, maxBatchSize: 16 })
    const outputs = await Promise.all(ENCODER.cases.map((c) => batcher.run(ids(c.ids))))
    assert.deepEqual(shapes, [[[5, 12], 'bool']], 'one forward, padded to the longest (12)')
    ENCODER.cases.forEach((c, i) => {
      const [hidden, pooled] = outputs[i]
      const [hidden1, pooled1] = alone(c.ids)
      assert.deepEqual(hidden.shape, [1, c.ids.length, 8], "hidden is cut back to the request's own length")
      assertClose(hidden, hidden1, `hidden ${i} vs a single run`)
      assertClose(pooled, pooled1, `pooled ${i} vs a single run`)
      assertClose(hidden, goldenTensor(c.hidden), `hidden ${i} vs Python`)
      assertClose(pooled, goldenTensor(c.pooled), `pooled ${i} vs Python`)
    })
    await batcher.close()
  })

  test('a request may carry several rows of one length; buckets keep short and long apart', async () => {
    const shapes = []
    const module = {
      forward: (x, mask) => {
        shapes.push(x.shape)
        return encoder.forward(x, mask)
      },
    }
    const batcher = new torch.Batcher(module, {
      padValue: 0,
      mask: true,
      buckets: [4, 16],
      maxDelayMs: 50,
      maxBatchSize: 16,
    })
    const two = torch.tensor([
      [1n, 2n, 3n],
      [4n, 5n, 6n],
    ])
    const [short, long, pair] = await Promise.all([
      batcher.run(ids([7, 8])),
      batcher.run(ids([1, 2, 3, 4, 5, 6, 7, 9, 10, 11])),
      batcher.run(two),
    ])
    assert.deepEqual(shapes.sort(), [
      [1, 10],
      [3, 3],
    ])
    assertClose(short[0], alone([7, 8])[0], 'short')
    assertClose(long[0], alone([1, 2, 3, 4, 5, 6, 7, 9, 10, 11])[0], 'long')
    assert.deepEqual(pair[0].shape, [2, 3, 8])
    assertClose(pair[0].narrow(0, 1, 1), alone([4, 5, 6])[0], 'second row of a two-row request')
    await batcher.close()
  })

  test('without padValue, different lengths go to separate batches (still correct)', async () => {
    const shapes = []
    const module = {
      forward: (x, mask) => {
        shapes.push(x.shape)
        return encoder.forward(x, mask)
      },
    }
    const batcher = new torch.Batcher(module, { maxDelayMs: 50 })
    const mask = (n) => torch.full([1, n], true)
    const out = await Promise.all(
      [
        [1, 2],
        [3, 4, 5],
        [6, 7],
      ].map((l) => batcher.run(ids(l), mask(l.length))),
    )
    assert.deepEqual(shapes.sort(), [
      [1, 3],
      [2, 2],
    ])
    assertClose(out[1][0], alone([3, 4, 5])[0], 'length 3')
    await batcher.close()
  })

  test('mask options: index, dtype, invert; padValue per input', async () => {
    const seen = []
    const module = {
      forward: async (...inputs) => {
        seen.push(inputs.map((t) => t.toArray()))
        return inputs[0]
      },
    }
    const batcher = new torch.Batcher(module, {
      padValue: [-1, null],
      mask: { index: 0, dtype: 'int64', invert: true },
      maxDelayMs: 50,
    })
    const [a, b] = await Promise.all([
      batcher.run(torch.tensor([[1, 2, 3]]), torch.tensor([[10]])),
      batcher.run(torch.tensor([[4]]), torch.tensor([[20]])),
    ])
    assert.deepEqual(seen, [
      [
        [
          [0, 0, 0],
          [0, 1, 1],
        ],
        [
          [1, 2, 3],
          [4, -1, -1],
        ],
        [[10], [20]],
      ],
    ])
    assert.deepEqual(a.toArray(), [[0, 0, 0]], 'output 0 is the mask here: cut back like any [rows, length] output')
    assert.deepEqual(b.toArray(), [[0]])
    await assert.rejects(
      batcher.run(torch.tensor([1]), torch.tensor([[1]])),
      coded('ShapeMismatch', /padValue\[0\] pads it along dim 1/),
    )
    await batcher.close()
  })

  test('unpad: an output whose dim 1 equals the padded length by coincidence; name the ones to cut', async () => {
    // pooled is [rows, 8] and the padded length is 8 here: unpad: true would cut it too.
    const run = async (unpad) => {
      const batcher = new torch.Batcher(encoder, { padValue: 0, mask: true, unpad, maxDelayMs: 50 })
      const out = await Promise.all([batcher.run(ids([1, 2, 3])), batcher.run(ids([1, 2, 3, 4, 5, 6, 7, 8]))])
      await batcher.close()
      return out.map(([hidden, pooled]) => [hidden.shape, pooled.shape])
    }
    assert.deepEqual(await run(true), [
      [
        [1, 3, 8],
        [1, 3],
      ],
      [
        [1, 8, 8],
        [1, 8],
      ],
    ])
    assert.deepEqual(await run(['output[0]']), [
      [
        [1, 3, 8],
        [1, 8],
      ],
      [
        [1, 8, 8],
        [1, 8],
      ],
    ])
    assert.deepEqual(await run(false), [
      [
        [1, 8, 8],
        [1, 8],
      ],
      [
        [1, 8, 8],
        [1, 8],
      ],
    ])
  })
})

describe('Batcher: options', () => {
  const module = gated().module
  test('bad options are InvalidArg naming the option', () => {
    const cases = [
      [null, undefined, /module: expected a ScriptModule or an AOTModule/],
      [module, 5, /options: expected an options object, got number 5/],
      [module, { maxBatch: 4 }, /unknown option 'maxBatch'; accepted: maxBatchSize, /],
      [module, { maxBatchSize: 0 }, /options\.maxBatchSize: expected a positive integer, got 0/],
      [module, { maxDelayMs: -1 }, /options\.maxDelayMs/],
      [module, { maxQueue: 1.5 }, /options\.maxQueue: expected a positive integer or Infinity/],
      [module, { concurrency: '2' }, /options\.concurrency: expected a positive integer, got a string/],
      [module, { concurrency: 1.5 }, /options\.concurrency: expected a positive integer, got 1\.5/],
      [module, { padValue: 0, mask: { index: -1 } }, /options\.mask\.index: expected an input index ≥ 0, got -1/],
      [
        module,
        { padValue: 0, mask: 'yes' },
        /options\.mask: expected true, an input index or \{index, dtype, invert\}, got "yes"/,
      ],
      [module, { method: 'scale' }, /options\.method: this module has no runMethod/],
      [module, { padValue: 'x' }, /options\.padValue/],
      [module, { mask: true }, /options\.mask: needs options\.padValue/],
      [module, { buckets: [8] }, /options\.buckets: needs options\.padValue/],
      [module, { padValue: 0, buckets: [8, 4] }, /options\.buckets: expected an increasing array/],
      [
        module,
        { padValue: 0, mask: { dtype: 'int' } },
        /options\.mask\.dtype: expected one of 'float32', .*'bool', got "int"/,
      ],
      [module, { padValue: 0, mask: { at: 1 } }, /options\.mask: unknown option 'at'/],
      [module, { padValue: 0, unpad: ['hidden'] }, /options\.unpad: expected a boolean, or an array of output paths/],
    ]
    for (const [m, options, message] of cases)
      assert.throws(() => new torch.Batcher(m, options), coded('InvalidArg', message))
  })

  test('defaults', () => {
    const stats = new torch.Batcher(module).stats()
    assert.deepEqual(stats, {
      requests: 0,
      queued: 0,
      running: 0,
      inFlight: 0,
      completed: 0,
      failed: 0,
      rejected: 0,
      timedOut: 0,
      aborted: 0,
      closed: 0,
      batches: 0,
      rows: 0,
      meanBatchSize: 0,
      retried: 0,
    })
  })
})

const RESNET = path.join(MODELS, 'resnet18.pt2')
const TWO_IO = path.join(MODELS, 'two_io.pt2')
const missing = [RESNET, TWO_IO].filter((p) => !fs.existsSync(p))
describe(
  'Batcher over an AOTModule',
  { ...TIMEOUT, skip: missing.length > 0 && `not generated: ${missing.join(', ')}` },
  () => {
    test('ResNet-18 .pt2: batched requests equal single runs', async () => {
      const m = await torch.AOTModule.load(RESNET)
      const batcher = new torch.Batcher(m, { maxDelayMs: 50, maxBatchSize: 4 })
      torch.manualSeed(3)
      const inputs = [torch.rand([1, 3, 224, 224]), torch.rand([2, 3, 224, 224]), torch.rand([1, 3, 224, 224])]
      const outputs = await Promise.all(inputs.map((x) => batcher.run(x)))
      inputs.forEach((x, i) => assertClose(outputs[i], m.forwardSync(x), `request ${i}`))
      assert.equal(batcher.stats().batches, 1)
      assert.throws(() => new torch.Batcher(m, { method: 'forward' }), coded('InvalidArg', /no runMethod/))
      await batcher.close()
    })

    test('a two-input .pt2 (a batch Dim shared by x and y): one forward, each request its own rows', async () => {
      const m = new torch.AOTModule(TWO_IO) // (x [b, 3], y [b, 3]) -> (x + y, x * y), b in 1..64
      const batcher = new torch.Batcher(m, { maxDelayMs: 50 })
      const x = torch.arange(0, 6, { dtype: 'float32' }).view(2, 3)
      const out = await Promise.all([batcher.run(x, torch.ones([2, 3])), batcher.run(x, torch.full([2, 3], 2))])
      assert.deepEqual(out[0][0].toArray(), [
        [1, 2, 3],
        [4, 5, 6],
      ])
      assert.deepEqual(out[1][1].toArray(), [
        [0, 2, 4],
        [6, 8, 10],
      ])
      assert.deepEqual([batcher.stats().batches, batcher.stats().retried, batcher.stats().completed], [1, 0, 2])
      await batcher.close()
    })
  },
)

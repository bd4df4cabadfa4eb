'use strict'
// AbortSignal on the async calls: `ScriptModule.load(path, {signal})` and a last `{signal}`
// argument of `forward`/`runMethod`. Aborted before the work starts: rejects with code
// `Aborted` and the work never runs; aborted while running: the work finishes, the promise
// rejects with `Aborted` and the result is dropped. Queued calls stay queued for as long as a
// test needs: it holds the executor (helpers.holdExecutor) and releases it when done.
const { describe, test } = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const torch = require('..')
const { coded, holdExecutor, stateOf } = require('./helpers')

const FIXTURES = path.join(__dirname, '..', 'models', 'fixtures')
const MLP = path.join(FIXTURES, 'mlp_traced.pt')
const input = () => torch.ones([2, 4])

describe('AbortSignal', () => {
  test('an already aborted signal rejects forward, runMethod and load with Aborted', async () => {
    const m = await torch.ScriptModule.load(MLP)
    const signal = AbortSignal.abort()
    await assert.rejects(m.forward(input(), { signal }), coded('Aborted', /^forward: aborted$/))
    const ex = await torch.ScriptModule.load(path.join(FIXTURES, 'extra_method.pt'))
    const name = ex.methodNames().find((n) => n !== 'forward')
    await assert.rejects(ex.runMethod(name, input(), { signal }), coded('Aborted', new RegExp(`^${name}: aborted$`)))
    await assert.rejects(torch.ScriptModule.load(MLP, { signal }), coded('Aborted', /^load: aborted$/))
  })

  test('aborting while calls wait for the executor rejects them at once; other calls resolve', async () => {
    const m = await torch.ScriptModule.load(MLP)
    const hold = await holdExecutor(torch)
    const controller = new AbortController()
    const calls = []
    let kept
    try {
      calls.push(...Array.from({ length: 8 }, () => m.forward(input(), { signal: controller.signal })))
      kept = m.forward(input(), { signal: new AbortController().signal })
      assert.equal(torch.executorStats().queued, 9, 'every call waits behind the hold')
      controller.abort()
      const states = await Promise.all(calls.map(stateOf))
      assert.deepEqual(states, Array(8).fill('rejected'), 'rejected at once, while still queued')
      for (const call of calls) await assert.rejects(call, coded('Aborted', /^forward: aborted$/))
      assert.equal(await stateOf(kept), 'pending')
    } finally {
      await hold.release()
      await Promise.allSettled([...calls, kept])
    }
    assert.deepEqual((await kept).shape, [2, 3])
  })

  test('a signal that never aborts changes nothing; {signal} is not taken as an input', async () => {
    const m = await torch.ScriptModule.load(MLP, { signal: new AbortController().signal })
    const out = await m.forward(input(), { signal: new AbortController().signal })
    assert.deepEqual(out.shape, [2, 3])
    assert.deepEqual(out.toArray(), m.forwardSync(input()).toArray())
  })

  test('a signal that is not an AbortSignal is InvalidArg; forwardSync takes no options', async () => {
    const m = await torch.ScriptModule.load(MLP)
    await assert.rejects(
      torch.ScriptModule.load(MLP, { signal: {} }),
      coded('InvalidArg', /options.signal: expected an AbortSignal/),
    )
    assert.throws(
      () => new torch.ScriptModule(MLP, { signal: AbortSignal.abort() }),
      coded('InvalidArg', /unknown option 'signal'/),
    )
    assert.throws(
      () => m.forwardSync(input(), { signal: new AbortController().signal }),
      (e) => e.code === 'InvalidArg',
    )
  })
})

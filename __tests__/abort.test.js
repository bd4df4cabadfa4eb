'use strict'
// AbortSignal on the async calls: `ScriptModule.load(path, {signal})` and a last `{signal}`
// argument of `forward`/`runMethod`. Aborted before the work starts: rejects with code
// `Aborted` and the work never runs; aborted while running: the work finishes, the promise
// rejects with `Aborted` and the result is dropped.
const { describe, test } = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const torch = require('..')
const { coded } = require('./helpers')

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

  test('aborting while calls wait for the thread pool rejects the waiting ones; others resolve', async () => {
    const m = await torch.ScriptModule.load(MLP)
    const controller = new AbortController()
    // More calls than libuv threads (4 by default): the later ones are still queued.
    const calls = Array.from({ length: 64 }, () => m.forward(input(), { signal: controller.signal }))
    controller.abort()
    const settled = await Promise.allSettled(calls)
    const rejected = settled.filter((s) => s.status === 'rejected')
    assert.ok(rejected.length > 0, 'queued calls are aborted')
    for (const r of rejected) assert.equal(r.reason.code, 'Aborted')
    for (const s of settled.filter((s) => s.status === 'fulfilled')) assert.deepEqual(s.value.shape, [2, 3])
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

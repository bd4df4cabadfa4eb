'use strict'
// dispose() of CUDA tensors and modules gives their device memory back. Its own file (its own
// process): the counts must not see other files' garbage. Skips without CUDA.
const { test } = require('node:test')
const assert = require('node:assert/strict')
const { torch, skip, skipFixtures, fixture } = require('./common')

test('dispose() gives device memory back: 80 allocations of 2 GiB never hold more than one', { skip }, () => {
  // The caching allocator reuses a freed block: without dispose() (and before the GC ran) the
  // loop would hold 160 GiB, more than an H100 (80 GB) or an H200 (141 GB) has: an out-of-memory
  // error. The bytes torch.memory() counts rise by the tensor's and fall back each time.
  const elements = 2 ** 29 // float32: 2 GiB
  // Garbage of earlier code is collected first: a GC-time finalizer would change the counts.
  if (global.gc) global.gc()
  const before = torch.memory()
  for (let i = 0; i < 80; i++) {
    const t = torch.empty([elements], { device: 'cuda' })
    assert.equal(torch.memory().bytes - before.bytes, elements * 4, "the tensor's bytes are counted")
    t.dispose()
    assert.equal(torch.memory().bytes, before.bytes, 'and uncounted by dispose()')
  }
  assert.equal(torch.memory().tensors, before.tensors)
})

test('a disposed CUDA module and its outputs leave no tensors counted', { skip: skipFixtures }, async () => {
  if (global.gc) global.gc()
  const before = torch.memory()
  for (let i = 0; i < 3; i++) {
    const m = await torch.ScriptModule.load(fixture('traced.pt'), { device: 'cuda' })
    const x = torch.ones([64, 3, 8, 8], { device: 'cuda' })
    const y = await m.forward(x)
    assert.equal(y.device, 'cuda:0')
    y.dispose()
    x.dispose()
    m.dispose()
    assert.equal(torch.memory().bytes, before.bytes)
    assert.equal(torch.memory().tensors, before.tensors)
  }
})

'use strict'
// Regression tests for hostile input: each defect found by review runs in a child process
// (an abort or segfault fails the test instead of the suite) and must end cleanly with the
// documented outcome — a coded error, or the right value.
const { describe, test } = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const { childOut } = require('./helpers')

const ROOT = path.join(__dirname, '..')
const FIXTURES = path.join(ROOT, 'models', 'fixtures')
const NODE_MAJOR = Number(process.versions.node.split('.')[0])

/**
 * Runs `source` (with `torch`, `FIXTURES` and `out(value)` in scope) in a child Node and returns
 * what it passed to `out`, after asserting a clean exit with no panic or fatal error.
 */
function run(source, { timeout = 60_000 } = {}) {
  const code = `
    const torch = require(${JSON.stringify(ROOT)})
    const FIXTURES = ${JSON.stringify(FIXTURES)}
    const path = require('node:path')
    const out = (v) => process.stdout.write('\\nOUT ' + JSON.stringify(v) + '\\n')
    const caught = (f) => { try { return { value: String(f()) } } catch (e) { return { code: e.code, message: e.message } } }
    ;(async () => { ${source} })().catch((e) => { console.error(e); process.exitCode = 1 })`
  return childOut(code, { timeout, nodeArgs: ['--expose-gc'] })
}

describe('hostile input: each reviewed defect stays fixed', () => {
  test('a getter that disposes the tensor during its own call: the call finishes, then it is disposed', () => {
    const r = run(`
      const t = torch.ones([3, 3])
      const dims = [0]
      Object.defineProperty(dims, 0, { get() { t.dispose(); return 0 } })
      const sum = caught(() => t.sum(dims))
      out({ sum, disposed: t.isDisposed, after: caught(() => t.sum()) })`)
    assert.deepEqual(r.sum, { value: 'tensor([3., 3., 3.])' })
    assert.equal(r.disposed, true)
    assert.equal(r.after.code, 'Disposed')
  })

  test('sizes whose element count overflows int64 are InvalidArg before anything is allocated', () => {
    const r = run(`out([
      caught(() => torch.fromBuffer(new Float32Array(4), [2 ** 32, 2 ** 32])),
      caught(() => torch.fromBuffer(new Float64Array(4), [2 ** 31, 2 ** 31, 4])),
      caught(() => torch.ones([2 ** 40, 2 ** 40])),
      caught(() => torch.zeros([1]).view(2 ** 32, 2 ** 32)),
    ])`)
    for (const e of r) {
      assert.equal(e.code, 'InvalidArg', JSON.stringify(e))
      assert.match(e.message, /more elements than an int64 can count/)
    }
  })

  test('deep nesting is a coded error, not a stack overflow: data, forward inputs, dims', () => {
    const r = run(`
      const deep = JSON.parse('['.repeat(80000) + '1' + ']'.repeat(80000))
      const m = new torch.ScriptModule(path.join(FIXTURES, 'ivalues_scripted.pt'))
      let nested = 1
      for (let i = 0; i < 80000; i++) nested = [nested]
      out([
        caught(() => torch.tensor(deep)),
        caught(() => m.runMethodSync('echo_nested', { a: nested })),
        caught(() => torch.ones([1]).view(new Array(100000).fill(1))),
        caught(() => { let t = torch.ones([1]); for (let i = 0; i < 1100; i++) t = t.unsqueeze(0); return t.toArray() }),
      ])`)
    assert.match(r[0].message, /nested deeper than 1024 levels/)
    assert.match(r[1].message, /nested deeper than 256 levels/)
    assert.match(r[2].message, /100000 dimensions is more than the 1024 supported/)
    assert.match(r[3].message, /dimensions is more than the 1024 supported/)
    for (const e of r) assert.equal(e.code, 'InvalidArg', JSON.stringify(e))
  })

  test('fromBuffer refuses a resizable ArrayBuffer; a growable SharedArrayBuffer is fine', () => {
    const r = run(`
      const rz = new ArrayBuffer(16, { maxByteLength: 64 })
      const sab = new SharedArrayBuffer(16, { maxByteLength: 64 })
      out([caught(() => torch.fromBuffer(new Float32Array(rz), [4])), caught(() => torch.fromBuffer(sab, [4]).add_(1))])`)
    assert.equal(r[0].code, 'InvalidArg')
    assert.match(r[0].message, /resizable ArrayBuffer/)
    assert.deepEqual(r[1], { value: 'tensor([1., 1., 1., 1.])' })
  })

  test('fromBuffer: getters that detach the buffer run before its memory is looked at', () => {
    const r = run(`
      const detach = (a) => structuredClone(a.buffer, { transfer: [a.buffer] })
      const a = new Float32Array(1 << 20).fill(1)
      const viaOffset = caught(() => torch.fromBuffer(a, [1 << 20], { get byteOffset() { detach(a); return 0 } }))
      const b = new Float32Array(1 << 20).fill(1)
      const shape = Object.defineProperty([0], 0, { get() { detach(b); return 1 << 20 } })
      const viaShape = caught(() => torch.fromBuffer(b, shape))
      const c = new Float32Array(1 << 20).fill(1)
      const desc = Object.getOwnPropertyDescriptor(ArrayBuffer.prototype, 'resizable')
      Object.defineProperty(ArrayBuffer.prototype, 'resizable', { get() { if (this === c.buffer) detach(c); return false }, configurable: true })
      const viaResizable = caught(() => torch.fromBuffer(c, [1 << 20]))
      Object.defineProperty(ArrayBuffer.prototype, 'resizable', desc)
      out({ viaOffset, viaShape, viaResizable, lengths: [a.length, b.length, c.length] })`)
    assert.deepEqual(r.lengths, [0, 0, 0], 'each getter detached its buffer')
    for (const k of ['viaOffset', 'viaShape', 'viaResizable'])
      assert.equal(r[k].code, 'ShapeMismatch', `${k}: ${JSON.stringify(r[k])}`)
  })

  test('a buffer a tensor borrows cannot be transferred away (24+: refused; 20: copied; 22: see docs/memory.md)', () => {
    const r = run(`
      const { MessageChannel } = require('node:worker_threads')
      const arr = new Float32Array([1, 2, 3, 4])
      const t = torch.fromBuffer(arr, [4])
      const tries = []
      try { structuredClone(arr.buffer, { transfer: [arr.buffer] }); tries.push('cloned') } catch (e) { tries.push(e.name) }
      const { port1 } = new MessageChannel()
      try { port1.postMessage(arr.buffer, [arr.buffer]); tries.push('posted') } catch (e) { tries.push(e.name) }
      port1.close()
      global.gc()
      out({ tries, length: arr.length, sum: t.sum().item() })`)
    assert.equal(r.length, 4, 'the JS array is still attached')
    assert.equal(r.sum, 10)
    if (NODE_MAJOR >= 22) assert.deepEqual(r.tries, ['DataCloneError', 'DataCloneError'])
  })

  test('a lent asTypedArray pins the storage: a model that resize_s it fails and nothing dangles', () => {
    const r = run(`
      const m = new torch.ScriptModule(path.join(FIXTURES, 'grow_scripted.pt'))
      const t = torch.ones([4])
      const lent = t.asTypedArray()
      const grow = caught(() => m.forwardSync(t, 1 << 20))
      lent[0] = 5
      const borrowed = torch.fromBuffer(new Float32Array(4).fill(2), [2, 2]).t()
      const grow2 = caught(() => m.forwardSync(borrowed, 100))
      out({ grow, grow2, values: t.toArray(), shape: t.shape, borrowed: [borrowed.shape, borrowed.strides, borrowed.sum().item()] })`)
    assert.equal(r.grow.code, 'ForwardError')
    assert.match(r.grow.message, /not resizable/)
    assert.equal(r.grow2.code, 'ForwardError')
    assert.deepEqual(r.values, [5, 1, 1, 1], 'the failed resize_ left the geometry as it was')
    assert.deepEqual(r.shape, [4])
    assert.deepEqual(r.borrowed, [[2, 2], [1, 2], 8])
  })

  test('outputs are built without running Array.prototype / Object.prototype setters; a throwing Map.prototype.set rejects', () => {
    const r = run(`
      const m = new torch.ScriptModule(path.join(FIXTURES, 'ivalues_scripted.pt'))
      let ran = 0
      Object.defineProperty(Array.prototype, '0', { set() { ran++; throw new Error('array setter') }, configurable: true })
      Object.defineProperty(Object.prototype, 'a', { set() { ran++; throw new Error('object setter') }, configurable: true })
      const list = await m.runMethod('echo_list_int', [1, 2, 3])
      const dict = await m.runMethod('echo_dict_str_float', { a: 1.5 })
      const arr = torch.tensor([[1, 2], [3, 4]]).toArray()
      delete Array.prototype[0]; delete Object.prototype.a
      const mark = new Error('map set')
      const input = new Map([[1, 'x']])
      const set = Map.prototype.set
      Map.prototype.set = function () { throw mark }
      const settled = await m.runMethod('echo_dict_int_str', input).then(() => 'resolved', (e) => (e === mark ? 'rejected with the setter error' : 'rejected: ' + e))
      Map.prototype.set = set
      out({ list, dict: { a: Object.getOwnPropertyDescriptor(dict, 'a').value }, arr, ran, settled })`)
    assert.deepEqual(r.list, [1, 2, 3])
    assert.deepEqual(r.dict, { a: 1.5 })
    assert.deepEqual(r.arr, [
      [1, 2],
      [3, 4],
    ])
    assert.equal(r.ran, 0)
    assert.equal(r.settled, 'rejected with the setter error')
  })

  test('tidy closes its scope when reading the result throws, and keeps tensors in Maps, Sets, hidden keys and class instances', () => {
    const r = run(`
      const mark = new Error('getter')
      let threw = false
      try { torch.tidy(() => ({ t: torch.ones([2]), get boom() { throw mark } })) } catch (e) { threw = e === mark }
      let thenThrew = false
      try { torch.tidy(() => ({ get then() { throw mark } })) } catch (e) { thenThrew = e === mark }
      // A tensor made now is not recorded in a scope left open: a later tidy does not dispose it.
      const outside = torch.ones([1])
      torch.tidy(() => {})
      const map = torch.tidy(() => new Map([['k', torch.ones([2])]]))
      const set = torch.tidy(() => new Set([torch.ones([2])]))
      const hidden = torch.tidy(() => {
        const o = { [Symbol('s')]: torch.ones([1]) }
        Object.defineProperty(o, 'h', { value: torch.ones([1]), enumerable: false })
        return o
      })
      class Holder { #t = torch.ones([2]); get t() { return this.#t } }
      const holder = torch.tidy(() => new Holder())
      const dropped = []
      torch.tidy(() => { dropped.push(torch.ones([2])); return { kept: 1 } })
      out({
        threw, thenThrew, outside: outside.isDisposed,
        map: map.get('k').isDisposed, set: [...set][0].isDisposed,
        hidden: [hidden.h.isDisposed, hidden[Object.getOwnPropertySymbols(hidden)[0]].isDisposed],
        holder: holder.t.isDisposed, dropped: dropped[0].isDisposed,
      })`)
    assert.deepEqual(r, {
      threw: true,
      thenThrew: true,
      outside: false,
      map: false,
      set: false,
      hidden: [false, false],
      holder: false,
      dropped: true,
    })
  })

  test('no silent wrong values: thread counts, integer overflow, pow_ by a negative integer', () => {
    const r = run(`out([
      caught(() => torch.setNumThreads(2 ** 32 + 1)),
      caught(() => torch.setNumThreads(5000)),
      caught(() => torch.setNumInteropThreads(0)),
      caught(() => torch.tensor([-1, 256, 1e10], { dtype: 'uint8' })),
      caught(() => torch.tensor([255.9], { dtype: 'uint8' })),
      caught(() => torch.tensor([2 ** 31], { dtype: 'int32' })),
      caught(() => torch.tensor([300n], { dtype: 'uint8' })),
      caught(() => torch.tensor([1, 2], { dtype: 'int32' }).pow_(-1)),
      caught(() => torch.tensor([-128, 126.5], { dtype: 'int8' })),
      caught(() => torch.getNumThreads()),
    ])`)
    assert.match(r[0].message, /expected 1 to 1024 threads, got 4294967297/)
    assert.match(r[1].message, /expected 1 to 1024 threads, got 5000/)
    assert.match(r[2].message, /expected 1 to 1024 threads, got 0/)
    assert.match(r[3].message, /value -1 cannot be converted to type uint8 without overflow/)
    assert.match(r[4].message, /value 255.9 cannot be converted to type uint8/)
    assert.match(r[5].message, /value 2147483648 cannot be converted to type int32/)
    assert.match(r[6].message, /value 300 cannot be converted to type uint8/)
    assert.match(r[7].message, /Integers to negative integer powers are not allowed/)
    assert.deepEqual(r[8], { value: 'tensor([-128,  126], dtype=torch.int8)' })
    for (const e of r.slice(0, 8)) assert.equal(e.code, 'InvalidArg', JSON.stringify(e))
    assert.ok(Number(r[9].value) >= 1)
  })

  test('new Tensor() and Tensor() are coded errors', () => {
    const r = run(
      `out([caught(() => new torch.Tensor()), caught(() => torch.Tensor()), caught(() => new torch.Tensor([1, 2]))])`,
    )
    for (const e of r) {
      assert.equal(e.code, 'InvalidArg')
      assert.match(e.message, /^new Tensor\(\): tensors are made with torch.tensor/)
    }
  })
})

'use strict'
// Typed arguments (src/convert.rs): a value of the wrong type is an InvalidArg with our wording,
// and no native export throws while it reads its arguments (the throw src/outcome.rs forbids).
const { test } = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const { spawnSync } = require('node:child_process')
const torch = require('..')
const { coded } = require('./helpers')

test('wrong-typed arguments are InvalidArg naming the argument', () => {
  const t = torch.ones([2, 3])
  assert.throws(() => t.transpose('a', 1), coded('InvalidArg', /^transpose: dim0: expected a number, got a string$/))
  assert.throws(() => t.narrow(0, 0, '1'), coded('InvalidArg', /^narrow: length: expected a number, got a string$/))
  assert.throws(() => t.narrow(0, 0.5, 1), coded('InvalidArg', /^narrow: start: expected an integer, got 0.5$/))
  assert.throws(() => t.matmul(5), coded('InvalidArg', /^matmul: other: expected a Tensor, got number 5$/))
  assert.throws(() => t.maskedSelect({}), coded('InvalidArg', /^maskedSelect: mask: expected a Tensor, got an object$/))
  assert.throws(() => t.sum(0, 'yes'), coded('InvalidArg', /^sum: keepdim: expected a boolean, got a string$/))
  assert.throws(() => t.argmax(0, 1), coded('InvalidArg', /^argmax: keepdim: expected a boolean, got number 1$/))
  assert.throws(() => t.sort(-1, 'desc'), coded('InvalidArg', /^sort: descending: expected a boolean/))
  assert.throws(() => t.clamp('0'), coded('InvalidArg', /^clamp: min: expected a number, got a string$/))
  assert.throws(() => t.add('1'), coded('InvalidArg', /^add: other: expected a Tensor or a number, got a string$/))
  assert.throws(() => t.cuda(0), coded('InvalidArg', /^cuda: device: expected a string, got number 0$/))
  assert.throws(() => t.requiresGrad_('yes'), coded('InvalidArg', /^requiresGrad_: requiresGrad: expected a boolean/))
  assert.throws(() => torch.cat([t, 1]), coded('InvalidArg', /^cat: tensors\[1\]: expected a Tensor, got number 1$/))
  assert.throws(
    () => torch.stack(t),
    coded('InvalidArg', /^stack: tensors: expected an array of tensors, got a Tensor$/),
  )
  assert.throws(() => torch.randint('0', 5, [2]), coded('InvalidArg', /^low: expected a number, got a string$/))
  assert.throws(() => torch.linspace(0, 1, 2.5), coded('InvalidArg', /^steps: expected an integer, got 2.5$/))
  assert.throws(
    () => torch.full([2], 'x'),
    coded('InvalidArg', /^value: expected a number or a boolean, got a string$/),
  )
  assert.throws(() => torch.manualSeed('1'), coded('InvalidArg', /^seed: expected a number, got a string$/))
  assert.throws(() => torch.loadLibrary(1), coded('InvalidArg', /^loadLibrary: path: expected a string, got number 1$/))
  assert.throws(
    () => torch.image.encode('x', 'png'),
    coded('InvalidArg', /^encode: tensor: expected a Tensor, got a string$/),
  )
  // Left out or null: the default, as before.
  assert.deepEqual(t.sum(null, undefined).shape, [])
  assert.deepEqual(t.flatten(undefined, null).shape, [6])
})

test("a getter that throws while an argument is read is the caller's own error", () => {
  const boom = new Error('boom')
  const hostile = {
    get dtype() {
      throw boom
    },
  }
  assert.throws(
    () => torch.ones([2], hostile),
    (e) => e === boom,
  )
  const sizes = [3, 2]
  Object.defineProperty(sizes, 1, {
    get() {
      throw boom
    },
  })
  assert.throws(
    () => torch.ones([2, 3]).view(sizes),
    (e) => e === boom,
  )
  assert.throws(
    () => torch.ones(sizes),
    (e) => e === boom,
  )
})

test('no native export throws, whatever its arguments (checked on the raw addon)', () => {
  // In a child: the raw addon is loaded beside index.js's copy, and every export and Tensor
  // method is called with hostile argument lists. Each must return (a value or the failure
  // sentinel); a throw would come from native code.
  const script = `
    const native = require(${JSON.stringify(path.join(__dirname, '..', 'torch-node.node'))})
    const skip = new Set(['_takeError', '_tidyBegin', '_tidyEnd', 'setNumInteropThreads', 'loadLibrary', '_loadTorchvisionOps'])
    const hostile = [[], ['x', 'y', 'z'], [{}, [], null], [Symbol('s')], [1n, 2.5, -1], [new Proxy({}, {}), () => 1]]
    process.on('unhandledRejection', () => {}) // the async exports reject, as they should
    const t = native.ones([2, 3])
    let calls = 0
    const fns = []
    for (const [name, value] of Object.entries(native)) {
      if (typeof value === 'function' && /^_[A-Z]/.test(name)) { // internal classes: their statics
        for (const n of Object.getOwnPropertyNames(value)) {
          if (typeof value[n] === 'function') fns.push([name + '.' + n, value[n], null])
        }
      } else if (typeof value === 'function' && !skip.has(name) && !/^[A-Z]/.test(name)) fns.push([name, value, null])
      else if (value && typeof value === 'object' && name !== '_failed') {
        for (const [n, f] of Object.entries(value)) if (typeof f === 'function') fns.push([name + '.' + n, f, null])
      }
    }
    for (const cls of ['ScriptModule', 'AOTModule']) {
      for (const n of ['load', '_open']) fns.push([cls + '.' + n, native[cls][n], null])
    }
    for (const name of Object.getOwnPropertyNames(native.Tensor.prototype)) {
      const d = Object.getOwnPropertyDescriptor(native.Tensor.prototype, name)
      if (typeof d.value === 'function' && name !== 'constructor' && name !== 'dispose') fns.push(['Tensor.' + name, d.value, t])
    }
    for (const [name, fn, self] of fns) {
      for (const args of hostile) {
        try {
          fn.apply(self, args)
          native._takeError()
          calls++
        } catch (e) {
          console.error('THREW ' + name + '(' + args.map(String).join(', ') + '): ' + e.message)
          process.exit(1)
        }
      }
    }
    console.log('calls ' + calls)
  `
  const r = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', timeout: 120_000 })
  assert.equal(r.status, 0, r.stderr)
  assert.ok(Number(/calls (\d+)/.exec(r.stdout)[1]) > 500, r.stdout)
})

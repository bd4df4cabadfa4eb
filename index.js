'use strict'
// Entry point: loads the native addon and adds only what Rust cannot express — variadic
// method arguments, util.inspect, and the `cuda` namespace object.
const path = require('node:path')
const util = require('node:util')
const { markAsUntransferable } = require('node:worker_threads')

let native
try {
  native = require(path.join(__dirname, 'torch-node.node'))
} catch (e) {
  e.message = `torch-node: cannot load the native addon (torch-node.node). Run \`npm install\` ` +
    `(or \`npm run build\`) in ${__dirname} first.\n${e.message}`
  throw e
}

const { Tensor, ScriptModule } = native

/** An Error with a `code`, like the ones the native side throws. */
function codedError(code, message) {
  const e = new Error(message)
  e.code = code
  return e
}

function describe(value) {
  if (value === null) return 'null'
  if (typeof value !== 'object') return typeof value
  const name = value.constructor && value.constructor.name
  return name ? `${/^[AEIOU]/.test(name) ? 'an' : 'a'} ${name}` : 'an object'
}

// Shapes and dims as an array or as arguments, as PyTorch takes them: view(2, 3), view([2, 3]).
for (const name of ['view', 'reshape', 'permute', 'expand']) {
  const impl = Tensor.prototype[name]
  Object.defineProperty(Tensor.prototype, name, {
    value: { [name](...sizes) { return impl.call(this, sizes.length === 1 && Array.isArray(sizes[0]) ? sizes[0] : sizes) } }[name],
    writable: true,
    configurable: true,
  })
}

// fromBuffer over a bare ArrayBuffer or SharedArrayBuffer: N-API 8 reads TypedArrays (and
// cannot see SharedArrayBuffers directly), so view the bytes; the dtype defaults to float32.
// Then the buffer is marked untransferable (a Node API N-API does not reach): transferring it
// (`postMessage(buf, [buf])`, `structuredClone` with transfer, `buf.transfer()` on 24+) would
// hand the memory the tensor reads to a new owner that may free it; marked, Node refuses the
// transfer (20: copies instead). Permanent for that buffer.
const fromBufferNative = native.fromBuffer
function fromBuffer(data, shape, options) {
  const bare = data instanceof ArrayBuffer || (typeof SharedArrayBuffer !== 'undefined' && data instanceof SharedArrayBuffer)
  let bytes = data
  if (bare) {
    try {
      bytes = new Uint8Array(data)
    } catch (e) { // a detached buffer (Node 20 has no `detached` property to ask first)
      throw codedError('InvalidArg', `fromBuffer: data: cannot view the buffer (${e.message})`)
    }
  }
  const t = bare ? fromBufferNative(bytes, shape, { dtype: 'float32', ...options }) : fromBufferNative(data, shape, options)
  markAsUntransferable(bare ? data : data.buffer)
  return t
}

/**
 * Runs `fn` and disposes every tensor created while it runs, except those it returns (a
 * Tensor, or arrays/objects of them). Synchronous functions only, as in tfjs.
 */
function tidy(fn) {
  if (typeof fn !== 'function') throw codedError('InvalidArg', `tidy: expected a function, got ${describe(fn)}`)
  native._tidyBegin()
  let result
  let isPromise
  try {
    result = fn()
    isPromise = result !== null && (typeof result === 'object' || typeof result === 'function') &&
      typeof result.then === 'function'
  } catch (e) {
    native._tidyEnd(undefined) // the scope closes whatever fn (or a throwing `then` getter) did
    throw e
  }
  if (isPromise) {
    native._tidyEnd(undefined)
    throw codedError('InvalidArg', 'tidy: the function returned a Promise; tidy only tracks synchronous work')
  }
  native._tidyEnd(result)
  return result
}

// napi-rs reports its own argument conversion failures (`transpose(0)`: a missing number) with
// N-API status codes (`NumberExpected`, `StringExpected`, ...); give them ours.
// V8's own "Illegal invocation" (an object made with Object.create(Tensor.prototype) passes the
// instanceof check below but has no native tensor) gets the same treatment.
function recode(e, where) {
  if (e && typeof e.code === 'string' && /Expected$/.test(e.code)) {
    e.message = `${where}: ${e.message}`
    e.code = 'InvalidArg'
  } else if (e instanceof TypeError && e.message === 'Illegal invocation' && e.code === undefined) {
    e.message = `${where}: called on an object that is not a native ${where.split('.')[0]} (made with Object.create?)`
    e.code = 'InvalidArg'
  }
  return e
}

// V8 answers a method called on the wrong receiver (`Tensor.prototype.numel.call({})`) with a
// bare TypeError("Illegal invocation"); check the receiver first so it gets a code and says
// what went wrong. Static methods are left alone.
function guardReceivers(Class) {
  for (const name of Object.getOwnPropertyNames(Class.prototype)) {
    if (name === 'constructor') continue
    const desc = Object.getOwnPropertyDescriptor(Class.prototype, name)
    const check = (self) => {
      if (!(self instanceof Class)) {
        throw codedError('InvalidArg', `${Class.name}.${name}: called on ${describe(self)}; call it on a ${Class.name}`)
      }
    }
    if (typeof desc.value === 'function') {
      const impl = desc.value
      desc.value = {
        [name](...args) {
          check(this)
          try {
            return impl.apply(this, args)
          } catch (e) {
            throw recode(e, `${Class.name}.${name}`)
          }
        },
      }[name]
    }
    if (desc.get) {
      const get = desc.get
      desc.get = function () { check(this); return get.call(this) }
    }
    Object.defineProperty(Class.prototype, name, desc)
  }
}

// napi-rs passes one JS argument per Rust parameter; these methods take their inputs as
// rest parameters, so collect them into the array the native side reads.
for (const name of ['forward', 'forwardSync']) {
  const impl = ScriptModule.prototype[name]
  Object.defineProperty(ScriptModule.prototype, name, {
    value: function (...inputs) { return impl.call(this, inputs) },
    writable: true,
    configurable: true,
  })
}
for (const name of ['runMethod', 'runMethodSync']) {
  const impl = ScriptModule.prototype[name]
  Object.defineProperty(ScriptModule.prototype, name, {
    value: function (method, ...inputs) { return impl.call(this, method, inputs) },
    writable: true,
    configurable: true,
  })
}

guardReceivers(Tensor)
guardReceivers(ScriptModule)

// `using t = torch.ones([2])` (explicit resource management: Node 24 and later) calls
// `t[Symbol.dispose]()` at the end of the block; on 20 and 22 the symbol exists and the method can
// be called by hand. napi-rs cannot declare a symbol-named method from Rust.
for (const Class of [Tensor, ScriptModule]) {
  Object.defineProperty(Class.prototype, Symbol.dispose, {
    value: function dispose() { this.dispose() },
    writable: true,
    configurable: true,
  })
}

// console.log(tensor) prints what Python prints.
Tensor.prototype[util.inspect.custom] = function () {
  return this.toString()
}

/** `torch.where(condition, x, y)`: x where condition holds, else y. */
function where(condition, x, y) {
  if (!(condition instanceof Tensor)) throw codedError('InvalidArg', `where: condition: expected a bool Tensor, got ${describe(condition)}`)
  if (typeof x === 'number' || typeof x === 'boolean') x = native.tensor(x)
  if (!(x instanceof Tensor)) throw codedError('InvalidArg', `where: x: expected a Tensor or a number, got ${describe(x)}`)
  return x.where(condition, y)
}

const exported = { ...native, fromBuffer, tidy, where }
for (const [name, value] of Object.entries(exported)) {
  if (typeof value !== 'function' || /^[A-Z]/.test(name)) continue
  exported[name] = {
    [name](...args) {
      try {
        return value.apply(this, args)
      } catch (e) {
        throw recode(e, name)
      }
    },
  }[name]
}
// The tidy scope natives are used by `tidy` above only (not typed, not exported).
delete exported._tidyBegin
delete exported._tidyEnd
module.exports = exported

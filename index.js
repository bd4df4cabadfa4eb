'use strict'
// Entry point: loads the native addon and adds only what Rust cannot express — variadic
// method arguments, util.inspect, and the `cuda` namespace object.
const path = require('node:path')
const util = require('node:util')

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
      desc.value = { [name](...args) { check(this); return impl.apply(this, args) } }[name]
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

// console.log(tensor) prints what Python prints.
Tensor.prototype[util.inspect.custom] = function () {
  return this.toString()
}

module.exports = native

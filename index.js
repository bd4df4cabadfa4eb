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

// console.log(tensor) prints what Python prints.
Tensor.prototype[util.inspect.custom] = function () {
  return this.toString()
}

module.exports = native

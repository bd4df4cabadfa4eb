// @ts-check
'use strict'
// The errors torch-node raises from JS (index.js, lib/vision.js, lib/batcher.js, lib/ragged.js),
// worded as the native ones are: `describe` asks the addon, which words what a value is for every
// message ("number 5", "a string", "an array", "an object"), and tells it the class of other
// objects ("an AbortSignal"), which only JS can read safely.

/** @typedef {Error & {code: string}} CodedError */

/**
 * An Error with a `code`, like every error torch-node throws; its stack starts at `caller`'s caller.
 * @param {string} code
 * @param {string} message
 * @param {Function} [caller]
 * @returns {CodedError}
 */
function codedError(code, message, caller) {
  const e = /** @type {CodedError} */ (new Error(message))
  e.code = code
  if (caller) Error.captureStackTrace(e, caller)
  return e
}

/** The native addon, required on the first `describe` (errors.js loads before index.js has it). */
let native

/**
 * What `value` is, for "expected ..., got <describe(value)>": the addon's words
 * (`torch_core::args::JsKind`), with the class of an object that JS reads here ("an
 * AbortSignal"). Never throws (a Proxy's traps may).
 * @param {unknown} value
 * @returns {string}
 */
function describe(value) {
  let name = ''
  try {
    if (Array.isArray(value)) name = 'Array'
    else if (typeof value === 'object' && value !== null) {
      const proto = Object.getPrototypeOf(value)
      const ctor = proto === null || proto === Object.prototype ? undefined : value.constructor?.name
      if (typeof ctor === 'string') name = ctor
    }
  } catch {} // a revoked Proxy, a throwing `constructor` getter: an object all the same
  native ??= require('./addon').loadAddon()
  return native._describe(value, name)
}

/**
 * Calls a native method that reports failure by returning the addon's sentinel
 * (src/napi/outcome.rs says why): its result, or its stashed error thrown from here as a coded
 * error whose message starts with `where` (an exception user code threw is rethrown as it is).
 * @param {Function} impl @param {unknown} self @param {unknown[]} args @param {string} where
 * @param {Function} [caller] where the stack trace starts
 * @returns {any}
 */
function callNative(impl, self, args, where, caller) {
  native ??= require('./addon').loadAddon()
  const r = Reflect.apply(impl, self, args)
  if (r !== native._failed) return r
  const [code, detail] = native._takeError()
  if (code === null) throw detail
  throw codedError(code, `${where}: ${detail}`, caller)
}

module.exports = { codedError, describe, callNative }

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

module.exports = { codedError, describe }

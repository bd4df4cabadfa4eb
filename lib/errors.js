// @ts-check
'use strict'
// The errors torch-node raises from JS (index.js, lib/vision.js, lib/batcher.js, lib/ragged.js),
// worded as the native ones are: `describe` says what a value is the way src/napi/js.rs's
// `describe` does ("number 5", "a string", "an array", "an object"), and adds the class of
// other objects ("a Tensor", "an AbortSignal"), which only JS can read safely.

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

const KINDS = {
  __proto__: null,
  undefined: 'undefined',
  string: 'a string',
  boolean: 'a boolean',
  bigint: 'a BigInt',
  symbol: 'a symbol',
  function: 'a function',
}

/** What `value` is, for "expected ..., got <describe(value)>". Never throws (a Proxy's traps may). */
function describe(value) {
  if (typeof value === 'number') return `number ${value}`
  if (typeof value !== 'object') return KINDS[typeof value]
  if (value === null) return 'null'
  try {
    if (Array.isArray(value)) return 'an array'
    const proto = Object.getPrototypeOf(value)
    const name = proto === null || proto === Object.prototype ? '' : value.constructor?.name
    if (typeof name === 'string' && name) return `${/^[AEIOU]/.test(name) ? 'an' : 'a'} ${name}`
  } catch {} // a revoked Proxy, a throwing `constructor` getter: an object all the same
  return 'an object'
}

module.exports = { codedError, describe }

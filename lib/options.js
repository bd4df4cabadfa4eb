// @ts-check
'use strict'
// One reader for the option bags written in JS (lib/oip/*, lib/batcher.js, lib/vision.js,
// lib/ragged.js), worded as the native ones are (src/napi/options.rs's `js_options!`,
// src/napi/js.rs's `check_keys`, src/napi/convert.rs), so a misspelt key reads the same
// whether Rust or JS refuses it:
//   `<what>: expected an options object, got number 5`
//   `<what>: unknown option 'dtpye'; accepted: dtype, device, requiresGrad`
//   `<what>.<key>: expected a boolean, got a string`
//   `<what>.<key>: expected an integer, got 1.5` / `<what>.<key>: must be non-negative, got -1`
// As in Rust, undefined and null are an option left out, and only own enumerable string keys
// are looked at (inherited properties and symbols are not options).
//
//   const SPEC = { port: integer({ min: 0, max: 65535 }), host: string }
//   const o = read(options, SPEC, 'oip.serve: options', serve)   // {port?, host?}
//
// A reader is `(value, what) => value read`: `what` names the value in errors
// (`options.port`, `options.inputs[0].shape`). Nested bags (`bag(spec)`) and lists
// (`arrayOf(reader)`) compose, so every nested entry refuses unknown keys the same way.
const { codedError, describe } = require('./errors')

/** A refusal inside a reader; `read` turns it into an InvalidArg with the caller's stack. */
class OptionError extends Error {}

/**
 * A reader: the value read (checked, maybe with defaults), or an OptionError; `what` names the
 * value in errors.
 * @typedef {(value: any, what: string) => any} Reader
 */
/** @typedef {Reader & {keys: string[]}} BagReader */

/** @type {(what: string, message: string) => never} */
const fail = (what, message) => {
  throw new OptionError(`${what}: ${message}`)
}
const absent = (v) => v === undefined || v === null
/** A number as Rust's `args::integer` writes it ("got 1.5"), anything else described. */
const shown = (v) => (typeof v === 'number' ? String(v) : describe(v))

const boolean = (v, what) => (typeof v === 'boolean' ? v : fail(what, `expected a boolean, got ${describe(v)}`))
const string = (v, what) => (typeof v === 'string' ? v : fail(what, `expected a string, got ${describe(v)}`))
/** The value as it is (checked by the caller). */
const any = (v) => v

/** What a range reads as in "expected ...": a positive integer, an integer in [0, 65535]. */
function rangeNoun(noun, min, max) {
  if (min === 1 && max === undefined && noun === 'an integer') return 'a positive integer'
  if (min === 0 && max === undefined && noun === 'an integer') return noun // Rust's u64: "must be non-negative"
  if (min !== undefined && max !== undefined) return `${noun} in [${min}, ${max}]`
  if (min !== undefined) return `${noun} ≥ ${min}`
  if (max !== undefined) return `${noun} ≤ ${max}`
  return noun
}

/**
 * A number (finite unless `infinite`), within [min, max] when given. `expected` words the
 * range in errors ("a number of milliseconds ≥ 0").
 * @param {{min?: number, max?: number, infinite?: boolean, expected?: string}} [range]
 * @returns {Reader}
 */
function number({ min, max, infinite = false, expected } = {}) {
  return (v, what) => {
    if (typeof v !== 'number' || Number.isNaN(v)) fail(what, `expected ${expected ?? 'a number'}, got ${describe(v)}`)
    if ((!infinite && !Number.isFinite(v)) || (min !== undefined && v < min) || (max !== undefined && v > max)) {
      fail(what, `expected ${expected ?? rangeNoun('a number', min, max)}, got ${v}`)
    }
    return v
  }
}

/**
 * A whole number within [min, max] when given. Worded as Rust's readers: `i64` ("expected an
 * integer, got 1.5") and `u64` ("must be non-negative, got -1") where no other range is set.
 * @param {{min?: number, max?: number, expected?: string}} [range]
 * @returns {Reader}
 */
function integer({ min, max, expected } = {}) {
  const noun = expected ?? rangeNoun('an integer', min, max)
  return (v, what) => {
    // Rust reads a number first: "expected a number, got a string".
    if (typeof v !== 'number') fail(what, `expected ${noun === 'an integer' ? 'a number' : noun}, got ${describe(v)}`)
    if (!Number.isSafeInteger(v)) fail(what, `expected ${noun}, got ${v}`)
    if (min === 0 && max === undefined && v < 0 && expected === undefined) fail(what, `must be non-negative, got ${v}`)
    if ((min !== undefined && v < min) || (max !== undefined && v > max)) fail(what, `expected ${noun}, got ${v}`)
    return v
  }
}

/**
 * One of `choices` (compared with ===): "expected 'http' or 'grpc', got "smtp"".
 * @param {readonly unknown[]} choices
 * @returns {Reader}
 */
function oneOf(choices) {
  const list = choices.map((c) => (typeof c === 'string' ? `'${c}'` : String(c)))
  const noun = list.length <= 2 ? list.join(' or ') : `one of ${list.join(', ')}`
  return (v, what) =>
    choices.includes(v)
      ? v
      : fail(what, `expected ${noun}, got ${typeof v === 'string' ? JSON.stringify(v) : describe(v)}`)
}

/**
 * An instance of `Class` (`noun`: "an AbortSignal").
 * @param {Function} Class
 * @param {string} noun
 * @returns {Reader}
 */
function instance(Class, noun) {
  return (v, what) => (v instanceof Class ? v : fail(what, `expected ${noun}, got ${describe(v)}`))
}

/**
 * A value `ok` accepts, else "expected <noun>, got ...".
 * @param {(v: any) => boolean} ok
 * @param {string} noun
 * @returns {Reader}
 */
function check(ok, noun) {
  return (v, what) => (ok(v) ? v : fail(what, `expected ${noun}, got ${shown(v)}`))
}

/**
 * An array, each item read by `item` (named `what[i]`); `noun` names the items in errors.
 * @param {Reader} item
 * @param {string} noun
 * @param {{min?: number}} [count]
 * @returns {Reader}
 */
function arrayOf(item, noun, { min = 0 } = {}) {
  return (v, what) => {
    if (!Array.isArray(v)) fail(what, `expected an array of ${noun}, got ${describe(v)}`)
    if (v.length < min) fail(what, `expected at least ${min} ${noun}, got ${v.length}`)
    return v.map((x, i) => item(x, `${what}[${i}]`))
  }
}

/**
 * Sizes (`convert::shape`'s wording): whole numbers ≥ 0, and -1 too when `varying` (a size
 * that varies, as the Open Inference Protocol's metadata and Triton's dims write it).
 * @param {{varying?: boolean}} [options]
 * @returns {Reader}
 */
function sizes({ varying = false } = {}) {
  const size = integer()
  return arrayOf((d, what) => {
    size(d, what)
    if (d < (varying ? -1 : 0)) {
      fail(what, `sizes must be non-negative${varying ? ' (or -1 where a size varies)' : ''}, got ${d}`)
    }
    return d
  }, 'sizes')
}

/**
 * The first reader of `readers` that accepts the value; else "expected <noun>".
 * @param {Reader[]} readers
 * @param {string} noun
 * @returns {Reader}
 */
function either(readers, noun) {
  return (v, what) => {
    for (const r of readers) {
      try {
        return r(v, what)
      } catch (e) {
        if (!(e instanceof OptionError)) throw e
      }
    }
    return fail(what, `expected ${noun}, got ${shown(v)}`)
  }
}

/**
 * Refuses a key of `o` outside `keys`, naming the accepted ones; `hints` adds a word for some.
 * @param {object} o
 * @param {string[]} keys
 * @param {string} what
 * @param {Record<string, string>} [hints]
 */
function checkKeys(o, keys, what, hints) {
  for (const k of Object.keys(o)) {
    if (!keys.includes(k)) {
      fail(what, `unknown option '${k}'; accepted: ${keys.join(', ')}${hints?.[k] ? ` (${hints[k]})` : ''}`)
    }
  }
}

/**
 * A nested options object read by `spec` ({key: reader}); the result holds the keys given
 * (neither undefined nor null). `required` keys are read even when absent, so their reader
 * says what was expected. `hints` adds a word to the unknown-key error for a key people
 * reach for (`{dims: "the protocol calls it 'shape'"}`).
 * @param {Record<string, Reader>} spec
 * @param {{required?: string[], hints?: Record<string, string>}} [options]
 * @returns {BagReader}
 */
function bag(spec, { required = [], hints } = {}) {
  const keys = Object.keys(spec)
  const reader = (v, what) => {
    if (absent(v)) v = {}
    else if (typeof v !== 'object' || Array.isArray(v)) fail(what, `expected an options object, got ${describe(v)}`)
    checkKeys(v, keys, what, hints)
    const out = {}
    for (const k of keys) {
      if (!absent(v[k]) || required.includes(k)) out[k] = spec[k](v[k], `${what}.${k}`)
    }
    return out
  }
  reader.keys = keys
  return reader
}

/**
 * Reads the options object `value` by `spec` (an object of readers, or a `bag`); `what` names
 * it (`Batcher: options`). Throws InvalidArg whose stack starts at `caller`'s caller.
 * @param {unknown} value
 * @param {Record<string, Reader> | Reader} spec
 * @param {string} what
 * @param {Function} [caller]
 */
function read(value, spec, what, caller) {
  const reader = typeof spec === 'function' ? spec : bag(spec)
  try {
    return reader(value, what)
  } catch (e) {
    if (e instanceof OptionError) throw codedError('InvalidArg', e.message, caller ?? read)
    throw e
  }
}

module.exports = {
  read,
  fail,
  bag,
  arrayOf,
  either,
  boolean,
  string,
  number,
  integer,
  oneOf,
  instance,
  check,
  sizes,
  any,
  OptionError,
}

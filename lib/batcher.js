// @ts-check
'use strict'
// torch.Batcher: dynamic batching for servers. Concurrent `run()` calls that fit together are
// concatenated along dim 0 into one forward, and its output is split back along dim 0 into
// each request's own rows (views, not copies). A batch-8 forward costs far less than eight
// batch-1 forwards on a CPU (issue 17 measured 4.6 against 13.4 ms per image), and requests
// that arrive while a batch runs collect into the next one: batches grow with the load.
// Composed from public APIs only (cat, full, narrow, copy_, forward), so it lives in JS.
//
// The rules (docs/serving.md's "Batching requests" says the same for users):
// - A request joins a group of requests with the same signature: the same number of inputs;
//   each tensor input with the same dtype, device and trailing dims (dims after 0; with
//   `padValue`, dims after 1: dim 1 is padded; with `buckets`, the length's bucket too); each
//   other input equal (compared by value; objects that are not plain data by identity). A
//   request that fits no open group starts its own, so a malformed request fails in a forward
//   of its own and never takes a batch down.
// - A group is dispatched when it holds `maxBatchSize` rows, or `maxDelayMs` after its oldest
//   request was queued, while fewer than `concurrency` batches run; the oldest ready group first.
// - If a batched forward throws, its requests are run again one by one, so only the culprit fails.

const { codedError, describe } = require('./errors')
const torch = require('./torch')
const { maskOf } = require('./ragged')

const opt = require('./options')

/** @import { AOTModule, DType, IValue, ScriptModule, Tensor } from '../index' */

// The public types below become index.d.ts's declarations (tools/lib-typings.js): their docs are the
// user's reference.
/**
 * What a `Batcher` drives: any object whose `forward` returns the output or a Promise of it (`runMethod` for
 * `options.method`).
 * @typedef {{ forward(...inputs: any[]): unknown, runMethod?(name: string, ...inputs: any[]): unknown }} BatchModule
 */
/**
 * Options of `new torch.Batcher`; any other key is refused (`InvalidArg`).
 * @typedef {object} BatcherOptions
 * @property {number} [maxBatchSize] A batch is dispatched once it holds this many rows (default 8). A request
 *   is never split: a bigger one runs alone.
 * @property {number} [maxDelayMs] ...or this many milliseconds after its oldest request was queued (default 5).
 * @property {number} [maxQueue] How many requests may wait (default 1024; `Infinity`: no bound); past it `run`
 *   rejects at once with `QueueFull`.
 * @property {number} [concurrency] How many batches run at once (default `torch.getInstances()`); requests keep
 *   collecting meanwhile.
 * @property {string} [method] A ScriptModule method to run instead of `forward`.
 * @property {number | boolean | ReadonlyArray<number | boolean | null>} [padValue] Pads tensor inputs of two or
 *   more dims along dim 1 (their length) to the longest in the batch, with this value; an array gives one per
 *   input (`null`: that input is not padded). Without it, requests whose lengths differ go to separate batches.
 * @property {boolean | number | { index?: number; dtype?: DType; invert?: boolean }} [mask] Passes a mask
 *   `[rows, length]`, true on real positions, as an extra input: `true` after the inputs, a number at that input
 *   index, or `{index, dtype (default 'bool'), invert}` (`invert`: true on padding, as
 *   `nn.MultiheadAttention`'s `key_padding_mask`). Needs `padValue`.
 * @property {readonly number[]} [buckets] Lengths up to each bound are batched apart from longer ones
 *   (`[16, 64]`), so short requests are not padded to long ones. Needs `padValue`.
 * @property {boolean | readonly string[]} [unpad] Which outputs are cut back to each request's own length along
 *   dim 1: `true` (default) every tensor output of two or more dims whose dim 1 equals the padded length (one
 *   that does by coincidence too); `false` none; or their paths, as errors name them (`['output[0]']`).
 */
/**
 * Options of `Batcher.run`, given as its last argument: a plain object with only these keys.
 * @typedef {object} BatchRunOptions
 * @property {AbortSignal} [signal] Aborting removes the request from the queue and rejects it (`Aborted`); a
 *   request whose batch runs finishes.
 * @property {number} [timeoutMs] The longest the request may wait in the queue, in milliseconds (then
 *   `Timeout`); not a limit on the forward.
 */
/**
 * `Batcher.stats()`: counts since construction and the state now. `requests` = completed + failed + rejected +
 * timedOut + aborted + closed + queued + running.
 * @typedef {object} BatcherStats
 * @property {number} requests `run` calls.
 * @property {number} queued Requests waiting now.
 * @property {number} running Requests in running batches now.
 * @property {number} inFlight Batches running now.
 * @property {number} completed
 * @property {number} failed Rejected by the model, by a split error or as malformed.
 * @property {number} rejected Refused with `QueueFull`.
 * @property {number} timedOut
 * @property {number} aborted
 * @property {number} closed Rejected with `Closed`.
 * @property {number} batches Batches dispatched.
 * @property {number} rows Rows in those batches.
 * @property {number} meanBatchSize rows / batches (0 before the first).
 * @property {number} retried Batches whose forward threw and whose requests were run again one by one.
 */

const DTYPES = ['float32', 'float64', 'float16', 'bfloat16', 'int8', 'uint8', 'int16', 'int32', 'int64', 'bool']
const fill = (v) => typeof v === 'number' || typeof v === 'boolean'
const MASK = opt.bag({
  index: opt.integer({ min: 0, expected: 'an input index ≥ 0' }),
  dtype: opt.oneOf(DTYPES),
  invert: opt.boolean,
})
/** `mask` as {index (null: after the inputs), dtype, invert}, or null. */
function readMask(mask, what) {
  if (mask === false) return null
  if (mask === true) return { index: null, dtype: 'bool', invert: false }
  if (Number.isInteger(mask) && mask >= 0) return { index: mask, dtype: 'bool', invert: false }
  if (mask === null || typeof mask !== 'object' || Array.isArray(mask)) {
    return opt.fail(what, `expected true, an input index or {index, dtype, invert}, got ${show(mask)}`)
  }
  const { index = null, dtype = 'bool', invert = false } = MASK(mask, what)
  return { index, dtype, invert }
}
const OPTIONS = opt.bag({
  maxBatchSize: opt.integer({ min: 1 }),
  maxDelayMs: opt.number({ min: 0, expected: 'a number of milliseconds ≥ 0' }),
  maxQueue: opt.either(
    [opt.integer({ min: 1 }), opt.check((v) => v === Infinity, 'Infinity')],
    'a positive integer or Infinity',
  ),
  concurrency: opt.integer({ min: 1 }),
  method: opt.check((v) => typeof v === 'string' && v !== '', 'a method name'),
  padValue: opt.check(
    (v) => fill(v) || (Array.isArray(v) && v.every((x) => x === null || fill(x))),
    'a number or boolean, or an array of them (null: that input is not padded)',
  ),
  mask: readMask,
  buckets: opt.check(
    (v) =>
      Array.isArray(v) && v.length > 0 && v.every((b, i) => Number.isInteger(b) && b > 0 && (i === 0 || b > v[i - 1])),
    'an increasing array of positive lengths',
  ),
  unpad: opt.check(
    (v) => typeof v === 'boolean' || (Array.isArray(v) && v.every((p) => typeof p === 'string' && /^output\b/.test(p))),
    "a boolean, or an array of output paths ('output[0]', 'output.hidden')",
  ),
})
const RUN = opt.bag({
  signal: opt.instance(AbortSignal, 'an AbortSignal'),
  timeoutMs: opt.number({ min: 0, infinite: true, expected: 'a number of milliseconds ≥ 0' }),
})
// A few milliseconds of waiting is small against a CPU forward (13 ms for a ResNet-18 image)
// and lets concurrent requests meet; the queue bound keeps an overloaded service answering
// QueueFull at once instead of growing without limit.
const DEFAULTS = { maxBatchSize: 8, maxDelayMs: 5, maxQueue: 1024 }

const isPlainObject = (v) =>
  v !== null &&
  typeof v === 'object' &&
  (Object.getPrototypeOf(v) === Object.prototype || Object.getPrototypeOf(v) === null)

/** A value for an error message: numbers and strings as written, anything else described. */
function show(value) {
  if (typeof value === 'number') return String(value)
  if (typeof value === 'string') return JSON.stringify(value)
  return describe(value)
}

// Group keys: values by content, other objects (a Tensor nested in a list, say) by identity.
const identities = new WeakMap()
let nextIdentity = 0
function identity(object) {
  if (!identities.has(object)) identities.set(object, ++nextIdentity)
  return `#${identities.get(object)}`
}
function keyOf(value, seen = new Set()) {
  switch (typeof value) {
    case 'number':
      return Object.is(value, -0) ? 'n-0' : `n${value}`
    case 'bigint':
      return `i${value}`
    case 'string':
      return JSON.stringify(value)
    case 'boolean':
    case 'undefined':
      return String(value)
    case 'object': {
      if (value === null) return 'null'
      if (seen.has(value) || !(Array.isArray(value) || value instanceof Map || isPlainObject(value))) {
        return identity(value)
      }
      seen.add(value)
      if (Array.isArray(value)) return `[${value.map((v) => keyOf(v, seen)).join(',')}]`
      if (value instanceof Map) {
        return `Map{${[...value].map(([k, v]) => `${keyOf(k, seen)}=>${keyOf(v, seen)}`).join(',')}}`
      }
      return `{${Object.entries(value)
        .map(([k, v]) => `${JSON.stringify(k)}:${keyOf(v, seen)}`)
        .join(',')}}`
    }
    default:
      return identity(typeof value === 'function' ? value : {}) // a symbol: never batched
  }
}

/** An output's path as errors and the `unpad` option name it: output[0].hidden. */
const childPath = (path, key) =>
  typeof key === 'number'
    ? `${path}[${key}]`
    : /^[A-Za-z_$][\w$]*$/.test(key)
      ? `${path}.${key}`
      : `${path}[${JSON.stringify(key)}]`

/** The constructor's options with their defaults, or InvalidArg naming the bad one. */
function readOptions(module, options) {
  if (module === null || typeof module !== 'object' || typeof module.forward !== 'function') {
    throw codedError(
      'InvalidArg',
      `Batcher: module: expected a ScriptModule or an AOTModule (an object with a forward method), got ` +
        `${describe(module)}`,
      Batcher,
    )
  }
  const instances = typeof torch().getInstances === 'function' ? torch().getInstances() : 1
  const o = {
    ...DEFAULTS,
    concurrency: Number.isInteger(instances) && instances > 0 ? instances : 1,
    unpad: true,
    ...opt.read(options, OPTIONS, 'Batcher: options', Batcher),
  }
  const bad = (message) => codedError('InvalidArg', `Batcher: ${message}`, Batcher)
  if (o.method !== undefined && typeof module.runMethod !== 'function') {
    throw bad('options.method: this module has no runMethod (an AOTModule runs forward only)')
  }
  for (const key of ['mask', 'buckets']) {
    if (o[key] !== undefined && o.padValue === undefined) {
      throw bad(`options.${key}: needs options.padValue (the inputs to pad)`)
    }
  }
  o.mask ??= null
  return o
}

// Errors raised while splitting an output: a rerun one by one would fail the same way.
/** @type {WeakSet<any>} */
const splitErrors = new WeakSet()

/**
 * Queued requests with one signature (the key), dispatched together.
 * @typedef {{key: string, queue: any[], rows: number, timer: NodeJS.Timeout | undefined, due: boolean}} Group
 */

// `new torch.Batcher(module, options)`: `run(...inputs)` calls made at about the same time share one
// forward. See the rules at the top of this file.
/**
 * Dynamic batching: concurrent `run` calls are concatenated along dim 0 into one forward, and
 * each gets its own rows of the output back (views). Requests share a batch when their
 * non-tensor inputs are equal and their tensors agree in dtype, device and trailing dims.
 * @template {IValue} [T=Tensor]
 */
class Batcher {
  #module
  #options
  /** @type {Map<string, Group>} */
  #groups = new Map() // by key
  #queued = 0 // requests waiting
  #running = 0 // requests in running batches
  #inFlight = 0 // batches running
  #order = 0 // arrival order, to dispatch the oldest ready group first
  /** @type {Promise<void> | null} */
  #closing = null // close()'s promise
  /** @type {(() => void) | null} */
  #onIdle = null
  #stats = {
    requests: 0,
    completed: 0,
    failed: 0,
    rejected: 0,
    timedOut: 0,
    aborted: 0,
    closed: 0,
    batches: 0,
    rows: 0,
    retried: 0,
  }

  /**
   * @param {ScriptModule | AOTModule | BatchModule} module
   * @param {BatcherOptions} [options]
   */
  constructor(module, options) {
    this.#options = readOptions(module, options)
    this.#module = module
  }

  // A last argument `{signal, timeoutMs}` (a plain object with only those keys) is the call's options:
  // aborting, or waiting longer than `timeoutMs` in the queue, removes the request and rejects it at once
  // (`Aborted`, `Timeout`); a request whose batch is running finishes.
  /**
   * Queues one request (tensor inputs carry its rows along dim 0); resolves to its share of the
   * output. Errors reject: `QueueFull`, `Aborted`, `Timeout`, `Closed`, `InvalidArg`,
   * `ShapeMismatch` (also an output that cannot be split), or the model's own.
   * @param {IValue[] | [...IValue[], BatchRunOptions]} args
   * @returns {Promise<T>}
   */
  run(...args) {
    return new Promise((resolve, reject) => {
      const stats = this.#stats
      stats.requests++
      if (this.#closing !== null) {
        stats.closed++
        return reject(codedError('Closed', 'Batcher.run: the batcher is closed'))
      }
      let request
      try {
        request = this.#parse(args)
      } catch (e) {
        stats.failed++
        return reject(e)
      }
      if (request.signal?.aborted) {
        stats.aborted++
        return reject(codedError('Aborted', 'Batcher.run: the signal was aborted'))
      }
      if (this.#queued >= this.#options.maxQueue) {
        stats.rejected++
        return reject(
          codedError(
            'QueueFull',
            `Batcher.run: the queue is full (${this.#options.maxQueue} waiting, options.maxQueue); try again later`,
          ),
        )
      }
      Object.assign(request, { resolve, reject })
      this.#enqueue(request)
    })
  }

  /**
   * Counts and the state now.
   * @returns {BatcherStats}
   */
  stats() {
    const s = this.#stats
    return {
      requests: s.requests,
      queued: this.#queued, // waiting now
      running: this.#running, // in a running batch now
      inFlight: this.#inFlight, // batches running now
      completed: s.completed,
      failed: s.failed, // the model's errors, split errors, bad requests
      rejected: s.rejected, // QueueFull
      timedOut: s.timedOut,
      aborted: s.aborted,
      closed: s.closed,
      batches: s.batches,
      rows: s.rows, // rows in those batches
      meanBatchSize: s.batches === 0 ? 0 : s.rows / s.batches,
      retried: s.retried, // batches whose forward threw, rerun one request at a time
    }
  }

  /** True once `close()` was called. */
  get isClosed() {
    return this.#closing !== null
  }

  /**
   * Rejects the queued requests and every later `run` (`Closed`); resolves once the running batches finish. The
   * module is not disposed.
   * @returns {Promise<void>}
   */
  close() {
    if (this.#closing === null) {
      for (const group of this.#groups.values()) {
        clearTimeout(group.timer)
        for (const request of group.queue) {
          this.#unwatch(request)
          this.#stats.closed++
          request.reject(codedError('Closed', 'Batcher: closed before this request ran'))
        }
      }
      this.#groups.clear()
      this.#queued = 0
      this.#closing =
        this.#inFlight === 0
          ? Promise.resolve()
          : new Promise((resolve) => {
              this.#onIdle = resolve
            })
    }
    return this.#closing
  }

  /** Same as `close()`, not waiting. */
  [Symbol.dispose]() {
    this.close()
  }

  /**
   * `await using b = new Batcher(m)` (Node 24+) closes it at the end of the block.
   * @returns {Promise<void>}
   */
  [Symbol.asyncDispose]() {
    return this.close()
  }

  /** The request `args` make, or a coded error: a bad request never reaches a batch. */
  #parse(args) {
    const bad = (code, message) => codedError(code, `Batcher.run: ${message}`)
    let options = {}
    const last = args[args.length - 1]
    if (isPlainObject(last) && Object.keys(last).length > 0 && Object.keys(last).every((k) => RUN.keys.includes(k))) {
      options = last
      args = args.slice(0, -1)
    }
    const { signal, timeoutMs } = opt.read(options, RUN, 'Batcher.run: options')
    if (args.length === 0) throw bad('InvalidArg', 'expected the model inputs, got none')
    const { padValue, mask, buckets } = this.#options
    /** @type {number | null} */
    let rows = null
    /** @type {number | null} */
    let length = null
    /** @type {number | null} */
    let sequenceInput = null
    const key = args.map((input, i) => {
      const fill = this.#fillFor(i, input)
      if (!(input instanceof torch().Tensor)) {
        if (Array.isArray(padValue) && fill !== undefined) {
          throw bad(
            'InvalidArg',
            `input ${i}: options.padValue[${i}] pads it, so it must be a Tensor [rows, length, ...], got ` +
              `${describe(input)}`,
          )
        }
        return `v${keyOf(input)}`
      }
      if (input.isDisposed) throw bad('Disposed', `input ${i} was disposed`)
      if (input.ndim === 0) {
        throw bad('ShapeMismatch', `input ${i} is a 0-dim tensor; a batched input has its rows along dim 0`)
      }
      if (rows === null) rows = input.shape[0]
      else if (input.shape[0] !== rows) {
        throw bad(
          'ShapeMismatch',
          `input ${i} has ${input.shape[0]} rows (dim 0), an input before it ${rows}: every tensor input of a ` +
            `request has its rows along dim 0`,
        )
      }
      if (fill === undefined) return `t${input.dtype}:${input.device}:${input.shape.slice(1)}`
      if (input.ndim < 2) {
        throw bad('ShapeMismatch', `input ${i}: options.padValue[${i}] pads it along dim 1, but it is [${input.shape}]`)
      }
      if (length === null) {
        length = input.shape[1]
        sequenceInput = i
      } else if (input.shape[1] !== length) {
        throw bad(
          'ShapeMismatch',
          `input ${i} has length ${input.shape[1]} (dim 1), input ${sequenceInput} ${length}: a request's padded ` +
            `inputs share one length`,
        )
      }
      return `s${input.dtype}:${input.device}:${input.shape.slice(2)}`
    })
    if (rows === null) {
      throw bad('InvalidArg', 'no tensor input: requests are batched along dim 0 of their tensor inputs')
    }
    if (rows === 0) throw bad('ShapeMismatch', 'the tensor inputs have no rows (dim 0 is 0)')
    if (mask !== null) {
      if (length === null) {
        throw bad('InvalidArg', 'options.mask: nothing to mask: no input is padded (a tensor with a length in dim 1)')
      }
      if (mask.index !== null && mask.index > args.length) {
        throw bad('InvalidArg', `options.mask.index: ${mask.index} is past the ${args.length} inputs`)
      }
    }
    if (length !== null && buckets !== undefined) {
      const bucket = buckets.findIndex((/** @type {number} */ b) => /** @type {number} */ (length) <= b)
      key.push(`b${bucket === -1 ? buckets.length : bucket}`)
    }
    return { inputs: args, rows, length, sequenceInput, key: key.join('|'), signal, timeoutMs, queued: false }
  }

  /** The value input `i` is padded with, or undefined when it is not padded. */
  #fillFor(i, input) {
    const { padValue } = this.#options
    if (Array.isArray(padValue)) return padValue[i] ?? undefined
    return padValue !== undefined && input instanceof torch().Tensor && input.ndim >= 2 ? padValue : undefined
  }

  #enqueue(request) {
    const found = this.#groups.get(request.key)
    const fresh = found === undefined
    const group = found ?? /** @type {Group} */ ({ key: request.key, queue: [], rows: 0, timer: undefined, due: false })
    if (fresh) this.#groups.set(request.key, group)
    Object.assign(request, { group, queued: true, order: this.#order++, queuedAt: performance.now() })
    group.queue.push(request)
    group.rows += request.rows
    this.#queued++
    this.#watch(request)
    if (fresh) this.#arm(group, true)
    if (group.rows >= this.#options.maxBatchSize) this.#pump()
  }

  /** Starts the timer that makes `group` due maxDelayMs after its oldest request came. */
  #arm(group, fresh = false) {
    clearTimeout(group.timer)
    group.timer = undefined
    group.due = false
    if (group.queue.length === 0) {
      this.#groups.delete(group.key)
      return
    }
    const wait = group.queue[0].queuedAt + this.#options.maxDelayMs - performance.now()
    // A new group always waits for a timer, even with maxDelayMs 0: requests made in the same
    // turn of the event loop (a Promise.all of runs) then share one batch.
    if (wait <= 0 && !fresh) {
      group.due = true
      return
    }
    group.timer = setTimeout(
      () => {
        group.timer = undefined
        group.due = true
        this.#pump()
      },
      Math.max(0, wait),
    )
  }

  /** A queued request's timeout and abort listener. */
  #watch(request) {
    const { signal, timeoutMs } = request
    // setTimeout fires at once past 2^31 - 1 ms (Node's TimeoutOverflowWarning): a longer
    // wait, Infinity included, is no timeout.
    if (timeoutMs !== undefined && timeoutMs <= 2 ** 31 - 1) {
      request.timer = setTimeout(
        () =>
          this.#expire(
            request,
            'Timeout',
            'timedOut',
            `Batcher.run: waited ${timeoutMs} ms in the queue without starting (options.timeoutMs)`,
          ),
        timeoutMs,
      )
    }
    if (signal !== undefined) {
      request.onAbort = () =>
        this.#expire(request, 'Aborted', 'aborted', 'Batcher.run: the signal was aborted while the request was queued')
      signal.addEventListener('abort', request.onAbort, { once: true })
    }
  }

  #unwatch(request) {
    request.queued = false
    clearTimeout(request.timer)
    if (request.onAbort) request.signal.removeEventListener('abort', request.onAbort)
  }

  /** Takes a queued request out of its group and rejects it. */
  #expire(request, code, counter, message) {
    if (!request.queued) return
    this.#unwatch(request)
    const { group } = request
    const at = group.queue.indexOf(request)
    group.queue.splice(at, 1)
    group.rows -= request.rows
    this.#queued--
    if (at === 0) this.#arm(group)
    this.#stats[counter]++
    request.reject(codedError(code, message))
    this.#pump()
  }

  /** Dispatches ready groups, oldest first, while fewer than `concurrency` batches run. */
  #pump() {
    while (this.#inFlight < this.#options.concurrency) {
      /** @type {Group | null} */
      let next = null
      for (const group of this.#groups.values()) {
        const ready = group.due || group.rows >= this.#options.maxBatchSize
        if (ready && (next === null || group.queue[0].order < next.queue[0].order)) next = group
      }
      if (next === null) return
      this.#dispatch(next)
    }
  }

  /** Takes up to maxBatchSize rows off `group` (at least one request) and runs them. */
  #dispatch(group) {
    const batch = []
    let rows = 0
    while (group.queue.length > 0 && (batch.length === 0 || rows + group.queue[0].rows <= this.#options.maxBatchSize)) {
      const request = group.queue.shift()
      this.#unwatch(request)
      batch.push(request)
      rows += request.rows
    }
    group.rows -= rows
    this.#queued -= batch.length
    this.#arm(group)
    this.#running += batch.length
    this.#inFlight++
    this.#stats.batches++
    this.#stats.rows += rows
    this.#runBatch(batch).finally(() => {
      this.#running -= batch.length
      this.#inFlight--
      if (this.#inFlight === 0 && this.#onIdle !== null) this.#onIdle()
      this.#pump()
    })
  }

  /** Settles every request of `batch`; never rejects. */
  async #runBatch(batch) {
    try {
      const outputs = await this.#forward(batch)
      batch.forEach((request, i) => this.#settle(request, null, outputs[i]))
      return
    } catch (e) {
      // One request, a split error or a disposed module: running alone would fail the same way.
      // (A Disposed error may also be one request's input, disposed while it was queued.)
      if (batch.length === 1 || splitErrors.has(e) || this.#module.isDisposed === true) {
        for (const request of batch) this.#settle(request, e)
        return
      }
    }
    // The batched forward threw: run each request alone, so only the culprit fails.
    this.#stats.retried++
    for (const request of batch) {
      try {
        const [output] = await this.#forward([request])
        this.#settle(request, null, output)
      } catch (e) {
        this.#settle(request, e)
      }
    }
  }

  #settle(request, error, output) {
    if (error) {
      this.#stats.failed++
      request.reject(error)
    } else {
      this.#stats.completed++
      request.resolve(output)
    }
  }

  /** One forward over `batch`: each request's output, in order. */
  async #forward(batch) {
    const { inputs, owned, length, rows } = this.#assemble(batch)
    try {
      const { method } = this.#options
      const module = this.#module
      const output = await (method === undefined ? module.forward(...inputs) : module.runMethod(method, ...inputs))
      return this.#split(output, batch, rows, length)
    } finally {
      // After the split: an output may be a view of an input (views keep the storage alive).
      for (const t of owned) t.dispose()
    }
  }

  /**
   * The model inputs of `batch`: tensor inputs concatenated along dim 0 (a lone request's
   * are passed as they are), padded inputs right-padded along dim 1 to the longest, the mask
   * inserted; `owned` lists the tensors made here.
   */
  #assemble(batch) {
    const first = batch[0]
    const owned = []
    const rows = batch.reduce((n, r) => n + r.rows, 0)
    const length = first.length === null ? null : Math.max(...batch.map((r) => r.length))
    const padded = batch.some((r) => r.length !== length)
    const inputs = first.inputs.map((input, i) => {
      if (!(input instanceof torch().Tensor)) return input // equal in every request (the group key)
      const parts = batch.map((r) => r.inputs[i])
      const fill = this.#fillFor(i, input)
      if (fill === undefined || !padded) {
        if (batch.length === 1) return input
        const joined = torch().cat(parts, 0)
        owned.push(joined)
        return joined
      }
      const out = torch().full([rows, length, ...input.shape.slice(2)], fill, {
        dtype: input.dtype,
        device: input.device,
      })
      owned.push(out)
      let offset = 0
      batch.forEach((r, k) => {
        const block = out.narrow(0, offset, r.rows)
        const slot = block.narrow(1, 0, r.length)
        slot.copy_(parts[k])
        slot.dispose()
        block.dispose()
        offset += r.rows
      })
      return out
    })
    const { mask } = this.#options
    if (mask !== null) {
      const perRow = batch.flatMap((r) => new Array(r.rows).fill(r.length))
      let m = maskOf(perRow, length, first.inputs[first.sequenceInput].device)
      const steps = [mask.invert && ((t) => t.eq(false)), mask.dtype !== 'bool' && ((t) => t.to(mask.dtype))]
      for (const step of steps.filter(Boolean)) {
        const next = step(m)
        m.dispose()
        m = next
      }
      owned.push(m)
      inputs.splice(mask.index ?? inputs.length, 0, m)
    }
    return { inputs, owned, length, rows }
  }

  /**
   * `output` split into one value per request of `batch`: tensors narrowed along dim 0 (and
   * cut back along dim 1 to the request's length, as `unpad` says), containers rebuilt,
   * other values given to every request as they are.
   */
  #split(output, batch, rows, length) {
    const { unpad } = this.#options
    const paths = Array.isArray(unpad) ? new Set(unpad) : null
    const padded = length !== null && batch.some((r) => r.length !== length)
    const made = [] // views, freed if the split fails
    const parents = new Set() // batch outputs split into views, freed once split
    const fail = (path, message) => codedError('ShapeMismatch', `Batcher: ${path}: ${message}`)
    const walk = (value, path) => {
      if (value instanceof torch().Tensor) {
        if (value.ndim === 0 || value.shape[0] !== rows) {
          throw fail(
            path,
            `${value.ndim === 0 ? 'a 0-dim tensor' : `shape [${value.shape}]`} cannot be split into the batch's ` +
              `${rows} rows: a batched model returns its rows along dim 0`,
          )
        }
        let cut = unpad === true && padded && value.ndim >= 2 && value.shape[1] === length
        if (paths !== null && length !== null && paths.has(path)) {
          if (value.ndim < 2 || value.shape[1] !== length) {
            throw fail(
              path,
              `options.unpad names it, but its shape [${value.shape}] has no dim 1 of the padded length ${length}`,
            )
          }
          cut = padded
        }
        if (batch.length === 1 && !cut) return [value]
        parents.add(value)
        let offset = 0
        return batch.map((r) => {
          let part = value.narrow(0, offset, r.rows)
          offset += r.rows
          if (cut && r.length < length) {
            const whole = part
            part = whole.narrow(1, 0, r.length)
            whole.dispose()
          }
          made.push(part)
          return part
        })
      }
      if (Array.isArray(value)) {
        const parts = value.map((v, i) => walk(v, childPath(path, i)))
        return batch.map((_, k) => parts.map((p) => p[k]))
      }
      if (value instanceof Map) {
        const parts = [...value].map(([key, v]) => [key, walk(v, `${path}.get(${show(key)})`)])
        return batch.map((_, k) => new Map(parts.map(([key, p]) => [key, p[k]])))
      }
      if (isPlainObject(value)) {
        const parts = Object.entries(value).map(([key, v]) => [key, walk(v, childPath(path, key))])
        return batch.map((_, k) => Object.fromEntries(parts.map(([key, p]) => [key, p[k]])))
      }
      return batch.map(() => value) // a number, string, boolean or null: the batch's, shared
    }
    try {
      const outputs = walk(output, 'output')
      for (const t of parents) t.dispose()
      return outputs
    } catch (e) {
      for (const t of made) t.dispose()
      splitErrors.add(e)
      throw e
    }
  }
}

module.exports = { Batcher }

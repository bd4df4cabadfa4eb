// @ts-check
'use strict'
// Variable-length sequences without Python: torch.ragged packs them end to end with offsets
// (PaddlePaddle's level-of-detail layout: one values tensor, no padding stored), pads them for a
// model that wants a rectangle, and splits a padded result back; torch.padSequence is PyTorch's
// torch.nn.utils.rnn.pad_sequence. Composed from public tensor methods (cat, full, narrow,
// copy_), so it lives in JS; index.js hands it the exports.
const { codedError, describe } = require('./errors')
const torch = require('./torch')
const opt = require('./options')

/** @import { Tensor } from '../index' */

/**
 * The lengths of `tensors`, checked to be sequences of one device and trailing shape (and
 * dtype if `sameDtype`); errors name `caller`, and their stacks start at its caller.
 */
function checkSequences(tensors, caller, { sameDtype }) {
  const where = caller.name
  const fail = (code, message) => codedError(code, `${where}: ${message}`, caller)
  if (!Array.isArray(tensors) || tensors.length === 0) {
    throw fail(
      'InvalidArg',
      `expected a non-empty array of tensors, got ${Array.isArray(tensors) ? 'an empty array' : describe(tensors)}`,
    )
  }
  const first = tensors[0]
  tensors.forEach((t, i) => {
    if (!(t instanceof torch().Tensor)) throw fail('InvalidArg', `sequence ${i}: expected a Tensor, got ${describe(t)}`)
    if (t.isDisposed) throw fail('Disposed', `sequence ${i} was disposed`)
    if (t.ndim === 0) {
      throw fail('ShapeMismatch', `sequence ${i} is a 0-dim tensor; a sequence has its length along dim 0`)
    }
    if (t.ndim !== first.ndim || t.shape.some((size, d) => d > 0 && size !== first.shape[d])) {
      throw fail(
        'ShapeMismatch',
        `sequence ${i} has shape [${t.shape}], sequence 0 [${first.shape}]: ` + 'only dim 0 (the length) may differ',
      )
    }
    if (sameDtype && t.dtype !== first.dtype) {
      throw fail('DTypeMismatch', `sequence ${i} is ${t.dtype}, sequence 0 ${first.dtype}`)
    }
    if (t.device !== first.device) {
      throw fail('DeviceMismatch', `sequence ${i} is on ${t.device}, sequence 0 on ${first.device}`)
    }
  })
  return tensors.map((t) => t.shape[0])
}

function checkFill(value, what, caller) {
  if (typeof value !== 'number' && typeof value !== 'boolean') {
    throw codedError('InvalidArg', `${what}: expected a number or a boolean, got ${describe(value)}`, caller)
  }
}

/**
 * `sequences` ([len_i, ...rest] each) copied into a new tensor filled with `value`: [n, max,
 * ...rest] (`batchFirst`) or [max, n, ...rest], each at the start (`left`: the end) of its row.
 * The dtype and device are the first sequence's; copy_ casts the others, as PyTorch's does.
 */
function padInto(sequences, lengths, value, { batchFirst, left }) {
  const first = sequences[0]
  const max = Math.max(...lengths)
  const rest = first.shape.slice(1)
  const n = sequences.length
  const out = torch().full(batchFirst ? [n, max, ...rest] : [max, n, ...rest], value, {
    dtype: first.dtype,
    device: first.device,
  })
  sequences.forEach((seq, i) => {
    const row = out.select(batchFirst ? 0 : 1, i)
    const slot = row.narrow(0, left ? max - lengths[i] : 0, lengths[i])
    slot.copy_(seq)
    slot.dispose()
    row.dispose()
  })
  return out
}

/** An int64 CPU tensor of JS integers. */
const int64 = (numbers) => torch().tensor(BigInt64Array.from(numbers, BigInt))

/** A bool [n, max] tensor on `device`, true at the positions before each length. */
function maskOf(lengths, max, device) {
  const positions = torch().arange(max, { dtype: 'int64' })
  const row = positions.view(1, max) // explicit sizes: -1 is ambiguous when max is 0
  const lengthTensor = int64(lengths)
  const column = lengthTensor.view(lengths.length, 1)
  const mask = row.lt(column)
  for (const t of [positions, row, lengthTensor, column]) t.dispose()
  if (device === 'cpu') return mask
  const moved = mask.to(device)
  mask.dispose()
  return moved
}

// Instances come from torch.ragged only (the packing and the offsets must agree).
const TOKEN = Symbol('Ragged')

/**
 * `ragged.pad()`'s answer.
 * @typedef {object} PaddedSequences
 * @property {Tensor} padded `[n, max length, ...rest]`, each sequence at the start of its row, the rest filled.
 * @property {Tensor} mask bool `[n, max length]`, true on real data (on the values' device).
 * @property {Tensor} lengths The ragged's own `lengths`.
 */

// index.d.ts declares this class as an interface: it is not exported (`new` would be refused).
/**
 * Sequences packed end to end (`torch.ragged`): sequence i is `values[offsets[i] : offsets[i + 1]]`.
 */
class Ragged {
  /** @type {number[]} */
  #lengths // JS numbers: every method needs them, and reading a tensor back costs a copy
  /** @type {number[]} */
  #offsets
  /**
   * `[sum of lengths, ...rest]`: the sequences concatenated along dim 0 (a copy).
   * @readonly
   * @type {Tensor}
   */
  values
  /**
   * int64 CPU `[n + 1]`, starting at 0.
   * @readonly
   * @type {Tensor}
   */
  offsets
  /**
   * int64 CPU `[n]`.
   * @readonly
   * @type {Tensor}
   */
  lengths

  /** @param {symbol} token @param {Tensor} values @param {number[]} lengths */
  constructor(token, values, lengths) {
    if (token !== TOKEN) throw codedError('InvalidArg', 'Ragged: made by torch().ragged(tensors)', Ragged)
    this.#lengths = lengths
    this.#offsets = [0]
    for (const length of lengths) this.#offsets.push(this.#offsets[this.#offsets.length - 1] + length)
    this.values = values
    this.offsets = int64(this.#offsets)
    this.lengths = int64(lengths)
  }

  /** The number of sequences. */
  get count() {
    return this.#lengths.length
  }

  /**
   * Sequence `i` (negative counts from the end): a view of `values`.
   * @param {number} i
   * @returns {Tensor}
   */
  at(i) {
    const n = this.#lengths.length
    if (!Number.isInteger(i) || i < -n || i >= n) {
      throw codedError(
        'InvalidArg',
        `Ragged.at: index: expected an integer in [${-n}, ${n - 1}], got ` +
          `${typeof i === 'number' ? i : describe(i)}`,
        this.at,
      )
    }
    const k = i < 0 ? n + i : i
    return this.values.narrow(0, this.#offsets[k], this.#lengths[k])
  }

  /**
   * The sequences padded after their end with `value` (default 0), with a mask.
   * @param {number | boolean} [value]
   * @returns {PaddedSequences}
   */
  pad(value = 0) {
    checkFill(value, 'Ragged.pad: value', this.pad)
    const views = this.#lengths.map((_, i) => this.at(i))
    const max = Math.max(...this.#lengths)
    try {
      const padded = padInto(views, this.#lengths, value, { batchFirst: true, left: false })
      return { padded, mask: maskOf(this.#lengths, max, this.values.device), lengths: this.lengths }
    } finally {
      for (const v of views) v.dispose()
    }
  }

  /**
   * Splits a padded tensor `[n, ≥ max length, ...]` (`pad`'s, or a model's output over it) back into one view per
   * sequence.
   * @param {Tensor} tensor
   * @returns {Tensor[]}
   */
  unpad(tensor) {
    if (!(tensor instanceof torch().Tensor)) {
      throw codedError('InvalidArg', `Ragged.unpad: expected a Tensor, got ${describe(tensor)}`, this.unpad)
    }
    const n = this.#lengths.length
    const max = Math.max(...this.#lengths)
    if (tensor.ndim < 2 || tensor.shape[0] !== n || tensor.shape[1] < max) {
      throw codedError(
        'ShapeMismatch',
        `Ragged.unpad: expected a tensor [${n}, ≥ ${max}, ...] (one padded row per sequence), ` +
          `got [${tensor.shape}]`,
        this.unpad,
      )
    }
    return this.#lengths.map((length, i) => {
      const row = tensor.select(0, i)
      const part = row.narrow(0, 0, length)
      row.dispose()
      return part
    })
  }

  /** Frees `values`, `offsets` and `lengths`. */
  dispose() {
    for (const t of [this.values, this.offsets, this.lengths]) t.dispose()
  }

  [Symbol.dispose]() {
    this.dispose()
  }
}

/**
 * Packs tensors `[length_i, ...rest]` (one dtype, device and rest; lengths may be 0) along dim 0,
 * with int64 offsets and lengths. Errors: `InvalidArg`, `ShapeMismatch`, `DTypeMismatch`, `DeviceMismatch`.
 * @param {readonly Tensor[]} tensors
 * @returns {Ragged}
 */
function ragged(tensors) {
  const lengths = checkSequences(tensors, ragged, { sameDtype: true })
  return new Ragged(TOKEN, torch().cat(/** @type {Tensor[]} */ (tensors), 0), lengths)
}

const PAD_OPTIONS = opt.bag({
  batchFirst: opt.boolean,
  paddingValue: opt.any, // checkFill's own words
  paddingSide: opt.oneOf(['right', 'left']),
})

/**
 * Options of `torch.padSequence`; any other key is refused (`InvalidArg`).
 * @typedef {object} PadSequenceOptions
 * @property {boolean} [batchFirst] `[n, max length, ...]` instead of `[max length, n, ...]` (default false).
 * @property {number | boolean} [paddingValue] The fill (default 0).
 * @property {'right' | 'left'} [paddingSide] Where the fill goes (default `'right'`).
 */

// [max length, n, ...rest], or [n, max length, ...rest] with `batchFirst`.
/**
 * PyTorch's `torch.nn.utils.rnn.pad_sequence`: the first sequence's dtype and device; the others are cast.
 * @param {readonly Tensor[]} sequences
 * @param {PadSequenceOptions} [options]
 * @returns {Tensor}
 */
function padSequence(sequences, options) {
  const {
    batchFirst = false,
    paddingValue = 0,
    paddingSide = 'right',
  } = opt.read(options, PAD_OPTIONS, 'padSequence: options', padSequence)
  checkFill(paddingValue, 'padSequence: options.paddingValue', padSequence)
  const lengths = checkSequences(sequences, padSequence, { sameDtype: false })
  return padInto(sequences, lengths, paddingValue, { batchFirst, left: paddingSide === 'left' })
}

// maskOf is for the Batcher (index.js keeps it off the exports).
module.exports = { ragged, padSequence, maskOf, Ragged }

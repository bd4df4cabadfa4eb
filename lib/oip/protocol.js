// @ts-check
'use strict'
// The Open Inference Protocol (KServe v2) as data: datatypes, tensors in and out of its JSON
// and binary forms, and the checks a request must pass before anything is allocated for it.
// Shared by the client (remote.js) and the server (server.js); no I/O here.
//
// Binary tensor extension: a body is a JSON header followed by raw little-endian tensor bytes;
// the header's byte length travels in `Inference-Header-Content-Length`, each tensor's byte
// count in `parameters.binary_data_size`, in the order the tensors appear in the header.

const torch = require('../torch')

const HEADER_LENGTH = 'inference-header-content-length'

/** torch dtype → protocol datatype (BYTES has no tensor dtype). */
const DATATYPE = {
  bool: 'BOOL',
  uint8: 'UINT8',
  int8: 'INT8',
  int16: 'INT16',
  int32: 'INT32',
  int64: 'INT64',
  float16: 'FP16',
  float32: 'FP32',
  float64: 'FP64',
  bfloat16: 'BF16',
}
/** protocol datatype → torch dtype. */
const DTYPE = /** @type {Record<string,
  import('../..').DType>} */ (Object.fromEntries(Object.entries(DATATYPE).map(([d, t]) => [t, d])))
const ITEM_BYTES = { BOOL: 1, UINT8: 1, INT8: 1, INT16: 2, INT32: 4, INT64: 8, FP16: 2, FP32: 4, FP64: 8, BF16: 2 }
/** Integer datatypes' ranges, for JSON data. */
const RANGE = {
  UINT8: [0, 255],
  INT8: [-128, 127],
  INT16: [-32768, 32767],
  INT32: [-(2 ** 31), 2 ** 31 - 1],
  INT64: [Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER],
}
const MAX_DIMS = 64

/** A protocol error: `status` is the HTTP status a server answers with. */
class ProtocolError extends Error {
  constructor(message, status = 400, code = 'InvalidArg') {
    super(message)
    this.status = status
    this.code = code
  }
}

/** The dtype of a protocol datatype, or a 400 naming what is supported. */
function dtypeOf(datatype, what) {
  if (typeof datatype !== 'string' || !(datatype in DTYPE)) {
    const hint = datatype === 'BYTES' ? ' (BYTES tensors have no torch dtype)' : ''
    throw new ProtocolError(
      `${what}: unsupported datatype ${JSON.stringify(datatype)}${hint}; supported: ` +
        `${Object.keys(DTYPE).join(', ')}`,
    )
  }
  return DTYPE[datatype]
}

/**
 * Checks a shape (non-negative safe integers, at most 64 dims) and returns its element count;
 * `maxElements` bounds it (the body limit ÷ item size), so a crafted shape allocates nothing.
 */
function elementCount(shape, what, maxElements = Number.MAX_SAFE_INTEGER) {
  if (!Array.isArray(shape) || shape.length > MAX_DIMS) {
    throw new ProtocolError(`${what}: shape must be an array of at most ${MAX_DIMS} sizes`)
  }
  let n = 1
  for (const d of shape) {
    if (!Number.isSafeInteger(d) || d < 0) {
      throw new ProtocolError(`${what}: shape ${JSON.stringify(shape)} holds ${JSON.stringify(d)}, not a size`)
    }
    n *= d
    if (n > maxElements) {
      throw new ProtocolError(`${what}: shape ${JSON.stringify(shape)} is larger than the request allows`)
    }
  }
  return n
}

/** A tensor's raw little-endian bytes (contiguous, on the CPU): a Buffer view, no extra copy. */
function tensorBytes(t) {
  const a = t.toTypedArray()
  return Buffer.from(a.buffer, a.byteOffset, a.byteLength)
}

/** A tensor over a copy of `bytes` (aligned for its dtype). */
function tensorFromBytes(bytes, shape, datatype) {
  const own = new Uint8Array(bytes.length)
  own.set(bytes)
  return torch().fromBuffer(own, shape, { dtype: DTYPE[datatype] })
}

/** The flat JSON `data` of a tensor (row-major). */
function tensorData(t) {
  const flat = t.flatten().toArray()
  return Array.isArray(flat) ? flat : [flat]
}

/**
 * A tensor from JSON `data` (flat, or nested as the shape is): every element checked against
 * the datatype, the count against the shape.
 */
function tensorFromData(data, shape, datatype, what) {
  const n = elementCount(shape, what)
  const flat = []
  const walk = (v, depth) => {
    if (Array.isArray(v)) {
      if (depth >= Math.max(1, shape.length)) {
        throw new ProtocolError(`${what}: data is nested deeper than its shape ${JSON.stringify(shape)}`)
      }
      for (const x of v) {
        walk(x, depth + 1)
        if (flat.length > n) {
          throw new ProtocolError(`${what}: data holds more than the ${n} elements of shape ${JSON.stringify(shape)}`)
        }
      }
    } else flat.push(v)
  }
  if (!Array.isArray(data)) throw new ProtocolError(`${what}: data must be an array`)
  walk(data, 0)
  if (flat.length !== n) {
    throw new ProtocolError(`${what}: data holds ${flat.length} elements, shape ${JSON.stringify(shape)} needs ${n}`)
  }
  const bad = (i) => new ProtocolError(`${what}: data[${i}] = ${JSON.stringify(flat[i])} is not a ${datatype} value`)
  if (datatype === 'BOOL') {
    flat.forEach((v, i) => {
      if (typeof v !== 'boolean') throw bad(i)
    })
    return torch()
      .tensor(flat.length ? flat : [], { dtype: 'bool' })
      .reshape(shape)
  }
  const range = RANGE[datatype]
  flat.forEach((v, i) => {
    if (typeof v !== 'number' || (range && (!Number.isInteger(v) || v < range[0] || v > range[1]))) throw bad(i)
  })
  const dtype = DTYPE[datatype]
  const viaFloat = dtype === 'float16' || dtype === 'bfloat16'
  const t = torch().tensor(flat, { dtype: viaFloat ? 'float32' : dtype })
  return (viaFloat ? t.to(dtype) : t).reshape(shape)
}

/**
 * Splits a body into its JSON header and the binary part, from the header-length header
 * (absent: all JSON). Every length is checked against the body.
 */
function splitBody(body, headerLength) {
  let jsonLength = body.length
  if (headerLength !== undefined) {
    const n = Number(headerLength)
    if (!/^\d+$/.test(String(headerLength)) || !Number.isSafeInteger(n) || n > body.length) {
      throw new ProtocolError(
        `Inference-Header-Content-Length ${JSON.stringify(headerLength)} does not fit a body ` +
          `of ${body.length} bytes`,
      )
    }
    jsonLength = n
  }
  let header
  try {
    header = JSON.parse(body.subarray(0, jsonLength).toString('utf8'))
  } catch (/** @type {any} */ e) {
    throw new ProtocolError(`the request is not valid JSON (${e.message})`)
  }
  if (header === null || typeof header !== 'object' || Array.isArray(header)) {
    throw new ProtocolError('the request must be a JSON object')
  }
  return { header, binary: body.subarray(jsonLength) }
}

/**
 * Reads the tensors of `entries` (a request's `inputs` or a response's `outputs`): from `data`,
 * or from the binary part in order (`parameters.binary_data_size`). The binary part must be
 * used up exactly. `maxElements` bounds each tensor. Returns [{name, tensor}].
 */
function readTensors(entries, binary, what, maxElements) {
  if (!Array.isArray(entries)) throw new ProtocolError(`${what} must be an array`)
  let offset = 0
  const out = entries.map((e, i) => {
    const where = `${what}[${i}]`
    if (e === null || typeof e !== 'object') throw new ProtocolError(`${where} must be an object`)
    if (typeof e.name !== 'string') throw new ProtocolError(`${where}: name must be a string`)
    const label = `${what.replace(/s$/, '')} '${e.name}'`
    const datatype = e.datatype
    dtypeOf(datatype, label)
    const n = elementCount(e.shape, label, maxElements)
    const size = e.parameters && e.parameters.binary_data_size
    if (size !== undefined) {
      if (!Number.isSafeInteger(size) || size < 0) {
        throw new ProtocolError(`${label}: binary_data_size must be a byte count`)
      }
      if (size !== n * ITEM_BYTES[datatype]) {
        throw new ProtocolError(
          `${label}: binary_data_size ${size} does not match shape ${JSON.stringify(e.shape)} ` +
            `of ${datatype} (${n * ITEM_BYTES[datatype]} bytes)`,
        )
      }
      if (offset + size > binary.length) throw new ProtocolError(`${label}: binary data runs past the end of the body`)
      const bytes = binary.subarray(offset, offset + size)
      offset += size
      return { name: e.name, tensor: tensorFromBytes(bytes, e.shape, datatype) }
    }
    if (e.data === undefined) throw new ProtocolError(`${label}: neither data nor parameters.binary_data_size`)
    return { name: e.name, tensor: tensorFromData(e.data, e.shape, datatype, label) }
  })
  if (offset !== binary.length) {
    throw new ProtocolError(`the body has ${binary.length - offset} bytes after its last tensor`)
  }
  return out
}

/**
 * One protocol tensor entry for `t` (its `data`, or its bytes appended to `chunks` when
 * `binary`).
 */
function writeTensor(name, t, binary, chunks) {
  if (!(t.dtype in DATATYPE)) {
    throw new ProtocolError(`'${name}': dtype ${t.dtype} has no protocol datatype`, 500, 'DTypeMismatch')
  }
  const entry = { name, datatype: DATATYPE[t.dtype], shape: t.shape }
  const cpu = t.device === 'cpu' ? t : t.cpu()
  if (binary) {
    const bytes = tensorBytes(cpu.contiguous())
    chunks.push(bytes)
    entry.parameters = { binary_data_size: bytes.length }
  } else entry.data = tensorData(cpu)
  return entry
}

/** A body: the JSON header, then the binary chunks; with its header length when binary. */
function encodeBody(header, chunks) {
  const json = Buffer.from(JSON.stringify(header))
  if (!chunks.length) return { body: json, headerLength: undefined }
  return { body: Buffer.concat([json, ...chunks]), headerLength: json.length }
}

module.exports = {
  HEADER_LENGTH,
  DATATYPE,
  DTYPE,
  ITEM_BYTES,
  ProtocolError,
  dtypeOf,
  elementCount,
  readTensors,
  writeTensor,
  encodeBody,
  splitBody,
  tensorBytes,
}

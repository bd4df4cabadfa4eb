// @ts-check
'use strict'
// torch.oip.writeTritonRepository: a Triton Inference Server model repository entry for a
// TorchScript model — `dir/name/config.pbtxt` (platform "pytorch_libtorch") and
// `dir/name/1/model.pt` — so a torch-node service's model moves to Triton (dynamic batching,
// instance groups, GPUs) unchanged. What it writes is checked against the model first: it runs
// the model at batch 1 and batch 2 and takes the names, datatypes and dims from those runs, so
// a model traced at a fixed batch gets `max_batch_size: 0` instead of a config Triton would
// break on at the first batched request.
const fs = require('node:fs')
const path = require('node:path')
const P = require('./protocol')

const { codedError, describe } = require('../errors')
const torch = require('../torch')
const opt = require('../options')

/** @import { ScriptModule, Tensor } from '../../index' */

const NAME = /^[A-Za-z_][\w.-]*$/
const name = opt.check((v) => typeof v === 'string' && NAME.test(v), 'a name (letters, digits, _ . -)')
// Triton's PyTorch backend has no BF16 tensors.
const datatype = opt.oneOf(Object.keys(P.DTYPE).filter((t) => t !== 'BF16'))
const sizes = opt.sizes({ varying: true })
/** An input or output: a name alone, or its metadata (`dims` Triton's, `shape` the protocol's). */
const entry = (v, what) => (typeof v === 'string' ? { name: name(v, what) } : ENTRY(v, what))
const ENTRY = opt.bag(
  { name, datatype, dims: sizes, shape: sizes },
  {
    hints: {
      dtype: "Triton's config calls it 'datatype' here: 'FP32', 'INT64', ...",
      data_type: "Triton's config calls it 'datatype' here: 'FP32', 'INT64', ...",
    },
  },
)
const ENTRIES = opt.arrayOf(entry, 'names or {name, datatype, dims | shape}')
const OPTIONS = opt.bag(
  {
    name: opt.check(
      (v) => typeof v === 'string' && /^[A-Za-z0-9_][\w.-]*$/.test(v),
      'a model name (letters, digits, _ . -)',
    ),
    model: opt.any, // a ScriptModule or a path: checked with torch at hand
    maxBatchSize: opt.integer({ min: 0 }),
    inputs: ENTRIES,
    outputs: ENTRIES,
    dynamicBatching: opt.bag({
      maxQueueDelayMicroseconds: opt.integer({ min: 0 }),
      preferredBatchSize: opt.arrayOf(opt.integer({ min: 1 }), 'batch sizes'),
    }),
    instances: opt.integer({ min: 1 }),
    example: opt.any, // Tensors: checked with torch at hand
  },
  { required: ['name', 'model'] },
)

const bad = (message) => codedError('InvalidArg', `writeTritonRepository: ${message}`, writeTritonRepository)
const firstLine = (e) => String(e?.message ?? e).split('\n')[0]

/** Tensors from a model's output: alone, in an array, or in an object (Triton needs names). */
function outputTensors(out) {
  const list = out instanceof torch().Tensor ? [out] : Array.isArray(out) ? out : null
  if (!list || !list.every((t) => t instanceof torch().Tensor)) {
    throw bad(`the model returns ${describe(out)}; Triton's PyTorch backend serves tensors or tuples of tensors`)
  }
  return list
}

/** The example inputs at `batch` rows: the example's first row repeated. */
const atBatch = (xs, batch) =>
  xs.map((x) =>
    x
      .narrow(0, 0, 1)
      .expand([batch, ...x.shape.slice(1)])
      .contiguous(),
  )

/** The given entries, one per model input or output (`count`), or names by position. */
function specs(list, count, prefix, where) {
  if (list === undefined) return Array.from({ length: count }, (_, i) => ({ name: `${prefix}__${i}` }))
  if (list.length !== count) {
    throw bad(`options.${where}: expected ${count} entries, one per model ${where.slice(0, -1)}`)
  }
  return list.map((s, i) => ({ ...s, name: s.name ?? `${prefix}__${i}` }))
}

/**
 * An entry's Triton dims, from what the runs show (`shown`, the whole shape at batch 1):
 * `dims` or `shape` if given and they fit it (-1: a size that varies), else `shown`'s.
 */
function dimsOf(s, shown, batching, what) {
  const strip = (shape) => (batching ? shape.slice(1) : shape)
  const fits = (given, against) =>
    given.length === against.length && given.every((d, j) => d === -1 || d === against[j])
  if (s.shape !== undefined) {
    if (!fits(s.shape, shown)) {
      throw bad(
        `${what}.shape: [${s.shape}] does not fit [${shown}], the shape the model shows at batch 1 (shape: ` +
          `every size, the batch dim included; dims: Triton's, without it when batching; -1: a size that varies)`,
      )
    }
    if (batching && s.shape[0] !== -1) {
      throw bad(`${what}.shape: the batch dim (dim 0) must be -1 when max_batch_size > 0, got ${s.shape[0]}`)
    }
    return strip(s.shape)
  }
  if (s.dims !== undefined) {
    if (!fits(s.dims, strip(shown))) {
      throw bad(
        `${what}.dims: [${s.dims}] does not fit [${strip(shown)}], what the model shows at batch 1 (dims: ` +
          `Triton's, without the batch dim when batching; shape: every size; -1: a size that varies)`,
      )
    }
    return s.dims
  }
  return strip(shown)
}

function pbtxt({ name, maxBatchSize, inputs, outputs, dynamicBatching, instances }) {
  const tensor = (t) =>
    `  {\n    name: "${t.name}"\n    data_type: TYPE_${t.datatype}\n    dims: [ ` + `${t.dims.join(', ')} ]\n  }`
  const lines = [
    `# Written by torch-node ${require('../../package.json').version} (libtorch ${torch().libtorchVersion()}): ` +
      `model.pt`,
    `# loads in Triton's PyTorch backend built with libtorch ${torch().libtorchVersion()} or newer.`,
    `name: "${name}"`,
    'platform: "pytorch_libtorch"',
    `max_batch_size: ${maxBatchSize}`,
    `input [\n${inputs.map(tensor).join(',\n')}\n]`,
    `output [\n${outputs.map(tensor).join(',\n')}\n]`,
  ]
  if (dynamicBatching) {
    const body = []
    if (dynamicBatching.preferredBatchSize?.length) {
      body.push(`  preferred_batch_size: [ ${dynamicBatching.preferredBatchSize.join(', ')} ]`)
    }
    if (dynamicBatching.maxQueueDelayMicroseconds !== undefined) {
      body.push(`  max_queue_delay_microseconds: ${dynamicBatching.maxQueueDelayMicroseconds}`)
    }
    lines.push(`dynamic_batching {\n${body.join('\n')}${body.length ? '\n' : ''}}`)
  }
  if (instances) lines.push(`instance_group [\n  {\n    count: ${instances}\n    kind: KIND_CPU\n  }\n]`)
  return lines.join('\n') + '\n'
}

// The public types below become index.d.ts's declarations (tools/lib-typings.js).
/**
 * Options of `torch.oip.writeTritonRepository`; any other key is refused (`InvalidArg`).
 * @typedef {object} TritonRepositoryOptions
 * @property {string} name The model's name in the repository.
 * @property {ScriptModule | string} model A ScriptModule or a `.pt` file's path; saved as `<name>/1/model.pt`.
 * @property {number} [maxBatchSize] Triton's `max_batch_size` (default 8 when the model runs at batch 2, else 0).
 * @property {Array<string | { name?: string; datatype?: string; dims?: number[]; shape?: number[] }>} [inputs]
 *   Names (default `INPUT__i`), datatypes, and sizes: Triton's `dims` (without the batch dim
 *   when batching) or the protocol's `shape` (every size, the batch dim included); -1: a size
 *   that varies. Any other key is refused (`InvalidArg`).
 * @property {Array<string | { name?: string; datatype?: string; dims?: number[]; shape?: number[] }>} [outputs]
 *   Names (default `OUTPUT__i`); datatypes and sizes, if given, must fit what the model returns.
 * @property {{ maxQueueDelayMicroseconds?: number; preferredBatchSize?: number[] }} [dynamicBatching]
 * @property {number} [instances] CPU instances (`instance_group`).
 * @property {Tensor | Tensor[]} [example] The inputs of one batch-1 call, run at batch 1 and 2 to check the config.
 */
/**
 * What `writeTritonRepository` wrote.
 * @typedef {object} TritonModelConfig
 * @property {string} name
 * @property {number} maxBatchSize
 * @property {Array<{ name: string; datatype: string; dims: number[] }>} inputs
 * @property {Array<{ name: string; datatype: string; dims: number[] }>} outputs
 * @property {string} path The model's folder.
 */

// For a TorchScript model (a path or a ScriptModule). `example`: the inputs of one batch-1 call (Tensors), used
// to check the config; without it, zeros of each input's fixed `dims` (`[1, ...dims]`) or `shape` (the
// protocol's: every size, -1 for the batch). `inputs[i].dims` are Triton's: without the batch dim when
// max_batch_size > 0, -1 for a size that varies. Returns the config as written.
/**
 * Writes `dir/<name>/config.pbtxt` (`pytorch_libtorch`) and `dir/<name>/1/model.pt`, checked against the model at
 * batch 1 and 2.
 * @param {string} dir
 * @param {TritonRepositoryOptions} options
 * @returns {TritonModelConfig}
 */
function writeTritonRepository(dir, options) {
  if (typeof dir !== 'string' || !dir) throw bad(`dir: expected a folder path, got ${describe(dir)}`)
  const o = opt.read(options, OPTIONS, 'writeTritonRepository: options', writeTritonRepository)
  const { model, dynamicBatching, instances } = o
  const module =
    model instanceof torch().ScriptModule
      ? model
      : typeof model === 'string'
        ? new (torch().ScriptModule)(model)
        : (() => {
            throw bad(`options.model: expected a ScriptModule or a .pt file's path, got ${describe(model)}`)
          })()
  ;(o.inputs ?? []).forEach((s, i) => {
    if (s.dims !== undefined && s.shape !== undefined) {
      throw bad(`options.inputs[${i}]: give dims (Triton's) or shape (the protocol's, with the batch dim), not both`)
    }
  })

  // The example at batch 1: given, or zeros of the declared sizes.
  let example = o.example
  /** @type {number[][] | null} */
  let built = null
  if (example === undefined) {
    const fixed = (d) => Array.isArray(d) && d.every((x) => x > 0)
    const wholeShape = (s) =>
      s.shape
        ? s.shape.map((d, j) => (j === 0 && d === -1 ? 1 : d))
        : o.maxBatchSize === 0
          ? s.dims
          : s.dims && [1, ...s.dims]
    const shapes = (o.inputs ?? []).map(wholeShape)
    built = shapes
    if (!shapes.length || !shapes.every(fixed)) {
      throw bad(
        'options.example: give the inputs of one batch-1 call, or inputs with fixed dims (or a shape whose ' +
          'only -1 is the batch), so the config can be checked against the model',
      )
    }
    example = shapes.map((shape, i) => torch().zeros(shape, { dtype: P.DTYPE[o.inputs[i].datatype ?? 'FP32'] }))
  }
  const xs = example instanceof torch().Tensor ? [example] : example
  if (!Array.isArray(xs) || !xs.length || !xs.every((x) => x instanceof torch().Tensor && x.ndim >= 1)) {
    throw bad(`options.example: expected a Tensor or an array of Tensors with a batch dim, got ${describe(example)}`)
  }
  const inputs = specs(o.inputs, xs.length, 'INPUT', 'inputs')
  xs.forEach((x, i) => {
    if (!(x.dtype in P.DATATYPE) || x.dtype === 'bfloat16') {
      throw bad(`options.inputs[${i}]: dtype ${x.dtype} is not served by Triton's PyTorch backend`)
    }
    const given = inputs[i].datatype
    if (given !== undefined && given !== P.DATATYPE[x.dtype]) {
      throw bad(`options.inputs[${i}].datatype: ${given} does not match the example's ${P.DATATYPE[x.dtype]}`)
    }
  })

  let one
  try {
    one = outputTensors(module.forwardSync(...atBatch(xs, 1)))
  } catch (/** @type {any} */ e) {
    if (e.code === 'InvalidArg' && e.message.startsWith('writeTritonRepository:')) throw e
    const from = built
      ? ` (zeros built from options.inputs: shape is every size, the batch dim included; dims ` +
        `leaves the batch dim out when batching)`
      : ''
    throw bad(
      `the model fails at batch 1 on inputs of shape ` +
        `${xs.map((x) => `[${[1, ...x.shape.slice(1)]}]`).join(', ')}${from}: ${firstLine(e)}`,
    )
  }
  /** @type {import('../..').Tensor[] | null} */
  let batched = null
  try {
    batched = outputTensors(module.forwardSync(...atBatch(xs, 2)))
  } catch {}
  const batches =
    batched !== null &&
    batched.length === one.length &&
    batched.every((t, i) => t.ndim >= 1 && t.shape[0] === 2 && one[i].shape[0] === 1)
  const maxBatchSize = o.maxBatchSize ?? (batches ? 8 : 0)
  if (maxBatchSize > 0 && !batches) {
    throw bad(
      `options.maxBatchSize ${maxBatchSize}: the model does not run at batch 2 (traced at a fixed batch?); ` +
        `use maxBatchSize: 0`,
    )
  }
  const outputs = specs(o.outputs, one.length, 'OUTPUT', 'outputs')
  outputs.forEach((s, i) => {
    if (s.datatype !== undefined && s.datatype !== P.DATATYPE[one[i].dtype]) {
      throw bad(
        `options.outputs[${i}].datatype: ${s.datatype} does not match the model's ` +
          `${P.DATATYPE[one[i].dtype] ?? one[i].dtype}`,
      )
    }
  })
  const batching = maxBatchSize > 0
  const config = {
    name: o.name,
    maxBatchSize,
    inputs: inputs.map((s, i) => ({
      name: s.name,
      datatype: P.DATATYPE[xs[i].dtype],
      dims: dimsOf(s, [1, ...xs[i].shape.slice(1)], batching, `options.inputs[${i}]`),
    })),
    outputs: one.map((t, i) => ({
      name: outputs[i].name,
      datatype: P.DATATYPE[t.dtype],
      dims: dimsOf(outputs[i], t.shape, batching, `options.outputs[${i}]`),
    })),
  }
  const folder = path.join(dir, o.name)
  fs.mkdirSync(path.join(folder, '1'), { recursive: true })
  module.save(path.join(folder, '1', 'model.pt'))
  fs.writeFileSync(path.join(folder, 'config.pbtxt'), pbtxt({ ...config, dynamicBatching, instances }))
  return { ...config, path: folder }
}

module.exports = { writeTritonRepository }

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

const KEYS = ['name', 'model', 'maxBatchSize', 'inputs', 'outputs', 'dynamicBatching', 'instances', 'example']
const BATCHING_KEYS = ['maxQueueDelayMicroseconds', 'preferredBatchSize']

const { codedError, describe } = require('../errors')

module.exports = function triton(torch) {
  const bad = (message) => codedError('InvalidArg', `writeTritonRepository: ${message}`)
  const positiveInt = (v, what) => {
    if (!Number.isSafeInteger(v) || v < 0) throw bad(`${what}: expected a non-negative integer, got ${describe(v)}`)
    return v
  }

  /** Tensors from a model's output: alone, in an array, or in an object (Triton needs names). */
  function outputTensors(out) {
    const list = out instanceof torch.Tensor ? [out] : Array.isArray(out) ? out : null
    if (!list || !list.every((t) => t instanceof torch.Tensor)) {
      throw bad(`the model returns ${describe(out)}; Triton's PyTorch backend serves tensors or tuples of tensors`)
    }
    return list
  }

  /** The example inputs at `batch` rows: the example's first row repeated. */
  const atBatch = (xs, batch) => xs.map((x) => x.narrow(0, 0, 1).expand([batch, ...x.shape.slice(1)]).contiguous())

  function readSpecs(list, count, prefix, where) {
    if (list === undefined) return Array.from({ length: count }, (_, i) => ({ name: `${prefix}__${i}` }))
    if (!Array.isArray(list) || list.length !== count) throw bad(`${where}: expected ${count} entries, one per model ${where.slice(0, -1)}`)
    return list.map((s, i) => {
      const name = typeof s === 'string' ? s : s?.name ?? `${prefix}__${i}`
      if (typeof name !== 'string' || !/^[A-Za-z_][\w.-]*$/.test(name)) throw bad(`${where}[${i}]: expected a name (letters, digits, _ . -), got ${describe(s)}`)
      return { name }
    })
  }

  /** An input's dims: the example's, or the ones given (-1 for a size that varies) if they fit it. */
  function inputDims(given, fromExample, i) {
    if (given === undefined) return fromExample
    const fits = Array.isArray(given) && given.length === fromExample.length &&
      given.every((d, j) => d === -1 || d === fromExample[j])
    if (!fits) throw bad(`inputs[${i}].dims: ${JSON.stringify(given)} does not fit the example's [${fromExample}] (-1: a size that varies)`)
    return given
  }

  function pbtxt({ name, maxBatchSize, inputs, outputs, dynamicBatching, instances }) {
    const tensor = (t) => `  {\n    name: "${t.name}"\n    data_type: TYPE_${t.datatype}\n    dims: [ ${t.dims.join(', ')} ]\n  }`
    const lines = [
      `# Written by torch-node ${require('../../package.json').version} (libtorch ${torch.libtorchVersion()}): model.pt`,
      `# loads in Triton's PyTorch backend built with libtorch ${torch.libtorchVersion()} or newer.`,
      `name: "${name}"`,
      'platform: "pytorch_libtorch"',
      `max_batch_size: ${maxBatchSize}`,
      `input [\n${inputs.map(tensor).join(',\n')}\n]`,
      `output [\n${outputs.map(tensor).join(',\n')}\n]`,
    ]
    if (dynamicBatching) {
      const body = []
      if (dynamicBatching.preferredBatchSize?.length) body.push(`  preferred_batch_size: [ ${dynamicBatching.preferredBatchSize.join(', ')} ]`)
      if (dynamicBatching.maxQueueDelayMicroseconds !== undefined) body.push(`  max_queue_delay_microseconds: ${dynamicBatching.maxQueueDelayMicroseconds}`)
      lines.push(`dynamic_batching {\n${body.join('\n')}${body.length ? '\n' : ''}}`)
    }
    if (instances) lines.push(`instance_group [\n  {\n    count: ${instances}\n    kind: KIND_CPU\n  }\n]`)
    return lines.join('\n') + '\n'
  }

  /**
   * Writes `dir/<name>/config.pbtxt` and `dir/<name>/1/model.pt` for a TorchScript model (a
   * path or a ScriptModule). `example`: the inputs of one batch-1 call (Tensors), used to check
   * the config; without it, zeros of `[1, ...inputs[i].dims]` (fixed dims). `inputs[i].dims`
   * are Triton's: without the batch dim when max_batch_size > 0, -1 for a size that varies. Returns the config as
   * written: `{name, maxBatchSize, inputs, outputs, path}`.
   */
  function writeTritonRepository(dir, options) {
    if (typeof dir !== 'string' || !dir) throw bad(`dir: expected a folder path, got ${describe(dir)}`)
    if (options === null || typeof options !== 'object') throw bad(`options: expected an object, got ${describe(options)}`)
    for (const k of Object.keys(options)) if (!KEYS.includes(k)) throw bad(`unknown option '${k}'; accepted: ${KEYS.join(', ')}`)
    const { name, model, dynamicBatching, instances } = options
    if (typeof name !== 'string' || !/^[A-Za-z0-9_][\w.-]*$/.test(name)) throw bad(`name: expected a model name (letters, digits, _ . -), got ${describe(name)}`)
    const module = model instanceof torch.ScriptModule ? model
      : typeof model === 'string' ? new torch.ScriptModule(model)
        : (() => { throw bad(`model: expected a ScriptModule or a .pt file's path, got ${describe(model)}`) })()
    if (dynamicBatching !== undefined) {
      if (dynamicBatching === null || typeof dynamicBatching !== 'object') throw bad('dynamicBatching: expected an object')
      for (const k of Object.keys(dynamicBatching)) if (!BATCHING_KEYS.includes(k)) throw bad(`dynamicBatching: unknown key '${k}'`)
      if (dynamicBatching.maxQueueDelayMicroseconds !== undefined) positiveInt(dynamicBatching.maxQueueDelayMicroseconds, 'dynamicBatching.maxQueueDelayMicroseconds')
      ;(dynamicBatching.preferredBatchSize ?? []).forEach((b, i) => positiveInt(b, `dynamicBatching.preferredBatchSize[${i}]`))
    }
    if (instances !== undefined && (positiveInt(instances, 'instances') === 0)) throw bad('instances: expected at least 1')

    // The example at batch 1: given, or zeros of the configured dims.
    let example = options.example
    if (example === undefined) {
      const dims = (options.inputs ?? []).map((s) => s?.dims)
      if (!dims.length || !dims.every((d) => Array.isArray(d) && d.every((x) => Number.isSafeInteger(x) && x > 0))) {
        throw bad('example: give the inputs of one batch-1 call (or inputs with fixed dims) so the config can be checked against the model')
      }
      example = options.inputs.map((s) => torch.zeros([1, ...s.dims], { dtype: P.DTYPE[s.datatype ?? 'FP32'] ?? 'float32' }))
    }
    const xs = example instanceof torch.Tensor ? [example] : example
    if (!Array.isArray(xs) || !xs.length || !xs.every((x) => x instanceof torch.Tensor && x.ndim >= 1)) throw bad('example: expected a Tensor or an array of Tensors with a batch dim')
    const inputs = readSpecs(options.inputs, xs.length, 'INPUT', 'inputs')
    xs.forEach((x, i) => {
      if (!(x.dtype in P.DATATYPE) || x.dtype === 'bfloat16') throw bad(`inputs[${i}]: dtype ${x.dtype} is not served by Triton's PyTorch backend`)
      const given = options.inputs?.[i]?.datatype
      if (given !== undefined && given !== P.DATATYPE[x.dtype]) throw bad(`inputs[${i}]: datatype ${given} does not match the example's ${P.DATATYPE[x.dtype]}`)
    })

    const one = outputTensors(module.forwardSync(...atBatch(xs, 1)))
    let batched = null
    try {
      batched = outputTensors(module.forwardSync(...atBatch(xs, 2)))
    } catch {}
    const batches = batched !== null && batched.length === one.length && batched.every((t, i) => t.ndim >= 1 && t.shape[0] === 2 && one[i].shape[0] === 1)
    let maxBatchSize = options.maxBatchSize
    if (maxBatchSize === undefined) maxBatchSize = batches ? 8 : 0
    positiveInt(maxBatchSize, 'maxBatchSize')
    if (maxBatchSize > 0 && !batches) {
      throw bad(`maxBatchSize ${maxBatchSize}: the model does not run at batch 2 (traced at a fixed batch?); use maxBatchSize: 0`)
    }
    const outputs = readSpecs(options.outputs, one.length, 'OUTPUT', 'outputs')
    const strip = (shape) => (maxBatchSize > 0 ? shape.slice(1) : shape)
    const config = {
      name,
      maxBatchSize,
      inputs: inputs.map((s, i) => ({ name: s.name, datatype: P.DATATYPE[xs[i].dtype], dims: inputDims(options.inputs?.[i]?.dims, strip(xs[i].shape), i) })),
      outputs: one.map((t, i) => ({ name: outputs[i].name, datatype: P.DATATYPE[t.dtype], dims: strip(t.shape) })),
    }
    const folder = path.join(dir, name)
    fs.mkdirSync(path.join(folder, '1'), { recursive: true })
    module.save(path.join(folder, '1', 'model.pt'))
    fs.writeFileSync(path.join(folder, 'config.pbtxt'), pbtxt({ ...config, dynamicBatching, instances }))
    return { ...config, path: folder }
  }

  return writeTritonRepository
}

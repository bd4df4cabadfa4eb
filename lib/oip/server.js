// @ts-check
'use strict'
// torch-node as an Open Inference Protocol (KServe v2) server over HTTP: health, server and
// model metadata, readiness, and infer with JSON or binary tensors — so Triton's clients,
// KServe and `torch.RemoteModule` can call a torch-node process. `router()` is a plain
// `(req, res, next)` handler for an existing Express or `http` server; `serve()` starts one.
//
// It faces the network: the body limit holds before the body is buffered, every length and
// shape in a request is checked against the body before anything is allocated for it, and a
// malformed request gets a 4xx with the protocol's `{"error": "..."}` body.
const http = require('node:http')
const path = require('node:path')
const P = require('./protocol')

const DEFAULT_MAX_BODY = 64 * 2 ** 20

const { codedError, describe } = require('../errors')
const torch = require('../torch')
const opt = require('../options')

const port = opt.integer({ min: 0, max: 65535, expected: 'a port number (0: any free one)' })
const models = opt.check((v) => typeof v === 'object' && !Array.isArray(v), '{name: model}')
const maxBodyBytes = opt.integer({ min: 1, expected: 'a positive byte count' })
const ROUTER_OPTIONS = opt.bag({ models, maxBodyBytes }, { required: ['models'] })
const SERVE_OPTIONS = opt.bag(
  { models, port, host: opt.string, maxBodyBytes, grpcPort: port },
  { required: ['models'] },
)
/**
 * @import { AOTModule, Batcher, ScriptModule, Tensor } from '../../index'
 * @import { TensorMetadata } from './remote'
 */

// The public types below become index.d.ts's declarations (tools/lib-typings.js).
/**
 * A model `torch.oip.serve` serves, with what its metadata needs: `example`, or the inputs'
 * shapes. What is not declared is learnt by forwards at start (batch 1 and 2); a bare module
 * or path is refused (`InvalidArg`) since neither records its input shapes.
 * @typedef {object} ServedModel
 * @property {ScriptModule | AOTModule | Batcher<any> | string} model
 * @property {Array<Partial<TensorMetadata>>} [inputs] The inputs' metadata (shape: -1 where a size varies); name
 *   defaults to the forward's argument names, datatype to `'FP32'`. Any other key is refused (`InvalidArg`).
 * @property {Array<Partial<TensorMetadata>>} [outputs] The outputs' metadata; what is left out is learnt from the
 *   model (names `OUTPUT__i`, or a dict output's keys).
 * @property {string | number} [version] The version the server reports (default `'1'`).
 * @property {Tensor | Tensor[]} [example] The inputs of one call: run at start, as given and with their rows
 *   doubled, to learn datatypes and shapes.
 */
/**
 * Options of `torch.oip.serve` and `torch.oip.router`; any other key is refused (`InvalidArg`).
 * @typedef {object} OipServeOptions
 * @property {Record<string, ServedModel>} models
 * @property {number} [port] HTTP port (default 0: any free one).
 * @property {string} [host] Address to bind (default `'127.0.0.1'`; `'0.0.0.0'` to face the network).
 * @property {number} [maxBodyBytes] Largest request body accepted (default 64 MiB; bigger: 413 before it is
 *   buffered).
 * @property {number} [grpcPort] Also serve gRPC (`inference.GRPCInferenceService`) on this port (0: any free one).
 */
/**
 * A running protocol server.
 * @typedef {object} OipServer
 * @property {string} url
 * @property {number} port
 * @property {string} [grpcUrl] `host:port` of the gRPC server, when `grpcPort` was given.
 * @property {number} [grpcPort]
 * @property {{ close(callback?: () => void): unknown }} server The underlying `http.Server`.
 * @property {() => Promise<void>} close Stops listening; resolves once both servers closed.
 */

/** One tensor of a model's metadata, as the protocol writes it. */
const TENSOR = opt.bag(
  {
    name: opt.check((v) => typeof v === 'string' && v !== '', 'a non-empty string'),
    datatype: opt.oneOf(Object.keys(P.DTYPE)),
    shape: opt.sizes({ varying: true }),
  },
  {
    hints: {
      dims: "the protocol's metadata calls it 'shape': every size, the batch dim included, -1 where one varies",
      dtype: "the protocol's metadata calls it 'datatype': 'FP32', 'INT64', ...",
      data_type: "the protocol's metadata calls it 'datatype': 'FP32', 'INT64', ...",
    },
  },
)
const TENSORS = opt.arrayOf(TENSOR, 'tensor metadata ({name, datatype, shape})')
const version = opt.check((v) => typeof v === 'string' || Number.isSafeInteger(v), 'a version (a string or an integer)')

const isModule = (m) => m instanceof torch().ScriptModule || m instanceof torch().AOTModule
const isBatcher = (m) => torch().Batcher && m instanceof torch().Batcher
const isTensor = (t) => t instanceof torch().Tensor
const MODEL = opt.bag(
  {
    model: opt.check(
      (m) => isModule(m) || isBatcher(m) || typeof m === 'string',
      "a ScriptModule, AOTModule, Batcher or a model file's path",
    ),
    inputs: TENSORS,
    outputs: TENSORS,
    version,
    example: opt.check(
      (v) => isTensor(v) || (Array.isArray(v) && v.length > 0 && v.every(isTensor)),
      'a Tensor or an array of Tensors (the inputs of one call)',
    ),
  },
  { required: ['model'] },
)

/**
 * A served model's declaration, read and checked at once (no model loaded yet): its
 * metadata must be knowable — from `example`, or declared input shapes — or it is refused,
 * saying what to declare.
 */
function readSpec(name, spec, who) {
  const where = `${who}: models.${name}`
  const s =
    isModule(spec) || isBatcher(spec) || typeof spec === 'string'
      ? { model: spec }
      : opt.read(spec, MODEL, where, readSpec)
  const bad = (message) => codedError('InvalidArg', `${where}: ${message}`, readSpec)
  const example = s.example === undefined ? undefined : isTensor(s.example) ? [s.example] : s.example
  if (example && s.inputs && s.inputs.length !== example.length) {
    throw bad(`inputs declares ${s.inputs.length} input(s), example gives ${example.length}`)
  }
  if (!example) {
    if (!s.inputs || !s.inputs.length) {
      throw bad(
        'the datatypes and shapes of its inputs cannot be read from the model (a TorchScript or .pt2 file ' +
          'records neither); ' +
          'declare inputs: [{name, datatype, shape}] (-1 where a size varies, e.g. shape: [-1, 3, 224, 224]), ' +
          'or give example: the inputs of one call',
      )
    }
    const i = s.inputs.findIndex((x) => x.shape === undefined)
    if (i >= 0) {
      throw bad(
        `inputs[${i}].shape: needed to learn the outputs without an example; declare it (-1 where a size ` +
          `varies), or give example: the inputs of one call`,
      )
    }
  }
  return { ...s, example }
}

/** The module a spec names: a module or Batcher as given; a path loaded (.pt2: AOTModule). */
async function moduleOf(model) {
  if (typeof model !== 'string') return model
  return path.extname(model) === '.pt2' ? torch().AOTModule.load(model) : torch().ScriptModule.load(model)
}

/** Output tensors by name: a Tensor is OUTPUT__0, an array OUTPUT__i, an object its keys. */
function namedOutputs(out, names) {
  const pairs =
    out instanceof torch().Tensor
      ? [[names?.[0] ?? 'OUTPUT__0', out]]
      : Array.isArray(out)
        ? out.map((t, i) => [names?.[i] ?? `OUTPUT__${i}`, t])
        : out instanceof Map
          ? [...out]
          : out !== null && typeof out === 'object'
            ? Object.entries(out)
            : null
  if (!pairs || !pairs.every(([, t]) => t instanceof torch().Tensor)) {
    throw new P.ProtocolError(
      `the model returned ${describe(out)}; only tensors (alone, in an array or an object) ` + `can be sent`,
      500,
    )
  }
  return pairs.map(([name, tensor]) => ({ name: String(name), tensor }))
}

/** Sizes of `a` where `b` agrees, -1 where they differ (b null: all of a's). */
const varying = (a, b) => (b ? a.map((d, j) => (d === b[j] ? d : -1)) : [...a])
const shapes = (xs) => xs.map((x) => `${P.DATATYPE[x.dtype] ?? x.dtype} [${x.shape}]`).join(', ')

/**
 * Probes the model at registration: `first` are inputs it must run on; `second` the same
 * inputs grown where a size may vary (the batch 1 -> 2). Returns the outputs of both
 * (second: null where it was not given or, when `mayFail`, where the model refused it).
 */
async function probe(call, first, second, { where, from, mayFail }) {
  let one
  try {
    one = namedOutputs(await call(first), null)
  } catch (e) {
    throw codedError(
      'InvalidArg',
      `${where}: the model fails on ${from} (${shapes(first)}), so its metadata cannot be learnt; declare inputs: ` +
        `[{name, datatype, shape}] that fit it (datatype defaults to FP32): ${firstLine(e)}`,
    )
  }
  if (!second) return { one, two: null }
  try {
    const two = namedOutputs(await call(second), null)
    const fits =
      two.length === one.length && two.every((o, i) => o.name === one[i].name && o.tensor.ndim === one[i].tensor.ndim)
    if (!fits) {
      throw new Error(
        `its outputs change in number, names or rank: [${one.map((o) => o.tensor.shape)}] against ` +
          `[${two.map((o) => o.tensor.shape)}]`,
      )
    }
    return { one, two }
  } catch (e) {
    if (mayFail) return { one, two: null }
    throw codedError(
      'InvalidArg',
      `${where}: the model runs on ${shapes(first)} but not on ${shapes(second)} (the -1 sizes of inputs grown), ` +
        `so those sizes do not vary: declare them, or give example: the inputs of one call; ${firstLine(e)}`,
    )
  }
}
const firstLine = (e) => String(e?.message ?? e).split('\n')[0]

/**
 * A served model: how to call it and its complete metadata — what the spec declares, the
 * rest learnt from the model (argument names from the TorchScript schema; datatypes and
 * shapes from probe forwards at batch 1 and 2, -1 where a size differs between them).
 */
async function prepareModel(name, spec, who) {
  const where = `${who}: models.${name}`
  const module = await moduleOf(spec.model)
  const call = (inputs) => (isBatcher(module) ? module.run(...inputs) : module.forward(...inputs))
  const declared = spec.inputs ?? []
  const count = spec.example ? spec.example.length : declared.length
  // Input names: the forward's argument names, as Triton's PyTorch backend can use them.
  const args = module instanceof torch().ScriptModule ? module.signature().args : null
  if (args && (count > args.length || count < args.filter((a) => !a.hasDefault).length)) {
    throw codedError(
      'InvalidArg',
      `${where}: forward takes ${args.map((a) => a.name).join(', ')}; ` +
        `${spec.example ? 'example gives' : 'inputs declares'} ${count} input(s)`,
    )
  }
  const inputs = Array.from({ length: count }, (_, i) => ({
    name: declared[i]?.name ?? args?.[i]?.name ?? `INPUT__${i}`,
    datatype: declared[i]?.datatype ?? (spec.example ? P.DATATYPE[spec.example[i].dtype] : 'FP32'),
    shape: declared[i]?.shape,
  }))
  const unsupported = inputs.findIndex((s) => s.datatype === undefined)
  if (unsupported >= 0) {
    throw codedError(
      'InvalidArg',
      `${where}.example[${unsupported}]: dtype ${spec.example[unsupported].dtype} has no protocol datatype`,
    )
  }
  const outputsDeclared = spec.outputs && spec.outputs.every((o) => o.name && o.datatype && o.shape)
  let outputs = spec.outputs ?? null
  if (!outputsDeclared || spec.example) {
    let learnt
    if (spec.example) {
      // The example as given, then its rows twice over: a size that differs is the batch.
      const xs = spec.example
      const doubled = xs.every((x) => x.ndim >= 1 && x.shape[0] >= 1) ? xs.map((x) => torch().cat([x, x], 0)) : null
      learnt = await probe(call, xs, doubled, { where, from: 'example', mayFail: true })
      inputs.forEach((s, i) => {
        if (s.datatype !== P.DATATYPE[xs[i].dtype]) {
          throw codedError(
            'InvalidArg',
            `${where}.inputs[${i}].datatype: ${s.datatype} does not match the example's ${P.DATATYPE[xs[i].dtype]}`,
          )
        }
        const shape = learnt.two ? varying(xs[i].shape, doubled[i].shape) : [...xs[i].shape]
        if (s.shape === undefined) s.shape = shape
        else if (s.shape.length !== shape.length || s.shape.some((d, j) => d !== -1 && d !== xs[i].shape[j])) {
          throw codedError(
            'InvalidArg',
            `${where}.inputs[${i}].shape: [${s.shape}] does not fit the example's [${xs[i].shape}] (-1: a size that ` +
              `varies)`,
          )
        }
      })
    } else {
      // Zeros of the declared shapes: -1 sizes at 1 (the batch, dim 0) or 2, then 2 or 3.
      // Sizes that vary (-1) at 1 (batch) or 2, plus `grow`; fixed sizes as declared.
      const sizeOf = (d, j, grow) => (d !== -1 ? d : (j === 0 ? 1 : 2) + grow)
      const build = (grow) =>
        inputs.map((s) =>
          torch().zeros(
            s.shape.map((d, j) => sizeOf(d, j, grow)),
            { dtype: P.DTYPE[s.datatype] },
          ),
        )
      const grows = inputs.some((s) => s.shape.includes(-1))
      learnt = await probe(call, build(0), grows ? build(1) : null, {
        where,
        from: 'zeros of the declared input shapes',
        mayFail: false,
      })
    }
    const { one, two } = learnt
    if (outputs && outputs.length !== one.length) {
      throw codedError(
        'InvalidArg',
        `${where}.outputs: declares ${outputs.length} output(s); the model returns ${one.length} ` +
          `(${one.map((o) => o.name).join(', ')})`,
      )
    }
    outputs = one.map((o, i) => {
      const given = outputs?.[i] ?? {}
      const datatype = P.DATATYPE[o.tensor.dtype]
      const shape = varying(o.tensor.shape, two?.[i].tensor.shape)
      if (!datatype) {
        throw codedError(
          'InvalidArg',
          `${where}: output ${o.name} is ${o.tensor.dtype}, which has no protocol datatype`,
        )
      }
      if (given.datatype !== undefined && given.datatype !== datatype) {
        throw codedError(
          'InvalidArg',
          `${where}.outputs[${i}].datatype: ${given.datatype} does not match the model's ${datatype}`,
        )
      }
      const differs = (d, j) => d !== -1 && d !== o.tensor.shape[j]
      if (given.shape !== undefined && (given.shape.length !== shape.length || given.shape.some(differs))) {
        throw codedError(
          'InvalidArg',
          `${where}.outputs[${i}].shape: [${given.shape}] does not fit [${shape}], what the model returns (-1: a ` +
            `size that varies)`,
        )
      }
      return { name: given.name ?? o.name, datatype, shape: given.shape ?? shape }
    })
    // A dict output is sent under its own keys: declared names must be those.
    const keyed = one.some((o, i) => o.name !== `OUTPUT__${i}`)
    if (keyed && outputs.some((o, i) => o.name !== one[i].name)) {
      throw codedError(
        'InvalidArg',
        `${where}.outputs: the model returns a dict with keys ${one.map((o) => o.name).join(', ')}; outputs must ` +
          `name those`,
      )
    }
  }
  const version = spec.version !== undefined ? String(spec.version) : '1'
  return {
    name,
    version,
    call,
    inputs,
    outputs,
    metadata: { name, versions: [version], platform: 'torch_node', inputs, outputs },
    config: tritonConfig(name, inputs, outputs),
  }
}

/**
 * Triton's model configuration extension (`GET /v2/models/{m}/config`, gRPC `ModelConfig`):
 * Triton's clients read it before a run — perf_analyzer stops with "failed to get model
 * config" without it. `max_batch_size: 0` because the shapes in the metadata already hold the
 * batch dimension (the module takes whole tensors); a client then sends full shapes.
 */
function tritonConfig(name, inputs, outputs) {
  const tensor = (s) => ({ name: s.name, data_type: `TYPE_${s.datatype}`, dims: s.shape })
  return {
    name,
    platform: 'torch_node',
    backend: 'torch_node',
    max_batch_size: 0,
    input: inputs.map(tensor),
    output: outputs.map(tensor),
  }
}

/** Reads the body, refusing at once past `limit` bytes. */
function readBody(req, limit) {
  return new Promise((resolve, reject) => {
    // Past the limit, the rest is read and dropped (answering 413 while the client still
    // writes would reset its connection before it reads the answer), and the connection
    // closes after the answer; Node's requestTimeout bounds a client that never stops.
    const declared = Number(req.headers['content-length'])
    if (declared > limit) {
      req.resume()
      return reject(new P.ProtocolError(`the body is ${declared} bytes; the limit is ${limit}`, 413))
    }
    /** @type {Buffer[] | null} */
    let chunks = []
    let size = 0
    req.on('data', (c) => {
      size += c.length
      if (size > limit) {
        if (chunks) reject(new P.ProtocolError(`the body is over the limit of ${limit} bytes`, 413))
        chunks = null
      } else chunks?.push(c)
    })
    req.on('end', () => chunks && resolve(Buffer.concat(chunks)))
    req.on('error', reject)
  })
}

function send(res, status, header, chunks = [], extra = {}) {
  const { body, headerLength } = P.encodeBody(header, chunks)
  const headers = {
    ...extra,
    'content-type': headerLength === undefined ? 'application/json' : 'application/octet-stream',
    'content-length': body.length,
  }
  if (headerLength !== undefined) headers[P.HEADER_LENGTH] = headerLength
  res.writeHead(status, headers)
  res.end(body)
}

/** The HTTP status for an error: protocol errors carry theirs; a full queue is 503. */
function statusOf(e) {
  if (e instanceof P.ProtocolError) return e.status
  if (e && e.code === 'QueueFull') return 503
  if (e && ['InvalidArg', 'ShapeMismatch', 'DTypeMismatch', 'MethodNotFound'].includes(e.code)) return 400
  return 500
}

/** Runs `model` on named inputs; returns its outputs by name, those `asked` (all if none). */
async function run(model, given, asked) {
  const byName = new Map()
  for (const g of given) {
    if (byName.has(g.name)) throw new P.ProtocolError(`input '${g.name}' is given twice`)
    byName.set(g.name, g.tensor)
  }
  for (const name of byName.keys()) {
    if (!model.inputs.some((s) => s.name === name)) {
      throw new P.ProtocolError(
        `unknown input '${name}'; the model takes ` + `${model.inputs.map((s) => s.name).join(', ')}`,
      )
    }
  }
  const args = model.inputs.map((s) => {
    if (!byName.has(s.name)) throw new P.ProtocolError(`input '${s.name}' is missing`)
    const t = byName.get(s.name)
    // Checked against the metadata before the model runs, as Triton does: behind a Batcher a
    // request that does not fit must not reach a batch.
    const datatype = P.DATATYPE[t.dtype]
    if (datatype !== s.datatype) {
      throw new P.ProtocolError(`input '${s.name}' is ${datatype}, the model takes ${s.datatype}`)
    }
    if (s.shape.length !== t.shape.length || s.shape.some((d, j) => d !== -1 && d !== t.shape[j])) {
      throw new P.ProtocolError(`input '${s.name}' has shape [${t.shape}], the model takes [${s.shape}] (-1: any size)`)
    }
    return t
  })
  const outputs = namedOutputs(
    await model.call(args),
    model.outputs.map((o) => o.name),
  )
  if (asked !== undefined && !Array.isArray(asked)) throw new P.ProtocolError('outputs must be an array')
  if (!asked || !asked.length) return outputs
  return asked.map((a) => {
    const o = outputs.find((x) => x.name === a?.name)
    if (!o) {
      throw new P.ProtocolError(
        `unknown output ${JSON.stringify(a?.name)}; the model returns ` + `${outputs.map((x) => x.name).join(', ')}`,
      )
    }
    return { ...o, binary: a.parameters?.binary_data }
  })
}

async function infer(model, req, res, limit) {
  const body = await readBody(req, limit)
  const { header, binary } = P.splitBody(body, req.headers[P.HEADER_LENGTH])
  const given = P.readTensors(header.inputs, binary, 'inputs', limit)
  const outputs = await run(model, given, header.outputs)
  const binaryDefault = header.parameters?.binary_data_output === true
  const chunks = []
  const written = outputs.map((o) => P.writeTensor(o.name, o.tensor, o.binary ?? binaryDefault, chunks))
  const reply = { model_name: model.name, model_version: model.version, outputs: written }
  if (typeof header.id === 'string') reply.id = header.id
  send(res, 200, reply, chunks)
}

// Resolves its models lazily (paths are loaded on first use).
/**
 * A `(req, res, next)` handler for the protocol's `/v2` routes in an existing Express or `http` server.
 * @param {Omit<OipServeOptions, 'port' | 'host' | 'grpcPort'>} options
 * @returns {(req: object, res: object, next?: () => void) => Promise<void>}
 */
function router(options) {
  return handlerFor(opt.read(options, ROUTER_OPTIONS, 'oip.router: options', router), 'oip.router')
}

/** The handler for read options; `who` names the caller in errors. */
function handlerFor({ models, maxBodyBytes = DEFAULT_MAX_BODY }, who) {
  // Every declaration is checked now; the models load (and are probed) on first use.
  const specs = new Map(Object.entries(models).map(([name, spec]) => [name, readSpec(name, spec, who)]))
  const prepared = new Map()
  const model = (name) => {
    if (!specs.has(name)) return null
    if (!prepared.has(name)) prepared.set(name, prepareModel(name, specs.get(name), who))
    return prepared.get(name)
  }
  const handler = async (req, res, next) => {
    const url = new URL(req.url, 'http://localhost')
    const parts = url.pathname.split('/').filter(Boolean).map(decodeURIComponent)
    if (parts[0] !== 'v2') return next ? next() : send(res, 404, { error: `no route ${url.pathname}` })
    try {
      const [, a, b, c, d, e] = parts
      if (req.method === 'GET' && parts.length === 1) {
        return send(res, 200, {
          name: 'torch-node',
          version: require('../../package.json').version,
          extensions: ['binary_tensor_data', 'model_configuration'],
        })
      }
      if (req.method === 'GET' && a === 'health' && (b === 'live' || b === 'ready') && parts.length === 3) {
        return send(res, 200, {})
      }
      if (a !== 'models' || !b) throw new P.ProtocolError(`no route ${req.method} ${url.pathname}`, 404)
      const m = await handler.lookup(b)
      let rest = [c, d, e].filter((x) => x !== undefined)
      if (rest[0] === 'versions') {
        if (rest[1] !== m.version) {
          throw new P.ProtocolError(`model '${b}' has no version '${rest[1]}'; it has ${m.version}`, 404)
        }
        rest = rest.slice(2)
      }
      if (req.method === 'GET' && rest.length === 0) return send(res, 200, m.metadata)
      if (req.method === 'GET' && rest[0] === 'ready' && rest.length === 1) return send(res, 200, {})
      if (req.method === 'GET' && rest[0] === 'config' && rest.length === 1) return send(res, 200, m.config)
      if (req.method === 'POST' && rest[0] === 'infer' && rest.length === 1) {
        return await infer(m, req, res, maxBodyBytes)
      }
      throw new P.ProtocolError(`no route ${req.method} ${url.pathname}`, 404)
    } catch (/** @type {any} */ err) {
      if (res.headersSent) return res.destroy()
      const status = statusOf(err)
      send(
        res,
        status,
        { error: String(err && err.message ? err.message : err) },
        [],
        status === 413 ? { connection: 'close' } : {},
      )
    }
  }
  /** The prepared model `name` (for serve() and the gRPC server), or a 404. */
  handler.lookup = (name) => {
    const pending = model(name)
    if (!pending) {
      return Promise.reject(
        new P.ProtocolError(`unknown model '${name}'; this server has ` + `${[...specs.keys()].join(', ')}`, 404),
      )
    }
    return pending
  }
  handler.run = run
  return handler
}

// Bound to 127.0.0.1 unless `host` says otherwise; port 0 (default) picks a free one. Resolves once listening
// and every model is loaded.
/**
 * Starts an HTTP (and gRPC) protocol server for `models`.
 * @param {OipServeOptions} options
 * @returns {Promise<OipServer>}
 */
async function serve(options) {
  const o = opt.read(options, SERVE_OPTIONS, 'oip.serve: options', serve)
  const { port = 0, host = '127.0.0.1', maxBodyBytes = DEFAULT_MAX_BODY } = o
  const handle = handlerFor({ models: o.models, maxBodyBytes }, 'oip.serve')
  // Load every model before listening: a bad path fails serve(), not the first request.
  await Promise.all(Object.keys(o.models).map((name) => handle.lookup(name)))
  const server = http.createServer((req, res) => handle(req, res))
  server.keepAliveTimeout = 60_000
  await new Promise((resolve, reject) => {
    server.once('error', reject)
    server.listen(port, host, () => resolve(undefined))
  })
  const address = /** @type {import('node:net').AddressInfo} */ (server.address())
  const shown = address.family === 'IPv6' ? `[${address.address}]` : address.address
  const closeHttp = () =>
    new Promise((/** @type {(v?: void) => void} */ resolve) => {
      server.close(() => resolve())
      server.closeIdleConnections?.()
    })
  /** @type {{port: number, close: () => Promise<void>} | null} */
  let grpc = null
  if (o.grpcPort !== undefined) {
    grpc = await require('./grpc')
      .serveGrpc(handle, { host, port: o.grpcPort, maxBodyBytes })
      .catch(async (e) => {
        await closeHttp()
        throw e
      })
  }
  return {
    url: `http://${shown}:${address.port}`,
    port: address.port,
    grpcUrl: grpc ? `${shown}:${grpc.port}` : undefined,
    grpcPort: grpc ? grpc.port : undefined,
    server,
    close: () => Promise.all([closeHttp(), grpc?.close()]).then(() => {}),
  }
}

module.exports = { router, serve }

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
const SERVE_KEYS = ['models', 'port', 'host', 'maxBodyBytes', 'grpcPort']
const MODEL_KEYS = ['model', 'inputs', 'outputs', 'version', 'example']

const { codedError, describe } = require('../errors')

module.exports = function oipServer(torch) {
  const bad = (where, message) => codedError('InvalidArg', `${where}: ${message}`, undefined)
  const isModule = (m) => m instanceof torch.ScriptModule || m instanceof torch.AOTModule
  const isBatcher = (m) => torch.Batcher && m instanceof torch.Batcher

  /** The metadata entries of `spec.inputs`/`outputs` given by the user, checked. */
  function tensorSpecs(list, where) {
    if (!Array.isArray(list)) throw bad(where, `expected an array of {name, datatype, shape}, got ${describe(list)}`)
    return list.map((s, i) => {
      if (s === null || typeof s !== 'object' || typeof s.name !== 'string') throw bad(`${where}[${i}]`, 'expected {name, datatype, shape}')
      const datatype = s.datatype ?? 'FP32'
      if (!(datatype in P.DTYPE)) throw bad(`${where}[${i}]`, `unsupported datatype ${JSON.stringify(datatype)}`)
      const shape = s.shape ?? [-1]
      if (!Array.isArray(shape) || !shape.every((d) => Number.isSafeInteger(d) && d >= -1)) throw bad(`${where}[${i}]`, 'shape: expected sizes, -1 for a dynamic one')
      return { name: s.name, datatype, shape }
    })
  }

  /** The module a spec names: a module or Batcher as given; a path loaded (.pt2: AOTModule). */
  async function moduleOf(model, where) {
    if (isModule(model) || isBatcher(model)) return model
    if (typeof model === 'string') {
      return path.extname(model) === '.pt2' ? torch.AOTModule.load(model) : torch.ScriptModule.load(model)
    }
    throw bad(where, `expected a ScriptModule, AOTModule, Batcher or a model file's path, got ${describe(model)}`)
  }

  /** Output tensors by name: a Tensor is OUTPUT__0, an array OUTPUT__i, an object its keys. */
  function namedOutputs(out, names) {
    const pairs = out instanceof torch.Tensor ? [[names?.[0] ?? 'OUTPUT__0', out]]
      : Array.isArray(out) ? out.map((t, i) => [names?.[i] ?? `OUTPUT__${i}`, t])
        : out instanceof Map ? [...out]
          : out !== null && typeof out === 'object' ? Object.entries(out) : null
    if (!pairs || !pairs.every(([, t]) => t instanceof torch.Tensor)) {
      throw new P.ProtocolError(`the model returned ${describe(out)}; only tensors (alone, in an array or an object) can be sent`, 500)
    }
    return pairs.map(([name, tensor]) => ({ name: String(name), tensor }))
  }

  /** A served model: how to call it and what its metadata says. */
  async function prepareModel(name, spec) {
    const where = `oip: models.${name}`
    const full = spec !== null && typeof spec === 'object' && !isModule(spec) && !isBatcher(spec)
    if (full) {
      for (const k of Object.keys(spec)) if (!MODEL_KEYS.includes(k)) throw bad(where, `unknown key '${k}'; accepted: ${MODEL_KEYS.join(', ')}`)
    }
    const module = await moduleOf(full ? spec.model : spec, full ? `${where}.model` : where)
    const call = (inputs) => (isBatcher(module) ? module.run(...inputs) : module.forward(...inputs))
    let inputs = full && spec.inputs ? tensorSpecs(spec.inputs, `${where}.inputs`) : null
    let outputs = full && spec.outputs ? tensorSpecs(spec.outputs, `${where}.outputs`) : null
    const example = full ? spec.example : undefined
    if (example !== undefined) {
      const xs = Array.isArray(example) ? example : [example]
      if (!xs.every((x) => x instanceof torch.Tensor)) throw bad(`${where}.example`, 'expected a Tensor or an array of Tensors')
      inputs ??= xs.map((x, i) => ({ name: `INPUT__${i}`, datatype: P.DATATYPE[x.dtype], shape: [-1, ...x.shape.slice(1)] }))
      outputs ??= namedOutputs(await call(xs), null).map(({ name, tensor }) => ({ name, datatype: P.DATATYPE[tensor.dtype], shape: [-1, ...tensor.shape.slice(1)] }))
    }
    // Input names: the forward's argument names, as Triton's PyTorch backend can use them.
    const scripted = isBatcher(module) ? null : module instanceof torch.ScriptModule ? module : null
    const argNames = scripted ? scripted.signature().args.filter((a) => !a.hasDefault).map((a) => a.name) : null
    if (argNames && inputs && !(full && spec.inputs) && example !== undefined) inputs = inputs.map((s, i) => ({ ...s, name: argNames[i] ?? s.name }))
    // Without `inputs` or `example` the datatypes and shapes are unknown: reported as FP32 [-1]
    // and not checked (the model checks its inputs itself).
    const declared = inputs !== null
    inputs ??= (argNames ?? ['INPUT__0']).map((n) => ({ name: n, datatype: 'FP32', shape: [-1] }))
    const version = full && spec.version !== undefined ? String(spec.version) : '1'
    return {
      name,
      version,
      call,
      declared,
      inputs,
      outputs,
      metadata: { name, versions: [version], platform: 'torch_node', inputs, outputs: outputs ?? [] },
      config: tritonConfig(name, inputs, outputs ?? []),
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
    return { name, platform: 'torch_node', backend: 'torch_node', max_batch_size: 0, input: inputs.map(tensor), output: outputs.map(tensor) }
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
    const headers = { ...extra, 'content-type': headerLength === undefined ? 'application/json' : 'application/octet-stream', 'content-length': body.length }
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
      if (!model.inputs.some((s) => s.name === name)) throw new P.ProtocolError(`unknown input '${name}'; the model takes ${model.inputs.map((s) => s.name).join(', ')}`)
    }
    const args = model.inputs.map((s) => {
      if (!byName.has(s.name)) throw new P.ProtocolError(`input '${s.name}' is missing`)
      const t = byName.get(s.name)
      if (!model.declared) return t
      // Checked against the metadata before the model runs, as Triton does: behind a Batcher a
      // request that does not fit must not reach a batch. [-1] (no example given): any shape.
      const datatype = P.DATATYPE[t.dtype]
      if (datatype !== s.datatype) throw new P.ProtocolError(`input '${s.name}' is ${datatype}, the model takes ${s.datatype}`)
      const anyRank = s.shape.length === 1 && s.shape[0] === -1
      if (!anyRank && (s.shape.length !== t.shape.length || s.shape.some((d, j) => d !== -1 && d !== t.shape[j]))) {
        throw new P.ProtocolError(`input '${s.name}' has shape [${t.shape}], the model takes [${s.shape}] (-1: any size)`)
      }
      return t
    })
    const outputs = namedOutputs(await model.call(args), model.outputs && model.outputs.map((o) => o.name))
    if (asked !== undefined && !Array.isArray(asked)) throw new P.ProtocolError('outputs must be an array')
    if (!asked || !asked.length) return outputs
    return asked.map((a) => {
      const o = outputs.find((x) => x.name === a?.name)
      if (!o) throw new P.ProtocolError(`unknown output ${JSON.stringify(a?.name)}; the model returns ${outputs.map((x) => x.name).join(', ')}`)
      return { ...o, binary: a.parameters?.binary_data }
    })
  }

  async function infer(model, req, res, limit) {
    const body = await readBody(req, limit)
    const { header, binary } = P.splitBody(body, req.headers[P.HEADER_LENGTH])
    const given = P.readTensors(torch, header.inputs, binary, 'inputs', limit)
    const outputs = await run(model, given, header.outputs)
    const binaryDefault = header.parameters?.binary_data_output === true
    const chunks = []
    const written = outputs.map((o) => P.writeTensor(o.name, o.tensor, o.binary ?? binaryDefault, chunks))
    const reply = { model_name: model.name, model_version: model.version, outputs: written }
    if (typeof header.id === 'string') reply.id = header.id
    send(res, 200, reply, chunks)
  }

  /**
   * `torch.oip.router({models, maxBodyBytes})`: a `(req, res, next)` handler answering the
   * protocol's routes under `/v2`. Resolves its models lazily (paths are loaded on first use).
   */
  function router(options) {
    const { models, maxBodyBytes = DEFAULT_MAX_BODY } = options ?? {}
    if (models === null || typeof models !== 'object') throw bad('oip.router', `options.models: expected {name: model}, got ${describe(models)}`)
    if (!Number.isSafeInteger(maxBodyBytes) || maxBodyBytes < 1) throw bad('oip.router', 'options.maxBodyBytes: expected a positive byte count')
    const prepared = new Map(Object.entries(models).map(([name]) => [name, null]))
    const model = (name) => {
      if (!prepared.has(name)) return null
      if (!prepared.get(name)) prepared.set(name, prepareModel(name, models[name]))
      return prepared.get(name)
    }
    const handler = async (req, res, next) => {
      const url = new URL(req.url, 'http://localhost')
      const parts = url.pathname.split('/').filter(Boolean).map(decodeURIComponent)
      if (parts[0] !== 'v2') return next ? next() : send(res, 404, { error: `no route ${url.pathname}` })
      try {
        const [, a, b, c, d, e] = parts
        if (req.method === 'GET' && parts.length === 1) return send(res, 200, { name: 'torch-node', version: require('../../package.json').version, extensions: ['binary_tensor_data', 'model_configuration'] })
        if (req.method === 'GET' && a === 'health' && (b === 'live' || b === 'ready') && parts.length === 3) return send(res, 200, {})
        if (a !== 'models' || !b) throw new P.ProtocolError(`no route ${req.method} ${url.pathname}`, 404)
        const m = await handler.lookup(b)
        let rest = [c, d, e].filter((x) => x !== undefined)
        if (rest[0] === 'versions') {
          if (rest[1] !== m.version) throw new P.ProtocolError(`model '${b}' has no version '${rest[1]}'; it has ${m.version}`, 404)
          rest = rest.slice(2)
        }
        if (req.method === 'GET' && rest.length === 0) return send(res, 200, m.metadata)
        if (req.method === 'GET' && rest[0] === 'ready' && rest.length === 1) return send(res, 200, {})
        if (req.method === 'GET' && rest[0] === 'config' && rest.length === 1) return send(res, 200, m.config)
        if (req.method === 'POST' && rest[0] === 'infer' && rest.length === 1) return await infer(m, req, res, maxBodyBytes)
        throw new P.ProtocolError(`no route ${req.method} ${url.pathname}`, 404)
      } catch (err) {
        if (res.headersSent) return res.destroy()
        const status = statusOf(err)
        send(res, status, { error: String(err && err.message ? err.message : err) }, [], status === 413 ? { connection: 'close' } : {})
      }
    }
    /** The prepared model `name` (for serve() and the gRPC server), or a 404. */
    handler.lookup = (name) => {
      const pending = model(name)
      if (!pending) return Promise.reject(new P.ProtocolError(`unknown model '${name}'; this server has ${[...prepared.keys()].join(', ')}`, 404))
      return pending
    }
    handler.run = run
    return handler
  }

  /**
   * `await torch.oip.serve({models, port, host, maxBodyBytes, grpcPort})`: an HTTP server
   * answering the protocol (and gRPC on `grpcPort` when given), bound to 127.0.0.1 unless
   * `host` says otherwise; port 0 (default) picks a free one. Resolves to
   * `{url, port, grpcUrl, grpcPort, close()}` once listening and every model is loaded.
   */
  async function serve(options) {
    if (options === null || typeof options !== 'object') throw bad('oip.serve', `options: expected an object, got ${describe(options)}`)
    for (const k of Object.keys(options)) if (!SERVE_KEYS.includes(k)) throw bad('oip.serve', `unknown option '${k}'; accepted: ${SERVE_KEYS.join(', ')}`)
    const { port = 0, host = '127.0.0.1' } = options
    const handle = router(options)
    // Load every model before listening: a bad path fails serve(), not the first request.
    await Promise.all(Object.keys(options.models).map((name) => handle.lookup(name)))
    const server = http.createServer((req, res) => handle(req, res))
    server.keepAliveTimeout = 60_000
    await new Promise((resolve, reject) => {
      server.once('error', reject)
      server.listen(port, host, resolve)
    })
    const address = server.address()
    const shown = address.family === 'IPv6' ? `[${address.address}]` : address.address
    const closeHttp = () => new Promise((resolve) => {
      server.close(() => resolve())
      server.closeIdleConnections?.()
    })
    let grpc = null
    if (options.grpcPort !== undefined) {
      if (!Number.isSafeInteger(options.grpcPort) || options.grpcPort < 0 || options.grpcPort > 65535) {
        await closeHttp()
        throw bad('oip.serve', `options.grpcPort: expected a port number (0: any free one), got ${describe(options.grpcPort)}`)
      }
      const maxBodyBytes = options.maxBodyBytes ?? DEFAULT_MAX_BODY
      grpc = await require('./grpc').serveGrpc(torch, handle, { host, port: options.grpcPort, maxBodyBytes }).catch(async (e) => {
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

  return { router, serve }
}

// @ts-check
'use strict'
// torch.RemoteModule: a model served by an Open Inference Protocol (KServe v2) server —
// NVIDIA Triton, KServe, or another torch-node (`torch.oip.serve`) — called as a ScriptModule
// is: `await RemoteModule.load(url, name)`, `await m.forward(x)`, `dispose()`. Inputs are
// checked against the model's metadata before any request; tensors travel as raw bytes (the
// binary tensor extension) unless `binary: false`. One keep-alive agent per module, so
// concurrent forwards share connections.
const http = require('node:http')
const https = require('node:https')
const P = require('./protocol')

const { codedError, describe } = require('../errors')
const torch = require('../torch')
const opt = require('../options')

/** @import { Tensor } from '../../index' */

// The public types below become index.d.ts's declarations (tools/lib-typings.js).
/**
 * A tensor's name, datatype and shape in the Open Inference Protocol's model metadata.
 * @typedef {object} TensorMetadata
 * @property {string} name
 * @property {string} datatype `'BOOL' | 'UINT8' | 'INT8' | 'INT16' | 'INT32' | 'INT64' | 'FP16' | 'FP32' | 'FP64' |
 *   'BF16'` (or another the server names).
 * @property {number[]} shape Sizes, one per dim; -1 where a size varies.
 */
/**
 * Options of `RemoteModule.load`; any other key is refused (`InvalidArg`).
 * @typedef {object} RemoteModuleOptions
 * @property {'http' | 'grpc'} [protocol] `'http'` (default) or `'grpc'` (implied by a `grpc://` url).
 * @property {boolean} [binary] HTTP: raw tensor bytes (the binary tensor extension, default true) or JSON number
 *   arrays (false). gRPC always sends raw bytes.
 * @property {string | number} [version] The model version to call (default: the server's choice).
 * @property {Record<string, string>} [headers] Extra request headers (HTTP) or metadata (gRPC), e.g. an
 *   authorization token.
 * @property {number} [timeoutMs] Bounds each request (`Unavailable` when the server does not answer in time).
 * @property {AbortSignal} [signal] Aborting rejects with `Aborted`.
 */
/**
 * Options of one `RemoteModule.forward` call, as its last argument.
 * @typedef {object} RemoteCallOptions
 * @property {AbortSignal} [signal]
 * @property {number} [timeoutMs]
 */

const timeoutMs = opt.check(
  (v) => typeof v === 'number' && Number.isFinite(v) && v > 0,
  'a positive number of milliseconds',
)
const signal = opt.instance(AbortSignal, 'an AbortSignal')
const CALL_OPTIONS = opt.bag({ signal, timeoutMs })
const LOAD_OPTIONS = opt.bag({
  protocol: opt.oneOf(['http', 'grpc']),
  binary: opt.boolean,
  version: opt.check((v) => typeof v === 'string' || Number.isSafeInteger(v), 'a version (a string or an integer)'),
  headers: opt.check(
    (v) =>
      typeof v === 'object' &&
      !Array.isArray(v) &&
      Object.values(v).every(
        (h) => ['string', 'number'].includes(typeof h) || (Array.isArray(h) && h.every((x) => typeof x === 'string')),
      ),
    'an object of header values (strings)',
  ),
  timeoutMs,
  signal,
})

const fail = (code, message, extra) => Object.assign(codedError(code, message), extra)

/**
 * One HTTP exchange, bounded by `timeoutMs` and `signal`. Resolves {status, headers, body}.
 * @param {http.Agent} agent
 * @param {URL} url
 * @param {{method?: string, headers?: Record<string, any>, body?: any, timeoutMs?: number, signal?: AbortSignal,
 *   what: string}} options
 */
function request(agent, url, { method = 'GET', headers = {}, body, timeoutMs, signal, what }) {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(fail('Aborted', `${what}: aborted`))
    const lib = url.protocol === 'https:' ? https : http
    const req = lib.request(url, {
      method,
      headers: body ? { ...headers, 'content-length': body.length } : headers,
      agent,
    })
    let timer
    const onAbort = () => req.destroy(fail('Aborted', `${what}: aborted`))
    const done = (f) => (v) => {
      clearTimeout(timer)
      signal?.removeEventListener('abort', onAbort)
      f(v)
    }
    if (timeoutMs !== undefined) {
      timer = setTimeout(
        () => req.destroy(fail('Unavailable', `${what}: no answer from ${url.host} within ${timeoutMs} ms`)),
        timeoutMs,
      )
    }
    signal?.addEventListener('abort', onAbort, { once: true })
    req.on(
      'error',
      done((e) =>
        reject(
          e.code === 'Aborted' || e.code === 'Unavailable'
            ? e
            : fail('Unavailable', `${what}: cannot reach ${url.host} (${e.code || e.message})`),
        ),
      ),
    )
    req.on('response', (res) => {
      const chunks = []
      res.on('data', (c) => chunks.push(c))
      res.on(
        'end',
        done(() => resolve({ status: res.statusCode, headers: res.headers, body: Buffer.concat(chunks) })),
      )
      res.on('error', done(reject))
    })
    req.end(body)
  })
}

/** The server's `{"error": ...}` as a RemoteError (or ModelNotFound for an unknown model). */
function remoteError(r, what, notFound) {
  let message = r.body.toString('utf8').slice(0, 2000)
  try {
    message = JSON.parse(message).error ?? message
  } catch {}
  if (notFound && (r.status === 404 || r.status === 400)) {
    return fail('ModelNotFound', `${what}: ${notFound}: ${message}`, { status: r.status })
  }
  if (r.status === 503) {
    return fail('Unavailable', `${what}: the server is not ready (${message})`, { status: r.status })
  }
  return fail('RemoteError', `${what}: the server answered ${r.status}: ${message}`, { status: r.status })
}

const readOptions = (options, spec, where) => opt.read(options, spec, `${where}: options`, readOptions)

/** The HTTP transport: metadata, readiness and infer over one keep-alive agent. */
function httpTransport(parsed, modelName, { version, headers, timeoutMs, binary }) {
  const versionPath = version ? `/versions/${encodeURIComponent(version)}` : ''
  const modelPath = `/v2/models/${encodeURIComponent(modelName)}${versionPath}`
  const base = new URL(`${parsed.pathname.replace(/\/$/, '')}${modelPath}`, parsed)
  const agent = new (parsed.protocol === 'https:' ? https : http).Agent({ keepAlive: true, maxSockets: 64 })
  const exchange = (url, o, what, extra = {}) =>
    request(agent, url, { headers, timeoutMs: o.timeoutMs ?? timeoutMs, signal: o.signal, what, ...extra })
  return {
    async metadata(o, what, notFound) {
      const r = await exchange(base, o, what)
      if (r.status !== 200) throw remoteError(r, what, notFound)
      // A 200 that is not the protocol's JSON (a URL that reaches some other web server).
      let m
      try {
        m = JSON.parse(r.body.toString('utf8'))
      } catch {}
      if (m === null || typeof m !== 'object' || !Array.isArray(m.inputs)) {
        throw fail(
          'RemoteError',
          `${what}: ${base.href} did not answer with the protocol's model metadata: ` +
            `${JSON.stringify(r.body.toString('utf8').slice(0, 200))}`,
          { status: r.status },
        )
      }
      return m
    },
    async ready(o, what) {
      return (await exchange(new URL(`${base.pathname}/ready`, base), o, what)).status === 200
    },
    async infer(inputs, tensors, outputs, o, what) {
      const chunks = []
      const header = {
        inputs: tensors.map((t, i) => P.writeTensor(inputs[i].name, t, binary, chunks)),
        outputs: outputs.map((s) => ({ name: s.name, parameters: { binary_data: binary } })),
      }
      if (!outputs.length) {
        delete header.outputs
        header.parameters = { binary_data_output: binary }
      }
      const { body, headerLength } = P.encodeBody(header, chunks)
      const h = {
        ...headers,
        'content-type': headerLength === undefined ? 'application/json' : 'application/octet-stream',
      }
      if (headerLength !== undefined) h[P.HEADER_LENGTH] = String(headerLength)
      const r = await exchange(new URL(`${base.pathname}/infer`, base), o, what, { method: 'POST', headers: h, body })
      if (r.status !== 200) throw remoteError(r, what)
      try {
        const { header: reply, binary: rest } = P.splitBody(r.body, r.headers[P.HEADER_LENGTH])
        return P.readTensors(reply.outputs, rest, 'outputs', Number.MAX_SAFE_INTEGER)
      } catch (e) {
        if (e instanceof P.ProtocolError) {
          throw fail('RemoteError', `${what}: the server's answer is malformed: ${e.message}`, { status: r.status })
        }
        throw e
      }
    },
    close() {
      agent.destroy()
    },
  }
}

/**
 * A model served by an Open Inference Protocol (KServe v2) server — Triton, KServe, or
 * `torch.oip.serve` — called as a ScriptModule is. Errors: `InvalidArg`, `ShapeMismatch`,
 * `DTypeMismatch` (inputs checked against the metadata before any request), `RemoteError`
 * (the server's 4xx/5xx, with `status`), `Unavailable`, `ModelNotFound`, `Aborted`, `Disposed`.
 */
class RemoteModule {
  #transport
  #state
  #disposed = false

  /**
   * Use `await RemoteModule.load(url, modelName, options)`.
   * @private
   */
  constructor(token, state) {
    if (token !== LOAD) {
      throw fail('InvalidArg', 'RemoteModule: use `await torch().RemoteModule.load(url, modelName, options)`')
    }
    this.#transport = state.transport
    this.#state = {
      ...state,
      inputs: Object.freeze(state.inputs.map(Object.freeze)),
      outputs: Object.freeze(state.outputs.map(Object.freeze)),
    }
  }

  /**
   * The model's name on the server.
   * @returns {string}
   */
  get name() {
    return this.#state.name
  }
  /**
   * The version asked for (undefined: the server's choice).
   * @returns {string | undefined}
   */
  get version() {
    return this.#state.version
  }
  /**
   * The server the module calls: `http://host:port` or `grpc://host:port`.
   * @returns {string}
   */
  get url() {
    return this.#state.url
  }
  /**
   * The model's inputs, in the order positional `forward` arguments take.
   * @returns {readonly TensorMetadata[]}
   */
  get inputs() {
    return this.#state.inputs
  }
  /**
   * The model's outputs.
   * @returns {readonly TensorMetadata[]}
   */
  get outputs() {
    return this.#state.outputs
  }

  /**
   * Connects to `modelName` at `url` (`http://host:port`; gRPC: `host:port` with `protocol: 'grpc'`, or
   * `grpc://host:port`) and reads its metadata. Errors: `Unavailable` (unreachable, not ready, no answer within
   * `timeoutMs`), `ModelNotFound` (an unknown model or version), `Aborted`.
   * @param {string} url
   * @param {string} modelName
   * @param {RemoteModuleOptions} [options]
   * @returns {Promise<RemoteModule>}
   */
  static async load(url, modelName, options) {
    const o = readOptions(options, LOAD_OPTIONS, 'RemoteModule.load')
    if (typeof modelName !== 'string' || !modelName) {
      throw fail('InvalidArg', `RemoteModule.load: modelName: expected a non-empty string, got ${describe(modelName)}`)
    }
    const protocol = o.protocol ?? (/^grpc:\/\//i.test(String(url)) ? 'grpc' : 'http')
    const version = o.version === undefined ? undefined : String(o.version)
    const what = `RemoteModule.load(${modelName})`
    let transport
    let shown
    if (protocol === 'grpc') {
      const target = String(url).replace(/^grpc:\/\//i, '')
      if (!/^[\w.-]+:\d+$|^\[[\da-f:]+\]:\d+$/i.test(target)) {
        throw fail(
          'InvalidArg',
          `RemoteModule.load: url: expected host:port or grpc://host:port for gRPC, got ${describe(url)}`,
        )
      }
      transport = require('./grpc').clientTransport(target, {
        name: modelName,
        version,
        headers: o.headers,
        timeoutMs: o.timeoutMs,
      })
      shown = `grpc://${target}`
    } else {
      let parsed
      try {
        parsed = new URL(/^[a-z]+:\/\//i.test(String(url)) ? String(url) : `http://${url}`)
      } catch {
        throw fail('InvalidArg', `RemoteModule.load: url: expected http://host:port, got ${describe(url)}`)
      }
      if (!['http:', 'https:'].includes(parsed.protocol)) {
        throw fail('InvalidArg', `RemoteModule.load: url: expected http:// or https://, got ${parsed.protocol}`)
      }
      transport = httpTransport(parsed, modelName, {
        version,
        headers: { ...(o.headers ?? {}) },
        timeoutMs: o.timeoutMs,
        binary: o.binary !== false,
      })
      shown = parsed.origin
    }
    const common = { timeoutMs: o.timeoutMs, signal: o.signal }
    try {
      const m = await transport.metadata(
        common,
        what,
        `the server has no model '${modelName}'${version ? ` version '${version}'` : ''}`,
      )
      if (!(await transport.ready(common, what))) throw fail('Unavailable', `${what}: the model is not ready`)
      const specs = (list) =>
        (Array.isArray(list) ? list : []).map((x) => ({
          name: String(x.name),
          datatype: String(x.datatype),
          shape: Array.isArray(x.shape) ? x.shape.map(Number) : [],
        }))
      return new RemoteModule(LOAD, {
        name: modelName,
        version,
        inputs: specs(m.inputs),
        outputs: specs(m.outputs),
        url: shown,
        transport,
      })
    } catch (e) {
      transport.close()
      throw e
    }
  }

  /** The inputs in metadata order, from positional tensors or one object keyed by name. */
  #arrange(args) {
    const named =
      args.length === 1 && args[0] !== null && typeof args[0] === 'object' && !(args[0] instanceof torch().Tensor)
    if (named) {
      const given = args[0]
      for (const k of Object.keys(given)) {
        if (!this.inputs.some((s) => s.name === k)) {
          throw fail(
            'InvalidArg',
            `RemoteModule.forward: unknown input '${k}'; the model takes ${this.inputs.map((s) => s.name).join(', ')}`,
          )
        }
      }
      return this.inputs.map((s) => {
        if (!(s.name in given)) throw fail('InvalidArg', `RemoteModule.forward: input '${s.name}' is missing`)
        return given[s.name]
      })
    }
    if (args.length !== this.inputs.length) {
      throw fail(
        'InvalidArg',
        `RemoteModule.forward: the model takes ${this.inputs.length} input(s) ` +
          `(${this.inputs.map((s) => s.name).join(', ')}), got ${args.length}`,
      )
    }
    return args
  }

  /** Checks each tensor against its metadata entry: dtype, rank, fixed sizes. */
  #check(tensors) {
    tensors.forEach((t, i) => {
      const s = this.inputs[i]
      if (!(t instanceof torch().Tensor)) {
        throw fail('InvalidArg', `RemoteModule.forward: input '${s.name}': expected a Tensor, got ${describe(t)}`)
      }
      if (P.DATATYPE[t.dtype] !== s.datatype) {
        throw fail(
          'DTypeMismatch',
          `RemoteModule.forward: input '${s.name}' is ${P.DATATYPE[t.dtype] ?? t.dtype}, the model takes ${s.datatype}`,
        )
      }
      const fits = s.shape.length === t.shape.length && s.shape.every((d, j) => d === -1 || d === t.shape[j])
      if (!fits) {
        throw fail(
          'ShapeMismatch',
          `RemoteModule.forward: input '${s.name}' has shape [${t.shape}], the model takes [${s.shape}] (-1: any size)`,
        )
      }
    })
  }

  /**
   * Runs the model remotely: positional tensors (in metadata order), or `{inputName: tensor}`; a last
   * `{signal, timeoutMs}` is the call's options. One output as a Tensor, several keyed by name.
   * @param {Tensor[] | [...Tensor[], RemoteCallOptions] | [Record<string, Tensor>]
   *   | [Record<string, Tensor>, RemoteCallOptions]} args
   * @returns {Promise<Tensor | Record<string, Tensor>>}
   */
  async forward(...args) {
    const last = args[args.length - 1]
    const isOptions =
      args.length > 1 &&
      last !== null &&
      typeof last === 'object' &&
      !(last instanceof torch().Tensor) &&
      Object.keys(last).length > 0 &&
      Object.keys(last).every((k) => CALL_OPTIONS.keys.includes(k))
    const o = isOptions ? readOptions(args.pop(), CALL_OPTIONS, 'RemoteModule.forward') : {}
    if (this.#disposed) throw fail('Disposed', 'this RemoteModule was disposed; it can no longer be used')
    const tensors = this.#arrange(args)
    this.#check(tensors)
    const what = `RemoteModule.forward(${this.name})`
    const outs = await this.#transport.infer(
      this.inputs,
      tensors,
      this.outputs,
      { timeoutMs: o.timeoutMs, signal: o.signal },
      what,
    )
    if (outs.length === 1) return outs[0].tensor
    return Object.fromEntries(outs.map((x) => [x.name, x.tensor]))
  }

  /** Closes its connections; later calls reject with `Disposed`. */
  dispose() {
    this.#disposed = true
    this.#transport.close()
  }

  get isDisposed() {
    return this.#disposed
  }

  [Symbol.dispose]() {
    this.dispose()
  }
}
const LOAD = Symbol('load')

module.exports = { RemoteModule }

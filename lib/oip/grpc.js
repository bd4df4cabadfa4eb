// @ts-check
'use strict'
// The protocol's gRPC form (`inference.GRPCInferenceService`, grpc_predict_v2.proto) with
// @grpc/grpc-js: a client transport for RemoteModule and a server for torch.oip.serve's
// `grpcPort`. Tensors travel as raw bytes (`raw_input_contents` / `raw_output_contents`), as
// Triton's clients send them; typed `contents` are read too.
const path = require('node:path')
const P = require('./protocol')
const { codedError } = require('../errors')

/** The optional peer dependencies gRPC needs (package.json `peerDependenciesMeta`). */
const GRPC_PACKAGES = ['@grpc/grpc-js', '@grpc/proto-loader']

/**
 * `name`, an optional peer dependency: an app that uses gRPC installs it. Absent, a coded error
 * names the packages to install (the HTTP form needs neither).
 */
function optionalPeer(name) {
  try {
    return require(name)
  } catch (/** @type {any} */ e) {
    if (e?.code !== 'MODULE_NOT_FOUND' || !String(e.message).includes(name)) throw e
    throw codedError(
      'MissingDependency',
      `the Open Inference Protocol's gRPC form needs ${name}, which is not ` +
        `installed: run \`npm install ${GRPC_PACKAGES.join(' ')}\` in your app (HTTP needs neither)`,
    )
  }
}

/** @type {{grpc: any, Service: any} | null} */
let loaded = null
/** grpc-js and the service definition, loaded on first use (only gRPC users pay for them). */
function grpcService() {
  if (!loaded) {
    const grpc = optionalPeer('@grpc/grpc-js')
    const loader = optionalPeer('@grpc/proto-loader')
    const definition = loader.loadSync(path.join(__dirname, 'grpc_predict_v2.proto'), {
      keepCase: true,
      longs: Number,
      enums: String,
      defaults: true,
      oneofs: true,
    })
    loaded = { grpc, Service: grpc.loadPackageDefinition(definition).inference.GRPCInferenceService }
  }
  return loaded
}

/** The largest message a protobuf length can hold (tritonclient's MAX_GRPC_MESSAGE_SIZE). */
const MAX_MESSAGE = 2 ** 31 - 1

/** The typed-contents field of each datatype (when a peer sends `contents`, not raw bytes). */
const CONTENTS = {
  BOOL: 'bool_contents',
  UINT8: 'uint_contents',
  INT8: 'int_contents',
  INT16: 'int_contents',
  INT32: 'int_contents',
  INT64: 'int64_contents',
  FP32: 'fp32_contents',
  FP64: 'fp64_contents',
}

/** Tensors from a request's inputs or a response's outputs: raw bytes in order, else contents. */
function readTensors(entries, raw, what, maxElements) {
  if (raw.length && raw.length !== entries.length) {
    throw new P.ProtocolError(`${what}: ${entries.length} tensors but ${raw.length} raw contents`)
  }
  return entries.map((e, i) => {
    const label = `${what.replace(/s$/, '')} '${e.name}'`
    P.dtypeOf(e.datatype, label)
    const n = P.elementCount(e.shape, label, maxElements)
    if (raw.length) {
      const bytes = raw[i]
      if (bytes.length !== n * P.ITEM_BYTES[e.datatype]) {
        throw new P.ProtocolError(
          `${label}: ${bytes.length} raw bytes, shape ${JSON.stringify(e.shape)} of ` +
            `${e.datatype} needs ${n * P.ITEM_BYTES[e.datatype]}`,
        )
      }
      return {
        name: e.name,
        tensor: P.readTensors(
          [{ name: e.name, datatype: e.datatype, shape: e.shape, parameters: { binary_data_size: bytes.length } }],
          bytes,
          what,
          maxElements,
        )[0].tensor,
      }
    }
    const field = CONTENTS[e.datatype]
    if (!field) throw new P.ProtocolError(`${label}: ${e.datatype} must be sent as raw contents`)
    const data = e.contents?.[field] ?? []
    return P.readTensors(
      [{ name: e.name, datatype: e.datatype, shape: e.shape, data }],
      Buffer.alloc(0),
      what,
      maxElements,
    )[0]
  })
}

/** gRPC status → our error code. */
function errorOf(e, what, notFound) {
  const { grpc } = grpcService()
  const code = e.code
  const extra = { status: code }
  const withCode = (c, m) => Object.assign(codedError(c, m), extra)
  if (code === grpc.status.CANCELLED) return withCode('Aborted', `${what}: aborted`)
  if (code === grpc.status.UNAVAILABLE || code === grpc.status.DEADLINE_EXCEEDED) {
    return withCode('Unavailable', `${what}: ${e.details || e.message}`)
  }
  const { NOT_FOUND, INVALID_ARGUMENT, UNAVAILABLE } = grpc.status
  if (notFound && (code === NOT_FOUND || code === INVALID_ARGUMENT || code === UNAVAILABLE)) {
    return withCode('ModelNotFound', `${what}: ${notFound}: ${e.details}`)
  }
  return withCode('RemoteError', `${what}: the server answered ${grpc.status[code] ?? code}: ${e.details || e.message}`)
}

/**
 * A client transport over gRPC for RemoteModule: `metadata()`, `ready()`, `infer(...)`,
 * `close()`; every call bounded by `timeoutMs` (a deadline) and `signal` (cancel).
 */
function clientTransport(target, { name, version, headers, timeoutMs }) {
  const { grpc, Service } = grpcService()
  // grpc-js refuses replies over 4 MiB by default (RESOURCE_EXHAUSTED), which a batch of
  // outputs passes easily; tritonclient lifts both limits to INT32_MAX, as Triton's server does.
  const client = new Service(target, grpc.credentials.createInsecure(), {
    'grpc.max_receive_message_length': MAX_MESSAGE,
    'grpc.max_send_message_length': MAX_MESSAGE,
  })
  const metadata = new grpc.Metadata()
  for (const [k, v] of Object.entries(headers ?? {})) metadata.set(k, String(v))
  const call = (method, request, o, what, notFound) =>
    new Promise((resolve, reject) => {
      if (o.signal?.aborted) return reject(codedError('Aborted', `${what}: aborted`))
      const ms = o.timeoutMs ?? timeoutMs
      const options = ms === undefined ? {} : { deadline: Date.now() + ms }
      const c = client[method](request, metadata, options, (err, reply) => {
        o.signal?.removeEventListener('abort', cancel)
        if (err) reject(errorOf(err, what, notFound))
        else resolve(reply)
      })
      const cancel = () => c.cancel()
      o.signal?.addEventListener('abort', cancel, { once: true })
    })
  const v = version ?? ''
  return {
    async metadata(o, what, notFound) {
      const m = await call('ModelMetadata', { name, version: v }, o, what, notFound)
      return { inputs: m.inputs, outputs: m.outputs }
    },
    async ready(o, what) {
      return (await call('ModelReady', { name, version: v }, o, what)).ready
    },
    async infer(inputs, tensors, outputs, o, what) {
      const request = {
        model_name: name,
        model_version: v,
        inputs: tensors.map((t, i) => ({ name: inputs[i].name, datatype: P.DATATYPE[t.dtype], shape: t.shape })),
        outputs: outputs.map((s) => ({ name: s.name })),
        raw_input_contents: tensors.map((t) =>
          Buffer.from(P.tensorBytes(t.device === 'cpu' ? t.contiguous() : t.cpu().contiguous())),
        ),
      }
      const reply = await call('ModelInfer', request, o, what)
      return readTensors(reply.outputs, reply.raw_output_contents ?? [], 'outputs', Number.MAX_SAFE_INTEGER)
    },
    close() {
      client.close()
    },
  }
}

/** Starts a gRPC server for `handler` (router()'s) on host:port; resolves to {port, close()}. */
async function serveGrpc(handler, { host, port, maxBodyBytes }) {
  const { grpc, Service } = grpcService()
  const server = new grpc.Server({ 'grpc.max_receive_message_length': maxBodyBytes })
  const fail = (cb) => (e) => {
    const status =
      e instanceof P.ProtocolError
        ? e.status === 404
          ? grpc.status.NOT_FOUND
          : e.status === 503
            ? grpc.status.UNAVAILABLE
            : e.status >= 500
              ? grpc.status.INTERNAL
              : grpc.status.INVALID_ARGUMENT
        : e?.code === 'QueueFull'
          ? grpc.status.RESOURCE_EXHAUSTED
          : ['InvalidArg', 'ShapeMismatch', 'DTypeMismatch'].includes(e?.code)
            ? grpc.status.INVALID_ARGUMENT
            : grpc.status.INTERNAL
    cb({ code: status, details: String(e?.message ?? e) })
  }
  const model = async (name, version) => {
    const m = await handler.lookup(name)
    if (version && version !== m.version) {
      throw new P.ProtocolError(`model '${name}' has no version '${version}'; it has ${m.version}`, 404)
    }
    return m
  }
  const unary = (body) => (call, cb) => {
    body(call.request).then((r) => cb(null, r), fail(cb))
  }
  server.addService(Service.service, {
    ServerLive: unary(async () => ({ live: true })),
    ServerReady: unary(async () => ({ ready: true })),
    ServerMetadata: unary(async () => ({
      name: 'torch-node',
      version: require('../../package.json').version,
      extensions: ['model_configuration'],
    })),
    ModelReady: unary(async (r) => ({ ready: Boolean(await model(r.name, r.version)) })),
    ModelMetadata: unary(async (r) => {
      const m = await model(r.name, r.version)
      return {
        name: m.name,
        versions: [m.version],
        platform: m.metadata.platform,
        inputs: m.metadata.inputs,
        outputs: m.metadata.outputs,
      }
    }),
    ModelConfig: unary(async (r) => ({ config: (await model(r.name, r.version)).config })),
    ModelInfer: unary(async (r) => {
      const m = await model(r.model_name, r.model_version)
      const given = readTensors(r.inputs, r.raw_input_contents, 'inputs', maxBodyBytes)
      const outputs = await handler.run(
        m,
        given,
        r.outputs.map((o) => ({ name: o.name })),
      )
      return {
        model_name: m.name,
        model_version: m.version,
        id: r.id,
        outputs: outputs.map(({ name, tensor }) => ({ name, datatype: P.DATATYPE[tensor.dtype], shape: tensor.shape })),
        raw_output_contents: outputs.map(({ tensor }) =>
          Buffer.from(P.tensorBytes((tensor.device === 'cpu' ? tensor : tensor.cpu()).contiguous())),
        ),
      }
    }),
  })
  const bound = await new Promise((resolve, reject) => {
    server.bindAsync(`${host}:${port}`, grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p)))
  })
  return {
    port: bound,
    close: () => new Promise((/** @type {(v?: void) => void} */ resolve) => server.tryShutdown(() => resolve())),
  }
}

module.exports = { clientTransport, serveGrpc }

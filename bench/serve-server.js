'use strict'
// One Node service of `npm run bench:serve` (bench/serve.js starts it as a child, one at a time):
// Express 5 answering ResNet-18 requests on 127.0.0.1, a free port (it prints
// `{"port": N, ...}` on stdout once listening).
//
//   node bench/serve-server.js --mode unbatched|batched-fp32|batched-bf16|ort
//        [--threads 2] [--instances 1] [--max-batch 8] [--max-delay-ms 2] [--max-queue 256]
//
// Routes (the same in bench/serve_app.py, the FastAPI service):
//   POST /v1/tensor   application/octet-stream, one float32 [1, 3, 224, 224] (602112 bytes)
//   POST /v1/image    image/* (JPEG, PNG): torch.image.load(body, {resize: 256, centerCrop: 224,
//                     mean: 'imagenet'}), then the model
//   both answer {"index": top-1 class, "logit": its logit}; QueueFull (the Batcher's queue is
//   full) answers 503 with Retry-After, as examples/express-server.js does.
//   GET  /_bench/stats[?reset=1]  event-loop lag since the last reset (perf_hooks
//                     monitorEventLoopDelay, measured in this process), `busy` (requests whose
//                     work has not finished, answered or not: the bench waits for 0 between
//                     runs), the Batcher's and the executor's stats; reset=1 starts a new window.
//   POST /_bench/batcher?maxQueue=N  replaces the Batcher by one with that maxQueue (the
//                     overload run: the same process, so its RSS compares with the earlier runs).
//
// Modes: unbatched = `await model.forward(x)` per request on a plain ScriptModule.load;
// batched-fp32 = ScriptModule.load(path, {optimize: 'fuse', example}) + torch.Batcher;
// batched-bf16 = {optimize: true, dtype: 'bfloat16', channelsLast: true} + torch.Batcher;
// ort = onnxruntime-node's InferenceSession on models/resnet18.onnx, `await session.run` per
// request (images are pre-processed by torch.image.load as in the other modes).
const path = require('node:path')
const { monitorEventLoopDelay } = require('node:perf_hooks')
const express = require('express')
const torch = require('..')
const { options } = require('./cli')

const ROOT = path.join(__dirname, '..')
const MODEL = path.join(ROOT, 'models', 'resnet18_traced.pt')
const ONNX_MODEL = path.join(ROOT, 'models', 'resnet18.onnx')
const SHAPE = [1, 3, 224, 224]
const TENSOR_BYTES = 3 * 224 * 224 * 4
const PREPROCESS = { resize: 256, centerCrop: 224, mean: 'imagenet' }
// monitorEventLoopDelay records the whole interval between its timer's ticks (≈ resolution when
// the loop is free); the lag is what exceeds the resolution.
const LAG_RESOLUTION_MS = 10

const opt = options(['mode', 'threads', 'instances', 'max-batch', 'max-delay-ms', 'max-queue'])
const MODES = ['unbatched', 'batched-fp32', 'batched-bf16', 'ort']
if (!MODES.includes(opt.mode)) throw new Error(`--mode: expected one of ${MODES.join(', ')}, got ${opt.mode}`)
const threads = Number(opt.threads ?? torch.getNumThreads())
const batchOptions = {
  maxBatchSize: Number(opt['max-batch'] ?? 8),
  maxDelayMs: Number(opt['max-delay-ms'] ?? 2),
  maxQueue: Number(opt['max-queue'] ?? 256),
}

const msSince = (t0) => Number(process.hrtime.bigint() - t0) / 1e6

function httpError(status, code, message) {
  return Object.assign(new Error(message), { status, code })
}

/** Index and value of the largest of the first row's logits. */
function top1(logits) {
  let index = 0
  for (let i = 1; i < logits.length; i++) if (logits[i] > logits[index]) index = i
  return { index, logit: logits[index] }
}

/** The request body as a Float32Array over its own bytes (copied only if misaligned). */
function floatsOf(body) {
  if (!Buffer.isBuffer(body) || body.length !== TENSOR_BYTES) {
    throw httpError(
      400,
      'InvalidArg',
      `expected ${TENSOR_BYTES} bytes (float32 [${SHAPE}]), got ${Buffer.isBuffer(body) ? body.length : 'no body'}`,
    )
  }
  const aligned = body.byteOffset % 4 === 0 ? body : Buffer.from(body)
  return new Float32Array(aligned.buffer, aligned.byteOffset, TENSOR_BYTES / 4)
}

/**
 * The model behind the routes: `fromTensor(tensor)` and `fromFloats(Float32Array)` resolve to
 * the top-1 of one image, `stats()` says what the batcher did, `replaceBatcher(options)`.
 */
async function loadModel(mode) {
  const t0 = process.hrtime.bigint()
  if (mode === 'ort') {
    const ort = require('onnxruntime-node')
    const session = await ort.InferenceSession.create(ONNX_MODEL, {
      intraOpNumThreads: threads,
      interOpNumThreads: 1,
      executionMode: 'sequential',
      graphOptimizationLevel: 'all',
    })
    const [inputName] = session.inputNames
    const [outputName] = session.outputNames
    const runFloats = async (floats) => {
      const y = (await session.run({ [inputName]: new ort.Tensor('float32', floats, SHAPE) }))[outputName]
      const answer = top1(y.data)
      y.dispose?.()
      return answer
    }
    for (let i = 0; i < 3; i++) await runFloats(new Float32Array(TENSOR_BYTES / 4))
    return {
      loadMs: msSince(t0),
      info: { onnxruntime: require('onnxruntime-node/package.json').version, intraOpNumThreads: threads },
      fromFloats: runFloats,
      fromTensor: (x) => runFloats(x.toTypedArray()),
      stats: () => null,
    }
  }

  // 'fuse' fuses the graph for the example's shape only: other batch sizes run unfused (at
  // plain-module speed). Under load the Batcher's batches are mostly full, so fuse for those.
  const example = torch.zeros([batchOptions.maxBatchSize, ...SHAPE.slice(1)])
  const loadOptions =
    mode === 'batched-fp32'
      ? { optimize: 'fuse', example }
      : mode === 'batched-bf16'
        ? { optimize: true, dtype: 'bfloat16', channelsLast: true }
        : {}
  const module = await torch.ScriptModule.load(MODEL, loadOptions)
  const loadMs = msSince(t0)
  // Every batch size the Batcher can form, twice: TorchScript's profiling executor specializes
  // a graph after its first calls per shape, which are slow; a service warms up before it listens.
  const sizes = mode === 'unbatched' ? [1] : Array.from({ length: batchOptions.maxBatchSize }, (_, i) => i + 1)
  for (let pass = 0; pass < 2; pass++) {
    for (const b of sizes) {
      const x = torch.zeros([b, 3, 224, 224])
      ;(await module.forward(x)).dispose()
      x.dispose()
    }
  }
  const warmMs = msSince(t0) - loadMs
  let batcher = mode === 'unbatched' ? null : new torch.Batcher(module, batchOptions)
  const runTensor = async (x) => {
    const y = batcher ? await batcher.run(x) : await module.forward(x)
    try {
      return top1(y.toTypedArray())
    } finally {
      y.dispose()
    }
  }
  return {
    loadMs,
    info: {
      loadOptions: Object.keys(loadOptions).length
        ? { ...loadOptions, example: loadOptions.example && `zeros [${example.shape}]` }
        : {},
      warmMs,
      batch: batcher && batchOptions,
    },
    fromTensor: runTensor,
    fromFloats: async (floats) => {
      const x = torch.fromBuffer(floats, SHAPE)
      try {
        return await runTensor(x)
      } finally {
        x.dispose()
      }
    },
    stats: () => batcher && batcher.stats(),
    async replaceBatcher(options) {
      if (!batcher) throw httpError(400, 'InvalidArg', `mode ${mode} has no Batcher`)
      const old = batcher
      batcher = new torch.Batcher(module, { ...batchOptions, ...options })
      await old.close()
      return batcher.stats()
    },
  }
}

function createApp(model) {
  const app = express()
  const lag = monitorEventLoopDelay({ resolution: LAG_RESOLUTION_MS })
  lag.enable()
  let busy = 0
  const answer = (compute) => async (req, res, next) => {
    busy++
    try {
      res.json(await compute(req))
    } catch (e) {
      next(e)
    } finally {
      busy--
    }
  }
  app.post(
    '/v1/tensor',
    express.raw({ type: 'application/octet-stream', limit: TENSOR_BYTES }),
    answer((req) => model.fromFloats(floatsOf(req.body))),
  )
  app.post(
    '/v1/image',
    express.raw({ type: 'image/*', limit: 16 * 2 ** 20 }),
    answer(async (req) => {
      if (!Buffer.isBuffer(req.body) || req.body.length === 0)
        throw httpError(400, 'InvalidImage', 'send an image body (image/*)')
      const x = await torch.image.load(req.body, PREPROCESS)
      try {
        return await model.fromTensor(x)
      } finally {
        x.dispose()
      }
    }),
  )
  app.get('/_bench/stats', (req, res) => {
    const ms = (ns) => Math.max(0, ns / 1e6 - LAG_RESOLUTION_MS)
    const stats = {
      busy,
      eventLoopLag: lag.count
        ? { p50: ms(lag.percentile(50)), p99: ms(lag.percentile(99)), max: ms(lag.max), samples: lag.count }
        : null,
      batcher: model.stats(),
      executor: torch.executorStats(),
      memory: torch.memory(),
    }
    if (req.query.reset) lag.reset()
    res.json(stats)
  })
  app.post(
    '/_bench/batcher',
    answer((req) => model.replaceBatcher({ maxQueue: Number(req.query.maxQueue) })),
  )
  // eslint-disable-next-line no-unused-vars
  app.use((err, req, res, next) => {
    let status = err.status || err.statusCode
    if (!status && err.code === 'QueueFull') {
      status = 503
      res.set('Retry-After', '1')
    }
    res
      .status(status || 500)
      .json({ error: { code: err.code || 'Internal', message: String(err.message).split('\n')[0] } })
  })
  return app
}

async function main() {
  torch.setNumThreads(threads)
  if (opt.instances) torch.setInstances(Number(opt.instances))
  const model = await loadModel(opt.mode)
  const server = await new Promise((resolve, reject) => {
    const s = createApp(model).listen(0, '127.0.0.1', (err) => (err ? reject(err) : resolve(s)))
  })
  // The bench stops a service between runs; nothing it holds needs a graceful close.
  process.on('SIGTERM', () => process.exit(0))
  process.on('SIGINT', () => process.exit(0))
  console.log(
    JSON.stringify({
      port: server.address().port,
      mode: opt.mode,
      loadMs: model.loadMs,
      threads: torch.getNumThreads(),
      instances: torch.getInstances(),
      ...model.info,
    }),
  )
}

main().catch((e) => {
  console.log(JSON.stringify({ error: `${e.code ? `${e.code}: ` : ''}${String(e.message).split('\n')[0]}` }))
  process.exit(1)
})

'use strict'
// The Open Inference Protocol against real peers (issue 20): torch.RemoteModule calling NVIDIA
// Triton 2.51 (PyPI's nvidia-pytriton wheel, the ResNet-18 and two multi-tensor fixtures served
// by its Python backend with dynamic batching), and Triton's own clients — tritonclient (HTTP
// and gRPC) and perf_analyzer — calling torch.oip.serve in this process. Everything runs from
// .triton/ (tools/triton-env.js); skipped, with the setup's reason, where it is not installed.
const { describe, test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const torch = require('..')
const { startTriton, pythonWithClient, perfAnalyzer } = require('../tools/triton-env')
const {
  runChild,
  tritonStats,
  tritonStatsAfter,
  tritonSuite,
  writeTritonTestModels,
  assertExited0,
} = require('./helpers')

const MODELS = path.join(__dirname, '..', 'models')
const RESNET = path.join(MODELS, 'resnet18_traced.pt')
const TEXT = path.join(MODELS, 'fixtures', 'text_encoder.pt') // (ids int64, mask bool) -> (hidden, pooled)
const IMAGES = path.join(MODELS, 'golden', 'resnet18_input_b8.f32') // 8 preprocessed images
const OUTPUTS = path.join(MODELS, 'golden', 'resnet18_output_b8.f32') // Python's logits for them
const TOLERANCE = 1e-4
const CONCURRENT = 16

/** max |a - b| after checking the shapes agree. */
function maxDiff(a, b, what) {
  assert.deepEqual(a.shape, b.shape, `${what}: shape`)
  return a.to('float64').sub(b.to('float64')).abs().max().item()
}

function assertClose(a, b, what, tolerance = TOLERANCE) {
  const d = maxDiff(a, b, what)
  assert.ok(d <= tolerance, `${what}: max |difference| ${d} > ${tolerance}`)
}

/** The 8 golden images as one [8, 3, 224, 224] tensor (a copy: fromBuffer borrows). */
function images() {
  return torch.fromBuffer(new Uint8Array(fs.readFileSync(IMAGES)), [8, 3, 224, 224], { dtype: 'float32' })
}

/**
 * Resolves once every thread of `pid` is stopped. A stop signal takes effect thread by thread
 * as each next enters the kernel; on a busy VM a thread's vCPU may be off the host's CPU for
 * a while, and Triton once answered a request after kill() had returned.
 */
async function allThreadsStopped(pid, timeoutMs = 10_000) {
  const state = (tid) => {
    try {
      // /proc/<pid>/task/<tid>/stat: "tid (comm) S ...", comm may hold spaces.
      return fs.readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8').replace(/^.*\) /s, '')[0]
    } catch {
      return 'T' // the thread has exited
    }
  }
  const end = Date.now() + timeoutMs
  for (;;) {
    const running = fs.readdirSync(`/proc/${pid}/task`).filter((tid) => state(tid) !== 'T')
    if (!running.length) return
    if (Date.now() > end)
      throw new Error(`threads ${running.join(', ')} of ${pid} still run ${timeoutMs} ms after SIGSTOP`)
    await new Promise((resolve) => setTimeout(resolve, 5))
  }
}

/** Requests that reached the model (succeeded or failed in it). */
const reached = (s) => s.inference_stats.success.count + s.inference_stats.fail.count

const { env, skip } = tritonSuite(RESNET)

if (skip) {
  test.skip(`Open Inference Protocol peers: ${skip}`)
} else {
  describe(`RemoteModule against Triton ${env.tritonserverVersion} (Python backend, torch ${env.torch})`, () => {
    let dir, server, resnet, encoder, x8, want8
    // The three ways RemoteModule reaches a server; url() reads the server started in before().
    const transports = [
      ['HTTP binary', () => server.httpUrl, {}],
      ['HTTP JSON', () => server.httpUrl, { binary: false }],
      ['gRPC', () => server.grpcUrl, { protocol: 'grpc' }],
    ]
    const load = (name, [, url, options], extra) =>
      torch.RemoteModule.load(url(), name, { timeoutMs: 120_000, ...options, ...extra })

    before(async () => {
      resnet = await torch.ScriptModule.load(RESNET)
      encoder = await torch.ScriptModule.load(TEXT)
      x8 = images()
      want8 = resnet.forwardSync(x8)
      dir = fs.mkdtempSync(path.join(os.tmpdir(), 'torch-node-oip-peers-'))
      const repo = writeTritonTestModels(path.join(dir, 'repo'), {
        resnet: RESNET,
        twoIo: env.fixtures.twoIo,
        textEncoder: TEXT,
      })
      server = await startTriton({ repo, timeoutMs: 180_000 })
    })
    after(async () => {
      if (server) await server.stop()
      if (dir) fs.rmSync(dir, { recursive: true, force: true })
    })

    for (const transport of transports) {
      test(
        `ResNet-18 over ${transport[0]}: Triton's metadata; outputs equal the local forward`,
        { timeout: 180_000 },
        async () => {
          const m = await load('resnet18', transport)
          try {
            assert.deepEqual(m.inputs, [{ name: 'INPUT__0', datatype: 'FP32', shape: [-1, 3, 224, 224] }])
            assert.deepEqual(m.outputs, [{ name: 'OUTPUT__0', datatype: 'FP32', shape: [-1, 1000] }])
            const x = x8.narrow(0, 0, 2).contiguous()
            assertClose(await m.forward(x), want8.narrow(0, 0, 2), `${transport[0]} positional`)
            assertClose(
              await m.forward({ INPUT__0: x8.narrow(0, 5, 1).contiguous() }),
              want8.narrow(0, 5, 1),
              `${transport[0]} named`,
            )
          } finally {
            m.dispose()
          }
        },
      )
    }

    for (const transport of [transports[0], transports[2]]) {
      test(
        `${CONCURRENT} concurrent forwards over ${transport[0]}: Triton's dynamic batcher merges them`,
        { timeout: 180_000 },
        async (t) => {
          const m = await load('resnet18', transport)
          try {
            const before = await tritonStats(server, 'resnet18')
            const ys = await Promise.all(
              Array.from({ length: CONCURRENT }, (_, i) => m.forward(x8.narrow(0, i % 8, 1).contiguous())),
            )
            ys.forEach((y, i) => assertClose(y, want8.narrow(0, i % 8, 1), `concurrent ${i}`))
            const now = await tritonStatsAfter(server, 'resnet18', before, CONCURRENT)
            const inferences = now.inference_count - before.inference_count
            const executions = now.execution_count - before.execution_count
            t.diagnostic(
              `${inferences} inferences in ${executions} executions; batch sizes so far: ` +
                now.batch_stats.map((b) => `${b.batch_size}×${b.compute_infer.count}`).join(' '),
            )
            assert.equal(inferences, CONCURRENT, JSON.stringify(now))
            assert.ok(executions < inferences, `${inferences} inferences in ${executions} executions: nothing merged`)
          } finally {
            m.dispose()
          }
        },
      )
    }

    test(
      'two inputs, two outputs (two_io): positional and named forward, outputs keyed by name',
      { timeout: 120_000 },
      async () => {
        const a = torch.rand([2, 3])
        const b = torch.rand([2, 3])
        for (const transport of transports) {
          const m = await load('two_io', transport)
          try {
            assert.deepEqual(
              m.inputs.map((s) => [s.name, s.datatype, s.shape]),
              [
                ['INPUT__0', 'FP32', [-1, -1]],
                ['INPUT__1', 'FP32', [-1, -1]],
              ],
            )
            assert.deepEqual(
              m.outputs.map((s) => s.name),
              ['OUTPUT__0', 'OUTPUT__1'],
            )
            const positional = await m.forward(a, b)
            assert.deepEqual(Object.keys(positional), ['OUTPUT__0', 'OUTPUT__1'])
            assertClose(positional.OUTPUT__0, a.add(b), `${transport[0]} x + y`, 0)
            assertClose(positional.OUTPUT__1, a.mul(b), `${transport[0]} x * y`, 0)
            // Named: the object's key order does not matter, the metadata's does.
            const named = await m.forward({ INPUT__1: b, INPUT__0: a.mul(2) })
            assertClose(named.OUTPUT__0, a.mul(2).add(b), `${transport[0]} named`, 0)
          } finally {
            m.dispose()
          }
        }
      },
    )

    test("tensors past gRPC's default 4 MiB message limit, both ways", { timeout: 120_000 }, async () => {
      // 6 MB per tensor: 12 MB requests and replies (grpc-js refused replies over 4 MiB).
      const a = torch.rand([1, 1_500_000])
      const b = torch.rand([1, 1_500_000])
      for (const transport of [transports[0], transports[2]]) {
        const m = await load('two_io', transport)
        try {
          const out = await m.forward(a, b)
          assertClose(out.OUTPUT__1, a.mul(b), `${transport[0]} x * y`, 0)
        } finally {
          m.dispose()
        }
      }
    })

    test("INT64 and BOOL inputs (text_encoder): the local forward's tensors", { timeout: 120_000 }, async () => {
      const ids = torch.tensor(
        [
          [3, 5, 7, 0, 0],
          [1, 2, 3, 4, 5],
        ],
        { dtype: 'int64' },
      )
      const mask = torch.tensor([
        [true, true, true, false, false],
        [true, true, true, true, true],
      ])
      const [hidden, pooled] = encoder.forwardSync(ids, mask)
      for (const transport of transports) {
        const m = await load('text_encoder', transport)
        try {
          assert.deepEqual(
            m.inputs.map((s) => s.datatype),
            ['INT64', 'BOOL'],
          )
          const out = await m.forward(ids, mask)
          assertClose(out.OUTPUT__0, hidden, `${transport[0]} hidden`)
          assertClose(out.OUTPUT__1, pooled, `${transport[0]} pooled`)
          const named = await m.forward({ INPUT__0: ids, INPUT__1: mask })
          assertClose(named.OUTPUT__1, pooled, `${transport[0]} named pooled`)
        } finally {
          m.dispose()
        }
      }
    })

    test(
      'inputs that do not fit the metadata fail before any request (ShapeMismatch, DTypeMismatch, InvalidArg)',
      { timeout: 120_000 },
      async () => {
        const before = {
          resnet18: await tritonStats(server, 'resnet18'),
          text_encoder: await tritonStats(server, 'text_encoder'),
        }
        for (const transport of transports) {
          const m = await load('resnet18', transport)
          const enc = await load('text_encoder', transport)
          try {
            // Triton would refuse each of these with a 400 (RemoteError): the codes say our check came first.
            await assert.rejects(m.forward(torch.rand([1, 3, 32, 32])), {
              code: 'ShapeMismatch',
              message: /'INPUT__0' has shape \[1,3,32,32\], the model takes \[-1,3,224,224\]/,
            })
            await assert.rejects(m.forward(torch.rand([3, 224, 224])), { code: 'ShapeMismatch' })
            await assert.rejects(m.forward(torch.rand([1, 3, 224, 224], { dtype: 'float64' })), {
              code: 'DTypeMismatch',
              message: /'INPUT__0' is FP64, the model takes FP32/,
            })
            await assert.rejects(enc.forward(torch.rand([1, 5]), torch.ones([1, 5], { dtype: 'bool' })), {
              code: 'DTypeMismatch',
              message: /'INPUT__0' is FP32, the model takes INT64/,
            })
            await assert.rejects(enc.forward(torch.zeros([1, 5], { dtype: 'int64' })), {
              code: 'InvalidArg',
              message: /takes 2 input/,
            })
            await assert.rejects(enc.forward({ INPUT__0: torch.zeros([1, 5], { dtype: 'int64' }) }), {
              code: 'InvalidArg',
              message: /'INPUT__1' is missing/,
            })
          } finally {
            m.dispose()
            enc.dispose()
          }
        }
        for (const model of ['resnet18', 'text_encoder']) {
          assert.equal(
            reached(await tritonStats(server, model)),
            reached(before[model]),
            `${model}: a request reached Triton`,
          )
        }
      },
    )

    test(
      'what Triton refuses comes back as RemoteError with its status and message',
      { timeout: 120_000 },
      async () => {
        for (const transport of transports) {
          const grpc = transport[0] === 'gRPC'
          const m = await load('resnet18', transport)
          const two = await load('two_io', transport)
          try {
            // Fits the metadata ([-1, 3, 224, 224]) but not the config's max_batch_size 8: Triton's front end says no.
            await assert.rejects(m.forward(torch.zeros([9, 3, 224, 224])), (e) => {
              assert.equal(e.code, 'RemoteError', e.message)
              assert.equal(e.status, grpc ? 3 : 400, e.message) // INVALID_ARGUMENT
              assert.match(e.message, /batch-size must be <= 8/)
              return true
            })
            // Fits the metadata ([-1, -1] each) but not the model: torch raises in the backend's
            // forward (model.py reports the exception's first line), Triton answers INTERNAL.
            await assert.rejects(two.forward(torch.rand([2, 3]), torch.rand([2, 4])), (e) => {
              assert.equal(e.code, 'RemoteError', e.message)
              assert.equal(e.status, grpc ? 13 : 500, e.message)
              assert.match(e.message, /RuntimeError: The following operation failed in the TorchScript interpreter/)
              return true
            })
            // The module stays usable after a refusal.
            assertClose(
              await two.forward(torch.ones([1, 2]), torch.ones([1, 2])).then((o) => o.OUTPUT__0),
              torch.full([1, 2], 2),
              'after an error',
              0,
            )
          } finally {
            m.dispose()
            two.dispose()
          }
        }
      },
    )

    test('an unknown model or version is ModelNotFound, named in the message', { timeout: 60_000 }, async () => {
      for (const transport of [transports[0], transports[2]]) {
        const status = transport[0] === 'gRPC' ? 5 : 404 // NOT_FOUND
        await assert.rejects(
          load('nope', transport),
          (e) => e.code === 'ModelNotFound' && e.status === status && /'nope'/.test(e.message),
        )
        await assert.rejects(
          load('resnet18', transport, { version: '7' }),
          (e) => e.code === 'ModelNotFound' && e.status === status && /'resnet18' version '7'/.test(e.message),
        )
        const m = await load('resnet18', transport, { version: '1' })
        assert.equal(m.version, '1')
        m.dispose()
      }
    })

    test(
      'an AbortSignal ends a forward in flight with Aborted; the module keeps working',
      { timeout: 120_000 },
      async () => {
        for (const transport of [transports[0], transports[2]]) {
          const m = await load('resnet18', transport)
          try {
            const ac = new AbortController()
            // Stopped, the server cannot answer: the forward is surely still in flight when the
            // abort comes, however fast or slow this machine is.
            process.kill(server.pid, 'SIGSTOP')
            try {
              await allThreadsStopped(server.pid)
              const inFlight = m.forward(x8.narrow(0, 0, 1).contiguous(), { signal: ac.signal })
              await new Promise((resolve) => setImmediate(resolve))
              ac.abort()
              await assert.rejects(inFlight, { code: 'Aborted' })
            } finally {
              process.kill(server.pid, 'SIGCONT')
            }
            await assert.rejects(m.forward(x8.narrow(0, 0, 1).contiguous(), { signal: AbortSignal.abort() }), {
              code: 'Aborted',
            })
            await assert.rejects(load('resnet18', transport, { signal: AbortSignal.abort() }), { code: 'Aborted' })
            assertClose(
              await m.forward(x8.narrow(0, 1, 1).contiguous()),
              want8.narrow(0, 1, 1),
              `${transport[0]} after an abort`,
            )
          } finally {
            m.dispose()
          }
        }
      },
    )

    test('a server that stops answering: Unavailable within timeoutMs', { timeout: 120_000 }, async (t) => {
      const modules = await Promise.all([load('two_io', transports[0]), load('two_io', transports[2])])
      // SIGSTOP: the process keeps its sockets (connections are accepted by the kernel) but answers nothing.
      process.kill(server.pid, 'SIGSTOP')
      try {
        await allThreadsStopped(server.pid)
        for (const m of modules) {
          const started = Date.now()
          await assert.rejects(m.forward(torch.ones([1, 2]), torch.ones([1, 2]), { timeoutMs: 500 }), {
            code: 'Unavailable',
          })
          const ms = Date.now() - started
          t.diagnostic(`${m.url}: Unavailable after ${ms} ms`)
          assert.ok(ms >= 450 && ms < 5000, `Unavailable after ${ms} ms, timeoutMs 500`)
        }
        await assert.rejects(load('two_io', transports[0], { timeoutMs: 500 }), {
          code: 'Unavailable',
          message: /within 500 ms/,
        })
      } finally {
        process.kill(server.pid, 'SIGCONT')
      }
      for (const m of modules) {
        assertClose(
          (await m.forward(torch.ones([1, 2]), torch.ones([1, 2]))).OUTPUT__1,
          torch.ones([1, 2]),
          `${m.url} after SIGCONT`,
          0,
        )
        m.dispose()
      }
    })

    test('a stopped server: Unavailable for loaded modules and new loads', { timeout: 120_000 }, async () => {
      const modules = await Promise.all([load('two_io', transports[0]), load('two_io', transports[2])])
      await server.stop()
      try {
        for (const m of modules) {
          const started = Date.now()
          await assert.rejects(m.forward(torch.ones([1, 2]), torch.ones([1, 2]), { timeoutMs: 5000 }), {
            code: 'Unavailable',
          })
          assert.ok(Date.now() - started < 5500, `${m.url}: Unavailable after ${Date.now() - started} ms`)
        }
        for (const transport of [transports[0], transports[2]]) {
          await assert.rejects(load('two_io', transport, { timeoutMs: 5000 }), { code: 'Unavailable' })
        }
      } finally {
        for (const m of modules) m.dispose()
      }
    })
  })

  describe('tritonclient and perf_analyzer against torch.oip.serve', () => {
    let dir, server
    // tritonclient as Triton's users call it: inputs and outputs named from the model's
    // metadata (issue 24: with no outputs there, JSON outputs cannot be asked for); prints one
    // JSON line. Outputs travel back as base64 float32 bytes, compared here with Python's.
    const CLIENT_PY = String.raw`
import base64, json, sys
import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

a = json.loads(sys.argv[1])
h = httpclient.InferenceServerClient(a["http"], network_timeout=120)
g = grpcclient.InferenceServerClient(a["grpc"])
x = np.fromfile(a["images"], dtype="<f4").reshape(8, 3, 224, 224)[:a["batch"]]
meta = h.get_model_metadata(a["model"])
name = meta["inputs"][0]["name"]
outs = [o["name"] for o in meta["outputs"]]

def infer(client, mod, binary=True):
    t = mod.InferInput(name, list(x.shape), meta["inputs"][0]["datatype"])
    if mod is httpclient:
        t.set_data_from_numpy(x, binary_data=binary)
        r = client.infer(a["model"], [t], outputs=[httpclient.InferRequestedOutput(o, binary_data=binary) for o in outs])
        # How the answer came: JSON numbers ("data") or raw bytes (binary_data_size).
        sent = "json" if "data" in r.get_output(outs[0]) else "binary"
    else:
        t.set_data_from_numpy(x)
        r = client.infer(a["model"], [t], outputs=[grpcclient.InferRequestedOutput(o) for o in outs], client_timeout=120)
        sent = "raw"
    y = r.as_numpy(outs[0])
    return {"shape": list(y.shape), "dtype": str(y.dtype), "sent": sent, "data": base64.b64encode(y.astype("<f4").tobytes()).decode()}

small = httpclient.InferInput(name, [1, 3], "FP32")
small.set_data_from_numpy(np.zeros((1, 3), "<f4"))

def error(f):
    try:
        f()
    except InferenceServerException as e:
        return str(e)
    return None

print(json.dumps({
    "ready": [h.is_server_live(), h.is_server_ready(), h.is_model_ready(a["model"]),
              g.is_server_live(), g.is_server_ready(), g.is_model_ready(a["model"])],
    "server": h.get_server_metadata(),
    "metadata": {"http": meta, "grpc": g.get_model_metadata(a["model"], as_json=True)},
    "config": {"http": h.get_model_config(a["model"]), "grpc": g.get_model_config(a["model"], as_json=True)["config"]},
    "outputs": {"httpBinary": infer(h, httpclient), "httpJson": infer(h, httpclient, binary=False), "grpc": infer(g, grpcclient)},
    "errors": {
        "httpUnknown": error(lambda: h.get_model_metadata("nope")),
        "grpcUnknown": error(lambda: g.get_model_metadata("nope")),
        "httpShape": error(lambda: h.infer(a["model"], [small])),
    },
}))
`
    before(async () => {
      // Declared as a new user would: the input's datatype and shape; its name comes from the
      // TorchScript schema (forward(x)) and the outputs from probe forwards at batch 1 and 2.
      server = await torch.oip.serve({
        models: { resnet: { model: RESNET, inputs: [{ datatype: 'FP32', shape: [-1, 3, 224, 224] }] } },
        grpcPort: 0,
      })
      dir = fs.mkdtempSync(path.join(os.tmpdir(), 'torch-node-oip-clients-'))
    })
    after(async () => {
      if (server) await server.close()
      if (dir) fs.rmSync(dir, { recursive: true, force: true })
    })

    test(
      "tritonclient (HTTP binary, HTTP JSON, gRPC), outputs named from the metadata, gets Python's outputs; metadata, config, readiness, errors",
      { timeout: 240_000 },
      async (t) => {
        const script = path.join(dir, 'client.py')
        fs.writeFileSync(script, CLIENT_PY)
        const batch = 2
        const args = {
          http: server.url.replace('http://', ''),
          grpc: server.grpcUrl,
          model: 'resnet',
          images: IMAGES,
          batch,
        }
        const r = await runChild(pythonWithClient(), [script, JSON.stringify(args)], {}, 180_000)
        assert.equal(r.code, 0, `tritonclient: exit ${r.code ?? r.signal}\n${r.stderr.slice(-3000)}`)
        const got = JSON.parse(r.stdout.trim().split('\n').pop())
        assert.deepEqual(got.ready, [true, true, true, true, true, true])
        assert.equal(got.server.name, 'torch-node')
        const input = { name: 'x', datatype: 'FP32', shape: [-1, 3, 224, 224] } // forward(x) of the traced ResNet
        const output = { name: 'OUTPUT__0', datatype: 'FP32', shape: [-1, 1000] }
        for (const [via, meta] of Object.entries(got.metadata)) {
          // protobuf's JSON writes int64 as strings: the gRPC shapes arrive as ["-1", "3", ...].
          const norm = (s) => ({ name: s.name, datatype: s.datatype, shape: s.shape.map(Number) })
          assert.deepEqual(meta.inputs.map(norm), [input], via)
          assert.deepEqual(meta.outputs.map(norm), [output], via)
        }
        for (const [via, config] of Object.entries(got.config)) {
          assert.equal(Number(config.max_batch_size ?? 0), 0, via)
          assert.deepEqual(
            config.input.map((s) => [s.name, s.data_type, s.dims.map(Number)]),
            [['x', 'TYPE_FP32', [-1, 3, 224, 224]]],
            via,
          )
          assert.deepEqual(
            config.output.map((s) => [s.name, s.data_type, s.dims.map(Number)]),
            [['OUTPUT__0', 'TYPE_FP32', [-1, 1000]]],
            via,
          )
        }
        // Python's outputs for the same images (models/golden, written by make_models.py).
        const want = torch
          .fromBuffer(new Uint8Array(fs.readFileSync(OUTPUTS)), [8, 1000], { dtype: 'float32' })
          .narrow(0, 0, batch)
        assert.deepEqual(Object.fromEntries(Object.entries(got.outputs).map(([via, o]) => [via, o.sent])), {
          httpBinary: 'binary',
          httpJson: 'json',
          grpc: 'raw',
        })
        for (const [via, o] of Object.entries(got.outputs)) {
          assert.equal(o.dtype, 'float32', via)
          const y = torch.fromBuffer(new Uint8Array(Buffer.from(o.data, 'base64')), o.shape, { dtype: 'float32' })
          const d = maxDiff(y, want, via)
          t.diagnostic(`${via}: max |difference| ${d}`)
          assert.ok(d <= TOLERANCE, `${via}: max |difference| ${d} > ${TOLERANCE}`)
        }
        // tritonclient reads our {"error"} bodies (and gRPC statuses) into its exception's message.
        assert.match(got.errors.httpUnknown, /unknown model 'nope'/)
        assert.match(got.errors.grpcUnknown, /unknown model 'nope'/)
        assert.match(got.errors.httpShape, /\[400\] input 'x' has shape \[1,3\], the model takes \[-1,3,224,224\]/)
      },
    )

    const pa = perfAnalyzer()
    for (const protocol of ['http', 'grpc']) {
      test(
        `perf_analyzer over ${protocol}: a short bounded run`,
        { skip: !pa && 'perf_analyzer not installed', timeout: 180_000 },
        async (t) => {
          const url = protocol === 'http' ? server.url.replace('http://', '') : server.grpcUrl
          const started = Date.now()
          const r = await runChild(
            pa.path,
            [
              '-m',
              'resnet',
              '-u',
              url,
              '-i',
              protocol,
              // The metadata's [-1, 3, 224, 224] has a free batch dimension (max_batch_size 0): one image.
              '--shape',
              'x:1,3,224,224',
              '--concurrency-range',
              '2',
              // Three windows of at least 20 requests, taken as they come: this run checks that
              // perf_analyzer works against torch-node, not that a shared machine is steady. Here
              // windows of a busy machine differed more than 11-fold in mean latency, a 2 s time window
              // saw no answer at all, and a plain --request-count idles to a whole second at its end
              // ("39.99 infer/sec" for 40 requests): count windows keep the load on to their end.
              '--measurement-mode',
              'count_windows',
              '--measurement-request-count',
              '20',
              '--stability-percentage',
              '100000',
              '--max-trials',
              '3',
            ],
            pa.env,
            150_000,
          )
          assertExited0(r, 'perf_analyzer')
          const lines = r.stdout
            .split('\n')
            .filter((l) => /Request count:|Throughput:|latency|Concurrency:/.test(l))
            .map((l) => l.trim())
          console.log(
            `perf_analyzer -i ${protocol} against torch.oip.serve (resnet18, batch 1, concurrency 2, ${((Date.now() - started) / 1000).toFixed(1)} s):\n  ${lines.join('\n  ')}`,
          )
          t.diagnostic(lines.find((l) => l.startsWith('Concurrency:')) ?? '')
          assert.match(r.stdout, /Concurrency: 2, throughput: [\d.]+ infer\/sec, latency \d+ usec/)
        },
      )
    }
  })
}

'use strict'
// The real peers of the Open Inference Protocol tests (issue 20): Triton Inference Server 2.51
// (PyPI's nvidia-pytriton wheel) serving TorchScript files through its Python backend, and
// Triton's own clients (tritonclient HTTP and gRPC, perf_analyzer) in child processes, all from
// .triton/ (tools/triton-env.js; `.ci/run` sets it up). Skipped, with the setup's reason, where
// that environment could not be installed.
const { describe, test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { startTriton, pythonWithClient, perfAnalyzer, httpGet } = require('../tools/triton-env')
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
const TEXT = path.join(MODELS, 'fixtures', 'text_encoder.pt')
const GOLDEN = path.join(MODELS, 'golden')
const TOLERANCE = 1e-4
const CONCURRENT = 16

// One Python process per check, using tritonclient as Triton's users do; it prints one JSON line.
// The reference for the small models is torch.jit.load in that same process (.triton/'s Python
// reaches .libtorch's torch through a .pth file).
const CLIENT_PY = String.raw`
import json, sys
import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

cmd, a = sys.argv[1], json.loads(sys.argv[2])
http = httpclient.InferenceServerClient(a["http"], concurrency=a.get("concurrency", 1), network_timeout=120)
grpc = grpcclient.InferenceServerClient(a["grpc"])

def infer(client, mod, model, arrays, binary=True):
    inputs = [mod.InferInput("INPUT__%d" % i, list(x.shape), a["datatypes"][i]) for i, x in enumerate(arrays)]
    names = ["OUTPUT__%d" % k for k in range(a["outputs"])]
    if mod is httpclient:
        for t, x in zip(inputs, arrays):
            t.set_data_from_numpy(x, binary_data=binary)
        r = client.infer(model, inputs, outputs=[httpclient.InferRequestedOutput(n, binary_data=binary) for n in names])
    else:
        for t, x in zip(inputs, arrays):
            t.set_data_from_numpy(x)
        r = client.infer(model, inputs, outputs=[grpcclient.InferRequestedOutput(n) for n in names], client_timeout=120)
    return [r.as_numpy(n) for n in names]

def worst(got, want):
    return max(float(np.abs(g.astype(np.float64) - w).max()) for g, w in zip(got, want))

if cmd == "golden":
    images = np.fromfile(a["input"], dtype="<f4").reshape(8, 3, 224, 224)
    want = [np.fromfile(a["output"], dtype="<f4").reshape(1, 1000)]
    x = images[:1]
    print(json.dumps({
        "httpBinary": worst(infer(http, httpclient, a["model"], [x]), want),
        "httpJson": worst(infer(http, httpclient, a["model"], [x], binary=False), want),
        "grpc": worst(infer(grpc, grpcclient, a["model"], [x]), want),
    }))
elif cmd == "burst":
    images = np.fromfile(a["input"], dtype="<f4").reshape(8, 3, 224, 224)
    want = np.fromfile(a["output"], dtype="<f4").reshape(8, 1000)
    pending = []
    for k in range(a["n"]):
        t = httpclient.InferInput("INPUT__0", [1, 3, 224, 224], "FP32")
        t.set_data_from_numpy(images[k % 8:k % 8 + 1], binary_data=True)
        pending.append((k % 8, http.async_infer(a["model"], [t])))
    diffs = [float(np.abs(p.get_result().as_numpy("OUTPUT__0")[0] - want[i]).max()) for i, p in pending]
    print(json.dumps({"answered": len(diffs), "worst": max(diffs)}))
elif cmd == "local":
    import torch
    rng = np.random.default_rng(0)
    arrays = []
    for spec in a["inputs"]:
        if spec["datatype"] == "FP32":
            arrays.append(rng.standard_normal(spec["shape"]).astype(np.float32))
        elif spec["datatype"] == "INT64":
            arrays.append(rng.integers(0, spec["high"], spec["shape"]).astype(np.int64))
        else:
            arrays.append(np.ones(spec["shape"], dtype=bool))
    with torch.inference_mode():
        out = torch.jit.load(a["pt"])(*[torch.from_numpy(x) for x in arrays])
    want = [o.numpy().astype(np.float64) for o in (out if isinstance(out, (tuple, list)) else [out])]
    print(json.dumps({
        "http": worst(infer(http, httpclient, a["model"], arrays), want),
        "grpc": worst(infer(grpc, grpcclient, a["model"], arrays), want),
        "shapes": [list(w.shape) for w in want],
    }))
`

let clientScript
/** Runs CLIENT_PY with .triton/'s Python; resolves to its JSON line, bounded by timeoutMs. */
function client(cmd, args, timeoutMs = 180_000) {
  return runChild(pythonWithClient(), [clientScript, cmd, JSON.stringify(args)], {}, timeoutMs).then((r) => {
    assert.equal(r.code, 0, `client ${cmd}: exit ${r.code ?? r.signal}\n${r.stderr.slice(-3000)}`)
    return JSON.parse(r.stdout.trim().split('\n').pop())
  })
}

const { env, skip } = tritonSuite(RESNET)

if (skip) {
  test.skip(`Triton peers: ${skip}`)
} else {
  describe(`Triton ${env.tritonserverVersion} (Python backend, torch ${env.torch}) and tritonclient`, () => {
    let dir, server, startMs
    before(async () => {
      dir = fs.mkdtempSync(path.join(os.tmpdir(), 'torch-node-triton-'))
      clientScript = path.join(dir, 'client.py')
      fs.writeFileSync(clientScript, CLIENT_PY)
      const repo = writeTritonTestModels(path.join(dir, 'repo'), {
        resnet: RESNET,
        twoIo: env.fixtures.twoIo,
        textEncoder: TEXT,
        twoIoDynamicBatching: true,
      })
      const t0 = Date.now()
      server = await startTriton({ repo, timeoutMs: 180_000 })
      startMs = Date.now() - t0
    })
    after(async () => {
      if (server) await server.stop()
      if (dir) fs.rmSync(dir, { recursive: true, force: true })
    })

    test('the server answers on 127.0.0.1 with the three models ready', async (t) => {
      t.diagnostic(`ready in ${(startMs / 1000).toFixed(1)} s (three Python backend stubs importing torch)`)
      assert.match(server.httpUrl, /^http:\/\/127\.0\.0\.1:\d+$/)
      assert.match(server.grpcUrl, /^127\.0\.0\.1:\d+$/)
      const meta = JSON.parse((await httpGet(`${server.httpUrl}/v2`, 5000)).body)
      assert.equal(meta.version, '2.51.0')
      for (const m of ['resnet18', 'two_io', 'text_encoder']) {
        assert.equal((await httpGet(`${server.httpUrl}/v2/models/${m}/ready`, 5000)).status, 200, m)
      }
      const resnet = JSON.parse((await httpGet(`${server.httpUrl}/v2/models/resnet18`, 5000)).body)
      assert.deepEqual(resnet.inputs, [{ name: 'INPUT__0', datatype: 'FP32', shape: [-1, 3, 224, 224] }])
      assert.deepEqual(resnet.outputs, [{ name: 'OUTPUT__0', datatype: 'FP32', shape: [-1, 1000] }])
    })

    test(
      'ResNet-18 through tritonclient (HTTP binary, HTTP JSON, gRPC) equals the Python golden',
      { timeout: 300_000 },
      async (t) => {
        const got = await client('golden', {
          http: server.httpUrl.replace('http://', ''),
          grpc: server.grpcUrl,
          model: 'resnet18',
          datatypes: ['FP32'],
          outputs: 1,
          input: path.join(GOLDEN, 'resnet18_input_b8.f32'),
          output: path.join(GOLDEN, 'resnet18_output_b1.f32'),
        })
        t.diagnostic(`max |difference| from resnet18_output_b1.f32: ${JSON.stringify(got)}`)
        for (const [route, diff] of Object.entries(got))
          assert.ok(diff <= TOLERANCE, `${route}: max |difference| ${diff} > ${TOLERANCE}`)
      },
    )

    test(
      `Triton's dynamic batcher merges ${CONCURRENT} concurrent requests (statistics)`,
      { timeout: 300_000 },
      async (t) => {
        const before = await tritonStats(server, 'resnet18')
        const got = await client('burst', {
          http: server.httpUrl.replace('http://', ''),
          grpc: server.grpcUrl,
          model: 'resnet18',
          n: CONCURRENT,
          concurrency: CONCURRENT,
          input: path.join(GOLDEN, 'resnet18_input_b8.f32'),
          output: path.join(GOLDEN, 'resnet18_output_b8.f32'),
        })
        assert.equal(got.answered, CONCURRENT)
        assert.ok(got.worst <= TOLERANCE, `batched outputs: max |difference| ${got.worst} > ${TOLERANCE}`)
        const now = await tritonStatsAfter(server, 'resnet18', before, CONCURRENT)
        const inferences = now.inference_count - before.inference_count
        const executions = now.execution_count - before.execution_count
        t.diagnostic(
          `${inferences} inferences in ${executions} executions; batch sizes run: ` +
            now.batch_stats.map((b) => `${b.batch_size}×${b.compute_infer.count}`).join(' '),
        )
        assert.equal(inferences, CONCURRENT, JSON.stringify(now))
        assert.ok(executions < inferences, `${inferences} inferences in ${executions} executions: nothing merged`)
        assert.ok(
          now.batch_stats.some((b) => b.batch_size > 1),
          JSON.stringify(now.batch_stats),
        )
      },
    )

    test(
      'two inputs, two outputs by position (INPUT__0/1 -> OUTPUT__0/1), HTTP and gRPC',
      { timeout: 180_000 },
      async () => {
        const got = await client('local', {
          http: server.httpUrl.replace('http://', ''),
          grpc: server.grpcUrl,
          model: 'two_io',
          pt: env.fixtures.twoIo,
          datatypes: ['FP32', 'FP32'],
          outputs: 2,
          inputs: [
            { datatype: 'FP32', shape: [2, 3] },
            { datatype: 'FP32', shape: [2, 3] },
          ],
        })
        assert.deepEqual(got.shapes, [
          [2, 3],
          [2, 3],
        ])
        assert.ok(got.http <= 0 && got.grpc <= 0, JSON.stringify(got))
      },
    )

    test('INT64 and BOOL inputs (text_encoder fixture), HTTP and gRPC', { timeout: 180_000 }, async () => {
      const got = await client('local', {
        http: server.httpUrl.replace('http://', ''),
        grpc: server.grpcUrl,
        model: 'text_encoder',
        pt: TEXT,
        datatypes: ['INT64', 'BOOL'],
        outputs: 2,
        inputs: [
          { datatype: 'INT64', shape: [2, 5], high: 32 },
          { datatype: 'BOOL', shape: [2, 5] },
        ],
      })
      assert.deepEqual(got.shapes, [
        [2, 5, 8],
        [2, 8],
      ])
      assert.ok(got.http <= TOLERANCE && got.grpc <= TOLERANCE, JSON.stringify(got))
    })

    test(
      'perf_analyzer (tritonclient 2.51) runs a short bounded load',
      { skip: !perfAnalyzer() && 'perf_analyzer not installed', timeout: 180_000 },
      async (t) => {
        const pa = perfAnalyzer()
        const r = await runChild(
          pa.path,
          [
            '-m',
            'two_io',
            '-u',
            server.httpUrl.replace('http://', ''),
            '-i',
            'http',
            '--shape',
            'INPUT__0:3',
            '--shape',
            'INPUT__1:3',
            '--concurrency-range',
            '2',
            // A fixed number of requests: no waiting for stable windows, which a busy machine may not give.
            '--request-count',
            '200',
          ],
          pa.env,
          120_000,
        )
        assertExited0(r, 'perf_analyzer')
        t.diagnostic(r.stdout.split('\n').find((l) => l.startsWith('Concurrency:')) ?? '')
        assert.match(r.stdout, /Concurrency: 2, throughput: [\d.]+ infer\/sec, latency \d+ usec/)
      },
    )

    test(
      'stop() ends the server and its Python backend stubs and frees their shared memory',
      { timeout: 60_000 },
      async () => {
        const { pid } = server
        await server.stop()
        assert.throws(() => process.kill(-pid, 0), { code: 'ESRCH' }, 'a process of the server group is still alive')
        assert.deepEqual(
          fs.readdirSync('/dev/shm').filter((f) => f.startsWith(`torch_node_triton_${process.pid}_`)),
          [],
        )
        await server.stop() // idempotent
      },
    )
  })
}

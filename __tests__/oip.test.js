'use strict'
// The Open Inference Protocol (KServe v2) both ways, over HTTP on 127.0.0.1: torch.oip.serve
// answering RemoteModule (binary and JSON tensors) with the same tensors a local forward gives,
// its coded errors, and a hostile sweep of malformed requests that must each get a 4xx with
// the protocol's {"error"} body while the server keeps serving.
const { describe, test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const http = require('node:http')
const path = require('node:path')
const torch = require('..')

const FIXTURES = path.join(__dirname, '..', 'models', 'fixtures')
const MLP = path.join(FIXTURES, 'mlp_traced.pt') // [N, 4] -> [N, 3]
const ENCODER = path.join(FIXTURES, 'text_encoder.pt') // (ids, mask) -> (hidden, pooled)

function assertClose(a, b, tol, what) {
  assert.deepEqual(a.shape, b.shape, `${what}: shape`)
  const x = a.toTypedArray()
  const y = b.toTypedArray()
  for (let i = 0; i < x.length; i++) assert.ok(Math.abs(x[i] - y[i]) <= tol, `${what}[${i}]: ${x[i]} vs ${y[i]}`)
}

/** A raw HTTP exchange: {status, json}. */
function raw(url, { method = 'POST', headers = {}, body } = {}) {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method, headers }, (res) => {
      const chunks = []
      res.on('data', (c) => chunks.push(c))
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8')
        let json = null
        try {
          json = JSON.parse(text)
        } catch {}
        resolve({ status: res.statusCode, json, text })
      })
    })
    req.on('error', reject)
    req.setTimeout(10_000, () => req.destroy(new Error('timeout')))
    req.end(body)
  })
}

describe('Open Inference Protocol', () => {
  let server
  let mlp
  let encoder
  before(async () => {
    mlp = await torch.ScriptModule.load(MLP)
    encoder = await torch.ScriptModule.load(ENCODER)
    server = await torch.oip.serve({
      models: {
        mlp: { model: mlp, example: torch.rand([2, 4]) },
        encoder: {
          model: encoder,
          inputs: [
            { name: 'ids', datatype: 'INT64', shape: [-1, -1] },
            { name: 'mask', datatype: 'BOOL', shape: [-1, -1] },
          ],
        },
        batched: {
          model: new torch.Batcher(mlp, { maxDelayMs: 2 }),
          inputs: [{ name: 'input', datatype: 'FP32', shape: [-1, 4] }],
        },
      },
      grpcPort: 0,
    })
  })
  after(() => server.close())

  test('serve binds 127.0.0.1; health, server metadata and model metadata', async () => {
    assert.match(server.url, /^http:\/\/127\.0\.0\.1:\d+$/)
    assert.equal((await raw(`${server.url}/v2/health/ready`, { method: 'GET' })).status, 200)
    assert.equal((await raw(`${server.url}/v2`, { method: 'GET' })).json.name, 'torch-node')
    const meta = (await raw(`${server.url}/v2/models/mlp`, { method: 'GET' })).json
    assert.deepEqual(
      meta.inputs,
      [{ name: 'input', datatype: 'FP32', shape: [-1, 4] }],
      'named after forward(input), dims from the example',
    )
    assert.deepEqual(meta.outputs, [{ name: 'OUTPUT__0', datatype: 'FP32', shape: [-1, 3] }])
    const enc = (await raw(`${server.url}/v2/models/encoder`, { method: 'GET' })).json
    assert.deepEqual(
      enc.inputs.map((s) => s.name),
      ['ids', 'mask'],
    )
    // Outputs learnt by probe forwards on zeros of the declared shapes ([1, 2], then [2, 3]).
    assert.deepEqual(enc.outputs, [
      { name: 'OUTPUT__0', datatype: 'FP32', shape: [-1, -1, 8] },
      { name: 'OUTPUT__1', datatype: 'FP32', shape: [-1, 8] },
    ])
    assert.equal((await raw(`${server.url}/v2/models/mlp/versions/1/ready`, { method: 'GET' })).status, 200)
    // Triton's model configuration extension, which perf_analyzer reads before a run.
    const config = (await raw(`${server.url}/v2/models/mlp/config`, { method: 'GET' })).json
    assert.deepEqual(config, {
      name: 'mlp',
      platform: 'torch_node',
      backend: 'torch_node',
      max_batch_size: 0,
      input: [{ name: 'input', data_type: 'TYPE_FP32', dims: [-1, 4] }],
      output: [{ name: 'OUTPUT__0', data_type: 'TYPE_FP32', dims: [-1, 3] }],
    })
  })

  for (const binary of [true, false]) {
    test(`RemoteModule over HTTP ${binary ? 'binary' : 'JSON'}: the same tensors as a local forward`, async () => {
      const remote = await torch.RemoteModule.load(server.url, 'mlp', { binary })
      try {
        assert.deepEqual(remote.inputs, [{ name: 'input', datatype: 'FP32', shape: [-1, 4] }])
        const x = torch.rand([5, 4])
        const y = await remote.forward(x)
        assertClose(y, mlp.forwardSync(x), binary ? 0 : 1e-6, 'positional')
        assertClose(await remote.forward({ input: x }), y, 0, 'named')
        const many = await Promise.all(Array.from({ length: 16 }, (_, i) => remote.forward(torch.full([1, 4], i / 10))))
        many.forEach((o, i) => assertClose(o, mlp.forwardSync(torch.full([1, 4], i / 10)), 1e-6, `concurrent ${i}`))
      } finally {
        remote.dispose()
      }
    })
  }

  test('RemoteModule over gRPC (raw contents): the same tensors; coded errors', async () => {
    assert.match(server.grpcUrl, /^127\.0\.0\.1:\d+$/)
    for (const url of [`grpc://${server.grpcUrl}`, server.grpcUrl]) {
      const remote = await torch.RemoteModule.load(url, 'mlp', {
        protocol: url.startsWith('grpc') ? undefined : 'grpc',
      })
      try {
        assert.deepEqual(remote.inputs, [{ name: 'input', datatype: 'FP32', shape: [-1, 4] }])
        const x = torch.rand([5, 4])
        assertClose(await remote.forward(x), mlp.forwardSync(x), 0, 'gRPC')
        const many = await Promise.all(Array.from({ length: 8 }, (_, i) => remote.forward(torch.full([2, 4], i))))
        many.forEach((o, i) => assertClose(o, mlp.forwardSync(torch.full([2, 4], i)), 1e-6, `concurrent ${i}`))
        await assert.rejects(remote.forward(torch.rand([2, 5])), { code: 'ShapeMismatch' })
        // 4.8 MB replies: past grpc-js's default 4 MiB receive limit.
        const big = torch.rand([400_000, 4])
        assertClose(await remote.forward(big), mlp.forwardSync(big), 0, 'gRPC, 4.8 MB each way')
      } finally {
        remote.dispose()
      }
    }
    await assert.rejects(
      torch.RemoteModule.load(server.grpcUrl, 'missing', { protocol: 'grpc' }),
      (e) => e.code === 'ModelNotFound' && /'missing'/.test(e.message),
    )
    await assert.rejects(torch.RemoteModule.load('127.0.0.1:1', 'mlp', { protocol: 'grpc', timeoutMs: 3000 }), {
      code: 'Unavailable',
    })
    await assert.rejects(torch.RemoteModule.load('not a target', 'mlp', { protocol: 'grpc' }), { code: 'InvalidArg' })
  })

  test('several inputs and outputs by name; a Batcher behind the server', async () => {
    const remote = await torch.RemoteModule.load(server.url, 'encoder')
    const ids = torch.tensor([[3, 5, 7, 0]], { dtype: 'int64' })
    const mask = torch.tensor([[true, true, true, false]])
    assert.deepEqual(remote.inputs, [
      { name: 'ids', datatype: 'INT64', shape: [-1, -1] },
      { name: 'mask', datatype: 'BOOL', shape: [-1, -1] },
    ])
    const local = encoder.forwardSync(ids, mask)
    const declared = await remote.forward(ids, mask)
    assertClose(declared.OUTPUT__0, local[0], 0, 'hidden (declared inputs)')
    await assert.rejects(remote.forward(ids.to('int32'), mask), { code: 'DTypeMismatch' })
    remote.dispose()
    const typed = await torch.oip.serve({
      models: { encoder: { model: encoder, example: [ids, mask] } },
    })
    try {
      const r = await torch.RemoteModule.load(typed.url, 'encoder')
      assert.deepEqual(
        r.inputs.map((s) => [s.name, s.datatype]),
        [
          ['ids', 'INT64'],
          ['mask', 'BOOL'],
        ],
      )
      const out = await r.forward({ ids, mask })
      assert.deepEqual(Object.keys(out), ['OUTPUT__0', 'OUTPUT__1'])
      assertClose(out.OUTPUT__0, local[0], 0, 'hidden')
      assertClose(out.OUTPUT__1, local[1], 0, 'pooled')
      r.dispose()
    } finally {
      await typed.close()
    }
    const batched = await torch.RemoteModule.load(server.url, 'batched')
    const xs = Array.from({ length: 6 }, () => torch.rand([1, 4]))
    const ys = await Promise.all(xs.map((x) => batched.forward(x)))
    ys.forEach((y, i) => assertClose(y, mlp.forwardSync(xs[i]), 1e-5, `batched ${i}`))
    batched.dispose()
  })

  test('coded errors: bad inputs before any request, unknown models, unreachable servers, aborts', async () => {
    const remote = await torch.RemoteModule.load(server.url, 'mlp')
    await assert.rejects(remote.forward(torch.rand([2, 5])), {
      code: 'ShapeMismatch',
      message: /'input' has shape \[2,5\], the model takes \[-1,4\]/,
    })
    await assert.rejects(remote.forward(torch.rand([2, 4], { dtype: 'float64' })), { code: 'DTypeMismatch' })
    await assert.rejects(remote.forward(), { code: 'InvalidArg', message: /takes 1 input/ })
    await assert.rejects(remote.forward({ nope: torch.rand([1, 4]) }), {
      code: 'InvalidArg',
      message: /unknown input 'nope'/,
    })
    const ac = new AbortController()
    ac.abort()
    await assert.rejects(remote.forward(torch.rand([1, 4]), { signal: ac.signal }), { code: 'Aborted' })
    remote.dispose()
    await assert.rejects(remote.forward(torch.rand([1, 4])), { code: 'Disposed' })
    await assert.rejects(
      torch.RemoteModule.load(server.url, 'missing'),
      (e) => e.code === 'ModelNotFound' && /'missing'/.test(e.message) && e.status === 404,
    )
    await assert.rejects(
      torch.RemoteModule.load(server.url, 'mlp', { version: '7' }),
      (e) => e.code === 'ModelNotFound' && /version '7'/.test(e.message),
    )
    // A port nobody listens on: closed at once.
    const probe = http.createServer()
    await new Promise((r) => probe.listen(0, '127.0.0.1', r))
    const { port } = probe.address()
    await new Promise((r) => probe.close(r))
    await assert.rejects(torch.RemoteModule.load(`http://127.0.0.1:${port}`, 'mlp', { timeoutMs: 2000 }), {
      code: 'Unavailable',
    })
    // A server that never answers: bounded by timeoutMs.
    const silent = http.createServer(() => {})
    await new Promise((r) => silent.listen(0, '127.0.0.1', r))
    try {
      await assert.rejects(
        torch.RemoteModule.load(`http://127.0.0.1:${silent.address().port}`, 'mlp', { timeoutMs: 200 }),
        { code: 'Unavailable', message: /within 200 ms/ },
      )
    } finally {
      silent.closeAllConnections?.()
      await new Promise((r) => silent.close(r))
    }
    // A URL that reaches some other web server: a coded error, not a SyntaxError.
    const html = http.createServer((req, res) => res.end('<html></html>'))
    await new Promise((r) => html.listen(0, '127.0.0.1', r))
    try {
      await assert.rejects(torch.RemoteModule.load(`http://127.0.0.1:${html.address().port}`, 'mlp'), {
        code: 'RemoteError',
        message: /did not answer with the protocol's model metadata/,
      })
    } finally {
      html.closeAllConnections?.()
      await new Promise((r) => html.close(r))
    }
    await assert.rejects(torch.RemoteModule.load(server.url, 'mlp', { protocol: 'smtp' }), {
      code: 'InvalidArg',
      message: /'http' or 'grpc'/,
    })
  })

  test('malformed requests get a 4xx with {"error"}, and the server keeps serving', async () => {
    const infer = `${server.url}/v2/models/mlp/infer`
    const json = (o) => ({ headers: { 'content-type': 'application/json' }, body: JSON.stringify(o) })
    const input = (extra) => ({
      inputs: [{ name: 'input', datatype: 'FP32', shape: [1, 4], data: [1, 2, 3, 4], ...extra }],
    })
    const deep = '['.repeat(100000) + ']'.repeat(100000)
    const binary = (headerLength, bytes, size = 16) => {
      const h = Buffer.from(
        JSON.stringify({
          inputs: [{ name: 'input', datatype: 'FP32', shape: [1, 4], parameters: { binary_data_size: size } }],
        }),
      )
      return {
        headers: { 'inference-header-content-length': String(headerLength ?? h.length) },
        body: Buffer.concat([h, Buffer.alloc(bytes)]),
      }
    }
    const cases = {
      'not JSON': { body: '{"inputs": [' },
      'deep nesting': { body: `{"inputs": ${deep}}` },
      'inputs not an array': json({ inputs: 5 }),
      'unknown input': json({ inputs: [{ name: 'x', datatype: 'FP32', shape: [1, 4], data: [1, 2, 3, 4] }] }),
      'missing input': json({ inputs: [] }),
      'unknown datatype': json(input({ datatype: 'FP128' })),
      BYTES: json(input({ datatype: 'BYTES' })),
      'data shorter than its shape': json(input({ data: [1, 2, 3] })),
      'data longer than its shape': json(input({ data: [1, 2, 3, 4, 5] })),
      'data nested deeper than its shape': json(input({ data: [[[[1, 2, 3, 4]]]] })),
      'a string in FP32 data': json(input({ data: [1, 2, 'x', 4] })),
      'element count that overflows': json(input({ shape: [2 ** 40, 2 ** 40], data: [] })),
      'negative size': json(input({ shape: [-1, 4] })),
      'header length past the body': binary(10_000, 16),
      'header length not a number': binary('12abc', 16),
      'binary_data_size disagrees with the shape': binary(undefined, 12, 12),
      'binary data shorter than declared': binary(undefined, 8),
      'trailing bytes': binary(undefined, 20),
      'unknown output': json({ ...input(), outputs: [{ name: 'OUTPUT__9' }] }),
      'wrong shape for the model': json(input({ shape: [1, 2], data: [1, 2] })),
      'wrong datatype for the model': json(input({ datatype: 'FP64' })),
    }
    for (const [name, req] of Object.entries(cases)) {
      const r = await raw(infer, req)
      assert.ok(r.status >= 400 && r.status < 500, `${name}: status ${r.status} ${r.text.slice(0, 200)}`)
      assert.equal(typeof r.json?.error, 'string', `${name}: ${r.text.slice(0, 200)}`)
    }
    const big = await raw(infer, { body: Buffer.alloc(65 * 2 ** 20) })
    assert.equal(big.status, 413)
    assert.equal((await raw(`${server.url}/v2/models/nope/infer`, json(input()))).status, 404)
    const ok = await raw(infer, json(input()))
    assert.equal(ok.status, 200, ok.text)
    assert.deepEqual(ok.json.outputs[0].shape, [1, 3])
    assertClose(
      torch.tensor(ok.json.outputs[0].data).view([1, 3]),
      mlp.forwardSync(torch.tensor([[1, 2, 3, 4]])),
      1e-6,
      'JSON answer',
    )
  })

  test('router() mounts on an existing http server; options are checked', async () => {
    assert.throws(() => torch.oip.router({}), { code: 'InvalidArg' })
    await assert.rejects(torch.oip.serve({ models: {}, prot: 1 }), {
      code: 'InvalidArg',
      message: /unknown option 'prot'/,
    })
    await assert.rejects(torch.oip.serve({ models: { m: 42 } }), { code: 'InvalidArg' })
    assert.throws(() => torch.oip.router({ models: { mlp } }), {
      code: 'InvalidArg',
      message: /oip\.router: models\.mlp: .*declare inputs/,
    })
    const handler = torch.oip.router({ models: { mlp: { model: mlp, inputs: [{ name: 'input', shape: [-1, 4] }] } } })
    const app = http.createServer((req, res) =>
      handler(req, res, () => {
        res.writeHead(418)
        res.end()
      }),
    )
    await new Promise((r) => app.listen(0, '127.0.0.1', r))
    try {
      const url = `http://127.0.0.1:${app.address().port}`
      assert.equal((await raw(`${url}/other`, { method: 'GET' })).status, 418, 'other routes go to next()')
      const r = await torch.RemoteModule.load(url, 'mlp')
      assert.deepEqual((await r.forward(torch.ones([1, 4]).view([1, 4]))).shape, [1, 3])
      r.dispose()
    } finally {
      app.closeAllConnections?.()
      await new Promise((r) => app.close(r))
    }
  })
})

// Issue 24: every served model publishes complete metadata — inputs and outputs, names,
// datatypes and shapes with -1 where a size varies — from what is declared, else learnt from
// the model by probe forwards at batch 1 and 2; what cannot be known is refused at start.
describe('oip.serve: complete model metadata', () => {
  const FIXED = path.join(FIXTURES, 'fixed_batch_traced.pt') // reshape(1, 8): batch 1 only
  const metadataOf = async (models) => {
    const server = await torch.oip.serve({ models })
    try {
      const out = {}
      for (const name of Object.keys(models))
        out[name] = (await raw(`${server.url}/v2/models/${name}`, { method: 'GET' })).json
      return out
    } finally {
      await server.close()
    }
  }

  test('a path with declared input shapes: [-1, 4] in, outputs learnt ([-1, 3]); a Batcher and a fixed-batch model', async () => {
    const mlp = await torch.ScriptModule.load(MLP)
    const meta = await metadataOf({
      path: { model: MLP, inputs: [{ name: 'input', shape: [-1, 4] }] },
      batcher: {
        model: new torch.Batcher(mlp, { maxDelayMs: 1 }),
        inputs: [{ name: 'x', datatype: 'FP32', shape: [-1, 4] }],
        outputs: [{ name: 'scores' }],
      },
      example: { model: mlp, example: torch.rand([3, 4]) },
      fixed: { model: FIXED, example: torch.ones([1, 8]) },
    })
    assert.deepEqual(meta.path.inputs, [{ name: 'input', datatype: 'FP32', shape: [-1, 4] }])
    assert.deepEqual(meta.path.outputs, [{ name: 'OUTPUT__0', datatype: 'FP32', shape: [-1, 3] }])
    assert.deepEqual(
      meta.batcher.outputs,
      [{ name: 'scores', datatype: 'FP32', shape: [-1, 3] }],
      'a declared name, the rest learnt',
    )
    assert.deepEqual(
      meta.example.inputs,
      [{ name: 'input', datatype: 'FP32', shape: [-1, 4] }],
      'the example at 3 rows and 6: the batch varies',
    )
    assert.deepEqual(meta.example.outputs, [{ name: 'OUTPUT__0', datatype: 'FP32', shape: [-1, 3] }])
    // It does not run at batch 2: every size is fixed, as a request must then be.
    assert.deepEqual(meta.fixed.inputs, [{ name: 'x', datatype: 'FP32', shape: [1, 8] }])
    assert.deepEqual(meta.fixed.outputs, [{ name: 'OUTPUT__0', datatype: 'FP32', shape: [1, 8] }])
  })

  test('fully declared metadata is served as declared, without a probe', async () => {
    let calls = 0
    const counting = new torch.Batcher({
      forward: (x) => {
        calls++
        return x
      },
    })
    const inputs = [{ name: 'a', datatype: 'INT32', shape: [-1, 2] }]
    const outputs = [{ name: 'b', datatype: 'INT32', shape: [-1, 2] }]
    const meta = await metadataOf({ echo: { model: counting, inputs, outputs } })
    assert.deepEqual([meta.echo.inputs, meta.echo.outputs, calls], [inputs, outputs, 0])
  })

  test('what cannot be known is refused at start, saying what to declare', async () => {
    const mlp = await torch.ScriptModule.load(MLP)
    const encoder = await torch.ScriptModule.load(ENCODER)
    const cases = [
      [
        { m: MLP },
        /models\.m: the datatypes and shapes of its inputs cannot be read from the model .*declare inputs: \[\{name, datatype, shape\}\] .*or give example/,
      ],
      [{ m: mlp }, /models\.m: .*declare inputs/],
      [{ m: { model: mlp, inputs: [{ name: 'input' }] } }, /models\.m: inputs\[0\]\.shape: needed .*declare it/],
      [
        { m: { model: mlp, inputs: [{ name: 'input', dims: [-1, 4] }] } },
        /models\.m\.inputs\[0\]: unknown option 'dims'; accepted: name, datatype, shape \(the protocol's metadata calls it 'shape'/,
      ],
      [
        { m: { model: mlp, inputs: [{ name: 'input', shape: [-1, 5] }] } },
        /models\.m: the model fails on zeros of the declared input shapes \(FP32 \[1,5\]\).*declare inputs/,
      ],
      // FP32 by default: an embedding needs INT64 ids.
      [
        {
          m: {
            model: encoder,
            inputs: [
              { name: 'ids', shape: [-1, -1] },
              { name: 'mask', datatype: 'BOOL', shape: [-1, -1] },
            ],
          },
        },
        /the model fails on .*FP32 \[1,2\], BOOL \[1,2\].*datatype defaults to FP32/,
      ],
      [
        { m: { model: FIXED, inputs: [{ name: 'x', shape: [-1, 8] }] } },
        /runs on FP32 \[1,8\] but not on FP32 \[2,8\].*those sizes do not vary/,
      ],
      [
        { m: { model: mlp, inputs: [{ name: 'input', shape: [-1, 4] }], outputs: [{ name: 'a' }, { name: 'b' }] } },
        /models\.m\.outputs: declares 2 output\(s\); the model returns 1/,
      ],
      [
        { m: { model: mlp, inputs: [{ name: 'input', datatype: 'FP31', shape: [-1, 4] }] } },
        /inputs\[0\]\.datatype: expected one of 'BOOL', .*got "FP31"/,
      ],
      [
        { m: { model: mlp, inputs: [{ name: 'input', shape: [-2, 4] }] } },
        /inputs\[0\]\.shape\[0\]: sizes must be non-negative \(or -1 where a size varies\), got -2/,
      ],
      [
        { m: { model: mlp, example: torch.rand([2, 4]), inputs: [{ name: 'input', shape: [-1, 5] }] } },
        /inputs\[0\]\.shape: \[-1,5\] does not fit the example's \[2,4\]/,
      ],
      [
        { m: { model: mlp, example: [torch.rand([2, 4]), torch.rand([2, 4])] } },
        /forward takes input; example gives 2 input/,
      ],
      [{ m: { model: mlp, example: 'x' } }, /models\.m\.example: expected a Tensor or an array of Tensors/],
      [
        { m: { inputs: [] } },
        /models\.m\.model: expected a ScriptModule, AOTModule, Batcher or a model file's path, got undefined/,
      ],
    ]
    for (const [models, message] of cases) {
      let server
      try {
        await assert.rejects(
          async () => {
            server = await torch.oip.serve({ models })
          },
          { code: 'InvalidArg', message },
          String(message),
        )
      } finally {
        await server?.close()
      }
    }
  })
})

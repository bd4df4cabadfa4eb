'use strict'
// examples/express-server.js over real HTTP on a loopback port: raw and multipart images, JSON
// errors (400 bad image, 413 too large, 415 wrong type), 20 requests at once through its
// torch.Batcher, and 503 QueueFull when the batcher's queue is full.
const { describe, test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const net = require('node:net')
const path = require('node:path')
const torch = require('..')
const { start, createApp } = require('../examples/express-server')
const { LITE0_PREPROCESS } = require('../lib/bundled')

const ROOT = path.join(__dirname, '..')
const CHELSEA = fs.readFileSync(path.join(ROOT, 'data', 'chelsea.png')) // 240,512 bytes
const MODEL = path.join(ROOT, 'models', 'efficientnet_lite0_traced.pt')
const MAX_BYTES = 256 * 1024
const CATS = [281, 282, 283, 284, 285]

describe('examples/express-server.js', () => {
  let service
  before(async () => {
    assert.ok(fs.existsSync(MODEL), `${MODEL} is missing: run \`npm run models\``)
    service = await start({ port: 0, host: '127.0.0.1', maxBytes: MAX_BYTES })
  })
  after(() => service.close())

  const post = (body, headers, query = '') =>
    fetch(`${service.url}/v1/classify${query}`, { method: 'POST', body, headers })
  const postImage = (bytes, type = 'image/png', query) => post(bytes, { 'content-type': type }, query)
  function multipart(bytes, name = 'image') {
    const form = new FormData()
    form.append(name, new Blob([bytes], { type: 'image/png' }), 'chelsea.png')
    return form
  }
  async function json(res, status) {
    assert.equal(res.status, status)
    assert.match(res.headers.get('content-type'), /^application\/json/)
    return res.json()
  }
  async function error(res, status, code, message) {
    const body = await json(res, status)
    assert.deepEqual(Object.keys(body.error), ['code', 'message'])
    assert.equal(body.error.code, code)
    assert.match(body.error.message, message)
  }

  test('GET /healthz', async () => {
    assert.deepEqual(await json(await fetch(`${service.url}/healthz`), 200), { status: 'ok' })
  })

  test('a raw PNG body: top-5, a cat first, the numbers classify gives in-process', async () => {
    const { predictions } = await json(await postImage(CHELSEA), 200)
    assert.equal(predictions.length, 5)
    assert.ok(CATS.includes(predictions[0].index), predictions[0].label)
    const model = await torch.ScriptModule.load(MODEL)
    const [expected] = await torch.vision.classify(model, CHELSEA, { preprocess: LITE0_PREPROCESS })
    model.dispose()
    assert.deepEqual(
      predictions.map((p) => p.label),
      expected.map((p) => p.label),
    )
    predictions.forEach((p, k) => assert.ok(Math.abs(p.probability - expected[k].probability) < 1e-5))
  })

  test('application/octet-stream and ?topk=2', async () => {
    const { predictions } = await json(await postImage(CHELSEA, 'application/octet-stream', '?topk=2'), 200)
    assert.equal(predictions.length, 2)
    assert.ok(CATS.includes(predictions[0].index))
  })

  test('multipart/form-data: the same answer as the raw body', async () => {
    const raw = await json(await postImage(CHELSEA), 200)
    assert.deepEqual(await json(await post(multipart(CHELSEA)), 200), raw)
  })

  test('a bad image: 400 with the error code', async () => {
    await error(await postImage(Buffer.from('definitely not a PNG')), 400, 'InvalidImage', /cannot decode the image/)
    await error(await post(multipart(Buffer.from('nope'))), 400, 'InvalidImage', /cannot decode the image/)
    await error(await post(Buffer.alloc(0), { 'content-type': 'image/png' }), 400, 'InvalidImage', /\(0 bytes\)/)
    // No Content-Length and not chunked (fetch always sends one): a request with no body at all.
    const { port } = service.server.address()
    const reply = await new Promise((resolve, reject) => {
      const socket = net.connect(port, '127.0.0.1', () => {
        socket.end(
          'POST /v1/classify HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: image/png\r\nConnection: close\r\n\r\n',
        )
      })
      let text = ''
      socket.on('data', (chunk) => {
        text += chunk
      })
      socket.on('end', () => resolve(text))
      socket.on('error', reject)
    })
    assert.match(reply, /^HTTP\/1\.1 400 /)
    assert.match(reply, /\{"error":\{"code":"InvalidImage","message":"the request has no body: send an image"\}\}$/)
  })

  test('over maxBytes: 413, raw or multipart', async () => {
    const big = Buffer.concat([CHELSEA, CHELSEA]) // 481,024 bytes > 256 KiB
    await error(await postImage(big), 413, 'PayloadTooLarge', /too large/)
    await error(await post(multipart(big)), 413, 'PayloadTooLarge', /over 262144 bytes/)
  })

  test('bad requests: 415 for other types, 400 for bad topk or multipart, 404 elsewhere', async () => {
    await error(await post('hello', { 'content-type': 'text/plain' }), 415, 'UnsupportedMediaType', /image\/\*/)
    await error(
      await postImage(CHELSEA, 'image/png', '?topk=0'),
      400,
      'InvalidArg',
      /topk: expected a positive integer/,
    )
    await error(
      await postImage(CHELSEA, 'image/png', '?topk=1001'),
      400,
      'InvalidArg',
      /more than the model's 1000 classes/,
    )
    const form = new FormData()
    form.append('note', 'no file here')
    await error(await post(form), 400, 'InvalidArg', /expected a file part/)
    const two = multipart(CHELSEA)
    two.append('second', new Blob([CHELSEA]), 'again.png')
    await error(await post(two), 400, 'InvalidArg', /one image per request/)
    await error(await fetch(`${service.url}/v1/nope`), 404, 'NotFound', /no route GET \/v1\/nope/)
  })

  test('20 concurrent requests: all 200, all the same answer (within 1e-5: they share batches)', async () => {
    const before = service.batcher.stats()
    const answers = await Promise.all(
      Array.from({ length: 20 }, async (_, i) => {
        const res = i % 2 ? await post(multipart(CHELSEA)) : await postImage(CHELSEA)
        return json(res, 200)
      }),
    )
    // Matrix kernels block differently by batch size: the last bits of a row depend on its batch.
    for (const a of answers) {
      assert.deepEqual(
        a.predictions.map((p) => p.label),
        answers[0].predictions.map((p) => p.label),
      )
      a.predictions.forEach((p, k) => assert.ok(Math.abs(p.probability - answers[0].predictions[k].probability) < 1e-5))
    }
    assert.ok(CATS.includes(answers[0].predictions[0].index))
    const after = service.batcher.stats()
    assert.equal(after.completed - before.completed, 20)
    assert.ok(after.batches - before.batches <= 20)
  })
})

test(
  'a full queue answers 503 QueueFull at once, with Retry-After; the others are served',
  { timeout: 60_000 },
  async () => {
    // A fake classifier whose forward waits for the test: one request runs, one waits, the third
    // finds the queue (maxQueue 1) full. No timing: the test waits for each state to be reached.
    let open
    const gate = new Promise((resolve) => {
      open = resolve
    })
    const classifier = {
      forward: async (x) => {
        await gate
        return torch.zeros([x.shape[0], 1000])
      },
    }
    const batcher = new torch.Batcher(classifier, { maxBatchSize: 1, maxQueue: 1, concurrency: 1 })
    const app = createApp(batcher, { maxBytes: MAX_BYTES, preprocess: LITE0_PREPROCESS })
    const server = await new Promise((resolve) => {
      const s = app.listen(0, '127.0.0.1', () => resolve(s))
    })
    const post = () =>
      fetch(`http://127.0.0.1:${server.address().port}/v1/classify?topk=1`, {
        method: 'POST',
        body: CHELSEA,
        headers: { 'content-type': 'image/png' },
      })
    const until = async (ok) => {
      while (!ok(batcher.stats())) await new Promise((resolve) => setTimeout(resolve, 5))
    }
    try {
      const first = post()
      await until((s) => s.inFlight === 1)
      const second = post()
      await until((s) => s.queued === 1)
      const refused = await post()
      assert.equal(refused.status, 503)
      assert.equal(refused.headers.get('retry-after'), '1')
      assert.deepEqual(await refused.json(), {
        error: {
          code: 'QueueFull',
          message: 'Batcher.run: the queue is full (1 waiting, options.maxQueue); try again later',
        },
      })
      open()
      for (const res of [await first, await second]) {
        assert.equal(res.status, 200)
        assert.equal((await res.json()).predictions[0].probability, Math.fround(0.001)) // softmax of zeros, float32
      }
      assert.deepEqual([batcher.stats().completed, batcher.stats().rejected], [2, 1])
    } finally {
      open()
      server.closeAllConnections()
      await new Promise((resolve) => server.close(resolve))
      await batcher.close()
    }
  },
)

test('start refuses a bad maxBytes and a missing model with coded errors', async () => {
  await assert.rejects(start({ port: 0, maxBytes: Number('x') }), {
    code: 'InvalidArg',
    message: /maxBytes: expected a positive integer, got NaN/,
  })
  await assert.rejects(start({ port: 0, model: path.join(ROOT, 'no-such-model.pt') }), { code: 'ModelLoadError' })
  await assert.rejects(start({ port: 0, batch: { maxQueue: 0 } }), { code: 'InvalidArg', message: /options\.maxQueue/ })
})

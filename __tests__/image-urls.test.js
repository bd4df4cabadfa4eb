'use strict'
// http(s) image URLs in chats (`fetchImages`, serve's --fetch-images / --allowed-media-domains):
// a local image server on 127.0.0.1 stands in for the web. A fetched image gives the text its
// data: URL gives; redirects are followed (and bounded), and each failure — a host not allowed, a
// 404, a text answer, a body past maxImageBytes with or without a content-length, an answer that
// never comes — is a 400 naming the part, after which the server keeps serving. Off, the default:
// a 400 that says how to turn it on.
const { describe, test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const http = require('node:http')
const path = require('node:path')
const torch = require('..')

const FIXTURE = path.join(__dirname, '..', 'models', 'golden', 'vlm', 'llava-tiny')
const NO_VLM = !fs.existsSync(path.join(FIXTURE, 'manifest.json')) && 'no LLaVA fixture: run `npm run models -- --lazy`'
const JPEG = fs.readFileSync(path.join(__dirname, '..', 'models', 'images', 'rocket.jpg'))
const TIMEOUT = { timeout: 120_000 }

describe('http(s) image URLs in the chat', { skip: NO_VLM }, () => {
  let images, base, served, strict, closed, patient, onHang
  let fetched = 0
  const hung = new Set()

  before(async () => {
    images = http.createServer((req, res) => {
      const send = (status, type, body, headers = {}) => {
        res.writeHead(status, { 'content-type': type, ...headers })
        res.end(body)
      }
      if (req.url === '/rocket.jpg') {
        fetched++
        return send(200, 'image/jpeg', JPEG)
      }
      if (req.url === '/moved') return send(302, 'text/plain', '', { location: '/rocket.jpg' })
      if (req.url === '/loop') return send(302, 'text/plain', '', { location: '/loop' })
      if (req.url === '/page') return send(200, 'text/html', '<html></html>')
      if (req.url === '/big') return send(200, 'image/jpeg', Buffer.alloc(300_000))
      if (req.url === '/big-chunked') {
        // No content-length: the bound holds as the bytes come.
        res.writeHead(200, { 'content-type': 'image/jpeg' })
        for (let i = 0; i < 30; i++) res.write(Buffer.alloc(10_000))
        return res.end()
      }
      if (req.url === '/hang') {
        onHang?.(req)
        return hung.add(res) // never answered; ended in after()
      }
      send(404, 'text/plain', 'no')
    })
    await new Promise((resolve) => images.listen(0, '127.0.0.1', resolve))
    base = `http://127.0.0.1:${images.address().port}`
    const limits = { maxImageBytes: 200_000, imageFetchTimeoutMs: 1_000 }
    served = await torch.serve({ models: { llava: FIXTURE }, port: 0, fetchImages: ['127.0.0.1'], limits })
    strict = await torch.serve({ models: { llava: FIXTURE }, port: 0, fetchImages: ['example.com'] })
    closed = await torch.serve({ models: { llava: FIXTURE }, port: 0 })
    const wait = { imageFetchTimeoutMs: 600_000 }
    patient = await torch.serve({ models: { llava: FIXTURE }, port: 0, fetchImages: true, limits: wait })
  })
  after(async () => {
    await Promise.all([served, strict, closed, patient].map((s) => s?.close()))
    for (const res of hung) res.destroy()
    images.closeAllConnections()
    await new Promise((resolve) => images.close(resolve))
  })

  const chat = async (server, url) => {
    const res = await fetch(`${server.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        model: 'llava',
        max_tokens: 8,
        temperature: 0,
        messages: [
          {
            role: 'user',
            content: [
              { type: 'image_url', image_url: { url } },
              { type: 'text', text: 'What?' },
            ],
          },
        ],
      }),
    })
    return { status: res.status, body: await res.json() }
  }

  test('a fetched image gives what its data: URL gives; redirects are followed', TIMEOUT, async () => {
    const data = await chat(served, `data:image/jpeg;base64,${JPEG.toString('base64')}`)
    assert.equal(data.status, 200, JSON.stringify(data.body))
    for (const url of [`${base}/rocket.jpg`, `${base}/moved`]) {
      const got = await chat(served, url)
      assert.equal(got.status, 200, JSON.stringify(got.body))
      assert.equal(got.body.choices[0].message.content, data.body.choices[0].message.content)
      assert.deepEqual(got.body.usage, data.body.usage)
    }
  })

  test('each failure is a 400 naming the part; the server keeps serving', TIMEOUT, async () => {
    const refusals = [
      [served, `${base}/missing.png`, /answered HTTP 404/],
      [served, `${base}/page`, /is not an image \(content-type "text\/html"\)/],
      [served, `${base}/big`, /larger than 200000 bytes/],
      [served, `${base}/big-chunked`, /larger than 200000 bytes/],
      [served, `${base}/loop`, /more than 3 redirects/],
      [served, `${base}/hang`, /took longer than 1000 ms/],
      [served, 'ftp://127.0.0.1/x.png', /expected a data:image\/\.\.\.;base64 URL or an http\(s\) URL/],
      [strict, `${base}/rocket.jpg`, /"127\.0\.0\.1" is not among the hosts this server fetches from/],
      [closed, `${base}/rocket.jpg`, /this server fetches no image URL \(start it with --fetch-images/],
    ]
    for (const [server, url, message] of refusals) {
      const got = await chat(server, url)
      assert.equal(got.status, 400, `${url}: ${JSON.stringify(got.body)}`)
      assert.equal(got.body.error.code, 'InvalidArg')
      assert.match(got.body.error.message, /^messages\[0\]\.content\[0\]\.image_url: /)
      assert.match(got.body.error.message, message)
    }
    assert.equal((await chat(served, `${base}/rocket.jpg`)).status, 200)
  })

  test('more images than maxImages (32) is a 400 before any is fetched', TIMEOUT, async () => {
    const before = fetched
    const res = await fetch(`${served.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        model: 'llava',
        max_tokens: 2,
        messages: [
          {
            role: 'user',
            content: Array.from({ length: 33 }, () => ({
              type: 'image_url',
              image_url: { url: `${base}/rocket.jpg` },
            })),
          },
        ],
      }),
    })
    const body = await res.json()
    assert.equal(res.status, 400, JSON.stringify(body))
    assert.match(body.error.message, /^messages: at most 32 images in one request, got 33/)
    assert.equal(fetched, before)
  })

  test('a client that hangs up stops its image fetch', TIMEOUT, async () => {
    const seen = new Promise((resolve) => (onHang = resolve))
    const leaving = new AbortController()
    const sent = fetch(`${patient.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      signal: leaving.signal,
      body: JSON.stringify({
        model: 'llava',
        max_tokens: 2,
        messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: `${base}/hang` } }] }],
      }),
    }).catch(() => {})
    const req = await seen
    const closed = new Promise((resolve) => req.on('close', resolve))
    leaving.abort()
    await sent
    // The server's fetch of /hang is given up (its time limit is 10 minutes): the image server sees it close.
    await closed
  })

  test('the Responses API fetches input_image URLs the same way', TIMEOUT, async () => {
    const ask = async (server) => {
      const res = await fetch(`${server.url}/v1/responses`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          model: 'llava',
          max_output_tokens: 8,
          temperature: 0,
          input: [{ role: 'user', content: [{ type: 'input_image', image_url: `${base}/rocket.jpg` }] }],
        }),
      })
      return { status: res.status, body: await res.json() }
    }
    const got = await ask(served)
    assert.equal(got.status, 200, JSON.stringify(got.body))
    const refused = await ask(closed)
    assert.equal(refused.status, 400)
    assert.match(refused.body.error.message, /^input\[0\]\.content\[0\]: this server fetches no image URL/)
  })
})

const CLIP = path.join(__dirname, '..', 'models', 'golden', 'clip', 'clip')
const NO_CLIP = !fs.existsSync(path.join(CLIP, 'manifest.json')) && 'no CLIP fixture: run `npm run models -- --lazy`'

describe('http(s) image URLs on /v1/embeddings (CLIP)', { skip: NO_CLIP }, () => {
  let images, base, served

  before(async () => {
    images = http.createServer((req, res) => {
      if (req.url === '/rocket.jpg') {
        res.writeHead(200, { 'content-type': 'image/jpeg' })
        return res.end(JPEG)
      }
      res.writeHead(404).end()
    })
    await new Promise((resolve) => images.listen(0, '127.0.0.1', resolve))
    base = `http://127.0.0.1:${images.address().port}`
    served = await torch.serve({ models: { clip: CLIP }, port: 0, fetchImages: true })
  })
  after(async () => {
    await served?.close()
    images.closeAllConnections()
    await new Promise((resolve) => images.close(resolve))
  })

  const embed = async (input) => {
    const res = await fetch(`${served.url}/v1/embeddings`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'clip', input }),
    })
    return { status: res.status, body: await res.json() }
  }

  test("an image_url part's URL is fetched: the embedding of its data: URL", TIMEOUT, async () => {
    const data = await embed([
      { type: 'image_url', image_url: { url: `data:image/jpeg;base64,${JPEG.toString('base64')}` } },
    ])
    const got = await embed([{ type: 'image_url', image_url: { url: `${base}/rocket.jpg` } }, 'a rocket'])
    assert.equal(got.status, 200, JSON.stringify(got.body))
    assert.deepEqual(got.body.data[0].embedding, data.body.data[0].embedding)
    const missing = await embed([{ type: 'image_url', image_url: { url: `${base}/gone.jpg` } }])
    assert.equal(missing.status, 400)
    assert.match(missing.body.error.message, /^input\[0\]\.image_url\.url: fetching .* answered HTTP 404/)
  })
})

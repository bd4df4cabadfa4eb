'use strict'
// Hostile image URLs for serve's fetcher (lib/serve/media.js), against a local server on all
// interfaces standing in for the web: a redirect from an allowed host to one that is not, URLs
// with credentials (refused, and never echoed), redirects to file: and to unparsable URLs, a body
// that drips forever, an endless body, an IPv6 literal, timeouts past Node's timer range, and the
// allowed-domains matching (subdomains yes, look-alike suffixes no). Each failure is a 400
// `InvalidArg` HttpError, and a good fetch works after it.
const { describe, test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const http = require('node:http')
const media = require('../lib/serve/media')

const JPEG = Buffer.from([0xff, 0xd8, 0xff, 0xe0, 1, 2, 3])

describe('fetchImage under hostile URLs', () => {
  let server, port
  const open = new Set()
  before(async () => {
    server = http.createServer((req, res) => {
      open.add(res)
      res.on('close', () => open.delete(res))
      const send = (status, headers, body) => {
        res.writeHead(status, headers)
        res.end(body)
      }
      if (req.url === '/img') return send(200, { 'content-type': 'image/jpeg' }, JPEG)
      if (req.url === '/to-other') return send(302, { location: `http://127.0.0.1:${port}/img` })
      if (req.url === '/to-creds') return send(302, { location: `http://u:hunter2@localhost:${port}/img` })
      if (req.url === '/to-file') return send(302, { location: 'file:///etc/passwd' })
      if (req.url === '/to-bad') return send(302, { location: 'http://[zz' })
      if (req.url === '/drip') {
        // A byte every 20 ms, until the client gives up (or 5000 bytes: bounded if it never does).
        res.writeHead(200, { 'content-type': 'image/jpeg' })
        let n = 0
        const timer = setInterval(() => (++n > 5000 ? res.end() : res.write('x')), 20)
        return res.on('close', () => clearInterval(timer))
      }
      if (req.url === '/endless') {
        res.writeHead(200, { 'content-type': 'image/png' })
        let n = 0
        const write = () => {
          while (n < 2000 && res.write(Buffer.alloc(65536))) n++
          if (n < 2000 && !res.destroyed) res.once('drain', write)
          else res.end()
        }
        return write()
      }
      send(404, { 'content-type': 'text/plain' }, 'no')
    })
    // All interfaces: "localhost", 127.0.0.1 and [::1] reach it (where the machine has IPv6).
    await new Promise((resolve) => server.listen(0, resolve))
    port = server.address().port
  })
  after(async () => {
    for (const res of open) res.destroy()
    server.closeAllConnections()
    await new Promise((resolve) => server.close(resolve))
  })

  const get = (url, o = {}) =>
    media.fetchImage(new URL(url), { policy: true, maxBytes: 1000, timeoutMs: 2000, where: 'part', ...o })
  const refuses = async (url, o, pattern) => {
    await assert.rejects(get(url, o), (e) => {
      assert.equal(e.status, 400, e.message)
      assert.equal(e.code, 'InvalidArg')
      assert.match(e.message, pattern)
      assert.doesNotMatch(e.message, /hunter2|\n/)
      return true
    })
    // and the fetcher still fetches
    assert.deepEqual(await get(`http://127.0.0.1:${port}/img`), JPEG)
  }

  test('a redirect from an allowed host to a host not allowed is refused', async () => {
    const policy = media.policyOf(['localhost'])
    assert.deepEqual(await get(`http://localhost:${port}/img`, { policy }), JPEG)
    await refuses(`http://localhost:${port}/to-other`, { policy }, /"127\.0\.0\.1" is not among the hosts/)
  })

  test('a URL with credentials is refused without echoing them, given or redirected to', async () => {
    await refuses(`http://user:hunter2@127.0.0.1:${port}/img`, {}, /credentials/)
    await refuses(`http://127.0.0.1:${port}/to-creds`, {}, /credentials/)
  })

  test('redirects to file: and to an unparsable URL are 400s', async () => {
    await refuses(`http://127.0.0.1:${port}/to-file`, {}, /not http\(s\)/)
    await refuses(`http://127.0.0.1:${port}/to-bad`, {}, /cannot fetch/)
  })

  test('a body that drips forever times out; an endless body stops at maxBytes', async () => {
    await refuses(`http://127.0.0.1:${port}/drip`, { timeoutMs: 300 }, /took longer than 300 ms/)
    await refuses(`http://127.0.0.1:${port}/endless`, {}, /larger than 1000 bytes/)
  })

  test("a timeout past Node's timer range is the longest timer, not 1 ms or a RangeError", async () => {
    assert.deepEqual(await get(`http://127.0.0.1:${port}/img`, { timeoutMs: 3e9 }), JPEG)
    assert.deepEqual(await get(`http://127.0.0.1:${port}/img`, { timeoutMs: 2 ** 32 }), JPEG)
  })

  test('allowed domains: the host and its subdomains, any case, a trailing dot; no look-alikes', () => {
    const policy = media.policyOf(['example.com'])
    const ok = (u) => media.allowed(new URL(u), policy)
    assert.equal(ok('http://example.com/a.png'), true)
    assert.equal(ok('http://a.b.EXAMPLE.com/a.png'), true)
    assert.equal(ok('http://example.com./a.png'), true)
    assert.equal(ok('http://evilexample.com/a.png'), false)
    assert.equal(ok('http://example.com.evil.net/a.png'), false)
    assert.equal(ok('http://[::1]/a.png'), false)
    assert.throws(() => media.policyOf(['ex ample.com']), TypeError)
    assert.throws(() => media.policyOf([]), TypeError)
    assert.throws(() => media.policyOf('example.com'), TypeError)
  })
})

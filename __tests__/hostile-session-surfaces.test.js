'use strict'
// Hostile callers of this session's new surfaces, each attack run in a child process (a crash
// there fails the test, not the runner): the text-to-speech pipeline and encodeWav (throwing
// getters, Proxies, Symbols, BigInt seeds, lone surrogates, a 10 MB text, lying Float32Array
// subclasses, detached and shrunk buffers, abort and dispose() mid-flight), POST /v1/audio/speech
// (malformed JSON, each field's wrong types and edges, a body past the limit, clients hanging up)
// and the zero-shot object detector (thousands of labels, a 10 MB label, lone surrogates, NaN and
// BigInt options, detached and resized images, a decompression bomb, dispose() mid-flight). Each
// child answers every attack with a coded error (or a 4xx), then serves a good call.
const { describe, test } = require('node:test')
const assert = require('node:assert/strict')
const { execFile } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')
const zlib = require('node:zlib')

const ROOT = path.join(__dirname, '..')
const TTS = path.join(ROOT, 'models', 'golden', 'tts', 'vits')
const OWL = path.join(ROOT, 'models', 'golden', 'clip')
const NO_TTS = !fs.existsSync(path.join(TTS, 'manifest.json')) && 'no VITS fixture: run `node tools/models.js --lazy`'
const NO_OWL =
  !fs.existsSync(path.join(OWL, 'owlvit', 'manifest.json')) && 'no OWL fixture: run `node tools/models.js --lazy`'
const TIMEOUT = { timeout: 240_000 }

/**
 * Runs `body` (an async function's body, with `torch`, `root`, `results` and `attempt(name, fn)`
 * in scope) in a child node process; resolves with `results`: name -> the error's code (or
 * 'ok', or what `fn` returned when it is a string). A child that crashes rejects.
 */
function child(body) {
  const script = `
    const torch = require(${JSON.stringify(ROOT)})
    const root = ${JSON.stringify(ROOT)}
    const results = {}
    const attempt = async (name, fn) => {
      try {
        const v = await fn()
        results[name] = typeof v === 'string' ? v : 'ok'
      } catch (e) {
        results[name] = e && typeof e.code === 'string' && e instanceof Error && !e.message.includes('\\n') ? e.code : 'uncoded: ' + e
      }
    }
    ;(async () => { ${body} })().then(
      () => process.stdout.write(JSON.stringify(results)),
      (e) => { console.error(e); process.exit(3) },
    )`
  return new Promise((resolve, reject) => {
    execFile(process.execPath, ['-e', script], { timeout: 200_000, maxBuffer: 2 ** 24 }, (err, stdout, stderr) => {
      if (err) return reject(new Error(`child failed (${err.code ?? err.signal}): ${stderr.slice(-2000)}`))
      resolve(JSON.parse(stdout))
    })
  })
}

describe('the text-to-speech pipeline and encodeWav under hostile callers', { skip: NO_TTS }, () => {
  test('every attack a coded error; a good call after', TIMEOUT, async () => {
    const got = await child(`
      const { TextToSpeechPipeline, encodeWav } = require(root + '/lib/audio/text-to-speech')
      const tts = await TextToSpeechPipeline.load(root + '/models/golden/tts/vits')
      await attempt('symbol text', () => tts.run(Symbol('x')))
      await attempt('seed 2^63', () => tts.run('hi', { seed: 2n ** 63n }))
      await attempt('seed -1n', () => tts.run('hi', { seed: -1n }))
      await attempt('seed 2^63-1', () => tts.run('hi', { seed: 2n ** 63n - 1n }))
      await attempt('speakingRate NaN', () => tts.run('hi', { speakingRate: NaN }))
      await attempt('lone surrogates', () => tts.run('\\ud800hi\\udc00', { seed: 1 }))
      await attempt('only a lone surrogate', () => tts.run('\\ud800'))
      await attempt('10 MB text', () => tts.run('a'.repeat(10 * 2 ** 20)))
      await attempt('sparse array', () => tts.run(new Array(3)))
      await attempt('100000 texts, the last bad', () => tts.run(new Array(100000).fill('hi').concat([5])))
      const aborted = AbortSignal.abort()
      await attempt('aborted signal', () => tts.run('hi', { signal: aborted }))
      const ac = new AbortController()
      const mid = tts.run(['hello there', 'and more'], { signal: ac.signal, seed: 1 })
      ac.abort()
      await attempt('aborted mid-call', () => mid)
      // encodeWav: buffers detached, shrunk, and subclasses or Proxies that lie
      const ab = new ArrayBuffer(16)
      const detached = new Float32Array(ab)
      structuredClone(ab, { transfer: [ab] })
      await attempt('wav of a detached array', () => String(encodeWav(detached, 16000).length))
      const rab = new ArrayBuffer(16, { maxByteLength: 64 })
      const shrunk = new Float32Array(rab)
      rab.resize(4)
      await attempt('wav of a shrunk array', () => String(encodeWav(shrunk, 16000, { format: 'float32' }).length))
      class Liar extends Float32Array {
        get length() { return 1e6 }
        get buffer() { return new ArrayBuffer(8) }
      }
      await attempt('wav float32 of a lying subclass', () => String(encodeWav(new Liar(4), 16000, { format: 'float32' }).length))
      await attempt('wav pcm16 of a lying subclass', () => String(encodeWav(new Liar(4), 16000).length))
      await attempt('wav of a Proxy', () => encodeWav(new Proxy(new Float32Array(4), {}), 16000))
      await attempt('wav of a Float64Array', () => encodeWav(new Float64Array(4), 16000))
      await attempt('wav at NaN Hz', () => encodeWav(new Float32Array(4), NaN))
      // concurrent calls, dispose() while they wait, calls after
      const many = Array.from({ length: 6 }, (_, i) => tts.run('hello ' + i, { seed: i }))
      await new Promise((resolve) => setImmediate(resolve))
      tts.dispose()
      const settled = await Promise.allSettled(many)
      results['disposed mid-flight'] = settled.map((s) => (s.status === 'fulfilled' ? 'ok' : s.reason.code)).join(',')
      await attempt('after dispose', () => tts.run('hi'))
      const again = await TextToSpeechPipeline.load(root + '/models/golden/tts/vits')
      await attempt('good after', async () => String((await again.run('hello', { seed: 3 })).audio.length > 0))
      again.dispose()
    `)
    assert.deepEqual(got, {
      'symbol text': 'InvalidArg',
      'seed 2^63': 'InvalidArg',
      'seed -1n': 'InvalidArg',
      'seed 2^63-1': 'ok',
      'speakingRate NaN': 'InvalidArg',
      'lone surrogates': 'ok',
      'only a lone surrogate': 'InvalidArg',
      '10 MB text': 'InvalidArg',
      'sparse array': 'InvalidArg',
      '100000 texts, the last bad': 'InvalidArg',
      'aborted signal': 'Aborted',
      'aborted mid-call': 'Aborted',
      'wav of a detached array': '44',
      'wav of a shrunk array': '48',
      // the array's own 4 samples, whatever its getters say
      'wav float32 of a lying subclass': '60',
      'wav pcm16 of a lying subclass': '52',
      'wav of a Proxy': 'InvalidArg',
      'wav of a Float64Array': 'InvalidArg',
      'wav at NaN Hz': 'InvalidArg',
      'disposed mid-flight': got['disposed mid-flight'],
      'after dispose': 'Disposed',
      'good after': 'true',
    })
    // The call running at dispose() finishes; the ones waiting are Disposed.
    assert.match(got['disposed mid-flight'], /^(ok|Disposed)(,(ok|Disposed)){5}$/)
  })
})

describe('POST /v1/audio/speech under hostile requests', { skip: NO_TTS }, () => {
  test('every bad request a 4xx; hang-ups and concurrent calls leave it serving', TIMEOUT, async () => {
    const got = await child(`
      const served = await torch.serve({ models: { tts: root + '/models/golden/tts/vits' }, port: 0 })
      const url = served.url + '/v1/audio/speech'
      const send = (body) =>
        fetch(url, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: typeof body === 'string' ? body : JSON.stringify(body),
        })
      const status = async (body) => {
        const res = await send(body)
        const text = await res.text()
        // an error answer is JSON, its message naming the request's field
        if (res.status === 400) return JSON.parse(text).error.message.split(':')[0]
        return String(res.status)
      }
      const g = { model: 'tts', input: 'hello', voice: 'x', seed: 1 }
      const cases = {
        'malformed JSON': '{"model": "tts", "input": ',
        'an array body': '[]',
        'input a number': { ...g, input: 5 },
        'input 4097 characters': { ...g, input: 'a'.repeat(4097) },
        'input 4096 emoji (out of the vocabulary)': { ...g, input: '\\u{1F600}'.repeat(4096) },
        'input lone surrogates': { ...g, input: '\\ud800hello\\udfff' },
        'input whitespace': { ...g, input: ' \\n\\t ' },
        'voice an object': { ...g, voice: {} },
        'voice 300 characters': { ...g, voice: 'v'.repeat(300) },
        'response_format mp3': { ...g, response_format: 'mp3' },
        'response_format an array': { ...g, response_format: ['wav'] },
        'speed 0.2499': { ...g, speed: 0.2499 },
        'speed 0.25': { ...g, speed: 0.25 },
        'speed 4': { ...g, speed: 4 },
        'speed 4.0001': { ...g, speed: 4.0001 },
        'speed 1e308': { ...g, speed: 1e308 },
        'speed a string': { ...g, speed: '1' },
        'seed 1.5': { ...g, seed: 1.5 },
        'seed 2^60': { ...g, seed: 2 ** 60 },
        'model an object': { ...g, model: {} },
        'stream_format sse': { ...g, stream_format: 'sse' },
        'a __proto__ key': '{"model":"tts","input":"hi","voice":"x","__proto__":{"input":5}}',
        'a 20 MB body': JSON.stringify({ ...g, input: 'a'.repeat(20 * 2 ** 20) }),
      }
      for (const [name, body] of Object.entries(cases)) await attempt(name, () => status(body))
      // Clients hanging up before the answer: the socket closed once the whole body is sent.
      const http = require('node:http')
      for (let i = 0; i < 3; i++) {
        const body = JSON.stringify({ ...g, input: 'hello there how are you '.repeat(20 * (i + 1)) })
        const req = http.request(url, { method: 'POST', headers: { 'content-type': 'application/json' } })
        const closed = new Promise((resolve) => req.on('close', resolve))
        req.on('error', () => {})
        req.on('finish', () => req.destroy())
        req.end(body)
        await closed
      }
      const all = await Promise.all(Array.from({ length: 6 }, (_, i) => status({ ...g, seed: i })))
      results['6 concurrent'] = all.join(',')
      await attempt('good after', () => status(g))
      await served.close()
    `)
    // each 400 as its message's first words: the field it names
    const want = {
      'malformed JSON': 'the body is not JSON',
      'an array body': 'the body must be a JSON object',
      'input a number': 'input',
      'input 4097 characters': 'input',
      'input 4096 emoji (out of the vocabulary)': 'input',
      'input lone surrogates': '200',
      'input whitespace': 'input',
      'voice an object': 'voice',
      'voice 300 characters': 'voice',
      'response_format mp3': 'response_format',
      'response_format an array': 'response_format',
      'speed 0.2499': 'speed',
      'speed 0.25': '200',
      'speed 4': '200',
      'speed 4.0001': 'speed',
      'speed 1e308': 'speed',
      'speed a string': 'speed',
      'seed 1.5': 'seed',
      'seed 2^60': 'seed',
      'model an object': '404',
      'stream_format sse': 'stream_format',
      'a __proto__ key': 'unknown key "__proto__"',
      'a 20 MB body': '413',
      '6 concurrent': '200,200,200,200,200,200',
      'good after': '200',
    }
    assert.deepEqual(got, want)
  })
})

/** A valid PNG of `size`² 1-bit pixels, all black: a few kB that decode to size² RGB pixels. */
function pngBomb(size) {
  const row = Buffer.alloc(1 + Math.ceil(size / 8))
  const raw = zlib.deflateSync(Buffer.concat(Array.from({ length: size }, () => row)))
  const chunk = (type, data) => {
    const head = Buffer.alloc(8)
    head.writeUInt32BE(data.length, 0)
    head.write(type, 4, 'latin1')
    const crc = Buffer.alloc(4)
    crc.writeUInt32BE(zlib.crc32(Buffer.concat([Buffer.from(type, 'latin1'), data])), 0)
    return Buffer.concat([head, data, crc])
  }
  const ihdr = Buffer.alloc(13)
  ihdr.writeUInt32BE(size, 0)
  ihdr.writeUInt32BE(size, 4)
  ihdr[8] = 1 // bit depth 1, grayscale, no interlace
  const signature = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])
  return Buffer.concat([signature, chunk('IHDR', ihdr), chunk('IDAT', raw), chunk('IEND', Buffer.alloc(0))])
}

describe('zero-shot object detection under hostile callers', { skip: NO_OWL }, () => {
  for (const family of ['owlvit', 'owlv2']) {
    test(`${family}: every attack a coded error; a good call after`, TIMEOUT, async () => {
      const bomb = path.join(require('node:os').tmpdir(), `torch-node-bomb-${process.pid}.png`)
      if (typeof zlib.crc32 === 'function') fs.writeFileSync(bomb, pngBomb(20000))
      try {
        const got = await child(`
          const fs = require('node:fs')
          const folder = root + '/models/golden/clip/${family}'
          const det = await torch.pipeline('zero-shot-object-detection', folder)
          const image = root + '/models/golden/clip/owl-coffee.png'
          const bytes = fs.readFileSync(image)
          const L = { candidateLabels: ['cat', 'cup'] }
          await attempt('2000 labels', () => det.run(image, { candidateLabels: Array.from({ length: 2000 }, (_, i) => 'l' + i) }))
          await attempt('10 MB of commas', () => det.run(image, { candidateLabels: ','.repeat(10 * 2 ** 20) }))
          await attempt('a 10 MB label', () => det.run(image, { candidateLabels: ['a '.repeat(5 * 2 ** 20)] }))
          await attempt('a lone surrogate label', () => det.run(image, { candidateLabels: ['\\ud800'] }))
          await attempt('a Symbol label', () => det.run(image, { candidateLabels: [Symbol('x')] }))
          await attempt('threshold NaN', () => det.run(image, { ...L, threshold: NaN }))
          await attempt('topK 0', () => det.run(image, { ...L, topK: 0 }))
          await attempt('topK a BigInt', () => det.run(image, { ...L, topK: 5n }))
          const ab = new ArrayBuffer(bytes.length)
          new Uint8Array(ab).set(bytes)
          const detached = new Uint8Array(ab)
          structuredClone(ab, { transfer: [ab] })
          await attempt('a detached image', () => det.run(detached, L))
          const rab = new ArrayBuffer(bytes.length, { maxByteLength: 2 * bytes.length })
          const shrunk = new Uint8Array(rab)
          shrunk.set(bytes)
          rab.resize(100)
          await attempt('a shrunk image', () => det.run(shrunk, L))
          await attempt('a Uint16Array', () => det.run(new Uint16Array(10), L))
          await attempt('bytes that are no image', () => det.run(new Uint8Array(1000).fill(7), L))
          if (fs.existsSync(${JSON.stringify(bomb)})) await attempt('a PNG bomb', () => det.run(${JSON.stringify(bomb)}, L))
          else results['a PNG bomb'] = 'InvalidImage' // (node without zlib.crc32 makes none)
          await attempt('a float32 Tensor', () => det.run(torch.zeros([3, 4, 4]), L))
          await attempt('an empty Tensor', () => det.run(torch.zeros([3, 0, 4], { dtype: 'uint8' }), L))
          const gone = torch.zeros([3, 8, 8], { dtype: 'uint8' })
          gone.dispose()
          await attempt('a disposed Tensor', () => det.run(gone, L))
          await attempt('no options', () => det.run(image))
          await attempt('an aborted signal', () => det.run(image, { ...L, signal: AbortSignal.abort() }))
          const ac = new AbortController()
          const mid = det.run([image, image, image], { ...L, signal: ac.signal })
          ac.abort()
          await attempt('aborted mid-call', () => mid)
          const many = Array.from({ length: 6 }, (_, i) => det.run(image, { candidateLabels: ['x' + i] }))
          await new Promise((resolve) => setImmediate(resolve))
          det.dispose()
          const settled = await Promise.allSettled(many)
          results['disposed mid-flight'] = settled.every((s) => s.status === 'fulfilled' || s.reason.code === 'Disposed') ? 'settled' : 'other'
          await attempt('after dispose', () => det.run(image, L))
          const again = await torch.pipeline('zero-shot-object-detection', folder)
          await attempt('good after', async () => String((await again.run(image, L)).length > 0))
          again.dispose()
        `)
        assert.deepEqual(got, {
          '2000 labels': 'InvalidArg',
          '10 MB of commas': 'InvalidArg',
          'a 10 MB label': 'InvalidArg',
          'a lone surrogate label': 'InvalidArg',
          'a Symbol label': 'InvalidArg',
          'threshold NaN': 'InvalidArg',
          'topK 0': 'InvalidArg',
          'topK a BigInt': 'InvalidArg',
          'a detached image': 'InvalidImage',
          'a shrunk image': 'InvalidImage',
          'a Uint16Array': 'InvalidArg',
          'bytes that are no image': 'InvalidImage',
          'a PNG bomb': 'InvalidImage',
          'a float32 Tensor': 'InvalidArg',
          'an empty Tensor': 'InvalidArg',
          'a disposed Tensor': 'Disposed',
          'no options': 'InvalidArg',
          'an aborted signal': 'Aborted',
          'aborted mid-call': 'Aborted',
          'disposed mid-flight': 'settled',
          'after dispose': 'Disposed',
          'good after': 'true',
        })
      } finally {
        fs.rmSync(bomb, { force: true })
      }
    })
  }
})

'use strict'
// /v1/audio/transcriptions and /v1/audio/translations over a Whisper folder (issue 51 item 4),
// through the `openai` client from npm and plain fetch: the text equals what
// torch.pipeline('automatic-speech-recognition') gives on the same file, and transformers'
// generate (models/make_whisper_models.py's goldens, 12 new tokens, the model's random weights);
// srt, vtt and verbose_json segments on the second test model (ts-model, timestamps allowed) equal
// the pipeline's chunks, which equal transformers' (timestamps.json, speech.test.js); what is not
// built (prompt, temperature > 0, word timestamps) and broken bodies are 4xx with codes, and
// the server keeps serving after each. Served by torch.serve, what `npx torch-node serve --model
// whisper=FOLDER` runs (its start-up line is checked too).
const { describe, test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const torch = require('..')

const DIR = path.join(__dirname, '..', 'models', 'golden', 'whisper')
const MODEL = path.join(DIR, 'model')
const WAV = path.join(DIR, 'speech.wav')
const FLAC = path.join(__dirname, '..', 'models', 'fixtures', 'audio', 'speech.flac')
const GOLDENS = path.join(DIR, 'goldens.json')
const TS_MODEL = path.join(DIR, 'ts-model')
const LONG = path.join(DIR, 'long.wav')
const SKIP = fs.existsSync(GOLDENS)
  ? false
  : 'no Whisper model: run `node tools/models.js --lazy` (make_whisper_models.py)'
const TIMEOUT = { timeout: 120_000 }

/** A mono 16-bit 16 kHz WAV of `seconds` of silence. @param {number} seconds */
function silentWav(seconds) {
  const data = seconds * 16000 * 2
  const head = Buffer.alloc(44)
  head.write('RIFF', 0)
  head.writeUInt32LE(36 + data, 4)
  head.write('WAVEfmt ', 8)
  head.writeUInt32LE(16, 16)
  head.writeUInt16LE(1, 20) // PCM
  head.writeUInt16LE(1, 22) // mono
  head.writeUInt32LE(16000, 24)
  head.writeUInt32LE(32000, 28)
  head.writeUInt16LE(2, 32)
  head.writeUInt16LE(16, 34)
  head.write('data', 36)
  head.writeUInt32LE(data, 40)
  return Buffer.concat([head, Buffer.alloc(data)])
}

describe('/v1/audio with a Whisper model', { skip: SKIP }, () => {
  const goldens = SKIP ? null : JSON.parse(fs.readFileSync(GOLDENS, 'utf8'))
  const maxNewTokens = goldens?.maxNewTokens
  const tsGoldens = SKIP ? null : JSON.parse(fs.readFileSync(path.join(DIR, 'timestamps.json'), 'utf8'))
  const segmentGoldens = SKIP ? null : JSON.parse(fs.readFileSync(path.join(DIR, 'segments.json'), 'utf8'))
  let served, url, client, asr, tsAsr

  before(async () => {
    // `whisper` decodes the goldens' 12 new tokens; `full` up to the folder's own bound.
    const ts = { folder: TS_MODEL, maxNewTokens: tsGoldens.maxNewTokens }
    served = await torch.serve({ models: { whisper: { folder: MODEL, maxNewTokens }, full: MODEL, ts } })
    url = `${served.url}/v1`
    const { default: OpenAI } = await import('openai')
    client = new OpenAI({ baseURL: url, apiKey: 'unused', maxRetries: 0 })
    asr = await torch.pipeline('automatic-speech-recognition', MODEL)
    tsAsr = await torch.pipeline('automatic-speech-recognition', TS_MODEL)
  })
  after(async () => {
    asr?.dispose()
    tsAsr?.dispose()
    await served?.close()
  })

  /** The form of a request: `file` (bytes) and the text fields. */
  const form = (/** @type {Buffer | null} */ file, /** @type {Record<string, string>} */ fields = {}) => {
    const f = new FormData()
    if (file) f.append('file', new Blob([file]), 'speech.wav')
    for (const [k, v] of Object.entries({ model: 'whisper', ...fields })) f.append(k, v)
    return f
  }
  const post = (body, route = 'transcriptions', headers = {}) =>
    fetch(`${url}/audio/${route}`, { method: 'POST', body, headers })
  /** A 4xx with `code` whose message matches `pattern`; then a good request still answers. */
  const refused = async (res, status, code, pattern) => {
    const body = await res.json()
    assert.equal(res.status, status, JSON.stringify(body))
    assert.equal(body.error.code, code)
    assert.match(body.error.message, pattern)
    const ok = await post(form(fs.readFileSync(WAV), { language: 'en' }))
    assert.equal(ok.status, 200)
    assert.equal((await ok.json()).text, goldens.cases[0].text)
  }

  test('the openai client: transcriptions equal the pipeline and transformers', TIMEOUT, async () => {
    const en = goldens.cases.find((c) => c.language === 'en' && c.task === 'transcribe')
    const got = await client.audio.transcriptions.create({
      file: fs.createReadStream(WAV),
      model: 'whisper',
      language: 'en',
    })
    const own = await asr.run(WAV, { language: 'en', task: 'transcribe', maxNewTokens })
    assert.equal(got.text, own.text)
    assert.equal(got.text, en.text)
    // The language detected: transformers' task-less transcribe case.
    const detected = goldens.cases.find((c) => c.language === null && c.task === 'transcribe')
    const auto = await client.audio.transcriptions.create({ file: fs.createReadStream(WAV), model: 'whisper' })
    assert.equal(auto.text, detected.text)
    assert.equal(auto.text, (await asr.run(WAV, { task: 'transcribe', maxNewTokens })).text)
  })

  test('the openai client: translations equal the pipeline', TIMEOUT, async () => {
    const got = await client.audio.translations.create({ file: fs.createReadStream(WAV), model: 'whisper' })
    const own = await asr.run(WAV, { task: 'translate', maxNewTokens })
    assert.equal(got.text, own.text)
    // Another task than transcribe's: a different prompt, so (with these weights) other tokens.
    const transcribed = await asr.run(WAV, { task: 'transcribe', maxNewTokens })
    assert.notDeepEqual(own.tokens, transcribed.tokens)
  })

  test("the folder's own bound, and FLAC", TIMEOUT, async () => {
    const got = await client.audio.transcriptions.create({
      file: fs.createReadStream(FLAC),
      model: 'full',
      language: 'en',
    })
    assert.equal(got.text, (await asr.run(FLAC, { language: 'en', task: 'transcribe' })).text)
  })

  test('response_format text and verbose_json', TIMEOUT, async () => {
    const want = goldens.cases[0]
    const text = await client.audio.transcriptions.create({
      file: fs.createReadStream(WAV),
      model: 'whisper',
      language: 'en',
      response_format: 'text',
    })
    assert.equal(text, `${want.text}\n`)
    const verbose = await client.audio.transcriptions.create({
      file: fs.createReadStream(WAV),
      model: 'whisper',
      language: 'en',
      response_format: 'verbose_json',
    })
    // verbose_json without timestamp_granularities[]=segment: no segments, decoded without timestamps.
    assert.deepEqual(verbose, { task: 'transcribe', language: 'english', duration: 1.5, text: want.text })
    const segmented = await client.audio.transcriptions.create({
      file: fs.createReadStream(WAV),
      model: 'whisper',
      language: 'en',
      response_format: 'verbose_json',
      timestamp_granularities: ['segment'],
    })
    const own = await asr.run(WAV, { language: 'en', task: 'transcribe', maxNewTokens, returnTimestamps: true })
    assert.equal(segmented.text, own.text)
    assert.equal(segmented.segments.length, own.chunks.length)
    const translated = await post(form(fs.readFileSync(WAV), { response_format: 'verbose_json' }), 'translations')
    const t = await translated.json()
    assert.equal(t.task, 'translate')
    assert.equal(t.text, (await asr.run(WAV, { task: 'translate', maxNewTokens })).text)
    assert.equal(typeof t.language, 'string')
  })

  test('what is not built is refused, not ignored', TIMEOUT, async () => {
    const wav = fs.readFileSync(WAV)
    await refused(await post(form(wav, { prompt: 'hello' })), 400, 'InvalidArg', /prompt: not supported/)
    await refused(
      await post(form(wav, { temperature: '1.5' })),
      400,
      'InvalidArg',
      /temperature: expected a number 0..1/,
    )
    await refused(
      await post(form(wav, { temperature: 'hot' })),
      400,
      'InvalidArg',
      /temperature: expected a number 0..1/,
    )
    await refused(await post(form(wav, { response_format: 'xml' })), 400, 'InvalidArg', /response_format/)
    const words = form(wav, { 'timestamp_granularities[]': 'word' })
    await refused(await post(words), 400, 'InvalidArg', /"word" timestamps are not made; send "segment"/)
    const segmentJson = form(wav, { 'timestamp_granularities[]': 'segment' })
    await refused(await post(segmentJson), 400, 'InvalidArg', /needs response_format verbose_json/)
    await refused(
      await post(form(wav, { language: 'en' }), 'translations'),
      400,
      'InvalidArg',
      /unknown field "language"/,
    )
    await refused(await post(form(wav, { stream: 'true' })), 400, 'InvalidArg', /unknown field "stream"/)
    // temperature 0 and an empty prompt are what is done: accepted.
    const zero = await post(form(wav, { language: 'en', temperature: '0', prompt: '' }))
    assert.equal(zero.status, 200)
    assert.equal((await zero.json()).text, goldens.cases[0].text)
    await assert.rejects(
      client.audio.transcriptions.create({ file: fs.createReadStream(WAV), model: 'whisper', temperature: 1.5 }),
      (e) => e.status === 400 && /temperature/.test(e.message),
    )
    // Above 0: openai-whisper's sampling with fallback (0.5, 0.7, 0.9), its thresholds, seeded.
    const sampled = await client.audio.transcriptions.create({
      file: fs.createReadStream(WAV),
      model: 'whisper',
      language: 'en',
      temperature: 0.5,
    })
    const fallback = { compressionRatioThreshold: 2.4, logprobThreshold: -1, noSpeechThreshold: 0.6, seed: 0 }
    const own = await asr.run(WAV, { language: 'en', maxNewTokens, temperature: [0.5, 0.7, 0.9], ...fallback })
    assert.equal(sampled.text, own.text)
    assert.notEqual(sampled.text, goldens.cases[0].text)
  })

  test('bad audio, a missing file, the wrong model: 4xx with codes', TIMEOUT, async () => {
    await refused(await post(form(null)), 400, 'InvalidArg', /file: required/)
    await refused(await post(form(Buffer.from('not audio at all, just some text'))), 400, 'InvalidArg', /invalid audio/)
    await refused(await post(form(Buffer.alloc(0))), 400, 'InvalidArg', /invalid audio/)
    // Past one window: decoded long-form (with timestamps), as the pipeline does it.
    const long = await post(form(silentWav(31), { language: 'en' }))
    assert.equal(long.status, 200)
    const own = await asr.run(silentWav(31), { language: 'en', maxNewTokens, returnTimestamps: true })
    assert.equal((await long.json()).text, own.text)
    // Past the model's maxDurationS: refused while it is decoded.
    const { speechModel } = require('../lib/serve/audio')
    const short = speechModel('w', asr, { maxDurationS: 20 })
    const signal = new AbortController().signal
    await assert.rejects(short.transcribe(silentWav(21), { task: 'transcribe', timestamps: false, signal }), (e) => {
      assert.equal(e.code, 'InvalidArg')
      assert.match(e.message, /longer than the limit of 20 s/)
      return true
    })
    assert.throws(() => speechModel('w', asr, { maxDurationS: 99999 }), /maxDurationS/)
    const text = new FormData()
    text.append('file', 'a text field, not a file')
    text.append('model', 'whisper')
    await refused(await post(text), 400, 'InvalidArg', /file: expected a file part/)
    await refused(await post(form(fs.readFileSync(WAV), { model: 'nope' })), 404, 'ModelNotFound', /nope/)
    await refused(await post(form(fs.readFileSync(WAV), { language: 'klingon' })), 400, 'InvalidArg', /klingon/)
    // A silent second is audio: it transcribes.
    assert.equal((await post(form(silentWav(1)))).status, 200)
  })

  test('malformed and oversized bodies: 4xx with codes', TIMEOUT, async () => {
    const multipart = { 'content-type': 'multipart/form-data; boundary=XyZ' }
    const json = JSON.stringify({ model: 'whisper', file: 'x' })
    await refused(
      await post(json, 'transcriptions', { 'content-type': 'application/json' }),
      400,
      'InvalidArg',
      /multipart\/form-data/,
    )
    await refused(await post('', 'transcriptions', multipart), 400, 'InvalidArg', /no boundary line/)
    const open = '--XyZ\r\ncontent-disposition: form-data; name="model"\r\n\r\nwhisper\r\n'
    await refused(await post(open, 'transcriptions', multipart), 400, 'InvalidArg', /not closed by a boundary/)
    const noBlank = '--XyZ\r\ncontent-disposition: form-data; name="model"\r\n--XyZ--\r\n'
    await refused(await post(noBlank, 'transcriptions', multipart), 400, 'InvalidArg', /malformed/)
    const noName = '--XyZ\r\ncontent-disposition: form-data\r\n\r\nwhisper\r\n--XyZ--\r\n'
    await refused(await post(noName, 'transcriptions', multipart), 400, 'InvalidArg', /without a name/)
    const bigHead = `--XyZ\r\ncontent-disposition: form-data; name="model"\r\nx-pad: ${'a'.repeat(5000)}\r\n\r\nw\r\n--XyZ--\r\n`
    await refused(await post(bigHead, 'transcriptions', multipart), 400, 'InvalidArg', /headers over 4096 bytes/)
    const part = (i) => `--XyZ\r\ncontent-disposition: form-data; name="f${i}[]"\r\n\r\nv\r\n`
    const many = `${Array.from({ length: 17 }, (_, i) => part(i)).join('')}--XyZ--\r\n`
    await refused(await post(many, 'transcriptions', multipart), 400, 'InvalidArg', /more than 16 parts/)
    const twice = form(fs.readFileSync(WAV))
    twice.append('model', 'whisper')
    await refused(await post(twice), 400, 'InvalidArg', /"model": given twice/)
    const two = form(fs.readFileSync(WAV))
    two.append('file', new Blob([fs.readFileSync(WAV)]), 'again.wav')
    await refused(await post(two), 400, 'InvalidArg', /one file per request/)
    const proto = '--XyZ\r\ncontent-disposition: form-data; name="__proto__"\r\n\r\n{}\r\n--XyZ--\r\n'
    await refused(await post(proto, 'transcriptions', multipart), 400, 'InvalidArg', /unknown field "__proto__"/)
    // 26 MiB: past OpenAI's 25 MB, refused by its length before it is read.
    await refused(await post(form(Buffer.alloc(26 * 2 ** 20))), 413, 'PayloadTooLarge', /over the limit/)
  })

  /** SubRip or WebVTT of `chunks` (the test's own writer, from the pipeline's chunks). */
  const cues = (chunks, duration, kind) => {
    const mark = kind === 'srt' ? ',' : '.'
    const t = (x) => {
      const ms = Math.round(x * 1000)
      const two = (n) => String(n).padStart(2, '0')
      return `${two(Math.floor(ms / 3600000))}:${two(Math.floor(ms / 60000) % 60)}:${two(Math.floor(ms / 1000) % 60)}${mark}${String(ms % 1000).padStart(3, '0')}`
    }
    let previous = 0
    const out = chunks.map((c, i) => {
      const start = c.timestamp[0] ?? previous
      const end = c.timestamp[1] ?? Math.max(start, duration)
      previous = end
      const line = `${t(start)} --> ${t(end)}\n${c.text.trim().replaceAll('-->', '->')}\n`
      return kind === 'srt' ? `${i + 1}\n${line}` : line
    })
    return kind === 'srt' ? out.join('\n') : `WEBVTT\n\n${out.join('\n')}`
  }

  test('the openai client: srt, vtt and verbose_json segments equal the pipeline (long audio)', TIMEOUT, async () => {
    const want = tsGoldens.cases.find((c) => c.name === 'long')
    const own = await tsAsr.run(LONG, { language: 'en', returnTimestamps: true, maxNewTokens: tsGoldens.maxNewTokens })
    assert.deepEqual(
      own.chunks.map((c) => c.timestamp),
      want.chunks.map((c) => c.timestamp),
    )
    const create = (extra) =>
      client.audio.transcriptions.create({ file: fs.createReadStream(LONG), model: 'ts', language: 'en', ...extra })
    const verbose = await create({ response_format: 'verbose_json', timestamp_granularities: ['segment'] })
    assert.equal(verbose.text, want.text)
    assert.equal(verbose.duration, 40)
    assert.equal(verbose.language, 'english')
    assert.deepEqual(
      verbose.segments.map((s) => [s.id, s.start, s.text, s.tokens, s.temperature]),
      own.chunks.map((c, i) => [i, c.timestamp[0], c.text, c.tokens, 0]),
    )
    // Each segment's window as transformers' generate measured it (models/make_whisper_models.py,
    // segments.json "long"): seek, avg_logprob and no_speech_prob (1e-4), the text's zlib ratio.
    const windows = segmentGoldens.cases.find((c) => c.name === 'long').windows
    for (const s of verbose.segments) {
      const w = windows.findLast((w) => w.seek <= s.seek)
      const pass = w.passes.at(-1)
      assert.equal(s.seek, w.seek)
      assert.ok(Math.abs(s.avg_logprob - pass.avgLogprob) < 1e-4, `${s.avg_logprob} ${pass.avgLogprob}`)
      assert.ok(Math.abs(s.no_speech_prob - pass.noSpeechProb) < 1e-4, `${s.no_speech_prob} ${pass.noSpeechProb}`)
      assert.ok(Math.abs(s.compression_ratio - pass.compressionRatio) < 1e-9)
    }
    assert.deepEqual(new Set(verbose.segments.map((s) => s.seek)), new Set(windows.map((w) => w.seek)))
    assert.deepEqual(
      verbose.segments.map((s) => s.end),
      own.chunks.map((c) => c.timestamp[1] ?? 40),
    )
    assert.equal(await create({ response_format: 'srt' }), cues(own.chunks, 40, 'srt'))
    assert.equal(await create({ response_format: 'vtt' }), cues(own.chunks, 40, 'vtt'))
    // json on long audio: decoded long-form, the same text.
    assert.equal((await create({})).text, want.text)
  })

  test("a Whisper spec's own options are checked at start", TIMEOUT, async () => {
    for (const bad of [{ maxNewTokens: 0 }, { maxQueue: -1 }, { dtype: 'float16' }]) {
      await assert.rejects(torch.serve({ models: { w: { folder: MODEL, ...bad } } }), (e) => {
        assert.equal(e.code, 'InvalidArg')
        assert.match(e.message, new RegExp(`serve: models\\["w"\\]: .*${Object.keys(bad)[0]}`))
        return true
      })
    }
  })

  test('GET /v1/models lists it; the CLI names its routes', TIMEOUT, async () => {
    const models = await (await fetch(`${url}/models`)).json()
    assert.deepEqual(
      models.data.map((m) => m.id),
      ['whisper', 'full', 'ts'],
    )
    const { spawn } = require('node:child_process')
    const bin = path.join(__dirname, '..', 'bin', 'torch-node.js')
    const child = spawn(process.execPath, [bin, 'serve', '--model', `w=${MODEL}`, '--port', '0'], {
      stdio: ['ignore', 'pipe', 'inherit'],
    })
    try {
      let out = ''
      await new Promise((resolve, reject) => {
        child.on('exit', (code) => reject(new Error(`exited ${code}: ${out}`)))
        child.stdout.on('data', (d) => {
          out += d
          if (/ w: .*\n/.test(out)) resolve()
        })
      })
      assert.match(out, / {2}w: \/v1\/audio\/transcriptions, \/v1\/audio\/translations\n/)
    } finally {
      child.removeAllListeners('exit')
      const exited = new Promise((resolve) => child.on('exit', resolve))
      child.kill('SIGTERM')
      await exited
    }
  })
})

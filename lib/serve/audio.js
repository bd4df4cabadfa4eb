// @ts-check
'use strict'
// POST /v1/audio/transcriptions and /v1/audio/translations of torch-node serve over a
// torch.pipeline('automatic-speech-recognition') (Whisper, greedy): OpenAI's multipart/form-data
// request (`file`, `model`, `language`, `prompt`, `response_format`, `temperature`,
// `timestamp_granularities[]`) and its answers: json `{text}`, text, srt, vtt and verbose_json
// `{task, language, duration, text}` (`language` the lower-case name, "english", as OpenAI gives it),
// with `segments` when timestamp_granularities[]=segment asks (each `{id, seek, start, end, text,
// tokens, temperature, avg_logprob, compression_ratio, no_speech_prob}`, from the window that made
// it). srt, vtt and segmented verbose_json decode with timestamps (the pipeline's
// `returnTimestamps`); json and text without, and audio over 30 s with them (transformers'
// long-form decoding needs them), up to the model's `maxDurationS`. `temperature` 0 (the default)
// decodes greedily; above 0 (at most 1) it samples as openai-whisper's transcribe does: at that
// temperature, then 0.2 higher while a window's compression ratio is over 2.4 or its average
// log-probability under -1, a window skipped as silence when, besides, `<|nospeech|>` is over 0.6.
// What is not built is refused (400), never ignored: a prompt, word timestamps. The
// body is read whole under `MAX_AUDIO_BODY_BYTES` (OpenAI's 25 MB) and parsed by `readForm`,
// bounded in parts and header bytes; a malformed one is a 400 `InvalidArg`.
const { codedError } = require('../errors')
const { HttpError, invalid, show, sendJson, readBody } = require('./http')

/** @import { SpeechRecognitionPipeline } from '../audio/speech-recognition' */

/**
 * What the audio routes need of a model (`speechModel` makes one from a pipeline).
 * @typedef {object} SpeechModel
 * @property {'audio'} kind
 * @property {string} name
 * @property {(audio: Buffer, options: { language?: string; task: 'transcribe' | 'translate';
 *   timestamps: boolean; temperature?: number; signal: AbortSignal }) => Promise<Transcript>} transcribe
 * @property {() => { active: number; queued: number }} stats
 * @property {() => void} dispose
 */

/**
 * @typedef {{ timestamp: [number | null, number | null]; text: string; tokens: number[]; seek: number;
 *   temperature: number; avgLogprob: number; compressionRatio: number; noSpeechProb: number | null }} Chunk
 * @typedef {{ text: string; language: string | null; duration: number; chunks?: Chunk[] }} Transcript
 */

/** A request body's bytes at most: OpenAI's limit on an upload (25 MB) and a little for the fields. */
const MAX_AUDIO_BODY_BYTES = 25 * 1024 * 1024 + 64 * 1024
const MAX_PARTS = 16
const MAX_HEADER_BYTES = 4096
const MAX_FIELD_BYTES = 4096
/** One window: json and text decode audio up to it without timestamps, longer audio with them. */
const WINDOW_S = 30
/** The longest audio served by default (`maxDurationS`): 20 minutes, the decoder's own default. */
const MAX_DURATION_S = 1200
const FORMATS = ['json', 'text', 'verbose_json', 'srt', 'vtt']
/** openai-whisper's transcribe: the fallback's step and thresholds (its CLI's defaults). */
const FALLBACK_STEP = 0.2
const THRESHOLDS = { compressionRatioThreshold: 2.4, logprobThreshold: -1, noSpeechThreshold: 0.6 }

/**
 * The pipeline's options for OpenAI's `temperature`: none at 0 (greedy); above, the temperatures
 * from it by 0.2 up to 1 and openai-whisper's thresholds, seeded (the same request, the same text).
 * @param {number} temperature
 */
function sampling(temperature) {
  if (temperature === 0) return {}
  const temperatures = []
  for (let i = 0; i < 6; i++) {
    const t = Math.round((temperature + i * FALLBACK_STEP) * 1e6) / 1e6
    if (t > 1 + 1e-9) break
    temperatures.push(t)
  }
  return { temperature: temperatures, ...THRESHOLDS, seed: 0 }
}
const FIELDS = {
  transcriptions: [
    'file',
    'model',
    'language',
    'prompt',
    'response_format',
    'temperature',
    'timestamp_granularities[]',
  ],
  // OpenAI's translations take no language: the audio's is detected, the text is English.
  translations: ['file', 'model', 'prompt', 'response_format', 'temperature'],
}

/**
 * Whisper's languages, code -> the lower-case name OpenAI's verbose_json gives as `language`
 * (transformers' LANGUAGES, `_` for a space; clients such as the AI SDK map the name back to the
 * code). A code not listed (a model with other languages) is given as it is.
 */
const LANGUAGE_NAMES = new Map(
  `
en:english zh:chinese de:german es:spanish ru:russian ko:korean fr:french ja:japanese pt:portuguese
tr:turkish pl:polish ca:catalan nl:dutch ar:arabic sv:swedish it:italian id:indonesian hi:hindi
fi:finnish vi:vietnamese he:hebrew uk:ukrainian el:greek ms:malay cs:czech ro:romanian da:danish
hu:hungarian ta:tamil no:norwegian th:thai ur:urdu hr:croatian bg:bulgarian lt:lithuanian la:latin
mi:maori ml:malayalam cy:welsh sk:slovak te:telugu fa:persian lv:latvian bn:bengali sr:serbian
az:azerbaijani sl:slovenian kn:kannada et:estonian mk:macedonian br:breton eu:basque is:icelandic
hy:armenian ne:nepali mn:mongolian bs:bosnian kk:kazakh sq:albanian sw:swahili gl:galician
mr:marathi pa:punjabi si:sinhala km:khmer sn:shona yo:yoruba so:somali af:afrikaans oc:occitan
ka:georgian be:belarusian tg:tajik sd:sindhi gu:gujarati am:amharic yi:yiddish lo:lao uz:uzbek
fo:faroese ht:haitian_creole ps:pashto tk:turkmen nn:nynorsk mt:maltese sa:sanskrit lb:luxembourgish
my:myanmar bo:tibetan tl:tagalog mg:malagasy as:assamese tt:tatar haw:hawaiian ln:lingala ha:hausa
ba:bashkir jw:javanese su:sundanese yue:cantonese
`
    .trim()
    .split(/\s+/)
    .map((pair) => /** @type {[string, string]} */ (pair.replace('_', ' ').split(':'))),
)

/**
 * The served form of a speech pipeline. `maxNewTokens`: at most this many tokens a 30 s window
 * (the folder's own bound when not given); `maxQueue`: requests in flight past 1 + `maxQueue`
 * get 503 `QueueFull` (default 64); `maxDurationS`: longer audio is a 400 (default 1200 s, at most
 * 10800). Throws `InvalidArg` for options out of range.
 * @param {string} name
 * @param {SpeechRecognitionPipeline} asr
 * @param {{ maxNewTokens?: number; maxQueue?: number; maxDurationS?: number }} [options]
 * @returns {SpeechModel}
 */
function speechModel(name, asr, { maxNewTokens, maxQueue = 64, maxDurationS = MAX_DURATION_S } = {}) {
  const where = `serve: models[${JSON.stringify(name)}]` // as index.js names a model's load errors
  if (maxNewTokens !== undefined && !(Number.isInteger(maxNewTokens) && maxNewTokens >= 1 && maxNewTokens <= 4096)) {
    throw codedError('InvalidArg', `${where}: maxNewTokens: expected an integer 1..4096, got ${show(maxNewTokens)}`)
  }
  if (!(Number.isInteger(maxQueue) && maxQueue >= 0)) {
    throw codedError('InvalidArg', `${where}: maxQueue: expected an integer ≥ 0, got ${show(maxQueue)}`)
  }
  if (!(typeof maxDurationS === 'number' && maxDurationS > 0 && maxDurationS <= 10800)) {
    throw codedError('InvalidArg', `${where}: maxDurationS: expected seconds in (0, 10800], got ${show(maxDurationS)}`)
  }
  let active = 0
  return {
    kind: 'audio',
    name,
    async transcribe(audio, { language, task, timestamps, temperature = 0, signal }) {
      if (active > maxQueue) {
        throw new HttpError(503, 'QueueFull', `model ${JSON.stringify(name)}: ${active} requests in flight already`)
      }
      active++
      try {
        const base = {
          task,
          signal,
          maxNewTokens,
          ...sampling(temperature),
          ...(language === undefined ? {} : { language }),
        }
        if (timestamps) return await asr.run(audio, { ...base, returnTimestamps: true, maxDurationS })
        try {
          return await asr.run(audio, { ...base, maxDurationS: Math.min(WINDOW_S, maxDurationS) })
        } catch (e) {
          // Past one window: transformers decodes long audio only with timestamps (long-form).
          const long = /** @type {any} */ (e)?.code === 'InvalidArg' && /longer than the limit of 30 s/.test(String(e))
          if (!long || maxDurationS <= WINDOW_S) throw e
          return await asr.run(audio, { ...base, returnTimestamps: true, maxDurationS })
        }
      } finally {
        active--
      }
    },
    stats: () => ({ active, queued: 0 }),
    dispose: () => asr.dispose(),
  }
}

/**
 * The body of a multipart/form-data request: its fields by name (`timestamp_granularities[]` and
 * other `[]` names as arrays) and its one file as `{filename, data}`. Read whole under `limit`
 * bytes (413 `PayloadTooLarge`); 400 `InvalidArg` for another content type, a missing or broken
 * boundary, more than `MAX_PARTS` parts, a part's headers over `MAX_HEADER_BYTES`, a field over
 * `MAX_FIELD_BYTES`, a repeated field or a second file.
 * @param {import('node:http').IncomingMessage} req
 * @param {number} [limit]
 * @returns {Promise<Record<string, any>>}
 */
async function readForm(req, limit = MAX_AUDIO_BODY_BYTES) {
  const type = req.headers['content-type'] ?? ''
  const match = /^multipart\/form-data\s*;(?:.*;)?\s*boundary=(?:"([^"]{1,70})"|([^\s;"]{1,70}))/i.exec(type)
  if (!match) {
    req.resume()
    throw invalid(`the body must be multipart/form-data with a boundary (OpenAI's audio API), got ${show(type)}`)
  }
  const body = await readBody(req, limit)
  return parseForm(body, match[1] ?? match[2])
}

/**
 * Parses a multipart/form-data body (RFC 7578): parts between `--boundary` lines, each with
 * headers, a blank line and its content; the last delimiter ends in `--`.
 * @param {Buffer} body
 * @param {string} boundary
 * @returns {Record<string, any>}
 */
function parseForm(body, boundary) {
  const broken = (/** @type {string} */ why) => invalid(`the multipart/form-data body is malformed: ${why}`)
  const delimiter = Buffer.from(`\r\n--${boundary}`)
  // The first delimiter may open the body (no CRLF before it) or follow a preamble.
  let at = body.subarray(0, delimiter.length - 2).equals(delimiter.subarray(2)) ? delimiter.length - 2 : -1
  if (at < 0) {
    const first = body.indexOf(delimiter)
    if (first < 0) throw broken('no boundary line')
    at = first + delimiter.length
  }
  // No prototype: a part named `__proto__` is a field as any other (refused as unknown).
  /** @type {Record<string, any>} */
  const form = Object.create(null)
  for (let parts = 0; ; parts++) {
    // After a delimiter: `--` ends the body, CRLF starts a part.
    if (body[at] === 0x2d && body[at + 1] === 0x2d) break
    if (body[at] !== 0x0d || body[at + 1] !== 0x0a) throw broken('a boundary line not followed by CRLF')
    if (parts === MAX_PARTS) throw broken(`more than ${MAX_PARTS} parts`)
    const start = at + 2
    const headEnd = body.indexOf('\r\n\r\n', start)
    if (headEnd < 0 || headEnd - start > MAX_HEADER_BYTES) {
      throw broken(
        headEnd < 0
          ? 'a part without a blank line after its headers'
          : `a part's headers over ${MAX_HEADER_BYTES} bytes`,
      )
    }
    const end = body.indexOf(delimiter, headEnd + 4)
    if (end < 0) throw broken('the last part is not closed by a boundary line')
    addPart(form, body.toString('latin1', start, headEnd), body.subarray(headEnd + 4, end), broken)
    at = end + delimiter.length
  }
  return form
}

/**
 * Adds one part to `form` by its Content-Disposition's name (and filename: the file).
 * @param {Record<string, any>} form
 * @param {string} head the part's headers (latin1, as bytes)
 * @param {Buffer} content
 * @param {(why: string) => Error} broken
 */
function addPart(form, head, content, broken) {
  const disposition = head.split('\r\n').find((line) => /^content-disposition\s*:/i.test(line))
  if (!disposition || !/:\s*form-data\s*(;|$)/i.test(disposition))
    throw broken('a part without Content-Disposition: form-data')
  const param = (/** @type {string} */ key) => {
    const m = new RegExp(`;\\s*${key}="((?:[^"\\\\]|\\\\.)*)"|;\\s*${key}=([^;\\s"]+)`, 'i').exec(disposition)
    if (!m) return undefined
    const raw = m[1] !== undefined ? m[1].replace(/\\(.)/g, '$1') : m[2]
    return Buffer.from(raw, 'latin1').toString('utf8')
  }
  const name = param('name')
  if (!name) throw broken('a part without a name')
  const filename = param('filename')
  if (filename !== undefined) {
    if (name !== 'file') throw invalid(`${show(name)}: a file; the audio goes in "file", the other fields are text`)
    if (form.file !== undefined) throw invalid('file: one file per request')
    form.file = { filename, data: content }
    return
  }
  if (content.length > MAX_FIELD_BYTES) throw invalid(`${show(name)}: at most ${MAX_FIELD_BYTES} bytes`)
  const value = content.toString('utf8')
  if (name.endsWith('[]')) (form[name] ??= []).push(value)
  else if (Object.hasOwn(form, name)) throw invalid(`${show(name)}: given twice`)
  else form[name] = value
}

/**
 * The request's fields, checked; what is not built is a 400 naming it.
 * @param {Record<string, any>} form
 * @param {'transcriptions' | 'translations'} route
 */
function readRequest(form, route) {
  const unknown = Object.keys(form).filter((k) => !FIELDS[route].includes(k))
  if (unknown.length) {
    throw invalid(`unknown field ${show(unknown[0])}: accepted fields are ${FIELDS[route].join(', ')}`)
  }
  if (form.file === undefined) throw invalid('file: required (the audio: WAV, FLAC, MP3 or Ogg/Vorbis)')
  if (typeof form.file !== 'object') throw invalid('file: expected a file part (with a filename), got a text field')
  const format = form.response_format ?? 'json'
  if (!FORMATS.includes(format))
    throw invalid(`response_format: expected one of ${FORMATS.join(', ')}, got ${show(format)}`)
  if (form.prompt !== undefined && form.prompt !== '') {
    throw invalid('prompt: not supported (Whisper prompting is not built yet); send none')
  }
  const temperature = form.temperature === undefined ? 0 : Number(form.temperature)
  if (form.temperature !== undefined && !(form.temperature.trim() !== '' && temperature >= 0 && temperature <= 1)) {
    throw invalid(`temperature: expected a number 0..1, got ${show(form.temperature)}`)
  }
  const granularities = form['timestamp_granularities[]'] ?? []
  for (const g of granularities) {
    if (g === 'word') throw invalid('timestamp_granularities[]: "word" timestamps are not made; send "segment"')
    if (g !== 'segment') throw invalid(`timestamp_granularities[]: expected "segment", got ${show(g)}`)
  }
  if (granularities.length && format !== 'verbose_json') {
    throw invalid('timestamp_granularities[]: needs response_format verbose_json (as OpenAI)')
  }
  const language = form.language === undefined || form.language === '' ? undefined : form.language
  const segments = granularities.includes('segment')
  return { audio: /** @type {Buffer} */ (form.file.data), format, language, segments, temperature }
}

/**
 * The route of `task`: POST /v1/audio/transcriptions ('transcribe') or /v1/audio/translations
 * ('translate': into English, the language detected).
 * @param {'transcribe' | 'translate'} task
 */
function audioRoute(task) {
  const route = task === 'transcribe' ? 'transcriptions' : 'translations'
  /**
   * @param {import('./app').Context} ctx
   * @param {Record<string, any>} form what `readForm` read
   * @param {import('node:http').ServerResponse} res
   */
  return async function audio(ctx, form, res) {
    const { audio, format, language, segments: withSegments, temperature } = readRequest(form, route)
    const model = /** @type {SpeechModel} */ (ctx.model(form.model, 'audio'))
    // A client that hangs up stops its transcription (while it waits for the executor).
    const gone = new AbortController()
    res.on('close', () => {
      if (!res.writableEnded) gone.abort()
    })
    // verbose_json has segments when asked (timestamp_granularities[]=segment), as OpenAI.
    const timestamps = format === 'srt' || format === 'vtt' || withSegments
    const result = await model.transcribe(audio, { language, task, timestamps, temperature, signal: gone.signal })
    const send = (/** @type {string} */ text, /** @type {string} */ type) => {
      const body = Buffer.from(text)
      res.writeHead(200, { 'content-type': `${type}; charset=utf-8`, 'content-length': body.length })
      res.end(body)
    }
    if (format === 'text') return send(`${result.text}\n`, 'text/plain')
    if (format === 'json') return sendJson(res, 200, { text: result.text })
    const segments = timestamps ? toSegments(result) : []
    if (format === 'srt') return send(subtitles(segments, 'srt'), 'application/x-subrip')
    if (format === 'vtt') return send(subtitles(segments, 'vtt'), 'text/vtt')
    // The language as OpenAI names it ("english"), not its code.
    const name = result.language === null ? null : (LANGUAGE_NAMES.get(result.language) ?? result.language)
    const verbose = { task, language: name, duration: result.duration, text: result.text }
    sendJson(res, 200, withSegments ? { ...verbose, segments } : verbose)
  }
}

/**
 * OpenAI's segments from the pipeline's chunks: `start` null (no timestamp opened it) is the
 * previous end (0 first), `end` null (the model left the last one open) the audio's end; `seek`,
 * `temperature`, `avg_logprob`, `compression_ratio` and `no_speech_prob` those of the window
 * whose pass made the segment (as openai-whisper gives every segment of a window its values).
 * @param {Transcript} t
 */
function toSegments(t) {
  let previous = 0
  return (t.chunks ?? []).map((c, id) => {
    const start = c.timestamp[0] ?? previous
    const end = c.timestamp[1] ?? Math.max(start, t.duration)
    previous = end
    return {
      id,
      seek: c.seek,
      start,
      end,
      text: c.text,
      tokens: c.tokens,
      temperature: c.temperature,
      avg_logprob: c.avgLogprob,
      compression_ratio: c.compressionRatio,
      no_speech_prob: c.noSpeechProb,
    }
  })
}

/**
 * `seconds` as a subtitle time: `HH:MM:SS,mmm` (SubRip) or `HH:MM:SS.mmm` (WebVTT).
 * @param {number} seconds
 * @param {',' | '.'} mark
 */
function clock(seconds, mark) {
  const ms = Math.round(seconds * 1000)
  const pad = (/** @type {number} */ n, /** @type {number} */ w) => String(n).padStart(w, '0')
  const h = Math.floor(ms / 3_600_000)
  const m = Math.floor(ms / 60_000) % 60
  const s = Math.floor(ms / 1000) % 60
  return `${pad(h, 2)}:${pad(m, 2)}:${pad(s, 2)}${mark}${pad(ms % 1000, 3)}`
}

/**
 * The segments as SubRip (numbered cues) or WebVTT (a `WEBVTT` header), each cue's text trimmed
 * and `-->` written `->` (as OpenAI's whisper writes them).
 * @param {{ start: number; end: number; text: string }[]} segments
 * @param {'srt' | 'vtt'} kind
 */
function subtitles(segments, kind) {
  const mark = kind === 'srt' ? ',' : '.'
  const cues = segments.map((s, i) => {
    const time = `${clock(s.start, mark)} --> ${clock(s.end, mark)}`
    const text = s.text.trim().replaceAll('-->', '->')
    return kind === 'srt' ? `${i + 1}\n${time}\n${text}\n` : `${time}\n${text}\n`
  })
  return kind === 'srt' ? cues.join('\n') : `WEBVTT\n\n${cues.join('\n')}`
}

module.exports = {
  speechModel,
  readForm,
  parseForm,
  transcriptions: audioRoute('transcribe'),
  translations: audioRoute('translate'),
  subtitles,
  MAX_AUDIO_BODY_BYTES,
  LANGUAGE_NAMES,
}

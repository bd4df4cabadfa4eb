// @ts-check
'use strict'
// POST /v1/audio/speech of torch-node serve over a torch.pipeline('text-to-speech') (VITS:
// Facebook's MMS-TTS): OpenAI's JSON request (`model`, `input` of at most 4096 characters, `voice`,
// `response_format`, `speed`, `instructions`, `stream_format`) answered with the audio's bytes at the
// model's own sampling rate (16 kHz for MMS-TTS, not OpenAI's 24 kHz: the `x-torch-node-sampling-rate`
// header says it). `wav` (the default here: 16-bit PCM, mono) and `pcm` (raw 16-bit signed
// little-endian samples) are made; mp3, opus, aac and flac are refused (400), as are `instructions`
// and SSE streaming. A VITS checkpoint has one voice: `voice` is required (as OpenAI's API) and any
// name is taken, every one speaking that one voice, which the `x-torch-node-voice: default` header
// says. `speed` (0.25..4) is the pipeline's speakingRate; `seed` (torch-node's own key) makes the
// audio reproducible: equal to the pipeline's run(input, {seed}).
const { HttpError, invalid, show, readKeys } = require('./http')
const { encodeWav, pcm16 } = require('../audio/text-to-speech')

/** @import { TextToSpeechPipeline } from '../audio/text-to-speech' */

/**
 * What the speech route needs of a model (`speechSynthesisModel` makes one from a pipeline).
 * @typedef {object} SpeechSynthesisModel
 * @property {'speech'} kind
 * @property {string} name
 * @property {(text: string, options: { speakingRate?: number; seed?: number; signal: AbortSignal }) =>
 *   Promise<{ audio: Float32Array; samplingRate: number }>} speak
 * @property {() => { active: number; queued: number }} stats
 * @property {() => void} dispose
 */

/** OpenAI's limit on `input`, in characters. */
const MAX_INPUT_CHARS = 4096
const KEYS = ['model', 'input', 'voice', 'response_format', 'speed', 'instructions', 'stream_format', 'seed']
const FORMATS = ['wav', 'pcm']
const NOT_ENCODED = ['mp3', 'opus', 'aac', 'flac']

/**
 * The served form of a text-to-speech pipeline.
 * @param {string} name
 * @param {TextToSpeechPipeline} tts
 * @returns {SpeechSynthesisModel}
 */
function speechSynthesisModel(name, tts) {
  let active = 0
  return {
    kind: 'speech',
    name,
    async speak(text, options) {
      active++
      try {
        return /** @type {{ audio: Float32Array; samplingRate: number }} */ (await tts.run(text, options))
      } catch (e) {
        // The pipeline's refusals of the text (nothing to say, too long an audio) are the client's.
        // (named as the request names it: `input`, not the pipeline's `text`)
        const message = /** @type {Error} */ (e)?.message
        if (/** @type {any} */ (e)?.code === 'InvalidArg') {
          throw invalid(message.replace(/^TextToSpeechPipeline\.run: text: /, 'input: '))
        }
        if (/** @type {any} */ (e)?.code === 'QueueFull') throw new HttpError(503, 'QueueFull', message)
        throw e
      } finally {
        active--
      }
    },
    stats: () => ({ active: Math.min(active, 1), queued: Math.max(active - 1, 0) }),
    dispose: () => tts.dispose(),
  }
}

/**
 * The request, checked (400 `InvalidArg` for what is wrong or not built), before the model loads.
 * @param {unknown} body
 * @returns {{ input: string; format: 'wav' | 'pcm'; speed?: number; seed?: number }}
 */
function check(body) {
  const b = readKeys(body, KEYS)
  if (typeof b.input !== 'string') throw invalid(`input: expected a string, got ${show(b.input)}`)
  let chars = 0
  for (let i = 0; i < b.input.length && chars <= MAX_INPUT_CHARS; i++, chars++) {
    if (b.input.charCodeAt(i) >= 0xd800 && b.input.charCodeAt(i) < 0xdc00) i++
  }
  if (chars > MAX_INPUT_CHARS) throw invalid(`input: over ${MAX_INPUT_CHARS} characters (OpenAI's limit)`)
  if (b.input.trim() === '') throw invalid('input: empty: nothing to say')
  if (typeof b.voice !== 'string' || b.voice === '' || b.voice.length > 256) {
    throw invalid(`voice: expected a voice's name (any: a VITS model has one voice), got ${show(b.voice)}`)
  }
  const format = b.response_format ?? 'wav'
  if (NOT_ENCODED.includes(format)) {
    throw invalid(`response_format: ${format} is not encoded here; ask for "wav" or "pcm"`)
  }
  if (!FORMATS.includes(format)) throw invalid(`response_format: expected "wav" or "pcm", got ${show(format)}`)
  if (b.speed !== undefined && !(typeof b.speed === 'number' && b.speed >= 0.25 && b.speed <= 4)) {
    throw invalid(`speed: expected a number 0.25..4, got ${show(b.speed)}`)
  }
  if (b.instructions !== undefined) throw invalid('instructions: a VITS model takes no instructions')
  if (b.stream_format !== undefined && b.stream_format !== 'audio') {
    throw invalid(`stream_format: only "audio" (the bytes in the body) is made, got ${show(b.stream_format)}`)
  }
  if (b.seed !== undefined && !(Number.isSafeInteger(b.seed) && b.seed >= 0)) {
    throw invalid(`seed: expected an integer ≥ 0, got ${show(b.seed)}`)
  }
  return { input: b.input, format: /** @type {'wav' | 'pcm'} */ (format), speed: b.speed, seed: b.seed }
}

/**
 * POST /v1/audio/speech: the audio of `input` as a WAV file or raw 16-bit PCM.
 * @param {import('./app').Context} ctx
 * @param {Record<string, any>} body
 * @param {import('node:http').ServerResponse} res
 */
async function create(ctx, body, res) {
  const { input, format, speed, seed } = check(body)
  const model = /** @type {SpeechSynthesisModel} */ (
    /** @type {unknown} */ (ctx.model(body.model, /** @type {any} */ ('speech')))
  )
  // A client that hangs up while its request waits stops it.
  const gone = new AbortController()
  res.on('close', () => {
    if (!res.writableEnded) gone.abort()
  })
  const options = {
    signal: gone.signal,
    ...(speed === undefined ? {} : { speakingRate: speed }),
    ...(seed === undefined ? {} : { seed }),
  }
  const { audio, samplingRate } = await model.speak(input, options)
  let bytes
  if (format === 'wav') bytes = encodeWav(audio, samplingRate)
  else {
    bytes = Buffer.alloc(2 * audio.length)
    pcm16(audio, bytes, 0)
  }
  res.writeHead(200, {
    'content-type': format === 'wav' ? 'audio/wav' : 'audio/pcm',
    'content-length': bytes.length,
    'x-torch-node-sampling-rate': String(samplingRate),
    'x-torch-node-voice': 'default',
  })
  res.end(bytes)
}

module.exports = { speechSynthesisModel, check, create, MAX_INPUT_CHARS }

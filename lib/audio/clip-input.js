// @ts-check
'use strict'
// A clip as the audio pipelines take it (audio-classification, zero-shot-audio-classification):
// samples at the model's rate (a Float32Array), samples with their rate (`{ raw, samplingRate }`, or
// transformers' `{ array, sampling_rate }`), or an encoded file (a path or its bytes: WAV, FLAC, MP3,
// Ogg/Vorbis), decoded, down-mixed and resampled off the event loop by the native `_decodeAudio`.
const { codedError, describe, callNative } = require('../errors')
const { loadAddon } = require('../addon')
const opt = require('../options')

const CLIP_KEYS = opt.bag({ raw: opt.any, array: opt.any, samplingRate: opt.any, sampling_rate: opt.any })
/** The longest file the decoder reads: 20 minutes (the speech pipeline's default `maxDurationS`). */
const MAX_DURATION_S = 1200

/** @type {any} */
let native

/** @param {string} message @param {Function} [caller] */
const invalid = (message, caller) => codedError('InvalidArg', message, caller)

/** InvalidArg where a sample is NaN or infinite. @param {Float32Array} samples @param {string} what @param {Function} caller */
function checkFinite(samples, what, caller) {
  if (!samples.every(Number.isFinite)) throw invalid(`${what}: a sample is NaN or infinite`, caller)
}

/**
 * A clip's samples at `rate` Hz: a Float32Array as it is (the caller checks its values), `{ raw,
 * samplingRate }` as it is at `rate` and resampled otherwise (its samples checked finite first: a NaN
 * would come out of the resampler smeared), a path or bytes decoded. InvalidArg for anything else or
 * a bad rate; the decoder's errors (`InvalidArg`, `IoError`, `Aborted`) named after `what`.
 * @param {unknown} clip @param {number} rate @param {string} what @param {AbortSignal | undefined} signal
 * @param {Function} caller @returns {Promise<Float32Array>}
 */
async function readClip(clip, rate, what, signal, caller) {
  if (clip instanceof Float32Array) return clip
  let sourceRate
  if (clip !== null && typeof clip === 'object' && !(clip instanceof Uint8Array)) {
    const dict = opt.read(clip, CLIP_KEYS, what, caller)
    const raw = dict.raw ?? dict.array
    sourceRate = dict.samplingRate ?? dict.sampling_rate
    if (!(raw instanceof Float32Array)) {
      throw invalid(`${what}.raw: expected a Float32Array of samples, got ${describe(raw)}`, caller)
    }
    if (!(Number.isInteger(sourceRate) && /** @type {number} */ (sourceRate) >= 1)) {
      throw invalid(`${what}.samplingRate: expected a rate in Hz (an integer ≥ 1), got ${describe(sourceRate)}`, caller)
    }
    if (sourceRate === rate) return raw
    checkFinite(raw, what, caller)
    clip = raw
  } else if (!(typeof clip === 'string' || clip instanceof Uint8Array)) {
    const expected = `a Buffer, a path, { raw, samplingRate } or a Float32Array of ${rate} Hz samples`
    throw invalid(`${what}: expected ${expected}, got ${describe(clip)}`, caller)
  }
  native ??= loadAddon()
  try {
    return await callNative(native._decodeAudio, native, [clip, rate, sourceRate, MAX_DURATION_S, signal], what, caller)
  } catch (e) {
    const err = /** @type {any} */ (e)
    if (typeof err?.code !== 'string' || err.message.startsWith(what)) throw e
    throw codedError(err.code, `${what}: ${err.message}`, caller)
  }
}

module.exports = { readClip, checkFinite }

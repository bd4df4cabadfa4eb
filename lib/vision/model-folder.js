// @ts-check
'use strict'
// What the vision model folders (ClipModel: kind 'clip'; DenseModel: 'depth-estimation',
// 'image-segmentation') share: the load options, reading manifest.json, loading a program by its
// format, and the call options a Batcher run takes.
const fs = require('node:fs')
const path = require('node:path')
const { codedError, describe } = require('../errors')
const torch = require('../torch')
const opt = require('../options')

const LOAD_OPTIONS = opt.bag({
  maxBatchSize: opt.integer({ min: 1 }),
  maxDelayMs: opt.number({ min: 0, expected: 'a number of milliseconds ≥ 0' }),
  maxQueue: opt.either(
    [opt.integer({ min: 1 }), opt.check((v) => v === Infinity, 'Infinity')],
    'a positive integer or Infinity',
  ),
  signal: opt.instance(AbortSignal, 'an AbortSignal'),
})

/**
 * The call options every vision pipeline call takes.
 * @typedef {{ signal?: AbortSignal, timeoutMs?: number }} ImageCallOptions
 */
const CALL_OPTIONS = {
  signal: opt.instance(AbortSignal, 'an AbortSignal'),
  timeoutMs: opt.number({ min: 0, infinite: true, expected: 'a number of milliseconds ≥ 0' }),
}

// `data:image/png;base64,...`: an image inline (as OpenAI's and vLLM's image_url take it).
const DATA_URL = /^data:image\/[\w.+-]+;base64,/

/** @param {string} message @param {Function} [caller] */
const invalid = (message, caller) => codedError('InvalidArg', message, caller)

/**
 * An image source as torch.image.load takes it: a path, bytes, or a data URL's decoded bytes.
 * @param {unknown} image @param {string} what @param {Function} [caller]
 * @returns {string | Uint8Array}
 */
function imageSource(image, what, caller) {
  if (typeof image === 'string') {
    const match = DATA_URL.exec(image)
    return match ? Buffer.from(image.slice(match[0].length), 'base64') : image
  }
  if (image instanceof Uint8Array) return image
  throw invalid(
    `${what}: expected a path, a data:image/...;base64 URL or a Buffer/Uint8Array, got ${describe(image)}`,
    caller,
  )
}

/**
 * An image as the dense and detection pipelines take it: a source as imageSource takes it, or a
 * uint8 RGB Tensor `[3, H, W]` (as `torch.image.load(x, { dtype: 'uint8', layout: 'chw' })` gives).
 * @param {unknown} image @param {string} what @param {Function} [caller]
 * @returns {string | Uint8Array | import('../../index').Tensor}
 */
function imageOrTensorSource(image, what, caller) {
  const { Tensor } = torch()
  if (!(image instanceof Tensor)) return imageSource(image, what, caller)
  if (image.dtype !== 'uint8' || image.ndim !== 3 || image.shape[0] !== 3) {
    throw invalid(`${what}: expected a uint8 RGB Tensor [3, H, W], got ${image.dtype} [${image.shape}]`, caller)
  }
  if (image.shape[1] === 0 || image.shape[2] === 0) throw invalid(`${what}: the image is empty`, caller)
  return image
}

/**
 * A pipeline call's `images` (one, or an array) as sources, each checked by `read`, and whether
 * the call passed an array (then it gets an array back); InvalidArg for an empty array.
 * @template S
 * @param {unknown} images @param {string} name the method, for messages @param {Function} caller
 * @param {(image: unknown, what: string, caller: Function) => S} read
 * @returns {{ batched: boolean, sources: S[] }}
 */
function readImages(images, name, caller, read) {
  const batched = Array.isArray(images)
  const sources = (batched ? Array.from(images) : [images]).map((x, i) =>
    read(x, batched ? `${name}: images[${i}]` : `${name}: images`, caller),
  )
  if (sources.length === 0) throw invalid(`${name}: images: expected at least one image`, caller)
  return { batched, sources }
}

/**
 * `folder/manifest.json`, its load options (over `defaults`) and the AbortSignal bag the loads
 * take; ModelLoadError where the manifest is not `format` and `kind`, InvalidArg where maxBatchSize
 * passes the export's `maxBatch`.
 * @template {{ maxBatchSize: number, maxDelayMs: number, maxQueue: number }} D
 * @param {unknown} folder @param {unknown} options @param {D} defaults
 * @param {{ format: string, kind: string, what: string, exportHow: string, batchOf: string }} expect
 *   `what`: the export's name in the message; `exportHow`: what to export, and with what;
 *   `batchOf`: what takes the batches ("model takes", "towers take")
 * @param {Function} caller
 * @returns {{ manifest: any, o: D & { signal?: AbortSignal }, signal: { signal?: AbortSignal } }}
 */
function readFolder(folder, options, defaults, expect, caller) {
  if (typeof folder !== 'string') throw invalid(`folder: expected a path, got ${describe(folder)}`, caller)
  const o = { ...defaults, ...opt.read(options, LOAD_OPTIONS, 'load: options', caller) }
  let manifest
  try {
    manifest = JSON.parse(fs.readFileSync(path.join(folder, 'manifest.json'), 'utf8'))
  } catch (e) {
    throw codedError(
      'ModelLoadError',
      `${folder}: cannot read manifest.json: ${/** @type {Error} */ (e).message}`,
      caller,
    )
  }
  if (manifest?.format !== expect.format || manifest.kind !== expect.kind) {
    throw codedError(
      'ModelLoadError',
      `${folder}: manifest.json is not a ${expect.what} export (kind '${manifest?.kind}'); export a ${expect.exportHow}`,
      caller,
    )
  }
  if (Number.isInteger(manifest.maxBatch) && o.maxBatchSize > manifest.maxBatch) {
    throw invalid(
      `load: options.maxBatchSize: this folder's ${expect.batchOf} batches of at most ${manifest.maxBatch} ` +
        `(export --max-batch), got ${o.maxBatchSize}`,
      caller,
    )
  }
  return { manifest, o, signal: o.signal === undefined ? {} : { signal: o.signal } }
}

/**
 * A manifest's program (`.pt2` as an AOTModule, else a ScriptModule), loaded off the JS thread.
 * @param {string} folder @param {{ program: string, programFormat: string }} p @param {{ signal?: AbortSignal }} signal
 */
function loadProgram(folder, p, signal) {
  const { AOTModule, ScriptModule } = torch()
  return p.programFormat === 'pt2'
    ? AOTModule.load(path.join(folder, p.program), signal)
    : ScriptModule.load(path.join(folder, p.program), signal)
}

/** A Batcher.run's options bag of a call's options. @param {ImageCallOptions} o */
function callOf(o) {
  return {
    ...(o.signal ? { signal: o.signal } : {}),
    ...(o.timeoutMs !== undefined ? { timeoutMs: o.timeoutMs } : {}),
  }
}

/**
 * `batcher.run(input)` with a call's options; `Closed` from a Batcher its model's dispose() closed
 * reads as `check()` says (`Disposed`).
 * @param {import('../../index').Batcher} batcher @param {any} input @param {ImageCallOptions} o
 * @param {() => boolean} disposed @param {() => void} check
 */
async function runBatched(batcher, input, o, disposed, check) {
  const call = callOf(o)
  try {
    // an empty bag would read as one more input
    return await (Object.keys(call).length ? batcher.run(input, call) : batcher.run(input))
  } catch (e) {
    if (disposed() && /** @type {any} */ (e)?.code === 'Closed') check()
    throw e
  }
}

module.exports.CALL_OPTIONS = CALL_OPTIONS
module.exports.imageSource = imageSource
module.exports.imageOrTensorSource = imageOrTensorSource
module.exports.readImages = readImages
module.exports.readFolder = readFolder
module.exports.loadProgram = loadProgram
module.exports.runBatched = runBatched

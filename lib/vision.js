// @ts-check
'use strict'
// torch.vision: image classification composed from public APIs only (torch.image.loadBatch,
// ScriptModule.forward, softmax/topk), so it lives in JS.
const IMAGENET_LABELS = Object.freeze(require('../data/imagenet-labels.json'))
// torchvision's classic ImageNet evaluation transform: Resize(256), CenterCrop(224), ToTensor,
// Normalize(ImageNet mean, std).
const DEFAULT_PREPROCESS = Object.freeze({ resize: 256, centerCrop: 224, mean: 'imagenet' })

const { codedError, describe } = require('./errors')
const torch = require('./torch')
const opt = require('./options')

/** @import { ImageOptions, ScriptModule, Tensor } from '../index' */

// The public types below become index.d.ts's declarations (tools/lib-typings.js).
/**
 * One class in `torch.vision.classify`'s answer.
 * @typedef {object} Classification
 * @property {string} label The class name: `labels[index]`.
 * @property {number} index The class index: the column of the model's logits.
 * @property {number} probability Its softmax probability over all the model's classes, in [0, 1].
 */
/**
 * Options of `torch.vision.classify`; any other key is refused (`InvalidArg`).
 * @typedef {object} ClassifyOptions
 * @property {number} [topk] How many classes per image, most probable first (default 5; at most the model's
 *   class count).
 * @property {readonly string[]} [labels] One name per class, in logit order (default `imagenetLabels`); its
 *   length must equal the model's class count.
 * @property {ImageOptions} [preprocess] `torch.image` options for image sources, replacing (not merged with)
 *   the default `{ resize: 256, centerCrop: 224, mean: 'imagenet' }`; refused with a Tensor input.
 * @property {AbortSignal} [signal] Aborting rejects with code `Aborted`; a forward already running finishes and
 *   its output is dropped.
 */

/** An error of `classify`, which rejects its promise with it. */
const classifyError = (code, message) => codedError(code, `classify: ${message}`)

const isPlainObject = (v) => v !== null && typeof v === 'object' && !Array.isArray(v)
const isSource = (v) => typeof v === 'string' || v instanceof Uint8Array

const OPTIONS = opt.bag({
  topk: opt.integer({ min: 1 }),
  labels: opt.check(
    (v) => Array.isArray(v) && v.every((l) => typeof l === 'string'),
    'an array of strings (one per class)',
  ),
  // torch.image reads (and checks) these itself.
  preprocess: opt.check((v) => isPlainObject(v), 'torch.image options (an object)'),
  signal: opt.instance(AbortSignal, 'an AbortSignal'),
})

/** The options with their defaults, or an InvalidArg error naming the bad one. */
function readOptions(options) {
  const { topk = 5, labels = IMAGENET_LABELS, preprocess, signal } = opt.read(options, OPTIONS, 'classify: options')
  return { topk, labels, preprocess, signal }
}

function throwIfAborted(signal) {
  if (signal && signal.aborted) throw classifyError('Aborted', 'the signal was aborted')
}

/** The model input: a Tensor as it is, else the images loaded into one batch. */
async function batchOf(images, preprocess) {
  if (images instanceof torch().Tensor) {
    if (preprocess !== undefined) {
      throw classifyError(
        'InvalidArg',
        'options.preprocess: a Tensor input is used as it is; give image sources to preprocess',
      )
    }
    if (images.ndim === 0) {
      throw classifyError('InvalidArg', 'images: a Tensor input needs a batch dimension, [N, 3, H, W]')
    }
    return images
  }
  const sources = Array.isArray(images) ? images : [images]
  if (!Array.isArray(images) && !isSource(images)) {
    throw classifyError(
      'InvalidArg',
      `images: expected a path, a Buffer/Uint8Array, an array of them or a Tensor, got ${describe(images)}`,
    )
  }
  if (sources.length === 0) throw classifyError('InvalidArg', 'images: expected at least one image')
  return torch().image.loadBatch(sources, preprocess || DEFAULT_PREPROCESS)
}

/**
 * Softmax over the logits' classes, the top `topk` of each row as {label, index, probability};
 * `count` is the batch size the model was given (one row per image).
 */
function topClasses(logits, count, { topk, labels }) {
  if (!(logits instanceof torch().Tensor)) {
    throw classifyError('InvalidArg', `the model returned ${describe(logits)}; expected a logits Tensor [N, classes]`)
  }
  const [rows, classes] = logits.shape
  if (logits.ndim !== 2 || rows !== count) {
    throw classifyError(
      'ShapeMismatch',
      `the model returned logits of shape [${logits.shape}]; expected [${count}, classes] for ${count} images`,
    )
  }
  if (labels.length !== classes) {
    throw classifyError('InvalidArg', `options.labels: ${labels.length} labels for a model with ${classes} classes`)
  }
  if (topk > classes) {
    throw classifyError('InvalidArg', `options.topk: ${topk} is more than the model's ${classes} classes`)
  }
  const probabilities = logits.softmax(1)
  const { values, indices } = probabilities.topk(topk)
  try {
    const p = /** @type {number[][]} */ (values.toArray())
    return /** @type {number[][]} */ (indices.toArray()).map((row, n) =>
      row.map((index, k) => ({ label: labels[index], index, probability: p[n][k] })),
    )
  } finally {
    for (const t of [probabilities, values, indices]) t.dispose()
  }
}

/**
 * Classifies images with a module that returns logits `[N, classes]`: resolves to one array per
 * image, in input order (a single image gives an array of one), of `{label, index, probability}`,
 * most probable first. `images`: a path, a Buffer/Uint8Array, an array of them (loaded off the
 * event loop into one batch with `preprocess`), or a ready input Tensor `[N, 3, H, W]` used as it
 * is (and not disposed). Errors reject: `InvalidArg`, `InvalidImage`, `ShapeMismatch` (logits not
 * `[N, classes]`), `Aborted`, or the model's own.
 * @param {ScriptModule} module
 * @param {string | Uint8Array | Array<string | Uint8Array> | Tensor} images
 * @param {ClassifyOptions} [options]
 * @returns {Promise<Classification[][]>}
 */
async function classify(module, images, options) {
  if (!(module instanceof torch().ScriptModule)) {
    throw classifyError('InvalidArg', `module: expected a ScriptModule, got ${describe(module)}`)
  }
  const opts = readOptions(options)
  throwIfAborted(opts.signal)
  const batch = await batchOf(images, opts.preprocess)
  const owned = batch !== images
  let logits
  try {
    throwIfAborted(opts.signal) // loading is not interruptible; do not start the forward
    logits = await module.forward(batch, ...(opts.signal ? [{ signal: opts.signal }] : []))
    return topClasses(logits, batch.shape[0], opts)
  } finally {
    if (owned) batch.dispose()
    if (logits instanceof torch().Tensor) logits.dispose()
  }
}

// index.js adds `loadOps` (a native export that is not public otherwise).
module.exports = { classify, imagenetLabels: IMAGENET_LABELS }

'use strict'
// `torch-node classify [--model m.pt] [--topk 5] [--json] [image...]` (bin/torch-node.js).
// Exit codes: 0 all classified; 1 an image or the model failed (one line each, with its code);
// 2 a usage error or no bundled model. Every failure is one line on stderr, never a stack.
const fs = require('node:fs')
const path = require('node:path')
const { parseArgs } = require('node:util')
const { modelPath, LITE0_PREPROCESS, SAMPLE_PHOTO } = require('./bundled')

const USAGE = `usage: torch-node classify [--model m.pt] [--topk 5] [--json] [image...]

Classifies images (paths; JPEG, PNG, WebP, GIF, BMP, TIFF) with an ImageNet classifier and prints
the most probable labels of each. Without --model: the bundled EfficientNet-Lite0 (its own
normalization, (p - 127) / 128); with one: Resize(256), CenterCrop(224) and ImageNet mean/std.
Without images: the sample photo chelsea.png. The bundled model is looked for in
$TORCH_NODE_MODELS, else the package's models/ folder.`

class UsageError extends Error {}

/** `chelsea.png: Egyptian cat 0.38, tiger cat 0.38, tabby 0.16` */
function formatPredictions(name, predictions) {
  return `${name}: ${predictions.map((p) => `${p.label} ${p.probability.toFixed(2)}`).join(', ')}`
}

function parse(argv) {
  let parsed
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      options: { model: { type: 'string' }, topk: { type: 'string' }, json: { type: 'boolean' }, help: { type: 'boolean', short: 'h' } },
    })
  } catch (e) {
    throw new UsageError(e.message.split('\n')[0])
  }
  const { values, positionals } = parsed
  if (values.help) return { help: true }
  const [command, ...images] = positionals
  if (command !== 'classify') throw new UsageError(command === undefined ? 'no command given (try: torch-node classify)' : `unknown command '${command}' (try: torch-node classify)`)
  if (values.topk !== undefined && !/^[1-9][0-9]*$/.test(values.topk)) throw new UsageError(`--topk: expected a positive integer, got '${values.topk}'`)
  return { model: values.model, topk: values.topk === undefined ? 5 : Number(values.topk), json: Boolean(values.json), images }
}

const oneLine = (e) => `${e.code || e.name || 'Error'}: ${String(e.message).split('\n')[0]}`

/** Runs the CLI with these arguments; resolves to the exit code. */
async function main(argv, { stdout = process.stdout, stderr = process.stderr } = {}) {
  let args
  try {
    args = parse(argv)
  } catch (e) {
    if (!(e instanceof UsageError)) throw e
    stderr.write(`torch-node: ${e.message}\n`)
    return 2
  }
  if (args.help) {
    stdout.write(`${USAGE}\n`)
    return 0
  }
  const bundled = args.model === undefined
  const model = bundled ? modelPath() : args.model
  if (bundled && !fs.existsSync(model)) {
    stderr.write(`torch-node: no bundled model at ${model} (run \`npm run models\` in a clone of torch-node, or pass --model m.pt)\n`)
    return 2
  }
  let torch, module
  try {
    torch = require('..')
    module = await torch.ScriptModule.load(model)
  } catch (e) {
    stderr.write(`torch-node: ${model}: ${oneLine(e)}\n`)
    return 1
  }
  const images = args.images.length ? args.images : [SAMPLE_PHOTO]
  const results = []
  let failed = false
  for (const image of images) {
    const name = args.images.length ? image : path.basename(image)
    try {
      const [predictions] = await torch.vision.classify(module, image, { topk: args.topk, ...(bundled && { preprocess: LITE0_PREPROCESS }) })
      results.push({ image: name, predictions })
      if (!args.json) stdout.write(`${formatPredictions(name, predictions)}\n`)
    } catch (e) {
      failed = true
      results.push({ image: name, error: { code: e.code, message: e.message } })
      stderr.write(`torch-node: ${name}: ${oneLine(e)}\n`)
    }
  }
  module.dispose()
  if (args.json) stdout.write(`${JSON.stringify(results, null, 2)}\n`)
  return failed ? 1 : 0
}

module.exports = { main, formatPredictions }

'use strict'
// The main job, run once at the end of `npm install` (and by `npm run main-job`): the bundled
// EfficientNet-Lite0 (real ImageNet weights) classifies the sample photo, as
// `torch-node classify` does, and the time of one classification is printed.
const fs = require('node:fs')
const path = require('node:path')
const torch = require('..')
const { modelPath, LITE0_PREPROCESS, SAMPLE_PHOTO } = require('../lib/bundled')
const { formatPredictions } = require('../lib/cli')

async function main() {
  const model = modelPath()
  if (!fs.existsSync(model)) {
    console.error(`[torch-node] ${model} is missing: run \`npm run models\` first`)
    process.exit(1)
  }
  const module = await torch.ScriptModule.load(model)
  const options = { topk: 3, preprocess: LITE0_PREPROCESS }
  // Warm-up: TorchScript's profiling executor records shapes on the first runs, then optimizes.
  for (let i = 0; i < 2; i++) await torch.vision.classify(module, SAMPLE_PHOTO, options)
  const t0 = process.hrtime.bigint()
  const [predictions] = await torch.vision.classify(module, SAMPLE_PHOTO, options)
  const ms = Number(process.hrtime.bigint() - t0) / 1e6

  console.log(
    `[torch-node] main job: EfficientNet-Lite0 (ImageNet weights) on ${path.relative(process.cwd(), SAMPLE_PHOTO)}`,
  )
  console.log(`  ${formatPredictions(path.basename(SAMPLE_PHOTO), predictions)}`)
  console.log(
    `  classify: ${ms.toFixed(1)} ms (decode, resize, forward, after 2 warm-up runs; batch 1, ${torch.getNumThreads()} threads)`,
  )
}

main().catch((e) => {
  console.error(`[torch-node] main job failed: ${e.code || 'Error'}: ${e.message}`)
  process.exit(1)
})

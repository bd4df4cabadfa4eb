'use strict'
// The main job, run once at the end of `npm install` (and by `npm run main-job`): the traced
// ResNet-18 on the fixed golden input, printing its top-5 logits and the forward time.
const fs = require('node:fs')
const path = require('node:path')
const torch = require('..')

const MODELS = path.join(__dirname, '..', 'models')
const modelPath = path.join(MODELS, 'resnet18_traced.pt')
const inputPath = path.join(MODELS, 'golden', 'resnet18_input_b8.f32')
if (!fs.existsSync(modelPath) || !fs.existsSync(inputPath)) {
  console.error('[torch-node] models/resnet18_traced.pt is missing: run `npm run models` first')
  process.exit(1)
}

const bytes = fs.readFileSync(inputPath)
const batch8 = new Float32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4)
const input = torch.tensor(batch8.subarray(0, 3 * 224 * 224), { shape: [1, 3, 224, 224] })

const model = new torch.ScriptModule(modelPath)
model.forwardSync(input) // warm-up: the first call runs TorchScript's profiling pass
const t0 = process.hrtime.bigint()
const logits = model.forwardSync(input)
const ms = Number(process.hrtime.bigint() - t0) / 1e6

const { values, indices } = logits.topk(5)
console.log('[torch-node] main job: traced ResNet-18 (seed 0 weights), input models/golden/resnet18_input_b8.f32[0]')
const v = values.toArray()[0]
const i = indices.toArray()[0]
for (let k = 0; k < 5; k++) console.log(`  #${k + 1}  class ${String(i[k]).padStart(4)}  logit ${v[k].toFixed(6)}`)
console.log(`  forward: ${ms.toFixed(1)} ms (batch 1, ${torch.getNumThreads()} threads)`)

'use strict'
// Classify with a traced model, off the event loop:
//   node examples/classify.js [model.pt] [input.f32]
// Defaults: EfficientNet-Lite0 with its real ImageNet weights and the golden input that
// models/make_models.py wrote (run `npm run models` first).
const fs = require('node:fs')
const path = require('node:path')
const torch = require('..')

async function main() {
  const models = path.join(__dirname, '..', 'models')
  const modelPath = process.argv[2] || path.join(models, 'efficientnet_lite0_traced.pt')
  const inputPath = process.argv[3] || path.join(models, 'golden', 'efficientnet_lite0_input_b1.f32')
  const bytes = fs.readFileSync(inputPath)
  const pixels = new Float32Array(bytes.buffer, bytes.byteOffset, 3 * 224 * 224)

  const model = await torch.ScriptModule.load(modelPath)
  const logits = await model.forward(torch.tensor(pixels, { shape: [1, 3, 224, 224] }))
  const { values, indices } = logits.softmax(1).topk(5)
  const p = values.toArray()[0]
  indices.toArray()[0].forEach((cls, k) => console.log(`class ${String(cls).padStart(4)}  p=${p[k].toFixed(4)}`))
}

main().catch((e) => {
  console.error(`${e.code || 'Error'}: ${e.message}`)
  process.exit(1)
})

'use strict'
// A saliency map: the gradient of the top logit with respect to the input image (∂y/∂x), the
// measurement behind a model's effective receptive field.
//   node examples/saliency.js [model.pt]      (default: models/resnet18_traced.pt)
const path = require('node:path')
const torch = require('..')

async function main() {
  const modelPath = process.argv[2] || path.join(__dirname, '..', 'models', 'resnet18_traced.pt')
  const model = await torch.ScriptModule.load(modelPath)
  torch.manualSeed(0)
  const x = torch.rand([1, 3, 224, 224], { requiresGrad: true })
  // An input that requires grad makes forward record autograd (otherwise it runs no-grad).
  const logits = await model.forward(x)
  const k = logits.argmax().item()
  logits.select(1, k).sum().backward()

  const saliency = x.grad.abs().max(1).values.squeeze(0) // [224, 224]: max over channels
  const touched = saliency.gt(0).sum().item()
  console.log(
    `top class ${k}; |∂y/∂x| max ${saliency.max().item().toExponential(3)}, ` +
      `mean ${saliency.mean().item().toExponential(3)}; ${touched} of ${224 * 224} pixels influence it`,
  )
}

main().catch((e) => {
  console.error(`${e.code || 'Error'}: ${e.message}`)
  process.exit(1)
})

'use strict'
// The image pipeline side by side with PIL + torchvision (the provisioned Python), in
// alternating rounds: a 1280×800 JPEG (models/images/coffee_1280x800.jpg, written by the model
// script) to a normalized [1, 3, 224, 224] tensor — Resize(256), CenterCrop(224), ToTensor,
// Normalize(ImageNet). Prints each round's medians and the ratio of the overall medians.
//   node bench/image.js [--rounds 5] [--iterations 40]
const { execFileSync } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')
const torch = require('..')
const { resolveLibtorch } = require('../scripts/libtorch')
const { options } = require('./cli')

const opt = options(['rounds', 'iterations'])
const ROUNDS = Number(opt.rounds ?? 5)
const ITERATIONS = Number(opt.iterations ?? 40)
const WARMUP = 10
const PHOTO = path.join(__dirname, '..', 'models', 'images', 'coffee_1280x800.jpg')
if (!fs.existsSync(PHOTO)) throw new Error(`${PHOTO} is missing: run \`npm run models\``)

const PYTHON = `
import sys, time
from PIL import Image
from torchvision import transforms
tf = transforms.Compose([transforms.Resize(256), transforms.CenterCrop(224), transforms.ToTensor(),
                         transforms.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
path, warmup, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for _ in range(warmup): tf(Image.open(path).convert("RGB"))
ts = []
for _ in range(n):
    t0 = time.perf_counter(); tf(Image.open(path).convert("RGB")); ts.append((time.perf_counter() - t0) * 1000)
print(sorted(ts)[n // 2])
`

function median(xs) {
  return [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]
}

function torchNode() {
  const options = { resize: 256, centerCrop: 224, mean: 'imagenet' }
  for (let i = 0; i < WARMUP; i++) torch.image.loadSync(PHOTO, options)
  const ts = []
  for (let i = 0; i < ITERATIONS; i++) {
    const t0 = process.hrtime.bigint()
    torch.image.loadSync(PHOTO, options).dispose()
    ts.push(Number(process.hrtime.bigint() - t0) / 1e6)
  }
  return median(ts)
}

const { python } = resolveLibtorch({ withModelPackages: false })
const ours = []
const pil = []
for (let r = 0; r < ROUNDS; r++) {
  pil.push(
    Number(
      execFileSync(python, ['-c', PYTHON, PHOTO, String(WARMUP), String(ITERATIONS)], {
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'ignore'],
      }),
    ),
  )
  ours.push(torchNode())
  console.log(
    `round ${r + 1}: PIL + torchvision ${pil[r].toFixed(2)} ms, torch.image.loadSync ${ours[r].toFixed(2)} ms`,
  )
}
console.log(
  `median of rounds: PIL + torchvision ${median(pil).toFixed(2)} ms, torch-node ${median(ours).toFixed(2)} ms: ` +
    `${(median(pil) / median(ours)).toFixed(2)}× faster`,
)

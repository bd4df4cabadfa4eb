'use strict'
// A Node contender for bench/pipelines.js's depth-estimation and image-segmentation rows, one per
// process: torch-node's torch.pipeline on an exported folder, or transformers.js' pipeline (ONNX
// Runtime) on the same weights in ONNX (bench/pipelines_dense_child.py prepare made both).
//   node bench/pipelines-dense-child.js torch-node TASK FOLDER
//   node bench/pipelines-dense-child.js transformers.js TASK ONNX_PARENT_DIR MODEL_NAME
//   node bench/pipelines-dense-child.js check TASK FOLDER ONNX_PARENT_DIR MODEL_NAME
// Line protocol as bench/pipelines-child.js: `one N SEED`, `many N SEED` (64 concurrent callers),
// `profile N SEED` (answers null), `quit`. One image per call (models/images, decoded every call).
// `check` prints how far transformers.js' answer is from torch-node's on each image (the ONNX
// export's sanity: the same weights give the same depth / labels), then exits.
const path = require('node:path')
const readline = require('node:readline')

const CALLERS = 64
const IMAGES = ['chelsea.png', 'coffee.png', 'astronaut.png', 'rocket.jpg', 'motorcycle_left.png'].map((f) =>
  path.join(__dirname, '..', 'models', 'images', f),
)

/** `{ run(image) }` for each contender; run resolves once the result is a JS value. */
async function contender(kind, task, args) {
  if (kind === 'torch-node') {
    const torch = require('..')
    const pipe = await torch.pipeline(task, args[0])
    return { run: (image) => pipe.run(image) }
  }
  if (kind === 'transformers.js') {
    const { pipeline, env } = await import('@huggingface/transformers')
    env.allowRemoteModels = false
    env.localModelPath = args[0]
    const pipe = await pipeline(task, args[1], { dtype: 'fp32', device: 'cpu' })
    // transformers.js' segmentation takes one image per call (its own check)
    return { run: (image) => pipe(image) }
  }
  throw new Error(`pipelines-dense-child: unknown contender ${kind}`)
}

/** The largest relative depth difference, or the share of pixels labelled alike, per image. */
async function check(task, folder, onnxParent, name) {
  const ours = await contender('torch-node', task, [folder])
  const theirs = await contender('transformers.js', task, [onnxParent, name])
  for (const image of IMAGES) {
    const [a, b] = [await ours.run(image), await theirs.run(image)]
    if (task === 'depth-estimation') {
      const x = a.predictedDepth.toTypedArray()
      const y = b.predicted_depth.data
      let diff = 0
      let scale = 0
      for (let i = 0; i < x.length; i++) {
        diff = Math.max(diff, Math.abs(x[i] - y[i]))
        scale = Math.max(scale, Math.abs(x[i]))
      }
      // transformers.js resizes bilinear where transformers (and torch-node) resize bicubic
      console.log(`${path.basename(image)}: depth ${x.length} px, max |diff| ${diff.toExponential(2)} of max ${scale}`)
    } else {
      const label = (segments, i, get) => segments.find((s) => get(s.mask, i))?.label
      const size = a[0].mask.numel()
      const masks = a.map((s) => s.mask.toTypedArray())
      let same = 0
      for (let i = 0; i < size; i += 97) {
        const ourLabel = a[masks.findIndex((m) => m[i] === 255)]?.label
        if (ourLabel === label(b, i, (m, j) => m.data[j] === 255)) same++
      }
      console.log(
        `${path.basename(image)}: ${a.length} vs ${b.length} segments, ${same} of ${Math.ceil(size / 97)} sampled pixels alike`,
      )
    }
  }
}

async function main() {
  const [kind, task, ...args] = process.argv.slice(2)
  if (kind === 'check') {
    await check(task, ...args)
    process.exit(0)
  }
  const c = await contender(kind, task, args)
  await c.run(IMAGES[0]) // warm-up
  console.log(JSON.stringify({ ready: true }))
  for await (const line of readline.createInterface({ input: process.stdin })) {
    const [cmd, n, seed] = line.split(' ')
    if (cmd === 'quit') break
    if (cmd === 'profile') {
      console.log('null')
      continue
    }
    const count = Number(n)
    const at = (i) => IMAGES[(Number(seed) + i) % IMAGES.length]
    const t0 = performance.now()
    if (cmd === 'one') for (let i = 0; i < count; i++) await c.run(at(i))
    else {
      let next = 0
      const caller = async () => {
        while (next < count) await c.run(at(next++))
      }
      await Promise.all(Array.from({ length: Math.min(CALLERS, count) }, caller))
    }
    console.log(performance.now() - t0)
  }
  process.exit(0)
}

main().catch((e) => {
  console.error(e)
  process.exit(1)
})

'use strict'
// A Node contender for bench/pipelines.js, one per process: torch-node's torch.pipeline on an
// exported folder, or transformers.js' pipeline (ONNX Runtime) on the same weights in ONNX.
//   node bench/pipelines-child.js torch-node TASK FOLDER
//   node bench/pipelines-child.js transformers.js TASK ONNX_PARENT_DIR MODEL_NAME
// Line protocol as bench/pipelines_child.py: `one N SEED` -> ms for N calls one after another;
// `many N SEED` -> ms for N calls from 64 concurrent callers (each awaits its call, then takes
// the next sentence); `profile N SEED` (torch-node) -> JSON of where one call's time goes; `quit`.
const fs = require('node:fs')
const path = require('node:path')
const readline = require('node:readline')

const SENTENCES = JSON.parse(fs.readFileSync(path.join(__dirname, 'text-sentences.json'), 'utf8'))
const CALLERS = 64
// zero-shot-image-classification: the images (decoded on every call, by every contender) and labels
const IMAGES = ['chelsea.png', 'coffee.png', 'astronaut.png', 'rocket.jpg', 'motorcycle_left.png'].map((f) =>
  path.join(__dirname, '..', 'models', 'images', f),
)
const LABELS = ['a cat', 'a cup of coffee', 'an astronaut', 'a rocket', 'a motorcycle']

/** `{ run(text), profile? }` for each contender; run resolves once the result is a JS value. */
async function contender(kind, task, args) {
  if (kind === 'torch-node') {
    const torch = require('..')
    const pipe = await torch.pipeline(task, args[0])
    if (task === 'zero-shot-image-classification')
      return { run: (image) => pipe.run(image, { candidateLabels: LABELS }), pipe }
    return { run: (text) => pipe.run(text), pipe }
  }
  if (kind === 'transformers.js') {
    const { pipeline, env } = await import('@huggingface/transformers')
    env.allowRemoteModels = false
    env.localModelPath = args[0]
    const pipe = await pipeline(task, args[1], { dtype: 'fp32', device: 'cpu' })
    if (task === 'zero-shot-image-classification') return { run: (image) => pipe(image, LABELS) }
    return { run: (text) => pipe(text) }
  }
  throw new Error(`pipelines-child: unknown contender ${kind}`)
}

/** One call's time split in tokenization (the folder's tokenizer alone) and the rest. */
async function profile(c, n, seed) {
  const texts = Array.from({ length: n }, (_, i) => SENTENCES[(seed + i) % SENTENCES.length])
  let t0 = performance.now()
  for (const t of texts) c.pipe.tokenizer.encode(t).ids
  const tokenizeMs = (performance.now() - t0) / n
  t0 = performance.now()
  for (const t of texts) await c.run(t)
  const callMs = (performance.now() - t0) / n
  return { tokenizeMs, callMs }
}

async function main() {
  const [kind, task, ...args] = process.argv.slice(2)
  const c = await contender(kind, task, args)
  const inputs = task === 'zero-shot-image-classification' ? IMAGES : SENTENCES
  await Promise.all(inputs.slice(0, 8).map(c.run)) // warm-up
  await c.run(inputs[0])
  console.log(JSON.stringify({ ready: true }))
  for await (const line of readline.createInterface({ input: process.stdin })) {
    const [cmd, n, seed] = line.split(' ')
    if (cmd === 'quit') break
    const count = Number(n)
    const at = (i) => inputs[(Number(seed) + i) % inputs.length]
    if (cmd === 'profile') {
      if (!c.pipe?.tokenizer || inputs === IMAGES) {
        console.log('null')
        continue
      }
      console.log(JSON.stringify(await profile(c, count, Number(seed))))
      continue
    }
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

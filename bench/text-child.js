'use strict'
// A Node contender for bench/text.js, one per process: torch-node's SentenceEncoder or
// transformers.js' feature-extraction pipeline (ONNX Runtime) on the same MiniLM weights.
//   node bench/text-child.js torch-node MODEL_DIR [DTYPE] [INSTANCESxTHREADS]
//   node bench/text-child.js transformers.js ONNX_PARENT_DIR MODEL_NAME
// Line protocol as bench/text_child.py: `one N SEED` / `batch N SEED` -> ms; `quit`; and
// `many N SEED` -> ms for N rounds of 64 concurrent callers with one sentence each.
const fs = require('node:fs')
const path = require('node:path')
const readline = require('node:readline')

const CALLERS = 64
const SENTENCES = JSON.parse(fs.readFileSync(path.join(__dirname, 'text-sentences.json'), 'utf8'))

/** `encode(textOrTexts)` for each contender, resolving once the embeddings are in JS memory. */
async function contender(kind, args) {
  if (kind === 'torch-node') {
    const torch = require('..')
    if (args[2]) {
      // The executor's shape for this child (torch.setInstances, torch.setNumThreads), e.g. 2x1.
      const [instances, threads] = args[2].split('x').map(Number)
      torch.setInstances(instances)
      torch.setNumThreads(threads)
    }
    const encoder = await torch.text.SentenceEncoder.load(args[0], {
      maxBatchSize: 16,
      ...(args[1] && args[1] !== '-' && { dtype: args[1] }),
    })
    return async (texts) => {
      const t = await encoder.encode(texts)
      t.toTypedArray()
      t.dispose()
    }
  }
  if (kind === 'transformers.js') {
    const { pipeline, env } = await import('@huggingface/transformers')
    env.allowRemoteModels = false
    env.localModelPath = args[0]
    const extractor = await pipeline('feature-extraction', args[1], { dtype: 'fp32', device: 'cpu' })
    return async (texts) => {
      const out = await extractor(texts, { pooling: 'mean', normalize: true })
      out.tolist()
    }
  }
  throw new Error(`text-child: unknown contender ${kind}`)
}

async function main() {
  const [kind, ...args] = process.argv.slice(2)
  const encode = await contender(kind, args)
  await encode(SENTENCES.slice(0, 16)) // warm-up
  await encode(SENTENCES[0])
  console.log(JSON.stringify({ ready: true }))
  for await (const line of readline.createInterface({ input: process.stdin })) {
    const [cmd, n, seed] = line.split(' ')
    if (cmd === 'quit') break
    const t0 = performance.now()
    for (let i = 0; i < Number(n); i++) {
      const at = Number(seed) + i
      if (cmd === 'one') await encode(SENTENCES[at % SENTENCES.length])
      else if (cmd === 'many') {
        await Promise.all(
          Array.from({ length: CALLERS }, (_, k) => encode(SENTENCES[(at * CALLERS + k) % SENTENCES.length])),
        )
      } else {
        const start = (at * 16) % (SENTENCES.length - 16)
        await encode(SENTENCES.slice(start, start + 16))
      }
    }
    console.log(performance.now() - t0)
  }
  process.exit(0)
}

main().catch((e) => {
  console.error(e)
  process.exit(1)
})

'use strict'
// One peer of bench/generate.js (npm run bench:generate), in its own process:
//   node bench/generate-child.js torch-node MODEL_DIR PROMPTS THREADS
//       torch.text.CausalLM on the exported folder, maxSequences 8;
//   node bench/generate-child.js node-llama-cpp GGUF PROMPTS THREADS
//       node-llama-cpp (bench/peers) on the same weights as GGUF, CPU only, prebuilt binary: one
//       context of one sequence for `stream` and `ttft`, one context of 8 sequences for `streams`.
// Every peer is given the same token ids (PROMPTS, written by bench/generate_child.py prepare)
// and decodes greedily. Line protocol as bench/generate_child.py, one JSON reply line each:
//   stream N     -> {ms, tokens, ids}: one generation of at most N new tokens on the long prompt
//   streams K N  -> {ms, tokens, lagP99Ms}: K generations at once, N tokens at most each
//   ttft         -> {ms}: from the call to the first new token of the ~500-token prompt
//   rss          -> {maxRssMiB, rssMiB}: this process's resident set at its peak (VmHWM) and now (VmRSS)
//   quit
const fs = require('node:fs')
const path = require('node:path')
const readline = require('node:readline')
const { monitorEventLoopDelay } = require('node:perf_hooks')

const MAX_SEQUENCES = 8
const MAX_CONTEXT = 1024

/**
 * `generate(ids, maxNewTokens, onFirst?)` for each peer: resolves to the new token ids, calling
 * `onFirst` when the first one arrives; `streams` runs K of them at once.
 */
async function peer(kind, model, threads) {
  if (kind === 'torch-node') {
    const torch = require('..')
    torch.setNumThreads(threads)
    const lm = await torch.text.CausalLM.load(model, { maxSequences: MAX_SEQUENCES, maxContext: MAX_CONTEXT })
    return {
      async generate(ids, maxNewTokens, onFirst) {
        const out = []
        for await (const piece of lm.generate(ids, { maxNewTokens, temperature: 0 })) {
          if (out.length === 0) onFirst?.()
          out.push(...piece.tokens)
        }
        return out
      },
    }
  }
  if (kind === 'node-llama-cpp') {
    const peers = path.join(__dirname, 'peers', 'node_modules', 'node-llama-cpp')
    const { getLlama, LlamaLogLevel } = await import(require.resolve(peers))
    // The prebuilt CPU binary of @node-llama-cpp/linux-x64 as it is: never build, never download.
    const llama = await getLlama({
      gpu: false,
      build: 'never',
      skipDownload: true,
      maxThreads: threads,
      logLevel: LlamaLogLevel.error,
    })
    const loaded = await llama.loadModel({ modelPath: model, gpuLayers: 0 })
    const contextOptions = { contextSize: MAX_CONTEXT, threads: { ideal: threads, min: threads } }
    const one = (await loaded.createContext({ ...contextOptions, sequences: 1 })).getSequence()
    const many = await loaded.createContext({ ...contextOptions, sequences: MAX_SEQUENCES })
    const sequences = Array.from({ length: MAX_SEQUENCES }, () => many.getSequence())
    const free = [...sequences]
    /** sequence.evaluate yields each new token as long as we ask: end of sequence is not checked. */
    const run = async (sequence, ids, maxNewTokens, onFirst) => {
      await sequence.clearHistory()
      const out = []
      for await (const token of sequence.evaluate(ids, { temperature: 0 })) {
        if (out.length === 0) onFirst?.()
        out.push(token)
        if (out.length >= maxNewTokens) break
      }
      return out
    }
    return {
      generate: (ids, maxNewTokens, onFirst) => run(one, ids, maxNewTokens, onFirst),
      async generateMany(ids, maxNewTokens) {
        const sequence = free.pop()
        try {
          return await run(sequence, ids, maxNewTokens)
        } finally {
          free.push(sequence)
        }
      },
    }
  }
  throw new Error(`generate-child: unknown peer ${kind}`)
}

/** This process's resident set now (VmRSS) and at its peak (VmHWM), MiB. */
function rssMiB() {
  const status = fs.readFileSync('/proc/self/status', 'utf8')
  const read = (key) => Number((status.match(new RegExp(`^${key}:\\s+(\\d+)`, 'm')) || [])[1]) / 1024
  const peak = read('VmHWM')
  return { maxRssMiB: Number.isFinite(peak) ? peak : process.resourceUsage().maxRSS / 1024, rssMiB: read('VmRSS') }
}

async function main() {
  const [kind, model, promptsFile, threads] = process.argv.slice(2)
  const prompts = JSON.parse(fs.readFileSync(promptsFile, 'utf8'))
  const p = await peer(kind, model, Number(threads))
  const long = prompts.long.ids
  await p.generate(long, 8) // warm-up
  console.log(JSON.stringify({ ready: true }))
  for await (const line of readline.createInterface({ input: process.stdin })) {
    const [cmd, ...args] = line.split(' ')
    if (cmd === 'quit') break
    const t0 = performance.now()
    let reply
    if (cmd === 'stream') {
      const ids = await p.generate(long, Number(args[0]))
      reply = { ms: performance.now() - t0, tokens: ids.length, ids }
    } else if (cmd === 'streams') {
      const lag = monitorEventLoopDelay({ resolution: 1 })
      lag.enable()
      const many = p.generateMany ?? p.generate
      const runs = await Promise.all(Array.from({ length: Number(args[0]) }, () => many(long, Number(args[1]))))
      const ms = performance.now() - t0
      lag.disable()
      reply = { ms, tokens: runs.reduce((n, ids) => n + ids.length, 0), lagP99Ms: lag.percentile(99) / 1e6 }
    } else if (cmd === 'ttft') {
      let first = NaN
      await p.generate(prompts.ttft.ids, 1, () => {
        first = performance.now() - t0
      })
      reply = { ms: first }
    } else if (cmd === 'rss') {
      reply = rssMiB()
    } else {
      reply = { error: `unknown command ${cmd}` }
    }
    console.log(JSON.stringify(reply))
  }
  process.exit(0)
}

main().catch((e) => {
  console.error(e)
  process.exit(1)
})

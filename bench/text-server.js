'use strict'
// A service for bench/text.js's served rows, one per process: examples/embeddings-server.js
// (torch.serve over torch-node's SentenceEncoder), or a plain node:http server answering the same
// POST /v1/embeddings over transformers.js' feature-extraction pipeline (one call per request, as
// its users write it; torch.serve serves torch-node folders only, and its request checks cost
// microseconds beside a forward).
//   node bench/text-server.js torch-node MODEL_DIR [DTYPE]
//   node bench/text-server.js transformers.js ONNX_PARENT_DIR MODEL_NAME
// Prints {"url"} once listening; answers the parent's IPC message 'stats' with the event loop's
// delay percentiles since the last 'stats' (perf_hooks.monitorEventLoopDelay) and its RSS.
const http = require('node:http')
const { monitorEventLoopDelay } = require('node:perf_hooks')
const { start } = require('../examples/embeddings-server')

async function transformersEmbedder(dir, name) {
  const { pipeline, env } = await import('@huggingface/transformers')
  env.allowRemoteModels = false
  env.localModelPath = dir
  const extractor = await pipeline('feature-extraction', name, { dtype: 'fp32', device: 'cpu' })
  return {
    name,
    dim: 384,
    encode: async (texts) => (await extractor(texts, { pooling: 'mean', normalize: true })).data,
    countTokens: async (texts) => texts.reduce((sum, t) => sum + extractor.tokenizer.encode(t).length, 0),
  }
}

/** OpenAI's embeddings answer (floats) over `embedder`, on a free port. */
function listen(embedder) {
  const server = http.createServer(async (req, res) => {
    try {
      let body = ''
      for await (const chunk of req) body += chunk
      const { input } = JSON.parse(body)
      const texts = typeof input === 'string' ? [input] : input
      const [data, tokens] = await Promise.all([embedder.encode(texts), embedder.countTokens(texts)])
      const rows = texts.map((_, i) => ({
        object: 'embedding',
        index: i,
        embedding: Array.from(data.subarray(i * embedder.dim, (i + 1) * embedder.dim)),
      }))
      const usage = { prompt_tokens: tokens, total_tokens: tokens }
      res.writeHead(200, { 'content-type': 'application/json' })
      res.end(JSON.stringify({ object: 'list', data: rows, model: embedder.name, usage }))
    } catch (e) {
      res.writeHead(500, { 'content-type': 'application/json' })
      res.end(JSON.stringify({ error: { message: String(e?.message ?? e) } }))
    }
  })
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)))
}

async function main() {
  const [kind, dir, extra] = process.argv.slice(2)
  let url
  if (kind === 'torch-node') {
    ;({ url } = await start({ modelDir: dir, name: 'minilm', port: 0, ...(extra && { dtype: extra }) }))
  } else {
    const server = await listen(await transformersEmbedder(dir, extra))
    url = `http://127.0.0.1:${server.address().port}`
  }
  const lag = monitorEventLoopDelay({ resolution: 1 })
  lag.enable()
  process.on('message', (m) => {
    if (m !== 'stats') return
    process.send({
      lagP99Ms: lag.percentile(99) / 1e6,
      lagMaxMs: lag.max / 1e6,
      rssMiB: process.memoryUsage().rss / 2 ** 20,
    })
    lag.reset()
  })
  process.on('disconnect', () => process.exit(0))
  console.log(JSON.stringify({ url }))
}

main().catch((e) => {
  console.error(e)
  process.exit(1)
})

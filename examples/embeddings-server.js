'use strict'
// An embeddings service that speaks OpenAI's embeddings API, so the official `openai` client (and
// every tool built on it: LangChain, LlamaIndex, RAG pipelines) uses it as it is:
// `new OpenAI({ baseURL: 'http://localhost:3000/v1', apiKey: 'unused' })`.
// It is torch.serve (lib/serve/, what `npx torch-node serve` runs) with one text-model folder
// (`npx torch-node export <hf-dir> <folder>`), run by torch.text.SentenceEncoder: requests that
// arrive together share forwards (length-bucketed), and when more wait than its queue holds the
// service answers 503 QueueFull at once. docs/serving.md has the fields and limits.
//   MODEL_DIR=models/golden/text/minilm node examples/embeddings-server.js
//                      (PORT, HOST, MODEL_NAME, MAX_BATCH_SIZE, MAX_DELAY_MS, MAX_QUEUE, DTYPE)
//   On a machine shared with other CPU work start it with TORCH_NODE_INSTANCES=2 (2 instances × 1 thread): docs/text.md#speed
//   curl -s localhost:3000/v1/embeddings -H 'content-type: application/json' \
//        -d '{"input": ["a sentence", "another"], "model": "minilm"}'
const path = require('node:path')
const torch = require('..')

/**
 * Loads the model folder (off the event loop) and listens. Options: `modelDir` (required),
 * `name` (the model id clients send; default the folder's name), `port` (0: any free one),
 * `host`, `dtype`, `batch` (SentenceEncoder options: maxBatchSize, maxDelayMs, maxQueue),
 * `limits` (torch.serve's). Resolves to `{ server, url, close(), encoder, name }`.
 */
async function start({ modelDir, name, port = 3000, host = '127.0.0.1', dtype, batch, limits } = {}) {
  if (typeof modelDir !== 'string') {
    const message = 'modelDir: expected the path of a torch-node text-model folder'
    throw Object.assign(new Error(message), { code: 'InvalidArg' })
  }
  const modelName = name || path.basename(path.resolve(modelDir))
  const spec = { folder: modelDir, ...batch, ...(dtype && { dtype }) }
  const served = await torch.serve({ models: { [modelName]: spec }, port, host, limits })
  const encoder = served.models[modelName]
  return { server: served.server, url: served.url, close: () => served.close(), encoder, name: modelName }
}

module.exports = { start }

if (require.main === module) {
  const env = process.env
  start({
    modelDir: env.MODEL_DIR || path.join(__dirname, '..', 'models', 'golden', 'text', 'minilm'),
    name: env.MODEL_NAME,
    port: env.PORT === undefined ? 3000 : Number(env.PORT),
    host: env.HOST || '127.0.0.1',
    dtype: env.DTYPE,
    batch: Object.fromEntries(
      [
        ['maxBatchSize', 'MAX_BATCH_SIZE'],
        ['maxDelayMs', 'MAX_DELAY_MS'],
        ['maxQueue', 'MAX_QUEUE'],
      ]
        .filter(([, envName]) => env[envName] !== undefined)
        .map(([key, envName]) => [key, Number(env[envName])]),
    ),
  }).then(
    ({ url, name }) =>
      console.log(`embeddings of model ${JSON.stringify(name)} on ${url}/v1/embeddings (GET /v1/models, /health)`),
    (e) => {
      console.error(`embeddings-server: ${e.code || 'Error'}: ${String(e.message).split('\n')[0]}`)
      process.exit(1)
    },
  )
}

'use strict'
// A chat service that speaks OpenAI's chat and completions APIs, so the official `openai` client
// (and what is built on it) uses it as it is:
// `new OpenAI({ baseURL: 'http://localhost:3000/v1', apiKey: 'unused' })`.
// It is torch.serve (lib/serve/, what `npx torch-node serve` runs) with one causal-LM folder
// (`npx torch-node export <hf-dir> <folder>`); docs/serving.md has the routes, fields and limits.
// MAX_SEQUENCES requests generate at once, MAX_QUEUE more wait, and past that the service
// answers 503 QueueFull at once. A client that disconnects aborts its generation.
//   MODEL_DIR=models/golden/lm/llama-tiny node examples/chat-server.js
//                      (PORT, HOST, MODEL_NAME, MAX_SEQUENCES, MAX_QUEUE, MAX_CONTEXT, DTYPE)
//   curl -sN localhost:3000/v1/chat/completions -H 'content-type: application/json' \
//        -d '{"messages": [{"role": "user", "content": "Hi!"}], "max_tokens": 16, "stream": true}'
const path = require('node:path')
const torch = require('..')

/**
 * Loads the model folder (off the event loop) and listens. Options: `modelDir` (required),
 * `name` (the model id; default the folder's name), `port` (0: any free one), `host`, `limits`
 * (torch.serve's), and CausalLM's load options `dtype`, `maxSequences`, `maxQueue`,
 * `maxContext`. Resolves to `{ server, url, close(), lm, name }`.
 */
async function start({ modelDir, name, port = 3000, host = '127.0.0.1', limits, ...load } = {}) {
  if (typeof modelDir !== 'string') {
    const message = 'modelDir: expected the path of a torch-node causal-LM folder'
    throw Object.assign(new Error(message), { code: 'InvalidArg' })
  }
  const modelName = name || path.basename(path.resolve(modelDir))
  const options = Object.fromEntries(Object.entries(load).filter(([, v]) => v !== undefined))
  const served = await torch.serve({ models: { [modelName]: { folder: modelDir, ...options } }, port, host, limits })
  return {
    server: served.server,
    url: served.url,
    close: () => served.close(),
    lm: served.models[modelName],
    name: modelName,
  }
}

module.exports = { start }

if (require.main === module) {
  const env = process.env
  const numberOf = (key) => (env[key] === undefined ? undefined : Number(env[key]))
  start({
    modelDir: env.MODEL_DIR || path.join(__dirname, '..', 'models', 'golden', 'lm', 'llama-tiny'),
    name: env.MODEL_NAME,
    port: env.PORT === undefined ? 3000 : Number(env.PORT),
    host: env.HOST || '127.0.0.1',
    dtype: env.DTYPE,
    maxSequences: numberOf('MAX_SEQUENCES'),
    maxQueue: numberOf('MAX_QUEUE'),
    maxContext: numberOf('MAX_CONTEXT'),
  }).then(
    ({ url, name }) => {
      console.log(
        `chat with model ${JSON.stringify(name)} on ${url}/v1/chat/completions (/v1/completions, GET /v1/models)`,
      )
    },
    (e) => {
      console.error(`chat-server: ${e.code || 'Error'}: ${String(e.message).split('\n')[0]}`)
      process.exit(1)
    },
  )
}

'use strict'
// `torch-node serve` (bin/torch-node.js): torch.serve from the command line. The first line on
// stdout is `listening on http://HOST:PORT` (scripts read it), the second the clients' baseURL; SIGTERM or SIGINT stops accepting, lets the requests
// running finish within --shutdown-timeout, aborts the rest, and exits 0. Exit codes: 1 a model
// or the port failed (one line on stderr, with its code), 2 a usage error.
const { parseArgs } = require('node:util')
const { readTemplateFile } = require('../text/template-file')

const USAGE = `usage: torch-node serve --model NAME=FOLDER [--model NAME=FOLDER ...] [--host 127.0.0.1]
         [--port 8000] [--api-key KEY] [--max-sequences N] [--max-queue N] [--prefix-cache TOKENS]
         [--lazy] [--max-loaded N] [--max-memory SIZE] [--idle SECONDS] [--shutdown-timeout 10]
         [--fetch-images | --allowed-media-domains HOST[,HOST...]] [--chat-template NAME=FILE ...]
         [--speculative [NAME=]prompt-lookup[,max-draft=N][,ngram=N] ...]

Serves torch-node model folders (\`npx torch-node export\`) with OpenAI's API: causal LMs on
/v1/chat/completions, /v1/completions, /v1/responses and Anthropic's /v1/messages, sentence encoders
on /v1/embeddings, rerankers on /v1/rerank and /v1/score, classifiers on /v1/classify, Whisper on
/v1/audio/transcriptions and /v1/audio/translations, VITS (MMS-TTS) on /v1/audio/speech; GET /v1/models, /health and /metrics (Prometheus). NAME is what clients send as \`model\`; the kind of each folder
is read from its manifest.json.
  --host              the address to bind (0.0.0.0 to face the network)
  --port              0: any free one; the first line printed says which
  --api-key           /v1/* requests must send Authorization: Bearer KEY (or $TORCH_NODE_API_KEY)
  --max-sequences     causal LMs: sequences generating at once (default 4)
  --max-queue         requests waiting per model before 503 QueueFull (LMs 64, encoders 1024,
                      Whisper 64 past the one running)
  --prefix-cache      causal LMs: keep prompts' keys and values, up to TOKENS in all (a shared
                      start held once), for later prompts that start the same (a system prompt, a
                      chat history; default 8192, 0: off; SmolLM2-135M fp32: 45 KiB a token)
  --lazy              load each model on its first request (default: at start, as vLLM does)
  --max-loaded        models loaded at once (default: all); another's request unloads the least
                      recently used one that runs nothing, or waits for it to finish
  --max-memory        the models loaded at once take at most SIZE (512MiB, 4GiB, 4GB; a bare number
                      is MiB), each counted as its folder's files plus its prefix cache's bound;
                      a load that would pass it first unloads the least recently used models that
                      run nothing; a model larger than SIZE alone is a 500 ModelTooLarge
  --idle              unload a model after SECONDS without requests (default: never); the next
                      request loads it again
  --shutdown-timeout  seconds that requests running get to finish after SIGTERM (default 10)
  --fetch-images      fetch http(s) image URLs in chats (default: a 400; send data: URLs), at
                      most 20 MiB each within 10 s, 3 redirects, an image/* answer
  --allowed-media-domains  fetch them only from these hosts and their subdomains (vLLM's flag)
  --chat-template     NAME=FILE: model NAME's chat template is FILE (Jinja) instead of its
                      folder's, e.g. one that renders tools (repeatable)
  --speculative       causal LMs: speculative decoding by prompt lookup (drafts copied from the
                      prompt and output, checked in one step; greedy output unchanged), for every
                      causal LM or, with NAME=, that one (repeatable); max-draft: tokens drafted
                      a step (1 to 15, default 5), ngram: the longest match looked up (default 3)
See docs/serving.md.`

const ROUTES = {
  chat: '/v1/chat/completions, /v1/completions, /v1/responses, /v1/messages',
  embeddings: '/v1/embeddings',
  classify: '/v1/classify',
  rerank: '/v1/rerank, /v1/score',
  audio: '/v1/audio/transcriptions, /v1/audio/translations',
  speech: '/v1/audio/speech',
}

class UsageError extends Error {}

const SIZE_UNITS = { '': 2 ** 20, mib: 2 ** 20, gib: 2 ** 30, tib: 2 ** 40, mb: 1e6, gb: 1e9, tb: 1e12 }

/**
 * A size in bytes: a number with MiB, GiB, TiB (binary), MB, GB, TB (decimal), or none (MiB).
 * @param {string | undefined} value @param {string} flag
 */
function size(value, flag) {
  if (value === undefined) return undefined
  const m = /^\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*$/i.exec(value)
  const unit = m && SIZE_UNITS[/** @type {keyof typeof SIZE_UNITS} */ (m[2].toLowerCase())]
  const bytes = m && unit ? Math.floor(Number(m[1]) * unit) : NaN
  if (!(bytes >= 1) || !Number.isSafeInteger(bytes))
    throw new UsageError(`${flag}: expected a size such as 512MiB, 4GiB or 4GB, got ${value}`)
  return bytes
}

/** @param {string} value @param {string} flag @param {number} min */
function integer(value, flag, min) {
  const n = Number(value)
  if (value === undefined) return undefined
  if (!Number.isSafeInteger(n) || n < min) throw new UsageError(`${flag}: expected an integer ≥ ${min}, got ${value}`)
  return n
}

/**
 * One `--speculative [NAME=]prompt-lookup[,max-draft=N][,ngram=N]`: the model it names (null: every
 * causal LM) and `CausalLM.load`'s `speculative` option (its ranges checked by the load).
 * @param {string} value
 */
function speculative(value) {
  const [head, ...settings] = value.split(',')
  const at = head.indexOf('=')
  const [name, method] = at >= 0 ? [head.slice(0, at), head.slice(at + 1)] : [null, head]
  if (name === '' || method !== 'prompt-lookup')
    throw new UsageError(
      `--speculative: expected [NAME=]prompt-lookup[,max-draft=N][,ngram=N], got ${JSON.stringify(value)}`,
    )
  /** @type {{ method: string; maxDraft?: number; ngram?: number }} */
  const spec = { method }
  for (const s of settings) {
    const [key, n] = s.split('=')
    const option = { 'max-draft': 'maxDraft', ngram: 'ngram' }[key]
    if (!option || n === undefined || Object.hasOwn(spec, option))
      throw new UsageError(`--speculative: expected max-draft=N or ngram=N (once each), got ${JSON.stringify(s)}`)
    spec[/** @type {'maxDraft' | 'ngram'} */ (option)] = /** @type {number} */ (integer(n, `--speculative ${key}`, 1))
  }
  return { name, spec }
}

/** The options of `torch.serve` from the command line. @param {string[]} argv */
function parse(argv) {
  let parsed
  try {
    parsed = parseArgs({
      args: argv,
      options: {
        model: { type: 'string', multiple: true },
        host: { type: 'string', default: '127.0.0.1' },
        port: { type: 'string', default: '8000' },
        'api-key': { type: 'string' },
        'max-sequences': { type: 'string' },
        'max-queue': { type: 'string' },
        'prefix-cache': { type: 'string' },
        'shutdown-timeout': { type: 'string', default: '10' },
        lazy: { type: 'boolean' },
        'max-loaded': { type: 'string' },
        'max-memory': { type: 'string' },
        idle: { type: 'string' },
        'fetch-images': { type: 'boolean' },
        'allowed-media-domains': { type: 'string' },
        'chat-template': { type: 'string', multiple: true },
        speculative: { type: 'string', multiple: true },
        help: { type: 'boolean', short: 'h' },
      },
    })
  } catch (e) {
    throw new UsageError(String(/** @type {Error} */ (e).message).split('\n')[0])
  }
  const v = parsed.values
  if (v.help) return null
  if (!v.model?.length) throw new UsageError('--model NAME=FOLDER: at least one model to serve')
  const maxSequences = integer(v['max-sequences'], '--max-sequences', 1)
  const maxQueue = integer(v['max-queue'], '--max-queue', 0)
  // Not given: torch.serve's default (on); 0 turns it off.
  const prefixTokens = integer(v['prefix-cache'], '--prefix-cache', 0)
  /** @type {Record<string, any>} */
  const models = {}
  for (const m of v.model) {
    const at = m.indexOf('=')
    const [name, folder] = at > 0 ? [m.slice(0, at), m.slice(at + 1)] : [null, '']
    if (!name || !folder) throw new UsageError(`--model: expected NAME=FOLDER, got ${JSON.stringify(m)}`)
    if (Object.hasOwn(models, name)) throw new UsageError(`--model: ${JSON.stringify(name)} is given twice`)
    models[name] = {
      folder,
      ...(maxQueue !== undefined && { maxQueue }),
      ...(maxSequences !== undefined && { maxSequences }),
      ...(prefixTokens !== undefined && { prefixCache: { maxTokens: prefixTokens } }),
    }
  }
  for (const t of v['chat-template'] ?? []) {
    const at = t.indexOf('=')
    const [name, file] = at > 0 ? [t.slice(0, at), t.slice(at + 1)] : [null, '']
    if (!name || !file) throw new UsageError(`--chat-template: expected NAME=FILE, got ${JSON.stringify(t)}`)
    if (!Object.hasOwn(models, name)) throw new UsageError(`--chat-template: no --model named ${JSON.stringify(name)}`)
    try {
      models[name].chatTemplate = readTemplateFile(file)
    } catch (e) {
      throw new UsageError(`--chat-template: ${/** @type {Error} */ (e).message}`)
    }
  }
  // A NAME= one is that model's, whatever the order; one without NAME, every other causal LM's.
  /** @type {string[]} */
  const speculativeNamed = []
  for (const given of v.speculative ?? []) {
    const { name, spec } = speculative(given)
    if (name !== null && !Object.hasOwn(models, name))
      throw new UsageError(`--speculative: no --model named ${JSON.stringify(name)}`)
    if (name !== null && speculativeNamed.includes(name))
      throw new UsageError(`--speculative: ${JSON.stringify(name)} is given twice`)
    if (name !== null) speculativeNamed.push(name)
    for (const [n, m] of Object.entries(models))
      if (name === null ? !speculativeNamed.includes(n) : n === name) m.speculative = spec
  }
  const port = integer(v.port, '--port', 0)
  if (port > 65535) throw new UsageError(`--port: expected 0 to 65535, got ${v.port}`)
  const shutdownSeconds = Number(v['shutdown-timeout'])
  if (!(shutdownSeconds >= 0))
    throw new UsageError(`--shutdown-timeout: expected seconds ≥ 0, got ${v['shutdown-timeout']}`)
  const apiKey = v['api-key'] ?? (process.env.TORCH_NODE_API_KEY || undefined)
  const maxLoaded = integer(v['max-loaded'], '--max-loaded', 1)
  const maxMemory = size(v['max-memory'], '--max-memory')
  const idleSeconds = v.idle === undefined ? 0 : Number(v.idle)
  if (!(idleSeconds >= 0)) throw new UsageError(`--idle: expected seconds ≥ 0, got ${v.idle}`)
  const domains = v['allowed-media-domains']?.split(',').map((h) => h.trim())
  if (domains && !domains.every((h) => /^[\w.-]+$/.test(h)))
    throw new UsageError(
      `--allowed-media-domains: expected host names separated by commas, got ${JSON.stringify(domains.join(','))}`,
    )
  const fetchImages = domains ?? (v['fetch-images'] ? true : undefined)
  return {
    models,
    host: v.host,
    port,
    apiKey,
    shutdownMs: shutdownSeconds * 1000,
    ...(v.lazy && { lazy: true }),
    ...(maxLoaded !== undefined && { maxLoaded }),
    ...(maxMemory !== undefined && { maxMemory }),
    ...(idleSeconds > 0 && { idleMs: Math.round(idleSeconds * 1000) }),
    ...(fetchImages !== undefined && { fetchImages }),
    ...(speculativeNamed.length > 0 && { speculativeNamed }),
  }
}

/**
 * Runs the server until SIGTERM or SIGINT; resolves to the exit code.
 * @param {string[]} argv the arguments after `serve`
 * @returns {Promise<number>}
 */
async function main(argv) {
  let o
  try {
    o = parse(argv)
  } catch (e) {
    if (!(e instanceof UsageError)) throw e
    process.stderr.write(`torch-node serve: ${e.message}\n${USAGE}\n`)
    return 2
  }
  if (o === null) {
    process.stdout.write(`${USAGE}\n`)
    return 0
  }
  const { serve, kindOf, servedKind } = require('./index')
  // --max-sequences, --prefix-cache and --speculative are the causal LMs' alone (a --speculative
  // NAME= for another kind stays: its load refuses it, naming the option).
  // (A folder without a manifest keeps them: serve() says what is wrong with the folder.)
  for (const [name, spec] of Object.entries(o.models)) {
    try {
      if (kindOf(spec.folder) !== 'causal-lm') {
        delete spec.maxSequences
        delete spec.prefixCache
        if (!o.speculativeNamed?.includes(name)) delete spec.speculative
      }
    } catch {}
  }
  let server
  try {
    const { models, host, port, apiKey, lazy, maxLoaded, maxMemory, idleMs, fetchImages } = o
    server = await serve({ models, host, port, apiKey, lazy, maxLoaded, maxMemory, idleMs, fetchImages })
  } catch (e) {
    const err = /** @type {any} */ (e)
    process.stderr.write(`torch-node serve: ${err.code || 'Error'}: ${String(err.message).split('\n')[0]}\n`)
    return 1
  }
  process.stdout.write(`listening on ${server.url}\n  (clients: baseURL ${server.url}/v1)\n`)
  for (const [name, spec] of Object.entries(o.models)) {
    const routes = ROUTES[/** @type {keyof typeof ROUTES} */ (servedKind(spec.folder))]
    const later = server.models[name] === undefined ? ' (loads on its first request)' : ''
    process.stdout.write(`  ${name}: ${routes}${later}\n`)
  }
  // The first signal starts the shutdown; a second one (either) ends the process at once, as
  // Node's default handling does once no listener is left.
  const signal = await new Promise((resolve) => {
    const on = (/** @type {string} */ name) => {
      process.off('SIGTERM', onTerm)
      process.off('SIGINT', onInt)
      resolve(name)
    }
    const onTerm = () => on('SIGTERM')
    const onInt = () => on('SIGINT')
    process.on('SIGTERM', onTerm)
    process.on('SIGINT', onInt)
  })
  process.stdout.write(`${signal}: shutting down (up to ${o.shutdownMs / 1000} s for the requests running)\n`)
  await server.close({ timeoutMs: o.shutdownMs })
  return 0
}

module.exports = { main, parse, USAGE }

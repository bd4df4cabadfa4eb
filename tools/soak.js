'use strict'
// The serve soak (issue 52's "done when"): `torch-node serve` with two causal-LM folders and
// --max-loaded 1 takes a bounded mix of requests at a fixed concurrency — chat streamed and not,
// forced tool calls, JSON-schema output, the Responses and Messages APIs, clients that disconnect
// before the first token and mid-stream, and hostile bodies — and must end with no 5xx but 503
// QueueFull, every sequence free (read from /metrics), and the server's RSS at the end at most
// 1.15× its RSS after the first 200 requests. Prints one line per phase and a summary; exits 1
// when a check fails.
//   node tools/soak.js --model a=/tmp/smollm2 --model b=/tmp/smollm2-int4 [--requests 2000]
//        [--concurrency 32] [--max-seconds 1800] [--max-tokens 12] [--tool-tokens 40] [--swap-every 25]
//        [--prefix-cache TOKENS] [--warmup 200]
// --max-tokens bounds the free-text requests, --tool-tokens the forced tool calls and JSON-schema
// outputs (cut ones end with finish `length`, still a 200); --swap-every: requests in a row for one
// model before the next model's (so --max-loaded 1 swaps while requests run); --prefix-cache: serve's
// (its default when not given). The prefix cache grows to its bound as distinct prompts come (8,192
// tokens of SmolLM2-135M fp32 keys and values are 360 MiB) and empties when its model unloads, so
// how full it is at a reading depends on when the last swap was. Before each RSS reading (after the
// first 200 requests, and at the end) the requests pause and the loaded model's cache is filled to
// its bound with distinct prompts (at most --warmup requests): both readings then hold one model
// with a full cache, and compare it with itself. Each reading prints the cache's tokens and bytes
// beside it, and the ratio of RSS less those bytes too (--warmup 0: no fill).
const { spawn } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')
const { setTimeout: sleep } = require('node:timers/promises')

const ROOT = path.join(__dirname, '..')

function parseArgs(argv) {
  const out = {
    models: [],
    requests: 2000,
    concurrency: 32,
    maxSeconds: 1800,
    maxTokens: 12,
    toolTokens: 40,
    swapEvery: 25,
    prefixCache: undefined,
    warmup: 200,
  }
  for (let i = 0; i < argv.length; i++) {
    const [key, value] = [argv[i], argv[i + 1]]
    if (key === '--model') out.models.push(value)
    else if (key === '--requests') out.requests = Number(value)
    else if (key === '--concurrency') out.concurrency = Number(value)
    else if (key === '--max-seconds') out.maxSeconds = Number(value)
    else if (key === '--max-tokens') out.maxTokens = Number(value)
    else if (key === '--tool-tokens') out.toolTokens = Number(value)
    else if (key === '--swap-every') out.swapEvery = Number(value)
    else if (key === '--prefix-cache') out.prefixCache = value
    else if (key === '--warmup') out.warmup = Number(value)
    else throw new Error(`unknown argument ${key}`)
    i++
  }
  if (out.models.length < 1) throw new Error('give --model NAME=FOLDER (twice for the --max-loaded 1 swap)')
  return out
}

/** The server's resident set in MiB, from /proc. */
function rssMiB(pid) {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8')
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)[1]) / 1024
}

/** Starts `torch-node serve` on a free loopback port; resolves to { child, url }. */
async function startServer(models, prefixCache) {
  const args = [path.join(ROOT, 'bin', 'torch-node.js'), 'serve', '--host', '127.0.0.1', '--port', '0']
  for (const m of models) args.push('--model', m)
  args.push('--max-loaded', '1', '--max-sequences', '4', '--max-queue', '24')
  if (prefixCache !== undefined) args.push('--prefix-cache', prefixCache)
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'] })
  let log = ''
  child.stderr.on('data', (d) => (log += d))
  const url = await new Promise((resolve, reject) => {
    let out = ''
    child.stdout.on('data', (d) => {
      out += d
      const m = /listening on (http:\/\/\S+)/.exec(out)
      if (m) resolve(m[1])
    })
    child.once('exit', (code) => reject(new Error(`serve exited with ${code} before listening:\n${log}`)))
  })
  return { child, url, log: () => log }
}

const TOOL = {
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'The weather in a city',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  },
}
const SCHEMA = {
  type: 'object',
  properties: { name: { type: 'string' }, age: { type: 'integer' } },
  required: ['name', 'age'],
  additionalProperties: false,
}
const HOSTILE = [
  '{"messages": [',
  '{"messages": "hi", "max_tokens": 4}',
  '{"messages": [{"role": "user", "content": "hi"}], "max_tokens": -1}',
  '{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1e308}',
  '{"messages": [{"role": "user", "content": "hi"}], "temperature": "hot"}',
  `{"messages": [{"role": "user", "content": "hi"}], "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": ${'{"type":"array","items":'.repeat(200)}{}${'}'.repeat(200)}}}}`,
  '{"messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "function", "function": {}}]}',
  '[]',
  'null',
]

// fetch's own client gives up on a request whose headers take 300 s (UND_ERR_HEADERS_TIMEOUT):
// on a few shared cores a request queued behind a swap can wait longer, and that is the server's
// queue working, not a failure. With undici at hand (a dev dependency's), no timeout but the run's.
let dispatcher
try {
  const { Agent } = require('undici')
  dispatcher = new Agent({ headersTimeout: 0, bodyTimeout: 0 })
} catch {}

/** 5xx answers by `status code` (503 QueueFull is expected under load; any other is a failure). */
const serverErrors = new Map()

/** One request of kind `i % KINDS.length`: resolves to its HTTP status (0: aborted by us). */
function kinds(url, maxTokens, toolTokens) {
  const post = (route, body, signal) =>
    fetch(`${url}${route}`, {
      dispatcher,
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: typeof body === 'string' ? body : JSON.stringify(body),
      signal,
    })
  const user = (text) => [{ role: 'user', content: text }]
  const drain = async (res) => {
    const body = await res.text()
    if (res.status >= 500) {
      let code = '?'
      try {
        const { error } = JSON.parse(body)
        // Anthropic's shape (/v1/messages) has no code: its overloaded_error is QueueFull, or
        // Unavailable, whose message says the server is shutting down.
        const anthropic = error?.type === 'overloaded_error' && !/shutting down/.test(error.message)
        code = error?.code ?? (anthropic ? 'QueueFull' : (error?.type ?? code))
      } catch {}
      const key = `${res.status} ${code}`
      serverErrors.set(key, (serverErrors.get(key) ?? 0) + 1)
      if (res.status !== 503 || code !== 'QueueFull') console.log(`[soak] ${key}: ${body.slice(0, 300)}`)
    }
    return res.status
  }
  return [
    async (m) => drain(await post('/v1/chat/completions', { model: m, messages: user('Hi!'), max_tokens: maxTokens })),
    async (m) =>
      drain(
        await post('/v1/chat/completions', {
          model: m,
          messages: user('Tell me a story.'),
          max_tokens: maxTokens,
          stream: true,
        }),
      ),
    async (m) =>
      drain(
        await post('/v1/chat/completions', {
          model: m,
          messages: user('Weather in Paris?'),
          tools: [TOOL],
          tool_choice: 'required',
          max_tokens: toolTokens,
        }),
      ),
    async (m) =>
      drain(
        await post('/v1/chat/completions', {
          model: m,
          messages: user('John is 31.'),
          response_format: { type: 'json_schema', json_schema: { name: 'person', schema: SCHEMA } },
          max_tokens: toolTokens,
        }),
      ),
    async (m) => drain(await post('/v1/responses', { model: m, input: 'Hello', max_output_tokens: maxTokens })),
    async (m) =>
      drain(await post('/v1/responses', { model: m, input: 'Hello', max_output_tokens: maxTokens, stream: true })),
    async (m) => drain(await post('/v1/messages', { model: m, messages: user('Hi'), max_tokens: maxTokens })),
    async (m) =>
      drain(await post('/v1/messages', { model: m, messages: user('Hi'), max_tokens: maxTokens, stream: true })),
    // A client that leaves before the first token.
    async (m) => {
      const ac = new AbortController()
      const req = post(
        '/v1/chat/completions',
        { model: m, messages: user('Hi'), max_tokens: 64, stream: true },
        ac.signal,
      )
      ac.abort()
      return req.then(drain, () => 0)
    },
    // A client that leaves after the first chunk of a stream.
    async (m) => {
      const ac = new AbortController()
      try {
        const res = await post(
          '/v1/chat/completions',
          { model: m, messages: user('Count.'), max_tokens: 64, stream: true },
          ac.signal,
        )
        if (res.status !== 200) return drain(res)
        const reader = res.body.getReader()
        await reader.read()
        ac.abort()
        return 0
      } catch {
        return 0
      }
    },
    // Hostile bodies: a 4xx each.
    async (m, i) => {
      const body = HOSTILE[i % HOSTILE.length]
      return drain(await post('/v1/chat/completions', body.replace('{"messages"', `{"model": "${m}", "messages"`)))
    },
  ]
}

/**
 * The bytes one token's keys and values take in a causal-LM folder's cache (its manifest.json:
 * layers × 2 × kv_heads × head_dim × the cache dtype's size); 0 where the manifest does not say.
 */
function kvBytesPerToken(folder) {
  try {
    const m = JSON.parse(fs.readFileSync(path.join(folder, 'manifest.json'), 'utf8'))
    const size = { float32: 4, float16: 2, bfloat16: 2 }[m.cache?.dtype ?? m.dtype] ?? 0
    return m.layers * 2 * m.kv_heads * m.head_dim * size || 0
  } catch {
    return 0
  }
}

/**
 * Fills `model`'s prefix cache to its bound: distinct prompts of about 300 tokens, four at a time,
 * one new token each, until the cache holds all but a block's worth of its bound, stops growing
 * for 8 requests, or `limit` requests are sent. Resolves to `{sent, tokens, max}`.
 */
async function fillPrefixCache(url, model, limit) {
  const read = async () => {
    const text = await (await fetch(`${url}/metrics`)).text()
    const of = (name) =>
      Number(new RegExp(`^${name}\\{[^}]*model_name="${model}"[^}]*\\} (\\S+)`, 'm').exec(text)?.[1] ?? 0)
    return { tokens: of('torch_node_prefix_cache_tokens'), max: of('torch_node_prefix_cache_max_tokens') }
  }
  let sent = 0
  let best = 0
  let still = 0
  let state = await read()
  while (sent < limit) {
    const batch = Array.from({ length: 4 }, (_, k) => {
      const n = sent + k
      const words = Array.from({ length: 60 }, (_, w) => `w${n}x${w}`).join(' ')
      return fetch(`${url}/v1/chat/completions`, {
        dispatcher,
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model, messages: [{ role: 'user', content: `${n}: ${words}` }], max_tokens: 1 }),
      }).then((r) => r.text())
    })
    await Promise.all(batch)
    sent += batch.length
    state = await read()
    if (state.max && state.tokens >= state.max - 16) break
    still = state.tokens > best ? 0 : still + batch.length
    best = Math.max(best, state.tokens)
    if (still >= 8) break
  }
  return { sent, ...state }
}

/** The value of a metric line `name{...model_name="m"...} v` summed over the models. */
function metric(text, name) {
  let sum = 0
  for (const line of text.split('\n')) {
    if (line.startsWith(`${name}{`) || line.startsWith(`${name} `)) sum += Number(line.split(' ').pop())
  }
  return sum
}

async function main() {
  const opts = parseArgs(process.argv.slice(2))
  const names = opts.models.map((m) => m.split('=')[0])
  const started = Date.now()
  const deadline = started + opts.maxSeconds * 1000
  const server = await startServer(opts.models, opts.prefixCache)
  console.log(
    `[soak] serve on ${server.url} (pid ${server.child.pid}), models ${names.join(', ')}, --max-loaded 1, ` +
      `--max-sequences 4, --max-queue 24; ${opts.requests} requests at concurrency ${opts.concurrency}, max_tokens ` +
      `${opts.maxTokens} (tools and schemas ${opts.toolTokens}), models swapped every ${opts.swapEvery} requests`,
  )
  const cacheTokens = async () =>
    metric(await (await fetch(`${server.url}/metrics`)).text(), 'torch_node_prefix_cache_tokens')
  const folders = new Map(opts.models.map((m) => [m.split('=')[0], m.split('=').slice(1).join('=')]))
  const bytesOf = (name, tokens) => tokens * kvBytesPerToken(folders.get(name))
  const mib = (bytes) => (bytes / 2 ** 20).toFixed(0)
  /** Fills the loaded model's cache (see the top), then reads RSS and the cache: `{rss, tokens, bytes}`. */
  const reading = async (model, label) => {
    if (opts.warmup > 0) {
      const w = await fillPrefixCache(server.url, model, opts.warmup)
      console.log(`[soak] ${label}: filled ${model}'s prefix cache with ${w.sent} distinct prompts`)
    }
    const tokens = await cacheTokens()
    const r = { rss: rssMiB(server.child.pid), tokens, bytes: bytesOf(model, tokens) }
    console.log(
      `[soak] RSS ${label}: ${r.rss.toFixed(0)} MiB, ${model} loaded with its prefix cache at ${tokens} tokens ` +
        `(${mib(r.bytes)} MiB of keys and values)`,
    )
    return r
  }
  const requests = kinds(server.url, opts.maxTokens, opts.toolTokens)
  const statuses = new Map()
  const bad = []
  let next = 0
  let done = 0
  // RSS once the first 200 requests (a third of a shorter run) are answered: the warm baseline.
  const warmAt = Math.min(200, Math.ceil(opts.requests / 3))
  const modelOf = (i) => names[Math.floor(i / opts.swapEvery) % names.length]
  let hostile503 = 0
  const worker = async (until) => {
    while (next < until && Date.now() < deadline) {
      const i = next++
      // Models alternate in runs of --swap-every, so --max-loaded 1 swaps while requests are running.
      const model = modelOf(i)
      const kind = i % requests.length
      let status
      try {
        status = await requests[kind](model, i)
      } catch (e) {
        status = `error ${e.cause?.code ?? e.message}`
      }
      statuses.set(`${kind}:${status}`, (statuses.get(`${kind}:${status}`) ?? 0) + 1)
      const hostile = kind === requests.length - 1
      // A hostile body: a 4xx, even while its model is swapped in (the route's readers run before the
      // request waits for the model), never 503 QueueFull.
      if (hostile && status === 503) hostile503++
      if (
        typeof status !== 'number' ||
        (status >= 500 && status !== 503) ||
        (hostile && !(status >= 400 && status < 500))
      ) {
        bad.push({ i, kind, status })
      }
      if (++done % 250 === 0) console.log(`[soak] ${done} requests, ${((Date.now() - started) / 1000).toFixed(0)} s`)
    }
  }
  // The requests in two runs: up to the baseline reading, then the rest; each reading is of the
  // model the baseline's last request loaded.
  await Promise.all(Array.from({ length: opts.concurrency }, () => worker(warmAt)))
  const warm = await reading(modelOf(warmAt - 1), `after ${warmAt} requests`)
  await Promise.all(Array.from({ length: opts.concurrency }, () => worker(opts.requests)))
  // Every sequence free: the gauges at 0 (read until they are, bounded).
  let metrics = ''
  for (let t = 0; t < 100; t++) {
    metrics = await (await fetch(`${server.url}/metrics`)).text()
    if (metric(metrics, 'vllm:num_requests_running') === 0 && metric(metrics, 'vllm:num_requests_waiting') === 0) break
    await sleep(100)
  }
  const running = metric(metrics, 'vllm:num_requests_running')
  const waiting = metric(metrics, 'vllm:num_requests_waiting')
  // The baseline's model again (a swap back where the run ended on another): RSS of the same model.
  const end = await reading(modelOf(warmAt - 1), `at the end (${done} requests)`)
  metrics = await (await fetch(`${server.url}/metrics`)).text()
  server.child.kill('SIGTERM')
  const byKind = [...statuses]
    .sort()
    .map(([k, n]) => `${k}×${n}`)
    .join(' ')
  console.log(`[soak] ${done} requests in ${((Date.now() - started) / 1000).toFixed(0)} s; kind:status×count ${byKind}`)
  console.log(
    `[soak] loads ${metric(metrics, 'torch_node_model_loads_total')}, unloads ${metric(metrics, 'torch_node_model_unloads_total')}`,
  )
  const queueFull = serverErrors.get('503 QueueFull') ?? 0
  const other5xx = [...serverErrors].filter(([k]) => k !== '503 QueueFull')
  console.log(
    `[soak] 5xx other than 503 QueueFull: ${other5xx.reduce((n, [, c]) => n + c, 0)}` +
      `${other5xx.length ? ` (${other5xx.map(([k, n]) => `${k}×${n}`).join(', ')})` : ''}; 503 QueueFull: ${queueFull}`,
  )
  console.log(`[soak] hostile bodies answered 503 QueueFull rather than a 4xx: ${hostile503}`)
  console.log(
    `[soak] at the end: running ${running}, waiting ${waiting} (every sequence free: ${!running && !waiting})`,
  )
  const ratio = end.rss / warm.rss
  const less = (r) => r.rss - r.bytes / 2 ** 20
  console.log(
    `[soak] RSS after ${warmAt} requests ${warm.rss.toFixed(0)} MiB, at the end ${end.rss.toFixed(0)} MiB: ` +
      `${ratio.toFixed(3)}× (the criterion: at most 1.15×); prefix cache ${warm.tokens} then ${end.tokens} tokens ` +
      `(${mib(warm.bytes)} then ${mib(end.bytes)} MiB); less the cache's bytes ${less(warm).toFixed(0)} then ` +
      `${less(end).toFixed(0)} MiB: ${(less(end) / less(warm)).toFixed(3)}×`,
  )
  const failures = []
  if (done < opts.requests) failures.push(`only ${done} of ${opts.requests} requests within ${opts.maxSeconds} s`)
  if (bad.length) failures.push(`${bad.length} unexpected answers, first ${JSON.stringify(bad.slice(0, 5))}`)
  if (other5xx.length)
    failures.push(`5xx other than 503 QueueFull: ${other5xx.map(([k, n]) => `${k}×${n}`).join(', ')}`)
  if (running || waiting) failures.push(`sequences not freed: running ${running}, waiting ${waiting}`)
  if (ratio > 1.15) failures.push(`RSS grew ${ratio.toFixed(3)}× (> 1.15×)`)
  for (const f of failures) console.log(`[soak] FAIL: ${f}`)
  if (!failures.length) console.log('[soak] pass')
  process.exitCode = failures.length ? 1 : 0
}

main().catch((e) => {
  console.error(`[soak] ${e.stack}`)
  process.exitCode = 1
})

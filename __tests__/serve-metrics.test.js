'use strict'
// /metrics of torch-node serve as the Kubernetes Gateway API Inference Extension's endpoint picker
// reads it (its model server protocol: vLLM's names, types and meanings) and as dashboards do:
// - a scripted model with two sequences and a gate: while 5 streams are in, the running gauge
//   says 2, the waiting one 3 and the KV cache usage 1; once the gate opens, all back to 0, and each
//   histogram counts what it should (5 requests, their tokens);
// - torch.serve over the tiny LM: N concurrent streams, after which the histograms' counts and the
//   token counters equal what the clients were told.
// Every state is waited for by reading /metrics (bounded in reads), never by the clock.
const { describe, test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const http = require('node:http')
const path = require('node:path')
const { createHandler } = require('../lib/serve/app')

const LM_DIR = path.join(__dirname, '..', 'models', 'golden', 'lm', 'llama-tiny')

/**
 * Prometheus' text format read back: `samples['name{labels}']` and `types.name`.
 * @param {string} text
 */
function parse(text) {
  const samples = {}
  const types = {}
  for (const line of text.split('\n')) {
    const type = line.match(/^# TYPE (\S+) (\S+)$/)
    if (type) types[type[1]] = type[2]
    const sample = line.match(/^([a-zA-Z_:][\w:]*(?:\{[^}]*\})?) (\S+)$/)
    if (sample) samples[sample[1]] = Number(sample[2])
  }
  return { samples, types }
}

async function scrape(url) {
  const res = await fetch(`${url}/metrics`)
  assert.equal(res.status, 200)
  assert.match(res.headers.get('content-type'), /^text\/plain; version=0\.0\.4/)
  return parse(await res.text())
}

/** Reads /metrics until `ready(samples)` holds (at most `reads` times, a turn of the loop apart). */
async function until(url, ready, reads = 2000) {
  let last
  for (let i = 0; i < reads; i++) {
    last = (await scrape(url)).samples
    if (ready(last)) return last
    await new Promise((resolve) => setImmediate(resolve))
  }
  assert.fail(`/metrics never reached the state wanted; last: ${JSON.stringify(last, null, 1).slice(0, 2000)}`)
}

/**
 * A chat model with `slots` sequences: a generation waits for a slot (queued), then for the gate,
 * then says `pieces` pieces of one token each. Its stats are what CausalLM.stats() says.
 */
function slotted(name, { slots, pieces }) {
  let active = 0
  let queued = 0
  const waiters = []
  let open
  const gate = new Promise((resolve) => (open = resolve))
  return {
    model: {
      kind: 'chat',
      name,
      toolFormat: null,
      markers: new Map(),
      prompt: async (messages) => messages,
      async *generate() {
        if (active >= slots) {
          queued++
          await new Promise((resolve) => waiters.push(resolve))
          queued--
        }
        active++
        try {
          await gate
          for (let i = 0; i < pieces; i++) yield { text: `p${i} `, tokens: [i] }
          return { finishReason: 'length', usage: { promptTokens: 7, completionTokens: pieces } }
        } finally {
          active--
          waiters.shift()?.()
        }
      },
      stats: () => ({ active, queued, maxSequences: slots }),
      dispose() {},
    },
    open: () => open(),
  }
}

const sample = (name, model, extra = '') => `${name}{model_name="${model}"${extra}}`

describe('the model server protocol over a scripted model', () => {
  let server
  let url
  let lm
  before(async () => {
    lm = slotted('lm', { slots: 2, pieces: 3 })
    server = http.createServer(createHandler({ models: [lm.model] }).handle)
    await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
    url = `http://127.0.0.1:${server.address().port}`
  })
  after(() => {
    server.closeAllConnections()
    server.close()
  })

  test("vLLM's names and types", async () => {
    const { types, samples } = await scrape(url)
    for (const name of ['vllm:num_requests_running', 'vllm:num_requests_waiting', 'vllm:kv_cache_usage_perc']) {
      assert.equal(types[name], 'gauge', name)
      assert.equal(samples[sample(name, 'lm')], 0, name)
    }
    assert.equal(types['vllm:gpu_cache_usage_perc'], 'gauge')
    for (const name of ['vllm:prompt_tokens_total', 'vllm:generation_tokens_total', 'vllm:request_success_total']) {
      assert.equal(types[name], 'counter', name)
    }
    for (const name of [
      'vllm:time_to_first_token_seconds',
      'vllm:inter_token_latency_seconds',
      'vllm:e2e_request_latency_seconds',
      'vllm:request_queue_time_seconds',
    ]) {
      assert.equal(types[name], 'histogram', name)
    }
  })

  test('5 streams on 2 sequences: running 2, waiting 3, KV cache full; then 0, and the histograms count 5', async () => {
    const N = 5
    const streams = Array.from({ length: N }, (_, i) =>
      fetch(`${url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          model: 'lm',
          messages: [{ role: 'user', content: `hello ${i}` }],
          stream: true,
          stream_options: { include_usage: true },
        }),
      }).then((r) => r.text()),
    )
    const running = sample('vllm:num_requests_running', 'lm')
    const waiting = sample('vllm:num_requests_waiting', 'lm')
    const during = await until(url, (s) => s[running] === 2 && s[waiting] === 3)
    assert.equal(during[sample('vllm:kv_cache_usage_perc', 'lm')], 1)
    assert.equal(during[sample('vllm:gpu_cache_usage_perc', 'lm')], 1)
    lm.open()
    const bodies = await Promise.all(streams)
    for (const body of bodies) assert.match(body, /"p0 "[\s\S]*"p2 "[\s\S]*\[DONE\]/)
    const s = await until(url, (x) => x[running] === 0 && x[waiting] === 0)
    assert.equal(s[sample('vllm:kv_cache_usage_perc', 'lm')], 0)
    assert.equal(s[sample('vllm:time_to_first_token_seconds_count', 'lm')], N)
    assert.equal(s[sample('vllm:time_to_first_token_seconds_bucket', 'lm', ',le="+Inf"')], N)
    assert.equal(s[sample('vllm:e2e_request_latency_seconds_count', 'lm')], N)
    assert.equal(s[sample('vllm:request_queue_time_seconds_count', 'lm')], N)
    // Between tokens: every token but each request's first.
    assert.equal(s[sample('vllm:inter_token_latency_seconds_count', 'lm')], N * 2)
    assert.equal(s[sample('vllm:request_success_total', 'lm', ',finished_reason="length"')], N)
    assert.equal(s[sample('vllm:prompt_tokens_total', 'lm')], N * 7)
    assert.equal(s[sample('vllm:generation_tokens_total', 'lm')], N * 3)
    // An end-to-end latency holds its time to first token.
    assert.ok(
      s[sample('vllm:e2e_request_latency_seconds_sum', 'lm')] >=
        s[sample('vllm:time_to_first_token_seconds_sum', 'lm')],
    )
  })
})

const skip = !fs.existsSync(path.join(LM_DIR, 'model.pt2')) && 'no models/golden/lm/llama-tiny: run `npm run models`'

describe('torch.serve over the tiny LM', { skip }, () => {
  let s
  before(async () => {
    const { serve } = require('../lib/serve')
    s = await serve({ models: { tiny: { folder: LM_DIR, maxSequences: 2 } } })
  })
  after(() => s?.close({ timeoutMs: 1000 }))

  test('N concurrent streams: the gauges stay within the sequences and end at 0; counts equal requests', async () => {
    const N = 6
    const { default: OpenAI } = await import('openai')
    const client = new OpenAI({ baseURL: `${s.url}/v1`, apiKey: 'unused', maxRetries: 0 })
    let prompt = 0
    let completion = 0
    const runs = Array.from({ length: N }, async (_, i) => {
      const stream = await client.chat.completions.create({
        model: 'tiny',
        messages: [{ role: 'user', content: `story ${i}` }],
        max_tokens: 24,
        stream: true,
        stream_options: { include_usage: true },
      })
      for await (const chunk of stream) {
        if (chunk.usage) {
          prompt += chunk.usage.prompt_tokens
          completion += chunk.usage.completion_tokens
        }
      }
    })
    // Read while they run: never more running than the model's sequences.
    let done = false
    const all = Promise.all(runs).finally(() => (done = true))
    const running = sample('vllm:num_requests_running', 'tiny')
    while (!done) {
      const { samples } = await scrape(s.url)
      assert.ok(samples[running] <= 2, String(samples[running]))
      assert.ok(samples[sample('vllm:kv_cache_usage_perc', 'tiny')] <= 1)
    }
    await all
    const after = await until(s.url, (x) => x[running] === 0 && x[sample('vllm:num_requests_waiting', 'tiny')] === 0)
    assert.equal(after[sample('vllm:kv_cache_usage_perc', 'tiny')], 0)
    assert.equal(after[sample('vllm:time_to_first_token_seconds_count', 'tiny')], N)
    assert.equal(after[sample('vllm:e2e_request_latency_seconds_count', 'tiny')], N)
    assert.equal(after[sample('vllm:request_queue_time_seconds_count', 'tiny')], N)
    assert.equal(after[sample('vllm:prompt_tokens_total', 'tiny')], prompt)
    assert.equal(after[sample('vllm:generation_tokens_total', 'tiny')], completion)
    const finished = Object.entries(after)
      .filter(([k]) => k.startsWith('vllm:request_success_total{model_name="tiny"'))
      .reduce((n, [, v]) => n + v, 0)
    assert.equal(finished, N)
    assert.ok(after[sample('vllm:inter_token_latency_seconds_count', 'tiny')] <= completion - N)
  })
})

describe('prefix-cache counters', { skip }, () => {
  test('queries are the prompt tokens; hits the tokens the cache held (stats().prefixCache.reusedTokens)', async () => {
    const { serve } = require('../lib/serve')
    const s = await serve({ models: { tiny: { folder: LM_DIR, prefixCache: { maxTokens: 2000 } } } })
    try {
      const system = 'You are a helpful assistant who answers briefly. '.repeat(3)
      let prompt = 0
      for (const content of ['hi', 'hello']) {
        const res = await fetch(`${s.url}/v1/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({
            model: 'tiny',
            messages: [
              { role: 'system', content: system },
              { role: 'user', content },
            ],
            max_tokens: 2,
          }),
        })
        prompt += (await res.json()).usage.prompt_tokens
      }
      const { samples, types } = await scrape(s.url)
      assert.equal(types['vllm:prefix_cache_hits_total'], 'counter')
      assert.equal(samples[sample('vllm:prefix_cache_queries_total', 'tiny')], prompt)
      const hits = samples[sample('vllm:prefix_cache_hits_total', 'tiny')]
      assert.equal(hits, s.models.tiny.stats().prefixCache.reusedTokens)
      assert.ok(hits > 0 && hits < prompt, `${hits} of ${prompt}`)
    } finally {
      await s.close({ timeoutMs: 1000 })
    }
  })
})

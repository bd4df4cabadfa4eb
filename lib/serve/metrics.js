// @ts-check
'use strict'
// GET /metrics of torch-node serve: Prometheus' text format (version 0.0.4) — requests by route
// and status, tokens in and out by model, what waits and what runs per model, and a histogram
// of the time to the first token.

/** Upper bounds of the time-to-first-token histogram, in seconds. */
const TTFT_BUCKETS = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60]

/** A label value as the text format quotes it. @param {string} v */
const quote = (v) => `"${v.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n')}"`
/** @param {Record<string, string>} labels */
const labelsOf = (labels) =>
  `{${Object.entries(labels)
    .map(([k, v]) => `${k}=${quote(v)}`)
    .join(',')}}`

class Metrics {
  /** @type {Map<string, number>} `route\0status` → count */
  #requests = new Map()
  /** @type {Map<string, { in: number; out: number }>} */
  #tokens = new Map()
  /** @type {Map<string, { buckets: number[]; sum: number; count: number }>} */
  #ttft = new Map()
  inFlight = 0

  /** @param {string} route @param {number} status */
  request(route, status) {
    const key = `${route}\0${status}`
    this.#requests.set(key, (this.#requests.get(key) ?? 0) + 1)
  }

  /** @param {string} model @param {number} input @param {number} output */
  tokens(model, input, output) {
    const t = this.#tokens.get(model) ?? { in: 0, out: 0 }
    t.in += input
    t.out += output
    this.#tokens.set(model, t)
  }

  /** @param {string} model @param {number} seconds */
  firstToken(model, seconds) {
    const h = this.#ttft.get(model) ?? { buckets: TTFT_BUCKETS.map(() => 0), sum: 0, count: 0 }
    TTFT_BUCKETS.forEach((le, i) => {
      if (seconds <= le) h.buckets[i]++
    })
    h.sum += seconds
    h.count++
    this.#ttft.set(model, h)
  }

  /**
   * The text format.
   * @param {Array<{ name: string; kind: string; stats: () => { active: number; queued: number } }>} models
   */
  text(models) {
    const lines = []
    /** @param {string} name @param {string} type @param {string} help */
    const head = (name, type, help) => lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`)
    head('torch_node_requests_total', 'counter', 'HTTP requests answered, by route and status.')
    for (const [key, n] of this.#requests) {
      const [route, status] = key.split('\0')
      lines.push(`torch_node_requests_total${labelsOf({ route, status })} ${n}`)
    }
    head('torch_node_requests_in_flight', 'gauge', 'HTTP requests being answered.')
    lines.push(`torch_node_requests_in_flight ${this.inFlight}`)
    head('torch_node_prompt_tokens_total', 'counter', 'Tokens read (prompts, texts embedded), by model.')
    for (const [model, t] of this.#tokens) lines.push(`torch_node_prompt_tokens_total${labelsOf({ model })} ${t.in}`)
    head('torch_node_generated_tokens_total', 'counter', 'Tokens generated, by model.')
    for (const [model, t] of this.#tokens)
      lines.push(`torch_node_generated_tokens_total${labelsOf({ model })} ${t.out}`)
    head('torch_node_queue_depth', 'gauge', 'Requests waiting for a sequence (LMs) or a batch (encoders), by model.')
    const stats = models.map((m) => ({ m, s: m.stats() }))
    for (const { m, s } of stats) lines.push(`torch_node_queue_depth${labelsOf({ model: m.name })} ${s.queued}`)
    head('torch_node_running', 'gauge', 'Sequences generating (LMs) or batches running (encoders), by model.')
    for (const { m, s } of stats) lines.push(`torch_node_running${labelsOf({ model: m.name })} ${s.active}`)
    const ttft = 'torch_node_time_to_first_token_seconds'
    head(ttft, 'histogram', 'From a request to its first generated piece, by model.')
    for (const [model, h] of this.#ttft) {
      TTFT_BUCKETS.forEach((le, i) =>
        lines.push(`${ttft}_bucket${labelsOf({ model, le: String(le) })} ${h.buckets[i]}`),
      )
      lines.push(`${ttft}_bucket${labelsOf({ model, le: '+Inf' })} ${h.count}`)
      lines.push(`${ttft}_sum${labelsOf({ model })} ${h.sum}`, `${ttft}_count${labelsOf({ model })} ${h.count}`)
    }
    return `${lines.join('\n')}\n`
  }
}

module.exports = { Metrics, TTFT_BUCKETS }

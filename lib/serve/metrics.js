// @ts-check
'use strict'
// GET /metrics of torch-node serve: Prometheus' text format (version 0.0.4). Two families:
// - vLLM's names (`vllm:*`, label `model_name`) for the causal LMs, so what scrapes vLLM reads
//   torch-node serve unchanged: the Kubernetes Gateway API Inference Extension's model server
//   protocol (docs/proposals/003-model-server-protocol: waiting and running requests, KV cache
//   utilization, gauges) for its endpoint picker, and Grafana's vLLM dashboards (latency
//   histograms, token and prefix-cache counters).
// - torch-node's own (`torch_node_*`, label `model`): requests by route and status, tokens, queue
//   depth and running work of every model, loads and unloads. See docs/serving.md.

// vLLM's buckets (vllm/v1/metrics/loggers.py), so dashboards' quantiles compare.
const TTFT_BUCKETS = [
  0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80, 160, 640, 2560,
]
const ITL_BUCKETS = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80]
const REQUEST_BUCKETS = [0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480, 960, 1920, 7680]
/** Upper bounds of torch_node_time_to_first_token_seconds, in seconds. */
const OWN_TTFT_BUCKETS = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60]

/** A label value as the text format quotes it. @param {string} v */
const quote = (v) => `"${v.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n')}"`
/** @param {Record<string, string>} labels */
const labelsOf = (labels) =>
  `{${Object.entries(labels)
    .map(([k, v]) => `${k}=${quote(v)}`)
    .join(',')}}`

/** One histogram, by model. */
class Histogram {
  /** @type {Map<string, { buckets: number[]; sum: number; count: number }>} */
  byModel = new Map()
  /** @param {number[]} bounds */
  constructor(bounds) {
    this.bounds = bounds
  }

  /** @param {string} model @param {number} value @param {number} [times] */
  observe(model, value, times = 1) {
    const h = this.byModel.get(model) ?? { buckets: this.bounds.map(() => 0), sum: 0, count: 0 }
    this.bounds.forEach((le, i) => {
      if (value <= le) h.buckets[i] += times
    })
    h.sum += value * times
    h.count += times
    this.byModel.set(model, h)
  }

  /** @param {string[]} lines @param {string} name @param {string} label */
  write(lines, name, label) {
    for (const [model, h] of this.byModel) {
      this.bounds.forEach((le, i) =>
        lines.push(`${name}_bucket${labelsOf({ [label]: model, le: String(le) })} ${h.buckets[i]}`),
      )
      lines.push(`${name}_bucket${labelsOf({ [label]: model, le: '+Inf' })} ${h.count}`)
      lines.push(`${name}_sum${labelsOf({ [label]: model })} ${h.sum}`)
      lines.push(`${name}_count${labelsOf({ [label]: model })} ${h.count}`)
    }
  }
}

/**
 * What /metrics says of one model now (lib/serve/models.js's entries).
 * @typedef {object} ModelState
 * @property {string} name
 * @property {string} kind 'chat' for causal LMs
 * @property {'unloaded' | 'loading' | 'loaded'} state
 * @property {{ stats(): Record<string, any> } | null} served null while not loaded
 * @property {number} waiting requests waiting for it to load or for room
 * @property {number} [bytes] what it counts against the memory budget while loaded or loading
 */

/** A map's count plus one. @param {Map<string, number>} map @param {string} key @param {number} [n] */
const add = (map, key, n = 1) => map.set(key, (map.get(key) ?? 0) + n)

class Metrics {
  /** @type {Map<string, number>} `route\0status` → count */
  #requests = new Map()
  /** @type {Map<string, { in: number; out: number }>} */
  #tokens = new Map()
  #ownTtft = new Histogram(OWN_TTFT_BUCKETS)
  #ttft = new Histogram(TTFT_BUCKETS)
  #itl = new Histogram(ITL_BUCKETS)
  #e2e = new Histogram(REQUEST_BUCKETS)
  #queue = new Histogram(REQUEST_BUCKETS)
  /** @type {Map<string, number>} `model\0finished_reason` → count */
  #finished = new Map()
  /** @type {Map<string, number>} */
  #loads = new Map()
  /** @type {Map<string, number>} */
  #loadFailures = new Map()
  /** @type {Map<string, number>} `model\0reason` → count */
  #unloads = new Map()
  /** @type {Map<string, number>} prefix-cache tokens reused by models since unloaded (counters stay monotonic) */
  #reusedBefore = new Map()
  /** @type {Map<string, number>} drafted and accepted tokens of models since unloaded (`model\0proposed|accepted`) */
  #draftsBefore = new Map()
  inFlight = 0
  #maxMemory

  /** @param {{ maxMemory?: number }} [options] the models' memory budget in bytes, if any */
  constructor({ maxMemory = Infinity } = {}) {
    this.#maxMemory = maxMemory
  }

  /** @param {string} route @param {number} status */
  request(route, status) {
    add(this.#requests, `${route}\0${status}`)
  }

  /** @param {string} model @param {number} input @param {number} output */
  tokens(model, input, output) {
    const t = this.#tokens.get(model) ?? { in: 0, out: 0 }
    t.in += input
    t.out += output
    this.#tokens.set(model, t)
  }

  /** From a request's arrival to its first generated piece. @param {string} model @param {number} seconds */
  firstToken(model, seconds) {
    this.#ownTtft.observe(model, seconds)
    this.#ttft.observe(model, seconds)
  }

  /** From a request's arrival to its generation handed to the model. @param {string} model @param {number} seconds */
  queued(model, seconds) {
    this.#queue.observe(model, seconds)
  }

  /**
   * The gap before a piece of `tokens` tokens (not the first piece): each token counts, at the gap's share.
   * @param {string} model @param {number} seconds @param {number} tokens
   */
  piece(model, seconds, tokens) {
    if (tokens > 0) this.#itl.observe(model, seconds / tokens, tokens)
  }

  /** A generation's end. @param {string} model @param {string} finishReason @param {number} seconds since arrival */
  finished(model, finishReason, seconds) {
    this.#e2e.observe(model, seconds)
    add(this.#finished, `${model}\0${finishReason === 'aborted' ? 'abort' : finishReason}`)
  }

  /** @param {string} model */
  loaded(model) {
    add(this.#loads, model)
  }

  /** @param {string} model */
  loadFailed(model) {
    add(this.#loadFailures, model)
  }

  /**
   * @param {string} model
   * @param {string} reason 'idle', 'room' or 'shutdown'
   * @param {{ stats(): Record<string, any> }} served its last stats carry over into the counters
   */
  unloaded(model, reason, served) {
    add(this.#unloads, `${model}\0${reason}`)
    try {
      const stats = served.stats()
      add(this.#reusedBefore, model, stats.prefixCache?.reusedTokens ?? 0)
      if (stats.speculative) {
        add(this.#draftsBefore, `${model}\0proposed`, stats.speculative.proposedTokens)
        add(this.#draftsBefore, `${model}\0accepted`, stats.speculative.acceptedTokens)
      }
    } catch {} // a model whose stats throw has nothing to carry
  }

  /**
   * The text format.
   * @param {ModelState[]} models
   */
  text(models) {
    /** @type {string[]} */
    const lines = []
    /** @param {string} name @param {string} type @param {string} help */
    const head = (name, type, help) => lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`)
    const stats = models.map((m) => {
      /** @type {Record<string, any> | null} */
      let s = null
      try {
        s = m.served?.stats() ?? null
      } catch {} // disposed between the lookup and now: as unloaded
      return { m, s }
    })
    const lms = stats.filter(({ m }) => m.kind === 'chat')
    /** @param {string} name @param {string} type @param {string} help @param {(s: any, m: ModelState) => number | undefined} of */
    const perLm = (name, type, help, of) => {
      head(name, type, help)
      for (const { m, s } of lms) {
        const v = of(s, m)
        if (v !== undefined) lines.push(`${name}${labelsOf({ model_name: m.name })} ${v}`)
      }
    }
    // The model server protocol's gauges.
    perLm('vllm:num_requests_running', 'gauge', 'Requests generating now (holding a sequence).', (s) => s?.active ?? 0)
    perLm(
      'vllm:num_requests_waiting',
      'gauge',
      'Requests waiting: for a sequence, or for the model to load.',
      (s, m) => (s?.queued ?? 0) + m.waiting,
    )
    const usage = (/** @type {any} */ s) => (s?.maxSequences ? s.active / s.maxSequences : s ? undefined : 0)
    const kvHelp = 'KV cache usage, 0 to 1: the share of the sequences (each up to maxContext tokens) in use.'
    perLm('vllm:kv_cache_usage_perc', 'gauge', kvHelp, usage)
    perLm('vllm:gpu_cache_usage_perc', 'gauge', `${kvHelp} (vLLM's name before 0.10)`, usage)
    // The same in tokens, where the engine counts them: the prefix cache's (running sequences'
    // keys and values are not in CausalLM.stats()).
    perLm(
      'torch_node_prefix_cache_tokens',
      'gauge',
      'Tokens whose keys and values the prefix cache holds now (a shared start once).',
      (s) => s?.prefixCache?.tokens,
    )
    perLm(
      'torch_node_prefix_cache_max_tokens',
      'gauge',
      "The prefix cache's bound in tokens (--prefix-cache).",
      (s) => s?.prefixCache?.maxTokens,
    )
    perLm('vllm:prompt_tokens_total', 'counter', 'Prompt tokens read.', (_, m) => this.#tokens.get(m.name)?.in ?? 0)
    perLm('vllm:generation_tokens_total', 'counter', 'Tokens generated.', (_, m) => this.#tokens.get(m.name)?.out ?? 0)
    const reused = (/** @type {any} */ s, /** @type {ModelState} */ m) =>
      (this.#reusedBefore.get(m.name) ?? 0) + (s?.prefixCache?.reusedTokens ?? 0)
    perLm('vllm:prefix_cache_queries_total', 'counter', 'Prompt tokens looked up in the prefix cache.', (s, m) =>
      s?.prefixCache || this.#reusedBefore.has(m.name) ? (this.#tokens.get(m.name)?.in ?? 0) : undefined,
    )
    perLm('vllm:prefix_cache_hits_total', 'counter', 'Prompt tokens the prefix cache held (not run again).', (s, m) =>
      s?.prefixCache || this.#reusedBefore.has(m.name) ? reused(s, m) : undefined,
    )
    // Speculative decoding (--speculative), as vLLM names its counters.
    const drafts =
      (/** @type {'proposed' | 'accepted'} */ which) => (/** @type {any} */ s, /** @type {ModelState} */ m) => {
        const before = this.#draftsBefore.get(`${m.name}\0${which}`)
        const now = s?.speculative?.[`${which}Tokens`]
        return now === undefined && before === undefined ? undefined : (before ?? 0) + (now ?? 0)
      }
    perLm(
      'vllm:spec_decode_num_draft_tokens_total',
      'counter',
      'Tokens drafted by speculative decoding (prompt lookup).',
      drafts('proposed'),
    )
    perLm(
      'vllm:spec_decode_num_accepted_tokens_total',
      'counter',
      'Drafted tokens the model agreed with (kept).',
      drafts('accepted'),
    )
    head('vllm:request_success_total', 'counter', 'Generations finished, by finish reason.')
    for (const [key, n] of this.#finished) {
      const [model, reason] = key.split('\0')
      lines.push(`vllm:request_success_total${labelsOf({ model_name: model, finished_reason: reason })} ${n}`)
    }
    const histograms = /** @type {const} */ ([
      ['vllm:time_to_first_token_seconds', this.#ttft, 'From a request’s arrival to its first generated piece.'],
      ['vllm:inter_token_latency_seconds', this.#itl, 'Between generated tokens of one request.'],
      ['vllm:e2e_request_latency_seconds', this.#e2e, 'From a request’s arrival to its generation’s end.'],
      [
        'vllm:request_queue_time_seconds',
        this.#queue,
        'From a request’s arrival to its generation handed to the model (its load included).',
      ],
    ])
    for (const [name, h, help] of histograms) {
      head(name, 'histogram', help)
      h.write(lines, name, 'model_name')
    }

    // torch-node's own, for every model.
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
    for (const { m, s } of stats) lines.push(`torch_node_queue_depth${labelsOf({ model: m.name })} ${s?.queued ?? 0}`)
    head('torch_node_running', 'gauge', 'Sequences generating (LMs) or batches running (encoders), by model.')
    for (const { m, s } of stats) lines.push(`torch_node_running${labelsOf({ model: m.name })} ${s?.active ?? 0}`)
    head('torch_node_model_loaded', 'gauge', 'Whether a model is loaded (1) or not (0; loading is 0).')
    for (const { m } of stats)
      lines.push(`torch_node_model_loaded${labelsOf({ model: m.name })} ${+(m.state === 'loaded')}`)
    head(
      'torch_node_model_memory_bytes',
      'gauge',
      'What a model loaded or loading counts against --max-memory: its files and its prefix cache bound.',
    )
    for (const { m } of stats)
      lines.push(
        `torch_node_model_memory_bytes${labelsOf({ model: m.name })} ${m.state === 'unloaded' ? 0 : (m.bytes ?? 0)}`,
      )
    if (Number.isFinite(this.#maxMemory)) {
      head('torch_node_max_memory_bytes', 'gauge', 'The memory budget of the models loaded at once (--max-memory).')
      lines.push(`torch_node_max_memory_bytes ${this.#maxMemory}`)
    }
    head('torch_node_model_loads_total', 'counter', 'Loads of a model that succeeded.')
    for (const { m } of stats)
      lines.push(`torch_node_model_loads_total${labelsOf({ model: m.name })} ${this.#loads.get(m.name) ?? 0}`)
    head('torch_node_model_load_failures_total', 'counter', 'Loads of a model that failed.')
    for (const [model, n] of this.#loadFailures)
      lines.push(`torch_node_model_load_failures_total${labelsOf({ model })} ${n}`)
    head('torch_node_model_unloads_total', 'counter', 'Unloads, by reason: idle, room (for another) or shutdown.')
    for (const [key, n] of this.#unloads) {
      const [model, reason] = key.split('\0')
      lines.push(`torch_node_model_unloads_total${labelsOf({ model, reason })} ${n}`)
    }
    const ttft = 'torch_node_time_to_first_token_seconds'
    head(ttft, 'histogram', 'From a request to its first generated piece, by model.')
    this.#ownTtft.write(lines, ttft, 'model')
    return `${lines.join('\n')}\n`
  }
}

module.exports = { Metrics, TTFT_BUCKETS, OWN_TTFT_BUCKETS }

// @ts-check
'use strict'
// The models of torch-node serve by name, loaded on demand: a model loads on its first request
// (concurrent first requests wait on one load), and is unloaded after `idleMs` without requests
// or when `maxLoaded` or the memory budget `maxMemory` needs room for another — the least recently
// used one that runs nothing. A model's memory is its folder's size in bytes (`sizeOf`), known
// before it loads, so room is made before the load rather than found wanting after it; a model
// larger than the budget alone is a 500 `ModelTooLarge` naming both sizes, and nothing unloads.
// When every loaded model is busy, the least recently used one drains: it takes no new requests,
// and once its last one ends it is unloaded and the waiting load starts (llama-swap's way; a
// request never gets a 503 for a busy model, only past `maxQueue` waiting requests). A load that
// fails is a 500 `ModelLoadError` naming the reason for the requests that waited on it; the next
// request tries again.
//
//   unloaded ──first request──▶ loading ──▶ loaded ──idle / room──▶ unloaded
//                                  └─error─▶ unloaded      └─draining (busy, room wanted)─┘
const { HttpError, show } = require('./http')

/** @typedef {'chat' | 'embeddings' | 'classify' | 'rerank' | 'audio' | 'speech'} ServedKind */
/** @typedef {import('./app').ServeModel} ServeModel */
/**
 * @typedef {object} Entry
 * @property {string} name
 * @property {ServedKind} kind
 * @property {unknown} spec what `load` is given; undefined: loaded by the caller, never unloaded
 * @property {'unloaded' | 'loading' | 'loaded'} state
 * @property {ServeModel | null} served
 * @property {unknown} model the library object (CausalLM, SentenceEncoder, pipeline)
 * @property {Promise<void> | null} loading
 * @property {boolean} draining wanted for room: takes no new requests
 * @property {number} users requests holding it
 * @property {number} pending requests waiting on its load
 * @property {number} waiting requests waiting for it (load, room or drain), `pending` included
 * @property {number} lastUsed
 * @property {number} bytes what it counts against `maxMemory` (0 for a model the caller loaded)
 * @property {NodeJS.Timeout | null} idleTimer
 */

/** Bytes as MiB, for messages. @param {number} bytes */
const mib = (bytes) => `${(bytes / 2 ** 20).toFixed(1)} MiB`

const KIND_ROUTES = {
  chat: '/v1/chat/completions, /v1/completions, /v1/responses and /v1/messages',
  embeddings: '/v1/embeddings',
  classify: '/v1/classify',
  rerank: '/v1/rerank and /v1/score',
  audio: '/v1/audio/transcriptions and /v1/audio/translations',
  speech: '/v1/audio/speech',
}

class ModelRegistry {
  /** @type {Map<string, Entry>} */
  #entries = new Map()
  /** @type {Array<() => void>} */
  #changed = []
  #clock = 0
  #closed = false
  #load
  #maxLoaded
  #maxMemory
  #idleMs
  #maxWaiting
  #events

  /**
   * @param {Array<{ name: string; kind: ServedKind; spec?: unknown; served?: ServeModel; model?: unknown }>} models
   *   with `served`: loaded already (and kept); with `spec`: loaded by `load` on demand
   * @param {object} [options]
   * @param {(name: string, spec: any) => Promise<{ served: ServeModel; model: unknown }>} [options.load]
   * @param {number} [options.maxLoaded] models loaded at once (default: all)
   * @param {number} [options.maxMemory] bytes the models loaded or loading may take in all, by `sizeOf`
   *   (default: no bound)
   * @param {(spec: any) => number} [options.sizeOf] a model's bytes, from its spec (default 0)
   * @param {number} [options.idleMs] unload a model after this long without requests (default 0: never)
   * @param {(spec: any) => number} [options.maxWaiting] requests that may wait for a model's load or room
   *   before 503 `QueueFull` (default 64)
   * @param {{ load?(name: string): void; loadFailed?(name: string): void;
   *   unload?(name: string, reason: string, model: ServeModel): void }} [options.events]
   */
  constructor(
    models,
    {
      load,
      maxLoaded = Infinity,
      maxMemory = Infinity,
      sizeOf = () => 0,
      idleMs = 0,
      maxWaiting = () => 64,
      events = {},
    } = {},
  ) {
    for (const m of models) {
      this.#entries.set(m.name, {
        name: m.name,
        kind: m.kind,
        spec: m.served ? undefined : m.spec,
        state: m.served ? 'loaded' : 'unloaded',
        served: m.served ?? null,
        model: m.model ?? m.served ?? null,
        loading: null,
        draining: false,
        users: 0,
        pending: 0,
        waiting: 0,
        lastUsed: 0,
        bytes: m.served ? 0 : sizeOf(m.spec),
        idleTimer: null,
      })
    }
    this.#load = load
    this.#maxLoaded = maxLoaded
    this.#maxMemory = maxMemory
    this.#idleMs = idleMs
    this.#maxWaiting = maxWaiting
    this.#events = events
  }

  /** The entries, in the order given. */
  get entries() {
    return [...this.#entries.values()]
  }

  /**
   * The model a request names for a route of `kind` (with no name: the only one of that kind);
   * 404 `ModelNotFound` or 400 `InvalidArg` otherwise.
   * @param {unknown} name
   * @param {ServedKind} kind
   * @returns {Entry}
   */
  resolve(name, kind) {
    const all = this.entries
    if (name === undefined) {
      const ofKind = all.filter((m) => m.kind === kind)
      if (ofKind.length === 1) return ofKind[0]
      if (ofKind.length === 0) throw new HttpError(404, 'ModelNotFound', `no model here serves ${KIND_ROUTES[kind]}`)
      const names = ofKind.map((m) => JSON.stringify(m.name)).join(', ')
      throw new HttpError(400, 'InvalidArg', `model: required: this server serves ${names}`)
    }
    const m = typeof name === 'string' ? this.#entries.get(name) : undefined
    if (!m) {
      const names = all.map((s) => JSON.stringify(s.name)).join(', ')
      throw new HttpError(404, 'ModelNotFound', `model: this server serves ${names}, got ${show(name)}`)
    }
    if (m.kind !== kind) {
      throw new HttpError(400, 'InvalidArg', `model: ${JSON.stringify(m.name)} serves ${KIND_ROUTES[m.kind]}`)
    }
    return m
  }

  /**
   * Holds a model for one request, loading it (or making room for it) first; resolves to the
   * release, to call once the request is done. Errors: 500 `ModelLoadError`, 500 `ModelTooLarge`
   * (larger than `maxMemory` alone), 503 `QueueFull` past `maxWaiting`, 503 `Unavailable` once closed.
   * @param {Entry} entry
   * @returns {Promise<() => void>}
   */
  async acquire(entry) {
    if (entry.state === 'loaded' && !entry.draining) return this.#hold(entry)
    if (entry.bytes > this.#maxMemory) {
      throw new HttpError(
        500,
        'ModelTooLarge',
        `model ${JSON.stringify(entry.name)} takes ${mib(entry.bytes)} (its folder's files), more than the ` +
          `memory budget of ${mib(this.#maxMemory)} (maxMemory, --max-memory) alone`,
      )
    }
    if (entry.waiting >= this.#maxWaiting(entry.spec)) {
      throw new HttpError(
        503,
        'QueueFull',
        `model ${JSON.stringify(entry.name)}: ${entry.waiting} requests wait for it to load already`,
      )
    }
    entry.waiting++
    try {
      for (;;) {
        if (this.#closed) throw new HttpError(503, 'Unavailable', 'the server is shutting down')
        if (entry.state === 'loaded' && !entry.draining) return this.#hold(entry)
        if (entry.state === 'loading') {
          // Counted while it waits, so the model cannot be picked for room between its load and this hold.
          entry.pending++
          try {
            await entry.loading
          } finally {
            entry.pending--
          }
          if (this.#closed) throw new HttpError(503, 'Unavailable', 'the server is shutting down')
          return this.#hold(entry)
        }
        if (entry.state === 'unloaded') {
          if (this.#fits(entry)) {
            this.#startLoad(entry)
            // Room came another way (an idle unload): a model drained for it takes requests again.
            if (!this.entries.some((m) => m.state === 'unloaded' && m.waiting > 0)) {
              for (const m of this.entries) m.draining = false
              this.#notify()
            }
            continue
          }
          const idle = this.#leastRecent((m) => m.users === 0 && m.pending === 0)
          if (idle) {
            this.#unload(idle, 'room')
            continue
          }
          if (!this.entries.some((m) => m.draining)) {
            const victim = this.#leastRecent(() => true)
            if (victim) victim.draining = true
          }
        }
        await new Promise((resolve) => this.#changed.push(() => resolve(undefined)))
      }
    } finally {
      entry.waiting--
    }
  }

  /** Disposes the loaded models (and those loading, once loaded); later requests get 503. */
  close() {
    this.#closed = true
    for (const m of this.entries) {
      if (m.state === 'loaded') this.#unload(m, 'shutdown')
    }
    this.#notify()
  }

  /** @param {Entry} entry */
  #hold(entry) {
    entry.users++
    entry.lastUsed = ++this.#clock
    if (entry.idleTimer) clearTimeout(entry.idleTimer)
    entry.idleTimer = null
    let released = false
    return () => {
      if (released) return
      released = true
      entry.users--
      entry.lastUsed = ++this.#clock
      if (entry.users === 0 && entry.state === 'loaded' && entry.spec !== undefined) {
        if (entry.draining && entry.pending === 0) this.#unload(entry, 'room')
        else if (this.#idleMs > 0 && !this.#closed) {
          entry.idleTimer = setTimeout(() => {
            entry.idleTimer = null
            if (entry.users === 0 && entry.pending === 0 && entry.state === 'loaded') this.#unload(entry, 'idle')
          }, this.#idleMs)
        }
      }
      this.#notify()
    }
  }

  /** Whether `entry` may start loading now: within `maxLoaded` and `maxMemory`. @param {Entry} entry */
  #fits(entry) {
    const occupied = this.entries.filter((m) => m.state !== 'unloaded')
    const bytes = occupied.reduce((sum, m) => sum + m.bytes, 0)
    return occupied.length < this.#maxLoaded && bytes + entry.bytes <= this.#maxMemory
  }

  /** Bytes of the models loaded or loading, by `sizeOf`. */
  get bytes() {
    return this.entries.reduce((sum, m) => sum + (m.state === 'unloaded' ? 0 : m.bytes), 0)
  }

  /** The memory budget in bytes (Infinity: none). */
  get maxMemory() {
    return this.#maxMemory
  }

  /**
   * The least recently used loaded model that may be unloaded (one the caller loaded stays).
   * @param {(m: Entry) => boolean} test
   */
  #leastRecent(test) {
    /** @type {Entry | null} */
    let best = null
    for (const m of this.#entries.values()) {
      if (m.state !== 'loaded' || m.spec === undefined || !test(m)) continue
      if (!best || m.lastUsed < best.lastUsed) best = m
    }
    return best
  }

  /** @param {Entry} entry */
  #startLoad(entry) {
    const load = this.#load
    if (!load) throw new HttpError(500, 'ModelLoadError', `model ${JSON.stringify(entry.name)}: no loader`)
    entry.state = 'loading'
    entry.loading = (async () => {
      try {
        const { served, model } = await load(entry.name, entry.spec)
        entry.served = served
        entry.model = model
        entry.state = 'loaded'
        entry.lastUsed = ++this.#clock
        this.#events.load?.(entry.name)
        if (this.#closed) this.#unload(entry, 'shutdown')
      } catch (e) {
        entry.state = 'unloaded'
        this.#events.loadFailed?.(entry.name)
        const reason = String(/** @type {Error} */ (e)?.message ?? e).split('\n')[0]
        const error = new HttpError(
          500,
          'ModelLoadError',
          `model ${JSON.stringify(entry.name)} failed to load: ${reason}`,
        )
        error.cause = e
        throw error
      } finally {
        entry.loading = null
        this.#notify()
      }
    })()
    entry.loading.catch(() => {}) // its waiters see the error; none may be left to
  }

  /** @param {Entry} entry @param {string} reason */
  #unload(entry, reason) {
    const served = /** @type {ServeModel} */ (entry.served)
    if (entry.idleTimer) clearTimeout(entry.idleTimer)
    entry.idleTimer = null
    entry.state = 'unloaded'
    entry.served = null
    entry.model = null
    entry.draining = false
    this.#events.unload?.(entry.name, reason, served)
    served.dispose()
    this.#notify()
  }

  #notify() {
    const waiting = this.#changed
    this.#changed = []
    for (const wake of waiting) wake()
  }
}

module.exports = { ModelRegistry, KIND_ROUTES }

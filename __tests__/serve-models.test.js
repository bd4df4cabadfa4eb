'use strict'
// torch-node serve's models on demand (lib/serve/models.js): a model loads on its first request,
// concurrent first requests share one load, --max-loaded makes room by unloading the least
// recently used model that runs nothing (a busy one drains first), --idle unloads, a load error is
// a 500 with its reason while the server keeps serving; /v1/models and /metrics say so. The
// registry with a scripted loader (every state reached by its own event, no clock), then
// torch.serve over the tiny LM under two names.
const { describe, test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { ModelRegistry } = require('../lib/serve/models')
const { parse } = require('../lib/serve/cli')

const LM_DIR = path.join(__dirname, '..', 'models', 'golden', 'lm', 'llama-tiny')

/** A loader whose loads finish when the test says; it records what happens. */
function scriptedLoader() {
  const log = []
  const gates = []
  const load = (name) =>
    new Promise((resolve, reject) => {
      log.push(`load ${name}`)
      gates.push({
        name,
        open: () => resolve({ served: { name, kind: 'chat', stats: () => ({ active: 0, queued: 0 }), dispose() {} } }),
        fail: (message) => reject(new Error(message)),
      })
    })
  const events = { unload: (name, reason) => log.push(`unload ${name} ${reason}`) }
  return { log, gates, load, events }
}

const turn = () => new Promise((resolve) => setImmediate(resolve))

describe('the registry', () => {
  const specs = [
    { name: 'a', kind: 'chat', spec: {} },
    { name: 'b', kind: 'chat', spec: {} },
  ]

  test('concurrent first requests wait on one load', async () => {
    const { log, gates, load, events } = scriptedLoader()
    const r = new ModelRegistry(specs, { load, events })
    const a = r.resolve('a', 'chat')
    const held = [r.acquire(a), r.acquire(a), r.acquire(a)]
    await turn()
    assert.equal(a.state, 'loading')
    assert.equal(a.waiting, 3)
    gates[0].open()
    for (const release of await Promise.all(held)) release()
    assert.deepEqual(log, ['load a'])
    assert.equal(a.state, 'loaded')
    r.close()
  })

  test('maxLoaded 1: the idle model makes room; a busy one drains first, then makes room', async () => {
    const { log, gates, load, events } = scriptedLoader()
    const r = new ModelRegistry(specs, { load, maxLoaded: 1, events })
    const [a, b] = [r.resolve('a', 'chat'), r.resolve('b', 'chat')]
    const first = r.acquire(a)
    await turn()
    gates[0].open()
    const releaseA = await first
    // b waits: a is busy, so a drains (no new requests) until its request ends.
    const forB = r.acquire(b)
    await turn()
    assert.equal(a.draining, true)
    const againA = r.acquire(a)
    await turn()
    assert.deepEqual(log, ['load a'])
    releaseA()
    await turn()
    assert.deepEqual(log, ['load a', 'unload a room', 'load b'])
    gates[1].open()
    const releaseB = await forB
    assert.equal(b.state, 'loaded')
    // a's later request waits for b's to end, then a comes back in b's place.
    releaseB()
    await turn()
    gates[2].open()
    ;(await againA)()
    assert.deepEqual(log, ['load a', 'unload a room', 'load b', 'unload b room', 'load a'])
    r.close()
    assert.deepEqual(log.slice(5), ['unload a shutdown'])
  })

  test('a load error reaches every request waiting on it as a 500 with the reason; the next request loads again', async () => {
    const { log, gates, load, events } = scriptedLoader()
    const r = new ModelRegistry(specs, { load, events })
    const a = r.resolve('a', 'chat')
    const held = [r.acquire(a), r.acquire(a)]
    await turn()
    gates[0].fail('no weights here')
    for (const p of held) {
      await assert.rejects(p, { status: 500, code: 'ModelLoadError', message: /"a" failed to load: no weights here/ })
    }
    assert.equal(a.state, 'unloaded')
    const again = r.acquire(a)
    await turn()
    gates[1].open()
    ;(await again)()
    assert.deepEqual(log, ['load a', 'load a'])
    r.close()
  })

  test('idle: unloaded once no request held it for idleMs, and loaded again by the next', async () => {
    const { log, gates, load } = scriptedLoader()
    let unloaded
    const idle = new Promise((resolve) => (unloaded = resolve))
    const r = new ModelRegistry(specs, { load, idleMs: 10, events: { unload: (name, reason) => unloaded(reason) } })
    const a = r.resolve('a', 'chat')
    const p = r.acquire(a)
    await turn()
    gates[0].open()
    ;(await p)()
    assert.equal(await idle, 'idle')
    assert.equal(a.state, 'unloaded')
    const q = r.acquire(a)
    await turn()
    gates[1].open()
    ;(await q)()
    assert.deepEqual(log, ['load a', 'load a'])
    r.close()
  })

  test('past maxWaiting the request is a 503 QueueFull at once', async () => {
    const { gates, load } = scriptedLoader()
    const r = new ModelRegistry(specs, { load, maxWaiting: () => 2 })
    const a = r.resolve('a', 'chat')
    const held = [r.acquire(a), r.acquire(a)]
    await assert.rejects(r.acquire(a), { status: 503, code: 'QueueFull' })
    await turn()
    gates[0].open()
    for (const release of await Promise.all(held)) release()
    r.close()
  })

  test('names: unknown, of another kind, or none with two of the kind', () => {
    const r = new ModelRegistry([...specs, { name: 'e', kind: 'embeddings', spec: {} }], {})
    assert.throws(() => r.resolve('x', 'chat'), { status: 404, code: 'ModelNotFound' })
    assert.throws(() => r.resolve('e', 'chat'), { status: 400, code: 'InvalidArg' })
    assert.throws(() => r.resolve(undefined, 'chat'), { status: 400, message: /model: required/ })
    assert.equal(r.resolve(undefined, 'embeddings').name, 'e')
  })
})

test('the command line: --lazy, --max-loaded, --idle', () => {
  const o = parse(['--model', 'a=/x', '--model', 'b=/y', '--lazy', '--max-loaded', '1', '--idle', '0.5'])
  assert.equal(o.lazy, true)
  assert.equal(o.maxLoaded, 1)
  assert.equal(o.idleMs, 500)
  const plain = parse(['--model', 'a=/x'])
  assert.equal(plain.lazy, undefined)
  assert.equal(plain.maxLoaded, undefined)
  assert.equal(plain.idleMs, undefined)
  assert.throws(() => parse(['--model', 'a=/x', '--max-loaded', '0']), /--max-loaded: expected an integer ≥ 1/)
  assert.throws(() => parse(['--model', 'a=/x', '--idle', 'soon']), /--idle: expected seconds ≥ 0/)
})

const skip = !fs.existsSync(path.join(LM_DIR, 'model.pt2')) && 'no models/golden/lm/llama-tiny: run `npm run models`'

describe('torch.serve with models on demand', { skip }, () => {
  let s
  let broken
  const get = async (route) => (await fetch(`${s.url}${route}`)).json()
  const metric = async (re) => Number((await (await fetch(`${s.url}/metrics`)).text()).match(re)?.[1] ?? NaN)
  const states = async () => Object.fromEntries((await get('/v1/models')).data.map((m) => [m.id, m.status.value]))
  const chat = (model) =>
    fetch(`${s.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }], max_tokens: 4 }),
    })

  before(async () => {
    // A causal-lm manifest with no weights: its load fails.
    broken = fs.mkdtempSync(path.join(os.tmpdir(), 'torch-node-serve-broken-'))
    fs.copyFileSync(path.join(LM_DIR, 'manifest.json'), path.join(broken, 'manifest.json'))
    const { serve } = require('../lib/serve')
    s = await serve({ models: { a: LM_DIR, b: LM_DIR, broken }, lazy: true, maxLoaded: 1 })
  })
  after(async () => {
    await s?.close({ timeoutMs: 1000 })
    fs.rmSync(broken, { recursive: true, force: true })
  })

  test('nothing loads at start; concurrent first requests share one load', async () => {
    assert.deepEqual(await states(), { a: 'unloaded', b: 'unloaded', broken: 'unloaded' })
    assert.equal(s.models.a, undefined)
    const answers = await Promise.all([chat('a'), chat('a'), chat('a')])
    assert.deepEqual(
      answers.map((r) => r.status),
      [200, 200, 200],
    )
    assert.equal(await metric(/^torch_node_model_loads_total\{model="a"\} (\d+)$/m), 1)
    assert.equal((await states()).a, 'loaded')
    assert.equal(typeof s.models.a?.generate, 'function')
  })

  test('--max-loaded 1: a request for b unloads a (least recently used, idle)', async () => {
    assert.equal((await chat('b')).status, 200)
    assert.deepEqual(await states(), { a: 'unloaded', b: 'loaded', broken: 'unloaded' })
    assert.equal(await metric(/^torch_node_model_unloads_total\{model="a",reason="room"\} (\d+)$/m), 1)
    assert.equal(await metric(/^torch_node_model_loaded\{model="b"\} (\d+)$/m), 1)
  })

  test('a load error is a 500 with the reason; the server keeps serving', async () => {
    const res = await chat('broken')
    assert.equal(res.status, 500)
    const body = await res.json()
    assert.equal(body.error.code, 'ModelLoadError')
    assert.match(body.error.message, /"broken" failed to load/)
    assert.equal(await metric(/^torch_node_model_load_failures_total\{model="broken"\} (\d+)$/m), 1)
    assert.equal((await chat('a')).status, 200)
    assert.equal((await states()).a, 'loaded')
  })
})

describe('torch.serve eager (the default)', { skip }, () => {
  test('loads at start and says so; a folder that fails to load rejects serve', async () => {
    const { serve } = require('../lib/serve')
    const s = await serve({ models: { a: LM_DIR } })
    try {
      const models = await (await fetch(`${s.url}/v1/models`)).json()
      assert.equal(models.data[0].status.value, 'loaded')
    } finally {
      await s.close({ timeoutMs: 1000 })
    }
    const broken = fs.mkdtempSync(path.join(os.tmpdir(), 'torch-node-serve-broken-'))
    try {
      fs.copyFileSync(path.join(LM_DIR, 'manifest.json'), path.join(broken, 'manifest.json'))
      await assert.rejects(serve({ models: { a: LM_DIR, broken } }), (e) => {
        assert.ok(e.code && e.code !== 'InvalidArg', String(e.code))
        assert.match(e.message, /broken/)
        return true
      })
    } finally {
      fs.rmSync(broken, { recursive: true, force: true })
    }
  })
})

test('a model drained for room takes requests again once room comes another way', async () => {
  const { log, gates, load, events } = scriptedLoader()
  const specs = ['a', 'b', 'c'].map((name) => ({ name, kind: 'chat', spec: {} }))
  const r = new ModelRegistry(specs, { load, maxLoaded: 2, events })
  const [a, b, c] = specs.map((s) => r.resolve(s.name, 'chat'))
  const holds = [r.acquire(a), r.acquire(b)]
  await turn()
  gates[0].open()
  gates[1].open()
  const [releaseA, releaseB] = await Promise.all(holds)
  const forC = r.acquire(c) // both busy: a (least recently used) drains
  await turn()
  assert.equal(a.draining, true)
  releaseB() // b is idle now: c takes b's room, and a is no longer drained
  await turn()
  assert.deepEqual(log, ['load a', 'load b', 'unload b room', 'load c'])
  assert.equal(a.draining, false)
  gates[2].open()
  ;(await forC)()
  ;(await r.acquire(a))()
  releaseA()
  assert.equal(a.state, 'loaded')
  r.close()
})

test(
  'torch-node serve --max-loaded 1: the first loads at start, the other on its first request',
  { skip },
  async () => {
    const { spawn } = require('node:child_process')
    const bin = path.join(__dirname, '..', 'bin', 'torch-node.js')
    const args = ['serve', '--model', `a=${LM_DIR}`, '--model', `b=${LM_DIR}`, '--port', '0', '--max-loaded', '1']
    const child = spawn(process.execPath, [bin, ...args], { stdio: ['ignore', 'pipe', 'inherit'] })
    try {
      let out = ''
      await new Promise((resolve, reject) => {
        child.on('exit', (code) => reject(new Error(`exited ${code}: ${out}`)))
        child.stdout.on('data', (d) => {
          out += d
          if (/ b: .*\n/.test(out)) resolve()
        })
      })
      // Eager, as vLLM: the first --max-loaded models load at start, the rest on demand.
      assert.match(out, / a: \/v1\/chat\/completions, [^\n]*\/v1\/messages\n/)
      assert.match(out, / b: [^\n]*\(loads on its first request\)\n/)
      const url = out.match(/listening on (\S+)/)[1]
      const models = await (await fetch(`${url}/v1/models`)).json()
      assert.deepEqual(
        models.data.map((m) => [m.id, m.status.value]),
        [
          ['a', 'loaded'],
          ['b', 'unloaded'],
        ],
      )
    } finally {
      child.removeAllListeners('exit')
      const exited = new Promise((resolve) => child.on('exit', resolve))
      child.kill('SIGTERM')
      await exited
    }
  },
)

describe("a model's load options go to its load as they are", { skip }, () => {
  const ENCODER_DIR = path.join(__dirname, '..', 'models', 'golden', 'text', 'minilm')

  test('an unknown key is refused by the load, naming the keys it takes', async () => {
    const { serve } = require('../lib/serve')
    await assert.rejects(serve({ models: { a: { folder: LM_DIR, maxSequence: 2 } } }), (e) => {
      assert.equal(e.code, 'InvalidArg')
      assert.match(e.message, /serve: models\["a"\]: .*maxSequence/)
      assert.match(e.message, /maxSequences/)
      return true
    })
    if (fs.existsSync(path.join(ENCODER_DIR, 'manifest.json'))) {
      await assert.rejects(serve({ models: { e: { folder: ENCODER_DIR, maxBatch: 2 } } }), { code: 'InvalidArg' })
    }
  })

  test('lazily: the first request gets a 500 with that reason, and the server keeps serving', async () => {
    const { serve } = require('../lib/serve')
    const s = await serve({ models: { bad: { folder: LM_DIR, maxSequence: 2 }, good: LM_DIR }, lazy: true })
    try {
      const ask = (model) =>
        fetch(`${s.url}/v1/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ model, prompt: 'hi', max_tokens: 2 }),
        })
      const res = await ask('bad')
      assert.equal(res.status, 500)
      const { error } = await res.json()
      assert.equal(error.code, 'ModelLoadError')
      assert.match(error.message, /"bad" failed to load: .*maxSequence/)
      assert.equal((await ask('good')).status, 200)
    } finally {
      await s.close({ timeoutMs: 1000 })
    }
  })
})

'use strict'
// torch-node serve's memory budget for models on demand (--max-memory, lib/serve/models.js): each
// model counts its folder's files plus its prefix cache's bound; a load that would pass the budget
// first unloads the least recently used models that run nothing (a busy one drains first), and a
// model larger than the budget alone is a 500 ModelTooLarge that unloads nothing. The registry with
// a scripted loader (every state reached by its own event, no clock), then torch.serve over two
// tiny LMs with a budget that fits one.
const { describe, test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { ModelRegistry } = require('../lib/serve/models')
const { parse } = require('../lib/serve/cli')

const LM = path.join(__dirname, '..', 'models', 'golden', 'lm')
const LLAMA = path.join(LM, 'llama-tiny')
const GPT2 = path.join(LM, 'gpt2-tiny')

/** A loader whose loads finish when the test says; it records loads and unloads. */
function scriptedLoader() {
  const log = []
  const gates = []
  const load = (name) =>
    new Promise((resolve) => {
      log.push(`load ${name}`)
      gates.push(() =>
        resolve({ served: { name, kind: 'chat', stats: () => ({ active: 0, queued: 0 }), dispose() {} } }),
      )
    })
  const events = { unload: (name, reason) => log.push(`unload ${name} ${reason}`) }
  return { log, gates, load, events }
}

const turn = () => new Promise((resolve) => setImmediate(resolve))

test('the registry: room by bytes, least recently used first, a busy model drained, one too large refused', async () => {
  const { log, gates, load, events } = scriptedLoader()
  const sizes = { a: 60, b: 60, c: 30, big: 101 }
  const specs = Object.keys(sizes).map((name) => ({ name, kind: 'chat', spec: { name } }))
  const r = new ModelRegistry(specs, { load, events, maxMemory: 100, sizeOf: (spec) => sizes[spec.name] })
  const [a, b, c, big] = specs.map((s) => r.resolve(s.name, 'chat'))
  /** Holds `entry` once its load (the next gate) is let through. */
  const loaded = async (entry) => {
    const held = r.acquire(entry)
    await turn()
    gates.at(-1)()
    return held
  }
  ;(await loaded(a))()
  ;(await loaded(c))() // 60 + 30 ≤ 100: both stay
  assert.equal(r.bytes, 90)
  ;(await loaded(b))() // 90 + 60 > 100: a (least recently used, idle) goes; c stays
  assert.deepEqual(log, ['load a', 'load c', 'unload a room', 'load b'])
  assert.equal(r.bytes, 90)

  // b busy, c idle: a needs c out (idle) and b (busy: drained, then unloaded once its request ends).
  const releaseB = await r.acquire(b)
  const forA = r.acquire(a)
  await turn()
  assert.deepEqual(log.slice(4), ['unload c room'])
  assert.equal(b.draining, true)
  releaseB()
  await turn()
  assert.deepEqual(log.slice(4), ['unload c room', 'unload b room', 'load a'])
  gates.at(-1)()
  ;(await forA)()
  assert.equal(r.bytes, 60)

  await assert.rejects(r.acquire(big), {
    status: 500,
    code: 'ModelTooLarge',
    message: /"big" takes 0\.0 MiB .*more than the memory budget of 0\.0 MiB/,
  })
  assert.equal(a.state, 'loaded') // nothing was unloaded for it
  assert.equal(log.length, 7)
  r.close()
})

test('the command line: --max-memory takes MiB, GiB, GB or a bare number of MiB', () => {
  const memory = (value) => parse(['--model', 'a=/x', `--max-memory=${value}`]).maxMemory
  assert.equal(memory('512MiB'), 512 * 2 ** 20)
  assert.equal(memory('4GiB'), 4 * 2 ** 30)
  assert.equal(memory('4GB'), 4e9)
  assert.equal(memory('100'), 100 * 2 ** 20)
  assert.equal(parse(['--model', 'a=/x']).maxMemory, undefined)
  for (const bad of ['0', 'lots', '5kb', '-1GiB']) {
    assert.throws(() => memory(bad), /--max-memory: expected a size such as 512MiB/)
  }
})

const skip =
  !(fs.existsSync(path.join(LLAMA, 'model.pt2')) && fs.existsSync(path.join(GPT2, 'model.pt2'))) &&
  'no models/golden/lm/{llama,gpt2}-tiny: run `npm run models`'

describe('torch.serve with --max-memory fitting one of two tiny LMs', { skip }, () => {
  // a: llama-tiny's files (~4.7 MB) + 1,024 tokens × 1 KiB of keys and values; b: gpt2-tiny's (~3.9 MB) +
  // 1,024 × 512 B; big: llama-tiny with 16,384 cached tokens (16 MiB). The budget, 8 MiB, fits a or b.
  const BUDGET = 8 * 2 ** 20
  const small = { prefixCache: { maxTokens: 1024 } }
  let s
  const metrics = async () => (await fetch(`${s.url}/metrics`)).text()
  const states = async () =>
    Object.fromEntries((await (await fetch(`${s.url}/v1/models`)).json()).data.map((m) => [m.id, m.status.value]))
  const chat = (model) =>
    fetch(`${s.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 }),
    })

  before(async () => {
    const { serve } = require('../lib/serve')
    s = await serve({
      models: {
        a: { folder: LLAMA, ...small },
        b: { folder: GPT2, ...small },
        big: { folder: LLAMA, prefixCache: { maxTokens: 16384 } },
      },
      lazy: true,
      maxMemory: BUDGET,
    })
  })
  after(() => s?.close({ timeoutMs: 1000 }))

  test('a loads; b unloads a for room; /metrics counts the bytes against the budget', async () => {
    assert.equal((await chat('a')).status, 200)
    assert.equal((await chat('b')).status, 200)
    assert.deepEqual(await states(), { a: 'unloaded', b: 'loaded', big: 'unloaded' })
    const text = await metrics()
    assert.match(text, /^torch_node_model_unloads_total\{model="a",reason="room"\} 1$/m)
    assert.match(text, new RegExp(`^torch_node_max_memory_bytes ${BUDGET}$`, 'm'))
    const bytes = Number(/^torch_node_model_memory_bytes\{model="b"\} (\d+)$/m.exec(text)?.[1])
    const files = fs.readdirSync(GPT2).reduce((sum, f) => sum + fs.statSync(path.join(GPT2, f)).size, 0)
    assert.ok(bytes > files && bytes <= BUDGET, `${bytes} bytes`)
    assert.match(text, /^torch_node_model_memory_bytes\{model="a"\} 0$/m)
    assert.match(text, /^torch_node_prefix_cache_max_tokens\{model_name="b"\} 1024$/m)
  })

  test('a model larger than the budget alone: a 500 ModelTooLarge with both sizes; nothing unloads', async () => {
    const res = await chat('big')
    assert.equal(res.status, 500)
    const { error } = await res.json()
    assert.equal(error.code, 'ModelTooLarge')
    assert.match(error.message, /"big" takes \d+\.\d MiB .*more than the memory budget of 8\.0 MiB/)
    assert.deepEqual(await states(), { a: 'unloaded', b: 'loaded', big: 'unloaded' })
    assert.equal((await chat('b')).status, 200)
  })
})

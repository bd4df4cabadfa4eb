'use strict'
// A malformed body for a model that is loading (being swapped in under --max-loaded) is its 4xx at
// once: the route's readers run before the request waits for the model, so it neither waits nor
// takes a waiting place (past which requests are 503 QueueFull). tools/soak.js's hostile bodies,
// against a registry whose load the test holds (no weights, no clock).
const { test } = require('node:test')
const assert = require('node:assert/strict')
const http = require('node:http')
const { ModelRegistry } = require('../lib/serve/models')
const { createHandler } = require('../lib/serve/app')

const HOSTILE = [
  ['{"messages": [', 400],
  ['{"messages": "hi", "max_tokens": 4}', 400],
  ['{"messages": [{"role": "user", "content": "hi"}], "max_tokens": -1}', 400],
  ['{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1e308}', 400],
  ['{"messages": [{"role": "user", "content": "hi"}], "temperature": "hot"}', 400],
  [
    `{"messages": [{"role": "user", "content": "hi"}], "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": ${'{"type":"array","items":'.repeat(200)}{}${'}'.repeat(200)}}}}`,
    400,
  ],
  ['{"messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "function", "function": {}}]}', 400],
  ['{"messages": [{"role": "user", "content": "hi"}], "unknown_key": 1}', 400],
  ['[]', 400],
  ['null', 400],
]

test('hostile bodies are 4xx while their model loads; a good one waits (or is 503 QueueFull past the bound)', async () => {
  const gates = []
  const load = (name) =>
    new Promise((resolve) => {
      const served = {
        name,
        kind: 'chat',
        toolFormat: null,
        markers: new Map(),
        stats: () => ({ active: 0, queued: 0 }),
      }
      gates.push(() => resolve({ served: { ...served, dispose() {} } }))
    })
  const registry = new ModelRegistry([{ name: 'a', kind: 'chat', spec: {} }], { load, maxWaiting: () => 1 })
  const { handle } = createHandler({ registry })
  const server = http.createServer(handle)
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
  const url = `http://127.0.0.1:${server.address().port}`
  const post = async (body) => {
    const res = await fetch(`${url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body,
    })
    return { status: res.status, body: await res.json() }
  }
  try {
    // One good request waits for the load and holds the one waiting place.
    const waiting = post('{"model": "a", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}')
    for (let i = 0; i < 100 && registry.entries[0].waiting === 0; i++) await new Promise((r) => setImmediate(r))
    assert.equal(registry.entries[0].state, 'loading')
    assert.equal(registry.entries[0].waiting, 1)
    for (const [hostile, status] of HOSTILE) {
      const body = hostile.startsWith('{"messages"')
        ? hostile.replace('{"messages"', '{"model": "a", "messages"')
        : hostile
      const r = await post(body)
      assert.equal(r.status, status, `${body.slice(0, 80)}: ${JSON.stringify(r.body)}`)
      assert.equal(r.body.error.code === 'QueueFull', false)
    }
    // A good body past the waiting bound is still 503 QueueFull: the bound is unchanged.
    const full = await post('{"model": "a", "messages": [{"role": "user", "content": "hi"}]}')
    assert.equal(full.status, 503)
    assert.equal(full.body.error.code, 'QueueFull')
    assert.equal(registry.entries[0].waiting, 1)
    gates[0]()
    await waiting.catch(() => {}) // the scripted model generates nothing: its answer does not matter here
  } finally {
    registry.close()
    server.closeAllConnections()
    await new Promise((resolve) => server.close(resolve))
  }
})

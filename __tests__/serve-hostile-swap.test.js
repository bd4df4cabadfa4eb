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
  // A tool schema nested past what the model reads: a 400, not a stack overflow (a 500).
  [
    `{"messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "function", "function": {"name": "f", "parameters": ${'{"type":"array","items":'.repeat(20000)}{}${'}'.repeat(20000)}}}]}`,
    400,
  ],
]

// The Responses and Messages APIs (and Anthropic's count_tokens): their readers run early too.
const OTHER_ROUTES = {
  '/v1/responses': [
    '{"model": "a", "input": 7}',
    '{"model": "a", "input": "hi", "max_output_tokens": 0}',
    '{"model": "a", "input": "hi", "truncation": "auto"}',
    '{"model": "a", "input": [{"role": "wizard", "content": "hi"}]}',
    `{"model": "a", "input": "hi", "text": {"format": {"type": "json_schema", "name": "x", "schema": ${'{"type":"array","items":'.repeat(200)}{}${'}'.repeat(200)}}}}`,
    '{"model": "a", "input": "hi", "tools": [{"type": "function"}]}',
    '{"model": "a", "input": "hi", "temperature": "hot"}',
    '{"model": "a", "previous_response_id": "resp_1", "tools": 3}',
    '{"model": "a", "input": [{"type": "function_call_output", "call_id": "c", "output": "x"}]}',
    `{"model": "a", "input": "hi", "tools": [{"type": "function", "name": "f", "parameters": ${'{"type":"array","items":'.repeat(300)}{}${'}'.repeat(300)}}]}`,
  ],
  '/v1/messages': [
    '{"model": "a", "max_tokens": 4}',
    '{"model": "a", "max_tokens": -1, "messages": [{"role": "user", "content": "hi"}]}',
    '{"model": "a", "max_tokens": 4, "messages": [{"role": "user", "content": [{"type": "magic"}]}]}',
    '{"model": "a", "max_tokens": 4, "messages": [{"role": "user", "content": "hi"}], "tools": [{}]}',
    '{"model": "a", "max_tokens": 4, "messages": [{"role": "user", "content": "hi"}], "temperature": 9}',
    `{"model": "a", "max_tokens": 4, "messages": [{"role": "user", "content": "hi"}], "tools": [{"name": "f", "input_schema": ${'{"type":"array","items":'.repeat(300)}{}${'}'.repeat(300)}}]}`,
  ],
  '/v1/messages/count_tokens': [
    '{"model": "a", "messages": "hi"}',
    '{"model": "a", "messages": [{"role": "user", "content": "hi"}], "tools": [{"name": 3}]}',
  ],
}

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
  const post = async (body, path = '/v1/chat/completions') => {
    const res = await fetch(`${url}${path}`, {
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
    for (const [path, bodies] of Object.entries(OTHER_ROUTES)) {
      for (const body of bodies) {
        const r = await post(body, path)
        assert.equal(r.status, 400, `${path} ${body.slice(0, 80)}: ${JSON.stringify(r.body)}`)
      }
    }
    assert.equal(registry.entries[0].waiting, 1)
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

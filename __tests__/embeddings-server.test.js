'use strict'
// examples/embeddings-server.js (torch.serve with one text-model folder) over real HTTP on a
// loopback port, driven by the official `openai` npm client (its default base64 encoding and
// 'float'), against sentence-transformers' own embeddings of all-MiniLM-L6-v2
// (models/golden/text/minilm.golden.json, from models/make_text_models.py); 400s for malformed
// input, 404 for another model, 503 QueueFull from a real SentenceEncoder's queue (the mapping
// of any model's QueueFull is __tests__/serve.test.js's).
const { describe, test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { start } = require('../examples/embeddings-server')

const ROOT = path.join(__dirname, '..')
const MODEL_DIR = path.join(ROOT, 'models', 'golden', 'text', 'minilm')
const GOLDEN_FILE = path.join(ROOT, 'models', 'golden', 'text', 'minilm.golden.json')

function cosine(a, b) {
  let dot = 0
  let na = 0
  let nb = 0
  for (let i = 0; i < a.length; i++) {
    dot += a[i] * b[i]
    na += a[i] * a[i]
    nb += b[i] * b[i]
  }
  return dot / Math.sqrt(na * nb)
}

function assertEmbeddings(got, want) {
  assert.equal(got.length, want.length)
  got.forEach((row, i) => {
    assert.equal(row.length, want[i].length)
    const maxDiff = Math.max(...row.map((x, j) => Math.abs(x - want[i][j])))
    assert.ok(maxDiff < 1e-5, `row ${i}: max |diff| ${maxDiff} (tolerance 1e-5)`)
    assert.ok(cosine(row, want[i]) >= 0.99999, `row ${i}: cosine ${cosine(row, want[i])}`)
  })
}

describe('examples/embeddings-server.js with the openai client', () => {
  let service
  let client
  let golden
  before(async () => {
    assert.ok(fs.existsSync(GOLDEN_FILE), `${GOLDEN_FILE} is missing: run \`npm run models\``)
    golden = JSON.parse(fs.readFileSync(GOLDEN_FILE, 'utf8'))
    service = await start({ modelDir: MODEL_DIR, name: 'all-MiniLM-L6-v2', port: 0 })
    const { default: OpenAI } = await import('openai')
    client = new OpenAI({ baseURL: `${service.url}/v1`, apiKey: 'unused', maxRetries: 0 })
  })
  after(() => service?.close())

  test('GET /v1/models lists the model', async () => {
    const models = []
    for await (const m of client.models.list()) models.push(m.id)
    assert.deepEqual(models, ['all-MiniLM-L6-v2'])
  })

  test('a batch, base64 (the client default): sentence-transformers embeddings and token usage', async () => {
    const res = await client.embeddings.create({ model: 'all-MiniLM-L6-v2', input: golden.sentences.filter((s) => s) })
    const want = golden.embeddings.filter((_, i) => golden.sentences[i])
    assert.equal(res.object, 'list')
    assert.equal(res.model, 'all-MiniLM-L6-v2')
    assert.deepEqual(
      res.data.map((d) => d.index),
      want.map((_, i) => i),
    )
    assertEmbeddings(
      res.data.map((d) => Array.from(d.embedding)),
      want,
    )
    const tokens = golden.tokenCounts.filter((_, i) => golden.sentences[i]).reduce((a, b) => a + b, 0)
    assert.deepEqual(res.usage, { prompt_tokens: tokens, total_tokens: tokens })
  })

  test('one string, encoding_format float; texts past the max length are truncated as Python does', async () => {
    const longest = golden.tokenCounts.indexOf(Math.max(...golden.tokenCounts))
    assert.equal(golden.tokenCounts[longest], golden.maxSeqLength, 'the goldens include a text past the max length')
    const res = await client.embeddings.create({
      model: 'all-MiniLM-L6-v2',
      input: golden.sentences[longest],
      encoding_format: 'float',
    })
    assertEmbeddings([res.data[0].embedding], [golden.embeddings[longest]])
    assert.equal(res.usage.prompt_tokens, golden.maxSeqLength)
  })

  test('concurrent requests all get their own rows', async () => {
    const texts = golden.sentences.map((s, i) => [s, i]).filter(([s]) => s)
    const results = await Promise.all(
      texts.map(([s]) => client.embeddings.create({ model: 'all-MiniLM-L6-v2', input: s })),
    )
    assertEmbeddings(
      results.map((r) => Array.from(r.data[0].embedding)),
      texts.map(([, i]) => golden.embeddings[i]),
    )
  })

  const post = (body) =>
    fetch(`${service.url}/v1/embeddings`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: typeof body === 'string' ? body : JSON.stringify(body),
    })
  async function refused(body, status, code, message) {
    const res = await post(body)
    assert.equal(res.status, status)
    const { error } = await res.json()
    assert.equal(error.code, code)
    assert.match(error.message, message)
    assert.equal(error.type, status >= 500 ? 'server_error' : 'invalid_request_error')
  }

  test('malformed requests: 400 with a message that says what is wrong', async () => {
    await refused({ model: 'all-MiniLM-L6-v2' }, 400, 'InvalidArg', /input: required/)
    await refused({ input: 42 }, 400, 'InvalidArg', /input: expected a string or an array of strings, got number/)
    await refused({ input: ['ok', 7] }, 400, 'InvalidArg', /input\[1\]: expected a string, got token ids/)
    await refused({ input: [[101, 102]] }, 400, 'InvalidArg', /input\[0\]: expected a string, got token ids/)
    await refused({ input: [] }, 400, 'InvalidArg', /at least one string/)
    await refused({ input: '' }, 400, 'InvalidArg', /non-empty string/)
    await refused({ input: 'x'.repeat(32769) }, 400, 'InvalidArg', /at most 32768 characters, got 32769/)
    await refused({ input: Array(2049).fill('a') }, 400, 'InvalidArg', /at most 2048 items per request, got 2049/)
    await refused({ input: 'a', encoding_format: 'int8' }, 400, 'InvalidArg', /encoding_format/)
    await refused({ input: 'a', dimensions: 128 }, 400, 'InvalidArg', /dimensions: this model's embeddings have 384/)
    await refused({ input: 'a', temperature: 1 }, 400, 'InvalidArg', /unknown key "temperature"/)
    await refused('{"input": ', 400, 'InvalidJSON', /JSON/)
    await refused({ input: 'a', model: 'text-embedding-3-small' }, 404, 'ModelNotFound', /serves "all-MiniLM-L6-v2"/)
  })

  test('the openai client surfaces a 400 as BadRequestError', async () => {
    const { BadRequestError } = await import('openai')
    await assert.rejects(client.embeddings.create({ model: 'all-MiniLM-L6-v2', input: [''] }), (e) => {
      assert.ok(e instanceof BadRequestError)
      assert.equal(e.status, 400)
      return true
    })
  })
})

describe('embeddings-server: overload', () => {
  test('a real SentenceEncoder past its maxQueue gives some 503s and every other request its embedding', async () => {
    const service = await start({
      modelDir: MODEL_DIR,
      port: 0,
      batch: { maxBatchSize: 2, maxDelayMs: 1, maxQueue: 2 },
    })
    try {
      const statuses = await Promise.all(
        Array.from({ length: 24 }, (_, i) =>
          fetch(`${service.url}/v1/embeddings`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({ input: `sentence ${i}` }),
          }).then(async (r) => {
            await r.arrayBuffer()
            return r.status
          }),
        ),
      )
      assert.ok(statuses.includes(503), `expected some 503s: ${statuses}`)
      assert.ok(statuses.includes(200), `expected some 200s: ${statuses}`)
      assert.deepEqual([...new Set(statuses)].sort(), [200, 503])
    } finally {
      await service.close()
    }
  })
})

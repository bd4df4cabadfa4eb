'use strict'
// torch.serve's /v1/rerank (the Cohere / Jina shape llama-server and vLLM accept; also /v2/rerank
// and /rerank), /v1/score and /v1/classify (vLLM's shapes) over real HTTP on a loopback port with plain
// fetch, and Cohere's own npm client (`cohere-ai`, v1 and v2) where it is installed: scores equal
// to sentence-transformers' CrossEncoder.rank / predict and transformers' pipeline('text-classification')
// (models/make_pipeline_models.py's goldens, within 1e-5); 400s for malformed requests, 400 for a
// model of another kind, 401 without the API key on every rerank path, 503 QueueFull past the queue.
const { describe, test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const torch = require('..')

const DIR = path.join(__dirname, '..', 'models', 'golden', 'pipeline')
const GOLDENS = path.join(DIR, 'goldens.json')
const SKIP = !fs.existsSync(GOLDENS)
  ? 'no pipeline models: run `node tools/models.js --lazy` (models/make_pipeline_models.py)'
  : false
const TOLERANCE = 1e-5
const KEY = 'test-key'

function cohere() {
  try {
    return require('cohere-ai')
  } catch {
    return null
  }
}

describe('torch.serve: /v1/rerank and /v1/classify', { skip: SKIP }, () => {
  let g, service
  /** POSTs `body` as JSON to `route`; the status and the parsed answer. */
  const post = async (route, body, key = KEY) => {
    const res = await fetch(`${service.url}${route}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(key ? { authorization: `Bearer ${key}` } : {}) },
      body: JSON.stringify(body),
    })
    return { status: res.status, body: await res.json() }
  }
  before(async () => {
    g = JSON.parse(fs.readFileSync(GOLDENS, 'utf8'))
    service = await torch.serve({
      models: {
        reranker: path.join(DIR, 'reranker'),
        sentiment: path.join(DIR, 'sentiment'),
        multilabel: { folder: path.join(DIR, 'multilabel'), maxQueue: 1 },
      },
      apiKey: KEY,
    })
  })
  after(() => service?.close())

  test('rerank: CrossEncoder.rank order and scores, documents as strings or {text}, top_n', async () => {
    const { query, documents } = g.inputs
    const { status, body } = await post('/v1/rerank', {
      model: 'reranker',
      query,
      documents: documents.map((text, i) => (i % 2 ? { text } : text)),
      return_documents: true,
    })
    assert.equal(status, 200, JSON.stringify(body))
    assert.match(body.id, /^rerank-[0-9a-f]{32}$/)
    assert.equal(body.model, 'reranker')
    assert.deepEqual(
      body.results.map((r) => r.index),
      g.reranker.rank.map((r) => r.index),
    )
    body.results.forEach((r, i) => {
      const want = g.reranker.rank[i]
      assert.ok(Math.abs(r.relevance_score - want.score) <= TOLERANCE, `${r.relevance_score} vs ${want.score}`)
      assert.deepEqual(r.document, { text: want.document })
    })
    assert.ok(Number.isInteger(body.usage.total_tokens) && body.usage.total_tokens > documents.length * 3)
    for (const route of ['/v2/rerank', '/rerank']) {
      const top = await post(route, { model: 'reranker', query, documents, top_n: 2 })
      assert.equal(top.status, 200)
      assert.deepEqual(
        top.body.results.map((r) => Object.keys(r).sort()),
        [
          ['index', 'relevance_score'],
          ['index', 'relevance_score'],
        ],
      )
      assert.deepEqual(
        top.body.results.map((r) => r.index),
        g.reranker.rank.slice(0, 2).map((r) => r.index),
      )
    }
  })

  test('score (vLLM): CrossEncoder.predict, one query against a list and pairwise', async () => {
    const { query, documents } = g.inputs
    const one = await post('/v1/score', { model: 'reranker', text_1: query, text_2: documents })
    assert.equal(one.status, 200, JSON.stringify(one.body))
    assert.equal(one.body.object, 'list')
    assert.match(one.body.id, /^score-/)
    one.body.data.forEach((d, i) => {
      assert.deepEqual([d.index, d.object], [i, 'score'])
      assert.ok(Math.abs(d.score - g.reranker.predict[i]) <= TOLERANCE, `${d.score} vs ${g.reranker.predict[i]}`)
    })
    const pairwise = await post('/v1/score', {
      model: 'reranker',
      text_1: documents.map(() => query),
      text_2: documents,
    })
    assert.equal(pairwise.status, 200)
    // the same pairs, batched otherwise (padded to other lengths): equal within float32 rounding
    pairwise.body.data.forEach((d, i) => assert.ok(Math.abs(d.score - g.reranker.predict[i]) <= TOLERANCE))
    assert.equal(pairwise.body.usage.total_tokens, one.body.usage.total_tokens)
    const bad = await post('/v1/score', { model: 'reranker', text_1: ['a', 'b'], text_2: ['c'] })
    assert.equal(bad.status, 400)
    assert.match(bad.body.error.message, /text_1: one string, or as many as text_2 \(1\), got 2/)
  })

  test('classify: vLLM shape, probs in label order as transformers scores them', async () => {
    const texts = g.inputs.texts.slice(0, 3)
    const { status, body } = await post('/v1/classify', { model: 'sentiment', input: texts })
    assert.equal(status, 200, JSON.stringify(body))
    assert.equal(body.object, 'list')
    assert.match(body.id, /^classify-/)
    assert.equal(body.model, 'sentiment')
    assert.ok(Number.isInteger(body.created))
    const labels = ['NEGATIVE', 'NEUTRAL', 'POSITIVE']
    body.data.forEach((d, i) => {
      assert.equal(d.index, i)
      assert.equal(d.num_classes, 3)
      const want = g.sentiment.all[i]
      assert.equal(d.label, want[0].label)
      labels.forEach((label, k) => {
        const score = want.find((w) => w.label === label).score
        assert.ok(Math.abs(d.probs[k] - score) <= TOLERANCE, `${label}: ${d.probs[k]} vs ${score}`)
      })
    })
    assert.equal(body.usage.prompt_tokens, body.usage.total_tokens)
    const one = await post('/v1/classify', { model: 'multilabel', input: g.inputs.texts[0] })
    assert.equal(one.status, 200)
    assert.equal(one.body.data.length, 1)
    assert.equal(one.body.data[0].label, g.multilabel.default[0][0].label)
  })

  test('errors: malformed requests 400, a model of another kind 400, no key 401 on every path', async () => {
    const cases = [
      ['/v1/rerank', { model: 'reranker', documents: ['a'] }, /query: expected a string/],
      ['/v1/rerank', { model: 'reranker', query: 'q', documents: 'a' }, /documents: expected an array/],
      [
        '/v1/rerank',
        { model: 'reranker', query: 'q', documents: [{ txt: 'a' }] },
        /documents\[0\]: expected a string or \{text/,
      ],
      [
        '/v1/rerank',
        { model: 'reranker', query: 'q', documents: ['a'], top_n: 0 },
        /top_n: expected a positive integer/,
      ],
      ['/v1/rerank', { model: 'reranker', query: 'q', documents: ['a'], max_tokens_per_doc: 9 }, /unknown key/],
      ['/v1/rerank', { model: 'sentiment', query: 'q', documents: ['a'] }, /"sentiment" serves \/v1\/classify/],
      ['/v1/classify', { model: 'reranker', input: 'a' }, /"reranker" serves \/v1\/rerank/],
      ['/v1/classify', { model: 'sentiment', input: [] }, /input: expected at least one string/],
      ['/v1/classify', { model: 'sentiment', input: [1] }, /input\[0\]: expected a string/],
    ]
    for (const [route, body, message] of cases) {
      const r = await post(route, body)
      assert.equal(r.status, 400, `${route} ${JSON.stringify(body)}: ${JSON.stringify(r.body)}`)
      assert.match(r.body.error.message, message)
    }
    for (const route of ['/v1/rerank', '/v2/rerank', '/rerank', '/v1/classify']) {
      assert.equal((await post(route, { model: 'reranker', query: 'q', documents: [] }, null)).status, 401, route)
    }
  })

  test('past the queue (maxQueue 1): some 503 QueueFull, every other request its answer', async () => {
    const answers = await Promise.all(
      Array.from({ length: 12 }, (_, i) => post('/v1/classify', { model: 'multilabel', input: [`text ${i}`, 'x'] })),
    )
    const statuses = answers.map((a) => a.status)
    assert.ok(statuses.includes(503), `expected some 503s: ${statuses}`)
    assert.deepEqual([...new Set(statuses)].sort(), [200, 503])
  })

  test("Cohere's npm client (cohere-ai), v1 and v2", async (t) => {
    const sdk = cohere()
    if (!sdk) return t.skip('cohere-ai is not installed')
    const { query, documents } = g.inputs
    const v1 = new sdk.CohereClient({ token: KEY, environment: service.url })
    const r1 = await v1.rerank({ model: 'reranker', query, documents, topN: 3, returnDocuments: true })
    assert.deepEqual(
      r1.results.map((r) => [r.index, r.document?.text]),
      g.reranker.rank.slice(0, 3).map((r) => [r.index, r.document]),
    )
    r1.results.forEach((r, i) => assert.ok(Math.abs(r.relevanceScore - g.reranker.rank[i].score) <= TOLERANCE))
    const v2 = new sdk.CohereClientV2({ token: KEY, environment: service.url })
    const r2 = await v2.rerank({ model: 'reranker', query, documents })
    assert.deepEqual(
      r2.results.map((r) => r.index),
      g.reranker.rank.map((r) => r.index),
    )
  })
})

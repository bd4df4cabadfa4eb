'use strict'
// /v1/embeddings over a CLIP folder (issue 50): texts and images (data URLs, image_url parts, and
// vLLM's multimodal `messages`) through the `openai` client from npm and plain fetch, equal to
// transformers' get_text_features / get_image_features (models/make_clip_models.py's goldens).
// Served by torch.serve (what `npx torch-node serve --model clip=FOLDER` runs), which reads the
// folder's manifest kind 'clip'.
const { describe, test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const torch = require('..')

const DIR = path.join(__dirname, '..', 'models', 'golden', 'clip')
const GOLDENS = path.join(DIR, 'goldens.json')
const SKIP = fs.existsSync(GOLDENS) ? false : 'no CLIP models: run `node tools/models.js --lazy` (make_clip_models.py)'
const TOLERANCE = 1e-5
const TIMEOUT = { timeout: 120_000 }

const maxDiff = (a, b) => Math.max(...b.map((v, i) => Math.abs(a[i] - v)))

describe('/v1/embeddings with a CLIP model', { skip: SKIP }, () => {
  const goldens = SKIP ? null : JSON.parse(fs.readFileSync(GOLDENS, 'utf8'))
  let served, url, client
  const image = (i) =>
    `data:image/png;base64,${fs.readFileSync(path.join(__dirname, '..', 'models', 'images', goldens.inputs.images[i])).toString('base64')}`

  before(async () => {
    served = await torch.serve({ models: { clip: path.join(DIR, 'clip') }, port: 0, host: '127.0.0.1' })
    url = `${served.url}/v1`
    const { default: OpenAI } = await import('openai')
    client = new OpenAI({ baseURL: url, apiKey: 'unused', maxRetries: 0 })
  })
  after(async () => {
    await served?.close()
  })

  test('the openai client: texts and data-URL images in one request, in order', TIMEOUT, async () => {
    const { texts } = goldens.inputs
    const res = await client.embeddings.create({ model: 'clip', input: [image(0), texts[0], image(2), texts[3]] })
    assert.equal(res.data.length, 4)
    const want = [
      goldens.clip.imageFeatures[0],
      goldens.clip.textFeatures[0],
      goldens.clip.imageFeatures[2],
      goldens.clip.textFeatures[3],
    ]
    res.data.forEach((d, i) => {
      assert.equal(d.index, i)
      assert.ok(maxDiff(d.embedding, want[i]) <= TOLERANCE, `item ${i}`)
    })
    assert.ok(res.usage.prompt_tokens > 0)
  })

  test("image_url parts and vLLM's messages form", TIMEOUT, async () => {
    const post = (body) =>
      fetch(`${url}/embeddings`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'clip', encoding_format: 'float', ...body }),
      })
    const parts = await post({
      input: [
        { type: 'image_url', image_url: { url: image(1) } },
        { type: 'text', text: 'a dog' },
      ],
    })
    assert.equal(parts.status, 200)
    const a = (await parts.json()).data
    assert.ok(maxDiff(a[0].embedding, goldens.clip.imageFeatures[1]) <= TOLERANCE)
    assert.ok(maxDiff(a[1].embedding, goldens.clip.textFeatures[3]) <= TOLERANCE)
    const messages = await post({
      messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: image(3) } }] }],
    })
    assert.equal(messages.status, 200)
    assert.ok(maxDiff((await messages.json()).data[0].embedding, goldens.clip.imageFeatures[3]) <= TOLERANCE)

    const bad = async (body, pattern, status = 400) => {
      const res = await post(body)
      assert.equal(res.status, status)
      assert.match(JSON.stringify(await res.json()), pattern)
    }
    await bad(
      { input: [{ type: 'image_url', image_url: { url: 'https://example.com/cat.png' } }] },
      /this server fetches no image URL \(start it with --fetch-images/,
    )
    await bad({ input: ['data:image/png;base64,AAAA'] }, /InvalidImage|cannot decode/)
    await bad(
      {
        messages: [
          {
            role: 'user',
            content: [
              { type: 'text', text: 'a' },
              { type: 'text', text: 'b' },
            ],
          },
        ],
      },
      /one part/,
    )
    await bad({ input: ['a'], messages: [] }, /give one/)
    // still serving
    assert.equal((await post({ input: 'a dog' })).status, 200)
  })
})

'use strict'
// /v1/chat/completions with images (issue 51): OpenAI's image_url parts (data: URLs) through the
// `openai` client over the tiny random LLaVA of models/make_vlm_models.py, answered as
// transformers' greedy generate answers; an http(s) URL, a bad image and an image sent to a
// text-only model are 400s with a code, and the server goes on.
const { describe, test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const torch = require('..')

const ROOT = path.join(__dirname, '..', 'models', 'golden')
const GOLDEN = path.join(ROOT, 'vlm', 'llava-tiny.golden.json')
const LLAMA = path.join(ROOT, 'lm', 'llama-tiny')
const SKIP =
  !(fs.existsSync(GOLDEN) && fs.existsSync(path.join(LLAMA, 'manifest.json'))) &&
  'the LLaVA or Llama fixture is missing (models/make_vlm_models.py, npm run models)'
const TIMEOUT = { timeout: 120_000 }

const dataUrl = (file) =>
  `data:image/png;base64,${fs.readFileSync(path.join(__dirname, '..', 'models', 'images', file)).toString('base64')}`

describe('/v1/chat/completions with image_url parts', { skip: SKIP }, () => {
  const golden = SKIP ? null : JSON.parse(fs.readFileSync(GOLDEN, 'utf8'))
  let served, url, client

  /** A golden case's messages as OpenAI's parts. */
  const openaiMessages = (c) => {
    let next = 0
    return c.messages.map((m) =>
      typeof m.content === 'string'
        ? m
        : {
            role: m.role,
            content: m.content.map((p) =>
              p.type === 'image' ? { type: 'image_url', image_url: { url: dataUrl(c.images[next++]) } } : p,
            ),
          },
    )
  }
  const post = (body) =>
    fetch(`${url}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    })

  before(async () => {
    served = await torch.serve({
      models: { llava: path.join(ROOT, 'vlm', 'llava-tiny'), llama: LLAMA },
      port: 0,
      host: '127.0.0.1',
    })
    url = `${served.url}/v1`
    const { default: OpenAI } = await import('openai')
    client = new OpenAI({ baseURL: url, apiKey: 'unused', maxRetries: 0 })
  })
  after(async () => {
    await served?.close()
  })

  test('the openai client: one and two images, answered as transformers greedy', TIMEOUT, async () => {
    for (const c of golden.cases) {
      const res = await client.chat.completions.create({
        model: 'llava',
        messages: openaiMessages(c),
        max_tokens: golden.new_tokens,
        temperature: 0,
      })
      assert.equal(res.choices[0].message.content, c.text_out, c.name)
      assert.equal(res.usage.prompt_tokens, c.input_ids.length, c.name)
    }
  })

  test('http URLs, bad images, images for a text-only model: 400 with a code', TIMEOUT, async () => {
    const c = golden.cases[0]
    const withUrl = (model, u) => ({
      model,
      max_tokens: 2,
      messages: [
        {
          role: 'user',
          content: [
            { type: 'image_url', image_url: { url: u } },
            { type: 'text', text: 'hi' },
          ],
        },
      ],
    })
    const cases = [
      ['llava', 'https://example.com/cat.png', /data:image/],
      ['llava', `data:image/png;base64,${Buffer.from('garbage bytes, not a PNG').toString('base64')}`, /image/],
      ['llama', dataUrl(c.images[0]), /takes no images/],
    ]
    for (const [model, u, message] of cases) {
      const res = await post(withUrl(model, u))
      assert.equal(res.status, 400, u.slice(0, 40))
      const body = await res.json()
      assert.equal(typeof body.error.code, 'string')
      assert.match(body.error.message, message)
    }
    // Still serving.
    const res = await client.chat.completions.create({
      model: 'llava',
      messages: openaiMessages(c),
      max_tokens: golden.new_tokens,
      temperature: 0,
    })
    assert.equal(res.choices[0].message.content, c.text_out)
  })
})

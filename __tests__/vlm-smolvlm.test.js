'use strict'
// SmolVLM (Idefics3's architecture, issue 51): torch.text.CausalLM and torch-node serve over the tiny
// random SmolVLMForConditionalGeneration of models/make_vlm_models.py (python/export_vlm.py's folder).
// Each image is cut into a grid of tiles plus a global image, and its prompt depends on the grid:
// the image processor's tiles against transformers' pixel_values within 1e-6 and in the same grid
// (3 x 4 and 4 x 2 tiles, one image smaller than a tile), the prompt ids as SmolVLMProcessor writes
// them, greedy tokens equal to transformers' generate for one image, two images of different sizes, a
// small image and a text-only chat, alone and sharing steps, and the openai client's image_url parts.
// SmolVLM's template reads a message's content as a list of parts (message['content'][0]['type']):
// text parts reach it as parts, and a string content as one text part (vLLM's content format,
// crates/core/src/text/chat_template.rs), so "text only (string)" answers as "text only" does, where
// transformers' template writes an empty turn for it.
const { describe, test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const torch = require('..')

const ROOT = path.join(__dirname, '..', 'models', 'golden', 'vlm')
const IMAGES = path.join(__dirname, '..', 'models', 'images')
const FOLDER = path.join(ROOT, 'smolvlm-tiny')
const GOLDEN = path.join(ROOT, 'smolvlm-tiny.golden.json')
const SKIP = !fs.existsSync(GOLDEN) && 'the SmolVLM golden is missing (.libtorch/bin/python models/make_vlm_models.py)'
const TIMEOUT = { timeout: 120_000 }
const golden = SKIP ? { cases: [] } : JSON.parse(fs.readFileSync(GOLDEN, 'utf8'))
const textOnly = golden.cases.find((c) => c.name === 'text only')
for (const c of golden.cases.filter((k) => k.name === 'text only (string)')) {
  Object.assign(c, { input_ids: textOnly.input_ids, output_ids: textOnly.output_ids, top2_gaps: textOnly.top2_gaps })
  c.text_out = textOnly.text_out
}
const TILE = 32

/** A golden image's file: models/images/, or the fixture's own (smolvlm-images/). */
const fileOf = (name) => (name.startsWith('smolvlm-images/') ? path.join(ROOT, name) : path.join(IMAGES, name))

/** A golden case's messages, each image part as `part(file)`. */
function messagesOf(c, part) {
  let next = 0
  return c.messages.map((m) =>
    typeof m.content === 'string'
      ? m
      : { role: m.role, content: m.content.map((p) => (p.type === 'image' ? part(fileOf(c.images[next++])) : p)) },
  )
}
const imagePart = (file) => ({ type: 'image', image: file })
const dataUrl = (file) => `data:image/png;base64,${fs.readFileSync(file).toString('base64')}`

/** The same ids as transformers, or a split where its top-2 logits were within 1e-4. */
function assertGreedy(c, tokens, label) {
  const at = c.output_ids.findIndex((t, i) => tokens[i] !== t)
  if (at < 0) return assert.deepEqual(tokens, c.output_ids, label)
  assert.ok(c.top2_gaps[at] < 1e-4, `${label}: token ${at} differs (top-2 gap ${c.top2_gaps[at]})`)
}

describe('SmolVLM with images: torch.text.CausalLM', { skip: SKIP }, () => {
  let lm
  before(async () => {
    lm = await torch.text.CausalLM.load(FOLDER)
  })
  after(() => lm?.dispose())

  test('the image processor (preprocess.pt) makes transformers tiles within 1e-6, in its grid', TIMEOUT, async () => {
    const preprocess = await torch.ScriptModule.load(path.join(FOLDER, 'preprocess.pt'))
    const grids = []
    try {
      for (const c of golden.cases) {
        for (const [i, name] of c.images.entries()) {
          const image = await torch.image.load(fileOf(name), { dtype: 'uint8', layout: 'chw' })
          const out = await preprocess.forward(image)
          // [rows + 1, cols, 3, S, S]: the tiles row by row, then the global image (column 0 of the
          // last row): in that order the processor's frames.
          const [rows, cols] = c.grids[i]
          assert.deepEqual(out.shape, [rows + 1, cols, 3, TILE, TILE], `${c.name} image ${i}`)
          grids.push(`${rows}x${cols}`)
          const got = out.toTypedArray()
          const want = c.pixel_values[i]
          assert.equal(want.length, (rows * cols + 1) * 3 * TILE * TILE)
          let worst = 0
          for (let k = 0; k < want.length; k++) worst = Math.max(worst, Math.abs(got[k] - want[k]))
          assert.ok(worst <= 1e-6, `${c.name} image ${i}: max |diff| ${worst}`)
          image.dispose()
          out.dispose()
        }
      }
    } finally {
      preprocess.dispose()
    }
    assert.ok(grids.includes('3x4') && grids.includes('4x2'), grids.join(' '))
  })

  test('greedy tokens equal transformers; the prompt as the processor writes it', TIMEOUT, async () => {
    assert.equal(lm.acceptsImages, true)
    for (const c of golden.cases) {
      const out = await lm.complete(messagesOf(c, imagePart), { maxNewTokens: golden.new_tokens })
      assertGreedy(c, out.tokens, c.name)
      // Per tile "<fake_token_around_image><row_r_col_c>" and 16 image tokens, then the global image's.
      assert.equal(out.usage.promptTokens, c.input_ids.length, c.name)
    }
  })

  test('image prompts share steps with a text-only one, each as alone', TIMEOUT, async () => {
    const before = lm.stats()
    const outs = await Promise.all(
      golden.cases.map((c) => lm.complete(messagesOf(c, imagePart), { maxNewTokens: golden.new_tokens })),
    )
    for (const [i, c] of golden.cases.entries()) assertGreedy(c, outs[i].tokens, `${c.name} (batched)`)
    const after = lm.stats()
    assert.ok(after.rows - before.rows > after.steps - before.steps, 'rows shared steps')
  })

  test('an image by bytes and by Tensor: the same answer as by path', TIMEOUT, async () => {
    const c = golden.cases.find((k) => k.name === 'small image')
    const file = fileOf(c.images[0])
    const tensor = await torch.image.load(file, { dtype: 'uint8', layout: 'chw' })
    try {
      for (const image of [fs.readFileSync(file), tensor]) {
        const out = await lm.complete(
          messagesOf(c, () => ({ type: 'image', image })),
          { maxNewTokens: golden.new_tokens },
        )
        assertGreedy(c, out.tokens, `${c.name} (${image instanceof torch.Tensor ? 'Tensor' : 'Buffer'})`)
      }
    } finally {
      tensor.dispose()
    }
  })
})

describe('SmolVLM with images: /v1/chat/completions through the openai client', { skip: SKIP }, () => {
  let served, client
  before(async () => {
    served = await torch.serve({ models: { smolvlm: FOLDER }, port: 0, host: '127.0.0.1' })
    const { default: OpenAI } = await import('openai')
    client = new OpenAI({ baseURL: `${served.url}/v1`, apiKey: 'unused', maxRetries: 0 })
  })
  after(async () => {
    await served?.close()
  })

  test('image_url data URLs, answered as transformers greedy', TIMEOUT, async () => {
    for (const c of golden.cases) {
      const res = await client.chat.completions.create({
        model: 'smolvlm',
        messages: messagesOf(c, (file) => ({ type: 'image_url', image_url: { url: dataUrl(file) } })),
        max_tokens: golden.new_tokens,
        temperature: 0,
      })
      assert.equal(res.choices[0].message.content, c.text_out, c.name)
      assert.equal(res.usage.prompt_tokens, c.input_ids.length, c.name)
    }
  })
})

'use strict'
// Gemma 3's vision variant (issue 51): torch.text.CausalLM and torch-node serve over the tiny
// random Gemma3ForConditionalGeneration of models/make_vlm_models.py (python/export_vlm.py's
// folder): the image processor's pixel_values against transformers' within 1e-6, the prompt as
// Gemma3Processor expands <start_of_image>, greedy tokens equal to transformers' generate (whose
// image tokens attend to each other both ways) for one image, two images and a text-only chat,
// alone and sharing steps, and the openai client's image_url parts through /v1/chat/completions.
const { describe, test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const torch = require('..')

const ROOT = path.join(__dirname, '..', 'models', 'golden', 'vlm')
const IMAGES = path.join(__dirname, '..', 'models', 'images')
const FOLDER = path.join(ROOT, 'gemma3-tiny')
const GOLDEN = path.join(ROOT, 'gemma3-tiny.golden.json')
const SKIP = !fs.existsSync(GOLDEN) && 'the Gemma 3 golden is missing (.libtorch/bin/python models/make_vlm_models.py)'
const TIMEOUT = { timeout: 120_000 }
const golden = SKIP ? { cases: [] } : JSON.parse(fs.readFileSync(GOLDEN, 'utf8'))

/** A golden case's messages, each image part as `part(file)`. */
function messagesOf(c, part) {
  let next = 0
  return c.messages.map((m) =>
    typeof m.content === 'string'
      ? m
      : { role: m.role, content: m.content.map((p) => (p.type === 'image' ? part(c.images[next++]) : p)) },
  )
}
const imagePart = (file) => ({ type: 'image', image: path.join(IMAGES, file) })
const dataUrl = (file) => `data:image/png;base64,${fs.readFileSync(path.join(IMAGES, file)).toString('base64')}`

/** The same ids as transformers, or a split where its top-2 logits were within 1e-4. */
function assertGreedy(c, tokens, label) {
  const at = c.output_ids.findIndex((t, i) => tokens[i] !== t)
  if (at < 0) return assert.deepEqual(tokens, c.output_ids, label)
  assert.ok(c.top2_gaps[at] < 1e-4, `${label}: token ${at} differs (top-2 gap ${c.top2_gaps[at]})`)
}

describe('Gemma 3 with images: torch.text.CausalLM', { skip: SKIP }, () => {
  let lm
  before(async () => {
    lm = await torch.text.CausalLM.load(FOLDER)
  })
  after(() => lm?.dispose())

  test('the image processor (preprocess.pt) makes transformers pixel_values within 1e-6', TIMEOUT, async () => {
    const preprocess = await torch.ScriptModule.load(path.join(FOLDER, 'preprocess.pt'))
    try {
      for (const c of golden.cases) {
        for (const [i, file] of c.images.entries()) {
          const image = await torch.image.load(path.join(IMAGES, file), { dtype: 'uint8', layout: 'chw' })
          const got = (await preprocess.forward(image)).toTypedArray()
          const want = c.pixel_values[i]
          assert.equal(got.length, want.length)
          let worst = 0
          for (let k = 0; k < want.length; k++) worst = Math.max(worst, Math.abs(got[k] - want[k]))
          assert.ok(worst <= 1e-6, `${c.name} image ${i}: max |diff| ${worst}`)
          image.dispose()
        }
      }
    } finally {
      preprocess.dispose()
    }
  })

  test('greedy tokens equal transformers; the prompt as the processor expands it', TIMEOUT, async () => {
    assert.equal(lm.acceptsImages, true)
    for (const c of golden.cases) {
      const out = await lm.complete(messagesOf(c, imagePart), { maxNewTokens: golden.new_tokens })
      assertGreedy(c, out.tokens, c.name)
      // Each image: "\n\n<start_of_image>", 16 soft tokens, "<end_of_image>\n\n".
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
    const rows = after.rows - before.rows
    const steps = after.steps - before.steps
    assert.ok(rows > steps, `rows ${rows}, steps ${steps}`)
  })
})

describe('Gemma 3 with images: /v1/chat/completions through the openai client', { skip: SKIP }, () => {
  let served, client
  before(async () => {
    served = await torch.serve({ models: { gemma3: FOLDER }, port: 0, host: '127.0.0.1' })
    const { default: OpenAI } = await import('openai')
    client = new OpenAI({ baseURL: `${served.url}/v1`, apiKey: 'unused', maxRetries: 0 })
  })
  after(async () => {
    await served?.close()
  })

  test('image_url data URLs, answered as transformers greedy', TIMEOUT, async () => {
    for (const c of golden.cases) {
      const res = await client.chat.completions.create({
        model: 'gemma3',
        messages: messagesOf(c, (file) => ({ type: 'image_url', image_url: { url: dataUrl(file) } })),
        max_tokens: golden.new_tokens,
        temperature: 0,
      })
      assert.equal(res.choices[0].message.content, c.text_out, c.name)
      assert.equal(res.usage.prompt_tokens, c.input_ids.length, c.name)
    }
  })
})

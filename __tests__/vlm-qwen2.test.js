'use strict'
// Qwen2-VL (issue 51): torch.text.CausalLM over the tiny random Qwen2VLForConditionalGeneration of
// models/make_qwen2_vl_models.py (python/export_vlm.py's folder). Each image is resized to a patch
// grid of its own and its tokens are placed by M-RoPE (3-D positions; the text after an image
// shifted by the row's delta): the image processor's pixel_values against transformers' within 1e-6
// in the same grid, greedy tokens equal to transformers' generate for one image, two images of
// different grids and a text-only chat, alone, sharing steps, and again through the prefix cache.
const { describe, test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const torch = require('..')

const ROOT = path.join(__dirname, '..', 'models', 'golden', 'vlm')
const IMAGES = path.join(__dirname, '..', 'models', 'images')
const FOLDER = path.join(ROOT, 'qwen2-vl-tiny')
const GOLDEN = path.join(ROOT, 'qwen2-vl-tiny.golden.json')
const SKIP =
  !fs.existsSync(GOLDEN) && 'the Qwen2-VL golden is missing (.libtorch/bin/python models/make_qwen2_vl_models.py)'
const TIMEOUT = { timeout: 120_000 }
const golden = SKIP ? { cases: [] } : JSON.parse(fs.readFileSync(GOLDEN, 'utf8'))

/** A golden image's file: models/images/, or the fixture's own (qwen2-vl-images/). */
const fileOf = (name) => (name.startsWith('qwen2-vl-images/') ? path.join(ROOT, name) : path.join(IMAGES, name))

/** A golden case's messages, each image part as `{type: 'image', image: file}`. */
function messagesOf(c) {
  let next = 0
  return c.messages.map((m) =>
    typeof m.content === 'string'
      ? m
      : {
          role: m.role,
          content: m.content.map((p) => (p.type === 'image' ? { type: 'image', image: fileOf(c.images[next++]) } : p)),
        },
  )
}

/** The same ids as transformers, or a split where its top-2 logits were within 1e-4. */
function assertGreedy(c, tokens, label) {
  const at = c.output_ids.findIndex((t, i) => tokens[i] !== t)
  if (at < 0) return assert.deepEqual(tokens, c.output_ids, label)
  assert.ok(c.top2_gaps[at] < 1e-4, `${label}: token ${at} differs (top-2 gap ${c.top2_gaps[at]})`)
}

describe('Qwen2-VL with images: torch.text.CausalLM', { skip: SKIP }, () => {
  let lm
  before(async () => {
    lm = await torch.text.CausalLM.load(FOLDER, { prefixCache: { maxTokens: 2048 } })
  })
  after(() => lm?.dispose())

  test('the image processor (preprocess.pt) makes pixel_values within 1e-6, in its grid', TIMEOUT, async () => {
    const preprocess = await torch.ScriptModule.load(path.join(FOLDER, 'preprocess.pt'))
    const grids = []
    try {
      for (const c of golden.cases) {
        for (const [i, name] of c.images.entries()) {
          const image = await torch.image.load(fileOf(name), { dtype: 'uint8', layout: 'chw' })
          const out = await preprocess.forward(image)
          // [gh, gw, 3 * 2 * 4 * 4]: row-major, the processor's pixel_values [gh * gw, D].
          const [t, gh, gw] = c.grids[i]
          assert.equal(t, 1)
          assert.deepEqual(out.shape, [gh, gw, 96], `${c.name} image ${i}`)
          grids.push(`${gh}x${gw}`)
          const got = out.toTypedArray()
          const want = c.pixel_values[i]
          assert.equal(want.length, got.length)
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
    assert.ok(grids.includes('12x18') && grids.includes('24x10'), grids.join(' '))
  })

  test('greedy tokens equal transformers; the prompt as the processor writes it', TIMEOUT, async () => {
    assert.equal(lm.acceptsImages, true)
    for (const c of golden.cases) {
      const out = await lm.complete(messagesOf(c), { maxNewTokens: golden.new_tokens })
      assertGreedy(c, out.tokens, c.name)
      assert.equal(out.usage.promptTokens, c.input_ids.length, c.name)
    }
  })

  test('image prompts share steps with a text-only one, each as alone', TIMEOUT, async () => {
    const before = lm.stats()
    const outs = await Promise.all(
      golden.cases.map((c) => lm.complete(messagesOf(c), { maxNewTokens: golden.new_tokens })),
    )
    for (const [i, c] of golden.cases.entries()) assertGreedy(c, outs[i].tokens, `${c.name} (batched)`)
    const after = lm.stats()
    assert.ok(after.rows - before.rows > after.steps - before.steps, 'rows shared steps')
  })

  test('the same images again come from the prefix cache, answered the same', TIMEOUT, async () => {
    const c = golden.cases.find((k) => k.name === 'two images')
    const before = lm.stats().prefixCache.reusedTokens
    const out = await lm.complete(messagesOf(c), { maxNewTokens: golden.new_tokens })
    assertGreedy(c, out.tokens, `${c.name} (prefix cache)`)
    const reused = lm.stats().prefixCache.reusedTokens - before
    assert.ok(reused >= c.image_tokens, `${reused} tokens reused`)
  })
})

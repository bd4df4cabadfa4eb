'use strict'
// Images in the chat (issue 51): torch.text.CausalLM over the tiny random LLaVA of
// models/make_vlm_models.py (python/export_vlm.py's folder): the image processor's pixel_values
// against transformers' within 1e-6, greedy tokens equal to transformers' generate (or a split at a
// top-2 logit gap under 1e-4) for one image, two images in a message and a text-only chat, alone and
// sharing steps, and what a bad image or a text-only model given an image gets (a coded error; the
// process stays up and the model goes on serving).
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const torch = require('..')

const ROOT = path.join(__dirname, '..', 'models', 'golden', 'vlm')
const IMAGES = path.join(__dirname, '..', 'models', 'images')
const GOLDEN = path.join(ROOT, 'llava-tiny.golden.json')
const skip = !fs.existsSync(GOLDEN) && 'the LLaVA golden is missing (.libtorch/bin/python models/make_vlm_models.py)'
const TIMEOUT = { timeout: 120_000, skip }
const golden = skip ? { cases: [] } : JSON.parse(fs.readFileSync(GOLDEN, 'utf8'))

/** A golden case's messages with each image part holding its file (`as`: path, bytes, data URL). */
function messagesOf(c, as = (file) => path.join(IMAGES, file)) {
  let next = 0
  return c.messages.map((m) =>
    typeof m.content === 'string'
      ? m
      : {
          role: m.role,
          content: m.content.map((p) => (p.type === 'image' ? { type: 'image', image: as(c.images[next++]) } : p)),
        },
  )
}

/** The same ids as transformers, or a split where its top-2 logits were within 1e-4. */
function assertGreedy(c, tokens, label) {
  const at = c.output_ids.findIndex((t, i) => tokens[i] !== t)
  if (at < 0) return assert.deepEqual(tokens, c.output_ids, label)
  assert.ok(c.top2_gaps[at] < 1e-4, `${label}: token ${at} differs (top-2 gap ${c.top2_gaps[at]})`)
}

/** PNG's CRC-32 of `bytes`. @param {Uint8Array} bytes */
function crc32(bytes) {
  let crc = 0xffffffff
  for (const b of bytes) {
    crc ^= b
    for (let k = 0; k < 8; k++) crc = (crc >>> 1) ^ (0xedb88320 & -(crc & 1))
  }
  return (crc ^ 0xffffffff) >>> 0
}

let lm
test.before(async () => {
  if (!skip) lm = await torch.text.CausalLM.load(path.join(ROOT, 'llava-tiny'))
})
test.after(() => lm?.dispose())

test('the image processor (preprocess.pt) makes transformers pixel_values within 1e-6', TIMEOUT, async () => {
  const preprocess = await torch.ScriptModule.load(path.join(ROOT, 'llava-tiny', 'preprocess.pt'))
  try {
    for (const c of golden.cases) {
      for (const [i, file] of c.images.entries()) {
        const image = await torch.image.load(path.join(IMAGES, file), { dtype: 'uint8', layout: 'chw' })
        const pixels = await preprocess.forward(image)
        const got = pixels.toTypedArray()
        const want = c.pixel_values[i]
        assert.equal(got.length, want.length)
        let worst = 0
        for (let k = 0; k < want.length; k++) worst = Math.max(worst, Math.abs(got[k] - want[k]))
        assert.ok(worst <= 1e-6, `${c.name} image ${i}: max |diff| ${worst}`)
        image.dispose()
        pixels.dispose()
      }
    }
  } finally {
    preprocess.dispose()
  }
})

test(
  'greedy tokens equal transformers: images by path, bytes and data URL; prompt tokens counted',
  TIMEOUT,
  async () => {
    assert.equal(lm.acceptsImages, true)
    const ways = [
      (file) => path.join(IMAGES, file),
      (file) => fs.readFileSync(path.join(IMAGES, file)),
      (file) => `data:image/png;base64,${fs.readFileSync(path.join(IMAGES, file)).toString('base64')}`,
    ]
    for (const c of golden.cases) {
      for (const [w, as] of ways.entries()) {
        const out = await lm.complete(messagesOf(c, as), { maxNewTokens: golden.new_tokens })
        assertGreedy(c, out.tokens, `${c.name} (way ${w})`)
        // The prompt as transformers' processor expands it: each image 16 tokens.
        assert.equal(out.usage.promptTokens, c.input_ids.length, c.name)
      }
    }
  },
)

test('image prompts share steps with a text-only one, each as alone', TIMEOUT, async () => {
  const before = lm.stats()
  const outs = await Promise.all(
    golden.cases.map((c) => lm.complete(messagesOf(c), { maxNewTokens: golden.new_tokens })),
  )
  for (const [i, c] of golden.cases.entries()) assertGreedy(c, outs[i].tokens, `${c.name} (batched)`)
  const after = lm.stats()
  // Three sequences in fewer steps than their tokens: they ran together.
  const rows = after.rows - before.rows
  const steps = after.steps - before.steps
  assert.ok(rows > steps, `rows ${rows}, steps ${steps}`)
})

test('a Tensor image (uint8 RGB [3, h, w]) is the same as its file', TIMEOUT, async () => {
  const c = golden.cases[0]
  const image = await torch.image.load(path.join(IMAGES, c.images[0]), { dtype: 'uint8', layout: 'chw' })
  try {
    const out = await lm.complete(
      messagesOf(c, () => image),
      { maxNewTokens: golden.new_tokens },
    )
    assertGreedy(c, out.tokens, 'tensor')
    await assert.rejects(
      lm.complete(
        messagesOf(c, () => image.to('float32')),
        { maxNewTokens: 2 },
      ),
      (e) => e.code === 'InvalidArg' && /uint8 RGB Tensor/.test(e.message),
    )
  } finally {
    image.dispose()
  }
})

test('hostile images are coded errors and the model goes on', TIMEOUT, async () => {
  const c = golden.cases[0]
  const garbage = Buffer.from('not an image at all, just bytes'.repeat(10))
  const failure = (image) =>
    lm
      .complete(
        messagesOf(c, () => image),
        { maxNewTokens: 2 },
      )
      .catch((e) => e)
  const e1 = await failure(garbage)
  assert.equal(e1.code, 'InvalidArg', String(e1))
  assert.match(e1.message, /content\[0\]\.image: cannot decode the image/)
  // A PNG whose header (its CRC right) declares 100000 x 100000 pixels: refused before decoding.
  const bomb = Buffer.from(fs.readFileSync(path.join(IMAGES, c.images[0])))
  bomb.writeUInt32BE(100000, 16)
  bomb.writeUInt32BE(100000, 20)
  bomb.writeUInt32BE(crc32(bomb.subarray(12, 29)), 29)
  const e2 = await failure(bomb)
  assert.equal(e2.code, 'InvalidArg', String(e2))
  assert.match(e2.message, /exceeds limit/)
  const e4 = await failure(path.join(IMAGES, 'no-such.png'))
  assert.ok(e4 instanceof Error && e4.code !== 'Internal' && /no-such\.png/.test(e4.message), String(e4))
  const e3 = await lm
    .complete(
      messagesOf(c, () => 42),
      { maxNewTokens: 2 },
    )
    .catch((e) => e)
  assert.equal(e3.code, 'InvalidArg')
  // The image token typed as text, with no image: refused as transformers refuses it.
  await assert.rejects(
    lm.complete([{ role: 'user', content: 'look: <image>' }], { maxNewTokens: 2 }),
    (e) => e.code === 'InvalidArg' && /image token/.test(e.message),
  )
  // Still serving.
  const out = await lm.complete(messagesOf(c), { maxNewTokens: golden.new_tokens })
  assertGreedy(c, out.tokens, 'after the errors')
})

test('a text-only model given an image: InvalidArg at the call', TIMEOUT, async (t) => {
  const dir = path.join(__dirname, '..', 'models', 'golden', 'lm', 'llama-tiny')
  if (!fs.existsSync(path.join(dir, 'manifest.json'))) return t.skip('llama-tiny is missing (npm run models)')
  const text = await torch.text.CausalLM.load(dir)
  try {
    assert.equal(text.acceptsImages, false)
    const prompt = [{ role: 'user', content: [{ type: 'image', image: path.join(IMAGES, 'chelsea.png') }] }]
    assert.throws(
      () => text.generate(prompt),
      (e) => e.code === 'InvalidArg' && /takes no images/.test(e.message),
    )
  } finally {
    text.dispose()
  }
})

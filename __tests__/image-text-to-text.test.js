'use strict'
// torch.pipeline('image-text-to-text') (issue 50/51): transformers 5's ImageTextToTextPipeline in its
// chat form over the tiny random Gemma 3 of models/make_vlm_models.py. Its golden "pipeline" holds
// what transformers' pipeline appended (greedy) to each chat, image parts given as {type: 'image',
// url}; here the same chats, images as url, path, base64 and Buffer parts, alone and as a batch.
const { describe, test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const torch = require('..')

const ROOT = path.join(__dirname, '..', 'models', 'golden', 'vlm')
const IMAGES = path.join(__dirname, '..', 'models', 'images')
const GOLDEN = path.join(ROOT, 'gemma3-tiny.golden.json')
const golden = fs.existsSync(GOLDEN) ? JSON.parse(fs.readFileSync(GOLDEN, 'utf8')) : {}
const SKIP =
  !golden.pipeline && 'the Gemma 3 pipeline golden is missing (.libtorch/bin/python models/make_vlm_models.py)'
const TEXT_ONLY_LM = path.join(__dirname, '..', 'models', 'golden', 'lm', 'llama-tiny')
const TIMEOUT = { timeout: 120_000 }

/** A golden case's chat, each image part as `part(file)`. */
function chatOf(c, part) {
  let next = 0
  return c.messages.map((m) =>
    typeof m.content === 'string'
      ? m
      : { role: m.role, content: m.content.map((p) => (p.type === 'image' ? part(c.images[next++]) : p)) },
  )
}
const byUrl = (file) => ({ type: 'image', url: path.join(IMAGES, file) })
const forms = [
  byUrl,
  (file) => ({ type: 'image', path: path.join(IMAGES, file) }),
  (file) => ({ type: 'image', base64: fs.readFileSync(path.join(IMAGES, file)).toString('base64') }),
  (file) => ({ type: 'image', image: fs.readFileSync(path.join(IMAGES, file)) }),
]
const wanted = (name) => golden.pipeline.find((p) => p.name === name).generated

describe("torch.pipeline('image-text-to-text')", { skip: SKIP }, () => {
  let pipe
  before(async () => {
    pipe = await torch.pipeline('image-text-to-text', path.join(ROOT, 'gemma3-tiny'))
  })
  after(() => pipe?.dispose())

  test(
    "each chat's answer equals transformers' pipeline (greedy), the chat with the turn appended",
    TIMEOUT,
    async () => {
      assert.equal(pipe.task, 'image-text-to-text')
      for (const c of golden.cases) {
        const chat = chatOf(c, byUrl)
        const out = await pipe.run(chat, { maxNewTokens: golden.new_tokens })
        assert.equal(out.length, 1)
        assert.deepEqual(out[0].inputText, chat, c.name)
        assert.deepEqual(out[0].generatedText, [...chat, { role: 'assistant', content: wanted(c.name) }], c.name)
      }
    },
  )

  test('every image form gives the same answer; returnFullText: false gives the text alone', TIMEOUT, async () => {
    const c = golden.cases.find((x) => x.images.length > 0)
    for (const [i, form] of forms.entries()) {
      const [out] = await pipe.run(chatOf(c, form), { maxNewTokens: golden.new_tokens, returnFullText: false })
      assert.equal(out.generatedText, wanted(c.name), `form ${i}`)
    }
  })

  test('an array of chats gives an array of answers, each as alone', TIMEOUT, async () => {
    const chats = golden.cases.map((c) => chatOf(c, byUrl))
    const outs = await pipe.run(chats, { maxNewTokens: golden.new_tokens })
    assert.equal(outs.length, chats.length)
    outs.forEach((out, i) => {
      assert.equal(out.length, 1)
      assert.equal(out[0].generatedText.at(-1).content, wanted(golden.cases[i].name))
    })
  })

  test('bad input: InvalidArg naming the part; the pipeline keeps answering', TIMEOUT, async () => {
    const text = { type: 'text', text: 'hi' }
    const bad = [
      [[{ role: 'user', content: [{ type: 'image' }, text] }], /exactly one of image, url, path or base64, got 0/],
      [[{ role: 'user', content: [{ type: 'image', url: 'a.png', path: 'b.png' }] }], /exactly one.*got 2/],
      [[{ role: 'user', content: [{ type: 'image', url: 'https://example.com/a.png' }] }], /not fetched here/],
      [[{ role: 'user', content: [{ type: 'image', url: 7 }] }], /input\[0\]\.content\[0\]\.url: expected a string/],
      [[{ role: 'user', content: [{ type: 'image', url: 'x.png', detail: 'high' }] }], /detail/],
      [
        [
          { role: 'user', content: 'hi' },
          { role: 'assistant', content: 'Hel' },
        ],
        /continuing it is not supported/,
      ],
      ['a raw prompt', /expected chat messages/],
      [[], /expected chat messages/],
    ]
    for (const [input, message] of bad) {
      await assert.rejects(
        pipe.run(input, { maxNewTokens: 2 }),
        (e) => e.code === 'InvalidArg' && message.test(e.message),
      )
    }
    await assert.rejects(pipe.run(chatOf(golden.cases[0], byUrl), { returnFullText: 1 }), { code: 'InvalidArg' })
    const [out] = await pipe.run(chatOf(golden.cases[0], byUrl), { maxNewTokens: golden.new_tokens })
    assert.equal(out.generatedText.at(-1).content, wanted(golden.cases[0].name))
  })

  test('a text-only export is refused at load (ModelLoadError)', TIMEOUT, async (t) => {
    if (!fs.existsSync(path.join(TEXT_ONLY_LM, 'manifest.json')))
      return t.skip('models/golden/lm/llama-tiny is missing')
    await assert.rejects(torch.pipeline('image-text-to-text', TEXT_ONLY_LM), (e) => {
      return e.code === 'ModelLoadError' && /text-only export/.test(e.message)
    })
  })
})

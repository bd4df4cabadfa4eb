'use strict'
// CausalLM's `speculative: {method: 'prompt-lookup'}` over the tiny random Llama and GPT-2 of
// models/make_lm_models.py: the same greedy tokens as without it (and transformers' goldens),
// acceptance read from stats(), a row batched beside another, streaming order, a stop string and
// the token limit, abort, a JSON schema, option errors and a format 1 export refused.
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const torch = require('..')

const ROOT = path.join(__dirname, '..', 'models', 'golden', 'lm')
const have = (name) => fs.existsSync(path.join(ROOT, name, 'manifest.json'))
const format2 = (name) => have(name) && JSON.parse(fs.readFileSync(path.join(ROOT, name, 'manifest.json'))).format >= 2
const skip =
  !['llama-tiny', 'gpt2-tiny'].every(format2) && 'the format 2 causal-LM exports are missing (npm run models)'
const golden = (name) => JSON.parse(fs.readFileSync(path.join(ROOT, `${name}.golden.json`), 'utf8'))
const SPEC = { method: 'prompt-lookup', maxDraft: 6 }
const loaded = []
const load = async (name, options) => {
  const lm = await torch.text.CausalLM.load(path.join(ROOT, name), options)
  loaded.push(lm)
  return lm
}
test.after(() => loaded.forEach((lm) => lm.dispose()))

/** Greedy: each piece's tokens, joined, and the result. */
async function run(lm, prompt, options) {
  const pieces = []
  const it = lm.generate(prompt, { temperature: 0, ...options })
  for (;;) {
    const r = await it.next()
    if (r.done)
      return {
        pieces,
        tokens: pieces.flatMap((p) => p.tokens),
        text: pieces.map((p) => p.text).join(''),
        result: r.value,
      }
    pieces.push(r.value)
  }
}

// A prompt that repeats itself: drafts on every step. (The random models seldom agree with them:
// over the goldens' 120-token outputs, llama-tiny accepts 2 of ~600 drafted tokens, gpt2-tiny 11 of ~900.)
const REPEAT = 'one two three four five six one two three four five six one two three four five six one two'

test('greedy tokens equal with and without speculation, on the goldens and batched', { skip }, async () => {
  for (const name of ['llama-tiny', 'gpt2-tiny']) {
    const plain = await load(name)
    const fast = await load(name, { speculative: SPEC, maxSequences: 2 })
    for (const c of golden(name).cases.filter((c) => c.prompt !== undefined)) {
      const want = await run(plain, c.prompt, { maxNewTokens: 120 })
      const got = await run(fast, c.prompt, { maxNewTokens: 120 })
      assert.deepEqual(got.tokens, want.tokens, `${name} ${c.name}`)
      assert.equal(got.text, want.text)
    }
    // Two at once: the repetitive prompt drafts while the other one may not.
    const prompts = [REPEAT, golden(name).cases.find((c) => c.prompt !== undefined).prompt]
    const want = await Promise.all(prompts.map((p) => run(plain, p, { maxNewTokens: 40 })))
    const got = await Promise.all(prompts.map((p) => run(fast, p, { maxNewTokens: 40 })))
    assert.deepEqual(
      got.map((g) => g.tokens),
      want.map((w) => w.tokens),
      name,
    )
    const s = fast.stats().speculative
    assert.equal(s.maxDraft, 6)
    assert.ok(s.acceptedTokens > 0 && s.acceptedTokens <= s.proposedTokens, JSON.stringify(s))
    assert.equal(s.acceptance, s.acceptedTokens / s.proposedTokens)
    assert.equal(plain.stats().speculative, undefined)
  }
})

test('streaming, a stop string and the token limit inside accepted runs, abort', { skip }, async () => {
  const plain = await load('llama-tiny')
  const fast = await load('llama-tiny', { speculative: SPEC })
  const want = await run(plain, REPEAT, { maxNewTokens: 60 })
  const got = await run(fast, REPEAT, { maxNewTokens: 60 })
  assert.deepEqual(got.tokens, want.tokens)
  assert.equal(got.text, want.text, 'the pieces stream in order')
  // The token limit at each count: never a token past it.
  for (const n of [7, 13, 21]) {
    const r = await run(fast, REPEAT, { maxNewTokens: n })
    assert.deepEqual([r.tokens, r.result.finishReason], [want.tokens.slice(0, n), 'length'])
  }
  // A stop string from the middle of the output: the text before it, nothing after.
  const stop = want.text.slice(40, 46)
  const before = want.text.slice(0, want.text.indexOf(stop))
  for (const lm of [plain, fast]) {
    const r = await run(lm, REPEAT, { maxNewTokens: 60, stop })
    assert.deepEqual([r.text, r.result.finishReason], [before, 'stop'])
  }
  // Abort mid-stream: aborted, and the next request runs.
  const controller = new AbortController()
  const it = fast.generate(REPEAT, { maxNewTokens: 200, temperature: 0, signal: controller.signal })
  await it.next()
  controller.abort()
  let end = await it.next()
  while (!end.done) end = await it.next()
  assert.equal(end.value.finishReason, 'aborted')
  assert.deepEqual((await run(fast, REPEAT, { maxNewTokens: 13 })).tokens, want.tokens.slice(0, 13))
  assert.equal(fast.stats().active, 0)
})

test('a JSON schema: the same constrained output with drafts', { skip }, async () => {
  const plain = await load('llama-tiny')
  const fast = await load('llama-tiny', { speculative: SPEC })
  const responseFormat = {
    type: 'json_schema',
    json_schema: { schema: { type: 'object', properties: { a: { type: 'string', maxLength: 12 } }, required: ['a'] } },
  }
  const prompt = `${REPEAT} {"a": "one two"} {"a": "one two"}`
  const want = await run(plain, prompt, { maxNewTokens: 40, responseFormat })
  const got = await run(fast, prompt, { maxNewTokens: 40, responseFormat })
  assert.deepEqual(got.tokens, want.tokens)
  assert.ok(JSON.parse(got.text).a !== undefined, got.text)
})

test('bad options and a format 1 export are refused with InvalidArg', { skip }, async () => {
  const bad = [
    [{ method: 'draft-model' }, /speculative\.method/],
    [{ method: 'prompt-lookup', maxDraft: 0 }, /maxDraft/],
    [{ method: 'prompt-lookup', ngram: 9 }, /ngram/],
    [{ method: 'prompt-lookup', draft: 3 }, /draft/],
  ]
  for (const [speculative, message] of bad) {
    await assert.rejects(load('llama-tiny', { speculative }), (e) => e.code === 'InvalidArg' && message.test(e.message))
  }
  // The same folder with a format 1 manifest (no `keep_logits`): loads, but not for speculation.
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'torch-node-format1-'))
  try {
    for (const f of fs.readdirSync(path.join(ROOT, 'llama-tiny'))) {
      fs.symlinkSync(path.join(ROOT, 'llama-tiny', f), path.join(dir, f))
    }
    const manifest = JSON.parse(fs.readFileSync(path.join(ROOT, 'llama-tiny', 'manifest.json')))
    delete manifest.keep_logits
    manifest.format = 1
    fs.rmSync(path.join(dir, 'manifest.json'))
    fs.writeFileSync(path.join(dir, 'manifest.json'), JSON.stringify(manifest))
    await assert.rejects(
      torch.text.CausalLM.load(dir, { speculative: SPEC }),
      (e) => e.code === 'InvalidArg' && /export it again/.test(e.message),
    )
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
})

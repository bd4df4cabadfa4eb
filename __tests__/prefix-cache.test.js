'use strict'
// The prefix cache (crates/core/src/generate/prefix.rs): a radix tree of 16-token blocks. Greedy
// tokens are the same with and without it (and equal transformers' goldens); chats over one system
// prompt hold it once; the bound evicts least recently used spans; torch.serve turns it on.
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const torch = require('..')

const ROOT = path.join(__dirname, '..', 'models', 'golden', 'lm')
const BLOCK = 16
const has = (name) => fs.existsSync(path.join(ROOT, name, 'model.pt2'))
const goldenOf = (name) => path.join(ROOT, `${name}.golden.json`)
const loaded = []
const load = async (name, options) => {
  const lm = await torch.text.CausalLM.load(path.join(ROOT, name), options)
  loaded.push(lm)
  return lm
}
test.after(() => loaded.forEach((lm) => lm.dispose()))

// The first installed model of these (gemma2-tiny has a sliding window: the cache holds slots, the
// mask still decides what a token reads).
const NAME = ['llama-tiny', 'gemma2-tiny'].find(has)
const skip = !NAME && 'no causal-LM test model (npm run models)'

const noGolden = !fs.existsSync(goldenOf('llama-tiny')) && 'the llama-tiny golden is missing (npm run models)'
test(
  'greedy tokens are the goldens with the cache on, restoring spans of several blocks',
  { skip: noGolden },
  async () => {
    const { cases } = JSON.parse(fs.readFileSync(goldenOf('llama-tiny'), 'utf8'))
    const lm = await load('llama-tiny', { prefixCache: { maxTokens: 4096 } })
    // The cases whose tokens are all in the vocabulary (a prompt of ids may not hold the specials past it).
    const usable = cases.filter((c) => [...c.input_ids, ...c.output_ids].every((id) => id < 400))
    assert.ok(usable.length >= 2)
    for (const c of usable) {
      // The golden's prompt and its first k new tokens as ids: the rest of its new tokens follow,
      // whether the start comes from the cache (the second and later k) or not.
      const all = [...c.input_ids, ...c.output_ids]
      for (const k of [48, 40, 33, 48]) {
        const got = await lm.complete(all.slice(0, c.input_ids.length + k), { maxNewTokens: 64 - k, temperature: 0 })
        assert.deepEqual(got.tokens, c.output_ids.slice(k), `${c.name}, k = ${k}`)
      }
    }
    const s = lm.stats().prefixCache
    assert.ok(s.hits >= 3 * usable.length, `${s.hits} hits`)
  },
)

test('chats over one system prompt: the same greedy tokens, the system prompt held once', { skip }, async () => {
  const plain = await load(NAME)
  const cached = await load(NAME, { prefixCache: { maxTokens: 4096 } })
  const system = 'You are a helpful assistant who answers briefly and kindly, in plain words. '.repeat(2)
  const options = { maxNewTokens: 8, temperature: 0 }
  const chats = ['Once upon a time', 'The quick brown fox', 'Hello there', 'Tell me a story']
  const histories = chats.map((c) => system + c)
  let systemTokens = 0
  for (let turn = 0; turn < 2; turn++) {
    for (let i = 0; i < chats.length; i++) {
      const want = await plain.complete(histories[i], options)
      const got = await cached.complete(histories[i], options)
      assert.deepEqual(got.tokens, want.tokens, `turn ${turn}, chat ${i}`)
      if (turn === 0 && i === 0) systemTokens = (await plain.complete(system, { maxNewTokens: 1 })).usage.promptTokens
      histories[i] += `${want.text} And then?`
    }
  }
  const s = cached.stats().prefixCache
  // Every prompt after the first reused at least the system prompt's whole blocks.
  const prompts = 2 * chats.length
  assert.equal(s.queries, prompts)
  assert.equal(s.hits, prompts - 1)
  assert.ok(s.reusedTokens >= (prompts - 1) * Math.floor(systemTokens / BLOCK) * BLOCK, `${s.reusedTokens} reused`)
  // Held once: what the tree holds is less than the prompts' own tokens beyond the system prompt plus one copy
  // of it (ten copies in the list the cache was).
  assert.ok(s.queriedTokens > 0 && s.tokens <= s.maxTokens)
  const ownTokens = s.queriedTokens - prompts * systemTokens
  assert.ok(s.tokens <= systemTokens + ownTokens, `${s.tokens} held for ${s.queriedTokens} queried`)
  assert.ok(s.tokens < s.queriedTokens / 2, `${s.tokens} held for ${s.queriedTokens} queried`)
})

test('bounded: least recently used spans go, a repeat still gives the same tokens', { skip }, async () => {
  const plain = await load(NAME)
  const small = await load(NAME, { prefixCache: { maxTokens: 4 * BLOCK } })
  const options = { maxNewTokens: 6, temperature: 0 }
  const prompts = ['alpha ', 'beta ', 'gamma ', 'delta '].map((w) => w.repeat(40))
  for (const p of prompts) await small.complete(p, options)
  const s = small.stats().prefixCache
  assert.ok(s.tokens <= 4 * BLOCK && s.evictions > 0, JSON.stringify(s))
  for (const p of prompts)
    assert.deepEqual((await small.complete(p, options)).tokens, (await plain.complete(p, options)).tokens)
  assert.equal(plain.stats().prefixCache, undefined, 'off unless asked for')
  const off = await load(NAME, { prefixCache: { maxTokens: 0 } })
  assert.equal(off.stats().prefixCache, undefined, 'maxTokens 0: off')
})

test('torch.serve turns it on (8192 tokens); prefixCache: {maxTokens: 0} turns it off', { skip }, async () => {
  const on = await torch.serve({ models: { lm: path.join(ROOT, NAME) }, port: 0 })
  const off = await torch.serve({
    models: { lm: { folder: path.join(ROOT, NAME), prefixCache: { maxTokens: 0 } } },
    port: 0,
  })
  try {
    assert.equal(on.models.lm.stats().prefixCache.maxTokens, 8192)
    assert.equal(off.models.lm.stats().prefixCache, undefined)
  } finally {
    await on.close()
    await off.close()
  }
})

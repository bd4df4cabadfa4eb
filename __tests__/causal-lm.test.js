'use strict'
// torch.text.CausalLM over the tiny random Llama (GQA), GPT-2, Qwen2 (biases, a sliding window),
// Qwen3 (q/k norms) and Mistral (sliding window) of models/make_lm_models.py (`npm run models`):
// greedy parity with transformers' generate, alone and batched, sampling, stops, streaming, abort,
// the sequence bound and option errors.
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const torch = require('..')

const ROOT = path.join(__dirname, '..', 'models', 'golden', 'lm')
// The install makes Llama and GPT-2 (the other suites read them too); Qwen2, Qwen3 and Mistral
// are test-only models that `npm test` makes first (tools/models.js --lazy).
const INSTALLED = ['llama-tiny', 'gpt2-tiny']
const NAMES = [...INSTALLED, 'qwen2-tiny', 'qwen3-tiny', 'mistral-tiny']
const have = (name) => fs.existsSync(path.join(ROOT, `${name}.golden.json`))
const skip = !INSTALLED.every(have) && 'the causal-LM goldens are missing (npm run models)'
const skipFor = (name) =>
  !have(name) &&
  `${name}'s golden is missing (${INSTALLED.includes(name) ? 'npm run models' : 'npm test makes it: node tools/models.js --lazy'})`
const golden = (name) => JSON.parse(fs.readFileSync(path.join(ROOT, `${name}.golden.json`), 'utf8'))
// Disposed after the tests (`using` needs Node 22+; this suite runs on Node 20 too).
const loaded = []
const load = async (name, options) => {
  const lm = await torch.text.CausalLM.load(path.join(ROOT, name), options)
  loaded.push(lm)
  return lm
}
test.after(() => loaded.forEach((lm) => lm.dispose()))

async function pieces(lm, prompt, options) {
  const out = []
  const it = lm.generate(prompt, options)
  for (;;) {
    const r = await it.next()
    if (r.done) return { pieces: out, result: r.value }
    out.push(r.value)
  }
}

test("greedy generation equals transformers' tokens and text (plain, unicode, one token, chat)", async (t) => {
  for (const name of NAMES) await t.test(name, { skip: skipFor(name) }, () => greedyParity(name))
})

async function greedyParity(name) {
  const g = golden(name)
  const lm = await load(name)
  for (const c of g.cases) {
    const prompt = c.prompt ?? c.messages
    const r = await lm.complete(prompt, { maxNewTokens: g.new_tokens, temperature: 0 })
    const at = c.output_ids.findIndex((t, i) => t !== r.tokens[i])
    if (at !== -1) {
      // Only where Python's own top-2 logits were (almost) tied.
      assert.ok(c.top2_gaps[at] < 1e-4, `${name} ${c.name}: token ${at} differs, top-2 gap ${c.top2_gaps[at]}`)
      continue
    }
    assert.deepEqual(r.tokens, c.output_ids, `${name} ${c.name}`)
    assert.equal(r.text, c.text_out, `${name} ${c.name}: text`)
    assert.equal(r.finishReason, 'length')
    assert.deepEqual(r.usage, { promptTokens: c.input_ids.length, completionTokens: c.output_ids.length })
  }
}

test(
  'an autotuned export lists the weights it never reads, and the load gives their pages back',
  { skip },
  async (t) => {
    // llama-tiny is exported with --autotune: the projection weights whose matmul the tuning gave
    // to Inductor's C++ GEMM template were packed into new constants and stay in the package
    // unread (docs/generation.md); which ones depends on the timings the tuning measured (14 of
    // 14 on a quiet 2-core EPYC, 12 on a loaded one), and the export proves each listed one
    // unread (NaN in it changes nothing). The goldens above run with them given back. Listing a
    // weight the program does read shows the pages really go: its bytes read as zeros, and the
    // tokens change.
    const manifest = JSON.parse(fs.readFileSync(path.join(ROOT, 'llama-tiny', 'manifest.json'), 'utf8'))
    assert.equal(manifest.one_row_layers, 0, '--autotune keeps its GEMM templates at one row too')
    assert.equal(manifest.one_row_kernel, null)
    assert.ok(manifest.unused_constants.length >= 1 && manifest.unused_constants.length <= 14)
    assert.ok(manifest.unused_constants.every((n) => /^base\.layers\.\d\.(self_attn|mlp)\.\w+_proj\.weight$/.test(n)))
    assert.deepEqual(
      JSON.parse(fs.readFileSync(path.join(ROOT, 'gpt2-tiny', 'manifest.json'), 'utf8')).unused_constants,
      [],
    )
    const dir = fs.mkdtempSync(path.join(require('node:os').tmpdir(), 'torch-node-unread-'))
    t.after(() => fs.rmSync(dir, { recursive: true, force: true }))
    for (const f of fs.readdirSync(path.join(ROOT, 'llama-tiny'))) {
      fs.copyFileSync(path.join(ROOT, 'llama-tiny', f), path.join(dir, f))
    }
    const wrong = { ...manifest, unused_constants: [...manifest.unused_constants, 'head.weight'] }
    fs.writeFileSync(path.join(dir, 'manifest.json'), JSON.stringify(wrong))
    const lm = await torch.text.CausalLM.load(dir)
    loaded.push(lm)
    const c = golden('llama-tiny').cases[0]
    const r = await lm.complete(c.prompt ?? c.messages, { maxNewTokens: 8, temperature: 0 })
    assert.notDeepEqual(r.tokens, c.output_ids.slice(0, 8))
  },
)

// A package compiled for an ISA this CPU lacks would stop with SIGILL in its first call
// (Inductor compiles for the export machine's vector ISA): the load refuses it in one line,
// naming what lacks (crates/core/src/cpu.rs). Here the manifest claims a flag no CPU has.
test('a folder compiled for flags this CPU lacks is refused at load, naming them', { skip }, async (t) => {
  const manifest = JSON.parse(fs.readFileSync(path.join(ROOT, 'gpt2-tiny', 'manifest.json'), 'utf8'))
  const cpuFlags = fs.existsSync('/proc/cpuinfo') ? fs.readFileSync('/proc/cpuinfo', 'utf8') : ''
  // What the export recorded holds on the CPU that made it (this one, for the fixtures).
  assert.ok(manifest.compiled_for.cpu_flags.length > 0 || manifest.compiled_for.isa === 'none')
  for (const flag of manifest.compiled_for.cpu_flags) assert.match(cpuFlags, new RegExp(`\\b${flag}\\b`), flag)
  const lm = await load('gpt2-tiny')
  assert.deepEqual(lm.program.compiledFor, {
    isa: manifest.compiled_for.isa,
    cpuFlags: manifest.compiled_for.cpu_flags,
  })
  assert.equal(lm.program.exportedOn, manifest.compiled_for.exported_on)
  assert.equal(lm.program.quantization, null)
  if (!cpuFlags) return t.skip('no /proc/cpuinfo: the check has no flags to read')
  const dir = fs.mkdtempSync(path.join(require('node:os').tmpdir(), 'torch-node-isa-'))
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }))
  for (const f of fs.readdirSync(path.join(ROOT, 'gpt2-tiny'))) {
    fs.symlinkSync(path.join(ROOT, 'gpt2-tiny', f), path.join(dir, f))
  }
  fs.rmSync(path.join(dir, 'manifest.json'))
  const compiled = { isa: 'avx512', cpu_flags: ['no_such_flag'], exported_on: 'Some Future CPU' }
  fs.writeFileSync(path.join(dir, 'manifest.json'), JSON.stringify({ ...manifest, compiled_for: compiled }))
  await assert.rejects(torch.text.CausalLM.load(dir), {
    code: 'ModelLoadError',
    message:
      /model\.pt2 was compiled for avx512 \(exported on Some Future CPU\) and this CPU lacks no_such_flag: export the model again/,
  })
})

test('a very long prompt is tokenized apart: the running generations do not wait for it', { skip }, async () => {
  const lm = await load('llama-tiny')
  let pieces = 0
  let refused = false
  // Generations one after another until the long prompt is refused: pieces flow all along.
  const run = (async () => {
    while (!refused) {
      for await (const piece of lm.generate('Once upon a time', { maxNewTokens: 200 })) {
        assert.equal(typeof piece.text, 'string')
        pieces++
      }
    }
  })()
  while (!pieces) await new Promise((r) => setTimeout(r, 5))
  // 2.4 MB: tokenizing it takes a second or more here; its length is only known then. Were it
  // tokenized inside a round, the engine would take no step meanwhile (at most the one running
  // as it came): count the engine's steps, not the pieces (those already sent would count).
  const before = lm.stats().steps
  const long = lm.complete('word '.repeat(480_000))
  await assert.rejects(long, { code: 'InvalidArg', message: /tokens; this model/ })
  const during = lm.stats().steps - before
  refused = true
  await run
  assert.ok(during >= 3, `${during} steps ran while the long prompt was tokenized`)
})

test('streamed pieces join into the full text and split no character', { skip }, async () => {
  const lm = await load('llama-tiny')
  for (const c of golden('llama-tiny').cases) {
    const { pieces: ps, result } = await pieces(lm, c.prompt ?? c.messages, { maxNewTokens: 64 })
    assert.equal(ps.map((p) => p.text).join(''), c.text_out, c.name)
    assert.deepEqual(
      ps.flatMap((p) => p.tokens),
      c.output_ids,
      c.name,
    )
    assert.equal(result.finishReason, 'length')
    // A replacement character only where the full decode has one (the random model emits
    // byte tokens that make no UTF-8): a piece never ends inside a character.
    const fffd = (s) => [...s].filter((ch) => ch === '\uFFFD').length
    assert.equal(
      ps.reduce((n, p) => n + fffd(p.text), 0),
      fffd(c.text_out),
      c.name,
    )
    for (const p of ps) assert.ok(!/[\uD800-\uDBFF]$/.test(p.text), 'no lone high surrogate at a piece end')
  }
})

test('the same seed gives the same tokens; another seed others', { skip }, async () => {
  const lm = await load('gpt2-tiny')
  const sample = (seed) =>
    lm.complete('Once upon a time', { temperature: 1, topK: 50, topP: 0.95, seed, maxNewTokens: 32 })
  const [a, b, c] = await Promise.all([sample(7), sample(7), sample(8)])
  assert.deepEqual(a.tokens, b.tokens)
  assert.equal(a.text, b.text)
  assert.notDeepEqual(a.tokens, c.tokens)
})

test('a stop string spanning tokens ends the text before it, finishReason stop', { skip }, async () => {
  const lm = await load('llama-tiny')
  const c = golden('llama-tiny').cases.find((x) => x.name === 'story')
  const { pieces: ps } = await pieces(lm, c.prompt, { maxNewTokens: 64 })
  const full = ps.map((p) => p.text).join('')
  // A boundary between two pieces whose 3 characters around it occur first there.
  let stop = null
  let at = 0
  for (let k = 0, end = 0; k < ps.length - 1; k++) {
    end += ps[k].text.length
    const s = full.slice(end - 1, end + 2)
    if (end >= 1 && s.length === 3 && !s.includes('\uFFFD') && full.indexOf(s) === end - 1) {
      ;[stop, at] = [s, end - 1]
      break
    }
  }
  assert.ok(stop, 'a stop string across pieces')
  const r = await lm.complete(c.prompt, { maxNewTokens: 64, stop: ['never-there', stop] })
  assert.equal(r.finishReason, 'stop')
  assert.equal(r.text, full.slice(0, at))
  const streamed = await pieces(lm, c.prompt, { maxNewTokens: 64, stop })
  assert.equal(streamed.pieces.map((p) => p.text).join(''), full.slice(0, at))
  assert.equal(streamed.result.finishReason, 'stop')
})

test('concurrent generations share each step and give the tokens each gives alone', async (t) => {
  for (const name of NAMES) await t.test(name, { skip: skipFor(name) }, () => sharedSteps(name))
})

async function sharedSteps(name) {
  const cases = golden(name).cases
  const alone = await load(name, { maxSequences: 1 })
  const options = { maxNewTokens: 40, temperature: 0 }
  const want = []
  for (const c of cases) want.push((await alone.complete(c.prompt ?? c.messages, options)).tokens)
  // Three rows for four calls: the fourth waits, then takes a row another leaves. Different
  // lengths (maxNewTokens) so that they leave at different steps.
  const lm = await load(name, { maxSequences: 3 })
  const got = await Promise.all(
    cases.map((c, i) => lm.complete(c.prompt ?? c.messages, { ...options, maxNewTokens: 40 - 7 * i })),
  )
  got.forEach((r, i) => {
    const expected = want[i].slice(0, 40 - 7 * i)
    const at = expected.findIndex((t, k) => t !== r.tokens[k])
    // Batched kernels may differ from batch 1 in the last bits: only an almost-tie may split.
    if (at !== -1) assert.ok(cases[i].top2_gaps[at] < 1e-4, `${name} ${cases[i].name}: token ${at} differs`)
    else assert.deepEqual(r.tokens, expected, `${name} ${cases[i].name}`)
  })
  const { steps, rows, prefills } = lm.stats()
  const tokens = got.reduce((n, r) => n + r.tokens.length, 0)
  assert.equal(prefills, cases.length)
  assert.equal(rows, tokens - cases.length, 'each token but the first of each comes from one row of a step')
  // How many steps they shared depends on when each call reached the engine (the Rust test
  // crates/core/src/generate/lm.rs checks a fixed schedule); that they shared some does not.
  assert.ok(steps < rows, `${steps} steps for ${rows} rows: the calls shared steps`)
}

test('abort mid-stream: finishReason aborted, the next request is served at once', { skip }, async () => {
  const lm = await load('llama-tiny', { maxSequences: 1 })
  const controller = new AbortController()
  const it = lm.generate('Once upon a time', { maxNewTokens: 200, signal: controller.signal })
  const first = await it.next()
  assert.equal(first.done, false)
  controller.abort()
  const end = await it.next()
  assert.deepEqual([end.done, end.value.finishReason], [true, 'aborted'])
  assert.equal(lm.stats().active, 0, 'the sequence slot is free')
  const t0 = performance.now()
  const next = await lm.complete('a', { maxNewTokens: 4 })
  assert.equal(next.tokens.length, 4)
  assert.ok(performance.now() - t0 < 5000)

  // complete() keeps what came before the abort; timeoutMs aborts the same way.
  const timed = await lm.complete('Once upon a time', { maxNewTokens: 200, timeoutMs: 1 })
  assert.equal(timed.finishReason, 'aborted')
  assert.ok(timed.tokens.length < 200)
  // An already aborted signal: nothing runs.
  const none = await lm.complete('a', { signal: AbortSignal.abort() })
  assert.deepEqual([none.finishReason, none.text], ['aborted', ''])
  // Breaking out of the loop frees the slot too.
  const broken = lm.generate('a', { maxNewTokens: 100 })
  await broken.next()
  await broken.return(undefined) // what `break` in a for-await loop calls
  assert.equal(lm.stats().active, 0)
})

test('past maxSequences calls wait, then QueueFull past maxQueue', { skip }, async () => {
  const lm = await load('llama-tiny', { maxSequences: 1, maxQueue: 1 })
  const busy = lm.generate('Once upon a time', { maxNewTokens: 40 })
  await busy.next()
  const waiting = lm.complete('a', { maxNewTokens: 3 })
  await assert.rejects(lm.complete('b', { maxNewTokens: 3 }), { code: 'QueueFull' })
  assert.deepEqual(
    { ...lm.stats(), steps: 0, rows: 0, prefills: 0 },
    { active: 1, queued: 1, maxSequences: 1, steps: 0, rows: 0, prefills: 0 },
  )
  while (!(await busy.next()).done); // drains, then the waiting call runs
  assert.equal((await waiting).tokens.length, 3)
})

test('bad arguments and options are coded errors', { skip }, async () => {
  await assert.rejects(load('llama-tiny', { maxSequences: 0 }), { code: 'InvalidArg', message: /maxSequences/ })
  await assert.rejects(load('llama-tiny', { dtype: 'float16' }), { code: 'InvalidArg', message: /exported as float32/ })
  await assert.rejects(torch.text.CausalLM.load(path.join(ROOT, 'nope')), { code: 'ModelLoadError' })
  const lm = await load('llama-tiny')
  assert.throws(() => lm.generate('x', { temprature: 1 }), {
    code: 'InvalidArg',
    message: /unknown option 'temprature'/,
  })
  assert.throws(() => lm.generate(5), { code: 'InvalidArg', message: /prompt/ })
  assert.throws(() => lm.generate('x', { signal: 'now' }), { code: 'InvalidArg', message: /signal/ })
  assert.throws(() => lm.generate('x', { temperature: NaN }), { code: 'InvalidArg', message: /temperature/ })
  for (const [options, says] of [
    [{ maxNewTokens: 0 }, /maxNewTokens/],
    [{ topP: 0 }, /topP/],
    [{ stop: [1] }, /stop/],
    [{ timeoutMs: -1 }, /timeoutMs/],
  ]) {
    await assert.rejects(lm.complete('x', options), { code: 'InvalidArg', message: says })
  }
  await assert.rejects(lm.complete([{ role: 'user' }]), { code: 'InvalidArg' })
  lm.dispose()
  assert.throws(() => lm.generate('x'), { code: 'Disposed' })
})

test(
  'the prefix cache: the same greedy tokens with and without it; shared starts reused; LRU eviction in stats',
  { skip },
  async () => {
    const system = 'You are a helpful assistant who answers briefly and kindly, in plain words. '.repeat(3)
    const prompts = ['Once upon a time', 'The quick brown fox', 'Hello there'].map((p) => system + p)
    const plain = await load('llama-tiny')
    const cached = await load('llama-tiny', { prefixCache: { maxTokens: 1000 } })
    const options = { maxNewTokens: 24, temperature: 0 }
    const lengths = []
    for (const p of prompts) {
      const want = await plain.complete(p, options)
      const got = await cached.complete(p, options)
      assert.deepEqual(got.tokens, want.tokens, p)
      assert.equal(got.text, want.text)
      lengths.push(want.usage.promptTokens)
    }
    const s = cached.stats().prefixCache
    assert.equal(s.maxTokens, 1000)
    assert.equal(s.hits, 2, 'the 2nd and 3rd prompts reused the 1st one’s start')
    assert.ok(s.reusedTokens > 2 * 20 && s.reusedTokens < lengths[1] + lengths[2], `${s.reusedTokens} tokens reused`)
    // A radix tree of 16-token blocks: the shared start is held once, whole blocks only.
    assert.equal(s.evictions, 0)
    assert.ok(s.tokens % 16 === 0 && s.tokens < lengths[0] + lengths[1] + lengths[2] - 40, `${s.tokens} held`)
    assert.deepEqual([s.queries, s.queriedTokens], [3, lengths[0] + lengths[1] + lengths[2]])
    assert.equal(plain.stats().prefixCache, undefined, 'off unless asked for')

    // Room for one prompt: each new one's own blocks evict the least recently used; a repeat still gives the
    // same tokens.
    const small = await load('llama-tiny', { prefixCache: { maxTokens: Math.max(...lengths) } })
    for (const p of prompts) await small.complete(p, options)
    const again = await small.complete(prompts[0], options)
    assert.deepEqual(again.tokens, (await plain.complete(prompts[0], options)).tokens)
    const e = small.stats().prefixCache
    assert.ok(e.tokens <= e.maxTokens && e.evictions > 0, JSON.stringify(e))
    assert.equal(e.hits, 3, 'the shared start, held while each prompt runs, is never what makes room')

    await assert.rejects(load('llama-tiny', { prefixCache: { maxTokenz: 5 } }), {
      code: 'InvalidArg',
      message: /prefixCache: unknown option 'maxTokenz'/,
    })
    await assert.rejects(load('llama-tiny', { prefixCache: 5 }), { code: 'InvalidArg', message: /prefixCache/ })
  },
)

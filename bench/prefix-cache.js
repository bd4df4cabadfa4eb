'use strict'
// The prefix cache over chats that share one long system prompt: CHATS chats × TURNS turns, each
// turn the whole history again (as a chat client sends it), one request at a time; later turns'
// time to first token with the cache on and off, and the tokens it holds (the system prompt once).
//
//   node bench/prefix-cache.js FOLDER [--chats 10] [--turns 3] [--system-tokens 1000] [--new 16]
//
// Results: docs/generation.md#prefix-cache-measured.
const { parseArgs } = require('node:util')
const torch = require('..')

const { values: v, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    chats: { type: 'string', default: '10' },
    turns: { type: 'string', default: '3' },
    'system-tokens': { type: 'string', default: '1000' },
    new: { type: 'string', default: '16' },
    budget: { type: 'string', default: '8192' },
  },
})
const folder = positionals[0]
if (!folder) {
  console.error('usage: node bench/prefix-cache.js FOLDER [--chats N] [--turns N] [--system-tokens N] [--new N]')
  process.exit(2)
}
const [chats, turns, systemTokens, newTokens, budget] = [v.chats, v.turns, v['system-tokens'], v.new, v.budget].map(
  Number,
)

/** A system prompt of about `n` tokens (rules of a made-up help desk). */
function systemPrompt(tokenizer, n) {
  const rules = []
  for (let i = 1; ; i++) {
    rules.push(`Rule ${i}: when a customer asks about order ${1000 + i}, answer politely and briefly.`)
    const text = `You are the help desk of a bookshop. ${rules.join(' ')}`
    if (tokenizer.encode(text).ids.length >= n) return text
  }
}

async function firstToken(lm, messages) {
  const started = process.hrtime.bigint()
  let ttft = null
  let text = ''
  for await (const piece of lm.generate(messages, { maxNewTokens: newTokens, temperature: 0 })) {
    ttft ??= Number(process.hrtime.bigint() - started) / 1e9
    text += piece.text
  }
  return { ttft, text }
}

async function run(prefixTokens) {
  const lm = await torch.text.CausalLM.load(folder, prefixTokens ? { prefixCache: { maxTokens: prefixTokens } } : {})
  const tokenizer = torch.text.Tokenizer.fromFile(folder)
  const system = systemPrompt(tokenizer, systemTokens)
  const histories = Array.from({ length: chats }, () => [{ role: 'system', content: system }])
  const byTurn = Array.from({ length: turns }, () => [])
  const replies = []
  for (let t = 0; t < turns; t++) {
    for (let c = 0; c < chats; c++) {
      histories[c].push({ role: 'user', content: `Chat ${c}, question ${t}: where is order ${1000 + c + t}?` })
      const { ttft, text } = await firstToken(lm, histories[c])
      histories[c].push({ role: 'assistant', content: text })
      byTurn[t].push(ttft)
      replies.push(text)
    }
  }
  const stats = lm.stats().prefixCache
  lm.dispose()
  return { byTurn, replies, stats, systemTokens: tokenizer.encode(system).ids.length }
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]

async function main() {
  const off = await run(0)
  const on = await run(budget)
  const same = on.replies.every((r, i) => r === off.replies[i])
  console.log(
    `${chats} chats × ${turns} turns, system prompt ${on.systemTokens} tokens, ${newTokens} new tokens a turn`,
  )
  for (let t = 0; t < turns; t++) {
    const [a, b] = [median(off.byTurn[t]), median(on.byTurn[t])]
    console.log(
      `turn ${t + 1}: time to first token (median) off ${a.toFixed(3)} s, on ${b.toFixed(3)} s: ${(a / b).toFixed(1)}×`,
    )
  }
  const later = (r) => median(r.byTurn.slice(1).flat().concat(r.byTurn[0].slice(1)))
  console.log(
    `every request but the very first: off ${later(off).toFixed(3)} s, on ${later(on).toFixed(3)} s: ${(later(off) / later(on)).toFixed(1)}×`,
  )
  const s = on.stats
  console.log(
    `cache: ${s.tokens} tokens held in ${s.entries} spans (budget ${s.maxTokens}); ${s.queriedTokens} prompt tokens looked up, ` +
      `${s.reusedTokens} reused in ${s.hits} of ${s.queries} prompts; ${s.evictions} spans evicted`,
  )
  console.log(`greedy replies equal with and without the cache: ${same}`)
  if (!same) process.exitCode = 1
}

main().catch((e) => {
  console.error(e)
  process.exit(1)
})

'use strict'
// The prefix cache over chats that share one long system prompt (issue 52's bench): CHATS chats ×
// TURNS turns, each turn the whole history again (as a chat client sends it), one request at a
// time; later turns' time to first token with the cache on and off against the target (≥ 5×), and
// the tokens it holds against the system prompt held once. `npm run bench:generate` runs it too.
//
//   node bench/prefix-cache.js FOLDER [--chats 10] [--turns 8] [--system-tokens 1000] [--new 16]
//        [--off-chats N] [--budget 8192]
//
// --off-chats N: the cache-off run takes the first N chats only (default: all). Without the cache
// a turn's time is its whole prompt's, the same in every chat, so fewer chats measure it as well
// at a fraction of the time; the greedy replies are compared over those N chats.
// The system prompt is cut to fit the folder's context (said in the output).
// Results: docs/generation.md#prefix-cache-measured.
const fs = require('node:fs')
const path = require('node:path')
const { parseArgs } = require('node:util')
const torch = require('..')

/** What a later turn's time to first token must gain with the cache (issue 52). */
const TARGET = 5

/** A system prompt of about `n` tokens, at most `max` (rules of a made-up help desk). */
function systemPrompt(tokenizer, n, max) {
  const rules = []
  let text = 'You are the help desk of a bookshop.'
  for (let i = 1; ; i++) {
    rules.push(`Rule ${i}: when a customer asks about order ${1000 + i}, answer politely and briefly.`)
    const longer = `You are the help desk of a bookshop. ${rules.join(' ')}`
    const tokens = tokenizer.encode(longer).ids.length
    if (tokens > max) return text
    text = longer
    if (tokens >= n) return text
  }
}

/** Chat c's question of turn t. @param {number} c @param {number} t */
const question = (c, t) => `Chat ${c}, question ${t}: where is order ${1000 + c + t}?`

/** One request: its time to first token, its reply and its prompt's tokens. */
async function firstToken(lm, messages, newTokens) {
  const started = process.hrtime.bigint()
  let ttft = null
  let text = ''
  const it = lm.generate(messages, { maxNewTokens: newTokens, temperature: 0 })
  for (;;) {
    const r = await it.next()
    if (r.done) return { ttft, text, promptTokens: r.value.usage.promptTokens }
    ttft ??= Number(process.hrtime.bigint() - started) / 1e9
    text += r.value.text
  }
}

/**
 * The chats, with the prefix cache of `prefixTokens` (0: off), over the first `chats` chats.
 * @returns {Promise<{ byTurn: number[][]; replies: string[][]; stats: any; lastPrompt: number[] }>}
 */
async function run(folder, { chats, turns, system, newTokens, prefixTokens }) {
  const lm = await torch.text.CausalLM.load(folder, prefixTokens ? { prefixCache: { maxTokens: prefixTokens } } : {})
  try {
    const histories = Array.from({ length: chats }, () => [{ role: 'system', content: system }])
    const byTurn = Array.from({ length: turns }, () => [])
    const replies = Array.from({ length: chats }, () => [])
    const lastPrompt = []
    for (let t = 0; t < turns; t++) {
      for (let c = 0; c < chats; c++) {
        histories[c].push({ role: 'user', content: question(c, t) })
        const { ttft, text, promptTokens } = await firstToken(lm, histories[c], newTokens)
        histories[c].push({ role: 'assistant', content: text })
        byTurn[t].push(ttft)
        replies[c].push(text)
        lastPrompt[c] = promptTokens
      }
    }
    return { byTurn, replies, stats: lm.stats().prefixCache, lastPrompt }
  } finally {
    lm.dispose()
  }
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]

/**
 * Runs the bench; returns the lines it prints and whether the targets were met.
 * @param {string} folder
 * @param {{ chats?: number; turns?: number; systemTokens?: number; newTokens?: number; offChats?: number;
 *   budget?: number }} [o]
 */
async function prefixCacheBench(folder, o = {}) {
  const { chats = 10, turns = 8, newTokens = 16, budget = 8192 } = o
  const offChats = Math.min(o.offChats ?? chats, chats)
  const tokenizer = torch.text.Tokenizer.fromFile(folder)
  // Room for the turns: each adds a question, a reply and the template's markers.
  const maxContext = JSON.parse(fs.readFileSync(path.join(folder, 'manifest.json'), 'utf8')).max_context
  const wanted = o.systemTokens ?? 1000
  const perTurn = tokenizer.encode(question(chats, turns)).ids.length + newTokens + 16
  const room = maxContext - turns * perTurn - 64
  const systemTokens = Math.min(wanted, room)
  const system = systemPrompt(tokenizer, systemTokens, room)
  const held = tokenizer.encode(system).ids.length
  const common = { turns, system, newTokens }
  const off = await run(folder, { ...common, chats: offChats, prefixTokens: 0 })
  const on = await run(folder, { ...common, chats, prefixTokens: budget })
  const same = off.replies.every((r, c) => r.every((text, t) => text === on.replies[c][t]))
  const lines = []
  lines.push(
    `${chats} chats × ${turns} turns over a ${held}-token system prompt${systemTokens < wanted ? ` (cut from ${wanted} to fit a ${maxContext}-token context)` : ''}, ` +
      `${newTokens} new tokens a turn, one request at a time; cache off over the first ${offChats} chats`,
  )
  for (let t = 0; t < turns; t++) {
    const [a, b] = [median(off.byTurn[t]), median(on.byTurn[t])]
    lines.push(
      `turn ${t + 1}: time to first token (median) off ${a.toFixed(3)} s, on ${b.toFixed(3)} s: ${(a / b).toFixed(1)}×`,
    )
  }
  // Later turns: 2 to TURNS (turn 1 of chats after the first reuses the system prompt too, shown above).
  const later = (r) => median(r.byTurn.slice(1).flat())
  const gain = later(off) / later(on)
  lines.push(
    `later turns (2 to ${turns}), median: off ${later(off).toFixed(3)} s, on ${later(on).toFixed(3)} s: ` +
      `${gain.toFixed(1)}× (target ≥ ${TARGET}×: ${gain >= TARGET ? 'met' : 'NOT met'})`,
  )
  const s = on.stats
  // Each chat's own tokens: its last prompt past the system prompt's; held once, the cache holds
  // the system prompt plus those (each chat's end rounded to a 16-token block, its last reply
  // perhaps kept); a copy a chat would be ≥ chats × held.
  const own = on.lastPrompt.reduce((sum, n) => sum + n - held, 0)
  const once = s.tokens <= held + own + (16 + newTokens) * chats && s.tokens < 2 * held + own
  lines.push(
    `cache: ${s.tokens} tokens held in ${s.entries} spans (budget ${s.maxTokens}): the system prompt's ${held} + ` +
      `the chats' own ${own}${s.evictions ? `, ${s.evictions} spans evicted` : ''}; system prompt held once: ${once ? 'yes' : 'NO'} ` +
      `(a copy a chat: ≥ ${chats * held}); ${s.reusedTokens} of ${s.queriedTokens} prompt tokens reused in ${s.hits} of ${s.queries} prompts`,
  )
  lines.push(`greedy replies equal with and without the cache (${offChats} chats): ${same}`)
  return { lines, ok: same && gain >= TARGET && once }
}

async function main() {
  const { values: v, positionals } = parseArgs({
    allowPositionals: true,
    options: {
      chats: { type: 'string', default: '10' },
      turns: { type: 'string', default: '8' },
      'system-tokens': { type: 'string', default: '1000' },
      new: { type: 'string', default: '16' },
      'off-chats': { type: 'string' },
      budget: { type: 'string', default: '8192' },
    },
  })
  const folder = positionals[0]
  if (!folder) {
    console.error(
      'usage: node bench/prefix-cache.js FOLDER [--chats N] [--turns N] [--system-tokens N] [--new N] [--off-chats N] [--budget TOKENS]',
    )
    process.exit(2)
  }
  const { lines, ok } = await prefixCacheBench(folder, {
    chats: Number(v.chats),
    turns: Number(v.turns),
    systemTokens: Number(v['system-tokens']),
    newTokens: Number(v.new),
    offChats: v['off-chats'] === undefined ? undefined : Number(v['off-chats']),
    budget: Number(v.budget),
  })
  for (const line of lines) console.log(line)
  if (!ok) process.exitCode = 1
}

module.exports = { prefixCacheBench }

if (require.main === module) {
  main().catch((e) => {
    console.error(e)
    process.exit(1)
  })
}

'use strict'
// Hostile lifetimes for torch.text.CausalLM's batched engine and torch.text.SentenceEncoder, on
// the Node line running the suite: dispose() while generations stream or wait, aborts of one
// row among others, process.exit() and throws mid-generation, workers terminated
// mid-generation, calls past maxQueue, hostile prompts and options, an encoder disposed under
// its calls. Each case runs in a child process with a timeout, so a hang, an abort or a panic
// fails its test instead of the suite.
const { describe, test } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { nodeChild, exitLimit } = require('./helpers')

const ROOT = path.join(__dirname, '..')
const LM = path.join(ROOT, 'models', 'golden', 'lm', 'llama-tiny')
const ENC = path.join(ROOT, 'models', 'golden', 'text', 'minilm')
const skip =
  (!fs.existsSync(path.join(LM, 'model.pt2')) || !fs.existsSync(path.join(ENC, 'manifest.json'))) &&
  'the tiny text models are missing (npm run models)'

/**
 * Runs `source` in a child Node of this line, with `torch`, `LM` and `ENC` in scope. Resolves to
 * `{code, signal, stdout, stderr, out, lastWorkMs}`: `out` is the JSON of its last `OUT ` line;
 * `lastWorkMs`, how long it lived after printing `LAST_WORK`. Killed after `timeoutMs`.
 */
function child(source, { timeoutMs = 30_000 } = {}) {
  const code = [
    `const torch = require(${JSON.stringify(ROOT)})`,
    `const LM = ${JSON.stringify(LM)}`,
    `const ENC = ${JSON.stringify(ENC)}`,
    `const out = (v) => console.log('OUT ' + JSON.stringify(v))`,
    source,
  ].join('\n')
  return nodeChild(code, { timeoutMs }).then((r) => {
    const line = r.stdout
      .split('\n')
      .reverse()
      .find((l) => l.startsWith('OUT '))
    return { ...r, out: line === undefined ? undefined : JSON.parse(line.slice(4)) }
  })
}

const info = (r) =>
  `code ${r.code} signal ${r.signal}\nstdout: ${r.stdout.slice(-2000)}\nstderr: ${r.stderr.slice(-2000)}`

/**
 * A clean end: `code`, no signal (a hang, a crash), no panic or fatal text, gone within `withinMs`
 * of LAST_WORK plus the machine's own exit time (`exitLimit`).
 */
async function assertEnded(r, { code = 0, withinMs = 2000 } = {}) {
  assert.equal(r.signal, null, `killed (a hang, or a crash): ${info(r)}`)
  assert.equal(r.code, code, info(r))
  assert.doesNotMatch(r.stderr, /panicked|FATAL|Check failed|Segmentation|Aborted|core dumped/, info(r))
  const limit = await exitLimit(withinMs)
  if (r.lastWorkMs !== null) {
    assert.ok(r.lastWorkMs < limit, `exited ${r.lastWorkMs} ms after its last work (limit ${limit})\n${info(r)}`)
  }
}

describe(`CausalLM under hostile lifetimes on Node ${process.versions.node}`, { skip }, () => {
  test('dispose() while 1, 4 and maxSequences + 2 generations stream, and with calls queued', async () => {
    const r = await child(`
      ;(async () => {
        const results = {}
        for (const n of [1, 4, 6, 10]) {
          const lm = await torch.text.CausalLM.load(LM, { maxSequences: 4, maxQueue: 6 })
          // dispose() once every slot's generation has streamed a piece (an observable state,
          // not a piece count that a fast stream could reach before the last one joined).
          const streaming = new Set()
          const runs = Array.from({ length: n }, async (_, i) => {
            const it = lm.generate('Once upon a time ' + i, { maxNewTokens: 200 })
            try {
              for (;;) {
                const s = await it.next()
                if (s.done) return s.value.finishReason
                streaming.add(i)
                if (streaming.size === Math.min(n, 4) && !lm.isDisposed) lm.dispose()
              }
            } catch (e) {
              return e.code
            }
          })
          const ends = await Promise.all(runs)
          lm.dispose() // a second time: nothing
          let sync
          try { lm.generate('x') } catch (e) { sync = e.code }
          const later = await lm.complete('x').then(() => 'resolved', (e) => e.code)
          results[n] = { ends, sync, later, disposed: lm.isDisposed, active: lm.stats().active }
        }
        out(results)
      })()`)
    await assertEnded(r)
    const four = ['aborted', 'aborted', 'aborted', 'aborted']
    assert.deepEqual(r.out, {
      1: { ends: ['aborted'], sync: 'Disposed', later: 'Disposed', disposed: true, active: 0 },
      4: { ends: four, sync: 'Disposed', later: 'Disposed', disposed: true, active: 0 },
      6: { ends: [...four, 'Disposed', 'Disposed'], sync: 'Disposed', later: 'Disposed', disposed: true, active: 0 },
      // 4 generate, 6 wait: each waiting call is Disposed (none QueueFull, none left hanging).
      10: {
        ends: [...four, ...Array(6).fill('Disposed')],
        sync: 'Disposed',
        later: 'Disposed',
        disposed: true,
        active: 0,
      },
    })
  })

  test('a generator made before dispose() and first read after it is Disposed, even with every slot held', async () => {
    // The slots are held by consumers that read one piece and then neither read nor return:
    // their generators never reach their `finally`, so no slot ever frees.
    const r = await child(`
      ;(async () => {
        const lm = await torch.text.CausalLM.load(LM, { maxSequences: 2 })
        const held = [lm.generate('a', { maxNewTokens: 100 }), lm.generate('b', { maxNewTokens: 100 })]
        await Promise.all(held.map((g) => g.next()))
        const late = lm.generate('c', { maxNewTokens: 4 })
        lm.dispose()
        const timer = setTimeout(() => { out('hung'); process.exit(0) }, 5000)
        const code = await late.next().then(() => 'resolved', (e) => e.code)
        clearTimeout(timer)
        out(code)
      })()`)
    await assertEnded(r)
    assert.equal(r.out, 'Disposed')
  })

  test("aborting one row leaves the others' greedy tokens as alone; aborts before start, right after join, in the queue", async () => {
    const r = await child(`
      ;(async () => {
        const lm = await torch.text.CausalLM.load(LM, { maxSequences: 3, maxQueue: 16 })
        const prompts = ['Once upon a time', 'Hello there my friend', 'The quick brown fox', 'A B C D']
        const alone = []
        for (const p of prompts) alone.push((await lm.complete(p, { maxNewTokens: 40 })).tokens)
        const ac = new AbortController()
        const rows = await Promise.all(prompts.map(async (p, i) => {
          const tokens = []
          const it = lm.generate(p, { maxNewTokens: 40, signal: i === 1 ? ac.signal : undefined })
          for (;;) {
            const s = await it.next()
            if (s.done) return { finish: s.value.finishReason, same: JSON.stringify(tokens) === JSON.stringify(alone[i]), n: tokens.length }
            tokens.push(...s.value.tokens)
            if (i === 1 && tokens.length >= 5) ac.abort()
          }
        }))
        const before = new AbortController()
        before.abort()
        const pre = await lm.complete('x', { signal: before.signal })
        const joined = new AbortController()
        const afterJoin = lm.complete('Once upon a time', { signal: joined.signal, maxNewTokens: 200 })
        queueMicrotask(() => joined.abort())
        const queued = await Promise.all(Array.from({ length: 10 }, (_, i) =>
          lm.complete('p' + i, { timeoutMs: 20 + i, maxNewTokens: 250 }).then((c) => c.finishReason, (e) => e.code)))
        const again = (await lm.complete(prompts[0], { maxNewTokens: 40 })).tokens
        out({
          rows: rows.map((x, i) => (i === 1 ? [x.finish, x.n >= 5 && x.n < 40] : [x.finish, x.same])),
          pre: [pre.finishReason, pre.tokens.length],
          afterJoin: (await afterJoin).finishReason,
          queued: [...new Set(queued)],
          again: JSON.stringify(again) === JSON.stringify(alone[0]),
          active: lm.stats().active,
          queuedNow: lm.stats().queued,
        })
        lm.dispose()
      })()`)
    await assertEnded(r)
    assert.deepEqual(r.out, {
      rows: [
        ['length', true],
        ['aborted', true],
        ['length', true],
        ['length', true],
      ],
      pre: ['aborted', 0],
      afterJoin: 'aborted',
      queued: ['aborted'],
      again: true,
      active: 0,
      queuedNow: 0,
    })
  })

  test('refused prompts free their slot; ids past u32 and lone surrogates are InvalidArg; a huge timeoutMs waits', async () => {
    const r = await child(`
      ;(async () => {
        const lm = await torch.text.CausalLM.load(LM, { maxSequences: 2, maxQueue: 2 })
        const codes = {}
        const bad = {
          holes: [1, , 3],
          sparseMessages: [{ role: 'user', content: 'x' }, , ],
          id2pow32: [2 ** 32 + 5],
          id2pow53: [2 ** 53],
          loneHigh: 'ab\\uD800cd',
          loneLow: [{ role: 'user', content: '\\uDC00' }],
          tooLong: 'hello '.repeat(1000),
          tooLongIds: Array(256).fill(5),
        }
        for (const [k, p] of Object.entries(bad)) {
          codes[k] = await lm.complete(p, { maxNewTokens: 2 }).then((c) => 'resolved ' + JSON.stringify(c.tokens), (e) => e.code)
        }
        codes.stopLone = await lm.complete('x', { stop: ['ok', '\\uD800'] }).then(() => 'resolved', (e) => e.code + ' ' + /stop\\[1\\]: a lone surrogate/.test(e.message))
        let warned = false
        process.on('warning', () => { warned = true })
        const long = await lm.complete('Once', { timeoutMs: 2 ** 40, maxNewTokens: 3 })
        const ok = await lm.complete('Once upon a time', { maxNewTokens: 3 })
        out({ codes, long: [long.finishReason, long.tokens.length, warned], ok: ok.finishReason, active: lm.stats().active })
        lm.dispose()
      })()`)
    await assertEnded(r)
    assert.deepEqual(r.out, {
      codes: {
        holes: 'InvalidArg',
        sparseMessages: 'InvalidArg',
        id2pow32: 'InvalidArg',
        id2pow53: 'InvalidArg',
        loneHigh: 'InvalidArg',
        loneLow: 'InvalidArg',
        tooLong: 'InvalidArg',
        tooLongIds: 'InvalidArg',
        stopLone: 'InvalidArg true',
      },
      long: ['length', 3, false],
      ok: 'length',
      active: 0,
    })
  })

  test('3,000 concurrent calls: maxSequences + maxQueue run, the rest are QueueFull; hostile options and prompts', async () => {
    const r = await child(`
      ;(async () => {
        const lm = await torch.text.CausalLM.load(LM, { maxSequences: 4, maxQueue: 16 })
        const all = await Promise.all(Array.from({ length: 3000 }, (_, i) =>
          lm.complete('p' + (i % 7), { maxNewTokens: 4 }).then((c) => c.finishReason, (e) => e.code)))
        const counts = {}
        for (const c of all) counts[c] = (counts[c] || 0) + 1
        const mark = new Error('getter')
        const threw = (f) => { try { f(); return 'no throw' } catch (e) { return e === mark ? 'own error' : e.code } }
        const hostile = {
          getter: threw(() => lm.generate('x', { get maxNewTokens() { throw mark } })),
          proxyOptions: threw(() => lm.generate('x', new Proxy({}, { ownKeys() { throw mark } }))),
          proxyPrompt: threw(() => lm.generate(new Proxy(['a'], { get(t, k) { if (k === 'length') return 1; throw mark } }))),
        }
        // A Proxy of ids that answers differently on a second read is read once.
        let reads = 0
        const shifty = new Proxy([1, 2, 3], { get(t, k) { if (k === '0') reads++; return k === '0' && reads > 1 ? 'x' : t[k] } })
        const proxied = await lm.complete(shifty, { maxNewTokens: 2 }).then((c) => [c.finishReason, c.usage.promptTokens], (e) => e.code)
        out({ counts, hostile, proxied, stats: lm.stats().active })
        lm.dispose()
      })()`)
    await assertEnded(r)
    assert.deepEqual(r.out, {
      counts: { length: 20, QueueFull: 2980 },
      hostile: { getter: 'own error', proxyOptions: 'own error', proxyPrompt: 'own error' },
      proxied: ['length', 3],
      stats: 0,
    })
  })

  test('consumers that break after one piece or never iterate free their rows; the script then ends', async () => {
    const r = await child(`
      ;(async () => {
        const lm = await torch.text.CausalLM.load(LM, { maxSequences: 4 })
        lm.generate('never read', { maxNewTokens: 250 }) // its body never runs: no slot, no steps
        for (let i = 0; i < 3; i++) {
          for await (const piece of lm.generate('Once ' + i, { maxNewTokens: 250 })) break
        }
        await new Promise((resolve) => setTimeout(resolve, 100))
        const a = lm.stats()
        await new Promise((resolve) => setTimeout(resolve, 300))
        const b = lm.stats()
        console.log('LAST_WORK')
        // Not disposed: the script just ends with the model loaded.
        out({ active: b.active, stepsMoved: b.steps - a.steps, rows: b.rows < 3 * 250 })
      })()`)
    await assertEnded(r, { withinMs: 3000 })
    assert.deepEqual(r.out, { active: 0, stepsMoved: 0, rows: true })
  })

  test('process.exit() mid-generation exits at once with its code; so does a throw inside a for-await consumer', async () => {
    const script = (end) => `
      ;(async () => {
        const lm = await torch.text.CausalLM.load(LM, { maxSequences: 4 })
        let n = 0
        for (let i = 0; i < 6; i++) {
          ;(async () => {
            for await (const piece of lm.generate('Once ' + i, { maxNewTokens: 250 })) {
              if (++n === 5) { console.log('LAST_WORK'); ${end} }
            }
          })()
        }
      })()`
    const exited = await child(script('process.exit(7)'))
    await assertEnded(exited, { code: 7 })
    const threw = await child(script("throw new Error('consumer threw')"))
    await assertEnded(threw, { code: 1 })
    assert.match(threw.stderr, /consumer threw/)
    // A plain end: the generations keep the process alive until they end, then it exits 0.
    const ended = await child(`
      ;(async () => {
        const lm = await torch.text.CausalLM.load(LM, { maxSequences: 2 })
        for (let i = 0; i < 3; i++) lm.complete('Once ' + i, { maxNewTokens: 30 }).then((c) => console.log('DONE', c.tokens.length))
      })()`)
    await assertEnded(ended)
    assert.equal(ended.stdout.match(/DONE 30/g)?.length, 3, info(ended))
  })

  test("process.exit() mid-step prints no libtorch error: exit() waits for the running step (executor's drain_at_exit)", async () => {
    const r = await child(`
      ;(async () => {
        const lm = await torch.text.CausalLM.load(LM, { maxSequences: 4 })
        for (let i = 0; i < 4; i++) lm.complete('Once ' + i, { maxNewTokens: 250 })
        setTimeout(() => process.exit(0), 300)
      })()`)
    await assertEnded(r)
    assert.doesNotMatch(r.stderr, /API call failed|Error/, info(r))
  })

  test('workers terminated mid-generation and mid-encode; the main thread generates on, the same tokens', async () => {
    const r = await child(
      `
      const { Worker } = require('node:worker_threads')
      const src = \`
        const { parentPort } = require('node:worker_threads')
        const torch = require(\${JSON.stringify(${JSON.stringify(ROOT)})})
        ;(async () => {
          const lm = await torch.text.CausalLM.load(\${JSON.stringify(LM)}, { maxSequences: 4 })
          const enc = await torch.text.SentenceEncoder.load(\${JSON.stringify(ENC)})
          let n = 0
          for (let i = 0; i < 6; i++) (async () => {
            for await (const p of lm.generate('Once ' + i, { maxNewTokens: 250 })) if (++n === 3) parentPort.postMessage('go')
          })().catch(() => {})
          for (let i = 0; i < 4; i++) enc.encode(['a b c '.repeat(50), 'hello']).catch(() => {})
        })()\`
      ;(async () => {
        const lm = await torch.text.CausalLM.load(LM, { maxSequences: 4 })
        const alone = (await lm.complete('Once upon a time', { maxNewTokens: 40 })).tokens
        const during = Promise.all([0, 1, 2].map(() => lm.complete('Once upon a time', { maxNewTokens: 40 })))
        const codes = await Promise.all([0, 1, 2].map(() => new Promise((resolve, reject) => {
          const w = new Worker(src, { eval: true })
          w.on('error', reject)
          w.once('message', () => w.terminate().then(resolve))
        })))
        const after = await Promise.all([0, 1, 2].map(() => lm.complete('Once upon a time', { maxNewTokens: 40 })))
        const same = [...(await during), ...after].every((c) => JSON.stringify(c.tokens) === JSON.stringify(alone))
        lm.dispose()
        console.log('LAST_WORK')
        out({ codes, same })
      })()`,
      { timeoutMs: 60_000 },
    )
    await assertEnded(r)
    assert.deepEqual(r.out, { codes: [1, 1, 1], same: true })
  })
})

describe(`SentenceEncoder under hostile lifetimes on Node ${process.versions.node}`, { skip }, () => {
  test('dispose() while encode calls are queued and in flight: each ends ok, QueueFull or Disposed', async () => {
    const r = await child(`
      ;(async () => {
        const enc = await torch.text.SentenceEncoder.load(ENC, { maxQueue: 8 })
        const texts = Array.from({ length: 40 }, (_, i) => 'hello world number ' + i + ' xx'.repeat(i))
        const calls = Array.from({ length: 30 }, (_, i) =>
          enc.encode(i % 2 ? texts : texts[i]).then((t) => { t.dispose(); return 'ok' }, (e) => e.code))
        await new Promise((resolve) => setTimeout(resolve, 5))
        enc.dispose()
        enc.dispose()
        const codes = [...new Set(await Promise.all(calls))].sort()
        const later = await enc.encode('x').then(() => 'resolved', (e) => e.code)
        out({ codes, later })
      })()`)
    await assertEnded(r)
    assert.equal(r.out.later, 'Disposed')
    assert.ok(r.out.codes.includes('Disposed'), info(r))
    assert.deepEqual(
      r.out.codes.filter((c) => !['ok', 'QueueFull', 'Disposed'].includes(c)),
      [],
      `codes: ${r.out.codes}`,
    )
  })

  test('a 10 MB text in a batch; a lone surrogate in a batch is InvalidArg naming its text; a Proxy array is read', async () => {
    const r = await child(`
      ;(async () => {
        const enc = await torch.text.SentenceEncoder.load(ENC)
        const big = await enc.encode(['a', 'a'.repeat(1e7), 'b'])
        const lone = await enc.encode(['ok', 'a\\uD800b', 'c']).then(() => 'resolved', (e) => [e.code, /texts\\[1\\]: a lone surrogate/.test(e.message)])
        const proxy = await enc.encode(new Proxy(['a', 'b'], {})).then((t) => t.shape, (e) => e.code)
        enc.dispose()
        out({ big: big.shape, lone, proxy })
      })()`)
    await assertEnded(r)
    assert.deepEqual(r.out, { big: [3, 384], lone: ['InvalidArg', true], proxy: [2, 384] })
  })
})

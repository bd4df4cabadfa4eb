'use strict'
// Property-based fuzzer: `node tools/fuzz.js --calls N [--seed S] [--jobs J] [--batch B] [--hang-ms T] [--verbose]`.
// Generates N calls (tools/fuzz-values.js) of every export and Tensor/ScriptModule method with
// hostile arguments, runs them in batches in child processes (`process.execPath`, so the Node
// line under test is the one running this script), and reports:
//   crash   the child died (signal, abort, any non-zero exit) or printed V8 "FATAL" /
//           "Check failed" or a Rust "panicked" line, even if it then carried on;
//   hang    a call did not return (sync: no progress for --hang-ms; async: not settled in
//           time) or the child's RSS ran past 4 GiB;
//   uncoded a call threw (or rejected with) something that is not an Error with a string `code`
//           and is not an exception our own traps threw (recognised by identity).
// The harness is also a module: __tests__/fuzz.test.js runs a bounded run through `fuzz()`.
const { spawn } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const values = require('./fuzz-values')

const ROOT = path.join(__dirname, '..')
const FIX_DIR = path.join(ROOT, 'models', 'fixtures')
const MARK = '\u0001fuzz '
const ASYNC_LIMIT_MS = 5000
const RSS_LIMIT = 4 * 2 ** 30
const KEY_LINE = /FATAL|Check failed|panicked|Segmentation|Aborted|terminate called|what\(\)|core dumped/

// ---------------------------------------------------------------------------------------
// Child: runs calls one by one; a marker on fd 2 before and after each keeps it in order with
// whatever V8, libtorch or Rust print there, so the parent knows which call was in flight.
// ---------------------------------------------------------------------------------------
const mark = (kind, data) => fs.writeSync(2, `${MARK}${kind} ${JSON.stringify(data)}\n`)

function batchCalls(seed, start, count) {
  const fc = require('fast-check')
  const batchSeed = (seed ^ Math.imul(start + 1, 0x9e3779b1)) | 0
  return fc.sample(values.calls(), { seed: batchSeed, numRuns: count })
}

async function child({ seed, start, count, from, file, tmp: TMP }) {
  const torch = require(ROOT)
  process.chdir(TMP) // junk strings used as save paths land here
  const SENTINELS = new WeakSet()
  const free = [torch, fs, FIX_DIR, TMP, SENTINELS]
  const names = Object.keys(values.HELPERS)
  const env = new Function(...values.FREE_NAMES, `${Object.values(values.HELPERS).join('\n')}\nreturn [${names}]`)(
    ...free,
  )
  const list = file ? JSON.parse(fs.readFileSync(file, 'utf8')) : batchCalls(seed, start, count)
  const stats = { ok: 0, codes: {}, sentinels: 0, setupErrors: 0, uncovered: uncovered(torch) }

  const judge = (e, count) => {
    if (SENTINELS.has(e)) count && stats.sentinels++
    else if (e instanceof Error && typeof e.code === 'string' && e.code)
      count && (stats.codes[e.code] = (stats.codes[e.code] || 0) + 1)
    else return { kind: 'uncoded', error: describeThrown(e) }
    return null
  }
  // Results are read back too: a view over freed or detached memory only shows when used.
  // toArray only where the nested arrays are few: [2**53, 0] has no elements but 2**53 rows.
  const probe = (r, index) => {
    const items =
      r instanceof torch.Tensor ? [r] : Array.isArray(r) ? r : r && typeof r === 'object' ? Object.values(r) : []
    for (const t of items) {
      if (!(t instanceof torch.Tensor) || t.isDisposed) continue
      mark('P', index)
      t.toString()
      if (t.shape.reduce((n, d) => n * Math.max(d, 1), 1) <= 1e4) t.toArray()
    }
  }
  /** Runs one call: undefined (setup threw), null (fine) or a finding. */
  const attempt = async (c, index, count) => {
    let thunk
    try {
      const body = `${c.setup.join('\n')}\nreturn () => ${c.call}`
      thunk = new Function(...values.FREE_NAMES, ...names, body)(...free, ...env)
    } catch {
      return undefined
    }
    let r
    try {
      r = thunk()
      if (r && typeof r.then === 'function') {
        const late = {}
        let timer
        try {
          r = await Promise.race([
            r,
            new Promise((resolve) => {
              timer = setTimeout(resolve, ASYNC_LIMIT_MS, late)
            }),
          ])
        } finally {
          clearTimeout(timer) // or a rejection leaves it holding the child open
        }
        if (r === late) return { kind: 'hang', error: `promise not settled after ${ASYNC_LIMIT_MS} ms` }
      }
    } catch (e) {
      return judge(e, count)
    }
    try {
      probe(r, index)
      if (count) stats.ok++
      return null
    } catch (e) {
      const finding = judge(e, count)
      return finding && { ...finding, stage: 'probe' }
    }
  }
  // An uncoded error is deterministic: drop trailing arguments while the error stays the same.
  const shrink = async (c, index, finding) => {
    const m = /\(((?:a\d+, )*a\d+)\)$/.exec(c.call)
    for (let k = 0; m && k < m[1].split(', ').length; k++) {
      const cand = prune({ ...c, call: `${c.call.slice(0, m.index)}(${m[1].split(', ').slice(0, k).join(', ')})` })
      const f = await attempt(cand, index, false)
      if (f && f.kind === finding.kind && f.error === finding.error && f.stage === finding.stage) return cand
    }
    return c
  }

  for (let i = from ?? 0; i < list.length; i++) {
    const index = (start ?? 0) + i
    mark('B', index)
    let finding = await attempt(list[i], index, true)
    if (finding === undefined) stats.setupErrors++ // a generator bug, not torch-node's: counted so it stays visible
    if (finding && finding.kind === 'uncoded') finding = { ...finding, shrunk: await shrink(list[i], index, finding) }
    if (finding) mark('F', { index, call: list[i], ...finding })
    mark('E', index)
    if (i % 32 === 31) {
      globalThis.gc?.() // finalizers of borrowed/disposed memory run here
      mark('S', stats) // so the figures survive a crash later in the batch
    }
  }
  mark('S', stats)
}

// API the generators do not know yet (added since): listed in the summary so the tables grow.
function uncovered(torch) {
  const known = (...lists) => new Set(lists.flat())
  const miss = (names, set, prefix) => names.filter((n) => n !== 'constructor' && !set.has(n)).map((n) => prefix + n)
  const top = Object.keys(torch).filter((n) => typeof torch[n] === 'function' && /^[a-z]/.test(n))
  return [
    ...miss(
      Object.getOwnPropertyNames(torch.Tensor.prototype),
      known(Object.keys(values.TENSOR), values.TENSOR_GETTERS),
      'Tensor#',
    ),
    ...miss(
      Object.getOwnPropertyNames(torch.ScriptModule.prototype),
      known(Object.keys(values.MODULE), values.MODULE_GETTERS),
      'ScriptModule#',
    ),
    ...miss(
      [...top, ...['cuda', 'cpu'].flatMap((ns) => Object.keys(torch[ns] || {}).map((n) => `${ns}.${n}`))],
      known(Object.keys(values.TOP)),
      'torch.',
    ),
  ]
}

/** Drops setup lines that nothing after them mentions any more. */
function prune(c) {
  let setup = c.setup
  for (let changed = true; changed;) {
    changed = false
    setup = setup.filter((line, i) => {
      const name = /^const (\w+) =/.exec(line)[1]
      const later = [...setup.slice(i + 1), c.call].join('\n')
      const used = new RegExp(`(?<!')\\b${name}\\b(?!')`).test(later)
      if (!used) changed = true
      return used
    })
  }
  return { ...c, setup }
}

function describeThrown(e) {
  if (e instanceof Error)
    return `${e.constructor.name} (code ${typeof e.code === 'string' ? JSON.stringify(e.code) : String(e.code)}): ${e.message}`
  try {
    return `non-Error thrown: ${typeof e} ${String(e)}`
  } catch {
    return `non-Error thrown: ${typeof e}`
  }
}

// ---------------------------------------------------------------------------------------
// Parent
// ---------------------------------------------------------------------------------------

/** Runs one child from `job.from` on; resolves to what it saw. */
function runChild(job, { hangMs }) {
  return new Promise((resolve) => {
    // The parent owns the child's scratch folder: a killed child cannot clean up after itself.
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'torch-node-fuzz-'))
    const args = ['--expose-gc', __filename, '--child', JSON.stringify({ ...job, tmp })]
    const proc = spawn(process.execPath, args, {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, OMP_NUM_THREADS: '1' },
    })
    const out = { findings: [], stats: null, inFlight: null, lastDone: null, tail: [], keyLines: [], killed: null }
    let last = Date.now()
    let pending = ''
    const onLine = (line) => {
      if (!line.startsWith(MARK)) {
        out.tail = [...out.tail.slice(-40), line]
        // A Rust panic says what went wrong on the line after "panicked at".
        if (KEY_LINE.test(line) || /panicked at/.test(out.tail[out.tail.length - 2])) {
          out.keyLines.push({ index: out.inFlight ?? out.lastDone, line })
        }
        return
      }
      last = Date.now()
      const [kind, json] = [line.slice(MARK.length, MARK.length + 1), line.slice(MARK.length + 2)]
      const data = JSON.parse(json)
      if (kind === 'B') {
        out.inFlight = data
        out.probing = false
      } else if (kind === 'P') out.probing = true
      else if (kind === 'E') {
        out.lastDone = data
        out.inFlight = null
      } else if (kind === 'F') out.findings.push(data)
      else if (kind === 'S') out.stats = data
    }
    proc.stderr.setEncoding('utf8').on('data', (d) => {
      const lines = (pending + d).split('\n')
      pending = lines.pop()
      lines.forEach(onLine)
    })
    proc.stdout.setEncoding('utf8').on('data', (d) =>
      d
        .split('\n')
        .filter(Boolean)
        .forEach((l) => onLine(`[stdout] ${l}`)),
    )
    const watchdog = setInterval(() => {
      let rss = 0
      try {
        rss = Number(fs.readFileSync(`/proc/${proc.pid}/statm`, 'utf8').split(' ')[1]) * 4096
      } catch {}
      if (Date.now() - last > hangMs) out.killed = `no progress for ${hangMs} ms`
      else if (rss > RSS_LIMIT) out.killed = `RSS ${(rss / 2 ** 30).toFixed(1)} GiB > ${RSS_LIMIT / 2 ** 30} GiB`
      if (out.killed) proc.kill('SIGKILL')
    }, 250)
    proc.on('close', (code, signal) => {
      clearInterval(watchdog)
      fs.rmSync(tmp, { recursive: true, force: true })
      if (pending) onLine(pending)
      Object.assign(out, { code, signal })
      resolve(out)
    })
  })
}

/** Turns what a child saw into findings; returns where to resume (or null when done). */
function collect(job, seen, calls, findings) {
  const at = seen.inFlight ?? seen.lastDone
  for (const { shrunk, ...f } of seen.findings) findings.push({ ...f, call: shrunk || f.call, context: null })
  // Key lines without a death: e.g. a panic caught and turned into an error.
  const died = seen.killed || seen.signal || seen.code !== 0
  const byCall = new Map()
  for (const { index, line } of seen.keyLines) byCall.set(index, [...(byCall.get(index) || []), line])
  for (const [index, lines] of byCall) {
    if (!(died && index === at))
      findings.push({ kind: 'crash', index, call: calls(index), error: lines[0], context: lines.slice(0, 10) })
  }
  if (!died) return null
  const kind = seen.killed ? 'hang' : 'crash'
  const how =
    (seen.killed || (seen.signal ? `killed by ${seen.signal}` : `exit code ${seen.code}`)) +
    (seen.inFlight == null && at != null ? ' after the call returned (in GC or a finalizer?)' : '')
  const keys = seen.tail.filter((l) => KEY_LINE.test(l))
  findings.push({
    kind,
    index: at,
    call: at == null ? null : calls(at),
    error: `${how}${keys[0] ? `: ${keys[0]}` : ''}`,
    context: (keys.length ? keys : seen.tail).slice(0, 10),
    died: true,
    stage: seen.inFlight != null && seen.probing ? 'probe' : undefined,
  })
  // Resume after the fatal call; give up on the batch if the child never got going.
  return at == null ? null : at + 1 - job.start
}

/** Runs `list` of calls in one fresh child; true if it crashes or hangs again. */
async function reproduces(list, opts) {
  const file = path.join(os.tmpdir(), `torch-node-fuzz-${process.pid}-${Date.now()}.json`)
  fs.writeFileSync(file, JSON.stringify(list))
  try {
    const seen = await runChild({ file, start: 0 }, opts)
    return Boolean(
      seen.killed ||
      seen.signal ||
      seen.code !== 0 ||
      seen.keyLines.length ||
      seen.findings.some((f) => f.kind === 'hang'),
    )
  } finally {
    fs.rmSync(file, { force: true })
  }
}

/** The fewest calls (ending with the fatal one) that still crash: alone, else a shrunk prefix. */
async function minimize(finding, prefix, opts) {
  if (await reproduces([finding.call], opts)) return { calls: [finding.call], note: 'reproduces alone' }
  if (!(await reproduces([...prefix, finding.call], opts)))
    return { calls: [finding.call], note: 'did not reproduce on a rerun (flaky?)' }
  let keep = prefix
  let budget = 16 // children; each may cost a full --hang-ms
  for (let chunk = Math.ceil(keep.length / 2); chunk >= 1 && keep.length && budget > 0; chunk = Math.floor(chunk / 2)) {
    for (let i = 0; i < keep.length && budget-- > 0;) {
      const without = [...keep.slice(0, i), ...keep.slice(i + chunk)]
      if (await reproduces([...without, finding.call], opts)) keep = without
      else i += chunk
    }
  }
  return { calls: [...keep, finding.call], note: `needs ${keep.length} earlier call(s) of its batch` }
}

function signature(f) {
  const msg = String(f.error)
    .replace(/0x[0-9a-f]+|\d+(\.\d+)?/gi, 'N')
    .slice(0, 160)
  return `${f.kind}|${f.stage}|${f.call ? f.call.label : '?'}|${msg}`
}

/**
 * Runs `calls` fuzz calls from `seed`; resolves to {calls, seed, crashes, hangs, uncoded,
 * findings: [{kind, label, count, error, context, repro, note}], stats}.
 */
async function fuzz({
  calls: total,
  seed = Date.now() % 2 ** 31,
  batch = 250,
  jobs = Math.min(4, os.availableParallelism?.() ?? 2),
  hangMs = 10000,
  minimizeMax = 8,
  log = () => {},
} = {}) {
  const opts = { hangMs }
  const jobsList = []
  for (let s = 0; s < total; s += batch) jobsList.push({ seed, start: s, count: Math.min(batch, total - s) })
  const raw = []
  const stats = { ok: 0, codes: {}, sentinels: 0, setupErrors: 0, children: 0, uncovered: [] }
  const prefixes = new Map() // finding -> the batch's calls before it, for minimize
  let next = 0
  const worker = async () => {
    while (next < jobsList.length) {
      const job = jobsList[next++]
      let batchCalls = null
      const callAt = (index) =>
        (batchCalls ??= module.exports.batchCalls(seed, job.start, job.count))[index - job.start]
      for (let from = 0; from != null && from < job.count;) {
        const seen = await runChild({ ...job, from }, opts)
        stats.children++
        const before = raw.length
        const resume = collect(job, seen, callAt, raw)
        for (const f of raw.slice(before)) if (f.died) prefixes.set(f, { job, from, callAt })
        if (seen.stats) {
          for (const k of ['ok', 'sentinels', 'setupErrors']) stats[k] += seen.stats[k]
          for (const [c, n] of Object.entries(seen.stats.codes)) stats.codes[c] = (stats.codes[c] || 0) + n
          stats.uncovered = seen.stats.uncovered
        }
        from = resume
      }
      log(`batch ${job.start}..${job.start + job.count - 1} done`)
    }
  }
  await Promise.all(Array.from({ length: Math.max(1, jobs) }, worker))

  const groups = new Map()
  for (const f of raw) {
    const key = signature(f)
    const g = groups.get(key)
    if (!g) groups.set(key, { ...f, count: 1, first: f })
    else {
      g.count++
      // The shortest call is the best reproduction for a deterministic, uncoded error.
      if (!f.died && f.call && g.call && JSON.stringify(f.call).length < JSON.stringify(g.call).length) g.call = f.call
    }
  }
  const findings = []
  let minimized = 0
  for (const g of groups.values()) {
    let list = g.call ? [g.call] : []
    let note = ''
    const p = prefixes.get(g.first)
    if (g.died && g.call && p && minimized++ < minimizeMax) {
      const prefix = Array.from({ length: g.first.index - p.job.start - p.from }, (_, i) =>
        p.callAt(p.job.start + p.from + i),
      )
      ;({ calls: list, note } = await minimize(g.first, prefix, opts))
    }
    if (g.stage === 'probe') list = [...list.slice(0, -1), { ...list[list.length - 1], probe: true }]
    findings.push({
      kind: g.kind,
      label: g.call ? g.call.label : '(no call in flight)',
      count: g.count,
      error: g.error,
      context: g.context,
      note: [g.stage === 'probe' && 'while reading the result back', note].filter(Boolean).join('; '),
      repro: reproSource(list),
    })
  }
  const count = (k) => raw.filter((f) => f.kind === k).length
  return {
    calls: total,
    seed,
    crashes: count('crash'),
    hangs: count('hang'),
    uncoded: count('uncoded'),
    findings,
    stats,
  }
}

/** A standalone script: the helpers the calls use, then each call's setup and call line. */
const PROBE_SRC = 'for (const t of r instanceof torch.Tensor ? [r] : Object.values(r)) { t.toString(); t.toArray() }'
function reproSource(list) {
  if (!list.length) return '(no call was in flight: the child died between calls)'
  const text = list.map((c) => [...c.setup, c.call].join('\n')).join('\n')
  const head = [`const torch = require(${JSON.stringify(ROOT)})`]
  if (/\bfs\b/.test(text + values.helperSource(text))) head.push("const fs = require('node:fs')")
  if (/\bFIX_DIR\b/.test(text + values.helperSource(text))) head.push(`const FIX_DIR = ${JSON.stringify(FIX_DIR)}`)
  if (/\bTMP\b/.test(text)) head.push("const TMP = fs.mkdtempSync(require('node:os').tmpdir() + '/fuzz-')")
  if (/\bboom\b/.test(text + values.helperSource(text))) head.push('const SENTINELS = new WeakSet()')
  const lines = (c) => [...c.setup, ...(c.probe ? [`const r = ${c.call}`, PROBE_SRC] : [c.call])]
  const blocks = list.map(
    (c) =>
      `{\n${lines(c)
        .map((l) => `  ${l}`)
        .join('\n')}\n}`,
  )
  return ["'use strict'", ...head, values.helperSource(text), ...blocks].filter(Boolean).join('\n')
}

function format(result) {
  const lines = [
    `fuzz: ${result.calls} calls, ${result.crashes} crashes, ${result.hangs} hangs, ${result.uncoded} uncoded errors, seed ${result.seed}`,
  ]
  for (const f of result.findings) {
    lines.push(
      '',
      `== ${f.kind}: ${f.label} (x${f.count}) on Node ${process.version}${f.note ? ` — ${f.note}` : ''}`,
      `   ${f.error}`,
    )
    if (f.context) lines.push(...f.context.filter((l) => l !== f.error).map((l) => `   | ${l}`))
    lines.push('--- repro ---', f.repro, '-------------')
  }
  return lines.join('\n')
}

module.exports = { fuzz, format, batchCalls, reproSource }

if (require.main === module) {
  const argv = process.argv.slice(2)
  const opt = (name, dflt) => {
    const i = argv.indexOf(`--${name}`)
    return i >= 0 ? argv[i + 1] : dflt
  }
  if (argv[0] === '--child') {
    child(JSON.parse(argv[1])).catch((e) => {
      console.error(e)
      process.exit(70)
    })
  } else {
    const calls = Number(opt('calls', 1000))
    const seed = opt('seed') === undefined ? undefined : Number(opt('seed'))
    const jobs = opt('jobs') === undefined ? undefined : Number(opt('jobs'))
    const t0 = Date.now()
    const hangMs = Number(opt('hang-ms', 10000))
    fuzz({
      calls,
      seed,
      jobs,
      hangMs,
      batch: Number(opt('batch', 250)),
      log: argv.includes('--verbose') ? console.error : undefined,
    })
      .then((r) => {
        console.log(format(r))
        console.error(
          `(${((Date.now() - t0) / 1000).toFixed(1)} s, Node ${process.version}; ${r.stats.children} children; ` +
            `${r.stats.ok} returned, ${r.stats.sentinels} trap exceptions propagated, codes ${JSON.stringify(r.stats.codes)}` +
            `${r.stats.setupErrors ? `; ${r.stats.setupErrors} setup errors (generator bugs)` : ''}` +
            `${r.stats.uncovered.length ? `; not fuzzed (add to tools/fuzz-values.js): ${r.stats.uncovered.join(' ')}` : ''})`,
        )
        process.exitCode = r.crashes + r.hangs + r.uncoded > 0 ? 1 : 0
      })
      .catch((e) => {
        console.error(e)
        process.exitCode = 2
      })
  }
}

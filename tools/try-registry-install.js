'use strict'
// `npm run try:registry`: installs torch-node into a fresh Express app from a real npm registry, as
// a user would, and prints the figures the README quotes.
//  1. starts a local verdaccio (installed into the work folder) that proxies everything else to
//     the npm registry but serves `torch-node` and `@torch-node/*` only from itself;
//  2. publishes the prebuilt platform package (scripts/prebuild.js) and torch-node (`npm pack`, with
//     `optionalDependencies` naming the platform package, as napi-rs's prepublish does);
//  3. installs it into a fresh app with no Rust toolchain on PATH and an empty libtorch cache
//     (cold), then again into a second fresh app (warm); each app classifies a photo, answers an
//     HTTP request, and loads torchvision's ops from the CPU entry to run a scripted detector
//     (SSDlite) on the photo, whose detections must be Python's (models/golden/detection.json);
//  4. runs the warm app on Node 22 and 26 too, reinstalls it with `npm ci`, moves an app folder and
//     runs it again, hides the cache and checks the one-line error, and checks the failures an
//     app can meet (no allowScripts, no prebuilt and no Rust).
// Options: --keep (leave the work folder), --work DIR, --source (also the source-build fallback:
// about 5 min and 1 GB more).
const { spawn, spawnSync } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { ROOT } = require('../scripts/libtorch')
const { prebuild } = require('../scripts/prebuild')
const { du, TORCH_VERSION } = require('../scripts/cache')
const { nodeBinary } = require('./node-lines')

const args = process.argv.slice(2)
const keep = args.includes('--keep')
const work = args.includes('--work')
  ? path.resolve(args[args.indexOf('--work') + 1])
  : fs.mkdtempSync(path.join(os.tmpdir(), 'torch-node-registry-'))
const VERDACCIO = '6.10.4'
const say = (msg) => console.log(`[try-registry] ${msg}`)
const mb = (bytes) => `${(bytes / 1048576).toFixed(bytes < 10485760 ? 1 : 0)} MB`

function sh(cmd, argv, options = {}) {
  const r = spawnSync(cmd, argv, { encoding: 'utf8', maxBuffer: 64 << 20, ...options })
  if (r.status !== 0) {
    throw new Error(
      `${cmd} ${argv.join(' ')} failed (${r.status ?? r.signal}):\n${(r.stdout || '') + (r.stderr || '')}`.slice(-6000),
    )
  }
  return r.stdout
}

/** PATH without the Rust toolchain (cargo, rustc), as on an app's machine. */
function pathWithoutRust() {
  return process.env.PATH.split(path.delimiter)
    .filter((d) => !['cargo', 'rustc', 'rustup'].some((t) => fs.existsSync(path.join(d, t))))
    .join(path.delimiter)
}

async function startVerdaccio() {
  const dir = path.join(work, 'verdaccio')
  fs.mkdirSync(dir, { recursive: true })
  say(`installing verdaccio@${VERDACCIO} into ${dir}`)
  // One of its dependencies asks for node-fetch@cjs, a dist-tag this machine's registry lacks:
  // 2.7.0 is what that tag names on npmjs.org.
  fs.writeFileSync(
    path.join(dir, 'package.json'),
    JSON.stringify({ name: 'verdaccio-for-torch-node', private: true, overrides: { 'node-fetch': '2.7.0' } }),
  )
  sh('npm', ['install', '--no-audit', '--no-fund', '--silent', `verdaccio@${VERDACCIO}`], { cwd: dir })
  const port = 4873 + Math.floor(Math.random() * 1000)
  fs.writeFileSync(
    path.join(dir, 'config.yaml'),
    [
      `storage: ${path.join(dir, 'storage')}`,
      'auth:',
      `  htpasswd: { file: ${path.join(dir, 'htpasswd')}, max_users: 10 }`,
      'uplinks:',
      '  npmjs: { url: https://registry.npmjs.org/, timeout: 60s }',
      'packages:',
      // Never proxied: what the app gets is what this script published, not a package of that
      // name someone else may own on the public registry.
      "  '@torch-node/*': { access: $all, publish: $authenticated }",
      "  'torch-node': { access: $all, publish: $authenticated }",
      "  '**': { access: $all, proxy: npmjs }",
      'max_body_size: 200mb',
      'log: { type: stdout, format: pretty, level: warn }',
      '',
    ].join('\n'),
  )
  // verdaccio 6 needs Node 22 or later: the Node 24 line from the npm registry (tools/node-lines.js).
  const bin = path.join(dir, 'node_modules', 'verdaccio', 'bin', 'verdaccio')
  const child = spawn(
    nodeBinary('24'),
    [bin, '--config', path.join(dir, 'config.yaml'), '--listen', `127.0.0.1:${port}`],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  )
  let log = ''
  child.stdout.on('data', (d) => (log += d))
  child.stderr.on('data', (d) => (log += d))
  const url = `http://127.0.0.1:${port}/`
  for (let i = 0; ; i++) {
    try {
      if ((await fetch(`${url}-/ping`)).ok) break
    } catch {}
    if (i > 120 || child.exitCode !== null) throw new Error(`verdaccio did not start:\n${log}`)
    await new Promise((r) => setTimeout(r, 500))
  }
  // A user for publishing (verdaccio's htpasswd auth), and an npmrc holding its token.
  const res = await fetch(`${url}-/user/org.couchdb.user:ci`, {
    method: 'PUT',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'ci', password: 'torch-node-ci' }),
  })
  const { token } = await res.json()
  if (!token) throw new Error(`verdaccio gave no token (HTTP ${res.status})`)
  const npmrc = path.join(work, 'npmrc')
  fs.writeFileSync(
    npmrc,
    `registry=${url}\n//127.0.0.1:${port}/:_authToken=${token}\nfund=false\naudit=false\nupdate-notifier=false\n`,
  )
  say(`verdaccio on ${url}`)
  return { url, npmrc, stop: () => child.kill() }
}

/** Packs torch-node and publishes it, naming the platform package as an optional dependency. */
function publish(registry, platform) {
  const npmEnv = { ...process.env, npm_config_userconfig: registry.npmrc }
  sh('npm', ['publish', platform.dir, '--registry', registry.url], { env: npmEnv })
  const packDir = path.join(work, 'pack')
  fs.mkdirSync(packDir, { recursive: true })
  const tarball = sh('npm', ['pack', '--silent', '--pack-destination', packDir], { cwd: ROOT }).trim().split('\n').pop()
  sh('tar', ['-xzf', path.join(packDir, tarball), '-C', packDir])
  const pkgFile = path.join(packDir, 'package', 'package.json')
  const pkg = JSON.parse(fs.readFileSync(pkgFile, 'utf8'))
  pkg.optionalDependencies = { ...pkg.optionalDependencies, [platform.name]: platform.version }
  fs.writeFileSync(pkgFile, JSON.stringify(pkg, null, 2) + '\n')
  sh('npm', ['publish', path.join(packDir, 'package'), '--registry', registry.url], { env: npmEnv })
  say(
    `published ${platform.name}@${platform.version} and torch-node@${pkg.version} (${mb(fs.statSync(path.join(packDir, tarball)).size)} packed)`,
  )
  return pkg.version
}

const SERVER = `
const express = require('express')
const fs = require('node:fs')
const path = require('node:path')
let torch
try {
  torch = require('torch-node')
} catch (e) {
  console.error(e.code, e.message)
  process.exit(1)
}

const photo = path.join(path.dirname(require.resolve('torch-node/package.json')), 'data', 'chelsea.png')
async function main() {
  const model = await torch.ScriptModule.load(process.env.MODEL)
  // EfficientNet-Lite0's own normalization, (p - 127) / 128 (lib/bundled.js says why)
  const preprocess = { resize: 256, centerCrop: 224, mean: [127 / 255, 127 / 255, 127 / 255], std: [128 / 255, 128 / 255, 128 / 255] }
  const [top] = await torch.vision.classify(model, photo, { topk: 1, preprocess })
  console.log('classify:', top[0].label, top[0].probability.toFixed(3))
  const app = express()
  app.post('/classify', express.raw({ type: 'image/*', limit: '10mb' }), async (req, res) => {
    const [best] = await torch.vision.classify(model, req.body, { topk: 1, preprocess })
    res.json(best[0])
  })
  const server = app.listen(0, '127.0.0.1', async () => {
    const r = await fetch('http://127.0.0.1:' + server.address().port + '/classify', {
      method: 'POST', headers: { 'content-type': 'image/png' }, body: fs.readFileSync(photo),
    })
    console.log('POST /classify:', r.status, JSON.stringify(await r.json()))
    server.close()
  })
  // A scripted torchvision detector: its ops (nms) come from the libtorch cache's torchvision.
  torch.vision.loadOps()
  const detector = await torch.ScriptModule.load(process.env.DETECTOR)
  const image = torch.image.loadSync(fs.readFileSync(photo), { layout: 'chw' })
  const [, [found]] = await detector.forward([image])
  const labels = found.labels.toArray()
  console.log('detect:', JSON.stringify({ count: labels.length, labels, scores: [...found.scores.toTypedArray()] }))
}
main().catch((e) => { console.error(e.code, e.message); process.exit(1) })
`

function makeApp(dir, version, { allow = true } = {}) {
  fs.mkdirSync(dir, { recursive: true })
  fs.writeFileSync(
    path.join(dir, 'package.json'),
    JSON.stringify(
      {
        name: 'express-app',
        version: '1.0.0',
        private: true,
        dependencies: { express: '^5.1.0', 'torch-node': version },
        ...(allow ? { allowScripts: { 'torch-node': true } } : {}),
      },
      null,
      2,
    ) + '\n',
  )
  fs.writeFileSync(path.join(dir, 'server.js'), SERVER)
}

function appEnv(registry, cache, { rust = false } = {}) {
  const env = { ...process.env, TORCH_NODE_CACHE: cache, npm_config_userconfig: registry.npmrc }
  if (!rust) env.PATH = pathWithoutRust()
  for (const k of ['LIBTORCH', 'LIBTORCH_USE_PYTORCH', 'TORCH_NODE_CUDA', 'INIT_CWD', 'CARGO_TARGET_DIR']) delete env[k]
  if (!rust && spawnSync('cargo', ['--version'], { env, stdio: 'ignore' }).status === 0)
    throw new Error('cargo is still on PATH')
  return env
}

/** `npm <args>` in `dir` (no Rust on PATH unless `rust`); returns seconds, npm's output, status. */
function npm(dir, registry, cache, argv, { rust = false } = {}) {
  const started = process.hrtime.bigint()
  const r = spawnSync('npm', [...argv, '--registry', registry.url, '--foreground-scripts'], {
    cwd: dir,
    env: appEnv(registry, cache, { rust }),
    encoding: 'utf8',
    maxBuffer: 64 << 20,
  })
  return { seconds: Number(process.hrtime.bigint() - started) / 1e9, out: r.stdout + r.stderr, status: r.status }
}

function install(dir, registry, cache) {
  const r = npm(dir, registry, cache, ['install'])
  if (r.status !== 0) throw new Error(`npm install in ${dir} failed:\n${r.out.slice(-4000)}`)
  return r
}

/**
 * Runs the app on Node `line` (24 by default: an app's machine today; the install used this
 * Node's npm), with a time limit: it must also exit by itself once its server closes.
 */
function runApp(dir, cache, line = '24') {
  const model = path.join(ROOT, 'models', 'efficientnet_lite0_traced.pt')
  const env = {
    ...process.env,
    MODEL: model,
    DETECTOR: path.join(ROOT, 'models', DETECTOR.file),
    TORCH_NODE_CACHE: cache,
  }
  delete env.LD_LIBRARY_PATH // an app's machine has none pointing at a libtorch
  const r = spawnSync(nodeBinary(line), ['server.js'], { cwd: dir, encoding: 'utf8', timeout: 120000, env })
  return {
    ok: r.status === 0,
    out: (r.stdout + r.stderr).trim() + (r.signal ? ` (killed: ${r.signal}, it did not exit)` : ''),
  }
}

// SSDlite with seeded weights and Python's detections on data/chelsea.png (models/make_models.py)
const GOLDEN = JSON.parse(fs.readFileSync(path.join(ROOT, 'models', 'golden', 'detection.json'), 'utf8'))
const DETECTOR = GOLDEN.models.ssdlite320_mobilenet_v3_large

/** The app's detections match Python's: the same labels, scores within 1e-4 (detection.test.js). */
function detectsAsPython(out) {
  const line = out.split('\n').find((l) => l.startsWith('detect: '))
  if (!line) return false
  const { count, labels, scores } = JSON.parse(line.slice('detect: '.length))
  return (
    count === DETECTOR.count &&
    JSON.stringify(labels) === JSON.stringify(DETECTOR.labels.data) &&
    scores.every((s, i) => Math.abs(s - DETECTOR.scores.data[i]) <= 1e-4)
  )
}

function check(what, condition, detail = '') {
  if (!condition) throw new Error(`${what}${detail ? `: ${detail}` : ''}`)
  say(`ok: ${what}`)
}

async function main() {
  say(`work folder ${work}`)
  const platform = prebuild(path.join(work, 'platform'))
  const registry = await startVerdaccio()
  try {
    const version = publish(registry, platform)
    const cache = path.join(work, 'cache')
    const figures = []
    for (const [name, label] of [
      ['app', 'cold cache'],
      ['app2', 'warm cache'],
    ]) {
      const dir = path.join(work, name)
      makeApp(dir, version)
      const { seconds, out } = install(dir, registry, cache)
      say(`npm install (${label}): ${seconds.toFixed(1)} s`)
      const progressLines = out.split('\n').filter((l) => /\[torch-node\] download(ing|ed) torch-/.test(l)).length
      if (label === 'cold cache')
        check('the cold install printed download progress', progressLines > 0, out.slice(-2000))
      const pkgDir = path.join(dir, 'node_modules', 'torch-node')
      check(
        `${label}: the prebuilt addon is used, nothing was compiled`,
        !fs.existsSync(path.join(pkgDir, 'torch-node.node')) &&
          !fs.existsSync(path.join(pkgDir, 'target')) &&
          out.includes('using the prebuilt addon'),
        out.slice(-2000),
      )
      const run = runApp(dir, cache)
      check(
        `${label}: the app classifies the photo (a cat) and answers POST /classify`,
        run.ok && /POST \/classify: 200 .*cat/.test(run.out),
        run.out,
      )
      check(
        `${label}: torch.vision.loadOps() from the CPU entry, and SSDlite detects on the photo as in Python`,
        run.ok && detectsAsPython(run.out),
        run.out,
      )
      say(run.out.replace(/detect: .*/, (l) => l.slice(0, 120) + '...').replace(/\n/g, ' | '))
      figures.push({ label, seconds, nodeModules: du(path.join(dir, 'node_modules')) })
    }
    const entry = path.join(cache, `libtorch-${TORCH_VERSION}-cpu`)
    check(
      "the cache holds the CPU entry only (no CUDA entry), with torchvision's ops and stand-ins for the CUDA libraries they name",
      fs
        .readdirSync(cache)
        .filter((f) => f.startsWith('libtorch-'))
        .join() === path.basename(entry) &&
        !fs.existsSync(path.join(entry, 'torch', 'lib', 'libtorch_cuda.so')) &&
        ['_C.so', 'cuda-stand-ins/libtorch_cuda.so', 'cuda-stand-ins/libc10_cuda.so'].every((f) =>
          fs.existsSync(path.join(entry, 'torchvision', f)),
        ),
      fs.readdirSync(cache).join(' '),
    )
    // The same installed app on every supported Node line (one prebuilt, N-API).
    for (const line of ['22', '26']) {
      const run = runApp(path.join(work, 'app2'), cache, line)
      check(
        `warm cache: the app runs (classifies, detects) and exits on Node ${line}`,
        run.ok && /POST \/classify: 200 .*cat/.test(run.out) && detectsAsPython(run.out),
        run.out,
      )
    }
    // `npm ci` from the lockfile the install wrote, warm cache.
    fs.rmSync(path.join(work, 'app2', 'node_modules'), { recursive: true, force: true })
    const ci = npm(path.join(work, 'app2'), registry, cache, ['ci'])
    check(
      '`npm ci` (warm cache) uses the prebuilt and the app runs',
      ci.status === 0 && ci.out.includes('using the prebuilt addon') && runApp(path.join(work, 'app2'), cache).ok,
      ci.out.slice(-2000),
    )
    say(`npm ci (warm cache): ${ci.seconds.toFixed(1)} s`)
    figures.push({
      label: 'npm ci, warm cache',
      seconds: ci.seconds,
      nodeModules: du(path.join(work, 'app2', 'node_modules')),
    })
    const cacheBytes = du(cache)
    check(
      'no staging folder or lock left in the cache',
      fs.readdirSync(cache).every((f) => f.startsWith('libtorch-')),
      fs.readdirSync(cache).join(' '),
    )
    // Moved app folder: still works (the link points into the cache, which did not move).
    const moved = path.join(work, 'moved', 'app')
    fs.mkdirSync(path.dirname(moved))
    fs.renameSync(path.join(work, 'app'), moved)
    const run = runApp(moved, cache)
    check('the moved app still runs', run.ok && /POST \/classify: 200 /.test(run.out), run.out)
    const rebuilt = npm(moved, registry, cache, ['rebuild', 'torch-node'])
    check(
      '`npm rebuild torch-node` in the moved app relinks the prebuilt',
      rebuilt.status === 0 && rebuilt.out.includes('using the prebuilt addon') && runApp(moved, cache).ok,
      rebuilt.out.slice(-2000),
    )
    // Cache gone (an image copied without it): one line that names the fix.
    fs.renameSync(cache, `${cache}.away`)
    const gone = runApp(moved, cache)
    fs.renameSync(`${cache}.away`, cache)
    check(
      'without the cache, one line that names `npm rebuild torch-node`',
      !gone.ok &&
        gone.out.split('\n').length === 1 &&
        /LibraryLoadError torch-node: libtorch is missing: .*npm rebuild torch-node/.test(gone.out),
      gone.out,
    )
    // Without "allowScripts": whatever npm does, the user is told what to do.
    const unallowed = path.join(work, 'app-not-allowed')
    makeApp(unallowed, version, { allow: false })
    const plain = npm(unallowed, registry, cache, ['install'])
    const ranScript = plain.out.includes('using the prebuilt addon')
    const plainRun = runApp(unallowed, cache)
    say(
      `without "allowScripts", npm ${ranScript ? 'ran' : 'did not run'} torch-node's install script` +
        (/allowScripts/.test(plain.out)
          ? ` and said: ${plain.out
              .split('\n')
              .find((l) => /allowScripts/.test(l))
              .trim()}`
          : ''),
    )
    check(
      'without "allowScripts": the app runs, or its error names allowScripts',
      ranScript
        ? plainRun.ok
        : !plainRun.ok && /install script has not run.*"allowScripts": \{"torch-node": true\}/.test(plainRun.out),
      plainRun.out,
    )
    // No prebuilt (optional dependencies omitted) and no Rust: one clear failure.
    const bare = path.join(work, 'app-no-prebuilt')
    makeApp(bare, version)
    const refused = npm(bare, registry, cache, ['install', '--omit=optional'])
    check(
      'without the prebuilt and without Rust, install fails naming both fixes',
      refused.status !== 0 && /no prebuilt addon .* no Rust toolchain \(cargo\)/.test(refused.out),
      refused.out.slice(-2000),
    )
    if (args.includes('--source')) {
      // ... and with Rust: the source build, its progress, nothing of cargo's left behind.
      fs.rmSync(path.join(bare, 'node_modules'), { recursive: true, force: true })
      const built = npm(bare, registry, cache, ['install', '--omit=optional'], { rust: true })
      const pkgDir = path.join(bare, 'node_modules', 'torch-node')
      check(
        '--source: the fallback builds from source and leaves no target/',
        built.status === 0 &&
          fs.existsSync(path.join(pkgDir, 'torch-node.node')) &&
          !fs.existsSync(path.join(pkgDir, 'target')),
        built.out.slice(-3000),
      )
      say(`--source: npm install with a source build: ${built.seconds.toFixed(0)} s`)
      const ran = runApp(bare, cache)
      check('--source: the source-built app runs', ran.ok, ran.out)
    }
    // Uninstalling leaves nothing of torch-node in the app; the cache stays for the next one.
    const gone2 = npm(moved, registry, cache, ['uninstall', 'torch-node'])
    const scope = path.join(moved, 'node_modules', '@torch-node')
    const left = [
      path.join(moved, 'node_modules', 'torch-node'),
      ...(fs.existsSync(scope) ? fs.readdirSync(scope).map((f) => path.join(scope, f)) : []),
    ].filter((f) => fs.existsSync(f) || fs.lstatSync(f, { throwIfNoEntry: false }))
    check(
      '`npm uninstall torch-node` removes the package and its platform package',
      gone2.status === 0 && left.length === 0,
      `left: ${left.join(', ')}\n${gone2.out.slice(-2000)}`,
    )
    say('figures:')
    for (const f of figures)
      say(
        `  ${f.label.startsWith('npm') ? '' : 'npm install, '}${f.label}: ${f.seconds.toFixed(1)} s; node_modules ${mb(f.nodeModules)}`,
      )
    say(
      `  libtorch cache (cpu): ${mb(cacheBytes)}, of which torchvision's ops and the stand-ins ${mb(du(path.join(entry, 'torchvision')))}` +
        ` (_C.so ${mb(fs.statSync(path.join(entry, 'torchvision', '_C.so')).size)}, stand-ins ${(du(path.join(entry, 'torchvision', 'cuda-stand-ins')) / 1024).toFixed(0)} KB)`,
    )
    say('OK')
  } finally {
    registry.stop()
    if (!keep) fs.rmSync(work, { recursive: true, force: true })
  }
}

main().catch((e) => {
  console.error(`[try-registry] FAILED: ${e.message}`)
  process.exit(1)
})

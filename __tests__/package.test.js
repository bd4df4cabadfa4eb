'use strict'
// What `npm install torch-node` puts in an app (issue 28): `npm pack --dry-run` lists the published
// files, and they are the product only — what the app runs (index.*, lib/, bin/, data/, the
// export scripts python/ for `torch-node export`), what its install runs (scripts/: exactly the
// files scripts/install.js requires), what a source build compiles (the Cargo workspace: Cargo files, build.rs, src/, crates/),
// the docs and the one fixture the README's examples load. Tests, benches, examples, the fuzzer,
// the Triton tooling and the other developer tools (tools/) stay in the repository.
const { test } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { execFileSync } = require('node:child_process')

const ROOT = path.join(__dirname, '..')
const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8'))

/** The published files, as `npm pack --dry-run --json` lists them (npm adds package.json, LICENSE). */
function packed() {
  const out = execFileSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], {
    cwd: ROOT,
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'ignore'],
    timeout: 120_000,
  })
  const [{ files, entryCount, size, unpackedSize }] = JSON.parse(out)
  return { paths: files.map((f) => f.path).sort(), entryCount, size, unpackedSize }
}
const pack = packed()
const paths = new Set(pack.paths)

/** The local files `file` requires (`require('./x')`, `require('../y')`), as repository paths. */
function localRequires(file) {
  const source = fs.readFileSync(path.join(ROOT, file), 'utf8')
  const out = []
  for (const [, spec] of source.matchAll(/require\((?:'|")(\.{1,2}\/[^'"]+)(?:'|")\)/g)) {
    const base = path.relative(ROOT, path.resolve(path.dirname(path.join(ROOT, file)), spec))
    const found = [base, `${base}.js`, `${base}.json`, path.join(base, 'index.js')].find(
      (p) => fs.existsSync(path.join(ROOT, p)) && fs.statSync(path.join(ROOT, p)).isFile(),
    )
    out.push(found ?? base)
  }
  return out
}

/** Every file reachable from `entry` through local requires; `skip(from, to)` leaves an edge out. */
function closure(entry, skip = () => false) {
  const seen = new Set()
  const walk = (file) => {
    if (seen.has(file)) return
    seen.add(file)
    for (const next of localRequires(file)) if (!skip(file, next)) walk(next)
  }
  walk(entry)
  return seen
}

// Only in a clone (IS_CHECKOUT): install.js then generates the models and runs the main job.
const CHECKOUT_ONLY = new Set(['tools/models.js'])

test('the package holds only the product: no tests, benches, examples, tools or model fixtures', () => {
  // npm adds each included folder's README.md (models/README.md says what the fixture is).
  const allowed =
    /^(package\.json|LICENSE|(models\/)?README\.md|index\.(js|mjs|d\.ts)|Cargo\.(toml|lock)|build\.rs)$|^(lib|bin|data|python|scripts|src|crates|docs)\//
  assert.deepEqual(
    pack.paths.filter((p) => !allowed.test(p) && p !== 'models/fixtures/mlp_traced.pt'),
    [],
  )
  const workshop = pack.paths.filter((p) =>
    /(^|\/)(__tests__|bench|examples|tools|target)\/|fuzz|triton-env|try-registry|\.test\.js$/.test(p),
  )
  assert.deepEqual(workshop, [])
  for (const p of [
    'index.js',
    'index.mjs',
    'index.d.ts',
    'lib/addon.js',
    'bin/torch-node.js',
    'build.rs',
    'Cargo.toml',
    'Cargo.lock',
  ]) {
    assert.ok(paths.has(p), `${p} is published`)
  }
  // `torch-node export` runs python/export_text.py; the CLI classifies data/chelsea.png and
  // labels with data/imagenet-labels.json; the README's tour loads models/fixtures/mlp_traced.pt.
  for (const p of [
    'python/export_text.py',
    'data/chelsea.png',
    'data/imagenet-labels.json',
    'models/fixtures/mlp_traced.pt',
  ]) {
    assert.ok(paths.has(p), `${p} is published`)
  }
})

test('scripts/ is exactly what the install script requires', () => {
  const install = closure('scripts/install.js', (from, to) => from === 'scripts/install.js' && CHECKOUT_ONLY.has(to))
  const published = pack.paths.filter((p) => p.startsWith('scripts/'))
  assert.deepEqual(published, [...install].sort(), 'a file in scripts/ the install does not need belongs in tools/')
  // The install's lazy requires of developer tools run only in a clone, never in an app.
  const tools = localRequires('scripts/install.js').filter((p) => p.startsWith('tools/'))
  assert.deepEqual(
    tools.filter((p) => !CHECKOUT_ONLY.has(p)),
    [],
  )
  assert.equal(pkg.scripts.install, 'node scripts/install.js')
})

test('every local file the published code requires is published', () => {
  const entries = ['index.js', 'bin/torch-node.js', ...pack.paths.filter((p) => /^(lib|scripts)\/.*\.js$/.test(p))]
  const missing = new Set()
  for (const entry of entries) {
    for (const file of closure(entry, (from, to) => from === 'scripts/install.js' && CHECKOUT_ONLY.has(to))) {
      if (!paths.has(file)) missing.add(`${file} (required from ${entry})`)
    }
  }
  assert.deepEqual([...missing], [])
})

test('a source build has every crate and source the Cargo files name', () => {
  const cargo = fs.readFileSync(path.join(ROOT, 'Cargo.toml'), 'utf8')
  const dirs = [...cargo.matchAll(/\bpath\s*=\s*"([^"]+)"/g)].map((m) => m[1])
  const members = cargo.match(/\bmembers\s*=\s*\[([^\]]*)\]/)
  if (members) dirs.push(...[...members[1].matchAll(/"([^"]+)"/g)].map((m) => m[1]))
  // `.` is the workspace's root package (the addon): its files are the ones checked above.
  for (const dir of dirs.filter((d) => path.normalize(d) !== '.')) {
    const prefix = `${path.normalize(dir).replace(/\/$/, '')}/`
    assert.ok(
      pack.paths.some((p) => p.startsWith(prefix) || p === dir),
      `${dir} (named in Cargo.toml) is published`,
    )
  }
  assert.ok(pack.paths.some((p) => p.startsWith('src/') && p.endsWith('.rs')))
  // The core crate builds the C++ shim and embeds the libtorch_python stub (crates/core/build.rs).
  for (const p of [
    'crates/core/Cargo.toml',
    'crates/core/build.rs',
    'crates/core/src/lib.rs',
    'crates/core/src/shim/shim.cpp',
    'crates/core/src/shim/torch_python_stub.c',
  ]) {
    assert.ok(paths.has(p), `${p} is published`)
  }
})

test('gRPC is an optional peer: installed by the apps that use it', () => {
  for (const name of ['@grpc/grpc-js', '@grpc/proto-loader']) {
    assert.equal(pkg.dependencies?.[name], undefined, `${name} is not a dependency`)
    assert.ok(pkg.peerDependencies?.[name], `${name} is a peer dependency`)
    assert.equal(pkg.peerDependenciesMeta?.[name]?.optional, true, `${name} is optional`)
    assert.equal(
      pkg.devDependencies?.[name],
      pkg.peerDependencies[name],
      `${name}: the tests run with the range apps get`,
    )
  }
  assert.deepEqual(Object.keys(pkg.dependencies ?? {}), [], 'an app installs no JS dependency of ours')
})

'use strict'
// `node tools/libtorch-compat.js <2.11|2.12>`: builds torch-node against an older libtorch than the
// dev one (PyPI's torch of that release) and runs a smoke suite against it, with fixtures made by
// that release's own Python (its archives and programs may not load in another release).
//
//   .libtorch-compat/<release>/venv/      Python + torch (--no-deps: CPU libraries, with the CUDA
//                                          stand-ins of scripts/cuda-stubs.js as .libtorch/ has),
//                                          transformers 5.17 (the GPU check machine's)
//   .libtorch-compat/<release>/fixtures/  tools/compat_models.py's output (rebuilt when it changes)
//   .libtorch-compat/<release>/target/    cargo's target dir, seeded with a copy of target/release
//   .libtorch-compat/<release>/pkg/       the package to test: index.js, lib/, package.json,
//                                          torch-node.node built here, libtorch -> the venv's torch
//
// Everything is cached in the git-ignored .libtorch-compat/: a second run only rebuilds what
// changed. Steps: provision, fixtures, build (plus the core's unit test of the ops the release
// lacks), smoke (__tests__/compat/smoke.test.js). `--skip-build` reuses the built addon.
const { execFileSync, spawn, spawnSync } = require('node:child_process')
const crypto = require('node:crypto')
const fs = require('node:fs')
const path = require('node:path')
const { probeTorch, pip, libtorchVersion, torchRoots, log, ROOT } = require('../scripts/libtorch')
const { cargoEnv, linkLibtorch } = require('../scripts/build')

/** The releases this tool builds against (2.13 is the dev build itself). */
const RELEASES = { 2.11: '2.11.0', 2.12: '2.12.0' }
// What the fixtures need besides torch; transformers pinned to the GPU check machine's (issue 35).
const FIXTURE_PACKAGES = ['numpy', 'transformers==5.17.0']
const FIXTURE_SCRIPT = path.join(ROOT, 'tools', 'compat_models.py')
const EXPORTERS = ['export_causal_lm.py', 'export_text.py'].map((f) => path.join(ROOT, 'python', f))
/** The files a staged package holds besides the addon (what an app runs: package.json's `files`). */
const PACKAGE_FILES = ['package.json', 'index.js', 'index.mjs', 'index.d.ts', 'lib', 'data', 'python']

const compatDir = (release) => path.join(ROOT, '.libtorch-compat', release)

function sitePackages(python) {
  return execFileSync(python, ['-c', 'import sysconfig; print(sysconfig.get_paths()["purelib"])'], {
    encoding: 'utf8',
  }).trim()
}

/**
 * torch's own requirements from its wheel's METADATA, less the CUDA wheels and triton (as the dev
 * virtualenv leaves them out), plus the pin of `cuda-toolkit` whose cudart and cupti (small)
 * libtorch_cpu.so names. Returns { pure: [...], cudaToolkit: 'cuda-toolkit[cudart,cupti]==X' | null }.
 */
function torchRequirements(site, version) {
  const metadata = fs.readFileSync(path.join(site, `torch-${version}.dist-info`, 'METADATA'), 'utf8')
  const pure = []
  let cudaToolkit = null
  for (const line of metadata.split('\n')) {
    const m = /^Requires-Dist: ([A-Za-z0-9_.-]+)(\[[^\]]*\])?\s*([^;]*)(;.*)?$/.exec(line.trim())
    if (!m || (m[4] && m[4].includes('extra'))) continue
    const [, name, , spec] = m
    if (name === 'cuda-toolkit') cudaToolkit = `cuda-toolkit[cudart,cupti]${spec.trim()}`
    else if (!/^(nvidia-|cuda-|triton)/.test(name)) pure.push(`${name}${spec.trim()}`)
  }
  return { pure, cudaToolkit }
}

/** The release's virtualenv, made once: { python, torchDir }. */
function provision(release) {
  const version = RELEASES[release]
  const venv = path.join(compatDir(release), 'venv')
  const python = path.join(venv, 'bin', 'python')
  if (!fs.existsSync(python)) {
    log(`creating ${path.relative(ROOT, venv)}`)
    execFileSync(process.env.PYTHON || 'python3', ['-m', 'venv', venv], { stdio: 'inherit' })
  }
  let torch = probeTorch(python)
  if (!torch || (!torch.version.startsWith(`${version}+`) && torch.version !== version)) {
    pip(python, ['--no-deps', `torch==${version}`])
    const site = sitePackages(python)
    const { pure, cudaToolkit } = torchRequirements(site, version)
    pip(python, [...pure, ...(cudaToolkit ? [cudaToolkit] : [])])
    const stubs = require('../scripts/cuda-stubs').writeStubs(
      torchRoots(site).filter((f) => fs.existsSync(f)), // no torchvision here
      path.join(site, 'nvidia', 'cu13', 'lib'),
      { python },
    )
    log(`CPU stand-ins for ${stubs.length} CUDA libraries: ${stubs.join(', ')}`)
    torch = probeTorch(python)
    if (!torch) throw new Error(`torch ${version} was installed into ${venv} but does not import`)
  }
  const have = spawnSync(python, ['-c', 'import transformers, numpy'], { stdio: 'ignore' }).status === 0
  if (!have) pip(python, FIXTURE_PACKAGES)
  log(`torch ${torch.version} in ${path.relative(ROOT, venv)}`)
  return { python, torchDir: torch.dir }
}

/** Hash of what the fixtures depend on: the script, the exporters it runs, the torch version. */
function fixturesKey(torchVersion) {
  const h = crypto.createHash('sha256').update(torchVersion)
  for (const f of [FIXTURE_SCRIPT, ...EXPORTERS]) h.update(fs.readFileSync(f))
  return h.digest('hex').slice(0, 16)
}

/**
 * Makes the fixtures unless they are up to date; resolves to their folder. Runs beside the cargo
 * build (a child process with inherited stdio: no pipe to drain while cargo blocks this thread):
 * its AOTInductor compiles and the build share the cores instead of waiting for each other.
 */
function fixtures(release, python) {
  const dir = path.join(compatDir(release), 'fixtures')
  const stamp = path.join(dir, 'key.txt')
  const key = fixturesKey(RELEASES[release])
  if (fs.existsSync(stamp) && fs.readFileSync(stamp, 'utf8') === key) {
    log(`fixtures up to date in ${path.relative(ROOT, dir)}`)
    return Promise.resolve(dir)
  }
  fs.rmSync(dir, { recursive: true, force: true })
  log(`making fixtures with torch ${RELEASES[release]}'s Python (tools/compat_models.py)`)
  const child = spawn(python, [FIXTURE_SCRIPT, dir], { stdio: 'inherit', cwd: ROOT })
  return new Promise((resolve, reject) => {
    child.on('error', reject)
    child.on('close', (code) => {
      if (code !== 0) return reject(new Error(`tools/compat_models.py failed (exit ${code})`))
      fs.writeFileSync(stamp, key)
      resolve(dir)
    })
  })
}

/** Copies what an app runs into `dest` beside `addon` (as torch-node.node) and links libtorch. */
function stagePackage(dest, addon, libtorch) {
  fs.rmSync(dest, { recursive: true, force: true })
  fs.mkdirSync(dest, { recursive: true })
  for (const f of PACKAGE_FILES) fs.cpSync(path.join(ROOT, f), path.join(dest, f), { recursive: true })
  fs.copyFileSync(addon, path.join(dest, 'torch-node.node'))
  if (libtorch) linkLibtorch(libtorch, dest)
}

function cargo(args, env) {
  log(`cargo ${args.join(' ')} (CARGO_TARGET_DIR=${path.relative(ROOT, env.CARGO_TARGET_DIR)})`)
  const r = spawnSync('cargo', args, { cwd: ROOT, env, stdio: 'inherit' })
  if (r.status !== 0) throw new Error(`cargo ${args[0]} against libtorch ${env.LIBTORCH} failed (exit ${r.status})`)
}

/** The cargo environment for `release`: scripts/build.js's, in this release's own target dir. */
function compatEnv(release, torchDir) {
  const env = cargoEnv(torchDir)
  env.CARGO_TARGET_DIR = path.join(compatDir(release), 'target')
  // .ci/run exports it for the main build's typings; this build's definitions are not those.
  delete env.NAPI_TYPE_DEF_TMP_FOLDER
  return env
}

/**
 * A cold target dir rebuilds every dependency crate (~200: the cold build took 678 s in CI on a
 * 2-core Zen 3, the seeded one 336), though only the crates that link libtorch differ between
 * releases. So a missing one starts as a copy of the main build's target/release: cargo's
 * fingerprints still say what is stale (torch-sys reruns its build script when LIBTORCH or
 * CXXFLAGS change, and everything above it rebuilds), and the main target/ is copied, never
 * linked, so it is never touched.
 */
function seedTarget(targetDir) {
  const main = path.join(ROOT, 'target', 'release')
  if (fs.existsSync(targetDir) || !fs.existsSync(path.join(main, '.fingerprint'))) return
  const started = Date.now()
  for (const sub of ['.fingerprint', 'build', 'deps']) {
    fs.cpSync(path.join(main, sub), path.join(targetDir, 'release', sub), { recursive: true, preserveTimestamps: true })
  }
  log(`seeded ${path.relative(ROOT, targetDir)} from target/release in ${Math.round((Date.now() - started) / 1000)} s`)
}

function build(release, torchDir) {
  const env = compatEnv(release, torchDir)
  const started = Date.now()
  seedTarget(env.CARGO_TARGET_DIR)
  cargo(['build', '--release', '--lib'], env)
  // The core's unit tests of the libtorch version and of the ops this release lacks (stand-ins
  // that fail with a message, never an abort): --workspace as tools/test.js, so no dependency
  // is built again with other features.
  const testEnv = {
    ...env,
    LD_LIBRARY_PATH: [path.join(torchDir, 'lib'), env.LD_LIBRARY_PATH].filter(Boolean).join(':'),
  }
  cargo(['test', '--release', '--workspace', '--lib', '--', 'ffi::runtime::tests'], testEnv)
  log(`built against libtorch ${libtorchVersion(torchDir).version} in ${Math.round((Date.now() - started) / 1000)} s`)
}

/** The package the smoke suite loads: what an app runs, beside the addon built for `release`. */
function stage(release, torchDir) {
  const addon = path.join(compatEnv(release, torchDir).CARGO_TARGET_DIR, 'release', 'libtorch_node.so')
  if (!fs.existsSync(addon)) throw new Error(`${addon} is not built: run without --skip-build`)
  const pkg = path.join(compatDir(release), 'pkg')
  stagePackage(pkg, addon, torchDir)
  return pkg
}

function smoke(pkg, fixturesDir, release) {
  const r = spawnSync(
    process.execPath,
    ['--expose-gc', '--test', '--test-concurrency=1', path.join(ROOT, '__tests__', 'compat', 'smoke.test.js')],
    {
      cwd: ROOT,
      stdio: 'inherit',
      env: { ...process.env, TORCH_NODE_PACKAGE: pkg, TORCH_NODE_FIXTURES: fixturesDir, TORCH_NODE_COMPAT: release },
    },
  )
  if (r.status !== 0) throw new Error(`the smoke suite against libtorch ${release} failed (exit ${r.status})`)
}

async function main(argv) {
  const release = argv.find((a) => !a.startsWith('--'))
  if (!RELEASES[release]) {
    throw new Error(`usage: node tools/libtorch-compat.js <${Object.keys(RELEASES).join('|')}> [--skip-build]`)
  }
  const started = Date.now()
  const { python, torchDir } = provision(release)
  const made = fixtures(release, python)
  made.catch(() => {}) // awaited below, after the build
  if (!argv.includes('--skip-build')) build(release, torchDir)
  const pkg = stage(release, torchDir)
  smoke(pkg, await made, release)
  log(`libtorch ${release}: built and smoke-tested in ${Math.round((Date.now() - started) / 1000)} s`)
}

module.exports = { provision, fixtures, stagePackage, compatEnv, RELEASES, PACKAGE_FILES }

if (require.main === module) {
  main(process.argv.slice(2)).catch((e) => {
    console.error(`[torch-node] libtorch-compat: ${e.message}`)
    process.exit(1)
  })
}

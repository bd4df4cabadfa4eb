'use strict'
// `npm install`: provision libtorch, build the addon and, in a clone of this repository, generate
// the models and golden outputs and run the main job once (tools/models.js, tools/main-job.js:
// developer tools, not published). Installed as a dependency of an app,
// it fills the shared libtorch cache (scripts/cache.js) and links the prebuilt addon of the
// platform package (scripts/prebuild.js) to it; only without one does it build from source
// (Rust needed), leaving no cargo target/ behind.
const { execFileSync, spawnSync } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')
const { ensureLibtorch, log, ROOT, IS_CHECKOUT } = require('./libtorch')
const { buildWithProgress, linkLibtorch } = require('./build')
const { platformKey, packageName } = require('./prebuild')
const { progress } = require('./cache')

/** The installed platform package's folder, or null. */
function prebuiltDir() {
  const key = platformKey()
  if (!key) return null
  try {
    return path.dirname(require.resolve(`${packageName(key)}/package.json`, { paths: [ROOT] }))
  } catch {
    return null
  }
}

/** Loads the addon in a child process: the prebuilt can be refused (an older glibc, say). */
function loads() {
  const r = spawnSync(process.execPath, ['-e', 'require(process.argv[1]).ones([1])', ROOT], { encoding: 'utf8' })
  return r.status === 0
    ? null
    : (r.stderr
        .trim()
        .split('\n')
        .find((l) => l.includes('torch-node')) ?? r.stderr.trim())
}

async function main() {
  const isRepoInstall = IS_CHECKOUT && path.resolve(process.env.INIT_CWD || process.cwd()) === path.resolve(ROOT)
  const resolved = await ensureLibtorch({ withModelPackages: isRepoInstall })
  log(`libtorch: ${resolved.libtorch} (from ${resolved.source})`)
  const prebuilt = IS_CHECKOUT || process.env.TORCH_NODE_BUILD_FROM_SOURCE === '1' ? null : prebuiltDir()
  if (prebuilt) {
    fs.rmSync(path.join(ROOT, 'torch-node.node'), { force: true }) // a source build of an earlier install
    linkLibtorch(resolved.libtorch, prebuilt)
    const failure = loads()
    if (!failure)
      return log(`using the prebuilt addon of ${path.basename(path.dirname(prebuilt))}/${path.basename(prebuilt)}`)
    progress(`the prebuilt addon does not load here (${failure}); building from source`)
  }
  if (!IS_CHECKOUT) requireCargo()
  progress(
    `building the native addon from source (no prebuilt for ${platformKey() ?? `${process.platform}-${process.arch}`}): about 4 min on 2 cores`,
  )
  if (!IS_CHECKOUT) return void (await buildWithProgress(resolved, { clean: true }))
  // A clone: the models need only the venv's Python, not the addon, so they are made while
  // cargo builds (both use the two cores: cargo's single-threaded stretches and g++ runs of
  // AOTInductor fill each other's gaps). tools/ is not published: required here only.
  const models =
    isRepoInstall && !process.env.TORCH_NODE_SKIP_MODELS ? require('../tools/models').generate(resolved.python) : null
  // Settled at once, so that a failed build does not leave the models' rejection unhandled.
  const modelsDone = models?.then(
    () => null,
    (e) => e,
  )
  let buildError = null
  await buildWithProgress(resolved, { clean: false, quiet: true }).catch((e) => {
    buildError = e
  })
  const modelsError = await modelsDone
  if (buildError) throw buildError
  if (modelsError) throw modelsError
  if (models) execFileSync(process.execPath, [path.join(ROOT, 'tools', 'main-job.js')], { cwd: ROOT, stdio: 'inherit' })
}

function requireCargo() {
  if (spawnSync('cargo', ['--version'], { stdio: 'ignore' }).status === 0) return
  throw new Error(
    `no prebuilt addon for ${platformKey() ?? `${process.platform}-${process.arch}`} was installed ` +
      '(optional dependencies omitted?) and there is no Rust toolchain (cargo) to build one: install Rust ' +
      '(https://rustup.rs) or install without --omit=optional',
  )
}

main().catch((e) => {
  console.error(`[torch-node] install failed: ${e.message}`)
  process.exit(1)
})

'use strict'
// Builds the release addon `torch-node.node` against the libtorch that scripts/libtorch.js finds,
// with plain cargo into target/release — the same target dir and flags `cargo test` uses, so
// `npm test` does not rebuild libtch. `node scripts/build.js --typings` (npm run typings, for
// developers) builds through `napi build` instead, which also regenerates index.d.ts from the
// Rust doc comments; it builds into target/<triple>/ because napi passes --target.
const { execFileSync } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')
const { resolveLibtorch, log, ROOT } = require('./libtorch')

/** The environment every cargo command of this project runs with: the same LIBTORCH each time,
 * or torch-sys's build script reruns and rebuilds libtch (minutes). */
function cargoEnv(libtorch) {
  const env = { ...process.env, LIBTORCH: libtorch, LIBTORCH_BYPASS_VERSION_CHECK: '1' }
  delete env.LIBTORCH_USE_PYTORCH
  return env
}

function build(resolved = resolveLibtorch(), { typings = false } = {}) {
  const env = cargoEnv(resolved.libtorch)
  log('building the native addon (cold build: about 4 min on 2 cores; incremental: seconds)')
  if (typings) {
    const napiCli = path.join(ROOT, 'node_modules', '.bin', 'napi')
    const header = fs.readFileSync(path.join(__dirname, 'dts-header.d.ts'), 'utf8')
    execFileSync(napiCli, ['build', '--release', '--dts', 'index.d.ts', '--dts-header', header], { cwd: ROOT, env, stdio: 'inherit' })
  } else {
    execFileSync('cargo', ['build', '--release', '--lib'], { cwd: ROOT, env, stdio: 'inherit' })
    // Copy then rename: overwriting in place would corrupt the mapping of a process that has
    // the addon loaded.
    const tmp = path.join(ROOT, `torch-node.node.${process.pid}.tmp`)
    fs.copyFileSync(path.join(ROOT, 'target', 'release', 'libtorch_node.so'), tmp)
    fs.renameSync(tmp, path.join(ROOT, 'torch-node.node'))
  }
  log('built torch-node.node')
  return resolved
}

module.exports = { build, cargoEnv }

if (require.main === module) build(undefined, { typings: process.argv.includes('--typings') })

'use strict'
// Builds the release addon `torch-node.node` against the libtorch that scripts/libtorch.js finds.
// In a development clone (with @napi-rs/cli installed) `napi build` also regenerates index.d.ts;
// installed as a dependency, plain cargo builds the same library.
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

function build(resolved = resolveLibtorch()) {
  const env = cargoEnv(resolved.libtorch)
  const napiCli = path.join(ROOT, 'node_modules', '.bin', 'napi')
  log('building the native addon (cold build: about 4 min on 2 cores; incremental: seconds)')
  if (fs.existsSync(napiCli)) {
    execFileSync(napiCli, ['build', '--release', '--dts', 'index.d.ts', '--no-dts-header'], { cwd: ROOT, env, stdio: 'inherit' })
  } else {
    execFileSync('cargo', ['build', '--release', '--lib'], { cwd: ROOT, env, stdio: 'inherit' })
    fs.copyFileSync(path.join(ROOT, 'target', 'release', 'libtorch_node.so'), path.join(ROOT, 'torch-node.node'))
  }
  log('built torch-node.node')
  return resolved
}

module.exports = { build, cargoEnv }

if (require.main === module) build()

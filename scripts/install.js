'use strict'
// `npm install`: provision libtorch, build the addon and, in a clone of this repository, generate
// the models and golden outputs and run the main job once. Installed as a dependency of an app,
// it only provisions and builds.
const { execFileSync } = require('node:child_process')
const path = require('node:path')
const { resolveLibtorch, log, ROOT } = require('./libtorch')
const { build } = require('./build')

const isRepoInstall = path.resolve(process.env.INIT_CWD || process.cwd()) === path.resolve(ROOT)

const resolved = resolveLibtorch({ withModelPackages: isRepoInstall })
log(`libtorch: ${resolved.libtorch} (from ${resolved.source})`)
build(resolved)
if (isRepoInstall && !process.env.TORCH_NODE_SKIP_MODELS) {
  require('./models').generate(resolved.python)
  execFileSync(process.execPath, [path.join(__dirname, 'main-job.js')], { cwd: ROOT, stdio: 'inherit' })
}

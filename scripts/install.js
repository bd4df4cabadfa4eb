'use strict'
// `npm install`: provision libtorch, build the addon and, in a clone of this repository, generate
// the models and golden outputs and run the main job once. Installed as a dependency of an app,
// it fills the shared libtorch cache (scripts/cache.js) and builds, leaving no cargo target/.
const { execFileSync } = require('node:child_process')
const path = require('node:path')
const { ensureLibtorch, log, ROOT, IS_CHECKOUT } = require('./libtorch')
const { build } = require('./build')

async function main() {
  const isRepoInstall = IS_CHECKOUT && path.resolve(process.env.INIT_CWD || process.cwd()) === path.resolve(ROOT)
  const resolved = await ensureLibtorch({ withModelPackages: isRepoInstall })
  log(`libtorch: ${resolved.libtorch} (from ${resolved.source})`)
  build(resolved, { clean: !IS_CHECKOUT })
  if (isRepoInstall && !process.env.TORCH_NODE_SKIP_MODELS) {
    require('./models').generate(resolved.python)
    execFileSync(process.execPath, [path.join(__dirname, 'main-job.js')], { cwd: ROOT, stdio: 'inherit' })
  }
}

main().catch((e) => {
  console.error(`[torch-node] install failed: ${e.message}`)
  process.exit(1)
})

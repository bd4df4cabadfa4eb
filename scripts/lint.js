'use strict'
// `npm run lint`: `cargo fmt --check` and `cargo clippy -- -D warnings`, with the same LIBTORCH
// as the build (another value would make torch-sys rebuild libtch: minutes).
const { spawnSync } = require('node:child_process')
const { resolveLibtorch, ROOT } = require('./libtorch')
const { cargoEnv } = require('./build')

const env = cargoEnv(resolveLibtorch().libtorch)
for (const args of [['fmt', '--check'], ['clippy', '--release', '--lib', '--tests', '--', '-D', 'warnings']]) {
  console.log(`$ cargo ${args.join(' ')}`)
  const r = spawnSync('cargo', args, { cwd: ROOT, env, stdio: 'inherit' })
  if (r.status !== 0) process.exit(r.status ?? 1)
}

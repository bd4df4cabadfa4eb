'use strict'
// `npm run lint`: ESLint over every JS file (eslint.config.js; `npm run lint:js` runs it alone),
// TypeScript over lib/'s JSDoc (`tsc --noEmit -p tools/tsconfig.lib.json`; `npm run lint:types` alone),
// then `cargo fmt --check` and `cargo clippy -- -D warnings`, with the same LIBTORCH as the build
// (another value would make torch-sys rebuild libtch: minutes).
const { spawnSync } = require('node:child_process')
const path = require('node:path')
const { resolveLibtorch, ROOT } = require('../scripts/libtorch')
const { cargoEnv } = require('../scripts/build')

function run(command, args, env) {
  console.log(`$ ${[path.basename(command), ...args].join(' ')}`)
  const r = spawnSync(command, args, { cwd: ROOT, env, stdio: 'inherit' })
  if (r.status !== 0) process.exit(r.status ?? 1)
}

// ESLint's own bin, run by this Node (the package exports no path to it).
run(process.execPath, [path.join(path.dirname(require.resolve('eslint/package.json')), 'bin', 'eslint.js'), '.'])
run(process.execPath, [path.join(path.dirname(require.resolve('typescript/package.json')), 'bin', 'tsc'), '--noEmit', '-p', 'tools/tsconfig.lib.json'])
const env = cargoEnv(resolveLibtorch().libtorch)
run('cargo', ['fmt', '--check'], env)
run('cargo', ['clippy', '--release', '--lib', '--tests', '--', '-D', 'warnings'], env)

'use strict'
// `npm run lint`: Prettier's check over every JS file and hand-written declaration (.prettierrc.json;
// `npm run format` rewrites them), ESLint over every JS file (eslint.config.js; `npm run lint:js` runs it alone),
// TypeScript over lib/'s JSDoc (`tsc --noEmit -p tools/tsconfig.lib.json`; `npm run lint:types` alone),
// then `cargo fmt --check` and `cargo clippy -- -D warnings` over the workspace (the addon and crates/core), with the same LIBTORCH as the build
// (another value would make torch-sys rebuild libtch: minutes).
const { spawnSync } = require('node:child_process')
const path = require('node:path')
const { resolveLibtorch, ROOT } = require('../scripts/libtorch')
const { cargoEnv } = require('../scripts/build')

/** What Prettier formats: every JS file and the hand-written declarations (what git ignores is skipped). */
const FORMATTED = ['**/*.{js,mjs,cjs}', 'lib/**/*.d.ts']

function run(command, args, env) {
  console.log(`$ ${[path.basename(command), ...args].join(' ')}`)
  const r = spawnSync(command, args, { cwd: ROOT, env, stdio: 'inherit' })
  if (r.status !== 0) process.exit(r.status ?? 1)
}

/** A dev dependency's bin, run by this Node (the packages export no path to them). */
const bin = (pkg, file) => path.join(path.dirname(require.resolve(`${pkg}/package.json`)), 'bin', file)
run(process.execPath, [bin('prettier', 'prettier.cjs'), '--check', ...FORMATTED])
run(process.execPath, [bin('eslint', 'eslint.js'), '.'])
run(process.execPath, [bin('typescript', 'tsc'), '--noEmit', '-p', 'tools/tsconfig.lib.json'])
const env = cargoEnv(resolveLibtorch().libtorch)
run('cargo', ['fmt', '--all', '--check'], env)
run('cargo', ['clippy', '--release', '--workspace', '--all-targets', '--', '-D', 'warnings'], env)

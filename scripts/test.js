'use strict'
// `npm test`: the napi-free Rust unit tests (cargo test) and every node:test file in __tests__/.
const { spawnSync } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')
const { resolveLibtorch, ROOT } = require('./libtorch')
const { cargoEnv } = require('./build')

function run(cmd, args, env) {
  console.log(`$ ${cmd} ${args.join(' ')}`)
  const r = spawnSync(cmd, args, { cwd: ROOT, env, stdio: 'inherit' })
  if (r.status !== 0) process.exit(r.status ?? 1)
}

run('cargo', ['test', '--release', '--lib'], cargoEnv(resolveLibtorch().libtorch))
const files = fs.readdirSync(path.join(ROOT, '__tests__')).filter((f) => f.endsWith('.test.js')).sort()
run(process.execPath, ['--expose-gc', '--test', '--test-concurrency=1', ...files.map((f) => path.join('__tests__', f))], process.env)

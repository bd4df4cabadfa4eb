#!/usr/bin/env node
'use strict'
// The `torch-node` command (package.json "bin"): `serve` is lib/serve/cli.js's, the rest
// lib/cli.js's.
const [command, ...rest] = process.argv.slice(2)
const run =
  command === 'serve' ? require('../lib/serve/cli').main(rest) : require('../lib/cli').main(process.argv.slice(2))
run.then(
  (code) => {
    process.exitCode = code
  },
  (e) => {
    // a bug in the CLI itself: still one line, never a stack
    process.stderr.write(`torch-node: ${e.code || 'Error'}: ${String(e.message).split('\n')[0]}\n`)
    process.exitCode = 1
  },
)

#!/usr/bin/env node
'use strict'
// The `torch-node` command (package.json "bin"); the work is in lib/cli.js.
require('../lib/cli')
  .main(process.argv.slice(2))
  .then(
    (code) => {
      process.exitCode = code
    },
    (e) => {
      // a bug in the CLI itself: still one line, never a stack
      process.stderr.write(`torch-node: ${e.code || 'Error'}: ${String(e.message).split('\n')[0]}\n`)
      process.exitCode = 1
    },
  )

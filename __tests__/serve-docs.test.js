'use strict'
// docs/serving.md covers every flag of `torch-node serve` (lib/serve/cli.js's usage): each has a
// row in its flags table.
const { test } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { USAGE } = require('../lib/serve/cli')

test('every flag of the usage has a row in docs/serving.md', () => {
  const flags = new Set(USAGE.match(/--[a-z][a-z-]+/g))
  assert.ok(flags.has('--max-memory') && flags.size >= 12, [...flags].join(' '))
  const doc = fs.readFileSync(path.join(__dirname, '..', 'docs', 'serving.md'), 'utf8')
  const rows = new Set([...doc.matchAll(/^\| `(--[a-z][a-z-]+)/gm)].map((m) => m[1]))
  assert.deepEqual(
    [...flags].filter((f) => !rows.has(f)),
    [],
  )
})

'use strict'
// The typings serve a TypeScript user: the README tour (__tests__/types/tour.ts) type-checks
// under `tsc --noEmit --strict`, importing 'torch-node' through the package's `exports`, and
// the misuses it marks with @ts-expect-error (a misspelt dtype, an async tidy, `new Tensor()`)
// stay type errors.
const { test } = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const { spawnSync } = require('node:child_process')

const ROOT = path.join(__dirname, '..')
const TSC = path.join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc')

test('the README tour type-checks under tsc --strict', () => {
  const args = [
    '--noEmit',
    '--strict',
    '--target',
    'es2022',
    '--module',
    'nodenext',
    '--moduleResolution',
    'nodenext',
    '--lib',
    'es2022,dom,esnext.disposable',
    path.join('__tests__', 'types', 'tour.ts'),
  ]
  const r = spawnSync(process.execPath, [TSC, ...args], { cwd: ROOT, encoding: 'utf8', timeout: 120_000 })
  assert.equal(r.status, 0, `tsc reported:\n${r.stdout}${r.stderr}`)
})

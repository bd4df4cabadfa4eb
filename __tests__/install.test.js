'use strict'
// A fresh clone's install (issue 25): `npm ci` needs a lockfile complete for every platform's
// optional packages; every dependency install script is decided in allowScripts (npm 11 warns
// about the others, npm 12 blocks them); the project sets no npm config key npm does not know;
// the CI check of the install log catches what a newcomer would read as a failure.
const { test } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { complaints } = require('../tools/check-install-log')

const ROOT = path.join(__dirname, '..')
const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8'))
const lock = JSON.parse(fs.readFileSync(path.join(ROOT, 'package-lock.json'), 'utf8'))

/** The lock entry a dependency of the package at `from` resolves to (node's lookup, upwards). */
function resolveInLock(from, name) {
  for (let dir = from; ; dir = dir.slice(0, Math.max(0, dir.lastIndexOf('/node_modules/')))) {
    const key = `${dir ? `${dir}/` : ''}node_modules/${name}`
    if (lock.packages[key]) return key
    if (!dir) return null
  }
}

test('the lockfile is in sync with package.json', () => {
  const root = lock.packages['']
  for (const field of [
    'dependencies',
    'devDependencies',
    'optionalDependencies',
    'peerDependencies',
    'peerDependenciesMeta',
  ]) {
    assert.deepEqual(root[field] ?? {}, pkg[field] ?? {}, `package-lock.json's ${field} differ from package.json's`)
  }
})

test('the lockfile records every optional platform package (npm ci needs them all)', () => {
  const missing = []
  for (const [at, entry] of Object.entries(lock.packages)) {
    for (const name of Object.keys(entry.optionalDependencies ?? {})) {
      if (!resolveInLock(at, name)) missing.push(`${name} (optional dependency of ${at || 'the root'})`)
    }
  }
  assert.deepEqual(missing, [])
})

test('allowScripts decides every dependency that has an install script', () => {
  const withScripts = Object.entries(lock.packages)
    .filter(([at, entry]) => at && entry.hasInstallScript)
    .map(([at]) => at.slice(at.lastIndexOf('node_modules/') + 'node_modules/'.length))
  assert.ok(withScripts.includes('onnxruntime-node'), 'onnxruntime-node has a postinstall: the lock says so')
  const undecided = [...new Set(withScripts)].filter((name) => typeof pkg.allowScripts?.[name] !== 'boolean')
  assert.deepEqual(
    undecided,
    [],
    'add each to package.json allowScripts (true or false) and say why in docs/install.md',
  )
  // Denied on purpose: onnxruntime-node's postinstall downloads CUDA providers from the network.
  assert.equal(pkg.allowScripts['onnxruntime-node'], false)
})

test('the project sets no npm config key that npm does not know', () => {
  // npm 11 warns about unknown keys in a project .npmrc ("will stop working in the next major").
  const npmrc = path.join(ROOT, '.npmrc')
  const keys = fs.existsSync(npmrc)
    ? fs
        .readFileSync(npmrc, 'utf8')
        .split('\n')
        .filter((l) => /^\s*[^#;\s]/.test(l))
        .map((l) => l.split('=')[0].trim())
    : []
  assert.deepEqual(
    keys.filter((k) => k.includes('onnxruntime')),
    [],
  )
})

test('the install-log check flags what a newcomer would read as a failure', () => {
  const log = [
    'npm warn Unknown project config "onnxruntime-node-install". This will stop working in the next major version of npm.',
    'npm warn install-scripts   protobufjs@7.6.6 (postinstall: node scripts/postinstall)',
    "ERROR: pip's dependency resolver does not currently take into account all the packages that are installed.",
    'npm warn EBADENGINE Unsupported engine {',
    '[torch-node] built torch-node.node',
  ].join('\n')
  assert.deepEqual(
    complaints(log, 22).map((c) => c.split(':')[0]),
    ['line 1', 'line 2', 'line 3', 'line 4'],
  )
  // EBADENGINE is expected on Node 20 only (end of life; dev tools require 22): docs/install.md
  assert.deepEqual(
    complaints(log, 20).map((c) => c.split(':')[0]),
    ['line 1', 'line 2', 'line 3'],
  )
  assert.deepEqual(complaints('[torch-node] pip install numpy\nadded 322 packages in 34s\n', 24), [])
})

test("the install-log check flags third-party noise: Python warnings, progress bars, pip's and cargo's steps", () => {
  const log = [
    '/x/torch/utils/_pytree.py:1: FutureWarning: isinstance(treespec, LeafSpec) is deprecated',
    'Loading weights: 100%|██████████| 101/101',
    'Collecting transformers==5.23.0',
    '   Compiling image v0.25.10',
    '[torch-node] models: resnet18.pt2: made in 41 s',
    '[torch-node] built torch-node.node from source in 212 s',
  ].join('\n')
  assert.deepEqual(
    complaints(log, 24).map((c) => c.split(':')[0]),
    ['line 1', 'line 2', 'line 3', 'line 4'],
  )
})

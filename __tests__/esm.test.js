'use strict'
// ESM and CommonJS are both first-class: `import { ones } from 'torch-node'` gives every public
// name, the same objects `require` gives. Run through the package name (the `exports` map), in a
// child process of the Node line running the suite.
const { test } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { spawnSync } = require('node:child_process')

const ROOT = path.join(__dirname, '..')

test(`import { ... } from 'torch-node' has every CommonJS export (Node ${process.versions.node})`, () => {
  // An app folder whose node_modules/torch-node links to this checkout.
  const app = fs.mkdtempSync(path.join(os.tmpdir(), 'torch-node-esm-'))
  try {
    fs.mkdirSync(path.join(app, 'node_modules'))
    fs.symlinkSync(ROOT, path.join(app, 'node_modules', 'torch-node'), 'dir')
    fs.writeFileSync(
      path.join(app, 'main.mjs'),
      `
      import torch, * as ns from 'torch-node'
      import { ones, ScriptModule, Tensor } from 'torch-node'
      import { createRequire } from 'node:module'
      const cjs = createRequire(import.meta.url)('torch-node')
      const named = Object.keys(ns).filter((k) => k !== 'default').sort()
      const same = named.every((k) => ns[k] === cjs[k]) && torch === cjs
      const t = ones([2, 2])
      console.log(JSON.stringify({ named, cjs: Object.keys(cjs).sort(), same, isTensor: t instanceof Tensor,
        repr: t.toString(), hasModule: typeof ScriptModule.load === 'function' }))
    `,
    )
    const r = spawnSync(process.execPath, ['main.mjs'], { cwd: app, encoding: 'utf8', timeout: 60_000 })
    assert.equal(r.status, 0, r.stderr)
    const out = JSON.parse(r.stdout.trim().split('\n').pop())
    assert.deepEqual(out.named, out.cjs, 'ESM named exports = CommonJS exports')
    assert.ok(out.same, 'the same objects')
    assert.ok(out.isTensor)
    assert.equal(out.repr, 'tensor([[1., 1.],\n        [1., 1.]])')
    assert.ok(out.hasModule)
  } finally {
    fs.rmSync(app, { recursive: true, force: true })
  }
})

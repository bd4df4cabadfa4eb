'use strict'
// The addon finds libtorch by itself (RUNPATH from build.rs) and keeps libtorch_cuda linked
// when libtorch has it, so CUDA works on GPU machines (tch-rs issues #177, #904, #980).
const { test } = require('node:test')
const assert = require('node:assert/strict')
const { execFileSync, spawnSync } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')

const ADDON = path.join(__dirname, '..', 'torch-node.node')

function dynamicSection() {
  return execFileSync('readelf', ['-d', ADDON], { encoding: 'utf8' })
}

function runpath() {
  const m = dynamicSection().match(/\((?:RUNPATH|RPATH)\)\s+Library r(?:un)?path: \[(.*)\]/)
  assert.ok(m, 'the addon has no RUNPATH/RPATH')
  return m[1].split(':')
}

test('RUNPATH points at a libtorch lib dir', () => {
  const dirs = runpath()
  assert.ok(dirs.some((d) => fs.existsSync(path.join(d, 'libtorch_cpu.so'))), `no libtorch_cpu.so in ${dirs}`)
})

test('libtorch_cuda.so is NEEDED whenever libtorch has it', () => {
  const libDir = runpath().find((d) => fs.existsSync(path.join(d, 'libtorch_cpu.so')))
  const needed = [...dynamicSection().matchAll(/\(NEEDED\)\s+Shared library: \[(.*)\]/g)].map((m) => m[1])
  assert.ok(needed.includes('libtorch_cpu.so'))
  if (fs.existsSync(path.join(libDir, 'libtorch_cuda.so'))) {
    assert.ok(needed.includes('libtorch_cuda.so'), `libtorch_cuda.so exists in ${libDir} but is not NEEDED: ${needed}`)
  }
})

test('the addon loads with no LD_LIBRARY_PATH', () => {
  const env = { ...process.env }
  delete env.LD_LIBRARY_PATH
  const r = spawnSync(process.execPath, ['-e', "console.log(require('.').ones([2]).toString())"], {
    cwd: path.join(__dirname, '..'),
    env,
    encoding: 'utf8',
  })
  assert.equal(r.status, 0, r.stderr)
  assert.equal(r.stdout.trim(), 'tensor([1., 1.])')
})

'use strict'
// The addon finds libtorch by itself: its RUNPATH is `$ORIGIN/libtorch/lib`, a link the install
// step makes to the libtorch folder (scripts/build.js), so no absolute path of the build machine is
// inside it and a moved app keeps working. It needs libtorch.so, which loads libtorch_cuda.so when
// libtorch has it, so CUDA works on GPU machines (tch-rs issues #177, #904, #980).
const { test } = require('node:test')
const assert = require('node:assert/strict')
const { execFileSync, spawnSync } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')

const ROOT = path.join(__dirname, '..')
const ADDON = path.join(ROOT, 'torch-node.node')
const LIB = path.join(ROOT, 'libtorch', 'lib')

function dynamicSection() {
  return execFileSync('readelf', ['-d', ADDON], { encoding: 'utf8' })
}

test('RUNPATH is $ORIGIN/libtorch/lib only, and the link there holds libtorch', () => {
  const m = dynamicSection().match(/\((?:RUNPATH|RPATH)\)\s+Library r(?:un)?path: \[(.*)\]/)
  assert.ok(m, 'the addon has no RUNPATH/RPATH')
  assert.equal(m[1], '$ORIGIN/libtorch/lib')
  assert.ok(fs.lstatSync(path.join(ROOT, 'libtorch')).isSymbolicLink())
  assert.ok(fs.existsSync(path.join(LIB, 'libtorch_cpu.so')), `no libtorch_cpu.so in ${LIB}`)
})

test('libtorch.so is NEEDED, and libtorch_cuda.so is loaded whenever libtorch has it', () => {
  const needed = [...dynamicSection().matchAll(/\(NEEDED\)\s+Shared library: \[(.*)\]/g)].map((m) => m[1])
  assert.ok(needed.includes('libtorch_cpu.so') && needed.includes('libtorch.so'), String(needed))
  const maps = execFileSync(
    process.execPath,
    ['-e', "require('.'); process.stdout.write(require('fs').readFileSync('/proc/self/maps', 'utf8'))"],
    { cwd: ROOT, encoding: 'utf8', maxBuffer: 64 << 20 },
  )
  assert.equal(/\/libtorch_cuda\.so$/m.test(maps), fs.existsSync(path.join(LIB, 'libtorch_cuda.so')))
})

test('the addon loads with no LD_LIBRARY_PATH', () => {
  const env = { ...process.env }
  delete env.LD_LIBRARY_PATH
  const r = spawnSync(process.execPath, ['-e', "console.log(require('.').ones([2]).toString())"], {
    cwd: ROOT,
    env,
    encoding: 'utf8',
  })
  assert.equal(r.status, 0, r.stderr)
  assert.equal(r.stdout.trim(), 'tensor([1., 1.])')
})

test('a moved package still loads; with its libtorch gone, require names the fix in one line', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'torch-node-moved-'))
  try {
    for (const f of ['index.js', 'package.json', 'torch-node.node', 'lib', 'data']) {
      fs.cpSync(path.join(ROOT, f), path.join(dir, f), { recursive: true })
    }
    fs.symlinkSync(fs.readlinkSync(path.join(ROOT, 'libtorch')), path.join(dir, 'libtorch'))
    const run = () =>
      spawnSync(process.execPath, ['-e', "console.log(require('.').ones([2]).toString())"], {
        cwd: dir,
        encoding: 'utf8',
      })
    const ok = run()
    assert.equal(ok.status, 0, ok.stderr)
    assert.equal(ok.stdout.trim(), 'tensor([1., 1.])')
    fs.rmSync(path.join(dir, 'libtorch'))
    fs.symlinkSync(path.join(dir, 'cleared-cache', 'torch'), path.join(dir, 'libtorch'))
    const gone = spawnSync(
      process.execPath,
      ['-e', "try { require('.') } catch (e) { console.log(e.code, e.message) }"],
      { cwd: dir, encoding: 'utf8' },
    )
    const line = gone.stdout.trim()
    const info = `stdout: ${line}\nstatus ${gone.status} signal ${gone.signal}\nstderr: ${gone.stderr.slice(-2000)}`
    assert.equal(line.split('\n').length, 1, info)
    assert.match(line, /^LibraryLoadError torch-node: libtorch is missing: .* run `npm rebuild torch-node`/, info)
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
})

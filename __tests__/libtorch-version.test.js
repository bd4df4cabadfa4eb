'use strict'
// Building against libtorch 2.11, 2.12 and 2.13 (issue 35): the version read from a libtorch
// folder's headers, the releases refused, and what the build adds for 2.11 (the stand-in header).
// The build and a smoke suite against PyPI's torch 2.11 are tools/libtorch-compat.js (CI).
const { test } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { libtorchVersion } = require('../scripts/libtorch')
const { cargoEnv, COMPAT_HEADER } = require('../scripts/build')
const torch = require('..')

/** A folder shaped like libtorch whose headers say `major.minor.patch`. */
function fakeLibtorch(major, minor, patch, header = 'torch/headeronly/version.h') {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'torch-node-libtorch-'))
  const file = path.join(dir, 'include', header)
  fs.mkdirSync(path.dirname(file), { recursive: true })
  fs.writeFileSync(
    file,
    `#pragma once\n#define TORCH_VERSION_MAJOR ${major}\n#define TORCH_VERSION_MINOR ${minor}\n` +
      `#define TORCH_VERSION_PATCH ${patch}\n#define TORCH_VERSION_ABI_TAG 0\n`,
  )
  return dir
}

test('the version is read from the headers, in both layouts', () => {
  assert.deepEqual(libtorchVersion(fakeLibtorch(2, 11, 0)), { version: '2.11.0', major: 2, minor: 11, patch: 0 })
  const older = fakeLibtorch(2, 12, 1, 'torch/csrc/api/include/torch/version.h')
  assert.equal(libtorchVersion(older).version, '2.12.1')
})

test('a release torch-node does not build against is refused in one line', () => {
  const dir = fakeLibtorch(2, 10, 0)
  assert.throws(() => libtorchVersion(dir), {
    message: `${dir} is libtorch 2.10.0; torch-node builds against 2.11, 2.12, 2.13 (tch 0.26)`,
  })
  const empty = fs.mkdtempSync(path.join(os.tmpdir(), 'torch-node-libtorch-'))
  assert.throws(() => libtorchVersion(empty), {
    message: `${empty} is not a libtorch folder (no include/torch/.../version.h)`,
  })
})

test('against 2.11 the C++ compiles get the stand-in header; against 2.12 and 2.13 nothing', () => {
  const saved = process.env.CXXFLAGS
  try {
    delete process.env.CXXFLAGS
    const env = cargoEnv(fakeLibtorch(2, 11, 0))
    assert.equal(env.CXXFLAGS, `-include ${COMPAT_HEADER}`)
    assert.equal(env.LIBTORCH_BYPASS_VERSION_CHECK, '1')
    assert.ok(fs.existsSync(COMPAT_HEADER))
    process.env.CXXFLAGS = '-O2'
    assert.equal(cargoEnv(fakeLibtorch(2, 11, 0)).CXXFLAGS, `-O2 -include ${COMPAT_HEADER}`)
    assert.equal(cargoEnv(fakeLibtorch(2, 12, 0)).CXXFLAGS, '-O2')
    delete process.env.CXXFLAGS
    assert.equal(cargoEnv(fakeLibtorch(2, 13, 0)).CXXFLAGS, undefined)
  } finally {
    if (saved === undefined) delete process.env.CXXFLAGS
    else process.env.CXXFLAGS = saved
  }
})

test('the stand-in header declares the ops the addon reports missing on 2.11', () => {
  const header = fs.readFileSync(COMPAT_HEADER, 'utf8')
  const declared = [...header.matchAll(/^TORCH_NODE_STAND_IN\([^,]+, (\w+), "2\.12"\)$/gm)].map((m) => m[1])
  assert.equal(declared.length, 14)
  assert.ok(declared.includes('_scaled_dot_product_attention_math_for_mps'))
  if (torch.libtorchVersion() === '2.11') assert.deepEqual(torch.libtorch.missingOps(), declared)
})

test('torch.version and torch.libtorch report the libtorch this addon runs', () => {
  assert.match(torch.version, /^2\.1[123]\.\d+$/)
  assert.equal(torch.libtorch.version, torch.version)
  assert.ok(torch.version.startsWith(`${torch.libtorchVersion()}.`))
  assert.equal(torch.libtorch.missingOps().length, torch.libtorchVersion() === '2.11' ? 14 : 0)
})

'use strict'
// The shared libtorch cache (scripts/cache.js) against a local index that serves small fake
// wheels (real ELF files under libtorch's names): what the CPU variant takes, the libtorch.so
// retarget, concurrent fills, sha256 refusal, a stale lock; and wheel.js's zip reader.
const { test } = require('node:test')
const assert = require('node:assert/strict')
const { spawn } = require('node:child_process')
const crypto = require('node:crypto')
const fs = require('node:fs')
const http = require('node:http')
const os = require('node:os')
const path = require('node:path')
const zlib = require('node:zlib')
const { listEntries, extractEntry, neededOf, retargetNeeded } = require('../scripts/wheel')

const ROOT = path.join(__dirname, '..')
const LIB = path.join(ROOT, 'libtorch', 'lib')

/** A zip file from [name, Buffer] pairs; `deflate` picks the method per entry. */
function zip(files, deflate = () => true) {
  const locals = []
  const central = []
  let offset = 0
  for (const [name, data] of files) {
    const method = deflate(name) ? 8 : 0
    const body = method === 8 ? zlib.deflateRawSync(data) : data
    const n = Buffer.from(name)
    const crc = zlib.crc32(data)
    const local = Buffer.alloc(30)
    local.writeUInt32LE(0x04034b50, 0)
    local.writeUInt16LE(20, 4)
    local.writeUInt16LE(method, 8)
    local.writeUInt32LE(crc, 14)
    local.writeUInt32LE(body.length, 18)
    local.writeUInt32LE(data.length, 22)
    local.writeUInt16LE(n.length, 26)
    const cd = Buffer.alloc(46)
    cd.writeUInt32LE(0x02014b50, 0)
    cd.writeUInt16LE(20, 4)
    cd.writeUInt16LE(20, 6)
    cd.writeUInt16LE(method, 10)
    cd.writeUInt32LE(crc, 16)
    cd.writeUInt32LE(body.length, 20)
    cd.writeUInt32LE(data.length, 24)
    cd.writeUInt16LE(n.length, 28)
    cd.writeUInt32LE(offset, 42)
    locals.push(local, n, body)
    central.push(cd, n)
    offset += 30 + n.length + body.length
  }
  const cdBuf = Buffer.concat(central)
  const end = Buffer.alloc(22)
  end.writeUInt32LE(0x06054b50, 0)
  end.writeUInt16LE(files.length, 8)
  end.writeUInt16LE(files.length, 10)
  end.writeUInt32LE(cdBuf.length, 12)
  end.writeUInt32LE(offset, 16)
  return Buffer.concat([...locals, cdBuf, end])
}

// Stand-ins: libgomp (small, real ELF, needs only system libraries) under each big library's
// name; the wheel's real libtorch.so (it needs libtorch_cpu.so and libtorch_cuda.so).
const small = fs.readFileSync(path.join(LIB, 'libgomp.so.1'))
const WHEELS = {
  torch: ['torch-2.13.0-cp311-cp311-manylinux_2_28_x86_64.whl', [
    ['torch/__init__.py', Buffer.from('# python\n')],
    ['torch/include/', Buffer.alloc(0)],
    ['torch/include/ATen/ATen.h', Buffer.from('#pragma once\n')],
    ['torch/lib/libtorch_cpu.so', small],
    ['torch/lib/libc10.so', small],
    ['torch/lib/libgomp.so.1', small],
    ['torch/lib/libtorch.so', fs.readFileSync(path.join(LIB, 'libtorch.so'))],
    ['torch/lib/libtorch_cuda.so', small],
    ['torch/lib/libtorch_python.so', small],
  ]],
  'nvidia-cuda-runtime': ['nvidia_cuda_runtime-13.0.96-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl', [
    ['nvidia/cu13/lib/libcudart.so.13', small], ['nvidia/cu13/include/cuda.h', Buffer.from('')]]],
  'nvidia-cuda-cupti': ['nvidia_cuda_cupti-13.0.85-py3-none-manylinux_2_25_x86_64.whl', [
    ['nvidia/cu13/lib/libcupti.so.13', small], ['nvidia/cu13/lib/libnvperf_host.so', small]]],
}

/**
 * A PEP 691 index on localhost; `corrupt` serves other bytes than the recorded sha256; `extra`
 * adds entries to the torch wheel (recorded with their sha256: a hostile index or mirror).
 */
async function serveIndex({ corrupt = false, extra = [] } = {}) {
  const blobs = new Map()
  const downloads = new Map()
  for (const [project, [filename, files]] of Object.entries(WHEELS)) {
    const data = zip(project === 'torch' ? [...files, ...extra] : files, (n) => !n.endsWith('.h'))
    blobs.set(filename, { project, data, sha256: crypto.createHash('sha256').update(data).digest('hex') })
  }
  const server = http.createServer((req, res) => {
    const simple = /^\/simple\/([^/]+)\/$/.exec(req.url)
    if (simple) {
      const files = [...blobs].filter(([, b]) => b.project === simple[1]).map(([filename, b]) => ({
        filename, url: `../../files/${filename}`, hashes: { sha256: b.sha256 }, size: b.data.length, yanked: false,
      }))
      res.setHeader('content-type', 'application/vnd.pypi.simple.v1+json')
      return res.end(JSON.stringify({ files }))
    }
    const file = /^\/files\/(.+)$/.exec(req.url)
    if (file && blobs.has(file[1])) {
      downloads.set(file[1], (downloads.get(file[1]) ?? 0) + 1)
      const data = Buffer.from(blobs.get(file[1]).data)
      if (corrupt) data[data.length >> 1] ^= 0xff
      return res.end(data)
    }
    res.statusCode = 404
    res.end()
  })
  await new Promise((r) => server.listen(0, '127.0.0.1', r))
  return { url: `http://127.0.0.1:${server.address().port}/simple`, downloads, close: () => server.close() }
}

function fill(cacheDir, index, extra = {}) {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [path.join(ROOT, 'scripts', 'cache.js'), 'cpu'], {
      env: { ...process.env, TORCH_NODE_CACHE: cacheDir, TORCH_NODE_PYPI_INDEX: index.url, ...extra },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let out = ''
    child.stdout.on('data', (d) => (out += d))
    child.stderr.on('data', (d) => (out += d))
    child.on('close', (code) => resolve({ code, out }))
  })
}

test('zip reader: stored and deflated entries round-trip; a flipped byte fails the CRC', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'torch-node-zip-'))
  try {
    const big = crypto.randomBytes(300000)
    const file = path.join(dir, 'a.zip')
    fs.writeFileSync(file, zip([['x/stored.bin', big], ['x/deflated.txt', Buffer.from('hello '.repeat(1000))], ['empty', Buffer.alloc(0)]],
      (n) => n.endsWith('.txt')))
    const entries = listEntries(file)
    assert.deepEqual(entries.map((e) => [e.name, e.method]), [['x/stored.bin', 0], ['x/deflated.txt', 8], ['empty', 0]])
    for (const e of entries) await extractEntry(file, e, path.join(dir, 'out', e.name))
    assert.ok(fs.readFileSync(path.join(dir, 'out/x/stored.bin')).equals(big))
    assert.equal(fs.readFileSync(path.join(dir, 'out/x/deflated.txt'), 'utf8'), 'hello '.repeat(1000))
    assert.equal(fs.readFileSync(path.join(dir, 'out/empty')).length, 0)
    const bad = fs.readFileSync(file)
    bad[100] ^= 0xff // inside the stored entry's data
    fs.writeFileSync(file, bad)
    await assert.rejects(extractEntry(file, entries[0], path.join(dir, 'bad')), /CRC mismatch/)
    fs.writeFileSync(file, 'not a zip')
    assert.throws(() => listEntries(file), /not a zip file/)
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
})

test('retargetNeeded: the CPU copy of libtorch.so names libtorch_cpu.so instead of libtorch_cuda.so', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'torch-node-elf-'))
  try {
    const copy = path.join(dir, 'libtorch.so')
    fs.copyFileSync(path.join(LIB, 'libtorch.so'), copy)
    const before = neededOf(copy)
    const cuda = before.filter((n) => n === 'libtorch_cuda.so').length
    assert.equal(retargetNeeded(copy, 'libtorch_cuda.so', 'libtorch_cpu.so'), cuda)
    const after = neededOf(copy)
    assert.ok(!after.includes('libtorch_cuda.so'))
    assert.equal(after.length, before.length)
    assert.throws(() => retargetNeeded(copy, 'libtorch_cuda.so', 'libnothing.so'), /does not need libnothing\.so/)
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
})

test('two installs at once fill the CPU entry once, with only what it needs, and verified', async () => {
  const index = await serveIndex()
  const cacheDir = fs.mkdtempSync(path.join(os.tmpdir(), 'torch-node-cache-'))
  try {
    const [a, b] = await Promise.all([fill(cacheDir, index), fill(cacheDir, index)])
    assert.equal(a.code, 0, a.out)
    assert.equal(b.code, 0, b.out)
    const entry = path.join(cacheDir, 'libtorch-2.13.0-cpu')
    assert.equal(a.out.trim().split('\n').pop(), path.join(entry, 'torch'))
    assert.deepEqual([...index.downloads.values()], [1, 1, 1], 'each wheel downloaded once')
    assert.deepEqual(fs.readdirSync(cacheDir), ['libtorch-2.13.0-cpu'], 'no staging folder or lock left')
    assert.deepEqual(fs.readdirSync(path.join(entry, 'torch', 'lib')).sort(),
      ['libc10.so', 'libcudart.so.13', 'libcupti.so.13', 'libgomp.so.1', 'libtorch.so', 'libtorch_cpu.so'])
    assert.ok(fs.existsSync(path.join(entry, 'torch', 'include', 'ATen', 'ATen.h')))
    assert.ok(!neededOf(path.join(entry, 'torch', 'lib', 'libtorch.so')).includes('libtorch_cuda.so'))
    const manifest = JSON.parse(fs.readFileSync(path.join(entry, 'torch-node.json'), 'utf8'))
    assert.equal(manifest.variant, 'cpu')
    assert.equal(manifest.wheels.length, 3)
    // Filled: a third run downloads nothing.
    const c = await fill(cacheDir, index)
    assert.equal(c.code, 0, c.out)
    assert.deepEqual([...index.downloads.values()], [1, 1, 1])
  } finally {
    index.close()
    fs.rmSync(cacheDir, { recursive: true, force: true })
  }
})

test('a download whose sha256 differs from the index is refused, and leaves no entry behind', async () => {
  const index = await serveIndex({ corrupt: true })
  const cacheDir = fs.mkdtempSync(path.join(os.tmpdir(), 'torch-node-cache-'))
  try {
    const r = await fill(cacheDir, index)
    assert.equal(r.code, 1)
    assert.match(r.out, /downloading torch-2\.13\.0-.*failed: .*sha256 [0-9a-f]{64}; the index says/)
    assert.deepEqual(fs.readdirSync(cacheDir), [])
  } finally {
    index.close()
    fs.rmSync(cacheDir, { recursive: true, force: true })
  }
})

test('a wheel whose entry climbs out of the cache entry is refused, and writes nothing outside', async () => {
  const index = await serveIndex({ extra: [['torch/include/../../../escaped.h', Buffer.from('x')]] })
  const cacheDir = fs.mkdtempSync(path.join(os.tmpdir(), 'torch-node-cache-'))
  try {
    const r = await fill(path.join(cacheDir, 'cache'), index)
    assert.equal(r.code, 1)
    assert.match(r.out, /entry torch\/include\/\.\.\/\.\.\/\.\.\/escaped\.h points outside the cache entry/)
    assert.deepEqual(fs.readdirSync(cacheDir), ['cache'])
    assert.deepEqual(fs.readdirSync(path.join(cacheDir, 'cache')), [])
  } finally {
    index.close()
    fs.rmSync(cacheDir, { recursive: true, force: true })
  }
})

test('an entry that inflates past its declared size is refused (zip bomb)', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'torch-node-zip-'))
  try {
    const file = path.join(dir, 'bomb.zip')
    const buf = zip([['big', Buffer.alloc(1 << 20)]])
    // Declare 1 KiB in the central directory (the entry inflates to 1 MiB).
    const cd = buf.lastIndexOf(Buffer.from([0x50, 0x4b, 0x01, 0x02]))
    buf.writeUInt32LE(1024, cd + 24)
    fs.writeFileSync(file, buf)
    const [entry] = listEntries(file)
    await assert.rejects(extractEntry(file, entry, path.join(dir, 'out')), /inflates past its declared 1024 bytes/)
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
})

test('an unreachable index and an unwritable cache fail with one line naming the way out', async () => {
  const cacheDir = fs.mkdtempSync(path.join(os.tmpdir(), 'torch-node-cache-'))
  try {
    // A port nothing listens on: connection refused.
    const closed = await serveIndex()
    closed.close()
    const r = await fill(cacheDir, closed)
    assert.equal(r.code, 1)
    assert.match(r.out, /TORCH_NODE_PYPI_INDEX names a PyPI mirror, and LIBTORCH a libtorch you already have/)
    const file = path.join(cacheDir, 'a-file')
    fs.writeFileSync(file, '')
    const r2 = await fill(path.join(file, 'cache'), closed)
    assert.equal(r2.code, 1)
    assert.match(r2.out, /cannot write the libtorch cache .*a-file\/cache \(ENOTDIR\): set TORCH_NODE_CACHE to a writable folder/)
  } finally {
    fs.rmSync(cacheDir, { recursive: true, force: true })
  }
})

test('a lock left by a dead install is broken; TORCH_NODE_CUDA other than 0/1 is refused', async () => {
  const index = await serveIndex()
  const cacheDir = fs.mkdtempSync(path.join(os.tmpdir(), 'torch-node-cache-'))
  try {
    const lock = path.join(cacheDir, 'libtorch-2.13.0-cpu.lock')
    fs.mkdirSync(lock)
    // A pid that cannot be alive (above pid_max) on this host.
    fs.writeFileSync(path.join(lock, 'owner'), JSON.stringify({ pid: 2 ** 22 + 1, host: os.hostname(), at: Date.now() }))
    const r = await fill(cacheDir, index)
    assert.equal(r.code, 0, r.out)
    assert.match(r.out, /removing a stale lock .*pid 4194305 is gone/)
    const bad = await fill(cacheDir, index, { TORCH_NODE_CUDA: 'yes' })
    assert.equal(bad.code, 1)
    assert.match(bad.out, /TORCH_NODE_CUDA must be 1 .* not 'yes'/)
  } finally {
    index.close()
    fs.rmSync(cacheDir, { recursive: true, force: true })
  }
})

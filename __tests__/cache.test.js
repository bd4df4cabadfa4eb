'use strict'
// The shared libtorch cache (scripts/cache.js) against a local index that serves small fake
// wheels (real ELF files under libtorch's names): what the CPU variant takes, the libtorch.so
// retarget, torchvision's op library with its CUDA stand-ins (scripts/cuda-stubs.js), concurrent
// fills, sha256 refusal, a stale lock, an entry filled before torchvision was added; wheel.js's
// zip reader and ELF edits. One test serves the real libraries instead, and runs a detector from
// the CPU entry it fills.
const { test } = require('node:test')
const assert = require('node:assert/strict')
const { spawn, spawnSync } = require('node:child_process')
const crypto = require('node:crypto')
const fs = require('node:fs')
const http = require('node:http')
const os = require('node:os')
const path = require('node:path')
const zlib = require('node:zlib')
const {
  listEntries,
  extractEntry,
  neededOf,
  retargetNeeded,
  dynamicSymbols,
  setSearchPath,
  searchPathOf,
} = require('../scripts/wheel')
const { standInLibrary, planStandIns } = require('../scripts/cuda-stubs')

const ROOT = path.join(__dirname, '..')
const LIB = path.join(ROOT, 'libtorch', 'lib')
// The dev virtualenv's site-packages (libtorch links to its torch/): torchvision and the real
// CUDA runtime libraries beside torch, as in PyPI's wheels.
const SITE = path.dirname(fs.realpathSync(path.join(ROOT, 'libtorch')))
const VISION = path.join(SITE, 'torchvision')
const NVIDIA_LIB = path.join(SITE, 'nvidia', 'cu13', 'lib')
const NO_VISION = !fs.existsSync(path.join(VISION, '_C.so')) && `no torchvision wheel beside libtorch (${VISION})`
// libtorch.so stands in for torchvision's _C.so where there is none: it also names libtorch_cuda.so.
const VISION_C = NO_VISION ? path.join(LIB, 'libtorch.so') : path.join(VISION, '_C.so')
const VISION_METADATA = (torch) =>
  Buffer.from(
    `Metadata-Version: 2.1\nName: torchvision\nVersion: 0.28.0\nRequires-Dist: numpy\nRequires-Dist: torch (==${torch})\n`,
  )

/** A little-endian record of `size` bytes from [offset, width (2 or 4), value] fields. */
function record(size, fields) {
  const b = Buffer.alloc(size)
  for (const [at, width, value] of fields) width === 2 ? b.writeUInt16LE(value, at) : b.writeUInt32LE(value, at)
  return b
}

/** A zip entry's local header (+ name) and central directory record (+ name). */
function zipHeaders(name, { method, crc, compressed, size, offset }) {
  const n = Buffer.from(name)
  const local = record(30, [
    [0, 4, 0x04034b50],
    [4, 2, 20],
    [8, 2, method],
    [14, 4, crc],
    [18, 4, compressed],
    [22, 4, size],
    [26, 2, n.length],
  ])
  const cd = record(46, [
    [0, 4, 0x02014b50],
    [4, 2, 20],
    [6, 2, 20],
    [10, 2, method],
    [16, 4, crc],
    [20, 4, compressed],
    [24, 4, size],
    [28, 2, n.length],
    [42, 4, offset],
  ])
  return { local: Buffer.concat([local, n]), central: Buffer.concat([cd, n]) }
}

const zipEnd = (count, cdLength, cdOffset) =>
  record(22, [
    [0, 4, 0x06054b50],
    [8, 2, count],
    [10, 2, count],
    [12, 4, cdLength],
    [16, 4, cdOffset],
  ])

/** A zip file from [name, Buffer] pairs; `deflate` picks the method per entry. */
function zip(files, deflate = () => true) {
  const locals = []
  const central = []
  let offset = 0
  for (const [name, data] of files) {
    const method = deflate(name) ? 8 : 0
    const body = method === 8 ? zlib.deflateRawSync(data) : data
    const h = zipHeaders(name, { method, crc: zlib.crc32(data), compressed: body.length, size: data.length, offset })
    locals.push(h.local, body)
    central.push(h.central)
    offset += h.local.length + body.length
  }
  const cdBuf = Buffer.concat(central)
  return Buffer.concat([...locals, cdBuf, zipEnd(files.length, cdBuf.length, offset)])
}

/**
 * A zip file at `dest` from [name, Buffer or file path] pairs, stored and streamed: a wheel of
 * real libraries (libtorch_cpu.so: 438 MB) without holding it in memory.
 */
async function zipToFile(dest, files) {
  const fd = fs.openSync(dest, 'w')
  const central = []
  let offset = 0
  try {
    for (const [name, source] of files) {
      let crc = 0
      let size = 0
      const chunks = Buffer.isBuffer(source) ? [source] : fs.createReadStream(source, { highWaterMark: 1 << 22 })
      for await (const chunk of chunks) {
        crc = zlib.crc32(chunk, crc)
        size += chunk.length
      }
      const h = zipHeaders(name, { method: 0, crc, compressed: size, size, offset })
      fs.writeSync(fd, h.local)
      offset += h.local.length
      const again = Buffer.isBuffer(source) ? [source] : fs.createReadStream(source, { highWaterMark: 1 << 22 })
      for await (const chunk of again) offset += fs.writeSync(fd, chunk)
      central.push(h.central)
    }
    const cd = Buffer.concat(central)
    fs.writeSync(fd, cd)
    fs.writeSync(fd, zipEnd(files.length, cd.length, offset))
  } finally {
    fs.closeSync(fd)
  }
}

async function sha256Of(file) {
  const hash = crypto.createHash('sha256')
  for await (const chunk of fs.createReadStream(file)) hash.update(chunk)
  return hash.digest('hex')
}

// Stand-ins: libgomp (small, real ELF, needs only system libraries) under each big library's
// name; the wheel's real libtorch.so (it needs libtorch_cpu.so and libtorch_cuda.so) and
// libc10.so (it defines the thread-local symbols torchvision's _C.so takes, which a CUDA
// stand-in could not).
const small = fs.readFileSync(path.join(LIB, 'libgomp.so.1'))
const WHEELS = {
  torch: [
    'torch-2.13.0-cp311-cp311-manylinux_2_28_x86_64.whl',
    [
      ['torch/__init__.py', Buffer.from('# python\n')],
      ['torch/include/', Buffer.alloc(0)],
      ['torch/include/ATen/ATen.h', Buffer.from('#pragma once\n')],
      ['torch/lib/libtorch_cpu.so', small],
      ['torch/lib/libc10.so', fs.readFileSync(path.join(LIB, 'libc10.so'))],
      ['torch/lib/libgomp.so.1', small],
      ['torch/lib/libtorch.so', fs.readFileSync(path.join(LIB, 'libtorch.so'))],
      ['torch/lib/libtorch_cuda.so', small],
      ['torch/lib/libtorch_python.so', small],
    ],
  ],
  'nvidia-cuda-runtime': [
    'nvidia_cuda_runtime-13.0.96-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl',
    [
      ['nvidia/cu13/lib/libcudart.so.13', small],
      ['nvidia/cu13/include/cuda.h', Buffer.from('')],
    ],
  ],
  'nvidia-cuda-cupti': [
    'nvidia_cuda_cupti-13.0.85-py3-none-manylinux_2_25_x86_64.whl',
    [
      ['nvidia/cu13/lib/libcupti.so.13', small],
      ['nvidia/cu13/lib/libnvperf_host.so', small],
    ],
  ],
  torchvision: [
    'torchvision-0.28.0-cp311-cp311-manylinux_2_28_x86_64.whl',
    [
      ['torchvision/__init__.py', Buffer.from('# python\n')],
      ['torchvision/_C.so', fs.readFileSync(VISION_C)],
      ['torchvision/image.so', small],
      ['torchvision/version.py', Buffer.from("__version__ = '0.28.0+cu130'\n")],
      ['torchvision-0.28.0.dist-info/METADATA', VISION_METADATA('2.13.0')],
    ],
  ],
}

/**
 * A PEP 691 index on localhost; `corrupt` serves other bytes than the recorded sha256; `extra`
 * adds entries to the torch wheel (recorded with their sha256: a hostile index or mirror);
 * `visionTorch` is the torch version torchvision's METADATA requires. `wheels` whose entries
 * are file paths are zipped into `dir` and served from there.
 */
async function serveIndex({ corrupt = false, extra = [], visionTorch = '2.13.0', wheels = WHEELS, dir = null } = {}) {
  const blobs = new Map()
  const downloads = new Map()
  for (const [project, [filename, wheelFiles]] of Object.entries(wheels)) {
    let files = project === 'torch' ? [...wheelFiles, ...extra] : wheelFiles
    files = files.map(([name, data]) => [
      name,
      name.endsWith('/METADATA') && project === 'torchvision' ? VISION_METADATA(visionTorch) : data,
    ])
    if (files.some(([, data]) => typeof data === 'string')) {
      const file = path.join(dir, filename)
      await zipToFile(file, files)
      blobs.set(filename, { project, file, size: fs.statSync(file).size, sha256: await sha256Of(file) })
      continue
    }
    const data = zip(files, (n) => !n.endsWith('.h'))
    blobs.set(filename, {
      project,
      data,
      size: data.length,
      sha256: crypto.createHash('sha256').update(data).digest('hex'),
    })
  }
  const server = http.createServer((req, res) => {
    const simple = /^\/simple\/([^/]+)\/$/.exec(req.url)
    if (simple) {
      const files = [...blobs]
        .filter(([, b]) => b.project === simple[1])
        .map(([filename, b]) => ({
          filename,
          url: `../../files/${filename}`,
          hashes: { sha256: b.sha256 },
          size: b.size,
          yanked: false,
        }))
      res.setHeader('content-type', 'application/vnd.pypi.simple.v1+json')
      return res.end(JSON.stringify({ files }))
    }
    const file = /^\/files\/(.+)$/.exec(req.url)
    if (file && blobs.has(file[1])) {
      downloads.set(file[1], (downloads.get(file[1]) ?? 0) + 1)
      if (blobs.get(file[1]).file) return fs.createReadStream(blobs.get(file[1]).file).pipe(res)
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
    fs.writeFileSync(
      file,
      zip(
        [
          ['x/stored.bin', big],
          ['x/deflated.txt', Buffer.from('hello '.repeat(1000))],
          ['empty', Buffer.alloc(0)],
        ],
        (n) => n.endsWith('.txt'),
      ),
    )
    const entries = listEntries(file)
    assert.deepEqual(
      entries.map((e) => [e.name, e.method]),
      [
        ['x/stored.bin', 0],
        ['x/deflated.txt', 8],
        ['empty', 0],
      ],
    )
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

/** The names an ELF file defines, by type ('function', 'object'). */
function definedNames(file, type) {
  return dynamicSymbols(file)
    .filter((s) => s.defined && (!type || s.type === type))
    .map((s) => s.name)
    .sort()
}

test('two installs at once fill the CPU entry once, with only what it needs, and verified', async () => {
  const index = await serveIndex()
  const cacheDir = fs.mkdtempSync(path.join(os.tmpdir(), 'torch-node-cache-'))
  try {
    const [a, b] = await Promise.all([fill(cacheDir, index), fill(cacheDir, index)])
    assert.equal(a.code, 0, a.out)
    assert.equal(b.code, 0, b.out)
    const entry = path.join(cacheDir, 'libtorch-2.13.0-cpu')
    assert.equal(a.out.trim().split('\n').pop(), path.join(entry, 'torch'))
    assert.deepEqual([...index.downloads.values()], [1, 1, 1, 1], 'each wheel downloaded once')
    assert.deepEqual(fs.readdirSync(cacheDir), ['libtorch-2.13.0-cpu'], 'no staging folder or lock left')
    assert.deepEqual(fs.readdirSync(path.join(entry, 'torch', 'lib')).sort(), [
      'libc10.so',
      'libcudart.so.13',
      'libcupti.so.13',
      'libgomp.so.1',
      'libtorch.so',
      'libtorch_cpu.so',
    ])
    assert.ok(fs.existsSync(path.join(entry, 'torch', 'include', 'ATen', 'ATen.h')))
    assert.ok(!neededOf(path.join(entry, 'torch', 'lib', 'libtorch.so')).includes('libtorch_cuda.so'))
    const manifest = JSON.parse(fs.readFileSync(path.join(entry, 'torch-node.json'), 'utf8'))
    assert.equal(manifest.variant, 'cpu')
    assert.equal(manifest.wheels.length, 4)
    assert.equal(manifest.torchvision, '0.28.0')
    // torchvision's op library, its search path pointed at stand-ins for the CUDA libraries it
    // names (not in torch/lib, listed above), each defining what the manifest says
    const vision = path.join(entry, 'torchvision')
    assert.deepEqual(fs.readdirSync(vision).sort(), ['_C.so', 'cuda-stand-ins', 'version.py'])
    assert.ok(fs.readFileSync(path.join(vision, '_C.so')).length > 1000)
    assert.equal(searchPathOf(path.join(vision, '_C.so')), '$ORIGIN/cuda-stand-ins')
    const cuda = neededOf(VISION_C)
      .filter((n) => /^lib(torch|c10)_cuda\.so$/.test(n))
      .sort()
    assert.deepEqual(fs.readdirSync(path.join(vision, 'cuda-stand-ins')).sort(), ['README.txt', ...cuda])
    assert.deepEqual(Object.keys(manifest.standIns).sort(), cuda)
    for (const soname of cuda) {
      const standIn = path.join(vision, 'cuda-stand-ins', soname)
      assert.deepEqual(definedNames(standIn), [...manifest.standIns[soname]].sort(), soname)
      assert.ok(manifest.standIns[soname].includes('_ZN3c104cuda20getCurrentCUDAStreamEa') || NO_VISION, soname)
    }
    // Filled: a third run downloads nothing.
    const c = await fill(cacheDir, index)
    assert.equal(c.code, 0, c.out)
    assert.deepEqual([...index.downloads.values()], [1, 1, 1, 1])
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
    assert.match(
      r2.out,
      /cannot write the libtorch cache .*a-file\/cache \(ENOTDIR\): set TORCH_NODE_CACHE to a writable folder/,
    )
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
    fs.writeFileSync(
      path.join(lock, 'owner'),
      JSON.stringify({ pid: 2 ** 22 + 1, host: os.hostname(), at: Date.now() }),
    )
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

test('an entry filled before torchvision was added gets it on the next install: only its wheel is downloaded', async () => {
  const index = await serveIndex()
  const cacheDir = fs.mkdtempSync(path.join(os.tmpdir(), 'torch-node-cache-'))
  try {
    assert.equal((await fill(cacheDir, index)).code, 0)
    // What an earlier torch-node left: no torchvision/, three wheels in the manifest.
    const entry = path.join(cacheDir, 'libtorch-2.13.0-cpu')
    const file = path.join(entry, 'torch-node.json')
    const old = JSON.parse(fs.readFileSync(file, 'utf8'))
    const { standIns } = old
    delete old.torchvision
    delete old.standIns
    old.wheels = old.wheels.filter((w) => !w.filename.startsWith('torchvision-'))
    fs.writeFileSync(file, JSON.stringify(old))
    fs.rmSync(path.join(entry, 'torchvision'), { recursive: true })
    const r = await fill(cacheDir, index)
    assert.equal(r.code, 0, r.out)
    assert.match(r.out, /adding torchvision's ops to .*libtorch-2\.13\.0-cpu \(filled by an earlier torch-node\)/)
    assert.deepEqual(Object.fromEntries([...index.downloads].map(([f, n]) => [f.split('-')[0], n])), {
      torch: 1,
      nvidia_cuda_runtime: 1,
      nvidia_cuda_cupti: 1,
      torchvision: 2,
    })
    assert.deepEqual(fs.readdirSync(cacheDir), ['libtorch-2.13.0-cpu'], 'no staging folder or lock left')
    assert.equal(searchPathOf(path.join(entry, 'torchvision', '_C.so')), '$ORIGIN/cuda-stand-ins')
    const manifest = JSON.parse(fs.readFileSync(file, 'utf8'))
    assert.equal(manifest.wheels.length, 4)
    assert.deepEqual(manifest.standIns, standIns)
    assert.equal(manifest.filled, old.filled)
  } finally {
    index.close()
    fs.rmSync(cacheDir, { recursive: true, force: true })
  }
})

test('a torchvision wheel made for another torch is refused, and leaves no entry behind', async () => {
  const index = await serveIndex({ visionTorch: '2.12.0' })
  const cacheDir = fs.mkdtempSync(path.join(os.tmpdir(), 'torch-node-cache-'))
  try {
    const r = await fill(cacheDir, index)
    assert.equal(r.code, 1)
    assert.match(r.out, /torchvision-0\.28\.0-.*\.whl requires torch 2\.12\.0, not 2\.13\.0/)
    assert.deepEqual(fs.readdirSync(cacheDir), [])
  } finally {
    index.close()
    fs.rmSync(cacheDir, { recursive: true, force: true })
  }
})

test(
  'stand-ins for torchvision: exactly the symbols the real CUDA libraries would give _C.so',
  { skip: NO_VISION },
  () => {
    const cpu = ['libtorch_cpu.so', 'libc10.so', 'libtorch.so', 'libgomp.so.1']
      .map((f) => path.join(LIB, f))
      .concat(['libcudart.so.13', 'libcupti.so.13'].map((f) => path.join(NVIDIA_LIB, f)))
    const options = {
      provided: ['libtorch_python.so'],
      system: /^(libc|libm|libstdc\+\+|libgcc_s|libpthread|ld-linux-x86-64)\.so/,
    }
    const planned = planStandIns(VISION_C, cpu, options)
    assert.deepEqual([...planned.keys()].sort(), ['libc10_cuda.so', 'libtorch_cuda.so'])
    const { functions, objects } = planned.get('libtorch_cuda.so')
    assert.deepEqual(planned.get('libc10_cuda.so'), { functions, objects })
    assert.deepEqual(objects, ['_ZN3c104cuda20CUDACachingAllocator9allocatorE'])
    assert.equal(functions.length, 15)
    // The dev virtualenv has the real ones: between them they define every planned symbol.
    const real = new Set([
      ...definedNames(path.join(LIB, 'libc10_cuda.so')),
      ...definedNames(path.join(LIB, 'libtorch_cuda.so')),
    ])
    for (const name of [...functions, ...objects]) assert.ok(real.has(name), name)
    // A thread-local symbol cannot be stood in for (libc10.so defines those _C.so takes).
    assert.throws(
      () =>
        planStandIns(
          VISION_C,
          cpu.filter((l) => !l.endsWith('libc10.so')),
          options,
        ),
      /needs the thread-local \S+, which a stand-in cannot define/,
    )
    // With the real CUDA libraries there is nothing to stand in for.
    assert.deepEqual(
      planStandIns(VISION_C, [...cpu, path.join(LIB, 'libc10_cuda.so'), path.join(LIB, 'libtorch_cuda.so')], options),
      new Map(),
    )
  },
)

test('a stand-in library: loadable, read back by our ELF reader, and loud when called', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'torch-node-stand-in-'))
  try {
    for (const arch of ['x86_64', 'aarch64']) {
      const file = path.join(dir, `${arch}.so`)
      fs.writeFileSync(
        file,
        standInLibrary({
          soname: 'libfake_cuda.so',
          functions: ['fake_function', '_ZN3c104cuda9GetDeviceEPa'],
          objects: ['fake_object'],
          arch,
        }),
      )
      assert.deepEqual(neededOf(file), [], 'no dependencies')
      assert.deepEqual(definedNames(file, 'function'), ['_ZN3c104cuda9GetDeviceEPa', 'fake_function'])
      assert.deepEqual(definedNames(file, 'object'), ['fake_object'])
    }
    assert.throws(() => standInLibrary({ soname: 'x.so', arch: 'riscv64' }), /no stand-in code for riscv64/)
    if (process.arch !== 'x64') return
    // process.dlopen maps it (then finds no Node module in it): the dynamic linker accepts it.
    assert.throws(() => process.dlopen({ exports: {} }, path.join(dir, 'x86_64.so')), /Module did not self-register/)
    const python = spawnSync(
      'python3',
      [
        '-c',
        `import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])
print(ctypes.c_uint64.in_dll(lib, 'fake_object').value, flush=True)
lib.fake_function()
print('returned')`,
        path.join(dir, 'x86_64.so'),
      ],
      { encoding: 'utf8' },
    )
    if (python.error) return // no python3 here: the dlopen above is what we can check
    assert.equal(python.stdout, '0\n', 'the object reads as zeros, the function never returns')
    assert.equal(python.signal, 'SIGABRT')
    assert.equal(
      python.stderr,
      'torch-node: fake_function of libfake_cuda.so was called, but this libtorch has no CUDA (libfake_cuda.so is a stand-in)\n',
    )
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
})

test('setSearchPath rewrites RPATH in place; a longer path is refused', { skip: NO_VISION }, () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'torch-node-elf-'))
  try {
    const copy = path.join(dir, '_C.so')
    fs.copyFileSync(VISION_C, copy)
    const before = fs.readFileSync(copy)
    const old = searchPathOf(copy)
    assert.equal(setSearchPath(copy, '$ORIGIN/x'), old)
    assert.equal(searchPathOf(copy), '$ORIGIN/x')
    const after = fs.readFileSync(copy)
    assert.equal(after.length, before.length)
    assert.deepEqual(neededOf(copy), neededOf(VISION_C))
    assert.deepEqual(dynamicSymbols(copy), dynamicSymbols(VISION_C))
    assert.throws(() => setSearchPath(copy, 'x'.repeat(old.length + 1)), /is longer than the old one/)
    const none = path.join(dir, 'none.so')
    fs.writeFileSync(none, standInLibrary({ soname: 'none.so', functions: ['f'] }))
    assert.throws(() => setSearchPath(none, '$ORIGIN'), /has 0 RPATH\/RUNPATH entries/)
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
})

// The detector and what Python gave for it (models/make_models.py; __tests__/detection.test.js).
const GOLDEN = path.join(ROOT, 'models', 'golden', 'detection.json')
const SSD =
  GOLDEN && fs.existsSync(GOLDEN)
    ? JSON.parse(fs.readFileSync(GOLDEN, 'utf8')).models.ssdlite320_mobilenet_v3_large
    : null
const NO_SSD =
  (!SSD || !fs.existsSync(path.join(ROOT, 'models', SSD.file))) &&
  'the detectors were not generated: run `npm run models`'

test(
  "from a CPU entry made of the real wheels' libraries: loadOps() finds torchvision and SSDlite detects as in Python, with no libtorch_cuda",
  { skip: NO_VISION || NO_SSD, timeout: 180_000 },
  async () => {
    const work = fs.mkdtempSync(path.join(os.tmpdir(), 'torch-node-cache-real-'))
    let index
    try {
      // The wheels' real libraries (libtorch_cpu.so: 438 MB, stored and streamed), no CUDA ones.
      const real = {
        torch: [
          WHEELS.torch[0],
          ['libtorch_cpu.so', 'libc10.so', 'libgomp.so.1', 'libtorch.so'].map((f) => [
            `torch/lib/${f}`,
            path.join(LIB, f),
          ]),
        ],
        'nvidia-cuda-runtime': [
          WHEELS['nvidia-cuda-runtime'][0],
          [['nvidia/cu13/lib/libcudart.so.13', path.join(NVIDIA_LIB, 'libcudart.so.13')]],
        ],
        'nvidia-cuda-cupti': [
          WHEELS['nvidia-cuda-cupti'][0],
          [['nvidia/cu13/lib/libcupti.so.13', path.join(NVIDIA_LIB, 'libcupti.so.13')]],
        ],
        torchvision: [
          WHEELS.torchvision[0],
          [
            ['torchvision/_C.so', VISION_C],
            ['torchvision/version.py', path.join(VISION, 'version.py')],
            ['torchvision-0.28.0.dist-info/METADATA', VISION_METADATA('2.13.0')],
          ],
        ],
      }
      fs.mkdirSync(path.join(work, 'index'))
      index = await serveIndex({ wheels: real, dir: path.join(work, 'index') })
      const filled = await fill(path.join(work, 'cache'), index)
      assert.equal(filled.code, 0, filled.out)
      const entry = path.join(work, 'cache', 'libtorch-2.13.0-cpu')
      assert.deepEqual(fs.readdirSync(path.join(work, 'cache')), ['libtorch-2.13.0-cpu'], 'no CUDA entry')
      // An installed package: the JS files, this checkout's addon, and its libtorch link to the entry.
      const pkg = path.join(work, 'app', 'node_modules', 'torch-node')
      for (const f of ['index.js', 'package.json', 'lib', 'data'])
        fs.cpSync(path.join(ROOT, f), path.join(pkg, f), { recursive: true })
      fs.copyFileSync(path.join(ROOT, 'torch-node.node'), path.join(pkg, 'torch-node.node'))
      fs.symlinkSync(path.join(entry, 'torch'), path.join(pkg, 'libtorch'))
      const env = { ...process.env }
      delete env.LD_LIBRARY_PATH // searched before the addon's RUNPATH: it could bring the virtualenv's libtorch
      const run = spawnSync(
        process.execPath,
        [
          '-e',
          `
      const fs = require('node:fs')
      const torch = require(${JSON.stringify(pkg)})
      const loaded = torch.vision.loadOps()
      const detector = new torch.ScriptModule(${JSON.stringify(path.join(ROOT, 'models', SSD.file))})
      const image = torch.image.loadSync(fs.readFileSync(${JSON.stringify(path.join(ROOT, 'data', 'chelsea.png'))}), { layout: 'chw' })
      const [, [found]] = detector.forwardSync([image])
      const maps = fs.readFileSync('/proc/self/maps', 'utf8').split('\\n').map((l) => l.split(/\\s+/)[5]).filter((p) => p && /\\.so/.test(p))
      console.log(JSON.stringify({ loaded, cuda: torch.cuda.isAvailable(), maps: [...new Set(maps)],
        labels: found.labels.toArray(), scores: [...found.scores.toTypedArray()], boxes: [...found.boxes.toTypedArray()] }))`,
        ],
        { cwd: work, env, encoding: 'utf8', timeout: 120_000 },
      )
      assert.equal(run.status, 0, run.stderr)
      const got = JSON.parse(run.stdout)
      assert.equal(got.loaded, true)
      assert.equal(got.cuda, false)
      // libtorch and torchvision from the entry; the only CUDA libraries the stand-ins and the small
      // runtime libraries that libtorch_cpu.so names
      const from = (name) => got.maps.filter((p) => path.basename(p) === name)
      assert.deepEqual(from('libtorch_cpu.so'), [path.join(entry, 'torch', 'lib', 'libtorch_cpu.so')])
      assert.deepEqual(from('_C.so'), [path.join(entry, 'torchvision', '_C.so')])
      for (const soname of ['libtorch_cuda.so', 'libc10_cuda.so'])
        assert.deepEqual(from(soname), [path.join(entry, 'torchvision', 'cuda-stand-ins', soname)])
      assert.deepEqual(
        got.maps.filter((p) => /cu(blas|dnn|fft|sparse|rand|solver)|nccl|nvrtc/.test(p)),
        [],
      )
      // Python's detections (detection.test.js's tolerances)
      assert.deepEqual(got.labels, SSD.labels.data)
      const diff = (a, b) => Math.max(...a.map((x, i) => Math.abs(x - b[i])))
      assert.ok(diff(got.scores, SSD.scores.data) <= 1e-4, `scores differ by ${diff(got.scores, SSD.scores.data)}`)
      assert.ok(diff(got.boxes, SSD.boxes.data) <= 1e-3, `boxes differ by ${diff(got.boxes, SSD.boxes.data)}`)
    } finally {
      index?.close()
      fs.rmSync(work, { recursive: true, force: true })
    }
  },
)

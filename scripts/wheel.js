'use strict'
// What the libtorch cache (scripts/cache.js) needs from a wheel, with no Python and no unzip: a
// zip reader that lists entries and streams the chosen ones to disk (checking each CRC), and one
// ELF edit (retargetNeeded) for the CPU variant's libtorch.so.
const fs = require('node:fs')
const path = require('node:path')
const zlib = require('node:zlib')
const { pipeline } = require('node:stream/promises')
const { Transform } = require('node:stream')

function readAt(fd, position, length) {
  const buf = Buffer.alloc(length)
  const n = fs.readSync(fd, buf, 0, length, position)
  return buf.subarray(0, n)
}

/** Entries of a zip file: [{ name, method, crc, compressedSize, size, headerOffset }]. */
function listEntries(file) {
  const fd = fs.openSync(file, 'r')
  try {
    const { size } = fs.fstatSync(fd)
    const tailLength = Math.min(size, 65557)
    const tail = readAt(fd, size - tailLength, tailLength)
    const eocd = tail.lastIndexOf(Buffer.from([0x50, 0x4b, 0x05, 0x06]))
    if (eocd < 0) throw new Error(`${path.basename(file)} is not a zip file (no end-of-central-directory record)`)
    let count = tail.readUInt16LE(eocd + 10)
    let cdSize = tail.readUInt32LE(eocd + 12)
    let cdOffset = tail.readUInt32LE(eocd + 16)
    if (cdOffset === 0xffffffff || count === 0xffff) {
      // ZIP64: the locator sits just before the classic record and points at the real one.
      const locator = tail.subarray(eocd - 20, eocd)
      if (locator.readUInt32LE(0) !== 0x07064b50) throw new Error(`${path.basename(file)}: bad ZIP64 locator`)
      const rec = readAt(fd, Number(locator.readBigUInt64LE(8)), 56)
      count = Number(rec.readBigUInt64LE(32))
      cdSize = Number(rec.readBigUInt64LE(40))
      cdOffset = Number(rec.readBigUInt64LE(48))
    }
    const cd = readAt(fd, cdOffset, cdSize)
    const entries = []
    let p = 0
    for (let i = 0; i < count; i++) {
      if (cd.readUInt32LE(p) !== 0x02014b50) throw new Error(`${path.basename(file)}: corrupt central directory`)
      const nameLength = cd.readUInt16LE(p + 28)
      const extraLength = cd.readUInt16LE(p + 30)
      const commentLength = cd.readUInt16LE(p + 32)
      const entry = {
        name: cd.toString('utf8', p + 46, p + 46 + nameLength),
        method: cd.readUInt16LE(p + 10),
        crc: cd.readUInt32LE(p + 16),
        compressedSize: cd.readUInt32LE(p + 20),
        size: cd.readUInt32LE(p + 24),
        headerOffset: cd.readUInt32LE(p + 42),
      }
      if ([entry.compressedSize, entry.size, entry.headerOffset].includes(0xffffffff)) {
        throw new Error(`${path.basename(file)}: entry ${entry.name} needs ZIP64 sizes, which this reader does not handle`)
      }
      entries.push(entry)
      p += 46 + nameLength + extraLength + commentLength
    }
    return entries
  } finally {
    fs.closeSync(fd)
  }
}

/** Streams one entry to `dest` (mode 0o755 for shared libraries), checking its CRC-32. */
async function extractEntry(file, entry, dest) {
  const fd = fs.openSync(file, 'r')
  let start
  try {
    const header = readAt(fd, entry.headerOffset, 30)
    if (header.readUInt32LE(0) !== 0x04034b50) throw new Error(`${path.basename(file)}: bad local header for ${entry.name}`)
    start = entry.headerOffset + 30 + header.readUInt16LE(26) + header.readUInt16LE(28)
  } finally {
    fs.closeSync(fd)
  }
  if (entry.method !== 0 && entry.method !== 8) throw new Error(`${entry.name}: unsupported zip method ${entry.method}`)
  fs.mkdirSync(path.dirname(dest), { recursive: true })
  let crc = 0
  let written = 0
  const check = new Transform({
    transform(chunk, _enc, done) {
      written += chunk.length
      // More bytes than the central directory declares: a corrupt or hostile archive (a zip
      // bomb would fill the disk before the CRC check at the end).
      if (written > entry.size) return done(new Error(`${entry.name}: inflates past its declared ${entry.size} bytes`))
      crc = zlib.crc32(chunk, crc)
      done(null, chunk)
    },
  })
  const source = entry.compressedSize === 0
    ? require('node:stream').Readable.from([])
    : fs.createReadStream(file, { start, end: start + entry.compressedSize - 1 })
  const stages = entry.method === 8 && entry.compressedSize > 0 ? [zlib.createInflateRaw()] : []
  await pipeline(source, ...stages, check, fs.createWriteStream(dest, { mode: /\.so(\.|$)/.test(dest) ? 0o755 : 0o644 }))
  if ((crc >>> 0) !== entry.crc) throw new Error(`${entry.name}: CRC mismatch (corrupt download?)`)
}

/** One entry's bytes (for small files such as METADATA). */
async function readEntry(file, name) {
  const entry = listEntries(file).find((e) => e.name === name)
  if (!entry) return null
  const tmp = `${file}.${process.pid}.entry`
  await extractEntry(file, entry, tmp)
  try {
    return fs.readFileSync(tmp, 'utf8')
  } finally {
    fs.rmSync(tmp, { force: true })
  }
}

/** The dynamic section of an ELF64 little-endian file: its DT_NEEDED entries and string reader. */
function dynamicEntries(buf, file) {
  if (buf.readUInt32BE(0) !== 0x7f454c46 || buf[4] !== 2 || buf[5] !== 1) throw new Error(`${file}: not an ELF64 little-endian file`)
  const phoff = Number(buf.readBigUInt64LE(32))
  const phentsize = buf.readUInt16LE(54)
  const phnum = buf.readUInt16LE(56)
  const loads = []
  let dynamic = null
  for (let i = 0; i < phnum; i++) {
    const ph = phoff + i * phentsize
    const type = buf.readUInt32LE(ph)
    const seg = { offset: Number(buf.readBigUInt64LE(ph + 8)), vaddr: Number(buf.readBigUInt64LE(ph + 16)), filesz: Number(buf.readBigUInt64LE(ph + 32)) }
    if (type === 1) loads.push(seg)
    if (type === 2) dynamic = seg
  }
  if (!dynamic) throw new Error(`${file}: no dynamic section`)
  const toOffset = (vaddr) => {
    const seg = loads.find((s) => vaddr >= s.vaddr && vaddr < s.vaddr + s.filesz)
    if (!seg) throw new Error(`${file}: address 0x${vaddr.toString(16)} is in no loaded segment`)
    return vaddr - seg.vaddr + seg.offset
  }
  const entries = []
  let strtab = null
  for (let p = dynamic.offset; p < dynamic.offset + dynamic.filesz; p += 16) {
    const tag = Number(buf.readBigInt64LE(p))
    if (tag === 0) break
    const val = Number(buf.readBigUInt64LE(p + 8))
    if (tag === 5) strtab = val
    entries.push({ at: p, tag, val })
  }
  if (strtab === null) throw new Error(`${file}: no DT_STRTAB`)
  const str = (off) => {
    const start = toOffset(strtab) + off
    return buf.toString('latin1', start, buf.indexOf(0, start))
  }
  return { needed: entries.filter((e) => e.tag === 1).map((e) => ({ ...e, name: str(e.val) })) }
}

/** The sonames an ELF shared library names as DT_NEEDED. */
function neededOf(file) {
  const fd = fs.openSync(file, 'r')
  try {
    // The headers and dynamic section of a shared library sit in its first pages... except when
    // they do not: read the whole file only if the first 4 MiB fall short.
    const { size } = fs.fstatSync(fd)
    let buf = readAt(fd, 0, Math.min(size, 4 << 20))
    try {
      return dynamicEntries(buf, file).needed.map((e) => e.name)
    } catch (e) {
      if (buf.length === size) throw e
      buf = fs.readFileSync(file)
      return dynamicEntries(buf, file).needed.map((n) => n.name)
    }
  } finally {
    fs.closeSync(fd)
  }
}

/**
 * Points each DT_NEEDED entry of an ELF64 little-endian shared library that names `from` at the
 * string of an existing DT_NEEDED `to` instead (a duplicate NEEDED is harmless). The PyPI wheel's
 * libtorch.so needs libtorch_cpu.so and libtorch_cuda.so; the CPU cache has no CUDA, so its copy
 * needs libtorch_cpu.so twice. No bytes move: only d_val of the entry changes.
 */
function retargetNeeded(file, from, to) {
  const buf = fs.readFileSync(file)
  const { needed } = dynamicEntries(buf, file)
  const target = needed.find((e) => e.name === to)
  if (!target) throw new Error(`${file}: does not need ${to}`)
  const changed = needed.filter((e) => e.name === from)
  for (const e of changed) buf.writeBigUInt64LE(BigInt(target.val), e.at + 8)
  if (changed.length) fs.writeFileSync(file, buf)
  return changed.length
}

module.exports = { listEntries, extractEntry, readEntry, retargetNeeded, neededOf }

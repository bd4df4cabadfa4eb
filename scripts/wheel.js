'use strict'
// What the libtorch cache (scripts/cache.js) needs from a wheel, with no Python and no unzip: a
// zip reader that lists entries and streams the chosen ones to disk (checking each CRC), an ELF
// reader (the libraries a file needs, its dynamic symbols) and two in-place ELF edits for the CPU
// variant: libtorch.so's libtorch_cuda.so dependency (retargetNeeded) and the search path of
// torchvision's op library (setSearchPath).
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
        throw new Error(
          `${path.basename(file)}: entry ${entry.name} needs ZIP64 sizes, which this reader does not handle`,
        )
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
    if (header.readUInt32LE(0) !== 0x04034b50)
      throw new Error(`${path.basename(file)}: bad local header for ${entry.name}`)
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
  const source =
    entry.compressedSize === 0
      ? require('node:stream').Readable.from([])
      : fs.createReadStream(file, { start, end: start + entry.compressedSize - 1 })
  const stages = entry.method === 8 && entry.compressedSize > 0 ? [zlib.createInflateRaw()] : []
  await pipeline(
    source,
    ...stages,
    check,
    fs.createWriteStream(dest, { mode: /\.so(\.|$)/.test(dest) ? 0o755 : 0o644 }),
  )
  if (crc >>> 0 !== entry.crc) throw new Error(`${entry.name}: CRC mismatch (corrupt download?)`)
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

const DT_NEEDED = 1
const DT_SONAME = 14
const DT_RPATH = 15
const DT_RUNPATH = 29
const SHT_DYNSYM = 11
const SHT_GNU_VERDEF = 0x6ffffffd
const SHT_GNU_VERNEED = 0x6ffffffe
const SHT_GNU_VERSYM = 0x6fffffff

/** The dynamic section of an ELF64 little-endian file: its DT_NEEDED entries and string reader. */
function dynamicEntries(buf, file) {
  if (buf.readUInt32BE(0) !== 0x7f454c46 || buf[4] !== 2 || buf[5] !== 1)
    throw new Error(`${file}: not an ELF64 little-endian file`)
  const phoff = Number(buf.readBigUInt64LE(32))
  const phentsize = buf.readUInt16LE(54)
  const phnum = buf.readUInt16LE(56)
  const loads = []
  let dynamic = null
  for (let i = 0; i < phnum; i++) {
    const ph = phoff + i * phentsize
    const type = buf.readUInt32LE(ph)
    const seg = {
      offset: Number(buf.readBigUInt64LE(ph + 8)),
      vaddr: Number(buf.readBigUInt64LE(ph + 16)),
      filesz: Number(buf.readBigUInt64LE(ph + 32)),
    }
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
  const strings = toOffset(strtab)
  const str = (off) => buf.toString('latin1', strings + off, buf.indexOf(0, strings + off))
  return {
    entries,
    strings,
    str,
    needed: entries.filter((e) => e.tag === DT_NEEDED).map((e) => ({ ...e, name: str(e.val) })),
  }
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

/** The section headers of an ELF64 little-endian file open as `fd`. */
function sectionHeaders(fd, file) {
  const ehdr = readAt(fd, 0, 64)
  if (ehdr.length < 64 || ehdr.readUInt32BE(0) !== 0x7f454c46 || ehdr[4] !== 2 || ehdr[5] !== 1)
    throw new Error(`${file}: not an ELF64 little-endian file`)
  const shoff = Number(ehdr.readBigUInt64LE(40))
  const shentsize = ehdr.readUInt16LE(58)
  const shnum = ehdr.readUInt16LE(60)
  if (!shoff || !shnum) throw new Error(`${file}: no section headers`)
  const table = readAt(fd, shoff, shentsize * shnum)
  return Array.from({ length: shnum }, (_, i) => {
    const p = i * shentsize
    return {
      type: table.readUInt32LE(p + 4),
      offset: Number(table.readBigUInt64LE(p + 24)),
      size: Number(table.readBigUInt64LE(p + 32)),
      link: table.readUInt32LE(p + 40),
      info: table.readUInt32LE(p + 44),
    }
  })
}

const SYMBOL_TYPES = { 0: 'none', 1: 'object', 2: 'function', 6: 'tls', 10: 'ifunc' }
const SYMBOL_BINDS = { 0: 'local', 1: 'global', 2: 'weak', 10: 'unique' }

/**
 * The dynamic symbols of an ELF64 little-endian file (read by sections, so a 400 MB library costs
 * its symbol table, not its size): [{ name, type, bind, defined, versioned }], where `versioned`
 * says the symbol carries a version (an undefined one is then bound to the library that defines
 * that version, as `nm -D --with-symbol-versions` shows it after an `@`).
 */
function dynamicSymbols(file) {
  const fd = fs.openSync(file, 'r')
  try {
    const sections = sectionHeaders(fd, file)
    const dynsym = sections.find((s) => s.type === SHT_DYNSYM)
    if (!dynsym) throw new Error(`${file}: no dynamic symbol table`)
    const syms = readAt(fd, dynsym.offset, dynsym.size)
    const names = readAt(fd, sections[dynsym.link].offset, sections[dynsym.link].size)
    const versym = sections.find((s) => s.type === SHT_GNU_VERSYM)
    const versions = versym ? readAt(fd, versym.offset, versym.size) : null
    const out = []
    for (let i = 1; i < syms.length / 24; i++) {
      const p = i * 24
      const name = syms.readUInt32LE(p)
      const info = syms[p + 4]
      out.push({
        name: names.toString('latin1', name, names.indexOf(0, name)),
        type: SYMBOL_TYPES[info & 0xf] ?? 'other',
        bind: SYMBOL_BINDS[info >> 4] ?? 'other',
        defined: syms.readUInt16LE(p + 6) !== 0,
        // versym 0 is local, 1 global (no version), 2 and up a version; the top bit means hidden
        versioned: versions !== null && (versions.readUInt16LE(i * 2) & 0x7fff) >= 2,
      })
    }
    return out
  } finally {
    fs.closeSync(fd)
  }
}

/** Every offset into the dynamic string table that the file's symbols and version records use. */
function dynamicStringUses(buf, file) {
  const fd = fs.openSync(file, 'r')
  let sections
  try {
    sections = sectionHeaders(fd, file)
  } finally {
    fs.closeSync(fd)
  }
  const uses = []
  for (const s of sections) {
    if (s.type === SHT_DYNSYM)
      for (let p = s.offset + 24; p < s.offset + s.size; p += 24) uses.push(buf.readUInt32LE(p))
    // Elf64_Verneed {version, cnt, file, aux, next} -> Elf64_Vernaux {hash, flags, other, name, next}
    for (let p = s.offset, n = 0; s.type === SHT_GNU_VERNEED && n < s.info; n++) {
      uses.push(buf.readUInt32LE(p + 4))
      for (let a = p + buf.readUInt32LE(p + 8), k = 0; k < buf.readUInt16LE(p + 2); k++) {
        uses.push(buf.readUInt32LE(a + 8))
        a += buf.readUInt32LE(a + 12)
      }
      p += buf.readUInt32LE(p + 12)
    }
    // Elf64_Verdef {version, flags, ndx, cnt, hash, aux, next} -> Elf64_Verdaux {name, next}
    for (let p = s.offset, n = 0; s.type === SHT_GNU_VERDEF && n < s.info; n++) {
      for (let a = p + buf.readUInt32LE(p + 12), k = 0; k < buf.readUInt16LE(p + 6); k++) {
        uses.push(buf.readUInt32LE(a))
        a += buf.readUInt32LE(a + 4)
      }
      p += buf.readUInt32LE(p + 16)
    }
  }
  return uses
}

/**
 * Sets the library search path of an ELF64 little-endian shared library (its DT_RPATH or
 * DT_RUNPATH, whichever it has) to `value`, overwriting the old path's string in place: no bytes
 * move, so `value` may not be longer, and no other name may share the old string's bytes (a linker
 * may store "lib" as the tail of a longer string). Returns the old path.
 */
function setSearchPath(file, value) {
  const buf = fs.readFileSync(file)
  const { entries, strings, str } = dynamicEntries(buf, file)
  const paths = entries.filter((e) => e.tag === DT_RPATH || e.tag === DT_RUNPATH)
  if (paths.length !== 1)
    throw new Error(`${file}: has ${paths.length} RPATH/RUNPATH entries; expected one to overwrite`)
  const [entry] = paths
  const old = str(entry.val)
  const bytes = Buffer.from(`${value}\0`, 'latin1')
  if (bytes.length > old.length + 1)
    throw new Error(`${file}: the search path '${value}' is longer than the old one '${old}'`)
  const names = [
    ...entries
      .filter((e) => e !== entry && [DT_NEEDED, DT_SONAME, DT_RPATH, DT_RUNPATH].includes(e.tag))
      .map((e) => e.val),
    ...dynamicStringUses(buf, file),
  ]
  const shared = names.find((off) => off > entry.val && off <= entry.val + old.length)
  if (shared !== undefined)
    throw new Error(`${file}: the string '${str(shared)}' shares the bytes of the search path '${old}'`)
  bytes.copy(buf, strings + entry.val)
  buf.fill(0, strings + entry.val + bytes.length, strings + entry.val + old.length + 1)
  fs.writeFileSync(file, buf)
  return old
}

/** The search path (DT_RUNPATH, else DT_RPATH) of an ELF64 shared library, or null. */
function searchPathOf(file) {
  const buf = fs.readFileSync(file)
  const { entries, str } = dynamicEntries(buf, file)
  const entry = entries.find((e) => e.tag === DT_RUNPATH) ?? entries.find((e) => e.tag === DT_RPATH)
  return entry ? str(entry.val) : null
}

/** The ELF machine of a file: 'x86_64', 'aarch64' or its number. */
function machineOf(file) {
  const fd = fs.openSync(file, 'r')
  try {
    const ehdr = readAt(fd, 0, 20)
    if (ehdr.length < 20 || ehdr.readUInt32BE(0) !== 0x7f454c46) throw new Error(`${file}: not an ELF file`)
    const m = ehdr.readUInt16LE(18)
    return { 62: 'x86_64', 183: 'aarch64' }[m] ?? m
  } finally {
    fs.closeSync(fd)
  }
}

module.exports = {
  listEntries,
  extractEntry,
  readEntry,
  retargetNeeded,
  neededOf,
  dynamicSymbols,
  setSearchPath,
  searchPathOf,
  machineOf,
}

'use strict'
// The repository's dev virtualenv (.libtorch/) needs `import torch` for the model script, but not
// CUDA: it installs the PyPI torch wheel without its 2.7 GB of nvidia wheels and 691 MB of triton
// (`pip install --no-deps`, scripts/libtorch.js). That wheel's libraries still name CUDA libraries
// as DT_NEEDED (libtorch_cuda.so: libcublas.so.13, libcudnn.so.9, ...), so the dynamic linker
// refuses to load torch without them. This writes, for each such library that is missing, a stub
// with its soname and version nodes that defines every symbol torch's libraries take from it; each
// stub function prints its name and aborts, so a call is loud, never a silent wrong answer. CUDA
// stays unavailable (`torch.cuda.is_available()` is false: the real libcudart finds no driver).
// writeStubs needs binutils (readelf, nm) and a C compiler: dev machines only.
//
// The shared cache's CPU entry (scripts/cache.js) needs the same for torchvision's op library,
// whose _C.so names libtorch_cuda.so and libc10_cuda.so, on an app's machine, which may have no
// compiler and no binutils: writeStandIns plans from the ELF files themselves (scripts/wheel.js)
// and writes each stand-in as bytes (standInLibrary), a shared library with no dependencies whose
// functions write their name to stderr and raise SIGABRT, as the dev stubs do.
const { execFileSync } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { neededOf, dynamicSymbols, machineOf } = require('./wheel')

// The driver is loaded by libcudart at run time; a stub of it would be called, not just loaded.
const DRIVER = new Set(['libcuda.so.1', 'libcuda.so'])
const run = (cmd, args) => execFileSync(cmd, args, { encoding: 'utf8', maxBuffer: 256 << 20 })

/** DT_NEEDED sonames and RPATH/RUNPATH dirs ($ORIGIN expanded) of an ELF file. */
function dynamicSection(file) {
  const needed = []
  const paths = []
  for (const line of run('readelf', ['-d', '-W', file]).split('\n')) {
    const m = /\((NEEDED|RPATH|RUNPATH)\)\s+\S+.*?: \[(.*)\]/.exec(line)
    if (!m) continue
    if (m[1] === 'NEEDED') needed.push(m[2])
    else paths.push(...m[2].split(':').map((p) => p.replace('$ORIGIN', path.dirname(file))))
  }
  return { needed, paths }
}

/** Version node name -> the soname that must define it, from an object's "Version needs". */
function versionNeeds(file) {
  const owner = new Map()
  let current = null
  for (const line of run('readelf', ['-V', '-W', file]).split('\n')) {
    const f = /File: (\S+)\s+Cnt:/.exec(line)
    if (f) current = f[1]
    const n = /Name: (\S+)\s+Flags:/.exec(line)
    if (n && current) owner.set(n[1], current)
  }
  return owner
}

/** Undefined (non-weak) dynamic symbols: [name, version or null]. */
function undefinedSymbols(file) {
  return run('nm', ['-D', '--undefined-only', '--with-symbol-versions', file])
    .split('\n')
    .map((l) => /^\s+U (\S+?)(?:@+(\S+))?$/.exec(l))
    .filter(Boolean)
    .map((m) => [m[1], m[2] ?? null])
}

function definedSymbols(file) {
  const out = new Set()
  for (const l of run('nm', ['-D', '--defined-only', file]).split('\n')) {
    const name = l.trim().split(/\s+/)[2]
    if (name) out.add(name.replace(/@.*$/, ''))
  }
  return out
}

/** Where the dynamic linker would find `soname` for `file` (its rpath, then the system). */
function locate(soname, searchDirs, systemLibs) {
  for (const dir of searchDirs) {
    const candidate = path.join(dir, soname)
    if (fs.existsSync(candidate)) return candidate
  }
  return systemLibs.get(soname) ?? null
}

function systemLibraries() {
  const libs = new Map()
  for (const line of run('ldconfig', ['-p']).split('\n')) {
    const m = /^\s+(\S+) \(libc6,x86-64[^)]*\) => (\S+)$/.exec(line)
    if (m && !libs.has(m[1])) libs.set(m[1], m[2])
  }
  return libs
}

/**
 * Plans the stubs for `roots` (ELF files) with `stubDir` as where they will live: returns
 * Map(soname -> Set of symbol names), walking the real libraries each root loads.
 */
function plan(roots, stubDir, python) {
  const systemLibs = systemLibraries()
  const listed = path.join(stubDir, 'STUBS.txt')
  const earlier = new Set(fs.existsSync(listed) ? fs.readFileSync(listed, 'utf8').split('\n').slice(2) : [])
  const isStub = (file) => path.dirname(file) === stubDir && earlier.has(path.basename(file))
  const seen = new Map() // real file -> dynamic section
  const present = new Map() // soname -> real file, wherever some object's search found it
  const queue = [...roots]
  // A library one object finds is then loaded for all (the dynamic linker matches sonames), so
  // torchvision's _C.so, which has no RPATH, still finds torch's libraries.
  for (let pass = 0; pass < 2; pass++) {
    queue.push(...seen.keys())
    while (queue.length) {
      const file = fs.realpathSync(queue.shift())
      if (!seen.has(file)) seen.set(file, dynamicSection(file))
      for (const soname of seen.get(file).needed) {
        if (present.has(soname)) continue
        const found = locate(soname, seen.get(file).paths, systemLibs)
        if (found && !isStub(found)) {
          present.set(soname, found)
          queue.push(found)
        }
      }
    }
  }
  const missing = new Map() // soname -> Set(symbol)
  for (const dyn of seen.values()) {
    for (const soname of dyn.needed) if (!present.has(soname)) missing.set(soname, new Set())
  }
  // Every symbol some real library defines; the rest of an object's unversioned references can
  // only come from a missing library (Python's own API comes from the interpreter).
  const defined = new Set()
  for (const file of [...seen.keys(), ...(python ? [fs.realpathSync(python)] : [])]) {
    for (const s of definedSymbols(file)) defined.add(s)
  }
  for (const [file, dyn] of seen) {
    const wants = dyn.needed.filter((s) => missing.has(s))
    if (!wants.length) continue
    const owners = versionNeeds(file)
    for (const [name, version] of undefinedSymbols(file)) {
      const owner = version ? owners.get(version) : null
      if (owner && missing.has(owner)) missing.get(owner).add(`${name}@${version}`)
      else if (!version && !defined.has(name) && !name.startsWith('Py') && !name.startsWith('_Py')) {
        for (const soname of wants) missing.get(soname).add(name)
      }
    }
  }
  return missing
}

/** Compiles one stub library into `dir`. */
function compileStub(dir, soname, symbols, cc) {
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'torch-node-stub-'))
  const byVersion = new Map()
  for (const s of symbols) {
    const [name, version = soname] = s.split('@')
    if (!byVersion.has(version)) byVersion.set(version, new Set())
    byVersion.get(version).add(name)
  }
  if (!byVersion.has(soname)) byVersion.set(soname, new Set())
  const names = [...new Set([...byVersion.values()].flatMap((s) => [...s]))].sort()
  const asm = ['.text']
  names.forEach((name, i) => {
    asm.push(
      `.globl ${name}`,
      `.type ${name},@function`,
      `${name}:`,
      `  leaq .Lname${i}(%rip), %rdi`,
      '  jmp torch_node_stub_called@PLT',
    )
  })
  asm.push('.section .note.GNU-stack,"",@progbits', '.section .rodata')
  names.forEach((name, i) => asm.push(`.Lname${i}: .asciz "${name}"`))
  const c =
    '#include <stdio.h>\n#include <stdlib.h>\n' +
    '__attribute__((visibility("hidden"))) void torch_node_stub_called(const char *name) {\n' +
    `  fprintf(stderr, "torch-node dev stub: %s of ${soname} was called, but the CUDA libraries are not installed\\n", name);\n` +
    '  abort();\n}\n'
  const map = [...byVersion].map(([v, set]) => {
    const global = set.size ? `global: ${[...set].map((n) => `"${n}";`).join(' ')}` : ''
    return `${v} { ${global} ${v === soname ? 'local: *;' : ''} };`
  })
  fs.writeFileSync(path.join(work, 'stub.s'), asm.join('\n') + '\n')
  fs.writeFileSync(path.join(work, 'stub.c'), c)
  fs.writeFileSync(path.join(work, 'stub.map'), map.join('\n') + '\n')
  execFileSync(cc, [
    '-shared',
    '-fPIC',
    '-o',
    path.join(dir, soname),
    `-Wl,-soname,${soname}`,
    `-Wl,--version-script=${path.join(work, 'stub.map')}`,
    path.join(work, 'stub.s'),
    path.join(work, 'stub.c'),
  ])
  fs.rmSync(work, { recursive: true, force: true })
}

/**
 * Makes `roots` loadable: writes a stub into `stubDir` (a folder on their RPATH) for each library
 * they need that is missing, and a list of them (STUBS.txt). Returns the sonames stubbed.
 */
function writeStubs(roots, stubDir, { python = null, cc = process.env.CC || 'cc' } = {}) {
  fs.mkdirSync(stubDir, { recursive: true })
  stubDir = fs.realpathSync(stubDir)
  const missing = plan(roots, stubDir, python)
  const earlier = new Set(
    fs.existsSync(path.join(stubDir, 'STUBS.txt'))
      ? fs.readFileSync(path.join(stubDir, 'STUBS.txt'), 'utf8').split('\n').slice(2)
      : [],
  )
  for (const soname of missing.keys()) {
    if (DRIVER.has(soname)) throw new Error(`cuda-stubs: ${soname} is the GPU driver; it is never stubbed`)
    if (fs.existsSync(path.join(stubDir, soname)) && !earlier.has(soname)) {
      throw new Error(`cuda-stubs: ${path.join(stubDir, soname)} is a real library; not overwriting it`)
    }
  }
  for (const [soname, symbols] of missing) compileStub(stubDir, soname, symbols, cc)
  fs.writeFileSync(
    path.join(stubDir, 'STUBS.txt'),
    'Written by torch-node scripts/cuda-stubs.js: stand-ins for CUDA libraries that are not installed.\n' +
      'Each function aborts with its name if called. Installing the real nvidia wheels replaces them.\n' +
      [...missing.keys()].sort().join('\n') +
      '\n',
  )
  return [...missing.keys()]
}

/** The SysV ELF hash (DT_HASH), which the dynamic linker uses to find a symbol by name. */
function elfHash(name) {
  let h = 0
  for (const c of Buffer.from(name, 'latin1')) {
    h = ((h << 4) + c) >>> 0
    const g = h & 0xf0000000
    if (g) h ^= g >>> 24
    h = (h & ~g) >>> 0
  }
  return h
}

// Machine code of a stand-in function, per ELF machine: `common` is write(2, msg, len);
// kill(getpid(), SIGABRT); then a trap should the signal be blocked, with msg and len set by each
// function's `stub`, which `at` places in the text (raw system calls: the stand-in needs no libc).
const CODE = {
  x86_64: {
    machine: 62,
    // mov edi,2; mov eax,1 (write); syscall; mov eax,39 (getpid); syscall; mov edi,eax;
    // mov esi,6 (SIGABRT); mov eax,62 (kill); syscall; ud2
    common: Buffer.from('bf02000000b8010000000f05b8270000000f0589c7be06000000b83e0000000f050f0b', 'hex'),
    stub(at, msg, len, common) {
      const b = Buffer.alloc(17)
      b.writeUInt16LE(0x8d48, 0) // lea rsi, [rip + msg]
      b[2] = 0x35
      b.writeInt32LE(msg - (at + 7), 3)
      b[7] = 0xba // mov edx, len
      b.writeUInt32LE(len, 8)
      b[12] = 0xe9 // jmp common
      b.writeInt32LE(common - (at + 17), 13)
      return b
    },
  },
  aarch64: {
    machine: 183,
    // movz x0,#2; movz x8,#64 (write); svc #0; movz x8,#172 (getpid); svc #0; movz x1,#6
    // (SIGABRT); movz x8,#129 (kill); svc #0; brk #0
    common: words([
      0xd2800040, 0xd2800808, 0xd4000001, 0xd2801588, 0xd4000001, 0xd28000c1, 0xd2801028, 0xd4000001, 0xd4200000,
    ]),
    stub(at, msg, len, common) {
      const rel = msg - at
      const adr = 0x10000000 | ((rel & 3) << 29) | (((rel >> 2) & 0x7ffff) << 5) | 1 // adr x1, msg
      const b = (((common - (at + 8)) >> 2) & 0x3ffffff) | 0x14000000 // b common
      return words([adr >>> 0, (0xd2800002 | (len << 5)) >>> 0, b >>> 0]) // movz x2, #len
    },
  },
}

function words(list) {
  const b = Buffer.alloc(list.length * 4)
  list.forEach((w, i) => b.writeUInt32LE(w, i * 4))
  return b
}

const align = (n, a) => Math.ceil(n / a) * a
const OBJECT_SIZE = 64 // zero bytes behind each data symbol (the reference does not say its size)

/**
 * A shared library (ELF64, little-endian) named `soname` that defines `functions` (each writes
 * "<name> of <soname> was called ..." to stderr and raises SIGABRT) and `objects` (zeroed, writable),
 * for `arch` ('x86_64' or 'aarch64'). No dependencies, no relocations, no libc: two PT_LOADs
 * (code read-only, data writable), a SysV hash table, and section headers so that readelf and nm
 * can read it.
 */
function standInLibrary({ soname, functions = [], objects = [], arch = 'x86_64' }) {
  const code = CODE[arch]
  if (!code) throw new Error(`cuda-stubs: no stand-in code for ${arch}`)
  const symbols = [...functions.map((name) => ({ name, fn: true })), ...objects.map((name) => ({ name, fn: false }))]
  // .dynstr
  const strParts = ['\0']
  let strSize = 1
  const addString = (s) => {
    const at = strSize
    strParts.push(`${s}\0`)
    strSize += Buffer.byteLength(`${s}\0`, 'latin1')
    return at
  }
  const sonameAt = addString(soname)
  for (const s of symbols) s.nameAt = addString(s.name)
  const dynstr = Buffer.from(strParts.join(''), 'latin1')
  // read-only, executable segment: headers, .hash, .dynsym, .dynstr, .text
  const PHNUM = 4
  const hashAt = align(64 + 56 * PHNUM, 8)
  const nsym = symbols.length + 1
  const nbucket = Math.max(1, symbols.length)
  const hash = Buffer.alloc(4 * (2 + nbucket + nsym))
  hash.writeUInt32LE(nbucket, 0)
  hash.writeUInt32LE(nsym, 4)
  symbols.forEach((s, i) => {
    const bucket = 8 + 4 * (elfHash(s.name) % nbucket)
    hash.writeUInt32LE(hash.readUInt32LE(bucket), 8 + 4 * nbucket + 4 * (i + 1)) // chain[i+1] = bucket
    hash.writeUInt32LE(i + 1, bucket)
  })
  const dynsymAt = align(hashAt + hash.length, 8)
  const dynstrAt = dynsymAt + 24 * nsym
  const textAt = align(dynstrAt + dynstr.length, 16)
  const STUB = 32
  const fns = symbols.filter((s) => s.fn)
  const messagesAt = textAt + align(code.common.length, 16) + STUB * fns.length
  const textParts = [code.common, Buffer.alloc(align(code.common.length, 16) - code.common.length)]
  const messages = []
  let messageAt = messagesAt
  for (const s of fns) {
    const msg = Buffer.from(
      `torch-node: ${s.name} of ${soname} was called, but this libtorch has no CUDA (${soname} is a stand-in)\n`,
      'latin1',
    )
    s.value = textAt + align(code.common.length, 16) + STUB * messages.length
    const stub = code.stub(s.value, messageAt, msg.length, textAt)
    textParts.push(stub, Buffer.alloc(STUB - stub.length))
    messages.push(msg)
    messageAt += msg.length
  }
  const text = Buffer.concat([...textParts, ...messages])
  const rxEnd = textAt + text.length
  // writable segment: .dynamic, .data; at an address 64 KiB-page apart from the code (arm64
  // kernels may use 64 KiB pages), at the same offset within the page as in the file.
  const rwAt = align(rxEnd, 16)
  const shift = align(rxEnd, 0x10000)
  const dynamicAt = rwAt
  const DYNAMIC = [
    [14, sonameAt],
    [4, hashAt],
    [5, dynstrAt],
    [6, dynsymAt],
    [10, dynstr.length],
    [11, 24],
    [0, 0],
  ] // SONAME HASH STRTAB SYMTAB STRSZ SYMENT NULL
  const dynamic = Buffer.alloc(16 * DYNAMIC.length)
  DYNAMIC.forEach(([tag, val], i) => {
    dynamic.writeBigInt64LE(BigInt(tag), 16 * i)
    dynamic.writeBigUInt64LE(BigInt(val), 16 * i + 8)
  })
  const dataAt = align(dynamicAt + dynamic.length, 16)
  const objs = symbols.filter((s) => !s.fn)
  objs.forEach((s, i) => (s.value = shift + dataAt + OBJECT_SIZE * i))
  const data = Buffer.alloc(OBJECT_SIZE * objs.length)
  const rwEnd = dataAt + data.length
  // .dynsym: Elf64_Sym {name u32, info u8, other u8, shndx u16, value u64, size u64}
  const SECTION = { text: 4, data: 6 }
  const dynsym = Buffer.alloc(24 * nsym)
  symbols.forEach((s, i) => {
    const p = 24 * (i + 1)
    dynsym.writeUInt32LE(s.nameAt, p)
    dynsym[p + 4] = (1 << 4) | (s.fn ? 2 : 1) // GLOBAL, FUNC or OBJECT
    dynsym.writeUInt16LE(s.fn ? SECTION.text : SECTION.data, p + 6)
    dynsym.writeBigUInt64LE(BigInt(s.value), p + 8)
    dynsym.writeBigUInt64LE(BigInt(s.fn ? STUB : OBJECT_SIZE), p + 16)
  })
  // section headers (not loaded)
  const shstrtab = Buffer.from('\0.hash\0.dynsym\0.dynstr\0.text\0.dynamic\0.data\0.shstrtab\0', 'latin1')
  const name = (n) => shstrtab.indexOf(`${n}\0`)
  const shstrAt = rwEnd
  const shAt = align(shstrAt + shstrtab.length, 8)
  const SH = [
    // name, type, flags, addr, offset, size, link, info, align, entsize
    [0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
    [name('.hash'), 5, 2, hashAt, hashAt, hash.length, 2, 0, 8, 4],
    [name('.dynsym'), 11, 2, dynsymAt, dynsymAt, dynsym.length, 3, 1, 8, 24],
    [name('.dynstr'), 3, 2, dynstrAt, dynstrAt, dynstr.length, 0, 0, 1, 0],
    [name('.text'), 1, 6, textAt, textAt, text.length, 0, 0, 16, 0],
    [name('.dynamic'), 6, 3, shift + dynamicAt, dynamicAt, dynamic.length, 3, 0, 8, 16],
    [name('.data'), 1, 3, shift + dataAt, dataAt, data.length, 0, 0, 16, 0],
    [name('.shstrtab'), 3, 0, 0, shstrAt, shstrtab.length, 0, 0, 1, 0],
  ]
  const out = Buffer.alloc(shAt + 64 * SH.length)
  // Elf64_Ehdr
  Buffer.from([0x7f, 0x45, 0x4c, 0x46, 2, 1, 1]).copy(out, 0) // ELF, 64-bit, little-endian, version 1
  out.writeUInt16LE(3, 16) // ET_DYN
  out.writeUInt16LE(code.machine, 18)
  out.writeUInt32LE(1, 20)
  out.writeBigUInt64LE(64n, 32) // e_phoff
  out.writeBigUInt64LE(BigInt(shAt), 40) // e_shoff
  out.writeUInt16LE(64, 52)
  out.writeUInt16LE(56, 54)
  out.writeUInt16LE(PHNUM, 56)
  out.writeUInt16LE(64, 58)
  out.writeUInt16LE(SH.length, 60)
  out.writeUInt16LE(SH.length - 1, 62)
  // Elf64_Phdr {type, flags, offset, vaddr, paddr, filesz, memsz, align}
  const PH = [
    [1, 5, 0, 0, rxEnd, 0x10000], // PT_LOAD R+X
    [1, 6, rwAt, shift + rwAt, rwEnd - rwAt, 0x10000], // PT_LOAD R+W
    [2, 6, dynamicAt, shift + dynamicAt, dynamic.length, 8], // PT_DYNAMIC
    [0x6474e551, 6, 0, 0, 0, 16], // PT_GNU_STACK: not executable
  ]
  PH.forEach(([type, flags, offset, vaddr, size, al], i) => {
    const p = 64 + 56 * i
    out.writeUInt32LE(type, p)
    out.writeUInt32LE(flags, p + 4)
    for (const [k, v] of [
      [8, offset],
      [16, vaddr],
      [24, vaddr],
      [32, size],
      [40, size],
      [48, al],
    ])
      out.writeBigUInt64LE(BigInt(v), p + k)
  })
  for (const [at, part] of [
    [hashAt, hash],
    [dynsymAt, dynsym],
    [dynstrAt, dynstr],
    [textAt, text],
    [dynamicAt, dynamic],
    [dataAt, data],
    [shstrAt, shstrtab],
  ])
    part.copy(out, at)
  SH.forEach((h, i) => {
    const p = shAt + 64 * i
    out.writeUInt32LE(h[0], p)
    out.writeUInt32LE(h[1], p + 4)
    out.writeBigUInt64LE(BigInt(h[2]), p + 8)
    out.writeBigUInt64LE(BigInt(h[3]), p + 16)
    out.writeBigUInt64LE(BigInt(h[4]), p + 24)
    out.writeBigUInt64LE(BigInt(h[5]), p + 32)
    out.writeUInt32LE(h[6], p + 40)
    out.writeUInt32LE(h[7], p + 44)
    out.writeBigUInt64LE(BigInt(h[8]), p + 48)
    out.writeBigUInt64LE(BigInt(h[9]), p + 56)
  })
  return out
}

/**
 * Plans the stand-ins `root` (an ELF shared library) needs to load beside `libraries` (the real
 * ones it will find, as paths): Map(soname -> { functions, objects }) for each library it names
 * that is neither among them nor the system's nor in `provided` (loaded by someone else first),
 * with every unversioned symbol of `root` that none of `libraries` defines (`system`: a RegExp of
 * the sonames the system provides). The dynamic linker
 * binds an unversioned reference to the first definition in scope, so which missing library
 * really defines a symbol does not matter: each stand-in defines them all.
 */
function planStandIns(root, libraries, { provided = [], system = /^$/ } = {}) {
  const have = new Set([...libraries.map((l) => path.basename(l)), ...provided])
  const missing = neededOf(root).filter((soname) => !have.has(soname) && !system.test(soname))
  if (!missing.length) return new Map()
  for (const soname of missing)
    if (DRIVER.has(soname))
      throw new Error(`cuda-stubs: ${root} needs ${soname}, the GPU driver; it is never stood in for`)
  const defined = new Set()
  for (const lib of libraries)
    for (const s of dynamicSymbols(lib)) if (s.defined && s.bind !== 'local') defined.add(s.name)
  const functions = []
  const objects = []
  for (const s of dynamicSymbols(root)) {
    // weak references may stay unresolved; Python's API is the libtorch_python stub's business
    if (s.defined || s.versioned || s.bind === 'weak' || defined.has(s.name) || /^_?Py/.test(s.name)) continue
    if (s.type === 'tls')
      throw new Error(`cuda-stubs: ${root} needs the thread-local ${s.name}, which a stand-in cannot define`)
    ;(s.type === 'object' ? objects : functions).push(s.name)
  }
  return new Map(missing.map((soname) => [soname, { functions: [...functions].sort(), objects: [...objects].sort() }]))
}

/**
 * Writes into `dir` a stand-in for each library `root` needs and `libraries` lack (planStandIns),
 * for `root`'s machine; returns the plan. Needs no compiler and no binutils.
 */
function writeStandIns(root, libraries, dir, options) {
  const planned = planStandIns(root, libraries, options)
  const arch = machineOf(root)
  fs.mkdirSync(dir, { recursive: true })
  for (const [soname, { functions, objects }] of planned) {
    fs.writeFileSync(path.join(dir, soname), standInLibrary({ soname, functions, objects, arch }), { mode: 0o755 })
  }
  return planned
}

module.exports = { writeStubs, plan, standInLibrary, planStandIns, writeStandIns }

'use strict'
// The repository's dev virtualenv (.libtorch/) needs `import torch` for the model script, but not
// CUDA: it installs the PyPI torch wheel without its 2.7 GB of nvidia wheels and 691 MB of triton
// (`pip install --no-deps`, scripts/libtorch.js). That wheel's libraries still name CUDA libraries
// as DT_NEEDED (libtorch_cuda.so: libcublas.so.13, libcudnn.so.9, ...), so the dynamic linker
// refuses to load torch without them. This writes, for each such library that is missing, a stub
// with its soname and version nodes that defines every symbol torch's libraries take from it; each
// stub function prints its name and aborts, so a call is loud, never a silent wrong answer. CUDA
// stays unavailable (`torch.cuda.is_available()` is false: the real libcudart finds no driver).
// Needs binutils (readelf, nm) and a C compiler: dev machines only; apps use scripts/cache.js.
const { execFileSync } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')

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
    asm.push(`.globl ${name}`, `.type ${name},@function`, `${name}:`,
      `  leaq .Lname${i}(%rip), %rdi`, '  jmp torch_node_stub_called@PLT')
  })
  asm.push('.section .note.GNU-stack,"",@progbits', '.section .rodata')
  names.forEach((name, i) => asm.push(`.Lname${i}: .asciz "${name}"`))
  const c = '#include <stdio.h>\n#include <stdlib.h>\n' +
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
  execFileSync(cc, ['-shared', '-fPIC', '-o', path.join(dir, soname), `-Wl,-soname,${soname}`,
    `-Wl,--version-script=${path.join(work, 'stub.map')}`, path.join(work, 'stub.s'), path.join(work, 'stub.c')])
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
  const earlier = new Set(fs.existsSync(path.join(stubDir, 'STUBS.txt')) ? fs.readFileSync(path.join(stubDir, 'STUBS.txt'), 'utf8').split('\n').slice(2) : [])
  for (const soname of missing.keys()) {
    if (DRIVER.has(soname)) throw new Error(`cuda-stubs: ${soname} is the GPU driver; it is never stubbed`)
    if (fs.existsSync(path.join(stubDir, soname)) && !earlier.has(soname)) {
      throw new Error(`cuda-stubs: ${path.join(stubDir, soname)} is a real library; not overwriting it`)
    }
  }
  for (const [soname, symbols] of missing) compileStub(stubDir, soname, symbols, cc)
  fs.writeFileSync(path.join(stubDir, 'STUBS.txt'),
    'Written by torch-node scripts/cuda-stubs.js: stand-ins for CUDA libraries that are not installed.\n' +
    'Each function aborts with its name if called. Installing the real nvidia wheels replaces them.\n' +
    [...missing.keys()].sort().join('\n') + '\n')
  return [...missing.keys()]
}

module.exports = { writeStubs, plan }

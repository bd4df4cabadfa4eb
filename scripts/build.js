'use strict'
// Builds the release addon `torch-node.node` against the libtorch that scripts/libtorch.js finds,
// with plain cargo into target/release — the same target dir and flags `cargo test` uses, so
// `npm test` does not rebuild libtch. `node scripts/build.js --typings` (npm run typings) also
// regenerates index.d.ts from the Rust doc comments the way `napi build` does — napi-derive
// writes type definitions into NAPI_TYPE_DEF_TMP_FOLDER while compiling our crate, and
// @napi-rs/cli's `generateTypeDef` renders them — but into the same target dir (`napi build`
// passes --target and would rebuild libtch in target/<triple>/: minutes).
const { execFileSync, spawn } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { resolveLibtorch, libtorchVersion, log, ROOT } = require('./libtorch')

/** The header of stand-ins for the ops tch 0.26 wraps that libtorch 2.11 lacks (it says how). */
const COMPAT_HEADER = path.join(ROOT, 'crates', 'core', 'src', 'shim', 'torch_compat.h')

/**
 * What building against an older libtorch needs: tch 0.26's generated C++ calls 14 ops that 2.11
 * lacks and one whose signature changed in 2.12, so against 2.11 every C++ compile gets
 * COMPAT_HEADER (`-include`, through CXXFLAGS, which cc-rs reads for torch-sys's compile of libtch
 * and ours of the shim): each of those ops then throws a coded error naming itself and the version.
 * 2.12 and 2.13 need nothing. Returns the CXXFLAGS to add ('' when none).
 */
function libtorchCompat({ minor }) {
  return minor < 12 ? `-include ${COMPAT_HEADER}` : ''
}

/** The environment every cargo command of this project runs with: the same LIBTORCH each time,
 * or torch-sys's build script reruns and rebuilds libtch (minutes). torch-sys refuses any
 * libtorch but 2.13 unless LIBTORCH_BYPASS_VERSION_CHECK is set: scripts/libtorch.js has checked
 * the version (2.11 to 2.13), so it is set here, never by the user. */
function cargoEnv(libtorch) {
  const env = { ...process.env, LIBTORCH: libtorch, LIBTORCH_BYPASS_VERSION_CHECK: '1' }
  delete env.LIBTORCH_USE_PYTORCH
  const compat = libtorchCompat(libtorchVersion(libtorch))
  if (compat) env.CXXFLAGS = [process.env.CXXFLAGS, compat].filter(Boolean).join(' ')
  return env
}

/**
 * Points `<package>/libtorch` at the libtorch folder: the addon's RUNPATH is `$ORIGIN/libtorch/lib`,
 * so it loads with no LD_LIBRARY_PATH and no absolute path of the build machine inside it. The
 * link is absolute (a cache entry does not move), so moving the app folder keeps it working.
 */
function linkLibtorch(libtorch, dir = ROOT) {
  const link = path.join(dir, 'libtorch')
  const tmp = `${link}.${process.pid}.tmp`
  fs.rmSync(tmp, { force: true })
  fs.symlinkSync(path.resolve(libtorch), tmp)
  fs.renameSync(tmp, link)
}

function build(resolved = resolveLibtorch(), { typings = false, clean = false } = {}) {
  const env = cargoEnv(resolved.libtorch)
  log('building the native addon (cold build: about 4 min on 2 cores; incremental: seconds)')
  const typeDefDir = typings ? fs.mkdtempSync(path.join(os.tmpdir(), 'torch-node-typedefs-')) : null
  if (typings) {
    env.NAPI_TYPE_DEF_TMP_FOLDER = typeDefDir
    env.NAPI_FORCE_BUILD_TORCH_NODE = String(Date.now()) // recompile our crate: its macros write the defs
  }
  execFileSync('cargo', ['build', '--release', '--lib'], { cwd: ROOT, env, stdio: 'inherit' })
  place(resolved, { clean })
  if (typings) return writeTypings(typeDefDir).then(() => resolved)
  log('built torch-node.node')
  return resolved
}

/** Copies the built library to torch-node.node and links libtorch beside it. */
function place(resolved, { clean }) {
  // Copy then rename: overwriting in place would corrupt the mapping of a process that has
  // the addon loaded.
  const tmp = path.join(ROOT, `torch-node.node.${process.pid}.tmp`)
  fs.copyFileSync(path.join(ROOT, 'target', 'release', 'libtorch_node.so'), tmp)
  fs.renameSync(tmp, path.join(ROOT, 'torch-node.node'))
  linkLibtorch(resolved.libtorch)
  // In an app, cargo's target/ (hundreds of MB) has served its purpose.
  if (clean) fs.rmSync(path.join(ROOT, 'target'), { recursive: true, force: true })
}

/**
 * The source build of an app's install: cargo's output goes to stdout, which npm hides for a
 * dependency, so a progress line also goes to the terminal (scripts/cache.js `progress`) every
 * few seconds: the crate being compiled and the time so far. `quiet` (a clone's install, whose
 * output npm shows): cargo's output and the progress lines are kept back, one line says the
 * build is done, and cargo's last lines are printed only when it fails.
 */
function buildWithProgress(resolved, { clean, quiet = false }) {
  const progress = quiet ? () => {} : require('./cache').progress
  if (quiet) log('building the native addon (cold build: about 4 min on 2 cores; incremental: seconds)')
  const started = Date.now()
  let latest = 'starting cargo'
  let crates = 0
  const child = spawn('cargo', ['build', '--release', '--lib'], {
    cwd: ROOT,
    env: cargoEnv(resolved.libtorch),
    stdio: ['ignore', 'inherit', 'pipe'],
  })
  const timer = setInterval(
    () =>
      progress(
        `building from source: ${crates} crates compiled, ${Math.round((Date.now() - started) / 1000)} s (${latest})`,
      ),
    5000,
  )
  let tail = ''
  child.stderr.on('data', (chunk) => {
    if (!quiet) process.stdout.write(chunk)
    tail = (tail + chunk).slice(-4000)
    for (const line of String(chunk).split('\n')) {
      const m = /^\s*Compiling (\S+)/.exec(line)
      if (m) {
        crates++
        latest = `compiling ${m[1]}`
      }
    }
  })
  return new Promise((resolve, reject) => {
    child.on('error', reject)
    child.on('close', (code) => {
      clearInterval(timer)
      if (code !== 0) return reject(new Error(`cargo build failed (exit ${code}):\n${tail}`))
      place(resolved, { clean })
      const done = `built torch-node.node from source in ${Math.round((Date.now() - started) / 1000)} s`
      if (quiet) log(done)
      else progress(done)
      resolve(resolved)
    })
  })
}

/** Constructor declarations, by class (see writeTypings). */
const CONSTRUCTORS = {
  Tensor:
    '  /** Not for users: tensors come from `tensor`, `ones`, `fromBuffer`, ... (`new Tensor()` throws `InvalidArg`). */\n' +
    '  private constructor()\n',
  ScriptModule:
    '  /**\n' +
    '   * Loads a module synchronously (blocking the event loop; prefer `ScriptModule.load` in\n' +
    "   * servers): `new ScriptModule('model.pt')`, `new ScriptModule(buffer, {device: 'cuda'})`.\n" +
    '   */\n' +
    '  constructor(source: string | Uint8Array, options?: ModuleOptions)\n',
  AOTModule:
    '  /** Loads a `.pt2` package synchronously (blocking the event loop; prefer `AOTModule.load`). */\n' +
    '  constructor(path: string, options?: { device?: Device })\n',
}

/** What the primitive and list argument types of src/napi/convert.rs are to TypeScript. */
const PRIMITIVES = {
  Num: 'number',
  Int: 'number',
  Flag: 'boolean',
  Str: 'string',
  Tensors: 'Tensor[]',
  Sources: 'Source[]',
}

/**
 * The line in index.d.ts after which this file writes; above it, the hand-written part and the part that
 * tools/lib-typings.js (`npm run typings`' second step) generates from lib/'s JSDoc, kept as they are.
 */
const TYPINGS_MARKER =
  '// ---- Generated below by `npm run typings` from the Rust doc comments (scripts/build.js): edit those, not this part. ----\n'

/**
 * Renders napi-derive's type definitions (the files a compile of our crate wrote into
 * `typeDefDir`) into index.d.ts, below its hand-written part; removes `typeDefDir` unless `keep`.
 */
async function writeTypings(typeDefDir, { keep = false } = {}) {
  const { generateTypeDef } = await import('@napi-rs/cli')
  const current = fs.readFileSync(path.join(ROOT, 'index.d.ts'), 'utf8')
  const at = current.indexOf(TYPINGS_MARKER)
  if (at < 0) throw new Error(`typings: index.d.ts has lost its marker line: ${TYPINGS_MARKER}`)
  const header = current.slice(0, at + TYPINGS_MARKER.length)
  const { dts } = await generateTypeDef({ typeDefDir, dtsHeader: header, cwd: ROOT })
  if (!keep) fs.rmSync(typeDefDir, { recursive: true, force: true })
  // The classes' constructors are JS functions (index.js: a native constructor could only fail
  // by throwing from native code, see src/napi/outcome.rs), so napi-rs declares none; say what they are.
  let out = dts
  for (const [cls, ctor] of Object.entries(CONSTRUCTORS)) {
    const head = `export declare class ${cls} {\n`
    if (!out.includes(head)) throw new Error(`typings: class ${cls} not found`)
    out = out.replace(head, head + ctor)
  }
  // The primitive and list argument types of src/napi/convert.rs are plain JS types; the others are
  // declared in index.d.ts's hand-written part under their Rust names.
  out = out.replace(/(\w\??: )(Num|Int|Flag|Str|Tensors|Sources)\b/g, (_, head, t) => head + PRIMITIVES[t])
  // napi-rs aliases each renamed Rust struct (`export type JsTensor = Tensor`): not part of the API.
  out = out.replace(/^export type Js\w+ = \w+\n\n?/gm, '')
  // An export's Rust type `Outcome<T>` (src/napi/outcome.rs) is `T` to JS (index.js throws the
  // failure), rendered as napi-rs renders `Result<T>`: `()` is void, `Option<T>` is `T | null`.
  out = out.replace(/\bOutcome<([^<>]*(?:<[^<>]*>[^<>]*)*)>/g, (_, t) =>
    t === 'undefined' ? 'void' : t.replace(/ \| undefined \| null$/, ' | null'),
  )
  // Doc comments that pass through a macro (the option bags of src/napi/options.rs) reach
  // napi-derive as raw strings (`#[doc = r" text"]`), which it renders with their `r"`.
  out = out.replace(/^(\s*(?:\/\*\*|\*)) r#*"( |$)/gm, '$1$2')
  // Native classes that index.js or lib/ wrap (`_Tokenizer`, `_CausalLM`, `_Generation`) are not
  // exported; napi-derive cannot leave a class out of its typings (`skip_typescript` is refused on
  // a struct), so their empty declarations, doc comment included, go here.
  out = out.replace(/^(?:\/\*\*(?:(?!\*\/)[\s\S])*\*\/\n)?export declare class _\w+ \{\}\n/gm, '')
  if (/^export declare class _/m.test(out))
    throw new Error('typings: an internal class _Name has members: wrap them in JS')
  if (/\bOutcome</.test(out)) throw new Error('typings: an Outcome<...> type was left unresolved')
  fs.writeFileSync(path.join(ROOT, 'index.d.ts'), out)
  log('wrote index.d.ts')
}

module.exports = { build, buildWithProgress, cargoEnv, linkLibtorch, place, TYPINGS_MARKER, COMPAT_HEADER }

if (require.main === module) {
  // `--typings-from DIR`: the definitions an earlier compile wrote with NAPI_TYPE_DEF_TMP_FOLDER=DIR
  // (.ci/run keeps those of the install's build), rendered without building again.
  const from = process.argv.indexOf('--typings-from')
  const run =
    from >= 0
      ? () => writeTypings(path.resolve(process.argv[from + 1] ?? ''), { keep: true })
      : () => build(undefined, { typings: process.argv.includes('--typings') })
  Promise.resolve(run()).catch((e) => {
    console.error(e)
    process.exit(1)
  })
}

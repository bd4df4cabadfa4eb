'use strict'
// `npm run prebuild [-- --out DIR]`: the prebuilt addon as a platform package, the napi-rs
// convention (`@torch-node/linux-x64-gnu`, `os`/`cpu`/`libc` fields, one `.node`), from the
// torch-node.node this checkout built. One binary serves both cache variants: it needs
// libtorch.so, not libtorch_cuda.so (build.rs), and finds libtorch through RUNPATH
// `$ORIGIN/libtorch/lib`, a link the main package's install step makes beside it.
// The main package names it in `optionalDependencies` when published (tools/try-registry-install.js).
const { execFileSync } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')
const { ROOT } = require('./libtorch')
const { neededOf } = require('./wheel')

/** This machine's platform key, napi-rs style; null where no prebuilt can exist. */
function platformKey(platform = process.platform, arch = process.arch) {
  if (platform !== 'linux' || !['x64', 'arm64'].includes(arch)) return null
  const glibc = process.report?.getReport().header.glibcVersionRuntime
  return `linux-${arch}-${glibc ? 'gnu' : 'musl'}`
}

const packageName = (key) => `@torch-node/${key}`
const binaryName = (key) => `torch-node.${key}.node`

function prebuild(out = path.join(ROOT, 'npm')) {
  const key = platformKey()
  if (!key) throw new Error(`no prebuilt packages for ${process.platform}-${process.arch}`)
  const addon = path.join(ROOT, 'torch-node.node')
  if (!fs.existsSync(addon)) throw new Error('torch-node.node is not built: run `npm run build` first')
  const needed = neededOf(addon)
  if (needed.includes('libtorch_cuda.so') || !needed.includes('libtorch.so')) {
    throw new Error(
      `torch-node.node needs ${needed.join(', ')}: a prebuilt must need libtorch.so and not libtorch_cuda.so`,
    )
  }
  const runpath = execFileSync('readelf', ['-d', addon], { encoding: 'utf8' }).match(
    /\(RUNPATH\)\s+Library runpath: \[(.*)\]/,
  )
  if (!runpath || runpath[1] !== '$ORIGIN/libtorch/lib')
    throw new Error(`torch-node.node: RUNPATH ${runpath?.[1]}, expected $ORIGIN/libtorch/lib`)
  const { version, license, repository } = require(path.join(ROOT, 'package.json'))
  const dir = path.join(out, key)
  fs.rmSync(dir, { recursive: true, force: true })
  fs.mkdirSync(dir, { recursive: true })
  // Debug sections only: the dynamic symbol table Node needs stays.
  execFileSync('strip', ['--strip-debug', '-o', path.join(dir, binaryName(key)), addon])
  const [, arch, libc] = key.split('-')
  const pkg = {
    name: packageName(key),
    version,
    description: `torch-node's prebuilt native addon for ${key} (libtorch comes from torch-node's shared cache)`,
    main: binaryName(key),
    files: [binaryName(key)],
    os: ['linux'],
    cpu: [arch],
    libc: [libc === 'gnu' ? 'glibc' : 'musl'],
    license: license || 'MIT',
    ...(repository ? { repository } : {}),
  }
  fs.writeFileSync(path.join(dir, 'package.json'), JSON.stringify(pkg, null, 2) + '\n')
  fs.writeFileSync(
    path.join(dir, 'README.md'),
    `# ${pkg.name}\n\n${pkg.description}. Install \`torch-node\`, not this package.\n`,
  )
  return { dir, name: pkg.name, version, key }
}

module.exports = { prebuild, platformKey, packageName, binaryName }

if (require.main === module) {
  const i = process.argv.indexOf('--out')
  const r = prebuild(i > 0 ? path.resolve(process.argv[i + 1]) : undefined)
  console.log(`[torch-node] ${r.name}@${r.version} in ${r.dir}`)
}

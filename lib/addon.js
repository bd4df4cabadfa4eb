// @ts-check
'use strict'
// Where the native addon is, and the one line that names the fix when it or its libtorch cannot
// be loaded (LibraryLoadError). Runs before the addon exists, so it cannot be Rust.
const fs = require('node:fs')
const path = require('node:path')

const ROOT = path.join(__dirname, '..')

/** The C library's version on glibc systems (process.report's header says), else undefined. */
function glibcVersion() {
  const report = /** @type {{header?: {glibcVersionRuntime?: string}} | undefined} */ (process.report?.getReport())
  return report?.header?.glibcVersionRuntime
}

/**
 * The addon this package built from source (torch-node.node), else the prebuilt platform
 * package's (`@torch-node/linux-x64-gnu`, scripts/prebuild.js).
 */
function addonPath() {
  const local = path.join(ROOT, 'torch-node.node')
  if (fs.existsSync(local)) return local
  const key =
    process.platform === 'linux' && ['x64', 'arm64'].includes(process.arch)
      ? `linux-${process.arch}-${glibcVersion() ? 'gnu' : 'musl'}`
      : null
  try {
    if (key) return require.resolve(`@torch-node/${key}`)
  } catch {}
  return local
}

/**
 * `e` (require's error for `file`) with a one-line message that names the fix.
 * @param {Error & {code?: string}} e
 * @param {string} file
 */
function addonLoadError(e, file) {
  const link = path.join(path.dirname(file), 'libtorch')
  /** @type {string | null} */
  let target = null
  try {
    target = fs.readlinkSync(link)
  } catch {}
  const cause = e.message.split('\n')[0]
  if (target === null && path.basename(file) !== 'torch-node.node') {
    // The prebuilt is installed but our install script never linked libtorch beside it.
    e.message =
      'torch-node: its install script has not run, so libtorch is not set up: allow it in your ' +
      'package.json ("allowScripts": {"torch-node": true}), then run `npm rebuild torch-node` ' +
      `(${cause})`
  } else if (target && !fs.existsSync(path.join(link, 'lib'))) {
    e.message =
      `torch-node: libtorch is missing: ${link} points to ${target}, which is gone (the shared ` +
      'libtorch cache was cleared, or this app was copied without it): run `npm rebuild torch-node`, or copy ' +
      `that folder too (${cause})`
  } else {
    e.message =
      `torch-node: cannot load the native addon (${file}): run \`npm rebuild torch-node\` ` +
      `(in this repository: \`npm install\`) (${cause})`
  }
  e.code = 'LibraryLoadError'
  return e
}

/**
 * The native addon's exports (typed in lib/binding.d.ts), or a LibraryLoadError.
 * @returns {import('./binding').Binding}
 */
function loadAddon() {
  const file = addonPath()
  try {
    return require(file)
  } catch (/** @type {any} */ e) {
    throw addonLoadError(e, file)
  }
}

module.exports = { loadAddon, addonPath, addonLoadError }

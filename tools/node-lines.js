'use strict'
// Node binaries of other release lines, for the test matrix: `npm install node@<major>` (the
// npm registry's `node` package, whose preinstall pulls the platform binary from the same
// registry) into `.node-lines/<major>/`, git-ignored and reused by later runs.
//
//   node tools/node-lines.js 24          prints the path of a Node 24 binary (installs it once)
//   node tools/node-lines.js 22 24 26    one path per line
const { execFileSync } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')

const ROOT = path.join(__dirname, '..')
const CACHE = path.join(ROOT, '.node-lines')
/** The lines `.ci/run` tests besides the one it runs on (see docs/install.md, "Node lines"). */
const MATRIX = ['22', '24', '26']

function log(msg) {
  console.error(`[torch-node] ${msg}`)
}

/** The path of a `node` binary of release line `major`, installing it on first use. */
function nodeBinary(major) {
  if (!/^\d+$/.test(String(major))) throw new Error(`node-lines: expected a major version such as 24, got ${major}`)
  const dir = path.join(CACHE, String(major))
  const bin = path.join(dir, 'node_modules', 'node', 'bin', 'node')
  if (works(bin, major)) return bin
  fs.rmSync(dir, { recursive: true, force: true })
  fs.mkdirSync(dir, { recursive: true })
  fs.writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ private: true }))
  log(`installing Node ${major} from the npm registry into ${path.relative(ROOT, dir)}/ (once; ~190 MB)`)
  execFileSync('npm', ['install', '--no-audit', '--no-fund', '--loglevel=error', `node@${major}`], {
    cwd: dir,
    stdio: ['ignore', 'inherit', 'inherit'],
  })
  if (!works(bin, major))
    throw new Error(`node-lines: npm installed node@${major} but ${bin} does not run as Node ${major}`)
  return bin
}

function works(bin, major) {
  if (!fs.existsSync(bin)) return false
  try {
    return execFileSync(bin, ['--version'], { encoding: 'utf8' }).trim().startsWith(`v${major}.`)
  } catch {
    return false
  }
}

module.exports = { nodeBinary, MATRIX }

if (require.main === module) {
  const majors = process.argv.slice(2)
  for (const m of majors.length ? majors : MATRIX) console.log(nodeBinary(m))
}

'use strict'
// `npm test`: the test-only models when missing (tools/models.js --lazy), the Rust unit tests (cargo test: crates/core's, run with no Node; the addon has
// none, but `--workspace` builds the core with the features the addon's build gave its
// dependencies, which `-p torch-node-core` alone would build again: 1m16s against 2m35s in CI)
// and every node:test file in __tests__/ and __tests__/cuda/, on the Node running this script.
// `npm run test:node -- 24` (or `node tools/test.js --node 24`): the node:test files under Node 24
// from the npm registry (tools/node-lines.js installs it once into .node-lines/), less
// MAIN_LINE_ONLY.
const { spawnSync } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')
const { resolveLibtorch, ROOT } = require('../scripts/libtorch')
const { cargoEnv } = require('../scripts/build')
const { nodeBinary } = require('./node-lines')

function run(cmd, args, env) {
  console.log(`$ ${cmd} ${args.join(' ')}`)
  const r = spawnSync(cmd, args, { cwd: ROOT, env, stdio: 'inherit' })
  if (r.status !== 0) process.exit(r.status ?? 1)
}

// Files whose outcome no Node line changes: numerics against Python's goldens and the exporter
// (AOTInductor, vision, detection, the LM families, formatting, optimize passes, the grammar
// engine), and the install cache's file work (the install itself runs on Node 22 and 26 in
// `npm run try:registry`). They run on the main line (`npm test`); under another line they would
// add ~80 s each (measured 2026-11-28, AMD EPYC Zen 3, Node 22) and test the same code paths.
// Then the repository's own checks and pure-JS parsing, whose inputs are files and strings, not
// the runtime: the lockfile and npm config (install), `npm pack`'s file list (package), the docs'
// flag table (serve-docs), the libtorch headers' version (libtorch-version), index.d.ts under tsc
// (typescript), option-bag checks (options), tool-call parsing (tool-calls, tool-calls-stream) and
// the Triton config writer checked by Triton's Python (triton-repository): ~10 s a line (process
// starts included; 2026-11-30, same machine).
// What depends on the line (lifetimes, memory, workers, exit, finalizers, hostile input, the
// executor, streams, servers, the addon loading from a moved folder (build), the docs' examples)
// runs on every line: 3 x ~350 s in CI, of which hostile-session-surfaces, lifetime,
// text-lifetime, memory and tokenizer (hostile input) are a third.
const MAIN_LINE_ONLY = new Set([
  'aot.test.js',
  'cache.test.js',
  'cli.test.js',
  'convert.test.js',
  'detection.test.js',
  'image.test.js',
  'install.test.js',
  'libtorch-version.test.js',
  'lm-families.test.js',
  'math.test.js',
  'optimize.test.js',
  'options.test.js',
  'package.test.js',
  'repr.test.js',
  'serve-docs.test.js',
  'structured-output.test.js',
  'tool-calls-stream.test.js',
  'tool-calls.test.js',
  'triton-repository.test.js',
  'typescript.test.js',
  'vision.test.js',
])

const flag = process.argv.indexOf('--node')
const major = flag >= 0 ? process.argv[flag + 1] : null
if (flag >= 0 && !major) throw new Error('test.js: --node needs a major version, e.g. --node 24')
const node = major ? nodeBinary(major) : process.execPath

// The models only the tests read (tools/models.js's `lazy` jobs: the .pt2 packages, most tiny
// LMs), made the first time and up to date after that (a hash check, seconds).
run(process.execPath, [path.join('tools', 'models.js'), '--lazy'], process.env)
if (!major) {
  const { libtorch } = resolveLibtorch()
  const env = cargoEnv(libtorch)
  // The test binaries live in target/release/deps: the addon's $ORIGIN/libtorch/lib is not there.
  env.LD_LIBRARY_PATH = [path.join(libtorch, 'lib'), process.env.LD_LIBRARY_PATH].filter(Boolean).join(path.delimiter)
  run('cargo', ['test', '--release', '--workspace', '--lib'], env)
}
// __tests__/cuda/ is the CUDA suite: on a machine without a GPU each of its tests skips, saying why.
const files = ['', 'cuda'].flatMap((dir) =>
  fs
    .readdirSync(path.join(ROOT, '__tests__', dir))
    .filter((f) => f.endsWith('.test.js'))
    .sort()
    .map((f) => path.join(dir, f)),
)
const chosen = major ? files.filter((f) => !MAIN_LINE_ONLY.has(f)) : files
if (major)
  console.log(
    `[torch-node] under Node ${major}, main line only (npm test runs them): ${[...MAIN_LINE_ONLY].join(', ')}`,
  )
// Child processes the tests spawn (process.execPath) run on the same line. Under another line,
// the tests of developer tools (the benches) skip: __tests__/helpers.js's `mainLineOnly`.
run(
  node,
  ['--expose-gc', '--test', '--test-concurrency=1', ...chosen.map((f) => path.join('__tests__', f))],
  major ? { ...process.env, TORCH_NODE_TEST_LINE: major } : process.env,
)

'use strict'
// gRPC's packages are optional peer dependencies (package.json `peerDependenciesMeta`): an app
// without them loads torch-node, serves and calls over HTTP, and gets one coded error naming the
// packages to install when it asks for gRPC. Their absence is simulated in a child process whose
// require hook refuses `@grpc/*` as Node does for a package that is not installed.
const { test } = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const { execFileSync } = require('node:child_process')

const ROOT = path.join(__dirname, '..')
const MLP = path.join(ROOT, 'models', 'fixtures', 'mlp_traced.pt')

// Run before torch-node loads: every `@grpc/...` request fails with MODULE_NOT_FOUND, as without the package.
const HOOK = `
const Module = require('node:module')
const resolve = Module._resolveFilename
Module._resolveFilename = function (request, ...rest) {
  if (request.startsWith('@grpc/')) {
    const e = new Error(\`Cannot find module '\${request}'\`)
    e.code = 'MODULE_NOT_FOUND'
    throw e
  }
  return resolve.call(this, request, ...rest)
}
`

const SCRIPT = `
const torch = require(${JSON.stringify(ROOT)})
const report = {}
const codeOf = (p) => p.then(() => ({ ok: true }), (e) => ({ code: e.code, message: e.message }))
;(async () => {
  report.loadedGrpc = Object.keys(require.cache).some((f) => f.includes('@grpc'))
  const model = await torch.ScriptModule.load(${JSON.stringify(MLP)})
  const server = await torch.oip.serve({ models: { mlp: { model, example: torch.rand([2, 4]) } }, port: 0 })
  const remote = await torch.RemoteModule.load(server.url, 'mlp')
  report.http = (await remote.forward(torch.ones([1, 4]))).shape
  report.client = await codeOf(torch.RemoteModule.load('grpc://127.0.0.1:1', 'mlp'))
  report.server = await codeOf(torch.oip.serve({ models: { mlp: { model, example: torch.rand([2, 4]) } }, port: 0, grpcPort: 0 }))
  await server.close()
  console.log(JSON.stringify(report))
})().catch((e) => { console.error(e); process.exit(1) })
`

test('without @grpc/*: HTTP works, gRPC fails with a coded error naming the packages to install', () => {
  const out = execFileSync(process.execPath, ['-e', `${HOOK}\n${SCRIPT}`], {
    cwd: ROOT,
    encoding: 'utf8',
    timeout: 60_000,
  })
  const report = JSON.parse(out.trim().split('\n').pop())
  assert.equal(report.loadedGrpc, false, 'require("torch-node") loads no gRPC package')
  assert.deepEqual(report.http, [1, 3])
  for (const side of ['client', 'server']) {
    assert.equal(report[side].code, 'MissingDependency', `${side}: ${report[side].message}`)
    assert.match(
      report[side].message,
      /gRPC form needs @grpc\/grpc-js, which is not installed: run `npm install @grpc\/grpc-js @grpc\/proto-loader`/,
    )
  }
})

test('with them (the repository installs them as devDependencies) nothing is loaded until gRPC is used', () => {
  const out = execFileSync(
    process.execPath,
    [
      '-e',
      `require(${JSON.stringify(ROOT)}); console.log(Object.keys(require.cache).some((f) => f.includes('@grpc')))`,
    ],
    {
      cwd: ROOT,
      encoding: 'utf8',
      timeout: 60_000,
    },
  )
  assert.equal(out.trim(), 'false')
})

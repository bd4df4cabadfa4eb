'use strict'
// Real Open Inference Protocol peers for the tests (issue 20): NVIDIA Triton Inference Server and
// Triton's own clients, on a CPU-only machine, with no second torch on disk.
//
//   node tools/triton-env.js      sets up .triton/ (git-ignored; idempotent; ~35 s cold, 324 MiB)
//
// .triton/ is a virtualenv on the same Python as the dev virtualenv (.libtorch/) holding:
//   - nvidia-pytriton 0.7.0, for the `tritonserver` 2.51 binary and Python backend its wheel
//     carries (pytriton/tritonserver/{bin,backends/python}; the shared libraries it needs are
//     in nvidia_pytriton.libs/). Installed --no-deps: its own deps serve PyTriton's Python API,
//     which nothing here uses;
//   - numpy < 2: the Python backend's stub is built against numpy 1.x;
//   - tritonclient[http,grpc] 2.51.0: the official client, and the last release whose Linux wheel
//     carries the `perf_analyzer` binary (newer wheels are pure Python; PyPI's `perf-analyzer`
//     is an empty placeholder);
//   - a .pth file naming the site-packages of .libtorch's torch, appended to sys.path after the
//     venv's own site-packages so numpy < 2 wins (torch 2.13 runs without numpy, and with 1.x).
// The Python backend serves a TorchScript file with `torch.jit.load` (writePythonBackendModel):
// Triton's PyTorch backend itself is not in the wheel, and Triton's newest builds carry
// PyTorch 2.12, which may not load a file saved by 2.13.
//
// For tests: tritonEnv() (is it there? why not?), startTriton(), writePythonBackendModel(),
// pythonWithClient(), perfAnalyzer(), freePort().
const { execFileSync, spawn, spawnSync } = require('node:child_process')
const fs = require('node:fs')
const http = require('node:http')
const net = require('node:net')
const os = require('node:os')
const path = require('node:path')

const ROOT = path.join(__dirname, '..')
const DIR = path.join(ROOT, '.triton')
const MARKER = path.join(DIR, 'env.json')
const FAILED = path.join(DIR, 'setup-failed.txt')
const PYTRITON = 'nvidia-pytriton==0.7.0'
const PACKAGES = ['numpy<2', 'tritonclient[http,grpc]==2.51.0']
/** Bump to redo the setup of existing .triton/ folders. */
const LAYOUT = 1

function log(msg) {
  console.log(`[torch-node] ${msg}`)
}

function pythonWithClient() {
  return path.join(DIR, 'bin', 'python')
}

/** The Python whose torch the Python backend reuses: the dev virtualenv's, else $PYTHON. */
function torchPython() {
  const venv = path.join(ROOT, '.libtorch', 'bin', 'python')
  if (fs.existsSync(venv)) return venv
  if (process.env.PYTHON) return process.env.PYTHON
  throw new Error('no Python with torch: run `npm install` first (it creates .libtorch/)')
}

/** What the setup needs to know of a Python: versions, where torch lives, its libpython. */
function probe(python) {
  const code = [
    'import json, os, sys, sysconfig',
    'info = {"python": "%d.%d" % sys.version_info[:2], "version": sys.version.split()[0],',
    '        "libdir": sysconfig.get_config_var("LIBDIR"), "ldlibrary": sysconfig.get_config_var("LDLIBRARY"),',
    '        "shared": bool(sysconfig.get_config_var("Py_ENABLE_SHARED")), "purelib": sysconfig.get_paths()["purelib"]}',
    'try:',
    '    import torch',
    '    info["torch"] = torch.__version__',
    '    info["torchSite"] = os.path.dirname(os.path.dirname(torch.__file__))',
    'except ImportError:',
    '    pass',
    'try:',
    '    import numpy',
    '    info["numpy"] = numpy.__version__',
    'except ImportError:',
    '    pass',
    'print(json.dumps(info))',
  ].join('\n')
  return JSON.parse(execFileSync(python, ['-c', code], { encoding: 'utf8' }))
}

function pip(python, args) {
  log(`pip install ${args.join(' ')}`)
  const r = spawnSync(
    python,
    ['-m', 'pip', 'install', '--disable-pip-version-check', '--no-cache-dir', '--quiet', ...args],
    {
      stdio: ['ignore', 'inherit', 'pipe'],
      encoding: 'utf8',
    },
  )
  process.stderr.write(r.stderr || '')
  if (r.status !== 0) {
    // pip's own last word (e.g. "No matching distribution found for numpy<2" without PyPI).
    const last = (r.stderr || '').trim().split('\n').pop() || `exit ${r.status ?? r.signal}`
    throw new Error(`pip install ${args.join(' ')}: ${last.replace(/^ERROR: /, '')}`)
  }
}

/** Paths inside .triton/ once the packages are installed (purelib from probe()). */
function layout(purelib) {
  const server = path.join(purelib, 'pytriton', 'tritonserver')
  return {
    tritonserver: path.join(server, 'bin', 'tritonserver'),
    backendDir: path.join(server, 'backends'),
    stubs: path.join(server, 'python_backend_stubs'),
    serverLibs: path.join(purelib, 'nvidia_pytriton.libs'),
    links: path.join(DIR, 'lib', 'links'),
    perfAnalyzer: path.join(DIR, 'bin', 'perf_analyzer'),
    fixtures: path.join(DIR, 'fixtures'),
  }
}

/**
 * Sets up .triton/ unless env.json says it is done for this torch Python and these packages, and
 * returns what env.json records. Throws when it cannot (the command line then writes the reason
 * to setup-failed.txt, which tritonEnv() reports).
 */
async function ensureTritonEnv() {
  const started = Date.now()
  const torchPy = torchPython()
  const base = probe(torchPy)
  if (!base.torch) throw new Error(`${torchPy} cannot import torch: run \`npm install\` first`)
  const spec = { layout: LAYOUT, pytriton: PYTRITON, packages: PACKAGES, torchPython: torchPy, torch: base.torch }
  const done = readMarker()
  if (done && JSON.stringify(done.spec) === JSON.stringify(spec) && fs.existsSync(done.tritonserver)) {
    log(`Triton ${done.tritonserverVersion} already set up in .triton/ (torch ${done.torch}, numpy ${done.numpy})`)
    return done
  }
  fs.rmSync(MARKER, { force: true })
  fs.rmSync(FAILED, { force: true })

  // The venv's Python must be torch's (same minor version: the .pth reuses torch's compiled
  // extension modules, and the backend stub is picked for that version).
  let env = fs.existsSync(pythonWithClient()) ? probe(pythonWithClient()) : null
  if (env && env.python !== base.python) {
    log(`.triton/ has Python ${env.python}, torch's is ${base.python}: recreating it`)
    fs.rmSync(DIR, { recursive: true, force: true })
    env = null
  }
  if (!env) {
    log(`creating virtualenv .triton/ with ${path.relative(ROOT, torchPy)} (Python ${base.version})`)
    execFileSync(torchPy, ['-m', 'venv', DIR], { stdio: 'inherit' })
    env = probe(pythonWithClient())
  }
  const py = pythonWithClient()
  pip(py, PACKAGES)
  pip(py, ['--no-deps', PYTRITON])
  const where = layout(env.purelib)

  // After the venv's own site-packages, so its numpy < 2 shadows .libtorch's numpy 2.
  fs.writeFileSync(path.join(env.purelib, 'torch-node-libtorch.pth'), `${base.torchSite}\n`)

  // The Python backend runs <backend dir>/python/triton_python_backend_stub; the wheel keeps one
  // stub per Python version aside, and PyTriton copies the one matching its interpreter there.
  // Same folder depth, so the stub's RPATH ($ORIGIN/../../../../nvidia_pytriton.libs) holds.
  const stub = path.join(where.stubs, base.python, 'triton_python_backend_stub')
  if (!fs.existsSync(stub)) {
    throw new Error(
      `nvidia-pytriton has no Python backend stub for Python ${base.python} (it has ${fs.readdirSync(where.stubs).join(', ')})`,
    )
  }
  const stubDest = path.join(where.backendDir, 'python', 'triton_python_backend_stub')
  fs.copyFileSync(stub, stubDest)
  fs.chmodSync(stubDest, 0o755)

  // LD_LIBRARY_PATH for the server, its stubs and perf_analyzer (startTriton, perfAnalyzer()):
  // - the stub links libpython3.X.so.1.0 and would take the first one ld.so finds (on Debian the
  //   system's 3.11.2 while the venv is pyenv's 3.11.7): point it at the venv's own;
  // - tritonclient's perf_analyzer names libb64.so.0d and libcudart.so.12, which the Triton wheel
  //   carries under hashed names (auditwheel).
  fs.rmSync(where.links, { recursive: true, force: true })
  fs.mkdirSync(where.links, { recursive: true })
  const libpython = base.shared && base.libdir ? path.join(base.libdir, base.ldlibrary) : null
  if (libpython && fs.existsSync(libpython)) {
    fs.symlinkSync(libpython, path.join(where.links, `libpython${base.python}.so.1.0`))
  } else {
    log(
      `warning: Python ${base.version} has no shared libpython; the backend stub will use the system's libpython${base.python}`,
    )
  }
  const serverLibs = fs.readdirSync(where.serverLibs)
  for (const [soname, pattern] of [
    ['libb64.so.0d', /^libb64-[0-9a-f]+\.so\.0d$/],
    ['libcudart.so.12', /^libcudart-[0-9a-f]+\.so\.12/],
  ]) {
    const found = serverLibs.find((f) => pattern.test(f))
    if (found) fs.symlinkSync(path.join(where.serverLibs, found), path.join(where.links, soname))
  }
  // perf_client is a second copy of perf_analyzer (its old name): 20 MB.
  fs.rmSync(path.join(DIR, 'bin', 'perf_client'), { force: true })

  // A tiny two-input, two-output TorchScript module for the multi-tensor tests, made by the
  // torch the backend runs (so nothing binary is committed); also proves the venv imports it all.
  fs.mkdirSync(where.fixtures, { recursive: true })
  const twoIo = path.join(where.fixtures, 'two_io_scripted.pt')
  const check = [
    'import json, sys, numpy, torch, tritonclient.http, tritonclient.grpc',
    'from typing import Tuple',
    'class TwoIo(torch.nn.Module):',
    '    def forward(self, x: torch.Tensor, y: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:',
    '        return x + y, x * y',
    'torch.jit.save(torch.jit.script(TwoIo()), sys.argv[1])',
    'assert int(numpy.__version__.split(".")[0]) < 2, "numpy %s: the backend stub needs numpy < 2" % numpy.__version__',
    'print(json.dumps({"numpy": numpy.__version__, "torch": torch.__version__}))',
  ].join('\n')
  // torch.jit.script reads the class's source: a file, not -c.
  const script = path.join(where.fixtures, 'make_two_io.py')
  fs.writeFileSync(script, `${check}\n`)
  const versions = JSON.parse(runPython(py, [script, twoIo]).trim().split('\n').pop())

  const info = {
    spec,
    python: env.version,
    torch: versions.torch,
    numpy: versions.numpy,
    tritonserver: where.tritonserver,
    tritonserverVersion: null,
    backendDir: where.backendDir,
    links: where.links,
    perfAnalyzer: fs.existsSync(where.perfAnalyzer) ? where.perfAnalyzer : null,
    fixtures: { twoIo },
  }
  // The proof: a server that loads a model through the Python backend (torch in the stub).
  const repo = fs.mkdtempSync(path.join(os.tmpdir(), 'triton-env-'))
  try {
    writePythonBackendModel(repo, 'two_io', { ptPath: twoIo, ...TWO_IO, maxBatchSize: 4 })
    log('starting tritonserver once with a Python-backend model (the check)')
    const server = await startTriton({ repo, timeoutMs: 120_000, info })
    try {
      info.tritonserverVersion = JSON.parse((await httpGet(`${server.httpUrl}/v2`, 5000)).body).version
    } finally {
      await server.stop()
    }
  } finally {
    fs.rmSync(repo, { recursive: true, force: true })
  }
  info.setupSeconds = Math.round((Date.now() - started) / 100) / 10
  info.bytes = folderBytes(DIR)
  fs.writeFileSync(MARKER, `${JSON.stringify(info, null, 2)}\n`)
  log(
    `Triton ${info.tritonserverVersion} ready in .triton/ (${(info.bytes / 2 ** 20).toFixed(0)} MB, ` +
      `${info.setupSeconds} s): Python ${info.python}, torch ${info.torch} (from ${path.relative(ROOT, base.torchSite) || base.torchSite}), ` +
      `numpy ${info.numpy}, perf_analyzer ${info.perfAnalyzer ? 'yes' : 'no'}`,
  )
  return info
}

/** Runs a Python script; on failure throws its last line of stderr (the exception), not the command. */
function runPython(python, args) {
  const r = spawnSync(python, args, { encoding: 'utf8' })
  if (r.status === 0) return r.stdout
  const last = (r.stderr || '').trim().split('\n').pop() || `exit ${r.status ?? r.signal}`
  throw new Error(`${path.basename(python)} ${args.map((a) => path.basename(a)).join(' ')}: ${last}`)
}

function readMarker() {
  try {
    return JSON.parse(fs.readFileSync(MARKER, 'utf8'))
  } catch {
    return null
  }
}

function folderBytes(dir) {
  const r = spawnSync('du', ['-sb', dir], { encoding: 'utf8' })
  return r.status === 0 ? Number(r.stdout.split('\t')[0]) : null
}

/**
 * For tests: `{ok: true, ...env.json}` when .triton/ is set up, else `{ok: false, reason}` with
 * one line saying why (the setup's error, or that it never ran). Reads files only.
 */
function tritonEnv() {
  const info = readMarker()
  if (info && fs.existsSync(info.tritonserver) && fs.existsSync(pythonWithClient())) return { ok: true, ...info }
  let reason = 'not set up: run `node tools/triton-env.js`'
  try {
    reason = `setup failed: ${fs.readFileSync(FAILED, 'utf8').trim().split('\n')[0]}`
  } catch {}
  return { ok: false, reason }
}

/** The path of perf_analyzer and the environment it needs, or null where it is not installed. */
function perfAnalyzer() {
  const info = tritonEnv()
  if (!info.ok || !info.perfAnalyzer) return null
  return {
    path: info.perfAnalyzer,
    env: { ...process.env, LD_LIBRARY_PATH: joinPaths(info.links, process.env.LD_LIBRARY_PATH) },
  }
}

function joinPaths(...parts) {
  return parts.filter(Boolean).join(path.delimiter)
}

/** A TCP port free on 127.0.0.1 right now (the OS picks it). */
function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer()
    srv.unref()
    srv.on('error', reject)
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address()
      srv.close(() => resolve(port))
    })
  })
}

/** pid -> shared-memory prefix of the servers started and not yet stopped. */
const running = new Map()
let exitHook = false
let serial = 0

/**
 * Starts tritonserver on 127.0.0.1 over model repository `repo` and resolves once
 * `GET /v2/health/ready` answers 200 (every model loaded), within `timeoutMs`.
 * Ports are free ones unless given. Resolves to
 *   {httpUrl: 'http://127.0.0.1:P', grpcUrl: '127.0.0.1:Q', httpPort, grpcPort, pid, logs(), stop()}
 * `stop()` (idempotent) ends the whole process group, server and Python backend stubs, SIGTERM then
 * SIGKILL after `graceMs`, and removes their shared-memory regions. `args` are added to the
 * command line (e.g. ['--model-control-mode', 'explicit', '--load-model', 'm']).
 */
async function startTriton({
  repo,
  httpPort,
  grpcPort,
  timeoutMs = 60_000,
  graceMs = 5000,
  args = [],
  verbose = false,
  info,
} = {}) {
  if (!repo) throw new Error('startTriton: `repo` (a model repository folder) is required')
  info = info || tritonEnv()
  if (info.ok === false) throw new Error(`startTriton: Triton is ${info.reason}`)
  const fixedPorts = httpPort != null || grpcPort != null
  for (let attempt = 1; ; attempt++) {
    const httpAt = httpPort ?? (await freePort())
    let grpcAt = grpcPort ?? (await freePort())
    while (grpcAt === httpAt) grpcAt = await freePort()
    try {
      return await launch({ repo, http: httpAt, grpc: grpcAt, timeoutMs, graceMs, args, verbose, info })
    } catch (err) {
      // Another process may have taken a port between freePort() and the server's bind.
      if (fixedPorts || attempt >= 3 || !/address already in use|failed to (start|bind)/i.test(err.message)) throw err
    }
  }
}

async function launch({ repo, http, grpc, timeoutMs, graceMs, args, verbose, info }) {
  // Unique per server, so stop() can remove what a killed stub leaves in /dev/shm.
  const shmPrefix = `torch_node_triton_${process.pid}_${++serial}_`
  const child = spawn(
    info.tritonserver,
    [
      '--model-repository',
      path.resolve(repo),
      '--backend-directory',
      info.backendDir,
      '--http-address',
      '127.0.0.1',
      '--http-port',
      String(http),
      '--grpc-address',
      '127.0.0.1',
      '--grpc-port',
      String(grpc),
      '--allow-metrics',
      'false',
      // No CUDA here: skip the pinned host memory pool it would try to allocate through CUDA.
      '--pinned-memory-pool-byte-size',
      '0',
      // Its wait for open connections and in-flight requests; then it unloads the models, within
      // what is left of graceMs before stop() sends SIGKILL.
      '--exit-timeout-secs',
      String(Math.max(1, Math.floor(graceMs / 2000))),
      '--backend-config',
      `python,shm-region-prefix-name=${shmPrefix}`,
      ...args,
    ],
    {
      detached: true, // its own process group: stop() signals the server and its stubs together
      stdio: ['ignore', 'pipe', 'pipe'],
      env: {
        ...process.env,
        // The stub's embedded Python finds its prefix by looking up `python3` on PATH (CPython's
        // getpath with the default program name): .triton/bin first gives it the venv, hence numpy < 2
        // and the .pth to torch. PyTriton starts the server the same way.
        PATH: joinPaths(path.dirname(pythonWithClient()), process.env.PATH),
        LD_LIBRARY_PATH: joinPaths(info.links, process.env.LD_LIBRARY_PATH),
      },
    },
  )
  let output = ''
  const keep = (chunk) => {
    output = (output + chunk).slice(-200_000)
    if (verbose) process.stderr.write(chunk)
  }
  child.stdout.setEncoding('utf8').on('data', keep)
  child.stderr.setEncoding('utf8').on('data', keep)
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })))
  let exit = null
  exited.then((e) => {
    exit = e
  })

  const pid = child.pid
  let stopping = null
  const server = {
    httpUrl: `http://127.0.0.1:${http}`,
    grpcUrl: `127.0.0.1:${grpc}`,
    httpPort: http,
    grpcPort: grpc,
    pid,
    logs: () => output,
    stop() {
      stopping ??= (async () => {
        signalGroup(pid, 'SIGTERM')
        const timer = new Promise((resolve) => setTimeout(resolve, graceMs).unref())
        await Promise.race([exited, timer])
        // The stubs outlive a killed server for a while (they poll their parent): end them too.
        signalGroup(pid, 'SIGKILL')
        await exited
        await waitGroupGone(pid, 2000)
        removeShm(shmPrefix)
        running.delete(pid)
      })()
      return stopping
    },
  }
  running.set(pid, shmPrefix)
  if (!exitHook) {
    exitHook = true
    // A test process that ends without stop() must not leave servers behind (they run in a
    // process group of their own). On a signal: kill them, then die of that signal as before.
    const killAll = () => {
      for (const [pid, shmPrefix] of running) {
        signalGroup(pid, 'SIGKILL')
        removeShm(shmPrefix)
      }
    }
    process.on('exit', killAll)
    for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
      process.once(sig, () => {
        killAll()
        if (process.listenerCount(sig) === 0) process.kill(process.pid, sig)
      })
    }
  }

  const deadline = Date.now() + timeoutMs
  for (;;) {
    if (exit) {
      await server.stop()
      throw new Error(
        `tritonserver exited (${exit.signal || `code ${exit.code}`}) before it was ready:\n${tail(output)}`,
      )
    }
    if (Date.now() > deadline) {
      await server.stop()
      throw new Error(`tritonserver was not ready within ${timeoutMs} ms:\n${tail(output)}`)
    }
    try {
      if ((await httpGet(`${server.httpUrl}/v2/health/ready`, 1000)).status === 200) return server
    } catch {}
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
}

/**
 * GET with a connection of its own, closed after the answer: Triton's shutdown waits (up to
 * --exit-timeout-secs) for open HTTP connections, and fetch() would leave a keep-alive one.
 */
function httpGet(url, timeoutMs) {
  return new Promise((resolve, reject) => {
    const req = http.get(url, { agent: false, headers: { connection: 'close' }, timeout: timeoutMs }, (res) => {
      let body = ''
      res
        .setEncoding('utf8')
        .on('data', (c) => {
          body += c
        })
        .on('end', () => resolve({ status: res.statusCode, body }))
    })
    req.on('timeout', () => req.destroy(new Error(`GET ${url}: no answer within ${timeoutMs} ms`)))
    req.on('error', reject)
  })
}

/** The server's last log lines, less its ASCII tables (backends, models, options). */
function tail(text, lines = 20) {
  return text
    .trimEnd()
    .split('\n')
    .filter((l) => !/^[|+]/.test(l))
    .slice(-lines)
    .join('\n')
}

function signalGroup(pid, signal) {
  try {
    process.kill(-pid, signal)
  } catch {}
}

async function waitGroupGone(pid, ms) {
  const end = Date.now() + ms
  while (Date.now() < end) {
    try {
      process.kill(-pid, 0)
    } catch {
      return
    }
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}

function removeShm(prefix) {
  let names = []
  try {
    names = fs.readdirSync('/dev/shm')
  } catch {}
  for (const f of names) if (f.startsWith(prefix)) fs.rmSync(path.join('/dev/shm', f), { force: true })
}

const TYPES = {
  BOOL: 'TYPE_BOOL',
  UINT8: 'TYPE_UINT8',
  UINT16: 'TYPE_UINT16',
  UINT32: 'TYPE_UINT32',
  UINT64: 'TYPE_UINT64',
  INT8: 'TYPE_INT8',
  INT16: 'TYPE_INT16',
  INT32: 'TYPE_INT32',
  INT64: 'TYPE_INT64',
  FP16: 'TYPE_FP16',
  FP32: 'TYPE_FP32',
  FP64: 'TYPE_FP64',
}

/** The two_io fixture's tensors as Triton declares them: two [-1] FP32 in, two out (models/make_models.py). */
const TWO_IO = {
  inputs: [
    { datatype: 'FP32', dims: [-1] },
    { datatype: 'FP32', dims: [-1] },
  ],
  outputs: [
    { datatype: 'FP32', dims: [-1] },
    { datatype: 'FP32', dims: [-1] },
  ],
}

/**
 * Writes `repoDir/name/config.pbtxt` (backend "python") and `repoDir/name/1/model.py`, which
 * serves the TorchScript file `ptPath` (`torch.jit.load`, forward under `torch.inference_mode()`)
 * with the PyTorch backend's naming: inputs INPUT__0…, outputs OUTPUT__0… unless named.
 *   inputs / outputs: [{name?, datatype: 'FP32' | 'INT64' | 'BOOL' | ..., dims: [3, 224, 224]}];
 *     dims exclude the batch dimension when maxBatchSize > 0; -1 for a variable size.
 *   maxBatchSize: 0 (no batch dimension) by default.
 *   dynamicBatching: true, or {maxQueueDelayMicroseconds, preferredBatchSize: [..]}; the requests
 *     Triton hands over together are concatenated into one forward (as the PyTorch backend does)
 *     when their shapes past the batch dimension agree.
 *   instances: model instances (each a stub process of its own), 1 by default.
 *   threads: torch.set_num_threads in each instance (default: torch's).
 * Returns the model's folder.
 */
function writePythonBackendModel(
  repoDir,
  name,
  { ptPath, inputs, outputs, maxBatchSize = 0, dynamicBatching, instances = 1, threads } = {},
) {
  if (!/^[A-Za-z0-9_.-]+$/.test(name || '')) throw new Error(`writePythonBackendModel: bad model name ${name}`)
  if (!ptPath || !fs.existsSync(ptPath)) throw new Error(`writePythonBackendModel: no TorchScript file at ${ptPath}`)
  const tensors = (list, prefix, what) => {
    if (!Array.isArray(list) || !list.length)
      throw new Error(`writePythonBackendModel: \`${what}\` must list at least one tensor`)
    return list
      .map((t, i) => {
        const type = TYPES[String(t.datatype).replace(/^TYPE_/, '')]
        if (!type)
          throw new Error(
            `writePythonBackendModel: ${what}[${i}]: datatype ${t.datatype} is not one of ${Object.keys(TYPES).join(' ')}`,
          )
        if (!Array.isArray(t.dims) || !t.dims.every(Number.isInteger))
          throw new Error(`writePythonBackendModel: ${what}[${i}]: dims must be integers`)
        return `  { name: "${t.name ?? `${prefix}__${i}`}" data_type: ${type} dims: [ ${t.dims.join(', ')} ] }`
      })
      .join(',\n')
  }
  const lines = [
    `name: "${name}"`,
    'backend: "python"',
    `max_batch_size: ${maxBatchSize}`,
    `input [\n${tensors(inputs, 'INPUT', 'inputs')}\n]`,
    `output [\n${tensors(outputs, 'OUTPUT', 'outputs')}\n]`,
    `instance_group [ { kind: KIND_CPU count: ${instances} } ]`,
  ]
  if (dynamicBatching) {
    const d = dynamicBatching === true ? {} : dynamicBatching
    const body = []
    if (d.preferredBatchSize) body.push(`preferred_batch_size: [ ${[].concat(d.preferredBatchSize).join(', ')} ]`)
    if (d.maxQueueDelayMicroseconds != null) body.push(`max_queue_delay_microseconds: ${d.maxQueueDelayMicroseconds}`)
    lines.push(`dynamic_batching { ${body.join(' ')} }`)
  }
  const dir = path.join(repoDir, name)
  fs.mkdirSync(path.join(dir, '1'), { recursive: true })
  fs.writeFileSync(path.join(dir, 'config.pbtxt'), `${lines.join('\n')}\n`)
  fs.writeFileSync(
    path.join(dir, '1', 'model.py'),
    MODEL_PY.replace('@PT_PATH@', JSON.stringify(path.resolve(ptPath))).replace(
      '@THREADS@',
      threads ? String(threads) : 'None',
    ),
  )
  return dir
}

const MODEL_PY = `# Written by torch-node's tools/triton-env.js: a TorchScript file served through Triton's
# Python backend the way its PyTorch backend would serve it.
import json

import torch
import triton_python_backend_utils as pb_utils

PT_PATH = @PT_PATH@
THREADS = @THREADS@


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        self.inputs = [t["name"] for t in config["input"]]
        self.outputs = [t["name"] for t in config["output"]]
        self.batched = config.get("max_batch_size", 0) > 0
        if THREADS:
            torch.set_num_threads(THREADS)
        self.module = torch.jit.load(PT_PATH, map_location="cpu")
        self.module.eval()

    def forward(self, tensors):
        with torch.inference_mode():
            out = self.module(*tensors)
        out = list(out) if isinstance(out, (tuple, list)) else [out]
        if len(out) != len(self.outputs):
            raise ValueError("the model returned %d outputs, its config names %d" % (len(out), len(self.outputs)))
        return out

    def execute(self, requests):
        # torch.tensor copies: the request's numpy arrays sit read-only in shared memory.
        batch = [[torch.tensor(pb_utils.get_input_tensor_by_name(r, n).as_numpy()) for n in self.inputs] for r in requests]
        try:
            same = all([t.shape[1:] for t in b] == [t.shape[1:] for t in batch[0]] for b in batch)
            if self.batched and len(batch) > 1 and same:
                # The dynamic batcher's requests: one forward over all of them, split back.
                sizes = [b[0].shape[0] for b in batch]
                merged = self.forward([torch.cat([b[k] for b in batch]) for k in range(len(self.inputs))])
                parts = [o.split(sizes) for o in merged]
                results = [[p[j] for p in parts] for j in range(len(batch))]
            else:
                results = [self.forward(b) for b in batch]
            return [
                pb_utils.InferenceResponse([pb_utils.Tensor(n, t.contiguous().numpy()) for n, t in zip(self.outputs, outs)])
                for outs in results
            ]
        except Exception as e:
            error = pb_utils.TritonError("%s: %s" % (type(e).__name__, str(e).strip().split("\\n")[0]))
            return [pb_utils.InferenceResponse(error=error) for _ in requests]
`

module.exports = {
  ensureTritonEnv,
  tritonEnv,
  startTriton,
  writePythonBackendModel,
  pythonWithClient,
  perfAnalyzer,
  freePort,
  httpGet,
  TRITON_DIR: DIR,
  TWO_IO,
}

if (require.main === module) {
  ensureTritonEnv().catch((err) => {
    fs.mkdirSync(DIR, { recursive: true })
    fs.writeFileSync(FAILED, `${err.message}\n`)
    log(`Triton test environment not set up: ${err.message.split('\n')[0]}`)
    log('the tests that need it will skip (see .triton/setup-failed.txt)')
    process.exit(1)
  })
}

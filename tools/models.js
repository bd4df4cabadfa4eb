'use strict'
// `npm run models`: the models and golden outputs the tests need, made by the model scripts with
// the provisioned Python — models/make_models.py by part (fixtures, ResNet-18, its ONNX and .pt2,
// EfficientNet-Lite0, the sample photos, the detectors), models/make_tokenizer_goldens.py,
// models/make_text_models.py (text encoders exported with python/export_text.py) and
// models/make_lm_models.py (tiny causal LMs exported with python/export_causal_lm.py).
//
// Each job runs in its own process, as many at a time as there are cores (an AOTInductor compile
// is one single-threaded g++ run: two of them on two cores take the time of one), the longest
// first, after the jobs it needs. A job's output goes to models/golden/.logs/<job>.log and is
// printed only when the job fails (third-party warnings and progress bars are noise when nothing
// failed); the terminal gets one line per job. A job that succeeded records a hash of what it
// is made from (its scripts, the torch and transformers versions, its arguments) in
// models/golden/.stamps/<job>: while that hash holds and its outputs exist, a later run skips it,
// so a second `npm install` compiles nothing.
//
//   node tools/models.js                every job of the install
//   node tools/models.js --lazy         the jobs only `npm test` needs (it runs this first)
//   node tools/models.js --part pt2     make_models.py's parts only (its --part, repeatable; the
//                                       scripts' own flags pass through), always run
//   node tools/models.js --force        every job, hashes ignored
const { spawn } = require('node:child_process')
const crypto = require('node:crypto')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { resolveLibtorch, log, ROOT } = require('../scripts/libtorch')

const MODELS = path.join(ROOT, 'models')
const GOLDEN = path.join(MODELS, 'golden')
const STAMPS = path.join(GOLDEN, '.stamps')
const LOGS = path.join(GOLDEN, '.logs')
const VISION = 'make_models.py'

/**
 * The jobs: `script` under models/ with `args`; `after`: jobs whose outputs it reads; `inputs`:
 * files besides the script whose content decides its outputs; `outputs`: files that must exist
 * for a recorded hash to count; `weight`: rough minutes on 2 cores (the longest start first);
 * `lazy`: not made at install, only by `npm test` (or `node tools/models.js --lazy`).
 */
const JOBS = [
  { name: 'fixtures', script: VISION, args: ['--part', 'fixtures'], outputs: ['golden/repr.json'], weight: 0.3 },
  {
    name: 'resnet18',
    script: VISION,
    args: ['--part', 'resnet18'],
    outputs: ['resnet18_traced.pt', 'golden/resnet18.json'],
    weight: 0.5,
  },
  { name: 'resnet18.onnx', script: VISION, args: ['--part', 'onnx'], after: ['resnet18'], weight: 0.7 },
  // The .pt2 packages (AOTInductor compiles: 2 minutes of the install's CPU time beside the
  // addon's build) only the tests read (aot, batcher and bf16 tests): `npm test` makes them.
  {
    name: 'resnet18.pt2',
    script: VISION,
    args: ['--part', 'pt2'],
    after: ['resnet18'],
    outputs: ['golden/pt2.json'],
    weight: 3,
    lazy: true,
  },
  // A tiny random-weight Qwen2-VL (M-RoPE) exported by python/export_vlm.py and transformers' greedy goldens
  // (vlm-qwen2.test.js, vlm_tests.rs): one small compile.
  {
    name: 'vlm-qwen2',
    script: 'make_qwen2_vl_models.py',
    after: ['lm'],
    inputs: ['python'],
    outputs: ['golden/vlm/qwen2-vl-tiny.golden.json'],
    weight: 1,
    lazy: true,
  },
  // Only where the CPU has native bf16 (elsewhere the part says so and writes nothing).
  {
    name: 'convnet_bf16.pt2',
    script: VISION,
    args: ['--part', 'pt2-bf16'],
    inputs: ['python/cpu_flags.py'],
    weight: 1,
    lazy: true,
  },
  {
    name: 'efficientnet',
    script: VISION,
    args: ['--part', 'efficientnet'],
    outputs: ['efficientnet_lite0_traced.pt', 'golden/efficientnet_lite0.json'],
    weight: 0.5,
  },
  {
    name: 'images',
    script: VISION,
    args: ['--part', 'images'],
    after: ['efficientnet'],
    inputs: ['data'],
    outputs: ['golden/images.json'],
    weight: 0.3,
  },
  {
    name: 'detection',
    script: VISION,
    args: ['--part', 'detection'],
    inputs: ['data'],
    outputs: ['golden/detection.json'],
    weight: 1,
  },
  {
    name: 'tokenizers',
    script: 'make_tokenizer_goldens.py',
    outputs: ['golden/tokenizers/goldens.json'],
    weight: 0.3,
  },
  {
    name: 'text',
    script: 'make_text_models.py',
    inputs: ['python', 'models/fixture_common.py'],
    outputs: ['golden/text/minilm.golden.json'],
    weight: 3,
  },
  {
    name: 'lm',
    script: 'make_lm_models.py',
    args: ['--group', 'core'],
    inputs: ['python'],
    outputs: ['golden/lm/llama-tiny.golden.json'],
    weight: 2,
  },
  // 18 tiny causal LMs (17 without native bf16) that only the tests read: Qwen2, Qwen3 and
  // Mistral (causal-lm.test.js), the families, their int8, int4, GGUF and bf16 exports
  // (lm-families.test.js). Most of the AOTInductor compiles, so not made at install: `npm test`
  // makes them the first time it runs (tools/test.js: `lazy`).
  {
    name: 'lm-families',
    script: 'make_lm_models.py',
    args: ['--group', 'families'],
    after: ['lm'],
    inputs: ['python'],
    outputs: ['golden/lm/olmoe-tiny.golden.json'],
    weight: 6,
    lazy: true,
  },
  // torch.pipeline's random-weight heads (BERT, DistilBERT and RoBERTa classifiers, NLI, token
  // classifiers, masked LMs) and their transformers / sentence-transformers goldens (pipeline*.test.js):
  // four small compiles and eight traces, so made when the tests first run.
  {
    name: 'pipeline',
    script: 'make_pipeline_models.py',
    inputs: ['python', 'models/fixture_common.py'],
    outputs: ['golden/pipeline/goldens.json'],
    weight: 4,
    lazy: true,
  },
  // Random-weight CLIP and SigLIP folders, their .pt2 exports and transformers' zero-shot pipeline goldens
  // (clip*.test.js): four small compiles, so made when the tests first run; and two traced OWL-ViT/OWLv2
  // detectors (zero-shot-object-detection.test.js).
  {
    name: 'clip',
    script: 'make_clip_models.py',
    inputs: ['python', 'models/fixture_common.py'],
    outputs: ['golden/clip/goldens.json', 'golden/clip/owl-goldens.json'],
    weight: 2.5,
    lazy: true,
  },
  // Random-weight DPT, Depth Anything (.pt2, dynamic height and width), Segformer, ViT, ConvNeXt, DETR
  // and YOLOS folders and transformers' depth-estimation / image-segmentation / image-classification /
  // object-detection pipeline goldens (dense-pipelines.test.js, vision-pipelines.test.js); ViTModel, Dinov2Model
  // and IJepaModel backbones (image-feature-backbones.test.js).
  {
    name: 'dense',
    script: 'make_dense_models.py',
    inputs: ['python', 'models/fixture_common.py'],
    outputs: ['golden/dense/goldens.json', 'golden/dense/backbone-goldens.json'],
    weight: 2.5,
    lazy: true,
  },
  // A random-weight Mask2Former and DetrForSegmentation exported by python/export_dense.py (two traces) and
  // transformers' image-segmentation goldens per subtask (segmentation-subtasks.test.js).
  {
    name: 'segmentation',
    script: 'make_segmentation_models.py',
    inputs: ['python/export_dense.py', 'python/export_common.py', 'python/export_text.py', 'models/fixture_common.py'],
    outputs: ['golden/segmentation/goldens.json'],
    weight: 1,
    lazy: true,
  },
  // Random-weight Wav2Vec2 and AST audio classifiers exported by python/export_audio.py (two traces) and
  // transformers' audio-classification goldens (audio-classification.test.js).
  {
    name: 'audio',
    script: 'make_audio_models.py',
    inputs: ['python/export_audio.py', 'python/export_common.py', 'python/export_text.py', 'models/fixture_common.py'],
    outputs: ['golden/audio/goldens.json'],
    weight: 1,
    lazy: true,
  },
  // Random-weight CLAP models (unfused and fused) exported by python/export_clap.py in-process (two traces and a
  // script each) and transformers' zero-shot-audio-classification goldens (zero-shot-audio-classification.test.js):
  // about 20 s, 10 s CPU.
  {
    name: 'clap',
    script: 'make_clap_models.py',
    inputs: ['python/export_clap.py', 'python/export_common.py', 'python/export_text.py', 'models/fixture_common.py'],
    outputs: ['golden/clap/goldens.json'],
    weight: 1,
    lazy: true,
  },
  // A random-weight VITS (MMS-TTS-like) exported by python/export_tts.py in-process (two traces, one
  // script) and transformers' VitsModel and VitsTokenizer goldens (text-to-speech.test.js): 17 s, 11 s CPU.
  {
    name: 'tts',
    script: 'make_tts_models.py',
    inputs: ['python/export_tts.py', 'python/export_common.py', 'python/export_text.py', 'models/fixture_common.py'],
    outputs: ['golden/tts/goldens.json'],
    weight: 1,
    lazy: true,
  },
  // A random-weight Whisper folder, its TorchScript export (python/export_whisper.py: two traces, no
  // compile) and transformers' feature-extractor and generate goldens (speech.test.js).
  {
    name: 'whisper',
    script: 'make_whisper_models.py',
    inputs: ['python/export_whisper.py', 'python/export_common.py', 'models/fixture_common.py'],
    outputs: [
      'golden/whisper/goldens.json',
      'golden/whisper/timestamps.json',
      'golden/whisper/segments.json',
      'golden/whisper/beams.json',
    ],
    weight: 1,
    lazy: true,
  },
  // Tiny random-weight LLaVA (CLIP + Llama), Gemma 3 (SigLIP + Gemma 3) and SmolVLM (tiled SigLIP + Llama)
  // exported by python/export_vlm.py and transformers' greedy goldens with images (vlm*.test.js): three small
  // compiles (~70 s each on 2 cores).
  {
    name: 'vlm',
    script: 'make_vlm_models.py',
    after: ['lm'],
    inputs: ['python'],
    outputs: [
      'golden/vlm/llava-tiny.golden.json',
      'golden/vlm/gemma3-tiny.golden.json',
      'golden/vlm/smolvlm-tiny.golden.json',
    ],
    weight: 3,
    lazy: true,
  },
]

/** Every file under `rel` (a file or folder of the repository), sorted, for hashing. */
function filesUnder(rel) {
  const abs = path.join(ROOT, rel)
  if (!fs.existsSync(abs)) return []
  if (!fs.statSync(abs).isDirectory()) return [rel]
  return fs
    .readdirSync(abs, { recursive: true, withFileTypes: true })
    .filter((d) => d.isFile() && !d.name.endsWith('.pyc'))
    .map((d) => path.relative(ROOT, path.join(d.parentPath, d.name)))
    .sort()
}

/** The versions of the Python packages that make the models: a new torch means new models. */
function versions(python) {
  const sitePackages = path.join(path.dirname(path.dirname(python)), 'lib')
  const found = []
  for (const dir of fs.existsSync(sitePackages) ? fs.readdirSync(sitePackages) : []) {
    const site = path.join(sitePackages, dir, 'site-packages')
    if (!fs.existsSync(site)) continue
    for (const entry of fs.readdirSync(site)) {
      if (/^(torch|torchvision|transformers|tokenizers|sentence_transformers)-[^-]+\.dist-info$/.test(entry))
        found.push(entry)
    }
  }
  // Outside a virtualenv (LIBTORCH_USE_PYTORCH): the interpreter's path stands in.
  return found.length ? found.sort() : [python]
}

function jobHash(job, python) {
  const h = crypto.createHash('sha256')
  h.update(JSON.stringify({ args: job.args ?? [], versions: versions(python) }))
  for (const rel of [path.join('models', job.script), ...(job.inputs ?? []).flatMap(filesUnder)]) {
    h.update(rel)
    h.update(fs.readFileSync(path.join(ROOT, rel)))
  }
  return h.digest('hex').slice(0, 20)
}

function upToDate(job, hash) {
  const stamp = path.join(STAMPS, job.name)
  return (
    fs.existsSync(stamp) &&
    fs.readFileSync(stamp, 'utf8').trim() === hash &&
    (job.outputs ?? []).every((o) => fs.existsSync(path.join(MODELS, o)))
  )
}

/**
 * Runs one job with its output in its log file; resolves to null, or to the failure's text.
 * `tmpDir`: the run's temporary folder (see runJobs).
 */
function runJob(job, python, tmpDir) {
  const logFile = path.join(LOGS, `${job.name}.log`)
  const out = fs.openSync(logFile, 'w')
  const env = {
    ...process.env,
    PYTHONUNBUFFERED: '1',
    // Nothing reaches a hub at install time; no progress bars in the logs.
    HF_HUB_OFFLINE: '1',
    TRANSFORMERS_OFFLINE: '1',
    HF_HUB_DISABLE_PROGRESS_BARS: '1',
    TQDM_DISABLE: '1',
    // Inductor's cache and precompiled headers go under the temporary folder (its default cache
    // folder is <tmp>/torchinductor_<user>, and the headers stay there whatever
    // TORCHINDUCTOR_CACHE_DIR says): this run's own, removed when it ends (runJobs).
    TMPDIR: tmpDir,
  }
  const child = spawn(python, [path.join(MODELS, job.script), ...(job.args ?? [])], {
    cwd: ROOT,
    env,
    stdio: ['ignore', out, out],
  })
  fs.closeSync(out)
  return new Promise((resolve) => {
    child.on('error', (e) => resolve(`cannot run ${python}: ${e.message}`))
    child.on('close', (code, signal) => {
      if (code === 0) return resolve(null)
      const tail = fs.readFileSync(logFile, 'utf8').split('\n').slice(-60).join('\n')
      resolve(`exit ${code ?? signal}; the end of ${path.relative(ROOT, logFile)}:\n${tail}`)
    })
  })
}

/**
 * Runs the jobs (all, or those of `only`) with up to `parallel` at a time, the heaviest ready job
 * first. Resolves when all are done; rejects with the first failure's log once the running ones end.
 */
async function runJobs(jobs, python, { force = false, parallel = Math.min(2, os.availableParallelism()) } = {}) {
  fs.mkdirSync(STAMPS, { recursive: true })
  fs.mkdirSync(LOGS, { recursive: true })
  // A temporary folder for this run's jobs, shared by them (Inductor's cache in it, whose
  // precompiled headers, about 140 MB each, serve them all) and removed when they end: the .pt2
  // packages hold what they need. Left in /tmp/torchinductor_root, a fresh clone's install added
  // 540 MB there in its first minutes (400 MB of it headers), and CI once ran out of disk during
  // `npm test`.
  const tmpDir = fs.mkdtempSync(path.join(os.tmpdir(), 'torch-node-models-'))
  try {
    return await runJobsIn(jobs, python, { force, parallel, tmpDir })
  } finally {
    fs.rmSync(tmpDir, { recursive: true, force: true })
  }
}

/** runJobs' loop, its jobs' temporary files in `tmpDir`. */
function runJobsIn(jobs, python, { force, parallel, tmpDir }) {
  const started = Date.now()
  const pending = new Map(jobs.map((j) => [j.name, j]))
  const done = new Set()
  const names = new Set(jobs.map((j) => j.name))
  let running = 0
  let failure = null
  let compiled = 0
  return new Promise((resolve, reject) => {
    const pump = () => {
      if (failure && running === 0) return reject(new Error(failure))
      if (!failure && pending.size === 0 && running === 0) {
        const s = Math.round((Date.now() - started) / 1000)
        log(`models: ${compiled ? `${compiled} made` : 'all up to date'} (${s} s; logs in models/golden/.logs/)`)
        return resolve()
      }
      const ready = [...pending.values()]
        .filter((j) => (j.after ?? []).every((a) => done.has(a) || !names.has(a)))
        .sort((a, b) => b.weight - a.weight)
      let skipped = false
      while (!failure && running < parallel && ready.length) {
        const job = ready.shift()
        pending.delete(job.name)
        const hash = jobHash(job, python)
        if (!force && upToDate(job, hash)) {
          log(`models: ${job.name}: up to date`)
          done.add(job.name)
          skipped = true
          continue
        }
        fs.rmSync(path.join(STAMPS, job.name), { force: true })
        running++
        const t0 = Date.now()
        runJob(job, python, tmpDir).then((failed) => {
          running--
          const s = Math.round((Date.now() - t0) / 1000)
          if (failed) {
            log(`models: ${job.name}: FAILED after ${s} s`)
            failure ??= `models: ${job.name} failed (${failed})`
          } else {
            fs.writeFileSync(path.join(STAMPS, job.name), `${hash}\n`)
            log(`models: ${job.name}: made in ${s} s`)
            compiled++
            done.add(job.name)
          }
          pump()
        })
      }
      // A job found up to date may be what others waited for: look again for ready ones.
      if (skipped) return pump()
      if (!failure && running === 0 && pending.size && !ready.length)
        return reject(new Error(`models: jobs wait on each other: ${[...pending.keys()].join(', ')}`))
    }
    pump()
  })
}

const LOCK = path.join(GOLDEN, '.lock')

/** Whether process `pid` runs (signal 0 tests without sending). */
function alive(pid) {
  try {
    process.kill(pid, 0)
    return true
  } catch (e) {
    return /** @type {NodeJS.ErrnoException} */ (e).code === 'EPERM'
  }
}

/**
 * Runs `work` holding models/golden/.lock: two runs at once (an `npm install` while `npm run
 * models` works) would write the same files. A lock whose process is gone is taken over; a live
 * one is waited for, after which the jobs it made are up to date.
 */
async function withLock(work) {
  fs.mkdirSync(GOLDEN, { recursive: true })
  let said = false
  for (;;) {
    try {
      fs.writeFileSync(LOCK, String(process.pid), { flag: 'wx' })
      break
    } catch (e) {
      if (/** @type {NodeJS.ErrnoException} */ (e).code !== 'EEXIST') throw e
      const holder = Number(fs.readFileSync(LOCK, 'utf8')) || 0
      if (!holder || !alive(holder)) {
        fs.rmSync(LOCK, { force: true })
        continue
      }
      if (!said) log(`models: waiting for process ${holder}, which is making them (${path.relative(ROOT, LOCK)})`)
      said = true
      await new Promise((resolve) => setTimeout(resolve, 2000))
    }
  }
  try {
    return await work()
  } finally {
    fs.rmSync(LOCK, { force: true })
  }
}

/**
 * The install's jobs (`lazy`: the jobs only `npm test` needs, and those they wait on, which are
 * then up to date); `force` remakes them.
 */
function generate(python = resolveLibtorch({ withModelPackages: true }).python, { force = false, lazy = false } = {}) {
  const jobs = lazy
    ? JOBS.filter((j) => j.lazy || JOBS.some((l) => l.lazy && l.after?.includes(j.name)))
    : JOBS.filter((j) => !j.lazy)
  const what = lazy
    ? `the test-only models (${jobs
        .filter((j) => j.lazy)
        .map((j) => j.name)
        .join(', ')})`
    : 'models and golden outputs'
  log(`generating ${what} (${jobs.length} jobs, 2 at a time; models/golden/.logs/)`)
  return withLock(() => runJobs(jobs, python, { force }))
}

module.exports = { generate, JOBS }

if (require.main === module) {
  const argv = process.argv.slice(2)
  const force = argv.includes('--force')
  const lazy = argv.includes('--lazy')
  const rest = argv.filter((a) => a !== '--force' && a !== '--lazy')
  const python = resolveLibtorch({ withModelPackages: true }).python
  // Arguments other than --force go to make_models.py as one job, always run.
  const work = rest.length
    ? withLock(() => runJobs([{ name: 'make_models', script: VISION, args: rest, weight: 1 }], python, { force: true }))
    : generate(python, { force, lazy })
  work.catch((e) => {
    console.error(`[torch-node] ${e.message}`)
    process.exit(1)
  })
}

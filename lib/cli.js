'use strict'
// The `torch-node` command (bin/torch-node.js):
//   torch-node classify [--model m.pt] [--topk 5] [--json] [image...]
//   torch-node export <model-dir|model.gguf> <out-folder> [--dtype ...] [--format ...] [--quantize ...]
// Exit codes: 0 done; 1 an image, the model or the export failed (one line each, with its code);
// 2 a usage error, no bundled model, or no Python with torch and transformers. Every failure is
// one line on stderr, never a stack.
const fs = require('node:fs')
const path = require('node:path')
const { spawn } = require('node:child_process')
const { readTemplateFile } = require('./text/template-file')
const { parseArgs } = require('node:util')
const { modelPath, LITE0_PREPROCESS, SAMPLE_PHOTO } = require('./bundled')

// The exporter per kind of model: `prefix` marks the script's own failure line on stderr.
const EXPORTERS = {
  text: { script: path.join(__dirname, '..', 'python', 'export_text.py'), prefix: 'export_text.py: ' },
  causal: { script: path.join(__dirname, '..', 'python', 'export_causal_lm.py'), prefix: 'export_causal_lm: ' },
  clip: { script: path.join(__dirname, '..', 'python', 'export_clip.py'), prefix: 'export_clip.py: ' },
  owl: { script: path.join(__dirname, '..', 'python', 'export_owl.py'), prefix: 'export_owl.py: ' },
  dense: { script: path.join(__dirname, '..', 'python', 'export_dense.py'), prefix: 'export_dense.py: ' },
  vision: { script: path.join(__dirname, '..', 'python', 'export_vision.py'), prefix: 'export_vision.py: ' },
  vlm: { script: path.join(__dirname, '..', 'python', 'export_vlm.py'), prefix: 'export_vlm: ' },
  whisper: { script: path.join(__dirname, '..', 'python', 'export_whisper.py'), prefix: 'export_whisper.py: ' },
  audio: { script: path.join(__dirname, '..', 'python', 'export_audio.py'), prefix: 'export_audio.py: ' },
  tts: { script: path.join(__dirname, '..', 'python', 'export_tts.py'), prefix: 'export_tts.py: ' },
  clap: { script: path.join(__dirname, '..', 'python', 'export_clap.py'), prefix: 'export_clap.py: ' },
}
// Image models, by config.json's architectures: their exporter and the words of its refusals.
const IMAGE_EXPORTS = [
  { exporter: 'tts', architectures: ['VitsModel'], what: 'VITS text-to-speech (MMS-TTS, TorchScript, float32)' },
  {
    exporter: 'whisper',
    architectures: ['WhisperForConditionalGeneration'],
    what: 'Whisper speech recognition (TorchScript, float32)',
  },
  {
    exporter: 'audio',
    architectures: [
      'Wav2Vec2ForSequenceClassification',
      'HubertForSequenceClassification',
      'WavLMForSequenceClassification',
      'ASTForAudioClassification',
    ],
    what: 'audio classifiers (TorchScript, float32)',
  },
  { exporter: 'clap', architectures: ['ClapModel'], what: 'CLAP models (TorchScript towers, float32)' },
  {
    exporter: 'vlm',
    architectures: [
      'LlavaForConditionalGeneration',
      'Gemma3ForConditionalGeneration',
      'Idefics3ForConditionalGeneration',
      'SmolVLMForConditionalGeneration',
      'Qwen2VLForConditionalGeneration',
    ],
    what: 'vision-language models (LLaVA, Gemma 3, Idefics3/SmolVLM, Qwen2-VL, float32)',
  },
  { exporter: 'clip', architectures: ['CLIPModel', 'SiglipModel'], what: 'CLIP or SigLIP models (float32 towers)' },
  {
    exporter: 'owl',
    architectures: ['OwlViTForObjectDetection', 'Owlv2ForObjectDetection'],
    what: 'OWL-ViT or OWLv2 detectors (float32)',
  },
  {
    exporter: 'dense',
    architectures: [
      'DPTForDepthEstimation',
      'DepthAnythingForDepthEstimation',
      'SegformerForSemanticSegmentation',
      'DPTForSemanticSegmentation',
      'Mask2FormerForUniversalSegmentation',
      'DetrForSegmentation',
    ],
    what: 'depth or segmentation models (float32)',
  },
  {
    exporter: 'vision',
    architectures: [
      'DetrForObjectDetection',
      'YolosForObjectDetection',
      // vision backbones, for image-feature-extraction (python/export_vision.py's BACKBONES)
      'ViTModel',
      'DeiTModel',
      'BeitModel',
      'Data2VecVisionModel',
      'Dinov2Model',
      'Dinov2WithRegistersModel',
      'IJepaModel',
      'ViTMSNModel',
    ],
    // any *ForImageClassification: export_vision.py checks the program against the eager model
    suffixes: ['ForImageClassification'],
    what: 'image classifiers, object detectors or vision backbones (float32)',
  },
]
const CAUSAL_SUFFIXES = ['ForCausalLM', 'LMHeadModel']
const EXPORT_USAGE = `usage: torch-node export <model-dir|model.gguf> <out-folder> [--dtype float32|bfloat16|float16]
         [--format auto|pt2|torchscript] [--max-batch 1024] [--autotune] [--quantize int8|int4|int4-g128]
         [--task auto|feature-extraction|text-classification|text-ranking|token-classification|fill-mask]
         [--chat-template FILE]

Turns a Hugging Face or sentence-transformers text encoder folder (BERT, MiniLM, BGE, E5, MPNet,
...) into a torch-node model folder for torch.text.SentenceEncoder: model.pt2 (torch.export +
AOTInductor; model.pt, TorchScript, where torch.export fails), tokenizer.json and manifest.json.
A *ForSequenceClassification checkpoint (or --task text-classification) becomes a classifier
for torch.pipeline('text-classification'); a sentence-transformers CrossEncoder (one logit), a
reranker for torch.pipeline('text-ranking') (docs/pipelines.md).
A *ForTokenClassification checkpoint (or --task token-classification) becomes a token classifier
for torch.pipeline('token-classification') ('ner'); a *ForMaskedLM one (or --task fill-mask), a
masked LM for torch.pipeline('fill-mask'). An NLI classifier (a label starting with "entail")
also serves torch.pipeline('zero-shot-classification').
A causal language model (config.json's architectures end in ForCausalLM or LMHeadModel: Llama,
SmolLM, Mistral, Qwen2/3, Gemma 2/3, Phi-3, Granite, OLMo 2, GPT-NeoX, StarCoder2, GPT-2,
Mixtral, ...), or a GGUF file transformers reads, becomes a folder for torch.text.CausalLM
instead, through python/export_causal_lm.py (--format does not apply). Runs
python/export_text.py or python/export_causal_lm.py with $PYTHON, else python3, which needs
torch and transformers (a GGUF file: and gguf).
Causal LMs only: --autotune tunes each matmul for this CPU at export (faster decoding, a package
twice the size on disk); --quantize stores the linear layers' weights as int8 (per output
channel) or int4 (groups of 32, or 128: int4-g128), activations and cache in --dtype (default
with --quantize: bfloat16 where this CPU has avx512_bf16 or amx_bf16, else float32; the folder
runs on CPUs with the vector ISA of the one that exported it). docs/generation.md gives each
scheme's accuracy cost and kernels. --chat-template FILE (causal LMs and the chat VLMs): the
folder's chat template is FILE (Jinja, as transformers' chat_template.jinja) instead of the
checkpoint's, e.g. one that renders tools for a model whose own template does not; checked by
rendering a chat before the export and written as the folder's chat_template.jinja.
A CLIPModel or SiglipModel checkpoint becomes a folder for torch.pipeline('zero-shot-image-
classification') and ('image-feature-extraction'), through python/export_clip.py: its text and
image towers (text.pt2, image.pt2), the image processor as preprocess.pt, the logit scale and bias
(--format and --max-batch apply; --dtype float32 only). A depth model (DPTForDepthEstimation,
DepthAnythingForDepthEstimation) or a semantic segmentation one (SegformerForSemanticSegmentation,
DPTForSemanticSegmentation) becomes a folder for torch.pipeline('depth-estimation') or
('image-segmentation') through python/export_dense.py: the model, its image processor and its
post-processing (the same flags as CLIP's). A *ForImageClassification checkpoint (ViT, ConvNeXt,
...) or an object detector (DetrForObjectDetection, YolosForObjectDetection) becomes a folder for
torch.pipeline('image-classification') or ('object-detection') through python/export_vision.py
(the same flags); so does a vision backbone (ViTModel, Dinov2Model, DeiTModel, BeitModel, ...) for
torch.pipeline('image-feature-extraction'). A LlavaForConditionalGeneration, Gemma3ForConditionalGeneration,
Idefics3ForConditionalGeneration, SmolVLMForConditionalGeneration or
Qwen2VLForConditionalGeneration checkpoint becomes a torch.text.CausalLM folder that takes images in the chat (docs/multimodal.md), through
python/export_vlm.py: the decoder, the vision tower and projector (vision.pt) and the image
processor (float32; --max-batch applies). A
WhisperForConditionalGeneration checkpoint becomes a folder for torch.pipeline('automatic-speech-
recognition') (docs/speech.md) through python/export_whisper.py: encoder.pt and decoder.pt
(TorchScript, float32). A Mask2FormerForUniversalSegmentation or DetrForSegmentation checkpoint
also goes through python/export_dense.py (panoptic, instance and semantic segmentation). A
Wav2Vec2, HuBERT or WavLM *ForSequenceClassification or an ASTForAudioClassification checkpoint
becomes a folder for torch.pipeline('audio-classification') through python/export_audio.py
(TorchScript, float32). A ClapModel checkpoint becomes a folder for
torch.pipeline('zero-shot-audio-classification') through python/export_clap.py: both towers traced
and ClapFeatureExtractor as TorchScript (float32). An OwlViTForObjectDetection or Owlv2ForObjectDetection checkpoint becomes
a folder for torch.pipeline('zero-shot-object-detection') through python/export_owl.py: the text
and image programs, the class and box head and the image processor (the same flags as CLIP's).`

const USAGE = `usage: torch-node classify [--model m.pt] [--topk 5] [--json] [image...]
       torch-node export <model-dir> <out-folder> [--dtype ...]   (torch-node export --help)
       torch-node serve --model NAME=FOLDER [...]   (torch-node serve --help)

Classifies images (paths; JPEG, PNG, WebP, GIF, BMP, TIFF) with an ImageNet classifier and prints
the most probable labels of each. Without --model: the bundled EfficientNet-Lite0 (its own
normalization, (p - 127) / 128); with one: Resize(256), CenterCrop(224) and ImageNet mean/std.
Without images: the sample photo chelsea.png. The bundled model is looked for in
$TORCH_NODE_MODELS, else the package's models/ folder.`

class UsageError extends Error {}

/** `chelsea.png: Egyptian cat 0.38, tiger cat 0.38, tabby 0.16` */
function formatPredictions(name, predictions) {
  return `${name}: ${predictions.map((p) => `${p.label} ${p.probability.toFixed(2)}`).join(', ')}`
}

const COMMANDS = ['classify', 'export']

function parseOptions(argv, options) {
  try {
    const help = { type: /** @type {const} */ ('boolean'), short: 'h' }
    return parseArgs({ args: argv, allowPositionals: true, options: { ...options, help } })
  } catch (e) {
    throw new UsageError(e.message.split('\n')[0])
  }
}

function parse(argv) {
  if (argv[0] === 'export') return parseExport(argv.slice(1))
  const { values, positionals } = parseOptions(argv, {
    model: { type: 'string' },
    topk: { type: 'string' },
    json: { type: 'boolean' },
  })
  if (values.help) return { help: true }
  const [command, ...images] = positionals
  if (command !== 'classify') {
    throw new UsageError(
      command === undefined
        ? `no command given (try: torch-node ${COMMANDS.join(' or ')})`
        : `unknown command '${command}' (try: torch-node ${COMMANDS.join(' or ')})`,
    )
  }
  if (values.topk !== undefined && !/^[1-9][0-9]*$/.test(values.topk)) {
    throw new UsageError(`--topk: expected a positive integer, got '${values.topk}'`)
  }
  const topk = values.topk === undefined ? 5 : Number(values.topk)
  return { model: values.model, topk, json: Boolean(values.json), images }
}

const EXPORT_CHOICES = {
  dtype: ['float32', 'bfloat16', 'float16'],
  format: ['auto', 'pt2', 'torchscript'],
  quantize: ['int8', 'int4', 'int4-g32', 'int4-g128'],
  task: ['auto', 'feature-extraction', 'text-classification', 'text-ranking', 'token-classification', 'fill-mask'],
}

function parseExport(argv) {
  const { values, positionals } = parseOptions(argv, {
    dtype: { type: 'string' },
    format: { type: 'string' },
    'max-batch': { type: 'string' },
    autotune: { type: 'boolean' },
    quantize: { type: 'string' },
    task: { type: 'string' },
    'chat-template': { type: 'string' },
  })
  if (values.help) return { command: 'export', help: true }
  for (const [key, choices] of Object.entries(EXPORT_CHOICES)) {
    if (values[key] !== undefined && !choices.includes(values[key])) {
      throw new UsageError(`export: --${key}: expected ${choices.join(', ')}, got '${values[key]}'`)
    }
  }
  const maxBatch = values['max-batch']
  if (maxBatch !== undefined && !(/^[0-9]+$/.test(maxBatch) && Number(maxBatch) >= 2)) {
    throw new UsageError(`export: --max-batch: expected an integer ≥ 2, got '${maxBatch}'`)
  }
  if (positionals.length !== 2) {
    const got = ['neither', 'one path'][positionals.length] ?? `${positionals.length} arguments`
    throw new UsageError(`export: expected <model-dir> <out-folder>, got ${got} (torch-node export --help)`)
  }
  const flags = Object.entries({
    dtype: values.dtype,
    format: values.format,
    'max-batch': maxBatch,
    quantize: values.quantize,
    task: values.task,
  }).flatMap(([key, value]) => (value === undefined ? [] : [`--${key}`, value]))
  if (values.autotune) flags.push('--autotune')
  const chatTemplate = values['chat-template']
  return { command: 'export', modelDir: positionals[0], outDir: positionals[1], flags, chatTemplate }
}

/**
 * True when `modelDir` holds a decoder-only language model, for python/export_causal_lm.py
 * (whose is_causal_lm decides the same way): an `architectures` entry ending in ForCausalLM or
 * LMHeadModel, or `is_decoder` without an encoder; or it is a GGUF file (`.gguf`). No or
 * unreadable config.json: false.
 */
function isCausalLM(modelDir) {
  if (modelDir.endsWith('.gguf')) return fs.statSync(modelDir, { throwIfNoEntry: false })?.isFile() ?? false
  let config
  try {
    config = JSON.parse(fs.readFileSync(path.join(modelDir, 'config.json'), 'utf8'))
  } catch {
    return false
  }
  if (config === null || typeof config !== 'object') return false
  const architectures = Array.isArray(config.architectures) ? config.architectures : []
  if (architectures.some((a) => typeof a === 'string' && CAUSAL_SUFFIXES.some((s) => a.endsWith(s)))) return true
  return Boolean(config.is_decoder) && !config.is_encoder_decoder
}

/**
 * The image-model export `modelDir`'s config.json asks for (IMAGE_EXPORTS: CLIP and SigLIP, depth,
 * segmentation, image classification, object detection), or undefined.
 */
function imageExport(modelDir) {
  try {
    const config = JSON.parse(fs.readFileSync(path.join(modelDir, 'config.json'), 'utf8'))
    const architectures = Array.isArray(config?.architectures) ? config.architectures : []
    const fits = (e, a) => e.architectures.includes(a) || Boolean(e.suffixes?.some((s) => String(a).endsWith(s)))
    return IMAGE_EXPORTS.find((e) => architectures.some((a) => fits(e, a)))
  } catch {
    return undefined
  }
}

/** True when `modelDir`'s config.json names CLIPModel or SiglipModel (python/export_clip.py's folders). */
function isClip(modelDir) {
  return imageExport(modelDir)?.exporter === 'clip'
}

/** Flags python/export_clip.py, export_dense.py and export_vision.py do not take: the first one given, or undefined. */
function imageRefuses(flags) {
  const at = flags.indexOf('--dtype')
  if (at !== -1 && flags[at + 1] !== 'float32') return `--dtype ${flags[at + 1]}`
  return ['--autotune', '--quantize', '--task'].find((f) => flags.includes(f))
}

// The two ways out when the export's Python cannot run it, in every such message.
const WAYS_OUT =
  'set PYTHON=/path/to/python (in a clone of torch-node: PYTHON=.libtorch/bin/python) ' +
  'or pip install torch transformers'

/** `python3` as the shell would find it on $PATH: its absolute path, or the name when not found. */
function resolveCommand(command, env) {
  if (command.includes(path.sep)) return path.resolve(command)
  for (const dir of (env.PATH || '').split(path.delimiter)) {
    const candidate = path.join(dir || '.', command)
    try {
      fs.accessSync(candidate, fs.constants.X_OK)
      return candidate
    } catch {
      // not in this folder
    }
  }
  return command
}

/**
 * The one line for a Python that lacks torch or transformers, from the exporter's last stderr
 * line: the scripts' own `missing Python packages: torch, transformers (install: <python> -m pip
 * ...)` (exit 3), or a crash's `ModuleNotFoundError: No module named 'torch'`. Undefined for any
 * other failure. It names the interpreter that ran and the two ways out.
 */
function missingPackages(line, python, env) {
  if (!line) return undefined
  let packages, interpreter
  const own = line.match(/^missing Python packages: ([\w, ]+) \(install: (.+) -m pip install /)
  const crash = line.match(/^ModuleNotFoundError: No module named '(torch|transformers)[.']/)
  if (own) [, packages, interpreter] = own
  else if (crash) packages = crash[1]
  else return undefined
  const shown = python === interpreter ? python : `${python} (${interpreter || resolveCommand(python, env)})`
  return `the Python that ran, ${shown}, lacks ${packages.split(/, */).join(' and ')}: ${WAYS_OUT}`
}

/**
 * `torch-node export`: runs python/export_text.py (a causal LM: python/export_causal_lm.py; a
 * CLIP or SigLIP model: python/export_clip.py; a depth or segmentation model:
 * python/export_dense.py; an image classifier or detector: python/export_vision.py) with $PYTHON
 * (else python3). Its progress
 * (stdout) streams through; of its stderr (Python's warnings, then the failure) only the
 * script's own last line is shown, as one line, or the last line of a crash.
 */
function runExport(args, { stdout, stderr, env }) {
  if (!fs.existsSync(path.join(args.modelDir))) {
    stderr.write(`torch-node: export: ${args.modelDir}: no such folder\n`)
    return Promise.resolve(2)
  }
  const image = imageExport(args.modelDir)
  const exporter = image ? EXPORTERS[image.exporter] : isCausalLM(args.modelDir) ? EXPORTERS.causal : EXPORTERS.text
  let flags = args.flags
  if (image) {
    const refused =
      imageRefuses(flags) ?? (image.exporter === 'vlm' && flags.includes('--format') ? '--format' : undefined)
    if (refused) {
      stderr.write(`torch-node: export: ${refused}: not for ${image.what}\n`)
      return Promise.resolve(2)
    }
    const at = flags.indexOf('--dtype')
    if (at !== -1) flags = [...flags.slice(0, at), ...flags.slice(at + 2)]
  } else if (exporter === EXPORTERS.causal) {
    const at = flags.indexOf('--format')
    if (at !== -1 && flags[at + 1] !== 'auto') {
      stderr.write(`torch-node: export: --format ${flags[at + 1]}: a causal LM exports as pt2 only\n`)
      return Promise.resolve(2)
    }
    if (at !== -1) flags = [...flags.slice(0, at), ...flags.slice(at + 2)]
    if (flags.includes('--task')) {
      stderr.write(
        'torch-node: export: --task: for text encoders and classifiers only (this folder holds a causal LM)\n',
      )
      return Promise.resolve(2)
    }
  } else {
    const only = ['--autotune', '--quantize'].find((f) => flags.includes(f))
    if (only) {
      stderr.write(`torch-node: export: ${only}: for causal LMs only (this folder holds a text encoder)\n`)
      return Promise.resolve(2)
    }
  }
  let template = null
  if (args.chatTemplate !== undefined) {
    if (exporter !== EXPORTERS.causal && image?.exporter !== 'vlm') {
      stderr.write('torch-node: export: --chat-template: for causal LMs and chat VLMs only\n')
      return Promise.resolve(2)
    }
    try {
      template = readTemplate(args.chatTemplate, args.modelDir)
    } catch (e) {
      stderr.write(`torch-node: export: --chat-template: ${e.message}\n`)
      return Promise.resolve(2)
    }
  }
  return runExporter(exporter, args, flags, { stdout, stderr, env }).then((code) => {
    if (code !== 0 || template === null) return code
    const file = path.join(args.outDir, 'chat_template.jinja')
    fs.writeFileSync(file, template)
    const { formatOf } = require('./text/tool-calls')
    const tools = formatOf(template)
    stdout.write(
      `chat template: ${args.chatTemplate} as ${file} (${tools ? `renders tools: ${tools} format` : 'renders no tools'})\n`,
    )
    return 0
  })
}

/**
 * `--chat-template FILE`'s text, checked: readable UTF-8 of at most 1 MiB that renders a
 * two-turn chat with a generation prompt (with the source folder's tokenizer where it has one:
 * its special tokens are the template's variables; else a bare one). Throws a one-line Error.
 * @param {string} file
 * @param {string} modelDir
 */
function readTemplate(file, modelDir) {
  const template = readTemplateFile(file)
  const { text } = require('..')
  const own = path.join(modelDir, 'tokenizer.json')
  const tokenizer = fs.existsSync(own) ? text.Tokenizer.fromFile(modelDir) : text.Tokenizer.fromJSON(BARE_TOKENIZER)
  const chat = [
    { role: 'user', content: 'Hello' },
    { role: 'assistant', content: 'Hi' },
    { role: 'user', content: 'How are you?' },
  ]
  try {
    tokenizer.applyChatTemplate(chat, { chatTemplate: template, addGenerationPrompt: true })
  } catch (e) {
    throw new Error(`${file} does not render a chat: ${String(/** @type {any} */ (e).message).split('\n')[0]}`, {
      cause: e,
    })
  }
  return template
}

// A tokenizer with no vocabulary to speak of: the template check's where the source has none (GGUF).
const BARE_TOKENIZER = JSON.stringify({
  version: '1.0',
  model: { type: 'WordLevel', vocab: { '[UNK]': 0 }, unk_token: '[UNK]' },
})

/**
 * Runs `exporter`'s script on the folder with `flags`: its progress (stdout) streams through; of
 * its stderr only the script's own last line is shown. Resolves to the exit code.
 */
function runExporter(exporter, args, flags, { stdout, stderr, env }) {
  const python = env.PYTHON || 'python3'
  return new Promise((resolve) => {
    const child = spawn(python, [exporter.script, args.modelDir, args.outDir, ...flags], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...env, PYTHONUNBUFFERED: '1' },
    })
    let errors = ''
    let settled = false // a failed spawn emits 'error' and then 'close'
    const finish = (code, message) => {
      if (settled) return
      settled = true
      if (message !== undefined) stderr.write(`torch-node: export: ${message}\n`)
      resolve(code)
    }
    child.stdout.on('data', (chunk) => stdout.write(chunk))
    child.stderr.on('data', (chunk) => {
      errors = (errors + chunk).slice(-65536)
    })
    child.on('error', (e) => {
      finish(
        2,
        e.code === 'ENOENT'
          ? `no Python at '${python}': ${WAYS_OUT.replace('pip', 'install Python 3 and pip')}`
          : `cannot run '${python}': ${e.message}`,
      )
    })
    child.on('close', (code, signal) => {
      if (code === 0) return finish(0)
      const lines = errors
        .split('\n')
        .map((l) => l.trim())
        .filter(Boolean)
      const own = lines.filter((l) => l.startsWith(exporter.prefix)).pop()
      const lacking = missingPackages(own ? own.slice(exporter.prefix.length) : lines[lines.length - 1], python, env)
      if (lacking) return finish(2, lacking)
      const line = own
        ? own.slice(exporter.prefix.length)
        : lines.pop() || `${python} exited with ${signal || `status ${code}`}`
      // 3: torch or transformers missing, like argparse's own 2 a setup or usage problem.
      finish(code === 3 || (code === 2 && !own) ? 2 : 1, line)
    })
  })
}

const oneLine = (e) => `${e.code || e.name || 'Error'}: ${String(e.message).split('\n')[0]}`

/** Runs the CLI with these arguments; resolves to the exit code. */
async function main(argv, { stdout = process.stdout, stderr = process.stderr, env = process.env } = {}) {
  let args
  try {
    args = parse(argv)
  } catch (e) {
    if (!(e instanceof UsageError)) throw e
    stderr.write(`torch-node: ${e.message}\n`)
    return 2
  }
  if (args.help) {
    stdout.write(`${args.command === 'export' ? EXPORT_USAGE : USAGE}\n`)
    return 0
  }
  if (args.command === 'export') return runExport(args, { stdout, stderr, env })
  const bundled = args.model === undefined
  const model = bundled ? modelPath() : args.model
  if (bundled && !fs.existsSync(model)) {
    stderr.write(
      `torch-node: no bundled model at ${model} ` +
        '(run `npm run models` in a clone of torch-node, or pass --model m.pt)\n',
    )
    return 2
  }
  let torch, module
  try {
    torch = require('..')
    module = await torch.ScriptModule.load(model)
  } catch (e) {
    stderr.write(`torch-node: ${model}: ${oneLine(e)}\n`)
    return 1
  }
  const images = args.images.length ? args.images : [SAMPLE_PHOTO]
  const results = []
  let failed = false
  for (const image of images) {
    const name = args.images.length ? image : path.basename(image)
    try {
      const options = { topk: args.topk, ...(bundled && { preprocess: LITE0_PREPROCESS }) }
      const [predictions] = await torch.vision.classify(module, image, options)
      results.push({ image: name, predictions })
      if (!args.json) stdout.write(`${formatPredictions(name, predictions)}\n`)
    } catch (e) {
      failed = true
      results.push({ image: name, error: { code: e.code, message: e.message } })
      stderr.write(`torch-node: ${name}: ${oneLine(e)}\n`)
    }
  }
  module.dispose()
  if (args.json) stdout.write(`${JSON.stringify(results, null, 2)}\n`)
  return failed ? 1 : 0
}

module.exports = { main, formatPredictions, isCausalLM, isClip, imageExport }

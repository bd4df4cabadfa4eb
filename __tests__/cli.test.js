'use strict'
// The `torch-node` command in child processes: what it prints, its exit codes, and one line on
// stderr for every failure (a missing bundled model, bad arguments, a bad image or model).
const { describe, test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { spawnSync } = require('node:child_process')
const torch = require('..')
const { LITE0_PREPROCESS } = require('../lib/bundled')
const { isCausalLM } = require('../lib/cli')
const { mainLineOnly } = require('./helpers')

const ROOT = path.join(__dirname, '..')
const BIN = path.join(ROOT, 'bin', 'torch-node.js')
const CHELSEA = path.join('data', 'chelsea.png')
const COFFEE = path.join('models', 'images', 'coffee.png')
const MODEL = path.join(ROOT, 'models', 'efficientnet_lite0_traced.pt')
const CATS = ['tabby', 'tiger cat', 'Persian cat', 'Siamese cat', 'Egyptian cat']

/** Runs the CLI; the timeout only turns a hang into a failure. */
function cli(args, env = {}) {
  const r = spawnSync(process.execPath, [BIN, ...args], {
    cwd: ROOT,
    encoding: 'utf8',
    timeout: 120_000,
    env: { ...process.env, ...env },
  })
  assert.equal(r.signal, null, `killed by ${r.signal} (hung?)`)
  return { code: r.status, stdout: r.stdout, stderr: r.stderr }
}

/** stderr is exactly one line starting `torch-node: ` and matching `pattern`. */
function oneLine(stderr, pattern) {
  const lines = stderr.split('\n').filter(Boolean)
  assert.equal(lines.length, 1, `one line, got:\n${stderr}`)
  assert.match(lines[0], /^torch-node: /)
  assert.match(lines[0], pattern)
  assert.doesNotMatch(stderr, /\n\s+at /, 'no stack')
}

describe('torch-node classify', () => {
  let model
  before(async () => {
    assert.ok(fs.existsSync(MODEL), `${MODEL} is missing: run \`npm run models\``)
    model = await torch.ScriptModule.load(MODEL)
  })
  after(() => model.dispose())

  test('no arguments: the bundled model on the sample photo, one line of 5 labels', () => {
    const { code, stdout, stderr } = cli(['classify'])
    assert.equal(code, 0, stderr)
    assert.equal(stderr, '')
    const m = stdout.match(/^chelsea\.png: (.+)\n$/)
    assert.ok(m, stdout)
    const entries = m[1].split(', ')
    assert.equal(entries.length, 5)
    for (const e of entries) assert.match(e, /^[^,]+ [01]\.\d\d$/)
    assert.ok(CATS.includes(entries[0].replace(/ [01]\.\d\d$/, '')), entries[0])
  })

  test("--json --topk 2 on two images: the numbers classify gives with EfficientNet-Lite0's normalization", async () => {
    const { code, stdout, stderr } = cli(['classify', '--json', '--topk', '2', CHELSEA, COFFEE])
    assert.equal(code, 0, stderr)
    const out = JSON.parse(stdout)
    assert.deepEqual(
      out.map((r) => r.image),
      [CHELSEA, COFFEE],
    )
    const expected = await torch.vision.classify(model, [CHELSEA, COFFEE], { topk: 2, preprocess: LITE0_PREPROCESS })
    out.forEach((r, n) => {
      assert.equal(r.predictions.length, 2)
      assert.deepEqual(
        r.predictions.map((p) => p.index),
        expected[n].map((p) => p.index),
      )
      r.predictions.forEach((p, k) => assert.ok(Math.abs(p.probability - expected[n][k].probability) < 1e-5))
    })
    assert.equal(out[1].predictions[0].label, 'espresso')
  })

  test("--model: that model, with torchvision's ImageNet pre-processing (classify's default)", async () => {
    const { code, stdout, stderr } = cli(['classify', '--json', '--topk', '3', '--model', MODEL])
    assert.equal(code, 0, stderr)
    const [r] = JSON.parse(stdout)
    assert.equal(r.image, 'chelsea.png')
    const [expected] = await torch.vision.classify(model, path.join(ROOT, CHELSEA), { topk: 3 })
    r.predictions.forEach((p, k) => {
      assert.equal(p.index, expected[k].index)
      assert.ok(Math.abs(p.probability - expected[k].probability) < 1e-5)
    })
  })

  test("no bundled model (as in an app's install): one line, exit 2", () => {
    const empty = fs.mkdtempSync(path.join(os.tmpdir(), 'torch-node-models-'))
    try {
      const { code, stdout, stderr } = cli(['classify'], { TORCH_NODE_MODELS: empty })
      assert.equal(code, 2)
      assert.equal(stdout, '')
      oneLine(
        stderr,
        new RegExp(
          `no bundled model at ${path.join(empty, 'efficientnet_lite0_traced.pt').replace(/[.\\/]/g, '\\$&')} \\(.*--model`,
        ),
      )
    } finally {
      fs.rmSync(empty, { recursive: true })
    }
  })

  test('a bad image: one line with its code, exit 1; the other images are still classified', () => {
    const { code, stdout, stderr } = cli(['classify', 'README.md', CHELSEA])
    assert.equal(code, 1)
    oneLine(stderr, /^torch-node: README\.md: InvalidImage: cannot decode the image/)
    assert.match(stdout, /^data\/chelsea\.png: /)
    const missing = cli(['classify', 'no-such.png'])
    assert.equal(missing.code, 1)
    oneLine(missing.stderr, /no-such\.png: InvalidArg: cannot read image/)
  })

  test('a bad model file: one line with its code, exit 1', () => {
    const { code, stderr } = cli(['classify', '--model', 'README.md'])
    assert.equal(code, 1)
    oneLine(stderr, /^torch-node: README\.md: ModelLoadError: /)
  })

  test('bad arguments: one line, exit 2', () => {
    for (const [args, pattern] of [
      [[], /no command given/],
      [['predict'], /unknown command 'predict'/],
      [['classify', '--top', '3'], /Unknown option '--top'/],
      [['classify', '--topk', 'x'], /--topk: expected a positive integer, got 'x'/],
      [['classify', '--topk', '0'], /--topk: expected a positive integer, got '0'/],
      [['classify', '--model'], /--model/],
    ]) {
      const { code, stdout, stderr } = cli(args)
      assert.equal(code, 2, `${args.join(' ')}: ${stderr}`)
      assert.equal(stdout, '')
      oneLine(stderr, pattern)
    }
  })

  test('--help: the usage, exit 0', () => {
    const { code, stdout } = cli(['--help'])
    assert.equal(code, 0)
    assert.match(stdout, /^usage: torch-node classify \[--model m\.pt\] \[--topk 5\] \[--json\] \[image\.\.\.\]/)
  })
})

// `torch-node export` runs python/export_text.py with $PYTHON: the provisioned venv's Python
// here. The real export is TorchScript (--format torchscript, seconds) of the random-weight MPNet
// source folder models/make_text_models.py writes; the .pt2 path (a minute of AOTInductor per
// model) is what make_text_models.py runs, and text-encoder.test.js checks its folders.
describe('torch-node export', () => {
  const PYTHON = path.join(ROOT, '.libtorch', 'bin', 'python')
  const SOURCE = path.join(ROOT, 'models', 'golden', 'text', 'mpnet-random-src')
  const GOLDEN = path.join(ROOT, 'models', 'golden', 'text', 'mpnet-random.golden.json')
  const hasTransformers =
    fs.existsSync(PYTHON) && spawnSync(PYTHON, ['-c', 'import torch, transformers'], { encoding: 'utf8' }).status === 0
  const noExport = !hasTransformers
    ? 'no .libtorch Python with torch and transformers'
    : !fs.existsSync(SOURCE)
      ? `no ${SOURCE}: run \`npm run models\``
      : false
  let tmp
  before(() => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'torch-node-export-'))
  })
  after(() => fs.rmSync(tmp, { recursive: true, force: true }))

  test('--help: the usage, exit 0', () => {
    const { code, stdout } = cli(['export', '--help'])
    assert.equal(code, 0)
    assert.match(
      stdout,
      /^usage: torch-node export <model-dir\|model\.gguf> <out-folder> \[--dtype float32\|bfloat16\|float16\]/,
    )
  })

  test('bad arguments: one line, exit 2', () => {
    for (const [args, pattern] of [
      [['export'], /export: expected <model-dir> <out-folder>, got neither/],
      [['export', 'models'], /export: expected <model-dir> <out-folder>, got one path/],
      [
        ['export', 'models', 'out', '--dtype', 'float64'],
        /export: --dtype: expected float32, bfloat16, float16, got 'float64'/,
      ],
      [
        ['export', 'models', 'out', '--format', 'onnx'],
        /export: --format: expected auto, pt2, torchscript, got 'onnx'/,
      ],
      [['export', 'models', 'out', '--max-batch', '1'], /export: --max-batch: expected an integer ≥ 2, got '1'/],
      [['export', 'no-such-dir', 'out'], /export: no-such-dir: no such folder/],
      [['export', 'models', 'out', '--autotune'], /export: --autotune: for causal LMs only/],
      [['export', 'models', 'out', '--quantize', 'int8'], /export: --quantize: for causal LMs only/],
      [
        ['export', 'models', 'out', '--quantize', 'int3'],
        /export: --quantize: expected int8, int4, int4-g32, int4-g128, got 'int3'/,
      ],
    ]) {
      const { code, stdout, stderr } = cli(args)
      assert.equal(code, 2, `${args.join(' ')}: ${stderr}`)
      assert.equal(stdout, '')
      oneLine(stderr, pattern)
    }
  })

  // Issue 34: a Python without torch printed only `ModuleNotFoundError: No module named 'torch'`.
  const LACKS =
    /: set PYTHON=\/path\/to\/python \(in a clone of torch-node: PYTHON=\.libtorch\/bin\/python\) or pip install torch transformers$/
  test('no Python, or one without torch/transformers: one line naming it and the two ways out, exit 2', (t) => {
    const missing = cli(['export', 'models', path.join(tmp, 'x')], { PYTHON: path.join(tmp, 'no-python') })
    assert.equal(missing.code, 2)
    oneLine(
      missing.stderr,
      /export: no Python at '.*no-python': set PYTHON=.* or install Python 3 and pip install torch transformers$/,
    )
    if (!fs.existsSync(PYTHON)) return t.skip('no .libtorch Python')
    // -S: no site-packages, so neither torch nor transformers imports; both exporters say so.
    const bare = path.join(tmp, 'bare-python')
    fs.writeFileSync(bare, `#!/bin/sh\nexec '${PYTHON}' -S "$@"\n`, { mode: 0o755 })
    const lm = path.join(tmp, 'lm-config')
    fs.mkdirSync(lm)
    fs.writeFileSync(path.join(lm, 'config.json'), JSON.stringify({ architectures: ['LlamaForCausalLM'] }))
    for (const folder of ['models', lm]) {
      const r = cli(['export', folder, path.join(tmp, 'x')], { PYTHON: bare })
      assert.equal(r.code, 2, r.stderr)
      oneLine(
        r.stderr,
        /^torch-node: export: the Python that ran, .*bare-python \(.+\), lacks torch and transformers: /,
      )
      oneLine(r.stderr, LACKS)
      assert.ok(!fs.existsSync(path.join(tmp, 'x')))
    }
  })

  // What a newcomer ran: PYTHON unset, so `python3` from $PATH; here one that has no torch.
  const bare = spawnSync('python3', ['-c', 'import torch'], { encoding: 'utf8' })
  const systemLacks = bare.error ? 'no python3 on PATH' : bare.status === 0 ? 'python3 on PATH has torch' : false
  test('python3 from PATH without torch: its resolved path in the one line', { skip: systemLacks }, () => {
    const lm = path.join(tmp, 'lm-config-2')
    fs.mkdirSync(lm)
    fs.writeFileSync(path.join(lm, 'config.json'), JSON.stringify({ architectures: ['LlamaForCausalLM'] }))
    const env = { ...process.env }
    delete env.PYTHON
    const r = spawnSync(process.execPath, [BIN, 'export', lm, path.join(tmp, 'y')], {
      cwd: ROOT,
      encoding: 'utf8',
      env,
    })
    assert.equal(r.status, 2, r.stderr)
    oneLine(r.stderr, /^torch-node: export: the Python that ran, python3 \(\/.+\), lacks torch( and transformers)?: /)
    oneLine(r.stderr, LACKS)
  })

  // A causal LM goes to python/export_causal_lm.py, whose is_causal_lm decides the same way.
  test('a causal LM folder is routed to the causal exporter: isCausalLM agrees with is_causal_lm', () => {
    const folder = (name, config) => {
      const dir = path.join(tmp, name)
      fs.mkdirSync(dir)
      if (config !== undefined) fs.writeFileSync(path.join(dir, 'config.json'), JSON.stringify(config))
      return dir
    }
    const cases = [
      [folder('llama-arch', { architectures: ['LlamaForCausalLM'] }), true],
      [folder('gpt2-arch', { architectures: ['GPT2LMHeadModel'] }), true],
      [folder('decoder', { is_decoder: true }), true],
      [folder('t5', { is_decoder: true, is_encoder_decoder: true }), false],
      [folder('bert', { architectures: ['BertModel'] }), false],
      [folder('no-config'), false],
      // A GGUF file: transformers reads it (python/export_causal_lm.py's source()).
      [(fs.writeFileSync(path.join(tmp, 'model.gguf'), 'GGUF'), path.join(tmp, 'model.gguf')), true],
      [path.join(tmp, 'missing.gguf'), false],
      ...['llama-tiny-src', 'gpt2-tiny-src']
        .map((n) => [path.join(ROOT, 'models', 'golden', 'lm', n), true])
        .filter(([dir]) => fs.existsSync(dir)),
      ...(fs.existsSync(SOURCE) ? [[SOURCE, false]] : []),
    ]
    for (const [dir, want] of cases) assert.equal(isCausalLM(dir), want, dir)
    const py = spawnSync(
      'python3',
      [
        '-c',
        'import sys; sys.path.insert(0, "python"); from export_causal_lm import ' +
          'is_causal_lm; print(" ".join(str(is_causal_lm(d)).lower() for d in sys.argv[1:]))',
        ...cases.map(([d]) => d),
      ],
      { cwd: ROOT, encoding: 'utf8' },
    )
    if (py.status === 0)
      assert.deepEqual(
        py.stdout.trim().split(' '),
        cases.map(([, want]) => String(want)),
      )
    const r = cli(['export', cases[0][0], path.join(tmp, 'x'), '--format', 'torchscript'])
    assert.equal(r.code, 2)
    oneLine(r.stderr, /export: --format torchscript: a causal LM exports as pt2 only/)
  })

  const noPython = hasTransformers ? false : 'no .libtorch Python with torch and transformers'
  // --chat-template FILE: checked before the export runs (a Python that records it was run stands
  // in for the exporter), written as the folder's chat_template.jinja after it succeeds.
  test("--chat-template: a template that renders is the folder's; a bad one stops before the export", () => {
    const lm = path.join(tmp, 'tmpl-llama')
    fs.mkdirSync(lm)
    fs.writeFileSync(path.join(lm, 'config.json'), JSON.stringify({ architectures: ['LlamaForCausalLM'] }))
    const ran = path.join(tmp, 'tmpl-ran')
    const fake = path.join(tmp, 'tmpl-python')
    // The stand-in exporter: records its arguments, makes the out folder (its last argument but the flags').
    fs.writeFileSync(fake, `#!/bin/sh\necho "$@" > '${ran}'\nmkdir -p "$3"\necho exported\n`, { mode: 0o755 })
    const file = (name, text) => (fs.writeFileSync(path.join(tmp, name), text), path.join(tmp, name))
    const good = file(
      'tools.jinja',
      '{% if tools %}<tools>{{ tools | tojson }}</tools>\n{% endif %}{% for m in messages %}{{ m.role }}: {{ m.content }}\n' +
        '{% endfor %}{% if add_generation_prompt %}assistant: <tool_call>{% endif %}',
    )
    const refused = [
      [
        file('broken.jinja', '{% for m in messages %}{{ m.role }'),
        /--chat-template: .*broken\.jinja does not render a chat: /,
      ],
      [file('bytes.jinja', Buffer.from([0xff, 0xfe, 0x00])), /--chat-template: .*bytes\.jinja: not UTF-8 text$/],
      [path.join(tmp, 'absent.jinja'), /--chat-template: cannot read .*absent\.jinja: ENOENT$/],
      ['/dev/zero', /--chat-template: \/dev\/zero: larger than 1 MiB$/],
    ]
    for (const [template, pattern] of refused) {
      const r = cli(['export', lm, path.join(tmp, 'tmpl-out'), '--chat-template', template], { PYTHON: fake })
      assert.equal(r.code, 2, r.stderr)
      oneLine(r.stderr, pattern)
      assert.equal(fs.existsSync(ran), false, 'the exporter ran')
    }
    const bert = path.join(tmp, 'tmpl-bert')
    fs.mkdirSync(bert)
    fs.writeFileSync(path.join(bert, 'config.json'), JSON.stringify({ architectures: ['BertModel'] }))
    const text = cli(['export', bert, path.join(tmp, 'tmpl-out'), '--chat-template', good], { PYTHON: fake })
    assert.equal(text.code, 2)
    oneLine(text.stderr, /export: --chat-template: for causal LMs and chat VLMs only/)
    const out = path.join(tmp, 'tmpl-out')
    const r = cli(['export', lm, out, '--chat-template', good], { PYTHON: fake })
    assert.equal(r.code, 0, r.stderr)
    assert.equal(fs.readFileSync(ran, 'utf8').includes('--chat-template'), false, 'not a flag of the exporter')
    assert.equal(fs.readFileSync(path.join(out, 'chat_template.jinja'), 'utf8'), fs.readFileSync(good, 'utf8'))
    assert.match(
      r.stdout,
      /^exported\nchat template: .*tools\.jinja as .*chat_template\.jinja \(renders tools: hermes format\)\n$/,
    )
  })

  // What the next two rows test is Python's exporter; the CLI's side of it runs on every line above.
  const pythonExport = mainLineOnly("Python's exporter")
  test("an unsupported causal LM: the causal exporter's one line, exit 1", { skip: pythonExport || noPython }, () => {
    const falcon = path.join(tmp, 'falcon')
    fs.mkdirSync(falcon)
    const config = { model_type: 'falcon', architectures: ['FalconForCausalLM'] }
    fs.writeFileSync(path.join(falcon, 'config.json'), JSON.stringify(config))
    const { code, stderr } = cli(['export', falcon, path.join(tmp, 'falcon-out')], { PYTHON })
    assert.equal(code, 1)
    oneLine(stderr, /^torch-node: export: unsupported causal LM: FalconForCausalLM \(model_type 'falcon'\); /)
    assert.ok(!fs.existsSync(path.join(tmp, 'falcon-out')))
  })

  test(
    '--format torchscript: a folder SentenceEncoder loads, equal to sentence-transformers',
    { skip: pythonExport || noExport, timeout: 300_000 },
    async () => {
      const out = path.join(tmp, 'mpnet')
      const { code, stdout, stderr } = cli(['export', SOURCE, out, '--format', 'torchscript'], { PYTHON })
      assert.equal(code, 0, stderr)
      assert.match(stdout, /checked against the eager model: max abs diff /)
      assert.match(stdout, /wrote .*mpnet \(torchscript, 64-dim, pooling cls, max 32 tokens\)/)
      assert.deepEqual(fs.readdirSync(out).sort(), [
        'manifest.json',
        'model.pt',
        'special_tokens_map.json',
        'tokenizer.json',
        'tokenizer_config.json',
      ])
      const manifest = JSON.parse(fs.readFileSync(path.join(out, 'manifest.json'), 'utf8'))
      assert.equal(manifest.programFormat, 'torchscript')
      assert.deepEqual(
        manifest.inputs.map((i) => i.name),
        ['input_ids', 'attention_mask'],
      )
      assert.equal(manifest.maxSequenceLength, 32)
      if (
        typeof torch.text?.SentenceEncoder?.load !== 'function' ||
        typeof torch.text?.Tokenizer?.fromFile !== 'function'
      )
        return
      const golden = JSON.parse(fs.readFileSync(GOLDEN, 'utf8'))
      const encoder = await torch.text.SentenceEncoder.load(out)
      try {
        const got = (await encoder.encode(golden.sentences)).toTypedArray()
        const diff = Math.max(...golden.embeddings.flat().map((w, i) => Math.abs(w - got[i])))
        assert.ok(diff <= 1e-5, `max abs diff ${diff}`)
      } finally {
        encoder.dispose()
      }
    },
  )
})

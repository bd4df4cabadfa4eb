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

const ROOT = path.join(__dirname, '..')
const BIN = path.join(ROOT, 'bin', 'torch-node.js')
const CHELSEA = path.join('data', 'chelsea.png')
const COFFEE = path.join('models', 'images', 'coffee.png')
const MODEL = path.join(ROOT, 'models', 'efficientnet_lite0_traced.pt')
const CATS = ['tabby', 'tiger cat', 'Persian cat', 'Siamese cat', 'Egyptian cat']

/** Runs the CLI; the timeout only turns a hang into a failure. */
function cli(args, env = {}) {
  const r = spawnSync(process.execPath, [BIN, ...args], {
    cwd: ROOT, encoding: 'utf8', timeout: 120_000, env: { ...process.env, ...env },
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

  test('--json --topk 2 on two images: the numbers classify gives with EfficientNet-Lite0\'s normalization', async () => {
    const { code, stdout, stderr } = cli(['classify', '--json', '--topk', '2', CHELSEA, COFFEE])
    assert.equal(code, 0, stderr)
    const out = JSON.parse(stdout)
    assert.deepEqual(out.map((r) => r.image), [CHELSEA, COFFEE])
    const expected = await torch.vision.classify(model, [CHELSEA, COFFEE], { topk: 2, preprocess: LITE0_PREPROCESS })
    out.forEach((r, n) => {
      assert.equal(r.predictions.length, 2)
      assert.deepEqual(r.predictions.map((p) => p.index), expected[n].map((p) => p.index))
      r.predictions.forEach((p, k) => assert.ok(Math.abs(p.probability - expected[n][k].probability) < 1e-5))
    })
    assert.equal(out[1].predictions[0].label, 'espresso')
  })

  test('--model: that model, with torchvision\'s ImageNet pre-processing (classify\'s default)', async () => {
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

  test('no bundled model (as in an app\'s install): one line, exit 2', () => {
    const empty = fs.mkdtempSync(path.join(os.tmpdir(), 'torch-node-models-'))
    try {
      const { code, stdout, stderr } = cli(['classify'], { TORCH_NODE_MODELS: empty })
      assert.equal(code, 2)
      assert.equal(stdout, '')
      oneLine(stderr, new RegExp(`no bundled model at ${path.join(empty, 'efficientnet_lite0_traced.pt').replace(/[.\\/]/g, '\\$&')} \\(.*--model`))
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

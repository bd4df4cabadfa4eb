'use strict'
// libtorch's warnings reach Node's process.emitWarning (type 'TorchWarning', once per message,
// on the JS thread whose call raised them) instead of raw lines on stderr. Child processes:
// warnings are per process and printed at exit.
const { describe, test } = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const { spawnSync } = require('node:child_process')

const ROOT = path.join(__dirname, '..')
const WARNS = path.join(ROOT, 'models', 'fixtures', 'warn_scripted.pt') // warnings.warn in forward
const QUANT = path.join(ROOT, 'models', 'fixtures', 'quant_scripted.pt') // torch.quantize_per_tensor

function child(code, args = []) {
  const r = spawnSync(process.execPath, [...args, '-e', `const torch = require(${JSON.stringify(ROOT)});\n${code}`], {
    encoding: 'utf8',
    timeout: 60_000,
  })
  assert.equal(r.status, 0, r.stderr)
  return r
}

const RUN = `
  const seen = []
  process.on('warning', (w) => seen.push({ name: w.name, code: w.code, message: w.message }))
  ;(async () => {
    const m = new torch.ScriptModule(${JSON.stringify(WARNS)})
    m.forwardSync(torch.ones([2]))
    await m.forward(torch.ones([2]))
    await m.forward(torch.ones([2]))
    const q = await torch.ScriptModule.load(${JSON.stringify(QUANT)})
    const y = await q.forward(torch.tensor([0.1, 0.25]))
    await new Promise((r) => setImmediate(r))
    console.log(JSON.stringify({ seen, y: y.toArray() }))
  })()`

describe('libtorch warnings', () => {
  test("arrive as process 'warning' events, TorchWarning, once per message", () => {
    const r = child(RUN)
    const { seen, y } = JSON.parse(r.stdout.trim().split('\n').pop())
    assert.deepEqual(
      y,
      [Math.fround(0.1), Math.fround(0.2)],
      'the quantized model still runs as in Python (0.25 rounds to 0.2 at scale 0.1)',
    )
    const ours = seen.filter((w) => w.name === 'TorchWarning')
    assert.deepEqual(
      ours.map((w) => w.message.split(':')[0]).sort(),
      [
        'Warns',
        'torch.quantize_per_tensor, torch.quantize_per_channel and other quantized tensor creation functions that produce tensors with dtype torch.quint8, torch.qint8, and torch.qint32 are deprecated and will be removed in a future PyTorch release. Please see https',
      ].sort(),
    )
    assert.ok(
      ours.every((w) => w.code === 'TORCH_WARNING' || w.code === 'TORCH_DEPRECATION'),
      JSON.stringify(ours),
    )
    assert.doesNotMatch(r.stderr, /^\[W/m, 'no raw libtorch line on stderr')
    assert.match(r.stderr, /\[TORCH_WARNING\] TorchWarning: Warns: this model is only a test fixture/)
    assert.equal(r.stderr.match(/Warns: this model/g).length, 1, 'printed once')
  })

  test('--no-warnings silences them', () => {
    const r = child(RUN, ['--no-warnings'])
    assert.equal(r.stderr, '')
  })

  test("a worker thread's calls warn in that worker", () => {
    const r = child(`
      const { Worker } = require('node:worker_threads')
      const w = new Worker(\`
        const torch = require(${JSON.stringify(ROOT)})
        const { parentPort } = require('node:worker_threads')
        process.on('warning', (w) => parentPort.postMessage(w.name + ': ' + w.message))
        torch.ScriptModule.load(${JSON.stringify(WARNS)}).then((m) => m.forward(torch.ones([1])))
      \`, { eval: true })
      w.once('message', (m) => { console.log(JSON.stringify(m)); w.terminate() })`)
    assert.equal(JSON.parse(r.stdout.trim()), 'TorchWarning: Warns: this model is only a test fixture')
  })
})

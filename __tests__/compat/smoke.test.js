'use strict'
// The smoke suite of torch-node built against an older libtorch (tools/libtorch-compat.js): the
// package in TORCH_NODE_PACKAGE (its torch-node.node built against that release), the fixtures in
// TORCH_NODE_FIXTURES (made by that release's own Python: tools/compat_models.py), the release in
// TORCH_NODE_COMPAT. Skips, saying so, when run without them (as `node --test __tests__/` would).
const { test } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')

const PKG = process.env.TORCH_NODE_PACKAGE
const FIXTURES = process.env.TORCH_NODE_FIXTURES
const RELEASE = process.env.TORCH_NODE_COMPAT
const skip = PKG && FIXTURES && RELEASE ? false : 'run by tools/libtorch-compat.js <release>, which builds the package'
const torch = skip ? null : require(path.resolve(PKG))
const golden = skip ? null : JSON.parse(fs.readFileSync(path.join(FIXTURES, 'golden.json'), 'utf8'))
const fixture = (name) => path.join(FIXTURES, name)

/** |a - b| ≤ tol elementwise, over nested arrays of numbers. */
function close(actual, expected, tol, where = '') {
  if (Array.isArray(expected)) {
    assert.ok(Array.isArray(actual), `${where}: expected an array, got ${actual}`)
    assert.equal(actual.length, expected.length, `${where}: length`)
    expected.forEach((e, i) => close(actual[i], e, tol, `${where}[${i}]`))
  } else assert.ok(Math.abs(actual - expected) <= tol, `${where}: ${actual} vs ${expected} (tolerance ${tol})`)
}

test('the addon reports the libtorch it was built against', { skip }, () => {
  assert.equal(torch.version, golden.torch.split('+')[0])
  assert.equal(torch.libtorch.version, torch.version)
  assert.equal(torch.libtorchVersion(), RELEASE)
  const missing = torch.libtorch.missingOps()
  if (RELEASE === '2.11') {
    assert.ok(missing.includes('_philox_key_split') && missing.includes('_upsample_lanczos2d_aa'), `${missing}`)
    assert.equal(missing.length, 14)
  } else assert.deepEqual(missing, [])
  assert.equal(torch.cuda.isAvailable(), false) // CPU libraries with CUDA stand-ins
})

test('tensor ops equal Python', { skip }, () => {
  const t = golden.tensors
  const a = torch.tensor(t.a)
  const b = torch.tensor(t.b)
  const tol = 1e-5
  close(a.matmul(b).toArray(), t.matmul, tol, 'matmul')
  close(a.softmax(1).toArray(), t.softmax1, tol, 'softmax')
  close(a.sum(0).toArray(), t.sum0, tol, 'sum')
  const tr = a.t()
  assert.equal(tr.isContiguous(), false)
  close(tr.contiguous().toArray(), t.transpose_contiguous, 0, 'transpose')
  close(a.narrow(1, 1, 2).toArray(), t.narrow, 0, 'narrow')
  close(a.pow(2).exp().toArray(), t.pow_exp, 1e-4, 'pow.exp')
  close(a.to('bfloat16').to('float32').toArray(), t.bf16, 0, 'bfloat16')
  close(a.to('float16').to('float32').toArray(), t.half, 0, 'float16')
  assert.deepEqual(a.argmax(1).toArray(), t.argmax1)
  const buf = new Float32Array([1, 2, 3, 4])
  const borrowed = torch.fromBuffer(buf, [2, 2])
  buf[0] = 10 // CPU tensors borrow
  assert.equal(borrowed.toArray()[0][0], 10)
})

test("a traced module (saved by this release) gives Python's output", { skip }, async () => {
  const m = await torch.ScriptModule.load(fixture('traced.pt'))
  const y = await m.forward(torch.tensor(golden.conv.input))
  close(y.toArray(), golden.conv.output, 1e-5, 'traced')
  close(m.forwardSync(torch.tensor(golden.conv.input)).toArray(), golden.conv.output, 1e-5, 'traced sync')
  m.dispose()
})

test('a scripted module: control flow, Dict, List and None', { skip }, async () => {
  const s = golden.scripted
  const m = await torch.ScriptModule.load(fixture('scripted.pt'))
  const r = await m.forward(torch.tensor(s.x), s.n, torch.tensor(s.bias))
  assert.equal(r.steps.length, s.steps.length)
  r.steps.forEach((t, i) => close(t.toArray(), s.steps[i], 1e-5, `steps[${i}]`))
  close(r.last[0].toArray(), s.last[0], 1e-5, 'last')
  assert.equal((await m.forward(torch.tensor(s.x), 2, null)).steps.length, s.no_bias_steps)
  m.dispose()
})

test('a .pt2 compiled by this release runs at several batch sizes', { skip }, async () => {
  const m = await torch.AOTModule.load(fixture('conv.pt2'))
  const x = torch.tensor(golden.conv.input)
  close((await m.forward(x)).toArray(), golden.conv.output, 1e-4, '.pt2')
  const four = torch.cat([x, x])
  close((await m.forward(four)).toArray(), [...golden.conv.output, ...golden.conv.output], 1e-4, '.pt2 batch 4')
  m.dispose()
})

test("the tokenizer encodes as Python's tokenizers", { skip }, () => {
  const tok = torch.text.Tokenizer.fromFile(fixture('tokenizer/tokenizer.json'))
  assert.equal(tok.vocabSize, golden.tokenizer.vocab_size)
  for (const { text, ids } of golden.tokenizer.cases) {
    assert.deepEqual(tok.encode(text, { addSpecialTokens: false }).ids, ids, text)
    assert.equal(tok.decode(ids), text)
  }
})

test("a tiny CausalLM exported by this release decodes as transformers' greedy generate", { skip }, async () => {
  const lm = await torch.text.CausalLM.load(fixture('lm'), { maxSequences: 2 })
  try {
    const runs = golden.lm.cases.map(async ({ input_ids: ids, output_ids: expected, prompt }) => {
      const r = await lm.complete(ids, { maxNewTokens: golden.lm.new_tokens, temperature: 0 })
      assert.deepEqual(r.tokens, expected, prompt)
    })
    await Promise.all(runs) // two sequences share each step
  } finally {
    lm.dispose()
  }
})

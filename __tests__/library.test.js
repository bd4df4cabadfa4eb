'use strict'
// Custom op libraries (issue #11): torch.loadLibrary, and torchvision's ops registered without
// Python (torch.vision.loadOps). Loading changes the process for good, so each case that loads
// something runs in a child process.
const { describe, test } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { execFileSync, spawnSync } = require('node:child_process')
const torch = require('..')

const ROOT = path.join(__dirname, '..')
const NMS = path.join(ROOT, 'models', 'fixtures', 'nms_scripted.pt') // forward(boxes, scores, iou) = torchvision.ops.nms
// torchvision beside the libtorch the addon was built against (the dev install's virtualenv).
const TORCHVISION = fs
  .readdirSync(path.join(ROOT, '.libtorch', 'lib'))
  .map((py) => path.join(ROOT, '.libtorch', 'lib', py, 'site-packages', 'torchvision'))
  .find((d) => fs.existsSync(path.join(d, '_C.so')))
const NO_TORCHVISION = !TORCHVISION && 'no torchvision wheel beside libtorch here'

/** Runs `source` (torch in scope) in a child Node; returns {status, stdout, stderr}. */
function child(source) {
  const code = `const torch = require(${JSON.stringify(ROOT)});\n${source}`
  return spawnSync(process.execPath, ['-e', code], { cwd: ROOT, encoding: 'utf8', timeout: 60_000 })
}

describe('torch.loadLibrary', () => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'torch-node-lib-'))

  test('a missing file, a directory, a file that is not a library: LibraryLoadError, one line', () => {
    const text = path.join(tmp, 'notes.so')
    fs.writeFileSync(text, 'not an ELF file')
    for (const [p, message] of [
      [path.join(tmp, 'missing.so'), /No such file/],
      [tmp, /not a file/],
      [text, /notes\.so.*(invalid ELF|too short|file too short)/],
    ]) {
      assert.throws(
        () => torch.loadLibrary(p),
        (e) => e.code === 'LibraryLoadError' && message.test(e.message) && !e.message.includes('\n'),
      )
    }
    assert.throws(() => torch.loadLibrary(42), { code: 'InvalidArg' })
  })

  test('unresolved symbols are named; nothing is half-loaded', () => {
    const src = path.join(tmp, 'needs.c')
    const lib = path.join(tmp, 'libneeds.so')
    fs.writeFileSync(
      src,
      'extern int torch_node_missing_symbol(void);\nint f(void) { return torch_node_missing_symbol(); }\n',
    )
    execFileSync('cc', ['-shared', '-fPIC', '-o', lib, src])
    assert.throws(() => torch.loadLibrary(lib), {
      code: 'LibraryLoadError',
      message: /undefined symbol: torch_node_missing_symbol/,
    })
  })

  test('loads once: a second call with the same file (another path to it) returns false', () => {
    const r = child(`
      const fs = require('node:fs'), path = require('node:path'), { execFileSync } = require('node:child_process')
      const dir = fs.mkdtempSync(path.join(require('node:os').tmpdir(), 'torch-node-lib-'))
      fs.writeFileSync(path.join(dir, 'ok.c'), 'int torch_node_ok(void) { return 1; }\\n')
      execFileSync('cc', ['-shared', '-fPIC', '-o', path.join(dir, 'libok.so'), path.join(dir, 'ok.c')])
      fs.symlinkSync(path.join(dir, 'libok.so'), path.join(dir, 'alias.so'))
      console.log(torch.loadLibrary(path.join(dir, 'libok.so')), torch.loadLibrary(path.join(dir, 'alias.so')))`)
    assert.equal(r.status, 0, r.stderr)
    assert.equal(r.stdout.trim(), 'true false')
  })
})

describe('torchvision ops without Python', { skip: NO_TORCHVISION }, () => {
  test('a scripted module calling torchvision::nms: refused with a hint, then runs after loadOps() as in Python', () => {
    const r = child(`
      try { new torch.ScriptModule(${JSON.stringify(NMS)}) } catch (e) { console.log(e.code, e.message) }
      console.log(torch.vision.loadOps(), torch.vision.loadOps())
      const m = new torch.ScriptModule(${JSON.stringify(NMS)})
      const boxes = torch.tensor([[0, 0, 10, 10], [1, 1, 11, 11], [50, 50, 60, 60]])
      console.log(JSON.stringify(m.forwardSync(boxes, torch.tensor([0.9, 0.8, 0.7]), 0.5).toArray()))`)
    assert.equal(r.status, 0, r.stderr)
    const [refused, loaded, kept] = r.stdout.trim().split('\n')
    assert.match(
      refused,
      /^ModelLoadError .*Unknown builtin op: torchvision::nms.*call torch\.vision\.loadOps\(\) first/,
    )
    assert.equal(loaded, 'true false')
    assert.equal(kept, '[0,2]') // Python: torchvision.ops.nms(boxes, scores, 0.5) == tensor([0, 2])
  })

  test('a torchvision of another version is refused before anything loads', () => {
    const fake = fs.mkdtempSync(path.join(os.tmpdir(), 'torchvision-'))
    fs.writeFileSync(path.join(fake, 'version.py'), "__version__ = '0.27.1+cpu'\n")
    fs.copyFileSync(path.join(TORCHVISION, '_C.so'), path.join(fake, '_C.so'))
    assert.throws(() => torch.vision.loadOps(fake), {
      code: 'LibraryLoadError',
      message: /torchvision 0\.27\.1\+cpu does not match libtorch 2\.13/,
    })
    assert.throws(() => torch.vision.loadOps(path.join(fake, 'nope')), {
      code: 'LibraryLoadError',
      message:
        /nope': no such folder \(a libtorch cache entry filled by an older torch-node has none: run `npm rebuild torch-node`/,
    })
    const empty = fs.mkdtempSync(path.join(os.tmpdir(), 'torchvision-'))
    assert.throws(() => torch.vision.loadOps(empty), { code: 'LibraryLoadError', message: /version\.py/ })
    assert.throws(() => torch.vision.loadOps(7), { code: 'InvalidArg' })
  })
})

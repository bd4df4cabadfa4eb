'use strict'
// Crafted model files: libtorch trusts a TorchScript archive's pickle (a storage record shorter
// than claimed loads heap garbage; a storage claiming 2^40 elements lets a later read segfault).
// torch-node checks the archive first (crates/core/src/archive.rs); these rewrite a real fixture the way an
// attacker would and load it in a child process: a ModelLoadError naming the record, never a
// crash or garbage parameters.
const { describe, test } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const zlib = require('node:zlib')
const { spawnSync } = require('node:child_process')

const ROOT = path.join(__dirname, '..')
const MLP = path.join(ROOT, 'models', 'fixtures', 'mlp_traced.pt')

/** The entries of a zip file, in order: [{name, data}] (stored or deflated entries). */
function readZip(buf) {
  const eocd = buf.lastIndexOf(Buffer.from([0x50, 0x4b, 0x05, 0x06]))
  const count = buf.readUInt16LE(eocd + 10)
  let p = buf.readUInt32LE(eocd + 16)
  const entries = []
  for (let i = 0; i < count; i++) {
    const method = buf.readUInt16LE(p + 10)
    const compressed = buf.readUInt32LE(p + 20)
    const nameLen = buf.readUInt16LE(p + 28)
    const skip = nameLen + buf.readUInt16LE(p + 30) + buf.readUInt16LE(p + 32)
    const name = buf.toString('utf8', p + 46, p + 46 + nameLen)
    const local = buf.readUInt32LE(p + 42)
    const start = local + 30 + buf.readUInt16LE(local + 26) + buf.readUInt16LE(local + 28)
    const raw = buf.subarray(start, start + compressed)
    entries.push({ name, data: method === 8 ? zlib.inflateRawSync(raw) : Buffer.from(raw) })
    p += 46 + skip
  }
  return entries
}

function crc32(data) {
  let c = ~0
  for (const b of data) {
    c ^= b
    for (let k = 0; k < 8; k++) c = (c >>> 1) ^ (0xedb88320 & -(c & 1))
  }
  return ~c >>> 0
}

/** A zip of stored entries. */
function writeZip(entries) {
  const parts = []
  const central = []
  let offset = 0
  for (const { name, data } of entries) {
    const n = Buffer.from(name)
    const h = Buffer.alloc(30)
    h.writeUInt32LE(0x04034b50, 0)
    h.writeUInt16LE(20, 4)
    h.writeUInt32LE(crc32(data), 14)
    h.writeUInt32LE(data.length, 18)
    h.writeUInt32LE(data.length, 22)
    h.writeUInt16LE(n.length, 26)
    const c = Buffer.alloc(46)
    c.writeUInt32LE(0x02014b50, 0)
    c.writeUInt16LE(20, 4)
    c.writeUInt16LE(20, 6)
    c.writeUInt32LE(crc32(data), 16)
    c.writeUInt32LE(data.length, 20)
    c.writeUInt32LE(data.length, 24)
    c.writeUInt16LE(n.length, 28)
    c.writeUInt32LE(offset, 42)
    parts.push(h, n, data)
    central.push(c, n)
    offset += 30 + n.length + data.length
  }
  const cd = Buffer.concat(central)
  const end = Buffer.alloc(22)
  end.writeUInt32LE(0x06054b50, 0)
  end.writeUInt16LE(entries.length, 8)
  end.writeUInt16LE(entries.length, 10)
  end.writeUInt32LE(cd.length, 12)
  end.writeUInt32LE(offset, 16)
  return Buffer.concat([...parts, cd, end])
}

/** Loads `bytes` as a model file in a child process, sync and async; returns both outcomes. */
function load(bytes) {
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'torch-node-archive-')), 'crafted.pt')
  fs.writeFileSync(file, bytes)
  const code = `
    const torch = require(${JSON.stringify(ROOT)})
    const fs = require('node:fs')
    const outcome = (f) => { try { const m = f(); return { params: Object.values(m.namedParameters()).map((t) => t.toArray()) } } catch (e) { return { code: e.code, message: e.message } } }
    const sync = outcome(() => new torch.ScriptModule(${JSON.stringify(file)}))
    const fromBytes = outcome(() => new torch.ScriptModule(fs.readFileSync(${JSON.stringify(file)})))
    torch.ScriptModule.load(${JSON.stringify(file)}).then((m) => ({ ok: true }), (e) => ({ code: e.code, message: e.message }))
      .then((async) => console.log(JSON.stringify({ sync, fromBytes, async })))`
  const r = spawnSync(process.execPath, ['-e', code], { encoding: 'utf8', timeout: 60_000 })
  fs.rmSync(path.dirname(file), { recursive: true, force: true })
  assert.equal(r.signal, null, r.stderr)
  assert.equal(r.status, 0, r.stderr)
  return JSON.parse(r.stdout.trim().split('\n').pop())
}

describe('crafted model archives are refused before libtorch reads them', () => {
  const entries = readZip(fs.readFileSync(MLP))
  const storages = entries.filter((e) => /\/data\/\d+$/.test(e.name))

  test('the rewritten fixture itself still loads (the zip helpers are faithful)', () => {
    const r = load(writeZip(entries))
    assert.ok(r.sync.params, JSON.stringify(r.sync))
    assert.equal(r.sync.params.length, 4)
  })

  test('a storage record shorter than the pickle claims: ModelLoadError naming the record', () => {
    const victim = storages[storages.length - 1]
    const crafted = entries.map((e) => (e === victim ? { name: e.name, data: e.data.subarray(0, 4) } : e))
    const r = load(writeZip(crafted))
    for (const outcome of [r.sync, r.fromBytes, r.async]) {
      assert.equal(outcome.code, 'ModelLoadError', JSON.stringify(outcome))
      assert.match(outcome.message, new RegExp(`archive record '${victim.name}' has 4 bytes but the pickle claims`))
    }
  })

  test('a storage record that is missing: ModelLoadError', () => {
    const r = load(writeZip(entries.filter((e) => e !== storages[0])))
    assert.equal(r.sync.code, 'ModelLoadError')
    assert.match(r.sync.message, new RegExp(storages[0].name))
  })

  test('maxBytes bounds what an archive may declare', () => {
    const file = MLP
    const code = `
      const torch = require(${JSON.stringify(ROOT)})
      try { new torch.ScriptModule(${JSON.stringify(file)}, { maxBytes: 16 }); console.log('loaded') } catch (e) { console.log(e.code, e.message) }
      console.log(new torch.ScriptModule(${JSON.stringify(file)}, { maxBytes: 1 << 20 }).numParameters())`
    const r = spawnSync(process.execPath, ['-e', code], { encoding: 'utf8', timeout: 60_000 })
    assert.equal(r.status, 0, r.stderr)
    const [first, second] = r.stdout.trim().split('\n')
    assert.match(first, /^ModelLoadError .*over the limit of 16/)
    assert.equal(Number(second), 4 * 8 + 8 + 8 * 3 + 3)
  })
})

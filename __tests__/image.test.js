'use strict'
// torch.image: real photos through torchvision's classic pre-processing give Python's numbers
// (goldens written by models/make_models.py with PIL + torchvision), decoding is guarded, and
// the Promise forms keep the event loop free.
const { describe, test } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const zlib = require('node:zlib')
const torch = require('..')
const { coded } = require('./helpers')

const MODELS = path.join(__dirname, '..', 'models')
const IMAGES = path.join(MODELS, 'images')
const GOLDEN = path.join(MODELS, 'golden')
const IMAGENET = { resize: 256, centerCrop: 224, mean: 'imagenet' }

function need(p) {
  assert.ok(fs.existsSync(p), `${p} is missing: run \`npm run models\``)
  return p
}

function readF32(file) {
  const b = fs.readFileSync(need(path.join(GOLDEN, file)))
  return new Float32Array(b.buffer, b.byteOffset, b.length / 4)
}

/** A tiny valid PNG (width × height, RGB), built by hand so tests need no image library. */
function png(width, height, pixel = [200, 100, 50]) {
  const crcTable = Array.from({ length: 256 }, (_, n) => {
    let c = n
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1
    return c >>> 0
  })
  const crc = (buf) => {
    let c = ~0
    for (const b of buf) c = crcTable[(c ^ b) & 0xff] ^ (c >>> 8)
    return ~c >>> 0
  }
  const chunk = (type, data) => {
    const out = Buffer.alloc(12 + data.length)
    out.writeUInt32BE(data.length, 0)
    out.write(type, 4)
    data.copy(out, 8)
    out.writeUInt32BE(crc(out.subarray(4, 8 + data.length)), 8 + data.length)
    return out
  }
  const ihdr = Buffer.alloc(13)
  ihdr.writeUInt32BE(width, 0)
  ihdr.writeUInt32BE(height, 4)
  ihdr[8] = 8
  ihdr[9] = 2
  const row = Buffer.concat([Buffer.from([0]), Buffer.from(Array.from({ length: width }, () => pixel).flat())])
  const raw = Buffer.concat(Array.from({ length: height }, () => row))
  return Buffer.concat([
    Buffer.from([137, 80, 78, 71, 13, 10, 26, 10]),
    chunk('IHDR', ihdr),
    chunk('IDAT', zlib.deflateSync(raw)),
    chunk('IEND', Buffer.alloc(0)),
  ])
}

describe('torch.image matches torchvision on real photos', () => {
  const goldens = JSON.parse(fs.readFileSync(need(path.join(GOLDEN, 'images.json')), 'utf8'))
  const model = new torch.ScriptModule(need(path.join(MODELS, 'efficientnet_lite0_traced.pt')))
  for (const [name, info] of Object.entries(goldens)) {
    test(`${name}: Resize(256) + CenterCrop(224) + ToTensor + Normalize: mean |diff| < 0.01, same top-1`, async () => {
      const x = await torch.image.load(path.join(IMAGES, name), IMAGENET)
      assert.deepEqual(x.shape, info.shape)
      assert.equal(x.dtype, 'float32')
      const ours = x.toTypedArray()
      const gold = readF32(info.golden)
      let sum = 0
      for (let i = 0; i < ours.length; i++) sum += Math.abs(ours[i] - gold[i])
      const mad = sum / ours.length
      assert.ok(mad < 0.01, `mean absolute difference ${mad}`)
      assert.equal(model.forwardSync(x).argmax(1).item(), info.top1)
    })
  }
})

describe('torch.image API', () => {
  const cat = () => need(path.join(IMAGES, 'chelsea.png'))

  test('decode gives uint8 [H, W, 3]; loadSync from a Buffer equals load from the path', async () => {
    const bytes = fs.readFileSync(cat())
    const hwc = torch.image.decode(bytes)
    assert.deepEqual(hwc.shape, [300, 451, 3])
    assert.equal(hwc.dtype, 'uint8')
    const a = torch.image.loadSync(bytes, IMAGENET)
    const b = await torch.image.load(cat(), IMAGENET)
    assert.deepEqual(a.toTypedArray(), b.toTypedArray())
  })

  test('layouts, uint8, exact resize and no-transform loading', () => {
    const bytes = fs.readFileSync(cat())
    assert.deepEqual(torch.image.loadSync(bytes).shape, [1, 3, 300, 451])
    assert.deepEqual(torch.image.loadSync(bytes, { layout: 'nhwc', resize: [32, 48] }).shape, [1, 32, 48, 3])
    assert.deepEqual(torch.image.loadSync(bytes, { layout: 'chw', centerCrop: [10, 20] }).shape, [3, 10, 20])
    const u8 = torch.image.loadSync(bytes, { layout: 'hwc', dtype: 'uint8' })
    assert.equal(u8.dtype, 'uint8')
    assert.deepEqual(u8.toTypedArray(), torch.image.decode(bytes).toTypedArray())
    const f = torch.image.loadSync(bytes, { layout: 'hwc' })
    assert.ok(Math.abs(f.max().item() - u8.max().item() / 255) < 1e-6)
  })

  test('loadBatch stacks images into [N, 3, H, W]; sizes that differ are a ShapeMismatch', async () => {
    const files = ['chelsea.png', 'coffee.png', 'rocket.jpg'].map((f) => need(path.join(IMAGES, f)))
    const batch = await torch.image.loadBatch(files, IMAGENET)
    assert.deepEqual(batch.shape, [3, 3, 224, 224])
    const single = await torch.image.load(files[1], IMAGENET)
    assert.deepEqual(batch.select(0, 1).toTypedArray(), single.select(0, 0).toTypedArray())
    await assert.rejects(torch.image.loadBatch(files), coded('ShapeMismatch', /give resize and centerCrop/))
  })

  test('encode round-trips PNG exactly and JPEG closely, from CHW float or HWC uint8', () => {
    const hwc = torch.image.decode(fs.readFileSync(cat()))
    const again = torch.image.decode(torch.image.encode(hwc, 'png'))
    assert.deepEqual(again.toTypedArray(), hwc.toTypedArray())
    const chw = torch.image.loadSync(fs.readFileSync(cat()), { layout: 'chw' })
    assert.deepEqual(torch.image.decode(torch.image.encode(chw, 'png')).toTypedArray(), hwc.toTypedArray())
    const jpeg = torch.image.encode(hwc, 'jpeg', { quality: 95 })
    assert.equal(jpeg[0], 0xff)
    const back = torch.image.decode(jpeg).to('float32')
    assert.ok(back.sub(hwc.to('float32')).abs().mean().item() < 3)
    assert.throws(
      () => torch.image.encode(torch.ones([2, 2]), 'png'),
      coded('ShapeMismatch', /expected \[3, H, W\] or \[H, W, 3\]/),
    )
    assert.throws(() => torch.image.encode(hwc, 'gif'), coded('InvalidArg', /'gif' is not 'png' or 'jpeg'/))
    assert.throws(() => torch.image.encode(hwc, 'jpeg', { quality: 0 }), coded('InvalidArg', /1 to 100/))
  })

  test('bad input: InvalidImage for non-images, truncated files and pixel bombs; InvalidArg for bad options', async () => {
    assert.throws(() => torch.image.decode(Buffer.from('not an image')), coded('InvalidImage', /not a JPEG, PNG/))
    const ok = png(4, 3)
    assert.deepEqual(torch.image.decode(ok).toArray()[0][0], [200, 100, 50])
    assert.throws(() => torch.image.decode(ok.subarray(0, ok.length - 20)), coded('InvalidImage'))
    const bomb = Buffer.from(ok)
    bomb.writeUInt32BE(100000, 16)
    bomb.writeUInt32BE(100000, 20) // claims 100000×100000
    const before = process.memoryUsage().rss
    assert.throws(() => torch.image.decode(bomb), coded('InvalidImage'))
    assert.ok(process.memoryUsage().rss - before < 256 * 2 ** 20, 'no big allocation')
    await assert.rejects(torch.image.load(Buffer.from([1, 2, 3])), coded('InvalidImage'))
    assert.throws(() => torch.image.loadSync(ok, { resise: 2 }), coded('InvalidArg', /unknown option 'resise'/))
    assert.throws(() => torch.image.loadSync(ok, { centerCrop: 10 }), coded('InvalidArg', /does not fit/))
    assert.throws(
      () => torch.image.loadSync(ok, { mean: [0.5, 0.5, 0.5] }),
      coded('InvalidArg', /mean and std together/),
    )
    assert.throws(
      () => torch.image.loadSync(ok, { mean: 'imagenet', dtype: 'uint8' }),
      coded('InvalidArg', /cannot be normalized/),
    )
    assert.throws(() => torch.image.loadSync('/nonexistent.png'), coded('InvalidArg', /cannot read image/))
  })

  test('allowTruncated must be a boolean, and only known keys reach decode', () => {
    const ok = png(4, 3)
    assert.throws(
      () => torch.image.loadSync(ok, { allowTruncated: 'yes' }),
      coded('InvalidArg', /options.allowTruncated: expected a boolean/),
    )
    assert.throws(() => torch.image.decode(ok, { resize: 2 }), coded('InvalidArg', /unknown option 'resize'/))
    assert.deepEqual(torch.image.decode(ok, { allowTruncated: false }).shape, [3, 4, 3])
    assert.deepEqual(torch.image.decode(ok, null).shape, [3, 4, 3])
  })

  test('load keeps the event loop turning while it decodes and resizes', async () => {
    const big = need(path.join(IMAGES, 'coffee_1280x800.jpg'))
    let ticks = 0
    const timer = setInterval(() => ticks++, 1)
    await Promise.all(Array.from({ length: 8 }, () => torch.image.load(big, IMAGENET)))
    clearInterval(timer)
    assert.ok(ticks > 0, 'timers ran during the loads')
  })
})

// A file cut short (an upload that stopped) is refused as PIL refuses it ("image file is
// truncated"), in every format the decoder reads; before, the JPEG decoder filled the missing
// rows with grey and the WebP and GIF decoders did without their last bytes. The cut files are
// made here from data/chelsea.png: PNG as it is, JPEG by torch.image.encode, the others (and a
// progressive JPEG) by PIL in the dev virtualenv, which also gives its verdict on every cut.
describe('truncated images', () => {
  const ROOT = path.join(__dirname, '..')
  const photo = fs.readFileSync(path.join(ROOT, 'data', 'chelsea.png'))
  const python = [path.join(ROOT, '.libtorch', 'bin', 'python'), 'python3'].find(
    (p) => require('node:child_process').spawnSync(p, ['-c', 'import PIL'], { stdio: 'ignore' }).status === 0,
  )
  const fractions = [0.1, 0.3, 0.5, 0.7, 0.9]
  const tails = [20, 4, 2, 1]
  const cutsOf = (n) => [...fractions.map((f) => Math.floor(n * f)), ...tails.map((t) => n - t)]

  /** name -> { bytes, pil: {cut: 'ok' | 'truncated'} } for the formats PIL writes. */
  function pilFiles() {
    const script = `
import base64, io, json, sys
from PIL import Image
src = Image.open(sys.argv[1]).convert('RGB').resize((150, 100))
fractions, tails = json.loads(sys.argv[2]), json.loads(sys.argv[3])
out = {}
for name, kw in [('jpeg-progressive', dict(format='JPEG', quality=90, progressive=True)),
                 ('webp', dict(format='WEBP', quality=80)), ('webp-lossless', dict(format='WEBP', lossless=True)),
                 ('gif', dict(format='GIF')), ('bmp', dict(format='BMP')), ('tiff', dict(format='TIFF')),
                 ('tiff-lzw', dict(format='TIFF', compression='tiff_lzw'))]:
    b = io.BytesIO(); src.save(b, **kw); data = b.getvalue(); n = len(data)
    verdicts = {}
    for cut in [int(n * f) for f in fractions] + [n - t for t in tails]:
        try:
            im = Image.open(io.BytesIO(data[:cut])); im.load(); verdicts[cut] = 'ok'
        except Exception:
            verdicts[cut] = 'truncated'
    out[name] = {'bytes': base64.b64encode(data).decode(), 'pil': verdicts}
print(json.dumps(out))
`
    const args = [
      '-c',
      script,
      path.join(ROOT, 'data', 'chelsea.png'),
      JSON.stringify(fractions),
      JSON.stringify(tails),
    ]
    const r = require('node:child_process').spawnSync(python, args, { encoding: 'utf8' })
    assert.equal(r.status, 0, r.stderr)
    return JSON.parse(r.stdout)
  }

  /** Every cut PIL refuses is InvalidImage; `pil(cut)` is PIL's verdict. */
  function check(name, bytes, pil) {
    const full = torch.image.decode(bytes)
    for (const cut of cutsOf(bytes.length)) {
      const part = bytes.subarray(0, cut)
      const verdict = pil(cut)
      if (verdict === 'truncated') {
        assert.throws(
          () => torch.image.decode(part),
          coded('InvalidImage'),
          `${name} cut at ${cut} of ${bytes.length} bytes: PIL refuses it`,
        )
      } else {
        // PIL accepts a file missing only its trailer (a GIF's, a PNG's IEND): so may we, then
        // with every pixel there.
        try {
          assert.deepEqual(torch.image.decode(part).toTypedArray(), full.toTypedArray(), `${name} cut at ${cut}`)
        } catch (e) {
          if (e.code !== 'InvalidImage') throw e
        }
      }
    }
  }

  test('PNG (data/chelsea.png) and JPEG (torch.image.encode) cut at 9 points', () => {
    // PIL stops reading a PNG after its image data: a cut inside the 12-byte IEND chunk is
    // fine (for it and for us); everything before is truncated. A JPEG needs its end marker.
    check('png', photo, (cut) => (cut >= photo.length - 12 ? 'ok' : 'truncated'))
    const jpeg = Buffer.from(torch.image.encode(torch.image.decode(photo), 'jpeg'))
    check('jpeg', jpeg, () => 'truncated')
  })

  test(
    'progressive JPEG, WebP (lossy, lossless), GIF, BMP, TIFF (raw, LZW) written by PIL, cut where PIL refuses them',
    { skip: !python && 'no Python with PIL (.libtorch/bin/python)' },
    () => {
      const files = pilFiles()
      assert.equal(Object.keys(files).length, 7)
      for (const [name, { bytes, pil }] of Object.entries(files))
        check(name, Buffer.from(bytes, 'base64'), (cut) => pil[cut])
    },
  )

  test('the message names the format; allowTruncated decodes what is there (JPEG: grey rows)', async () => {
    const hwc = torch.image.decode(photo)
    const jpeg = Buffer.from(torch.image.encode(hwc, 'jpeg'))
    const half = jpeg.subarray(0, jpeg.length >> 1)
    const refused = coded(
      'InvalidImage',
      /^cannot decode the image: the JPEG file is truncated: it ends inside the image data \(\d+ bytes\)$/,
    )
    assert.throws(() => torch.image.decode(half), refused)
    assert.throws(() => torch.image.loadSync(half), refused)
    await assert.rejects(torch.image.load(half, IMAGENET), refused)
    await assert.rejects(
      torch.image.loadBatch([jpeg, half], IMAGENET),
      coded('InvalidImage', /^image 1: cannot decode the image: the JPEG file is truncated/),
    )
    const partial = torch.image.decode(half, { allowTruncated: true })
    assert.deepEqual(partial.shape, hwc.shape)
    // The top rows decode as the whole file's; the bottom ones are grey fill.
    const whole = torch.image.decode(jpeg)
    assert.deepEqual(partial.narrow(0, 0, 16).toTypedArray(), whole.narrow(0, 0, 16).toTypedArray())
    const bottom = partial.narrow(0, hwc.shape[0] - 8, 8).to('float32')
    assert.ok(bottom.sub(128).abs().max().item() <= 1, 'grey where the data ran out')
    assert.deepEqual((await torch.image.load(half, { ...IMAGENET, allowTruncated: true })).shape, [1, 3, 224, 224])
    assert.deepEqual(
      torch.image.loadSync(half, { allowTruncated: true, layout: 'hwc', dtype: 'uint8' }).toTypedArray(),
      partial.toTypedArray(),
    )
  })
})

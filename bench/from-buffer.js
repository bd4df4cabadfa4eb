'use strict'
// Zero-copy vs copy: the cost of making a 1×3×224×224 float32 tensor from a Float32Array with
// `torch.fromBuffer` (aliases the array's memory) and with `torch.tensor(array, {shape})`
// (copies 588 KiB). Each timed call also disposes its tensor, so memory stays flat and both
// sides pay the same bookkeeping. Rounds interleave the two (alternating which goes first) so
// drift in CPU frequency or allocator state hits both; the medians over rounds are printed.
//
//   node bench/from-buffer.js [rounds=20] [iterations=1000]
const torch = require('..')

const ROUNDS = Number(process.argv[2]) || 20
const ITERATIONS = Number(process.argv[3]) || 1000
const SHAPE = [1, 3, 224, 224]
const array = new Float32Array(3 * 224 * 224)
for (let i = 0; i < array.length; i++) array[i] = Math.sin(i)

const cases = {
  fromBuffer: () => torch.fromBuffer(array, SHAPE),
  tensor: () => torch.tensor(array, { shape: SHAPE }),
}

/** Microseconds per call (create + dispose) over one round. */
function round(make) {
  const start = process.hrtime.bigint()
  for (let i = 0; i < ITERATIONS; i++) make().dispose()
  return Number(process.hrtime.bigint() - start) / 1e3 / ITERATIONS
}

function median(values) {
  const s = [...values].sort((a, b) => a - b)
  const m = s.length >> 1
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2
}

// Sanity: same values, and only fromBuffer aliases.
const a = cases.fromBuffer()
const b = cases.tensor()
if (a.sub(b).abs().max().item() !== 0) throw new Error('fromBuffer and tensor disagree')
array[0] += 1
if (a.select(1, 0).select(1, 0).select(1, 0).item() !== array[0]) throw new Error('fromBuffer does not alias')
if (b.select(1, 0).select(1, 0).select(1, 0).item() === array[0]) throw new Error('tensor() does not copy')
array[0] -= 1
a.dispose()
b.dispose()

// fromBuffer's references to the array are released on the event loop, so let it turn between
// rounds (untimed) instead of piling 20,000 releases up.
const turn = () => new Promise((resolve) => setImmediate(resolve))

async function main() {
  // Warm-up (JIT, allocator), not measured.
  for (const make of Object.values(cases)) {
    round(make)
    await turn()
  }

  const times = { fromBuffer: [], tensor: [] }
  for (let r = 0; r < ROUNDS; r++) {
    const order = r % 2 === 0 ? ['fromBuffer', 'tensor'] : ['tensor', 'fromBuffer']
    for (const name of order) {
      times[name].push(round(cases[name]))
      await turn()
    }
  }
  report(times)
}

function report(times) {
  const zero = median(times.fromBuffer)
  const copy = median(times.tensor)
  const fmt = (us) => us.toFixed(2).padStart(9)
  console.log(
    `torch-node ${require('../package.json').version}, Node ${process.version}, ${process.platform}-${process.arch}`,
  )
  console.log(
    `${ROUNDS} interleaved rounds × ${ITERATIONS} calls, shape [${SHAPE}] float32 (${(array.byteLength / 1024).toFixed(0)} KiB); per call, create + dispose:`,
  )
  console.log('')
  console.log('                                              median µs    min µs    max µs')
  const row = (label, t) =>
    console.log(`${label.padEnd(44)} ${fmt(median(t))} ${fmt(Math.min(...t))} ${fmt(Math.max(...t))}`)
  row('torch.fromBuffer(array, shape)   (no copy)', times.fromBuffer)
  row('torch.tensor(array, {shape})     (copy)', times.tensor)
  console.log('')
  console.log(
    `fromBuffer is ${(copy / zero).toFixed(1)}× faster (copy ${copy.toFixed(2)} µs vs fromBuffer ${zero.toFixed(2)} µs, ratio ${(copy / zero).toFixed(2)})`,
  )
}

main().catch((e) => {
  console.error(e)
  process.exit(1)
})

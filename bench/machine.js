'use strict'
// What the benchmark machine is and what it could do at most: CPU model and flags from
// /proc/cpuinfo, and a theoretical peak = cores × clock × FLOP per cycle per core, with the
// assumptions spelled out (results.md prints `basis`). Linux only; elsewhere the peak is unknown.
const { execFile, execFileSync } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')

function cpuinfo() {
  let text = ''
  try {
    text = fs.readFileSync('/proc/cpuinfo', 'utf8')
  } catch {}
  const field = (name) => (text.match(new RegExp(`^${name}\\s*:\\s*(.*)$`, 'm')) || [])[1]
  const cores = os.availableParallelism ? os.availableParallelism() : os.cpus().length
  return {
    model: field('model name') || os.cpus()[0]?.model || 'unknown',
    vendor: field('vendor_id') || 'unknown',
    family: Number(field('cpu family')),
    modelNumber: Number(field('model')),
    mhz: Number(field('cpu MHz')) || os.cpus()[0]?.speed || NaN,
    flags: new Set((field('flags') || '').split(/\s+/).filter(Boolean)),
    cores,
  }
}

/** Native bf16 arithmetic (what makes `dtype: 'bfloat16'` worth running), or why not. */
function bf16Support(cpu) {
  const found = ['amx_bf16', 'avx512_bf16'].filter((f) => cpu.flags.has(f))
  return found.length
    ? { native: true, how: found.join(' + ') }
    : { native: false, how: 'no avx512_bf16 or amx_bf16 in /proc/cpuinfo flags' }
}

/**
 * FLOP per cycle per core, counting an FMA as 2 FLOP, for fp32 and for bf16 dot products.
 * From the microarchitecture's FMA pipes × SIMD width; every line is an assumption about a
 * family of CPUs, not something the CPU reports.
 */
function flopPerCycle(cpu) {
  const f = cpu.flags
  const amd = cpu.vendor === 'AuthenticAMD'
  if (amd && cpu.family === 25 && f.has('avx512f')) {
    // Zen 4 (family 19h with AVX-512): 512-bit instructions run as two halves on 256-bit
    // datapaths; 2 FMA pipes × 8 fp32 lanes × 2 = 32. VDPBF16PS multiplies 2 bf16 pairs per
    // fp32 lane: 2 pipes × 16 bf16 MAC × 2 = 64.
    return {
      fp32: 32,
      bf16: 64,
      arch: 'AMD Zen 4 (family 25 with AVX-512)',
      basis: '2 FMA pipes × 256-bit datapath (AVX-512 double-pumped): fp32 2×8×2 = 32; bf16 VDPBF16PS 2×16×2 = 64',
    }
  }
  if (amd && cpu.family === 26) {
    return {
      fp32: 64,
      bf16: 128,
      arch: 'AMD Zen 5 (family 26)',
      basis: '2 FMA pipes × 512-bit datapath: fp32 2×16×2 = 64; bf16 VDPBF16PS 2×32×2 = 128',
    }
  }
  if (amd && f.has('avx2')) {
    return {
      fp32: 32,
      bf16: null,
      arch: 'AMD Zen 1-3 (AVX2)',
      basis: '2 FMA pipes × 256-bit: fp32 2×8×2 = 32; no native bf16',
    }
  }
  if (f.has('amx_bf16')) {
    return {
      fp32: 64,
      bf16: 2048,
      arch: 'Intel with AMX',
      basis: '2 × 512-bit FMA: fp32 2×16×2 = 64; AMX TMUL bf16 1024 MAC/cycle × 2 = 2048',
    }
  }
  if (f.has('avx512f')) {
    return {
      fp32: 64,
      bf16: f.has('avx512_bf16') ? 128 : null,
      arch: 'Intel AVX-512 (assumed 2 FMA units)',
      basis: '2 × 512-bit FMA: fp32 2×16×2 = 64 (1-FMA-unit SKUs: half); bf16 VDPBF16PS 2×32×2 = 128',
    }
  }
  if (f.has('fma')) return { fp32: 32, bf16: null, arch: 'AVX2 + FMA', basis: '2 × 256-bit FMA: fp32 2×8×2 = 32' }
  return { fp32: null, bf16: null, arch: 'unknown', basis: 'no FMA information' }
}

/** Peak GFLOP/s for `cores` cores at the /proc/cpuinfo clock (a VM reports its nominal clock). */
function peak(cpu, cores = cpu.cores) {
  const per = flopPerCycle(cpu)
  const ghz = cpu.mhz / 1000
  const of = (n) => (n && ghz ? cores * ghz * n : null)
  return { ...per, ghz, cores, fp32Gflops: of(per.fp32), bf16Gflops: of(per.bf16) }
}

/**
 * What the cores sustain: bench/fma-peak.c compiled with `cc -O2 -march=native`, one copy per
 * thread at once, GFLOP/s summed -> { fp32, bf16 } (bf16 null without AVX512-BF16), or
 * { error } when there is no C compiler or it fails. It includes the boost clock the nominal
 * figure leaves out.
 */
async function measuredPeak(threads) {
  const exe = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'torch-node-fma-')), 'fma-peak')
  try {
    execFileSync(process.env.CC || 'cc', ['-O2', '-march=native', '-o', exe, path.join(__dirname, 'fma-peak.c')], {
      stdio: 'pipe',
    })
  } catch (err) {
    return { error: `cannot compile bench/fma-peak.c (${String(err.message).split('\n')[0]})` }
  }
  try {
    const runs = await Promise.all(
      Array.from(
        { length: threads },
        () =>
          new Promise((resolve, reject) => {
            execFile(exe, { encoding: 'utf8' }, (err, stdout) => (err ? reject(err) : resolve(stdout)))
          }),
      ),
    )
    const sum = (kind) => {
      const values = runs.map((out) => Number((out.match(new RegExp(`^${kind} (\\S+)$`, 'm')) || [])[1]))
      return values.every(Number.isFinite) ? values.reduce((a, b) => a + b, 0) : null
    }
    return { fp32: sum('fp32'), bf16: sum('bf16') }
  } catch (err) {
    return { error: `bench/fma-peak.c failed (${err.message})` }
  } finally {
    fs.rmSync(path.dirname(exe), { recursive: true, force: true })
  }
}

module.exports = { cpuinfo, bf16Support, flopPerCycle, peak, measuredPeak }

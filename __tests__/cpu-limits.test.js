'use strict'
// torch.cpu.limits(): the cores this process may use (affinity mask, capped by its cgroup's CPU
// quota) and the executor's default team size they give. Checked in child processes against
// what this machine's own files say, read here independently: /proc/self/status's affinity
// list, /proc/self/cgroup and /proc/self/mountinfo, and the cgroup files they lead to. Fake
// cgroup trees (v1, v2, nested, garbage) are the core's unit tests (crates/core/src/cgroup.rs).
const { describe, test } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { spawnSync } = require('node:child_process')

const ROOT = path.join(__dirname, '..')

/** Runs `code` in a child Node with `env` added (`prefix`: a command to run it under); returns its last stdout line, parsed. */
function child(code, env = {}, prefix = []) {
  const argv = [...prefix, process.execPath, '-e', `const torch = require(${JSON.stringify(ROOT)});\n${code}`]
  const r = spawnSync(argv[0], argv.slice(1), {
    encoding: 'utf8',
    timeout: 120_000,
    env: childEnv(env),
  })
  assert.equal(r.status, 0, `child failed (status ${r.status}, signal ${r.signal}):\n${r.stderr}`)
  return JSON.parse(r.stdout.trim().split('\n').pop())
}

/** This process's environment without the user's thread settings, then `env`. */
function childEnv(env) {
  const out = { ...process.env }
  delete out.OMP_NUM_THREADS
  delete out.TORCH_NODE_INSTANCES
  return { ...out, ...env }
}

const read = (file) => {
  try {
    return fs.readFileSync(file, 'utf8')
  } catch {
    return null
  }
}

/** The cores in /proc/self/status's `Cpus_allowed_list` (`0-3,8,10-11`). */
function affinity() {
  const line = read('/proc/self/status')
    ?.split('\n')
    .find((l) => l.startsWith('Cpus_allowed_list:'))
  if (!line) return null
  return line
    .split(':')[1]
    .trim()
    .split(',')
    .reduce((n, r) => {
      const [a, b = a] = r.split('-').map(Number)
      return n + b - a + 1
    }, 0)
}

/** The smallest cgroup CPU quota (in CPUs) along this process's cgroup paths, or null. */
function quota() {
  const cgroups = read('/proc/self/cgroup').trim().split('\n')
  const mounts = read('/proc/self/mountinfo').trim().split('\n')
  const unescape = (s) => s.replace(/\\([0-7]{3})/g, (_, o) => String.fromCharCode(parseInt(o, 8)))
  let best = null
  for (const line of mounts) {
    const [left, right] = line.split(' - ')
    if (!right) continue
    const [fstype, , options = ''] = right.split(' ')
    const fields = left.split(' ')
    const [mountRoot, point] = [unescape(fields[3]), unescape(fields[4])]
    const v2 = fstype === 'cgroup2'
    if (!v2 && !(fstype === 'cgroup' && options.split(',').includes('cpu'))) continue
    const own = cgroups
      .map((l) => l.split(':'))
      .find(([id, ctl]) => (v2 ? id === '0' && ctl === '' : ctl.split(',').includes('cpu')))
    if (!own) continue
    const cgPath = own.slice(2).join(':')
    const rel = path.relative(mountRoot, cgPath)
    let dir = rel.startsWith('..') ? point : path.join(point, rel)
    for (;;) {
      let q = null
      if (v2) {
        const [max, period = '100000'] = (read(path.join(dir, 'cpu.max')) ?? '').trim().split(/\s+/)
        if (/^\d+$/.test(max) && /^\d+$/.test(period)) q = Number(max) / Number(period)
      } else {
        const max = read(path.join(dir, 'cpu.cfs_quota_us'))?.trim()
        const period = read(path.join(dir, 'cpu.cfs_period_us'))?.trim()
        if (/^\d+$/.test(max ?? '') && /^\d+$/.test(period ?? '')) q = Number(max) / Number(period)
      }
      if (q > 0 && Number.isFinite(q) && (best === null || q < best)) best = q
      if (dir === point || path.dirname(dir) === dir) break
      dir = path.dirname(dir)
    }
  }
  return best
}

const noCgroupFs = !read('/proc/self/cgroup') || !read('/proc/self/mountinfo')

describe('torch.cpu.limits', () => {
  test(
    'reports the affinity mask and cgroup quota this machine has, and the team follows',
    {
      skip: noCgroupFs && 'no /proc/self/cgroup or mountinfo here (not Linux, or no procfs)',
    },
    () => {
      const out = child(`console.log(JSON.stringify({ limits: torch.cpu.limits(), threads: torch.getNumThreads() }))`)
      const cores = affinity()
      const q = quota()
      assert.equal(out.limits.affinity, cores)
      assert.equal(out.limits.quota ?? null, q)
      assert.equal(typeof out.limits.quotaFile, q === null ? 'undefined' : 'string')
      const usable = q === null ? cores : Math.max(1, Math.min(cores, Math.ceil(q)))
      assert.equal(out.limits.usableCores, usable)
      // libtorch's own default (the cores it counts: physical ones on some machines) capped by them.
      assert.ok(out.limits.libtorchThreads >= 1 && out.limits.libtorchThreads <= cores)
      assert.equal(out.limits.defaultThreads, Math.min(out.limits.libtorchThreads, usable))
      assert.equal(out.limits.defaultFrom, usable < out.limits.libtorchThreads ? 'quota' : 'libtorch')
      assert.equal(out.threads, out.limits.defaultThreads, 'getNumThreads() with one instance: the default team')
    },
  )

  test('OMP_NUM_THREADS, TORCH_NODE_INSTANCES and setNumThreads from the user win', () => {
    const omp = child(`console.log(JSON.stringify({ limits: torch.cpu.limits(), threads: torch.getNumThreads() }))`, {
      OMP_NUM_THREADS: '1',
    })
    // Below the usable cores on any machine (libtorch caps a larger OMP_NUM_THREADS at its cores).
    assert.equal(omp.limits.defaultThreads, 1)
    assert.equal(omp.limits.defaultFrom, 'OMP_NUM_THREADS')
    assert.equal(omp.threads, 1)

    const out = child(
      `const before = torch.getNumThreads(); const d = torch.cpu.limits().defaultThreads
       torch.setNumThreads(5)
       console.log(JSON.stringify({ before, d, instances: torch.getInstances(), after: torch.getNumThreads() }))`,
      { TORCH_NODE_INSTANCES: '2' },
    )
    assert.equal(out.instances, 2)
    assert.equal(out.before, Math.max(1, Math.floor(out.d / 2)), 'usable cores ÷ instances')
    assert.equal(out.after, 5)
  })

  test(
    'a one-core affinity mask gives a one-thread team',
    {
      skip: !fs.existsSync('/usr/bin/taskset') && 'no taskset here',
    },
    () => {
      const out = child(`console.log(JSON.stringify(torch.cpu.limits()))`, {}, ['/usr/bin/taskset', '-c', '0'])
      assert.equal(out.affinity, 1)
      assert.equal(out.usableCores, 1)
      assert.equal(out.defaultThreads, 1)
    },
  )
})

'use strict'
// bench/serve.js (`npm run bench:serve`) in its tiny mode, in a child process: it starts each
// service, loads it with autocannon for a second per row, prints the served-throughput table and
// the targets' lines, and writes the results file where --out says; a service it cannot run
// becomes a skipped or n/a row. No timing is asserted (speed comes from the benchmark's ratios).
const { test } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { runTinyBench, mainLineOnly } = require('./helpers')

const ROOT = path.join(__dirname, '..')
const haveModel = fs.existsSync(path.join(ROOT, 'models', 'resnet18_traced.pt'))
const SERVICES = [
  'torch-node unbatched (`await forward`)',
  "torch-node batched fp32 ('fuse' + Batcher)",
  'torch-node batched bf16 channels-last (+ Batcher)',
  'onnxruntime-node (same Express app)',
  'Python FastAPI + uvicorn (TorchScript)',
]
const cells = (line) =>
  line
    .split('|')
    .slice(1, -1)
    .map((c) => c.trim())

test(
  'bench/serve.js --tiny prints the table and the targets and writes --out',
  { skip: mainLineOnly('a benchmark, a developer tool') || (!haveModel && 'models not generated (npm run models)') },
  () => {
    runTinyBench('serve.js', 'serve-results.md', 300_000, (stdout, doc) => {
      assert.match(
        stdout,
        /^\| service \| route \| connections \| req\/s \(2xx\) \| p50 ms \| p99 ms \| event-loop lag p99 ms \| peak RSS MiB \|/m,
      )
      const rows = stdout
        .split('\n')
        .filter((l) => l.startsWith('| '))
        .map(cells)
      for (const name of SERVICES) {
        const own = rows.filter((c) => c[0] === name)
        assert.ok(own.length > 0, `a row for ${name}:\n${stdout}`)
        // Measured rows (tensor at 1 and 4 connections, image at 4), or one row saying why not.
        if (own.length === 1) assert.match(own[0][1], /^(skipped|n\/a)/, own[0].join(' | '))
        else
          assert.deepEqual(
            own.map((c) => `${c[1]} ${c[2]}`),
            ['tensor 1', 'tensor 4', 'image 4'],
          )
      }
      assert.deepEqual(
        rows.find((c) => c[0] === SERVICES[4]).slice(1, 2),
        ['skipped (--tiny)'],
        'no Python in tiny mode',
      )

      // The unbatched service always runs, and every request it got was answered 2xx.
      const unbatched = rows.filter((c) => c[0] === SERVICES[0])
      assert.equal(unbatched.length, 3, stdout)
      for (const c of unbatched) {
        assert.match(c[3], /^\d+\.\d$/, `req/s: ${c.join(' | ')}`)
        assert.match(c[7], /^\d+$/, `peak RSS: ${c.join(' | ')}`)
        assert.equal(c[9], '0', `non-2xx / errors: ${c.join(' | ')}`)
      }
      // The batched services' rows carry the Batcher's mean batch size; the overload row its 503s.
      for (const c of rows.filter((x) => x[0] === SERVICES[1] && x[1] !== 'skipped')) {
        if (!/^n\/a/.test(c[1])) assert.match(c[8], /^\d+\.\d\d$/, `mean batch: ${c.join(' | ')}`)
      }
      if (rows.some((c) => c[0] === SERVICES[1] && c[1] === 'tensor')) {
        const overload = rows.find((c) => c[0].startsWith(`${SERVICES[1]}, overload: maxQueue 4,`))
        assert.ok(overload, `an overload row:\n${stdout}`)
        assert.match(overload[9], /^\d+ \(503: \d+\) \/ \d+$/, overload.join(' | '))
        assert.match(stdout, /^- Overload \(10× capacity: .* answered 503 QueueFull/m)
        assert.match(
          stdout,
          /^- torch-node batched fp32 \('fuse' \+ Batcher\) vs unbatched, req\/s at concurrency 4: (\d+\.\d\d×|–)/m,
        )
      }
      assert.match(
        stdout,
        /^- Batch-1 latency, one process, 3 interleaved rounds \(median ms\): `await forward` \d+\.\d\d, forwardSync \d+\.\d\d/m,
      )
      assert.match(stdout, /^- async vs forwardSync \(median of round ratios\): \d+\.\d\d× \(target ≤ 1\.05×\)/m)
      assert.match(stdout, /^- Event-loop lag p99, worst torch-node row \(overload aside\): \d+\.\d ms/m)

      assert.match(doc, /^# torch-node served throughput$/m)
      assert.match(doc, /^- CPU: .+ cores available/m)
      assert.match(doc, /^- torch-node: \d+ executor instance\(s\) × \d+ intra-op threads/m)
      assert.match(doc, new RegExp(`^- Node ${process.version.replace(/\./g, '\\.')},`, 'm'))
      assert.match(doc, /^- Date: \d{4}-\d\d-\d\dT/m)
      assert.ok(doc.includes('## Targets (issue 17)'))
      assert.match(doc, /^\| torch-node unbatched \(`await forward`\) \| tensor \| 1 \| \d+\.\d \|/m)
    })
  },
)

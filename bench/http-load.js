'use strict'
// Sustained load on the example model server (examples/http-server.js): autocannon, 64
// connections for 60 s by default, POSTing /predict; prints throughput, latency percentiles,
// errors and the server's RSS (sampled every second from /proc).
//   node bench/http-load.js [--duration 60] [--connections 64]
// Exits non-zero on any error, timeout or non-2xx answer.
const { spawn } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')
const autocannon = require('autocannon')
const { options, runMain } = require('./cli')

const opt = options(['duration', 'connections'])
const DURATION = Number(opt.duration ?? 60)
const CONNECTIONS = Number(opt.connections ?? 64)
const MiB = 2 ** 20

function rss(pid) {
  const m = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))
  return m ? Number(m[1]) * 1024 : 0
}

async function main() {
  const port = 20000 + (process.pid % 20000)
  const server = spawn(process.execPath, [path.join(__dirname, '..', 'examples', 'http-server.js')], {
    env: { ...process.env, PORT: String(port) },
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  await new Promise((resolve, reject) => {
    server.stdout.on('data', (d) => {
      if (String(d).includes('listening')) resolve()
    })
    server.once('exit', (code) => reject(new Error(`server exited with ${code}`)))
  })
  const start = rss(server.pid)
  let peak = start
  const sampler = setInterval(() => {
    peak = Math.max(peak, rss(server.pid))
  }, 1000)
  const result = await autocannon({
    url: `http://127.0.0.1:${port}/predict`,
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      input: [
        [1, 2, 3, 4],
        [5, 6, 7, 8],
      ],
    }),
    connections: CONNECTIONS,
    duration: DURATION,
  })
  clearInterval(sampler)
  const end = rss(server.pid)
  server.kill()
  const failed = result.errors + result.timeouts + result.non2xx
  console.log(
    `${DURATION} s, ${CONNECTIONS} connections, Node ${process.version}: ` +
      `${result.requests.total} requests (${result.requests.average.toFixed(0)}/s), ` +
      `latency p50 ${result.latency.p50} ms, p99 ${result.latency.p99} ms, max ${result.latency.max} ms; ` +
      `errors ${result.errors}, timeouts ${result.timeouts}, non-2xx ${result.non2xx}; ` +
      `server RSS ${(start / MiB).toFixed(0)} -> peak ${(peak / MiB).toFixed(0)} -> end ${(end / MiB).toFixed(0)} MiB`,
  )
  if (failed > 0) process.exitCode = 1
}

runMain(main)

'use strict'
// Every ```js block of the README and of docs/*.md is marked just above it: `<!-- snippet: runs
// ... -->` blocks run here as written, each in its own process from the repository root (the
// models they name are the ones `npm install` generates); `<!-- snippet: reference (why) -->`
// blocks are API listings with placeholders. A block with neither mark fails, so a new snippet
// must be classified.
// What "as written" allows, as doc tests do: a block that does not import torch-node itself runs
// as ES module code after `import torch from 'torch-node'` and `import fs from 'node:fs'`; a block
// that calls require() runs as CommonJS.
const { test } = require('node:test')
const assert = require('node:assert/strict')
const { spawnSync } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')

const ROOT = path.join(__dirname, '..')
const PAGES = [
  'README.md',
  ...fs
    .readdirSync(path.join(ROOT, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .sort()
    .map((f) => `docs/${f}`),
]

/** The ```js blocks of one page: `{where, mark, code}`. */
function snippets(page) {
  const lines = fs.readFileSync(path.join(ROOT, page), 'utf8').split('\n')
  const out = []
  for (let i = 0; i < lines.length; i++) {
    if (lines[i].trim() !== '```js') continue
    // Fences may be indented (a block inside a list item); an unclosed one ends the page.
    let end = lines.findIndex((l, j) => j > i && l.trim() === '```')
    if (end < 0) end = lines.length
    const mark = /^<!-- snippet: (runs|reference)\b.*-->$/.exec((lines[i - 1] ?? '').trim())
    out.push({ where: `${page}:${i + 1}`, mark: mark?.[1] ?? null, code: lines.slice(i + 1, end).join('\n') })
    i = end
  }
  return out
}

const ALL = PAGES.flatMap(snippets)

test('every js block of the README and docs/ is marked runs or reference', () => {
  assert.ok(PAGES.length >= 5, `only ${PAGES.join(', ')}`)
  assert.ok(ALL.length >= 10, `only ${ALL.length} blocks found`)
  const unmarked = ALL.filter((s) => !s.mark).map((s) => s.where)
  assert.deepEqual(unmarked, [], 'mark these with <!-- snippet: runs --> or <!-- snippet: reference (why) -->')
  assert.ok(ALL.filter((s) => s.mark === 'runs').length >= 5)
  assert.ok(
    snippets('README.md').some((s) => s.mark === 'runs'),
    'the README itself has runnable examples',
  )
})

for (const snippet of ALL.filter((s) => s.mark === 'runs')) {
  // The models `npm install` generates (TORCH_NODE_SKIP_MODELS=1 skips them).
  const missing = [...snippet.code.matchAll(/'(models\/[^']+)'/g)]
    .map((m) => m[1])
    .filter((f) => !fs.existsSync(path.join(ROOT, f)))
  const skip = missing.length ? `not generated: ${missing.join(', ')}` : false
  test(`${snippet.where} runs as written`, { skip }, () => {
    const commonjs = /\brequire\(/.test(snippet.code.replace(/\/\/.*$/gm, ''))
    const prelude = commonjs
      ? ''
      : [
          /from 'torch-node'/.test(snippet.code) ? '' : "import torch from 'torch-node'",
          /from 'node:fs'/.test(snippet.code) ? '' : "import fs from 'node:fs'",
        ].join('\n')
    const r = spawnSync(
      process.execPath,
      ['--input-type', commonjs ? 'commonjs' : 'module', '-e', `${prelude}\n${snippet.code}`],
      {
        cwd: ROOT,
        encoding: 'utf8',
        timeout: 120000,
      },
    )
    assert.equal(r.status, 0, `exit ${r.status ?? r.signal}\n${r.stderr}`)
    // libtorch's own warnings (torchvision's SSD in scripting warns, as in Python) arrive as Node
    // warnings, type TorchWarning, with Node's hint line; anything else on stderr fails.
    const noise = /^\(node:\d+\) \[TORCH_(WARNING|DEPRECATION)\] TorchWarning: |^\(Use `node --trace-warnings/
    assert.equal(
      r.stderr
        .split('\n')
        .filter((l) => l && !noise.test(l))
        .join('\n'),
      '',
    )
  })
}

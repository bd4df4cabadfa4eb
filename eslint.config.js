'use strict'
// `npm run lint` (tools/lint.js) and `npm run lint:js` run ESLint over every JS file of the
// repository with this flat config: ESLint's recommended rules, Node's globals, CommonJS for .js
// and ES modules for .mjs. What git ignores (build output, virtualenvs, node_modules) is ignored
// here too, read from .gitignore so the two lists cannot drift.
const fs = require('node:fs')
const path = require('node:path')
const js = require('@eslint/js')
const globals = require('globals')

/** .gitignore's patterns as ESLint's: `/x` is anchored at the root, `x` matches at any depth. */
function gitignored() {
  const out = []
  for (const raw of fs.readFileSync(path.join(__dirname, '.gitignore'), 'utf8').split('\n')) {
    const line = raw.trim()
    if (!line || line.startsWith('#')) continue
    const negated = line.startsWith('!')
    const body = line.slice(negated ? 1 : 0).replace(/\/$/, '')
    const anchored = body.startsWith('/') || body.includes('/')
    const pattern = anchored ? body.replace(/^\//, '') : `**/${body}`
    for (const p of [pattern, `${pattern}/**`]) out.push(negated ? `!${p}` : p)
  }
  return out
}

module.exports = [
  { ignores: gitignored() },
  js.configs.recommended,
  // `catch {}` is how best-effort probes here say "absent is fine" (a missing file, a dead pid).
  { rules: { 'no-empty': ['error', { allowEmptyCatch: true }] } },
  {
    files: ['**/*.js', '**/*.cjs'],
    languageOptions: { sourceType: 'commonjs', ecmaVersion: 'latest', globals: { ...globals.node } },
  },
  {
    files: ['**/*.mjs'],
    languageOptions: { sourceType: 'module', ecmaVersion: 'latest', globals: { ...globals.node } },
  },
]

'use strict'
// `npm run models`: runs models/make_models.py with the provisioned Python, then the text models'
// scripts: models/make_tokenizer_goldens.py (tokenizer files and parity goldens) and
// models/make_text_models.py (text encoders exported with python/export_text.py, and their goldens),
// models/make_lm_models.py (tiny causal LMs exported with python/export_causal_lm.py, greedy goldens).
// Arguments go to make_models.py only; with any, the text scripts do not run (they select a part
// of the vision models: `--pt2-only`, `--skip-large`, ...).
const { execFileSync } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')
const { resolveLibtorch, log, ROOT } = require('../scripts/libtorch')

const TEXT_SCRIPTS = ['make_tokenizer_goldens.py', 'make_text_models.py', 'make_lm_models.py']

function generate(python = resolveLibtorch({ withModelPackages: true }).python, extraArgs = []) {
  log('generating models and golden outputs (models/make_models.py)')
  execFileSync(python, [path.join(ROOT, 'models', 'make_models.py'), ...extraArgs], { cwd: ROOT, stdio: 'inherit' })
  if (extraArgs.length) return
  for (const script of TEXT_SCRIPTS) {
    const file = path.join(ROOT, 'models', script)
    if (!fs.existsSync(file)) continue
    log(`generating text models and goldens (models/${script})`)
    execFileSync(python, [file], { cwd: ROOT, stdio: 'inherit' })
  }
}

module.exports = { generate }

if (require.main === module) generate(undefined, process.argv.slice(2))

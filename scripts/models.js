'use strict'
// `npm run models`: runs models/make_models.py with the provisioned Python.
const { execFileSync } = require('node:child_process')
const path = require('node:path')
const { resolveLibtorch, log, ROOT } = require('./libtorch')

function generate(python = resolveLibtorch({ withModelPackages: true }).python, extraArgs = []) {
  log('generating models and golden outputs (models/make_models.py)')
  execFileSync(python, [path.join(ROOT, 'models', 'make_models.py'), ...extraArgs], { cwd: ROOT, stdio: 'inherit' })
}

module.exports = { generate }

if (require.main === module) generate(undefined, process.argv.slice(2))

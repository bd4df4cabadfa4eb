'use strict'
// `node tools/check-install-log.js LOG`: CI's check that the install (`npm ci` output in LOG)
// printed none of the warnings that come from this project's own configuration (issue 25): an
// unknown key in .npmrc, a dependency install script that allowScripts does not decide, pip's
// resolver `ERROR:` about the CUDA wheels left out on purpose, or any npm error; and none of the
// third-party noise that buried them (issue 34): Python warnings, progress bars, pip's and
// cargo's step-by-step output. Dev
// dependencies' EBADENGINE warnings are expected on Node 20 (end of life, still tested; several
// tools require 22) and only there: docs/install.md says so.
const fs = require('node:fs')

/** Lines of an install log that a newcomer would rightly read as a problem, with the reason. */
function complaints(text, nodeMajor = Number(process.versions.node.split('.')[0])) {
  const rules = [
    [/^npm warn Unknown \w+ config/, 'an unknown npm config key (.npmrc)'],
    [/allowScripts|install-scripts/, 'a dependency install script that allowScripts does not decide'],
    [/^ERROR:/, 'an ERROR line (pip)'],
    [/^npm error/, 'an npm error'],
    [/^npm warn EBADENGINE/, 'a dependency that does not support this Node line', () => nodeMajor > 20],
    [/^npm warn deprecated/, 'a deprecated dependency'],
    // Issue 34: third-party output belongs in the step's log file (models/golden/.logs/), shown
    // only when the step fails; a newcomer cannot tell it from a problem.
    [/\b(Future|User|Deprecation|Runtime)Warning\b|^\s*warnings\.warn\(/, 'a Python warning'],
    [/LOAD REPORT|Loading weights|\d+%\|/, "a library's progress output"],
    [/^\s*(Collecting|Downloading|Requirement already satisfied|Installing collected packages) /, "pip's own output"],
    [/^\s*Compiling \S+ v\d/, "cargo's own output"],
  ]
  const found = []
  text.split('\n').forEach((line, i) => {
    for (const [re, why, when = () => true] of rules) {
      if (re.test(line) && when()) {
        found.push(`line ${i + 1}: ${why}: ${line.trim()}`)
        break
      }
    }
  })
  return found
}

module.exports = { complaints }

if (require.main === module) {
  const file = process.argv[2]
  if (!file) throw new Error('usage: node tools/check-install-log.js LOG')
  const found = complaints(fs.readFileSync(file, 'utf8'))
  if (found.length) {
    console.error(
      `the install printed ${found.length} line(s) a user would read as a problem:\n  ${found.join('\n  ')}`,
    )
    process.exit(1)
  }
  console.log("install log: no warning from the project's own configuration")
}

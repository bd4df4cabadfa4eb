'use strict'
// What the bench scripts share around their measurements: reading their command line, writing
// the results file, and ending the process when main() is done.
const fs = require('node:fs')
const path = require('node:path')
const { parseArgs } = require('node:util')

/**
 * The command line as { name: string | true }: `values` are the `--name value` options (strings;
 * each script converts and defaults its own), `flags` the `--name` switches. node:util parseArgs,
 * so a misspelt option stops the run instead of being ignored.
 */
function options(values, flags = []) {
  return parseArgs({
    options: Object.fromEntries([
      ...values.map((name) => [name, { type: 'string' }]),
      ...flags.map((name) => [name, { type: 'boolean' }]),
    ]),
  }).values
}

/** Writes the Markdown `doc` to `out`, making its folder, and says so (the tests look for the line). */
function writeResults(out, doc, seconds) {
  fs.mkdirSync(path.dirname(out), { recursive: true })
  fs.writeFileSync(out, doc)
  console.log(`\nwrote ${out} (${seconds.toFixed(0)} s)`)
}

/**
 * Runs the async `main` and exits as soon as it settles, without waiting for what it left
 * running: with process.exitCode (0 unless main set it), or 1 with the error printed.
 */
function runMain(main) {
  main().then(
    () => process.exit(),
    (e) => {
      console.error(e)
      process.exit(1)
    },
  )
}

module.exports = { options, writeResults, runMain }

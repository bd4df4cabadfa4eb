// @ts-check
'use strict'
// A chat template file as the CLIs read it (`torch-node export --chat-template FILE`, `torch-node
// serve --chat-template NAME=FILE`): at most 1 MiB of UTF-8 (the largest templates on the Hub are
// about 40 KiB), read no further than that, so /dev/zero or a huge file is refused, not loaded.
const fs = require('node:fs')

/** The largest chat template file read. */
const MAX_TEMPLATE_BYTES = 1 << 20

/**
 * The text of chat template `file`. Throws an Error with a one-line message: unreadable (its
 * errno code), larger than 1 MiB, or not UTF-8.
 * @param {string} file
 * @returns {string}
 */
function readTemplateFile(file) {
  const bytes = Buffer.alloc(MAX_TEMPLATE_BYTES + 1)
  let size = 0
  try {
    const fd = fs.openSync(file, 'r')
    try {
      for (let got = -1; size < bytes.length && got !== 0; size += got) {
        got = fs.readSync(fd, bytes, size, bytes.length - size, null)
      }
    } finally {
      fs.closeSync(fd)
    }
  } catch (e) {
    const err = /** @type {NodeJS.ErrnoException} */ (e)
    throw new Error(`cannot read ${file}: ${err.code ?? err.message}`, { cause: e })
  }
  if (size > MAX_TEMPLATE_BYTES) throw new Error(`${file}: larger than 1 MiB`)
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(bytes.subarray(0, size))
  } catch (e) {
    throw new Error(`${file}: not UTF-8 text`, { cause: e })
  }
}

module.exports = { readTemplateFile, MAX_TEMPLATE_BYTES }

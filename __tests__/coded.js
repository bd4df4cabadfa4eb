'use strict'
// Shared by helpers.js and the CUDA suite (cuda/common.js, which the GPU machine runs without
// the rest of __tests__/): not a test file itself.
const assert = require('node:assert/strict')

/** An assert.throws validator: an Error with this code (and a message matching `message`). */
function coded(code, message) {
  return (err) => {
    assert.ok(err instanceof Error, `expected an Error, got ${err}`)
    assert.equal(err.code, code, `code (message: ${err.message})`)
    if (message) assert.match(err.message, message)
    return true
  }
}

module.exports = { coded }

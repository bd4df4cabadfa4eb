'use strict'
// Shared by the test files (not a test file itself: npm test runs *.test.js).
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

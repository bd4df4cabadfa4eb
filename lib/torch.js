// @ts-check
'use strict'
// The public API (index.js's exports) for the modules of lib/, which are composed from it as an
// app would compose them. index.js requires those modules while it loads, so they read the API
// on first use, never at load time: `const { Tensor } = torch()` inside a function.

/** @type {typeof import('..') | undefined} */
let api

/** The public API, `require('torch-node')`. */
function torch() {
  return (api ??= require('..'))
}

module.exports = torch

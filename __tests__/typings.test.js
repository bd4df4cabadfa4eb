'use strict'
// index.d.ts says what the runtime has, no more, no less: the module's exports, and each class's
// methods, getters and static methods, compared by name in both directions. (`npm run typings`
// regenerates index.d.ts from the Rust doc comments; CI fails when the committed file is stale.)
const { test } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const torch = require('..')

const DTS = fs.readFileSync(path.join(__dirname, '..', 'index.d.ts'), 'utf8')

/** The body of `export declare class Name { ... }` (classes close with a line `}`). */
function classBody(name) {
  const start = DTS.indexOf(`export declare class ${name} {`)
  assert.ok(start >= 0, `index.d.ts declares class ${name}`)
  return DTS.slice(start, DTS.indexOf('\n}\n', start))
}

/** Declared member names of a class: `{instance, statics}` (constructors left out). */
function members(name) {
  const instance = new Set()
  const statics = new Set()
  for (const m of classBody(name).matchAll(/^ {2}(private )?(static )?(get |set )?(\w+)[<(]/gm)) {
    if (m[4] === 'constructor') continue
    ;(m[2] ? statics : instance).add(m[4])
  }
  return { instance, statics }
}

function sorted(set) {
  return [...set].sort()
}

test('module exports = the names index.d.ts declares', () => {
  const declared = new Set()
  for (const m of DTS.matchAll(/^export declare (?:function|class|namespace|const) (\w+)/gm)) declared.add(m[1])
  assert.deepEqual(sorted(declared), Object.keys(torch).sort())
})

for (const name of ['Tensor', 'ScriptModule']) {
  test(`${name}: prototype and static members = those index.d.ts declares`, () => {
    const Class = torch[name]
    const runtime = Object.getOwnPropertyNames(Class.prototype).filter((k) => k !== 'constructor')
    const statics = Object.getOwnPropertyNames(Class).filter((k) => !['length', 'name', 'prototype', 'arguments', 'caller'].includes(k))
    const declared = members(name)
    assert.deepEqual(sorted(declared.instance), runtime.sort())
    assert.deepEqual(sorted(declared.statics), statics.sort())
  })
}

test('the cuda namespace: the functions declared are the ones there', () => {
  const start = DTS.indexOf('export declare namespace cuda {')
  const body = DTS.slice(start, DTS.indexOf('\n}\n', start))
  const declared = [...body.matchAll(/export function (\w+)/g)].map((m) => m[1]).sort()
  assert.deepEqual(declared, Object.keys(torch.cuda).sort())
})

test('the vision namespace: the members declared are the ones there', () => {
  const start = DTS.indexOf('export declare namespace vision {')
  assert.ok(start >= 0, 'index.d.ts declares namespace vision')
  const body = DTS.slice(start, DTS.indexOf('\n}\n', start))
  const declared = [...body.matchAll(/export (?:function|const) (\w+)/g)].map((m) => m[1]).sort()
  assert.deepEqual(declared, Object.keys(torch.vision).sort())
})

test('nothing internal leaks into the typings', () => {
  assert.doesNotMatch(DTS, /JsTensor|JsScriptModule|_tidyBegin|_tidyEnd|@internal/)
  assert.match(classBody('Tensor'), /private constructor\(\)/)
})

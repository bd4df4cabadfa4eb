'use strict'
// index.d.ts says what the runtime has, no more, no less: the module's exports; each class's
// methods, getters, static methods and Symbol.dispose/asyncDispose; the members of the objects
// the API hands out (Ragged); each namespace's functions and constants — compared by name in
// both directions, for every class and namespace index.d.ts declares. (`npm run typings`
// regenerates index.d.ts below its hand-written part: from lib/'s JSDoc (tools/lib-typings.js),
// then from the Rust doc comments; CI fails when the committed file is stale, and the test below
// fails when the part from lib/ is.)
const { test } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const torch = require('..')
const libTypings = require('../tools/lib-typings')

const DTS = fs.readFileSync(path.join(__dirname, '..', 'index.d.ts'), 'utf8')
const SYMBOLS = [
  ['dispose', Symbol.dispose],
  ['asyncDispose', Symbol.asyncDispose],
]

/** The declared names of one kind (`class`, `namespace`) in the typings. */
function declared(kind) {
  return [...new Set([...DTS.matchAll(new RegExp(`^export declare ${kind} (\\w+)`, 'gm'))].map((m) => m[1]))]
}

/** The bodies of every `export declare class|interface|namespace Name ...{` (they close with a line `}`). */
function bodies(name) {
  const out = []
  for (const m of DTS.matchAll(
    new RegExp(`^export (?:declare (?:class|namespace)|interface) ${name}\\b[^\\n]*\\{$`, 'gm'),
  )) {
    out.push(DTS.slice(m.index, DTS.indexOf('\n}\n', m.index)))
  }
  assert.ok(out.length > 0, `index.d.ts declares ${name}`)
  return out
}

/** Declared members of a class or interface: `{instance, statics, symbols}` (constructors left out). */
function members(name) {
  const instance = new Set()
  const statics = new Set()
  const symbols = new Set()
  for (const body of bodies(name)) {
    for (const m of body.matchAll(/^ {2}(?:private )?(static )?(?:readonly )?(?:get |set )?(\w+)\??[<(:]/gm)) {
      if (m[2] !== 'constructor') (m[1] ? statics : instance).add(m[2])
    }
    for (const m of body.matchAll(/^ {2}\[Symbol\.(\w+)\]/gm)) symbols.add(m[1])
  }
  return { instance: sorted(instance), statics: sorted(statics), symbols: sorted(symbols) }
}

/** Runtime members of an instance's prototype (and, given `instance`, its own properties). */
function runtimeMembers(proto, { statics = {}, instance } = {}) {
  const names = new Set(Object.getOwnPropertyNames(proto).filter((k) => k !== 'constructor'))
  if (instance) for (const k of Object.keys(instance)) names.add(k)
  return {
    instance: sorted(names),
    statics: sorted(
      Object.getOwnPropertyNames(statics).filter(
        (k) => !['length', 'name', 'prototype', 'arguments', 'caller'].includes(k),
      ),
    ),
    symbols: SYMBOLS.filter(([, s]) => Object.getOwnPropertySymbols(proto).includes(s))
      .map(([n]) => n)
      .sort(),
  }
}

function sorted(names) {
  return [...names].sort()
}

test('module exports = the names index.d.ts declares', () => {
  const names = new Set()
  for (const m of DTS.matchAll(/^export declare (?:function|class|namespace|const) (\w+)/gm)) names.add(m[1])
  assert.deepEqual(sorted(names), Object.keys(torch).sort())
})

test('the classes and namespaces below are read from index.d.ts, the known ones among them', () => {
  for (const name of ['AOTModule', 'Batcher', 'RemoteModule', 'ScriptModule', 'Tensor'])
    assert.ok(declared('class').includes(name), name)
  for (const name of ['cpu', 'cuda', 'image', 'oip', 'vision']) assert.ok(declared('namespace').includes(name), name)
})

for (const name of declared('class')) {
  test(`${name}: prototype, static and symbol members = those index.d.ts declares`, () => {
    const Class = torch[name]
    assert.equal(typeof Class, 'function', `torch.${name} is a class`)
    assert.deepEqual(members(name), runtimeMembers(Class.prototype, { statics: Class }))
  })
}

test('Ragged (what torch.ragged returns): members = those index.d.ts declares', () => {
  const r = torch.ragged([torch.ones([2]), torch.ones([1])])
  try {
    assert.deepEqual(members('Ragged'), runtimeMembers(Object.getPrototypeOf(r), { instance: r }))
  } finally {
    r.dispose()
  }
})

/** Declared members of a class inside a namespace body (indented one level more). */
function nestedMembers(body, name) {
  const at = body.search(new RegExp(`^ {2}export class ${name}\\b`, 'm'))
  const classBody = body.slice(at, body.indexOf('\n  }\n', at))
  const instance = new Set()
  const statics = new Set()
  for (const m of classBody.matchAll(/^ {4}(?:private )?(static )?(?:readonly )?(?:get |set )?(\w+)\??[<(:]/gm)) {
    if (m[2] !== 'constructor') (m[1] ? statics : instance).add(m[2])
  }
  const symbols = [...classBody.matchAll(/^ {4}\[Symbol\.(\w+)\]/gm)].map((m) => m[1])
  return { instance: sorted(instance), statics: sorted(statics), symbols: sorted(symbols) }
}

for (const name of declared('namespace')) {
  test(`the ${name} namespace: the functions, classes and constants declared are the ones there`, () => {
    // A namespace may be declared in parts (the hand-written one, the one generated from lib/).
    const body = bodies(name).join('\n')
    const names = [...body.matchAll(/^ {2}export (?:function|const|class) (\w+)/gm)].map((m) => m[1])
    assert.deepEqual(sorted(new Set(names)), Object.keys(torch[name]).sort())
    for (const n of names) {
      const primitive = new RegExp(`^ {2}export const ${n}: (string|number|boolean)$`, 'm').exec(body)?.[1]
      const kind = new RegExp(`^ {2}export (?:function|class) ${n}\\b`, 'm').test(body)
        ? 'function'
        : (primitive ?? 'object')
      assert.equal(typeof torch[name][n], kind, `${name}.${n}`)
      if (new RegExp(`^ {2}export class ${n}\\b`, 'm').test(body)) {
        const Class = torch[name][n]
        assert.deepEqual(
          nestedMembers(body, n),
          runtimeMembers(Class.prototype, { statics: Class }),
          `${name}.${n}'s members`,
        )
      }
    }
  })
}

test('nothing internal leaks into the typings', () => {
  assert.doesNotMatch(DTS, /JsTensor|JsScriptModule|_tidyBegin|_tidyEnd|@internal/)
  assert.match(bodies('Tensor').join('\n'), /private constructor\(\)/)
})

test("the part generated from lib/'s JSDoc is what lib/ says now (`npm run typings` rewrites it)", () => {
  const { dts, errors } = libTypings.render(DTS)
  assert.equal(errors, null, `tsc reports type errors in lib/:\n${errors}`)
  assert.equal(libTypings.split(dts).section, libTypings.split(DTS).section)
})

test("the lib/ exports tools/lib-typings.js declares are the API's, and the API's from those files are all there", () => {
  for (const { file, namespace, exports, handWritten = [] } of libTypings.ENTRIES) {
    const where = namespace ? torch[namespace] : torch
    const module = require(path.join('..', file))
    for (const name of exports) assert.equal(module[name], where[name], `${file}: ${name} is torch.${namespace ?? ''}`)
    for (const [name, value] of Object.entries(module)) {
      const public_ = Object.values(torch).includes(value) || Object.values(where).includes(value)
      const listed = exports.includes(name) || handWritten.includes(name)
      assert.equal(public_, listed, `${file}: ${name} is ${public_ ? '' : 'not '}public; ENTRIES says otherwise`)
    }
  }
})

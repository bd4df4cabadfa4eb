'use strict'
// `npm run typings`' second step: the declarations of the JS layer (lib/) in index.d.ts, generated from
// lib/'s JSDoc so that the JS is their one source. TypeScript's compiler (the `typescript` dev
// dependency) emits declarations for the entry files below (`declaration`, `emitDeclarationOnly`,
// `allowJs`, with tools/tsconfig.lib.json's other options) into a temporary folder; this file picks the
// public ones out of them and writes them into index.d.ts between LIB_MARKER and the marker of the part
// generated from Rust (scripts/build.js, the first step, keeps everything above that marker as it is).
//
// What is picked: each entry's public exports (ENTRIES: the names index.js puts on the API, at the
// top level or in a namespace), then every type they name, found by name through the declarations
// tsc emitted for lib/ (a `@typedef`, or a class the API hands out but does not export, such as
// `Ragged`: declared as an interface, since `new torch.Ragged` does not exist). Names index.d.ts
// declares elsewhere (`Tensor`, `IValue`, ...) are left to it: lib/ imports them with `@import`.
// TypeScript 7 (tsgo) has no emit API, hence the command line and the temporary folder.
const { spawnSync } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { TYPINGS_MARKER: RUST_MARKER } = require('../scripts/build')

const ROOT = path.join(__dirname, '..')
const DTS = path.join(ROOT, 'index.d.ts')

/** The line after which this file writes, up to RUST_MARKER. */
const LIB_MARKER =
  "// ---- Generated below by `npm run typings` from lib/'s JSDoc (tools/lib-typings.js): edit that JSDoc, not this part. ----\n"
// RUST_MARKER: scripts/build.js's; the part generated from the Rust doc comments follows it.

/**
 * The entry files and the names of their exports that are public: at the top level of the API, or
 * in `namespace` (where index.js puts them; __tests__/typings.test.js compares with the runtime).
 * Entries of one namespace are adjacent: their functions and classes make one `namespace` block, with
 * the first one's `doc` (a namespace has no JSDoc of its own in lib/; one declared in index.d.ts's
 * hand-written part too has its doc there).
 */
const ENTRIES = [
  { file: 'lib/batcher.js', exports: ['Batcher'] },
  { file: 'lib/ragged.js', exports: ['ragged', 'padSequence'] },
  { file: 'lib/text/sentence-encoder.js', namespace: 'text', exports: ['SentenceEncoder'] },
  { file: 'lib/text/causal-lm.js', namespace: 'text', exports: ['CausalLM'] },
  { file: 'lib/text/pipeline.js', exports: ['pipeline'] },
  {
    file: 'lib/audio/speech-recognition.js',
    namespace: 'audio',
    exports: ['SpeechRecognitionPipeline'],
    doc: 'Speech: Whisper speech to text (docs/speech.md).',
  },
  { file: 'lib/audio/audio-classification.js', namespace: 'audio', exports: ['AudioClassificationPipeline'] },
  {
    file: 'lib/audio/zero-shot-audio-classification.js',
    namespace: 'audio',
    exports: ['ZeroShotAudioClassificationPipeline'],
  },
  { file: 'lib/audio/text-to-speech.js', namespace: 'audio', exports: ['TextToSpeechPipeline', 'encodeWav'] },
  // `handWritten`: public, but declared in index.d.ts's hand-written part. tsc writes a CommonJS export
  // that is neither a function nor a class as a bare type in its `module.exports` object, without its doc.
  // (`vision.loadOps` is index.js's.)
  { file: 'lib/vision.js', namespace: 'vision', exports: ['classify'], handWritten: ['imagenetLabels'] },
  { file: 'lib/oip/remote.js', exports: ['RemoteModule'] },
  {
    file: 'lib/oip/server.js',
    namespace: 'oip',
    exports: ['serve', 'router'],
    doc: 'The Open Inference Protocol (KServe v2) on the server side, and Triton model repositories.',
  },
  { file: 'lib/oip/triton.js', namespace: 'oip', exports: ['writeTritonRepository'] },
  { file: 'lib/serve/index.js', exports: ['serve'] },
]

/** JSDoc tags that only say types (the declaration says them now) or that tsc has applied. */
const TYPE_TAGS = new Set([
  'param',
  'arg',
  'argument',
  'returns',
  'return',
  'type',
  'template',
  'typedef',
  'property',
  'prop',
  'private',
  'readonly',
  'import',
  'overload',
  'this',
  'satisfies',
  'callback',
])

/**
 * Runs tsc over the entries: `{files, errors}`, the emitted declarations by repository path
 * (`lib/batcher.js`) and tsc's type errors (null when none).
 */
function emit() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'torch-node-lib-typings-'))
  try {
    const config = {
      extends: path.join(ROOT, 'tools', 'tsconfig.lib.json'),
      compilerOptions: {
        noEmit: false,
        declaration: true,
        emitDeclarationOnly: true,
        outDir: path.join(dir, 'out'),
        rootDir: ROOT,
        // Found from the config's folder otherwise, which is the temporary one.
        typeRoots: [path.join(ROOT, 'node_modules', '@types')],
      },
      files: ENTRIES.map((e) => path.join(ROOT, e.file)),
      include: [],
    }
    fs.writeFileSync(path.join(dir, 'tsconfig.json'), JSON.stringify(config))
    const tsc = path.join(path.dirname(require.resolve('typescript/package.json')), 'bin', 'tsc')
    const r = spawnSync(process.execPath, [tsc, '-p', path.join(dir, 'tsconfig.json')], {
      cwd: ROOT,
      encoding: 'utf8',
      timeout: 120_000,
    })
    if (r.status !== 0 && r.status !== 2) {
      throw new Error(`lib typings: tsc failed (${r.status ?? r.signal}):\n${r.stdout}${r.stderr}`)
    }
    // Status 2: type errors, the declarations emitted all the same (see `write`).
    const errors = r.status === 0 ? null : `${r.stdout}${r.stderr}`
    const out = new Map()
    const walk = (folder) => {
      for (const entry of fs.readdirSync(folder, { withFileTypes: true })) {
        const file = path.join(folder, entry.name)
        if (entry.isDirectory()) walk(file)
        else if (entry.name.endsWith('.d.ts')) {
          const source = path.relative(path.join(dir, 'out'), file).replace(/\.d\.ts$/, '.js')
          out.set(source.split(path.sep).join('/'), fs.readFileSync(file, 'utf8'))
        }
      }
    }
    walk(path.join(dir, 'out'))
    return { files: out, errors }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
}

/**
 * A declaration file's top-level statements, each with the doc comment right before it:
 * `{text, doc}`; the other comments (a `@typedef`'s, which tsc leaves apart from its type) as
 * `{comment}`.
 */
function statements(source) {
  const lines = source.split('\n')
  const out = []
  /** @type {string[]} */
  let comments = []
  for (let i = 0; i < lines.length;) {
    const line = lines[i]
    if (line.startsWith('/**') || line.startsWith('/*')) {
      let end = i
      while (!lines[end].includes('*/')) end++
      comments.push(lines.slice(i, end + 1).join('\n'))
      i = end + 1
    } else if (/^\S/.test(line)) {
      let end = i + 1
      while (end < lines.length && !/^(?:\/\*|export |declare |import |type |interface )/.test(lines[end])) end++
      const doc = comments.length > 0 && !/@(?:typedef|import|callback)\b/.test(comments.at(-1)) ? comments.pop() : null
      for (const comment of comments) out.push({ comment })
      comments = []
      out.push({ text: lines.slice(i, end).join('\n').trimEnd(), doc })
      i = end
    } else i++
  }
  for (const comment of comments) out.push({ comment })
  return out
}

/** A doc comment without its type tags (see TYPE_TAGS), re-indented; null when nothing is left. */
function cleanDoc(comment, indent = '') {
  const body = comment
    .replace(/^\s*\/\*\*\s?/, '')
    .replace(/\s*\*\/\s*$/, '')
    .split('\n')
    .map((l) => l.replace(/^\s*\* ?/, ''))
  const kept = []
  let dropping = false
  for (const line of body) {
    const tag = /^@(\w+)/.exec(line)
    if (tag) dropping = TYPE_TAGS.has(tag[1])
    if (!dropping) kept.push(line.trimEnd())
  }
  while (kept.length > 0 && kept.at(-1) === '') kept.pop()
  while (kept.length > 0 && kept[0] === '') kept.shift()
  if (kept.length === 0) return null
  if (kept.length === 1) return `${indent}/** ${kept[0]} */`
  return [`${indent}/**`, ...kept.map((l) => (l ? `${indent} * ${l}` : `${indent} *`)), `${indent} */`].join('\n')
}

/**
 * The doc comments of the `@typedef`s of a lib/ file, by name: read from the JS, since tsc keeps a
 * typedef's comment only where it precedes a statement that has a declaration.
 */
function typedefDocs(file) {
  const docs = new Map()
  for (const [comment] of fs.readFileSync(path.join(ROOT, file), 'utf8').matchAll(/\/\*\*[\s\S]*?\*\//g)) {
    const name = /^\s*\*?\s*@typedef\s+(?:\{[\s\S]*?\}\s+)?(\w+)\s*$/m.exec(comment)?.[1]
    if (name) docs.set(name, cleanDoc(comment))
  }
  return docs
}

/** Every doc comment in a declaration's text cleaned by cleanDoc (and dropped where nothing is left). */
const cleanDocs = (text) =>
  text.replace(/^( *)\/\*\*[\s\S]*?\*\/\n/gm, (comment, indent) => {
    const doc = cleanDoc(comment, indent)
    return doc ? `${doc}\n` : ''
  })

/**
 * `export type Name = { ... };` as `export interface Name { ... }`, as a hand-written declaration would say
 * it (the same type, and open to augmentation); other types as they are.
 */
function asInterface(text) {
  const m = /^export type (\w+(?:<[^=]*>)?) = \{\n/.exec(text)
  if (!m || !text.endsWith('\n};')) return text
  // Only when the braces close at the end: `{...} | null` is no interface.
  let depth = 0
  const body = text.slice(m[0].length - 2)
  for (let i = 0; i < body.length; i++) {
    if (body[i] === '{') depth++
    else if (body[i] === '}' && --depth === 0 && i !== body.length - 2) return text
  }
  return `export interface ${m[1]} ${body.slice(0, -1)}`
}

/** tsc's indent (4 spaces) as index.d.ts's (2), plus `extra`. */
const reindent = (text, extra = '') =>
  text.replace(/^((?: {4})+)/gm, (spaces) => extra + '  '.repeat(spaces.length / 4)).replace(/^(?=\S)/gm, extra)

/**
 * `import("<path>").Name` written by tsc for a name from index.d.ts or lib/ as the plain name, which
 * index.d.ts then declares itself; any other import is an error (index.d.ts imports nothing).
 */
function localNames(text, file) {
  return text.replace(/import\(["']([^"']+)["']\)\./g, (whole, spec) => {
    const target = path
      .relative(ROOT, path.resolve(ROOT, path.dirname(file), spec))
      .split(path.sep)
      .join('/')
    if (target === '' || target === 'index' || target.startsWith('lib/')) return ''
    throw new Error(`lib typings: ${file}: a declaration names ${whole}: index.d.ts cannot import it`)
  })
}

/** The names a declaration mentions (candidates for the types it needs). */
const mentioned = (text) => new Set(text.replace(/\/\*[\s\S]*?\*\//g, '').match(/\b[A-Za-z_]\w*\b/g))

/** The declaration's name and kind: `{kind: 'type' | 'class' | 'function' | 'const', name}`, or null. */
function declared(text) {
  const m = /^(?:export )?(?:declare )?(type|class|function|const|interface) (\w+)/.exec(text)
  return m ? { kind: m[1], name: m[2] } : null
}

/**
 * The generated section: the public declarations of ENTRIES and the types they name, as index.d.ts
 * writes them. `elsewhere`: the names the rest of index.d.ts declares.
 */
function generate(elsewhere, emitted) {
  // Every type lib/ declares: name -> {text, doc, file}.
  const types = new Map()
  const values = new Map() // file -> name -> statement
  for (const [file, source] of emitted) {
    const byName = new Map()
    const docs = typedefDocs(file)
    for (const s of statements(source)) {
      if (s.comment) continue
      const d = declared(s.text)
      if (!d) continue
      const text = cleanDocs(localNames(s.text, file))
      if (d.kind === 'type' || d.kind === 'interface') {
        // An alias of a name index.d.ts declares (`@typedef {import('..').Tensor} Tensor`) is that name.
        if (new RegExp(`^export type ${d.name} = ${d.name};$`).test(text)) continue
        const seen = types.get(d.name)
        if (seen && seen.text !== text) seen.clash = file
        else types.set(d.name, { text: asInterface(text), doc: docs.get(d.name) ?? s.doc, file })
      } else byName.set(d.name, { ...d, text, doc: s.doc, file })
    }
    values.set(file, byName)
  }
  // A class of lib/ that a public declaration names but the API does not export: an interface.
  const exported = new Set(ENTRIES.flatMap((e) => e.exports.map((n) => `${e.file}:${n}`)))
  for (const [file, byName] of values) {
    for (const [name, v] of byName) {
      if (v.kind !== 'class' || exported.has(`${file}:${name}`) || types.has(name)) continue
      const text = v.text
        .replace(/^declare class /, 'export interface ')
        .replace(/^ {4}#private;\n/m, '')
        .replace(/^ {4}(?:\/\*\*(?:(?!\*\/)[\s\S])*\*\/\n {4})?(?:private )?constructor\(.*\);\n/m, '')
        // Static members (an interface has none: these classes are reached through torch.pipeline), members
        // for subclasses only (`@protected`) or keyed by a symbol only lib/ holds: not the API's.
        .replace(/^ {4}(?:\/\*\*(?:(?!\*\/)[\s\S])*\*\/\n {4})?static [^\n]*\{\n(?: {8}[^\n]*\n)* {4}\}[^\n]*;\n/gm, '')
        .replace(
          /^ {4}(?:\/\*\*(?:(?!\*\/)[\s\S])*\*\/\n {4})?(?:protected .*|static .*|(?:get )?\[(?!Symbol\.)\w+\].*);\n/gm,
          '',
        )
      types.set(name, { text, doc: v.doc, file, fromClass: true })
    }
  }

  const taken = new Set() // types written
  const out = []
  const writeTypes = (text) => {
    const queue = [...mentioned(text)]
    const found = []
    while (queue.length > 0) {
      const name = queue.shift()
      if (taken.has(name) || !types.has(name)) continue
      const { file, clash } = types.get(name)
      if (elsewhere.has(name)) throw new Error(`lib typings: ${file}'s type ${name} is declared in index.d.ts too`)
      if (clash) throw new Error(`lib typings: two types ${name}: in ${file} and ${clash}`)
      taken.add(name)
      found.push(name)
      queue.push(...mentioned(types.get(name).text))
    }
    // In the order tsc emitted them (file by file), which is the JSDoc's order.
    for (const name of [...types.keys()].filter((n) => found.includes(n))) {
      const { text: t, doc } = types.get(name)
      if (doc) out.push(cleanDoc(doc) ?? '')
      out.push(reindent(t.startsWith('export ') ? t : `export ${t}`), '')
    }
  }
  const render = (v, indent) => {
    const head = indent ? 'export ' : 'export declare '
    const text = v.text.replace(/^(?:export )?(?:declare )?/, head)
    const lines = []
    const doc = v.doc && cleanDoc(v.doc, indent)
    if (doc) lines.push(doc)
    lines.push(reindent(text, indent))
    return lines.join('\n')
  }
  for (let i = 0; i < ENTRIES.length;) {
    const { namespace, doc } = ENTRIES[i]
    let j = i
    while (j < ENTRIES.length && ENTRIES[j].namespace === namespace) j++
    const picked = []
    for (const entry of ENTRIES.slice(i, j)) {
      const byName = values.get(entry.file)
      if (!byName) throw new Error(`lib typings: tsc emitted nothing for ${entry.file}`)
      for (const name of entry.exports) {
        const v = byName.get(name)
        if (!v) throw new Error(`lib typings: ${entry.file} declares no ${name}`)
        picked.push(v)
      }
    }
    writeTypes(picked.map((v) => v.text).join('\n'))
    if (namespace) {
      if (doc) out.push(`/** ${doc} */`)
      out.push(`export declare namespace ${namespace} {`, picked.map((v) => render(v, '  ')).join('\n'), '}', '')
    } else {
      for (const v of picked) out.push(render(v, ''), '')
    }
    i = j
  }
  return out.join('\n')
}

/** The names index.d.ts declares outside the generated lib section. */
function declaredElsewhere(dts) {
  const { before, after } = split(dts)
  return new Set(
    [
      ...(before + after).matchAll(/^export (?:declare )?(?:type|interface|class|function|const|namespace) (\w+)/gm),
    ].map((m) => m[1]),
  )
}

/** index.d.ts as {before (through LIB_MARKER), section, after (from RUST_MARKER)}. */
function split(dts) {
  const lib = dts.indexOf(LIB_MARKER)
  const rust = dts.indexOf(RUST_MARKER)
  if (lib < 0 || rust < lib) throw new Error('lib typings: index.d.ts needs its two marker lines, the lib one first')
  return {
    before: dts.slice(0, lib + LIB_MARKER.length),
    section: dts.slice(lib + LIB_MARKER.length, rust),
    after: dts.slice(rust),
  }
}

/**
 * index.d.ts with its lib section generated from lib/ as it is now: `{dts, errors}`, with tsc's type
 * errors over lib/ (null when none).
 */
function render(dts = fs.readFileSync(DTS, 'utf8')) {
  const { before, after } = split(dts)
  const { files, errors } = emit()
  return { dts: `${before}\n${generate(declaredElsewhere(dts), files)}\n${after}`, errors }
}

/**
 * Writes index.d.ts until it no longer changes. lib/ is type-checked against index.d.ts (through
 * lib/torch.js), so a declaration new in lib/ is a type error where lib/ uses it through the API until
 * the section has it: each pass writes what tsc emitted, and the last must be free of errors and the same
 * as the one before.
 */
function write() {
  let current = fs.readFileSync(DTS, 'utf8')
  for (let pass = 1; pass <= 4; pass++) {
    const { dts, errors } = render(current)
    if (dts === current && errors === null) return
    if (dts === current) throw new Error(`lib typings: tsc reports type errors in lib/:\n${errors}`)
    fs.writeFileSync(DTS, dts)
    current = dts
  }
  throw new Error('lib typings: index.d.ts still changes after 4 passes')
}

module.exports = { render, split, emit, statements, LIB_MARKER, ENTRIES }

if (require.main === module) {
  write()
  console.log('wrote index.d.ts (the JS layer, from lib/)')
}

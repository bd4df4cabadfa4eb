'use strict'
// What tools/fuzz.js calls, and with what. A generated call is JavaScript *source text*
// ({label, setup, call}), never a live value: children compile it, and a finding prints it
// verbatim as its reproduction. Setup lines (`const a0 = ...`) must not throw by themselves,
// so anything thrown from the call line comes from torch-node or from a trap the setup laid.
const fc = require('fast-check')

// ---------------------------------------------------------------------------------------
// Helpers the generated code calls. They are stringified (into children and reproductions),
// so they may use only their arguments, each other and the free names in FREE_NAMES.
// ---------------------------------------------------------------------------------------
const FREE_NAMES = ['torch', 'fs', 'FIX_DIR', 'TMP', 'SENTINELS']
/* global fs, FIX_DIR, SENTINELS -- FREE_NAMES the helpers use, defined where they run */

// Recognised by identity: an exception our own trap threw may propagate unchanged.
function boom() {
  const e = new Error('fuzz: hostile trap')
  SENTINELS.add(e)
  throw e
}
function disposed(x) {
  x.dispose()
  return x
}
function bytes(kind) {
  const b = fs.readFileSync(FIX_DIR + '/mlp_traced.pt')
  return kind === 'whole' ? b : kind === 'half' ? b.subarray(0, b.length >> 1) : new Uint8Array(b.length).fill(7)
}
// Whatever an action throws (resize of a buffer already detached, ...) is ours, not torch-node's.
function run(act) {
  try {
    act()
  } catch (e) {
    if (e !== null && typeof e === 'object') SENTINELS.add(e)
    throw e
  }
}
function withGetter(obj, key, act) {
  const value = obj[key]
  Object.defineProperty(obj, key, {
    get() {
      run(act)
      return value
    },
    enumerable: true,
    configurable: true,
  })
  return obj
}
// A Proxy whose every trap throws (the handler is itself a Proxy answering `boom` to any trap).
function throwing(target) {
  return new Proxy(target, new Proxy({}, { get: () => boom }))
}
// A Proxy whose every trap first runs `act` (dispose, detach, ...) and then behaves normally.
function acting(target, act) {
  return new Proxy(
    target,
    new Proxy(
      {},
      {
        get:
          (_, trap) =>
          (...args) => {
            run(act)
            return Reflect[trap](...args)
          },
      },
    ),
  )
}
function detach(view) {
  structuredClone(view.buffer, { transfer: [view.buffer] })
}
function detachedView() {
  const v = new Float32Array(6)
  detach(v)
  return v
}
function detachedBuffer() {
  return detachedView().buffer
}
// Built iteratively: a recursive builder would itself overflow before torch-node is reached.
function deep(depth) {
  let a = [1]
  for (let i = 0; i < depth; i++) a = [a]
  return a
}
function holes(n) {
  const a = new Array(n)
  a[n >> 1] = 1
  return a
}
function long(n) {
  return new Array(n).fill(1)
}
// Aborted while the call is under way rather than before it starts.
function abortSoon() {
  const c = new AbortController()
  setImmediate(() => c.abort())
  return c.signal
}
const HELPERS = {
  abortSoon,
  boom,
  run,
  disposed,
  bytes,
  withGetter,
  throwing,
  acting,
  detach,
  detachedView,
  detachedBuffer,
  deep,
  holes,
  long,
}

// ---------------------------------------------------------------------------------------
// Value pools (source text)
// ---------------------------------------------------------------------------------------
const pick = (...xs) => fc.constantFrom(...xs)
const NUMS = [
  'NaN',
  'Infinity',
  '-Infinity',
  '-0',
  '0.5',
  '-1',
  '-(2**53)',
  '2**53',
  '2**63',
  '2**64',
  '1e308',
  '-1e308',
  'Number.MIN_VALUE',
  'Number.MAX_SAFE_INTEGER',
]
// Fine as dims, indices and scalars; as sizes or counts they could make real multi-GB tensors.
const MID = ['2**31', '2**32', '-(2**31)', '2**32 + 1']
// Receivers and tensor arguments, written out in full so that a reproduction needs no helper.
const TENSORS = [
  'torch.tensor([[1, -2, 3], [0.5, NaN, -0]])',
  'torch.rand([2, 4])',
  'torch.tensor([[1n, -2n], [3n, 4n]])',
  'torch.tensor([true, false, true])',
  'torch.tensor(new Uint8Array([0, 255, 7, 1]), { shape: [2, 2] })',
  "torch.ones([2, 2], { dtype: 'float16' })",
  "torch.tensor(2.5, { dtype: 'float64' })",
  'torch.zeros([0, 3])',
  "torch.arange(12, { dtype: 'float32' }).reshape(3, 4).t().slice(0, 1, 3)",
  'torch.ones([1, 3]).expand(4, 3)',
  'torch.fromBuffer(new Float32Array([1, 2, 3, 4, 5, 6]), [2, 3])',
  'torch.fromBuffer(new SharedArrayBuffer(24), [6])',
  'torch.rand([3], { requiresGrad: true })',
  'disposed(torch.ones([2, 2]))',
]
const MLP = "new torch.ScriptModule(FIX_DIR + '/mlp_traced.pt')"
const IVALUES = "new torch.ScriptModule(FIX_DIR + '/ivalues_scripted.pt')"
const MODULES = [MLP, MLP, IVALUES, IVALUES, `disposed(${MLP})`]
const JUNK = [
  'undefined',
  'null',
  'true',
  'false',
  '1n',
  '-1n',
  '2n ** 64n',
  "Symbol('s')",
  '() => 1',
  "''",
  "'cuda'",
  "'cuda:1'",
  "'cpu'",
  "'float32'",
  "'int64'",
  "'bool'",
  "'float16'",
  "'garbage'",
  "'\\u0000'",
  "'x'.repeat(100000)",
  '{}',
  '[]',
  'Object.create(null)',
  'new Date(0)',
  'new Map([[1, 2]])',
  'new Set([1])',
  '/re/',
  'Promise.resolve(1)',
  "new Error('e')",
  'torch',
  'torch.Tensor',
  'torch.Tensor.prototype',
  'Object.create(torch.Tensor.prototype)',
  'Object.create(torch.ScriptModule.prototype)',
  'globalThis',
  MLP,
  "{ valueOf: () => 2, toString: () => 'float32' }",
  'throwing({})',
  'throwing([])',
  'throwing(recv)',
  'acting([1, 2], () => recv.dispose())',
  'disposed(torch.ones([2]))',
  'deep(10000)',
  'holes(3)',
  'long(100000)',
]
const BUFFERS = [
  'new Uint8Array(3)',
  'new Float32Array([1, 2, 3, 4, 5, 6])',
  'new Float64Array(0)',
  'new BigInt64Array(2)',
  'new Int16Array(5).subarray(1)',
  'new Uint8ClampedArray(4)',
  'new BigUint64Array(1)',
  'new Uint32Array(2)',
  'new ArrayBuffer(3)',
  'new ArrayBuffer(0)',
  'new ArrayBuffer(8, { maxByteLength: 64 })',
  'new SharedArrayBuffer(24)',
  'new Float32Array(new SharedArrayBuffer(24))',
  'new DataView(new ArrayBuffer(8))',
  'detachedView()',
  'detachedBuffer()',
  'Buffer.from([1, 2, 3])',
  'new Uint8Array(new ArrayBuffer(9), 1, 8)',
  'new Float32Array(new ArrayBuffer(16, { maxByteLength: 64 }))',
  'buf',
]
const DTYPES = [
  "'float32'",
  "'float64'",
  "'float16'",
  "'bfloat16'",
  "'int8'",
  "'uint8'",
  "'int16'",
  "'int32'",
  "'int64'",
  "'bool'",
  "'complex64'",
  "'float'",
  "'Float32'",
  "'qint8'",
  "'uint32'",
  "'float8_e4m3fn'",
  "''",
]
const DEVICES = [
  "'cpu'",
  "'cuda'",
  "'cuda:0'",
  "'cuda:-1'",
  "'cuda:99999999999999999999'",
  "'cpu:0'",
  "'meta'",
  "'mps'",
  "'CPU'",
  "'cuda:'",
  "'cuda:0x1'",
  "':'",
]
// Run inside getters and traps, i.e. while torch-node is reading that argument.
const ACTS = [
  'boom()',
  'recv.dispose()',
  'recv.dispose()',
  'x.dispose()',
  'detach(buf)',
  'detach(buf)',
  'buf.buffer.resize(0)',
  'globalThis.gc?.()',
]
const METHODS = [
  "'forward'",
  "'echo_tensor'",
  "'echo_list_int'",
  "'echo_dict_str_tensor'",
  "'echo_nested'",
  "'echo_optional'",
  "'sum_list'",
  "'half'",
  "'int_only'",
  "'type_of_number'",
  "'nope'",
  "''",
  "'__init__'",
]
const FNS = [
  '() => recv',
  '() => [recv, { y: x }]',
  '() => torch.ones([2]).add(1)',
  '() => boom()',
  'async () => recv',
  '() => Promise.resolve(recv)',
  '() => throwing({})',
  "() => withGetter({ a: recv }, 'a', () => recv.dispose())",
  '() => torch.tidy(() => x)',
  '() => { recv.dispose(); return recv }',
  '() => deep(10000)',
  '() => torch.tidy(() => boom())',
  '() => ({ then: 1 })',
  '() => ({ get then() { return boom() } })',
  '() => torch.tidy(() => { x.dispose(); return x })',
  '() => acting([recv], () => recv.dispose())',
]
// The `{signal}` options of forward/runMethod/load: real, odd, fake and trapped signals.
const SIGNALS = [
  'AbortSignal.abort()',
  "AbortSignal.abort(Symbol('why'))",
  'new AbortController().signal',
  'abortSoon()',
  'AbortSignal.timeout(0)',
  'throwing(new AbortController().signal)',
  '{ aborted: true }',
  'null',
  'acting(AbortSignal.abort(), () => recv.dispose())',
]
const PATHS = ["TMP + '/m.pt'", 'TMP', "'/nonexistent-dir/m.pt'", "''", "'\\u0000'", "TMP + '/' + 'x'.repeat(5000)"]
const SOURCES = [
  "FIX_DIR + '/mlp_traced.pt'",
  "FIX_DIR + '/ivalues_scripted.pt'",
  "bytes('whole')",
  "bytes('half')",
  "bytes('junk')",
  'FIX_DIR',
  "'missing.pt'",
  'new Uint8Array(0)',
  "bytes('whole').buffer",
  'detachedView()',
]
const THREADS = ['1', '2', '0', '-1', 'NaN', 'Infinity', '2**31', '2**53', '1e308', '1025', "'4'", 'undefined']

// ---------------------------------------------------------------------------------------
// Arbitraries
// ---------------------------------------------------------------------------------------
const list = (xs) => `[${xs.join(', ')}]`
const small = fc.integer({ min: -3, max: 3 }).map(String)
const count = fc.oneof({ weight: 4, arbitrary: fc.integer({ min: 0, max: 4 }).map(String) }, pick(...NUMS))
const dim = fc.oneof({ weight: 4, arbitrary: small }, pick(...NUMS, ...MID))
const tensorRef = fc.oneof(pick('recv', 'x'), pick(...TENSORS))
const optsObj = (entries) =>
  fc
    .array(fc.oneof(...entries), { maxLength: 3 })
    .map((kv) => (kv.length ? `{ ${kv.map(([k, v]) => `${k}: ${v}`).join(', ')} }` : '{}'))

// Wraps a value so that reading it runs a hostile action (or throws) mid-call.
const trapped = (inner) =>
  fc
    .tuple(inner, pick(...ACTS), fc.nat(2), pick('getter', 'getter', 'throwing', 'acting'))
    .map(([src, act, i, how]) => {
      const box = /^[[{]/.test(src) ? src : `[${src}]`
      if (how === 'throwing') return `throwing(${box})`
      if (how === 'acting') return `acting(${box}, () => ${act})`
      const key = box.startsWith('[') ? i : `'${(/^\{\s*(\w+):/.exec(box) || [0, 'dtype'])[1]}'`
      return `withGetter(${box}, ${key}, () => ${act})`
    })

// Junk of any shape; `nums` decides whether it may hold numbers too big to be sizes.
const junk = (nums) =>
  fc.letrec((tie) => ({
    any: fc.oneof({ depthSize: 'small' }, tie('leaf'), tie('array'), tie('object'), trapped(tie('leaf'))),
    leaf: fc.oneof(pick(...JUNK), pick(...nums), pick(...BUFFERS), tensorRef, small),
    array: fc.array(tie('any'), { maxLength: 3 }).map(list),
    object: optsObj([fc.tuple(pick('dtype', 'device', 'shape', 'a', '0', 'requiresGrad'), tie('any'))]),
  })).any
const any = junk([...NUMS, ...MID])
const anySize = junk(NUMS)

// A slot is mostly well-formed (to get deep into the code), sometimes trapped, sometimes junk.
const slot = (plausible, other = any) =>
  fc.oneof(
    { weight: 4, arbitrary: plausible },
    { weight: 1, arbitrary: trapped(plausible) },
    { weight: 2, arbitrary: other },
  )

const ivalue = fc.letrec((tie) => ({
  v: fc.oneof({ depthSize: 'small' }, tie('leaf'), tie('list'), tie('dict'), tie('map'), trapped(tie('leaf'))),
  leaf: fc.oneof(
    tensorRef,
    small,
    pick('2.5', 'true', 'null', 'undefined', '1n', "'s'", ...NUMS),
    pick(...SIGNALS).map((sig) => `{ signal: ${sig} }`),
  ),
  list: fc.array(tie('v'), { maxLength: 3 }).map(list),
  dict: optsObj([fc.tuple(pick('a', 'b', "'0'"), tie('v'))]),
  map: fc
    .array(fc.tuple(fc.oneof(small, pick("'k'"), tensorRef), tie('v')), { maxLength: 2 })
    .map((kv) => `new Map(${list(kv.map(([k, v]) => `[${k}, ${v}]`))})`),
})).v

const nested = fc.letrec((tie) => ({
  n: fc.oneof({ depthSize: 'small' }, tie('leaf'), tie('arr')),
  leaf: fc.oneof(small, pick('2.5', 'true', 'false', '1n', '2n ** 70n', ...NUMS)),
  arr: fc.array(tie('n'), { maxLength: 3 }).map(list),
})).n

const S = {
  any,
  dim: slot(dim),
  count: slot(count, anySize),
  bound: slot(fc.oneof(small, pick('0.5', '2.5', ...NUMS)), anySize),
  dims: slot(fc.oneof(dim, fc.array(dim, { maxLength: 3 }).map(list))),
  shape: slot(
    fc.oneof(
      fc.array(count, { maxLength: 4 }).map(list),
      count,
      pick('[2**32, 2**32]', '[2**62, 4]', '[2**31, 2**31, 2**31]', '[-1, 2]', 'new Array(3)', '[2n, 3n]'),
    ),
    anySize,
  ),
  strides: slot(fc.array(dim, { maxLength: 4 }).map(list)),
  splits: slot(fc.oneof(count, fc.array(count, { maxLength: 3 }).map(list)), anySize),
  operand: slot(fc.oneof(tensorRef, small, pick(...NUMS, ...MID))),
  tensor: slot(tensorRef),
  tensors: slot(fc.array(tensorRef, { maxLength: 3 }).map(list)),
  dimOrTensor: slot(fc.oneof(dim, tensorRef)),
  bool: slot(pick('true', 'false')),
  scalar: slot(fc.oneof(small, pick('true', 'false', '0.25', ...NUMS, ...MID))),
  device: slot(pick(...DEVICES)),
  target: slot(
    fc.oneof(
      pick(...DTYPES),
      pick(...DEVICES),
      optsObj([fc.tuple(pick('dtype'), pick(...DTYPES)), fc.tuple(pick('device'), pick(...DEVICES))]),
    ),
  ),
  opts: slot(
    fc.oneof(
      pick('true', 'false'),
      optsObj([
        fc.tuple(pick('dtype'), pick(...DTYPES)),
        fc.tuple(pick('device'), pick(...DEVICES)),
        fc.tuple(pick('requiresGrad'), pick('true', 'false', '1')),
        fc.tuple(pick('shape'), fc.array(count, { maxLength: 3 }).map(list)),
        fc.tuple(pick('bogus'), small),
      ]),
    ),
    anySize,
  ),
  // The buffer pulled away while fromBuffer reads its options: the case its docs warn about.
  bufOpts: slot(
    fc.oneof(
      optsObj([
        fc.tuple(pick('dtype'), pick(...DTYPES)),
        fc.tuple(pick('byteOffset'), fc.oneof(small, pick('4', '8', '24', ...NUMS, ...MID))),
      ]),
      pick(
        "withGetter({ dtype: 'float32' }, 'dtype', () => detach(buf))",
        "withGetter({ byteOffset: 4 }, 'byteOffset', () => buf.buffer.resize(0))",
      ),
    ),
  ),
  buffer: slot(fc.oneof(pick('buf'), pick(...BUFFERS))),
  data: slot(
    fc.oneof(
      nested,
      tensorRef,
      pick(...BUFFERS),
      pick('deep(10000)', 'deep(64)', 'holes(4)', 'holes(1e6)', 'long(100000)', '[[1, 2], [3]]', '[1, true, 1n]'),
    ),
    anySize,
  ),
  ivalue: slot(ivalue),
  fn: slot(pick(...FNS)),
  path: slot(pick(...PATHS)),
  source: slot(pick(...SOURCES)),
  mopts: slot(
    optsObj([
      fc.tuple(pick('device'), pick(...DEVICES)),
      fc.tuple(pick('signal'), pick(...SIGNALS)),
      fc.tuple(pick('maxBytes'), fc.oneof(small, pick('100', ...NUMS, ...MID))),
    ]),
  ),
  method: slot(pick(...METHODS)),
  threads: pick(...THREADS),
}

// Argument specs: slot names; `...x` is variadic (several x, or one array of them).
const UNARY =
  'exp log sqrt abs neg relu sigmoid tanh round floor ceil zero_ cpu isContiguous storage t clone ' +
  'contiguous detach asTypedArray toArray toTypedArray item toString numel dispose'
const BINARY = 'add sub mul div pow eq ne lt le gt ge add_ sub_ mul_ div_ pow_ copy_'
const TENSOR = {
  ...Object.fromEntries(UNARY.split(' ').map((n) => [n, ''])),
  ...Object.fromEntries(BINARY.split(' ').map((n) => [n, 'operand'])),
  matmul: 'tensor',
  where: 'tensor operand',
  clamp: 'scalar scalar',
  clamp_: 'scalar scalar',
  fill_: 'scalar',
  sum: 'dims bool',
  mean: 'dims bool',
  max: 'dimOrTensor bool',
  min: 'dimOrTensor bool',
  argmax: 'dim bool',
  argmin: 'dim bool',
  sort: 'dim bool',
  to: 'target',
  cuda: 'device',
  softmax: 'dim',
  logSoftmax: 'dim',
  topk: 'count dim',
  sharesStorage: 'tensor',
  view: '...count',
  reshape: '...count',
  expand: '...count',
  permute: '...dim',
  transpose: 'dim dim',
  narrow: 'dim dim count',
  select: 'dim dim',
  slice: 'dim dim dim dim',
  squeeze: 'dim',
  unsqueeze: 'dim',
  flatten: 'dim dim',
  unflatten: 'dim shape',
  chunk: 'count dim',
  split: 'splits dim',
  diagonal: 'dim dim dim',
  asStrided: 'shape strides count',
  maskedSelect: 'tensor',
  indexSelect: 'dim tensor',
  backward: 'tensor',
  requiresGrad_: 'bool',
}
const TENSOR_GETTERS = [
  'shape',
  'dtype',
  'device',
  'ndim',
  'requiresGrad',
  'grad',
  'strides',
  'storageOffset',
  'isDisposed',
]
const MODULE = {
  forward: '...ivalue',
  forwardSync: '...ivalue',
  runMethod: 'method ...ivalue',
  runMethodSync: 'method ...ivalue',
  methodNames: '',
  namedParameters: '',
  parameters: '',
  numParameters: '',
  to: 'device',
  eval: '',
  train: '',
  save: 'path',
  dispose: '',
}
const MODULE_GETTERS = ['isTraining', 'device', 'isDisposed']
const FACTORY = 'shape opts'
const TOP = {
  tensor: 'data opts',
  ones: FACTORY,
  zeros: FACTORY,
  empty: FACTORY,
  rand: FACTORY,
  randn: FACTORY,
  full: 'shape scalar opts',
  eye: 'count count opts',
  arange: 'bound bound bound opts',
  linspace: 'bound bound count opts',
  randint: 'bound bound shape opts',
  fromBuffer: 'buffer shape bufOpts',
  cat: 'tensors dim',
  stack: 'tensors dim',
  where: 'tensor operand operand',
  tidy: 'fn',
  manualSeed: 'scalar',
  setNumThreads: 'threads',
  getNumThreads: '',
  setNumInteropThreads: 'threads',
  memory: '',
  'cuda.isAvailable': '',
  'cuda.deviceCount': '',
  'cpu.capabilities': '',
  'cpu.hasNativeBf16': '',
  loadLibrary: 'source',
}

// The argument list: all slots, or fewer (missing arguments), or more (extra junk).
function args(spec) {
  const slots = spec.split(' ').filter(Boolean)
  const parts = slots.map((s) =>
    s.startsWith('...')
      ? fc.oneof(
          fc.array(S[s.slice(3)], { maxLength: 4 }),
          S.shape.map((x) => [x]),
        )
      : S[s].map((x) => [x]),
  )
  return fc
    .tuple(
      fc.tuple(...parts),
      fc.nat(slots.length),
      fc.array(anySize, { maxLength: 2 }),
      pick('all', 'all', 'all', 'fewer', 'more'),
    )
    .map(([ps, keep, extra, how]) => {
      const all = ps.flat()
      return how === 'fewer' ? all.slice(0, keep) : how === 'more' ? [...all, ...extra] : all
    })
}

const wrongThis = fc.oneof(any, pick('{}', MLP, TENSORS[0]))
const entries = (o) => Object.entries(o)
function calls() {
  const tensorCall = fc.tuple(pick(...entries(TENSOR)), pick(...TENSORS), fc.nat(9)).chain(([[name, spec], recv, w]) =>
    w === 0
      ? fc.tuple(wrongThis, args(spec)).map(([self, a]) => ({
          label: `Tensor#${name} (wrong this)`,
          recv,
          args: [self, ...a],
          call: (xs) => `torch.Tensor.prototype.${name}.call(${xs})`,
        }))
      : args(spec).map((a) => ({ label: `Tensor#${name}`, recv, args: a, call: (xs) => `recv.${name}(${xs})` })),
  )
  const getter = (Class, names, recvs) =>
    fc.tuple(pick(...names), pick(...recvs), fc.nat(3), wrongThis).map(([name, recv, w, self]) =>
      w === 0
        ? {
            label: `${Class}#${name} (wrong this)`,
            recv,
            args: [self],
            call: (xs) => `Object.getOwnPropertyDescriptor(torch.${Class}.prototype, '${name}').get.call(${xs})`,
          }
        : { label: `${Class}#${name}`, recv, args: [], call: () => `recv.${name}` },
    )
  const moduleCall = fc.tuple(pick(...entries(MODULE)), pick(...MODULES), fc.nat(9)).chain(([[name, spec], recv, w]) =>
    fc.tuple(wrongThis, args(spec)).map(([self, a]) =>
      w === 0
        ? {
            label: `ScriptModule#${name} (wrong this)`,
            recv,
            args: [self, ...a],
            call: (xs) => `torch.ScriptModule.prototype.${name}.call(${xs})`,
          }
        : { label: `ScriptModule#${name}`, recv, args: a, call: (xs) => `recv.${name}(${xs})` },
    ),
  )
  const topCall = pick(...entries(TOP)).chain(([name, spec]) =>
    args(spec).map((a) => ({ label: `torch.${name}`, args: a, call: (xs) => `torch.${name}(${xs})` })),
  )
  const special = fc
    .tuple(
      pick(
        'new torch.ScriptModule',
        'torch.ScriptModule.load',
        'new torch.Tensor',
        'torch.Tensor',
        'String',
        'recv[Symbol.dispose]',
        'torch.ScriptModule.load.call',
        'new torch.ScriptModule.load',
        'new torch.AOTModule',
        'torch.AOTModule.load',
        'torch.AOTModule',
      ),
      args('source mopts'),
      any,
    )
    .map(([fn, a, self]) => ({
      label: fn,
      args: fn.endsWith('.call') ? [self, ...a] : fn === 'String' ? ['recv'] : a,
      call: (xs) => `${fn}(${xs})`,
    }))
  return fc
    .oneof(
      { weight: 8, arbitrary: tensorCall },
      { weight: 2, arbitrary: getter('Tensor', TENSOR_GETTERS, TENSORS) },
      { weight: 4, arbitrary: moduleCall },
      { weight: 1, arbitrary: getter('ScriptModule', MODULE_GETTERS, MODULES) },
      { weight: 5, arbitrary: topCall },
      { weight: 1, arbitrary: special },
    )
    .chain((c) => pick(...TENSORS).map((x) => finish(c, x)))
}

// Declares only the context variables the call mentions, so a reproduction stays short.
function finish({ label, recv = TENSORS[0], args: a, call }, x) {
  const names = a.map((_, i) => `a${i}`)
  const line = call(names.join(', '))
  const text = a.join('\n') + '\n' + line
  const setup = []
  if (/\brecv\b/.test(text)) setup.push(`const recv = ${recv}`)
  if (/(?<!')\bx\b(?!')/.test(text)) setup.push(`const x = ${x}`)
  if (/\bbuf\b/.test(text)) setup.push('const buf = new Float32Array(new ArrayBuffer(24, { maxByteLength: 64 }))')
  a.forEach((src, i) => setup.push(`const a${i} = ${src}`))
  return { label, setup, call: line }
}

/** The helper definitions `text` uses, transitively, as source. */
function helperSource(text) {
  const used = new Set()
  let grew = true
  while (grew) {
    grew = false
    for (const name of Object.keys(HELPERS)) {
      if (used.has(name)) continue
      const hay = text + [...used].map((n) => HELPERS[n].toString()).join('\n')
      if (new RegExp(`\\b${name}\\b`).test(hay)) {
        used.add(name)
        grew = true
      }
    }
  }
  return Object.keys(HELPERS)
    .filter((n) => used.has(n))
    .map((n) => HELPERS[n].toString())
    .join('\n')
}

module.exports = { calls, HELPERS, FREE_NAMES, helperSource, TENSOR, TENSOR_GETTERS, MODULE, MODULE_GETTERS, TOP }

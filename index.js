'use strict'
// Entry point: loads the native addon (lib/addon.js) and adds the one layer Rust cannot provide.
// Each piece below says why it is JS; everything else is the native export itself.
// - Errors are thrown from JS. A native export never throws: it returns the sentinel
//   `native._failed` and stashes its error (src/napi/outcome.rs says why: a throw from native code
//   can kill the process through Node's GC-time finalizer path). The wrappers below see the
//   sentinel and throw the error, with a stack that starts at the caller.
// - Variadic arguments (`view(2, 3)`, `forward(a, b)`), receiver checks, the `Tensor` and
//   module constructors, util.inspect and Symbol.dispose; the tokenizer's Encoding objects.
// - lib/ holds what is composed from the public API (vision, ragged, Batcher) and the shared
//   error helpers (lib/errors.js).
const util = require('node:util')
const { markAsUntransferable } = require('node:worker_threads')
const { loadAddon } = require('./lib/addon')
const { codedError, describe } = require('./lib/errors')
const { encodings, isColumns } = require('./lib/text/encoding')

const native = loadAddon()
// process.exit() (or the end) with a step running: the main thread's `exit` event comes before
// C's exit(), whose handlers destroy libtorch's statics under the step (src/exports.rs). A
// worker's exit leaves the process, and the executor, running.
if (require('node:worker_threads').isMainThread) process.on('exit', () => native._drainAtExit())
const FAILED = native._failed
const takeError = native._takeError

/** Throws the error a native export just reported by returning the sentinel. */
function raise(caller) {
  const [code, detail] = takeError()
  if (code === null) throw detail // what the caller's own code threw (a getter, a Proxy trap)
  throw codedError(code, detail, caller)
}

// V8's "Illegal invocation" (a method called on an object made with
// Object.create(Tensor.prototype), which passes the instanceof check) is thrown by V8 before
// the native method runs, so only JS can give it our code.
// (Arguments never throw natively: src/napi/convert.rs reads them inside the export.)
function recode(e, where) {
  if (e instanceof TypeError && e.message === 'Illegal invocation' && e.code === undefined) {
    e.message = `${where}: called on an object that is not a native ${where.split('.')[0]} (made with Object.create?)`
    e.code = 'InvalidArg'
  }
  return e
}

/** Calls a native export as `caller` (the public function the user called). */
function call(impl, self, args, caller, where) {
  let r
  try {
    r = Reflect.apply(impl, self, args)
  } catch (e) {
    throw recode(e, where)
  }
  if (r === FAILED) raise(caller)
  return r
}

/**
 * The public form of a native function or method: `adapt` maps the JS arguments to the native
 * ones; `Class` makes it a method that checks its receiver first, so that a wrong `this` gets a
 * coded error naming the class instead of the uncoded one V8 or napi-rs would throw.
 */
function wrap(impl, name, where, { adapt, Class, result } = {}) {
  const wrapper = {
    [name]: function (...args) {
      if (new.target) throw codedError('InvalidArg', `${where} is not a constructor`, wrapper)
      if (Class && !(this instanceof Class)) {
        throw codedError('InvalidArg', `${where}: called on ${describe(this)}; call it on a ${Class.name}`, wrapper)
      }
      const r = call(impl, this, adapt ? adapt(args) : args, wrapper, where)
      return result ? result(r) : r
    },
  }[name]
  return wrapper
}

// Rest parameters: napi-rs declares a fixed parameter list, so variadic calls are packed here.
// Shapes and dims as an array or as arguments, as PyTorch takes them: view(2, 3), view([2, 3]).
const sizes = (args) => [args.length === 1 && Array.isArray(args[0]) ? args[0] : args]
// Model inputs as rest parameters; the native side reads one array.
const inputs = (args) => [args]
const methodInputs = ([method, ...rest]) => [method, rest]
const ADAPT = {
  __proto__: null,
  view: sizes,
  reshape: sizes,
  permute: sizes,
  expand: sizes,
  forward: inputs,
  forwardSync: inputs,
  runMethod: methodInputs,
  runMethodSync: methodInputs,
}

/**
 * Puts wrapped methods and getters of the native class `Native` on the prototype `Class` shares;
 * `results` maps a method's native result to the public one.
 */
function wrapPrototype(Native, Class, results = {}) {
  const proto = Native.prototype
  for (const name of Object.getOwnPropertyNames(proto)) {
    if (name === 'constructor') continue
    const desc = Object.getOwnPropertyDescriptor(proto, name)
    const where = `${Class.name}.${name}`
    if (typeof desc.value === 'function') {
      // Own keys only: `results.toString` would otherwise be Object.prototype's.
      const result = Object.hasOwn(results, name) ? results[name] : undefined
      desc.value = wrap(desc.value, name, where, { adapt: ADAPT[name], Class, result })
    }
    if (desc.get) desc.get = wrap(desc.get, name, where, { Class })
    Object.defineProperty(proto, name, desc)
  }
  Class.prototype = proto
  Object.defineProperty(proto, 'constructor', { value: Class, writable: true, configurable: true })
  // `using t = torch.ones([2])` (explicit resource management, Node 24+) calls
  // `t[Symbol.dispose]()`; napi-rs cannot declare a symbol-named method from Rust.
  Object.defineProperty(proto, Symbol.dispose, {
    value: function dispose() {
      this.dispose()
    },
    writable: true,
    configurable: true,
  })
}

/**
 * Tensors come from factories (`torch.tensor`, `torch.ones`, `torch.fromBuffer`, ...). JS
 * because napi-rs's class without a constructor throws its own uncoded error, natively.
 */
function Tensor() {
  throw codedError(
    'InvalidArg',
    'new Tensor(): tensors are made with torch.tensor(data), torch.ones(shape), torch.fromBuffer(...), ...',
    Tensor,
  )
}
wrapPrototype(native.Tensor, Tensor)
// console.log(tensor) prints what Python prints; util.inspect.custom is a symbol-named method.
Tensor.prototype[util.inspect.custom] = function () {
  return this.toString()
}

/**
 * The public class of a native module class: `new Class(source, options)` loads synchronously
 * (the native `_open`), `Class.load(...)` on the executor. JS because a napi-rs constructor can
 * only fail by throwing from native code, and so that subclasses (`class M extends
 * ScriptModule`) get their own prototype.
 */
function moduleClass(Native, name) {
  const Class = {
    [name]: function (source, options) {
      if (!new.target)
        throw codedError('InvalidArg', `${name}: call it with \`new\`, or use \`await ${name}.load(...)\``, Class)
      const module = call(Native._open, null, [source, options], Class, name)
      if (new.target !== Class) Object.setPrototypeOf(module, new.target.prototype) // a subclass
      return module
    },
  }[name]
  wrapPrototype(Native, Class)
  Class.load = wrap(Native.load, 'load', `${name}.load`)
  return Class
}
/** `new ScriptModule('model.pt', {device: 'cuda'})`: a TorchScript module. */
const ScriptModule = moduleClass(native.ScriptModule, 'ScriptModule')
/** `new AOTModule('model.pt2')`: an AOTInductor package. */
const AOTModule = moduleClass(native.AOTModule, 'AOTModule')

// fromBuffer over a bare ArrayBuffer or SharedArrayBuffer: N-API 8 reads TypedArrays (and
// cannot see SharedArrayBuffers directly), so view the bytes; the dtype defaults to float32.
// Then the buffer is marked untransferable (a Node API N-API does not reach): transferring it
// (`postMessage(buf, [buf])`, `structuredClone` with transfer, `buf.transfer()` on 24+) would
// hand the memory the tensor reads to a new owner that may free it; marked, Node refuses the
// transfer (20: copies instead). Permanent for that buffer.
function fromBuffer(data, shape, options) {
  const bare =
    data instanceof ArrayBuffer || (typeof SharedArrayBuffer !== 'undefined' && data instanceof SharedArrayBuffer)
  let args = [data, shape, options]
  if (bare) {
    try {
      args = [new Uint8Array(data), shape, { dtype: 'float32', ...options }]
    } catch (e) {
      // a detached buffer (Node 20 has no `detached` property to ask first)
      throw codedError('InvalidArg', `fromBuffer: data: cannot view the buffer (${e.message})`, fromBuffer)
    }
  }
  const t = call(native.fromBuffer, null, args, fromBuffer, 'fromBuffer')
  markAsUntransferable(bare ? data : data.buffer)
  return t
}

/**
 * Runs `fn` and disposes every tensor created while it runs, except those it returns (a
 * Tensor, or arrays/objects of them). Synchronous functions only, as in tfjs. JS because `fn`
 * may throw, and its exception must reach the caller without a native rethrow.
 */
function tidy(fn) {
  if (typeof fn !== 'function') throw codedError('InvalidArg', `tidy: expected a function, got ${describe(fn)}`, tidy)
  const end = (keep) => call(native._tidyEnd, null, [keep], tidy, 'tidy')
  native._tidyBegin()
  let result
  let isPromise
  try {
    result = fn()
    isPromise =
      result !== null &&
      (typeof result === 'object' || typeof result === 'function') &&
      typeof result.then === 'function'
  } catch (e) {
    end(undefined) // the scope closes whatever fn (or a throwing `then` getter) did
    throw e
  }
  if (isPromise) {
    end(undefined)
    throw codedError('InvalidArg', 'tidy: the function returned a Promise; tidy only tracks synchronous work', tidy)
  }
  end(result)
  return result
}

/**
 * `torch.where(condition, x, y)`: x where condition holds, else y. The native form is the
 * method `x.where(condition, y)`; this free form turns a number `x` into a tensor first.
 */
function where(condition, x, y) {
  if (!(condition instanceof Tensor))
    throw codedError('InvalidArg', `where: condition: expected a bool Tensor, got ${describe(condition)}`, where)
  if (typeof x === 'number' || typeof x === 'boolean') x = exported.tensor(x)
  if (!(x instanceof Tensor))
    throw codedError('InvalidArg', `where: x: expected a Tensor or a number, got ${describe(x)}`, where)
  return x.where(condition, y)
}

/** Wraps every function of a native namespace object (`torch.cuda`, `torch.image`). */
function wrapNamespace(ns, prefix) {
  const out = {}
  for (const [name, value] of Object.entries(ns)) {
    out[name] = typeof value === 'function' ? wrap(value, name, `${prefix}${name}`) : value
  }
  return out
}

/**
 * `torch.text.Tokenizer`: made by its factories (`fromFile`, `fromJSON`), so, as `Tensor`, a JS
 * function whose `new` throws a coded error, with the native prototype's methods wrapped. JS
 * because napi-rs registers the class at the top level of the addon (as `_Tokenizer`), not in `text`.
 */
function Tokenizer() {
  throw codedError(
    'InvalidArg',
    'new Tokenizer(): tokenizers are made with Tokenizer.fromFile(path) or Tokenizer.fromJSON(json)',
    Tokenizer,
  )
}
// Encodings arrive as one batch's columns, made into objects by lib/text/encoding.js (it says why).
wrapPrototype(native._Tokenizer, Tokenizer, {
  encode: (columns) => encodings(columns)[0],
  encodeBatch: (promise) => promise.then((r) => (isColumns(r) ? encodings(r) : r)),
})
Tokenizer.fromFile = wrap(native._Tokenizer.fromFile, 'fromFile', 'Tokenizer.fromFile')
Tokenizer.fromJSON = wrap(native._Tokenizer.fromJSON, 'fromJSON', 'Tokenizer.fromJSON')

const INTERNAL = new Set([
  '_failed',
  '_takeError',
  '_tidyBegin',
  '_tidyEnd',
  '_loadTorchvisionOps',
  '_describe',
  '_drainAtExit',
  '_Tokenizer',
  '_CausalLM',
  '_GenerateRequest',
  '_Generation',
  '_SpeechModel',
  '_decodeAudio',
])
const exported = {}
for (const [name, value] of Object.entries(native)) {
  if (INTERNAL.has(name)) continue
  if (typeof value === 'function') exported[name] = wrap(value, name, name)
  else if (value !== null && typeof value === 'object') exported[name] = wrapNamespace(value, `${name}.`)
  else exported[name] = value
}
Object.assign(exported, { Tensor, ScriptModule, AOTModule, fromBuffer, tidy, where })
exported.text = { Tokenizer }

const loadTorchvisionOps = wrap(native._loadTorchvisionOps, 'loadOps', 'vision.loadOps')
/**
 * `torch.vision.loadOps(dir?)`: registers torchvision's ops (nms, roi_align, deform_conv2d, ...)
 * that scripted detection and segmentation models call, from the torchvision wheel beside
 * libtorch (or `dir`); idempotent, true when this call loaded them (crates/core/src/library.rs). Here, not in
 * lib/vision.js, because it wraps an internal native export.
 */
function loadOps(dir) {
  if (dir !== undefined && typeof dir !== 'string') {
    throw codedError('InvalidArg', `vision.loadOps: dir: expected a string, got ${describe(dir)}`, loadOps)
  }
  return loadTorchvisionOps(dir)
}

// Compositions of the public API (lib/): image classification, variable-length sequences,
// dynamic batching, the Open Inference Protocol (lib/oip/). Plain modules that read this API
// through lib/torch.js on first use (so the order of these lines does not matter to them); they
// raise errors with the same helpers (lib/errors.js).
exported.vision = { ...require('./lib/vision'), loadOps }
const { ragged, padSequence } = require('./lib/ragged')
Object.assign(exported, { ragged, padSequence }, require('./lib/batcher'))
// torch.text.SentenceEncoder (lib/text/): Tokenizer, the module classes and the Batcher composed.
exported.text.SentenceEncoder = require('./lib/text/sentence-encoder').SentenceEncoder
// torch.text.CausalLM (lib/text/causal-lm.js): the native decode loop behind an async iterator.
exported.text.CausalLM = require('./lib/text/causal-lm').CausalLM
// torch.audio.SpeechRecognitionPipeline (lib/audio/speech-recognition.js): Whisper speech to text.
exported.audio = {
  SpeechRecognitionPipeline: require('./lib/audio/speech-recognition').SpeechRecognitionPipeline,
  AudioClassificationPipeline: require('./lib/audio/audio-classification').AudioClassificationPipeline,
  TextToSpeechPipeline: require('./lib/audio/text-to-speech').TextToSpeechPipeline,
  ZeroShotAudioClassificationPipeline: require('./lib/audio/zero-shot-audio-classification')
    .ZeroShotAudioClassificationPipeline,
  encodeWav: require('./lib/audio/text-to-speech').encodeWav,
}
// torch.pipeline(task, folder) (lib/text/pipeline.js): transformers' pipeline() over exported folders.
exported.pipeline = require('./lib/text/pipeline').pipeline
Object.assign(exported, require('./lib/oip'))
// torch.serve (lib/serve/): OpenAI's API over causal-LM and sentence-encoder folders.
exported.serve = require('./lib/serve').serve
module.exports = exported

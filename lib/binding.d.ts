// The native addon's surface (torch-node.node), declared once: what lib/addon.js's
// `loadAddon()` returns and index.js wraps. Its public part has the signatures index.d.ts
// declares (generated from the Rust doc comments), with one difference: a native export never
// throws; a failing call returns the sentinel `_failed` and stashes its error for `_takeError`
// (src/napi/outcome.rs says why).
// Below, the internal exports (`skip_typescript` in Rust), which index.js keeps off the public API.
import type * as Public from '../index'

/** A native function as the addon exports it: its public signature, or `_failed`. */
type Failing<F> = F extends (...args: infer A) => infer R ? (...args: A) => R | Failed : F

/** The sentinel a failing native call returns (a frozen empty object, one per JS thread). */
export type Failed = { readonly __failed: unique symbol }

/** A native module class: the public class plus the synchronous loader `new Class()` runs. */
type NativeModuleClass<C extends abstract new (...args: any) => any> = C & {
  /** Loads synchronously: what `new ScriptModule(source, options)` runs (index.js). */
  _open(source: string | Uint8Array, options?: unknown): InstanceType<C> | Failed
}

/** The public functions and namespaces (every export index.d.ts declares), failing by sentinel. */
type PublicExports = {
  [K in keyof typeof Public]: (typeof Public)[K] extends (...args: any) => any
    ? Failing<(typeof Public)[K]>
    : (typeof Public)[K]
}

export interface Binding extends Omit<PublicExports, 'ScriptModule' | 'AOTModule'> {
  ScriptModule: NativeModuleClass<typeof Public.ScriptModule>
  AOTModule: NativeModuleClass<typeof Public.AOTModule>
  /** The sentinel every failing native call returns. */
  readonly _failed: Failed
  /** The error the last failing call stashed: `[code, message]`, or `[null, exception]` for what user code threw. */
  _takeError(): [string, string] | [null, unknown]
  /** Opens a `tidy` scope: tensors created until `_tidyEnd` are tracked. */
  _tidyBegin(): void
  /** Closes the scope, disposing its tensors except those in `keep`; the count disposed. */
  _tidyEnd(keep: unknown): number | Failed
  /** How `value` reads in an error message, given the class name JS read for it (`''`: none). */
  _describe(value: unknown, className: string): string
  /** `torch.vision.loadOps(dir)`: registers torchvision's ops; true when this call loaded them. */
  _loadTorchvisionOps(dir?: string): boolean | Failed
  /** `torch.text.Tokenizer`'s native class (index.js wraps its prototype). */
  readonly _Tokenizer: Function
  /** `torch.text.CausalLM`'s native half (lib/text/causal-lm.js). */
  readonly _CausalLM: {
    /** Loads a causal-LM folder with its `CausalLMOptions` (read natively). */
    load(folder: string, options: unknown): Promise<NativeCausalLM> | Failed
  }
  /** `torch.audio.SpeechRecognitionPipeline`'s native half (src/speech.rs). */
  readonly _SpeechModel: {
    /** Opens a python/export_whisper.py folder. */
    _open(folder: string): NativeSpeechModel | Failed
  }
}

/** A loaded Whisper model (src/speech.rs). */
export interface NativeSpeechModel {
  /** The rate its features are computed at (16000). */
  readonly samplingRate: number
  /** generation_config's `num_beams`. */
  readonly checkpointNumBeams: number
  /** Decodes `audio` and transcribes it: `{text, tokens, language}`. */
  _transcribe(
    audio: string | Uint8Array | Float32Array,
    language: string | undefined,
    task: string | undefined,
    maxNewTokens: number | undefined,
    maxDurationS: number | undefined,
    signal: AbortSignal | undefined,
  ): Promise<{ text: string; tokens: number[]; language: string | null }> | Failed
}

/** A loaded causal LM (src/causal_lm.rs): the core's engine behind it. */
export interface NativeCausalLM {
  /** The defaults and limits: `{maxContext, maxSequences, maxNewTokens, temperature, ...}`. */
  info(): any
  /** Reads and checks a prompt and its `CausalLMGenerateOptions`; starts nothing. */
  prepare(prompt: unknown, options: object): NativeGenerateRequest | Failed
  /** Starts a prepared generation (QueueFull past maxSequences + maxQueue); pieces go to `onPiece`. */
  start(request: NativeGenerateRequest, onPiece: (piece: unknown) => void): NativeGeneration | Failed
  /** `{active, queued, maxSequences, steps, rows, prefills, prefixCache?}`. */
  stats(): any
  /** Ends the waiting calls (Disposed), frees the model once the running ones end. */
  dispose(): void
}

/** A prompt and its options, read and checked (`NativeCausalLM.prepare`). */
export interface NativeGenerateRequest {}

/** One generation in flight: `abort()` ends it and frees its cache. */
export interface NativeGeneration {
  abort(): void
}

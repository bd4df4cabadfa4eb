/* torch-node typings. The part above the first marker line is written by hand; `npm run typings` keeps it and regenerates the two below it (from lib/'s JSDoc, then from the Rust doc comments). */

/** Nested arrays of numbers or booleans, as `toArray()` returns them. */
export type NestedArray = number | boolean | NestedArray[]
/** Data `tensor()` copies: a scalar, nested arrays (numbers, booleans or BigInts), a TypedArray, or a Tensor. */
export type TensorData = number | boolean | bigint | TensorData[] | ArrayBufferView | Tensor
/** The TypedArray a tensor's dtype reads into (see `toTypedArray`). */
export type TensorTypedArray = Float32Array | Float64Array | Int8Array | Uint8Array | Int16Array | Int32Array | BigInt64Array | Uint16Array
/**
 * A TorchScript value: Tensor; number (int or float, as the method's schema declares); boolean;
 * string; null (None); array (List or Tuple); plain object (Dict with string keys) or Map (other keys).
 */
export type IValue = Tensor | number | bigint | boolean | string | null | undefined | IValue[] | { [key: string]: IValue } | Map<IValue, IValue>

/** Sizes: an array of sizes (`[2, 3]`), or one size (`4`). Whole, non-negative numbers. */
export type Shape = readonly number[] | number
/** Sizes where one may be -1 (inferred from the element count): an array, or one size. */
export type Sizes = readonly number[] | number
/** A dimension index of a tensor: 0-based; negative counts from the end (`-1`: the last), as in PyTorch. */
export type Dim = number
/** One dimension or several; null (or leaving it out) means all of them. */
export type Dims = Dim | readonly Dim[] | null
/** The other side of an element-wise op: a Tensor, or a JS number or boolean, which acts as a Python scalar does (`intTensor.add(2)` stays int). */
export type Operand = Tensor | number | boolean
/** A fill value: a number, or a boolean (a bool tensor). */
export type Scalar = number | boolean
/** A factory's options, or `true` for `{ requiresGrad: true }` (torchjs' form: `ones([2], true)`). */
export type FactoryOptions = TensorOptions | boolean
/** What `Tensor.to` takes: a device, a dtype, or both in an object. */
export type ToTarget = Device | DType | ToOptions
/** A file: its path, or its bytes. */
export type Source = string | Uint8Array
/** Memory `fromBuffer` borrows (not copies). */
export type BufferData = ArrayBufferView | ArrayBuffer | SharedArrayBuffer
/** An image file format `torch.image.encode` writes. */
export type ImageFormat = 'png' | 'jpeg'

/** Element types (`tensor.dtype`, `{dtype}` options). */
export type DType = 'float32' | 'float64' | 'float16' | 'bfloat16' | 'int8' | 'uint8' | 'int16' | 'int32' | 'int64' | 'bool'
/** Devices: `'cpu'`, `'cuda'` (device 0) or `'cuda:N'`. */
export type Device = 'cpu' | 'cuda' | `cuda:${number}`
/** The `code` of every error torch-node throws (see docs/errors.md). */
export type ErrorCode =
  | 'InvalidArg' | 'ShapeMismatch' | 'DTypeMismatch' | 'DeviceUnavailable' | 'DeviceMismatch'
  | 'ModelLoadError' | 'MethodNotFound' | 'Disposed' | 'ForwardError' | 'Aborted' | 'InvalidImage' | 'LibraryLoadError' | 'Internal'
  | 'QueueFull' | 'Timeout' | 'Closed'
  | 'Unavailable' | 'RemoteError' | 'ModelNotFound' | 'MissingDependency'
/** An error thrown (or a promise rejected) by torch-node: `if ((e as TorchError).code === 'ShapeMismatch')`. */
export interface TorchError extends Error {
  code: ErrorCode
}

/**
 * Runs `fn` and disposes every tensor created while it runs, except those it returns (a Tensor,
 * or arrays, plain objects, Maps and Sets of them). Synchronous functions only: a function
 * returning a Promise is a type error (and `InvalidArg` at run time).
 */
export declare function tidy<T>(fn: () => T & (T extends PromiseLike<unknown> ? never : unknown)): T
/** `torch.where(condition, x, y)`: `x` where the bool `condition` holds, else `y`. */
export declare function where(condition: Tensor, x: Tensor, y: Tensor | number): Tensor
/** Options of an async call, given as its last argument: `await m.forward(x, { signal })`. */
export interface CallOptions {
  /** Aborting rejects with code `Aborted`: at once if the call has not started; a call already running finishes and its output is dropped. */
  signal: AbortSignal
}
/** `using t = torch.ones([2])` (Node 24+) disposes `t` at the end of the block; callable by hand on every line. */
export interface Tensor {
  /** Same as `dispose()`. */
  [Symbol.dispose](): void
}
/** `using m = new AOTModule(path)` (Node 24+) disposes `m` at the end of the block. */
export interface AOTModule {
  /** Same as `dispose()`: calls in flight finish first. */
  [Symbol.dispose](): void
}
/** `using m = new ScriptModule(path)` (Node 24+) disposes `m` at the end of the block. */
export interface ScriptModule {
  /** Same as `dispose()`: calls in flight finish first. */
  [Symbol.dispose](): void
}

// Below the lib/ marker, `classify` is generated from lib/vision.js. Here: `imagenetLabels` (a CommonJS export
// that is not a function or class: tsc would declare it without its doc) and `loadOps` (index.js's).
/** Image classification composed from `torch.image.loadBatch`, `ScriptModule.forward` and softmax/topk. */
export declare namespace vision {
  /** The 1000 ImageNet-1k class names in index order (torchvision's), frozen. */
  export const imagenetLabels: readonly string[]
  /**
   * Registers torchvision's C++ ops (`nms`, `roi_align`, `deform_conv2d`, ...), which scripted
   * detection and segmentation models call, from the torchvision wheel beside libtorch (or from
   * `dir`, a torchvision package folder), without Python. Its version must match libtorch's
   * (torchvision 0.28 for libtorch 2.13). Idempotent: true when this call loaded them.
   * Errors: `LibraryLoadError`.
   */
  export function loadOps(dir?: string): boolean
}

/**
 * One encoded text (`Tokenizer.encode`, `encodeBatch`). Its fields are getters: each array is made
 * on first read from its batch's buffers, then kept; `toJSON()` gives them as a plain object
 * (what `JSON.stringify` writes; `{...encoding}`, `Object.keys` and `structuredClone` see no fields).
 */
export interface Encoding {
  /** Token ids. */
  readonly ids: number[]
  /** The tokens' strings (`##ing`, `Ġworld`, `▁the`, `[CLS]`). */
  readonly tokens: string[]
  /**
   * Each token's `[start, end)` in the text it came from, as JS string indices:
   * `text.slice(start, end)` is the token's text (for a pair's second text, index that text).
   * Special tokens have `[0, 0]`.
   */
  readonly offsets: Array<[number, number]>
  /** 1 for real tokens, 0 for padding. */
  readonly attentionMask: number[]
  /** 0 for the first text's tokens, 1 for a pair's second (BERT's token type ids). */
  readonly typeIds: number[]
  /** 1 where the post-processor added a special token. */
  readonly specialTokensMask: number[]
  /** The fields as a plain object. */
  toJSON(): { ids: number[]; tokens: string[]; offsets: Array<[number, number]>; attentionMask: number[]; typeIds: number[]; specialTokensMask: number[] }
}
/** Text models: `Tokenizer`, `SentenceEncoder`, `CausalLM`. */
export declare namespace text {
  /**
   * A Hugging Face tokenizer (`tokenizer.json`: WordPiece, byte-level BPE, Unigram/SentencePiece,
   * with their normalizers, pre-tokenizers, post-processors and decoders), run by the `tokenizers`
   * crate that Python's `tokenizers` and `transformers` run: same ids, tokens and decoded
   * strings. Offsets are JS string indices. See docs/text.md. (Declared here by hand: napi-rs
   * types the native class at the top level; src/text.rs has the same docs.)
   */
  export class Tokenizer {
    /** Throws `InvalidArg`: use `Tokenizer.fromFile` or `Tokenizer.fromJSON`. */
    private constructor()
    /**
     * Loads `tokenizer.json` (a path to it, or to its folder) and, from its folder,
     * `tokenizer_config.json`, `special_tokens_map.json` and `chat_template.jinja` when there.
     * Errors: `ModelLoadError` (missing or malformed file).
     */
    static fromFile(path: string): Tokenizer
    /** From `tokenizer.json`'s contents; `options.config`: `tokenizer_config.json`'s. Errors: `ModelLoadError`. */
    static fromJSON(json: string | Uint8Array, options?: TokenizerLoadOptions): Tokenizer
    /** Encodes one text (or, with `pair`, two), on the calling thread. */
    encode(text: string, options?: TokenizerEncodeOptions): Encoding
    /** Encodes many texts on the executor: int64 tensors `[n, length]` ready for `forward`. */
    encodeBatch(texts: string[], options: TokenizerBatchOptions & { returnTensors: true }): Promise<{ inputIds: Tensor; attentionMask: Tensor; tokenTypeIds: Tensor; lengths: number[] }>
    /** Unpadded: one `[1, length_i]` tensor of each per text (a `Batcher`'s `run()` inputs). */
    encodeBatch(texts: string[], options: TokenizerBatchOptions & { returnTensors: 'ragged' }): Promise<{ inputIds: Tensor[]; attentionMask: Tensor[]; tokenTypeIds: Tensor[]; lengths: number[] }>
    /** One `Encoding` per text, as `encode` gives it (padded when `padding` says). */
    encodeBatch(texts: string[], options?: TokenizerBatchOptions): Promise<Encoding[]>
    /** The text of token ids (an array, or a 1-D integer tensor). */
    decode(ids: number[] | Tensor, options?: TokenizerDecodeOptions): string
    /** `decode` for several id lists. */
    decodeBatch(ids: Array<number[] | Tensor>, options?: TokenizerDecodeOptions): string[]
    /** The id of `token`, or null when it is not in the vocabulary. */
    tokenToId(token: string): number | null
    /** The token of `id`, or null when no token has it. */
    idToToken(id: number): string | null
    /** The vocabulary's size, added tokens included. */
    get vocabSize(): number
    /** `model_max_length` from `tokenizer_config.json`, or null. */
    get modelMaxLength(): number | null
    /** The padding token (`tokenizer_config.json`'s, or `tokenizer.json`'s), or null. */
    get padToken(): string | null
    /** The beginning-of-sequence token, or null. */
    get bosToken(): string | null
    /** The end-of-sequence token, or null. */
    get eosToken(): string | null
    /** The unknown-word token, or null. */
    get unkToken(): string | null
    /** Every special token by role (roles without one left out). */
    specialTokens(): SpecialTokens
    /** The chat template (`chat_template` of `tokenizer_config.json`, or `chat_template.jinja`), or null. */
    get chatTemplate(): string | null
    /**
     * Renders a conversation with the chat template as transformers'
     * `apply_chat_template(messages, tokenize=False)` does. Errors: `InvalidArg` (a template that
     * raises or fails, with its message).
     */
    applyChatTemplate(messages: Array<Record<string, unknown>>, options?: ChatTemplateOptions): string
    /** Frees the tokenizer now; later calls are `Disposed`. */
    dispose(): void
    /** Whether `dispose()` was called. */
    get isDisposed(): boolean
    [Symbol.dispose](): void
  }
}

// ---- Generated below by `npm run typings` from lib/'s JSDoc (tools/lib-typings.js): edit that JSDoc, not this part. ----

/**
 * What a `Batcher` drives: any object whose `forward` returns the output or a Promise of it (`runMethod` for
 * `options.method`).
 */
export interface BatchModule {
  forward(...inputs: any[]): unknown;
  runMethod?(name: string, ...inputs: any[]): unknown;
}

/** Options of `new torch.Batcher`; any other key is refused (`InvalidArg`). */
export interface BatcherOptions {
  /**
   * A batch is dispatched once it holds this many rows (default 8). A request
   * is never split: a bigger one runs alone.
   */
  maxBatchSize?: number;
  /** ...or this many milliseconds after its oldest request was queued (default 5). */
  maxDelayMs?: number;
  /**
   * How many requests may wait (default 1024; `Infinity`: no bound); past it `run`
   * rejects at once with `QueueFull`.
   */
  maxQueue?: number;
  /**
   * How many batches run at once (default `torch.getInstances()`); requests keep
   * collecting meanwhile.
   */
  concurrency?: number;
  /** A ScriptModule method to run instead of `forward`. */
  method?: string;
  /**
   * Pads tensor inputs of two or
   * more dims along dim 1 (their length) to the longest in the batch, with this value; an array gives one per
   * input (`null`: that input is not padded). Without it, requests whose lengths differ go to separate batches.
   */
  padValue?: number | boolean | ReadonlyArray<number | boolean | null>;
  /**
   * Passes a mask
   * `[rows, length]`, true on real positions, as an extra input: `true` after the inputs, a number at that input
   * index, or `{index, dtype (default 'bool'), invert}` (`invert`: true on padding, as
   * `nn.MultiheadAttention`'s `key_padding_mask`). Needs `padValue`.
   */
  mask?: boolean | number | {
    index?: number;
    dtype?: DType;
    invert?: boolean;
  };
  /**
   * Lengths up to each bound are batched apart from longer ones
   * (`[16, 64]`), so short requests are not padded to long ones. Needs `padValue`.
   */
  buckets?: readonly number[];
  /**
   * Which outputs are cut back to each request's own length along
   * dim 1: `true` (default) every tensor output of two or more dims whose dim 1 equals the padded length (one
   * that does by coincidence too); `false` none; or their paths, as errors name them (`['output[0]']`).
   */
  unpad?: boolean | readonly string[];
}

/** Options of `Batcher.run`, given as its last argument: a plain object with only these keys. */
export interface BatchRunOptions {
  /**
   * Aborting removes the request from the queue and rejects it (`Aborted`); a
   * request whose batch runs finishes.
   */
  signal?: AbortSignal;
  /**
   * The longest the request may wait in the queue, in milliseconds (then
   * `Timeout`); not a limit on the forward.
   */
  timeoutMs?: number;
}

/**
 * `Batcher.stats()`: counts since construction and the state now. `requests` = completed + failed + rejected +
 * timedOut + aborted + closed + queued + running.
 */
export interface BatcherStats {
  /** `run` calls. */
  requests: number;
  /** Requests waiting now. */
  queued: number;
  /** Requests in running batches now. */
  running: number;
  /** Batches running now. */
  inFlight: number;
  completed: number;
  /** Rejected by the model, by a split error or as malformed. */
  failed: number;
  /** Refused with `QueueFull`. */
  rejected: number;
  timedOut: number;
  aborted: number;
  /** Rejected with `Closed`. */
  closed: number;
  /** Batches dispatched. */
  batches: number;
  /** Rows in those batches. */
  rows: number;
  /** rows / batches (0 before the first). */
  meanBatchSize: number;
  /** Batches whose forward threw and whose requests were run again one by one. */
  retried: number;
}

/** `ragged.pad()`'s answer. */
export interface PaddedSequences {
  /** `[n, max length, ...rest]`, each sequence at the start of its row, the rest filled. */
  padded: Tensor;
  /** bool `[n, max length]`, true on real data (on the values' device). */
  mask: Tensor;
  /** The ragged's own `lengths`. */
  lengths: Tensor;
}

/** Options of `torch.padSequence`; any other key is refused (`InvalidArg`). */
export interface PadSequenceOptions {
  /** `[n, max length, ...]` instead of `[max length, n, ...]` (default false). */
  batchFirst?: boolean;
  /** The fill (default 0). */
  paddingValue?: number | boolean;
  /** Where the fill goes (default `'right'`). */
  paddingSide?: 'right' | 'left';
}

/** Sequences packed end to end (`torch.ragged`): sequence i is `values[offsets[i] : offsets[i + 1]]`. */
export interface Ragged {
  /** `[sum of lengths, ...rest]`: the sequences concatenated along dim 0 (a copy). */
  readonly values: Tensor;
  /** int64 CPU `[n + 1]`, starting at 0. */
  readonly offsets: Tensor;
  /** int64 CPU `[n]`. */
  readonly lengths: Tensor;
  /** The number of sequences. */
  get count(): number;
  /** Sequence `i` (negative counts from the end): a view of `values`. */
  at(i: number): Tensor;
  /** The sequences padded after their end with `value` (default 0), with a mask. */
  pad(value?: number | boolean): PaddedSequences;
  /**
   * Splits a padded tensor `[n, ≥ max length, ...]` (`pad`'s, or a model's output over it) back into one view per
   * sequence.
   */
  unpad(tensor: Tensor): Tensor[];
  /** Frees `values`, `offsets` and `lengths`. */
  dispose(): void;
  [Symbol.dispose](): void;
}

/**
 * Dynamic batching: concurrent `run` calls are concatenated along dim 0 into one forward, and
 * each gets its own rows of the output back (views). Requests share a batch when their
 * non-tensor inputs are equal and their tensors agree in dtype, device and trailing dims.
 */
export declare class Batcher<T extends IValue = Tensor> {
  #private;
  constructor(module: ScriptModule | AOTModule | BatchModule, options?: BatcherOptions);
  /**
   * Queues one request (tensor inputs carry its rows along dim 0); resolves to its share of the
   * output. Errors reject: `QueueFull`, `Aborted`, `Timeout`, `Closed`, `InvalidArg`,
   * `ShapeMismatch` (also an output that cannot be split), or the model's own.
   */
  run(...args: IValue[] | [...IValue[], BatchRunOptions]): Promise<T>;
  /** Counts and the state now. */
  stats(): BatcherStats;
  /** True once `close()` was called. */
  get isClosed(): boolean;
  /**
   * Rejects the queued requests and every later `run` (`Closed`); resolves once the running batches finish. The
   * module is not disposed.
   */
  close(): Promise<void>;
  /** Same as `close()`, not waiting. */
  [Symbol.dispose](): void;
  /** `await using b = new Batcher(m)` (Node 24+) closes it at the end of the block. */
  [Symbol.asyncDispose](): Promise<void>;
}

/**
 * Packs tensors `[length_i, ...rest]` (one dtype, device and rest; lengths may be 0) along dim 0,
 * with int64 offsets and lengths. Errors: `InvalidArg`, `ShapeMismatch`, `DTypeMismatch`, `DeviceMismatch`.
 */
export declare function ragged(tensors: readonly Tensor[]): Ragged;

/** PyTorch's `torch.nn.utils.rnn.pad_sequence`: the first sequence's dtype and device; the others are cast. */
export declare function padSequence(sequences: readonly Tensor[], options?: PadSequenceOptions): Tensor;

/** What `CausalLM.generate`/`complete` take besides the native options. */
export interface GenerateCallOptions {
  /** Ends the generation (`finishReason: 'aborted'`) and frees its cache. */
  signal?: AbortSignal;
  /** As `signal`, after this many milliseconds from the call. */
  timeoutMs?: number;
}

/** Options of `CausalLM.generate`/`complete`; defaults from `generation_config.json`; any other key is `InvalidArg`. */
export type GenerateOptions = CausalLMGenerateOptions & GenerateCallOptions & {
  responseFormat?: ResponseFormat;
};

/**
 * What a generation's output must be (`responseFormat`), enforced by a token mask at each step:
 * `json_object` any JSON object; `json_schema` a value valid against `schema` (OpenAI's
 * `{type, json_schema: {name, schema, strict}}` is taken as sent; `strict: false` ignores the
 * keywords that cannot be enforced instead of refusing them); `grammar` text of a Lark grammar
 * (llguidance's dialect); `regex` text matching `pattern`; `tool_calls` one call or more to
 * `tools` in the model's format (`toolChoice` `'required'` or a named function; `'auto'` in the
 * `generic` format, whose answer is either a call or `{"response": "..."}`). An invalid or
 * unsupported schema is `InvalidArg` naming the part.
 */
export type ResponseFormat = {
  type: 'text';
} | {
  type: 'json_object';
} | {
  type: 'json_schema';
  schema: object | boolean;
  strict?: boolean;
  name?: string;
  description?: string;
} | {
  type: 'json_schema';
  json_schema: {
    name?: string;
    schema: object | boolean;
    strict?: boolean;
    description?: string;
  };
} | {
  type: 'grammar';
  grammar: string;
} | {
  type: 'regex';
  pattern: string;
} | {
  type: 'tool_calls';
  tools: Array<{
    type: 'function';
    function: {
      name: string;
      description?: string;
      parameters?: object;
      strict?: boolean;
    };
  }>;
  toolChoice: 'auto' | 'required' | {
    type: 'function';
    function: {
      name: string;
    };
  };
  format: 'hermes' | 'llama3' | 'mistral' | 'generic';
  parallel?: boolean;
};

/**
 * A tool a chat template describes to the model (option `tools`): OpenAI's function tool, its
 * `parameters` a JSON schema.
 */
export interface ChatTool {
  type: 'function';
  function: {
    name: string;
    description?: string;
    parameters?: object;
    strict?: boolean;
  };
}

/**
 * An image in a message's content: a path, a `data:image/...;base64,` URL, the file's bytes (PNG, JPEG,
 * WebP, ...: torch.image.load's formats and limits), or a uint8 RGB Tensor `[3, h, w]`.
 */
export type ChatImage = string | Uint8Array | Tensor;

/** A part of a message's content: text, or an image (a vision-language model's: python/export_vlm.py). */
export type ContentPart = {
  type: 'text';
  text: string;
} | {
  type: 'image';
  image: ChatImage;
};

/**
 * A prompt: text, chat messages (rendered by the model's chat template; a vision-language model's
 * messages may hold images as content parts) or token ids.
 */
export type GeneratePrompt = string | Array<{
  role: string;
  content: string | ContentPart[];
}> | number[];

/**
 * One generated token's log-probability (options `logprobs`, `topLogprobs`): the log-softmax of the
 * model's raw logits at its step, before the repetition penalty, temperature, top-k/p, min-p or
 * `responseFormat` change them (vLLM's default `raw_logprobs`). `text` is `bytes` as UTF-8 (a
 * byte-level token may hold part of a character: U+FFFD there); `top` the likeliest tokens at that
 * step, likeliest first (`topLogprobs` of them).
 */
export interface TokenLogprob {
  token: number;
  text: string;
  logprob: number;
  bytes: number[];
  top: Array<{
    token: number;
    text: string;
    logprob: number;
    bytes: number[];
  }>;
}

/** A piece of a generation: text, its tokens and, with `logprobs`, theirs. */
export interface GeneratePiece {
  text: string;
  tokens: number[];
  logprobs?: TokenLogprob[];
}

/** Why a generation ended and what it counted. */
export interface GenerateResult {
  finishReason: 'stop' | 'length' | 'aborted';
  usage: {
    promptTokens: number;
    completionTokens: number;
  };
}

/** `CausalLM.program`: what the exported program is and runs on this CPU. */
export interface ProgramInfo {
  /** The activations' and cache's dtype (`float32`, `bfloat16`, `float16`). */
  dtype: string;
  /** The weight-only scheme (`int8`, `int4-g32`, `int4-g128`), or null. */
  quantization: string | null;
  /**
   * The vector ISA the compiled code needs
   * and its CPU flags (checked at load: a CPU without them is refused with `ModelLoadError`); null for
   * folders exported before torch-node recorded it.
   */
  compiledFor: {
    isa: string;
    cpuFlags: string[];
  } | null;
  /** The CPU the folder was exported on. */
  exportedOn: string | null;
  /**
   * What each kind of linear layer
   * (`float`, `int8`, `int4`) multiplies through at one row and at 2 to 32 rows.
   */
  kernels: Record<string, {
    oneRow: string | null;
    rows: string;
  }>;
  /** Whether this CPU computes bf16 natively (avx512_bf16 or amx_bf16). */
  nativeBf16: boolean;
}

/** Options of `torch.text.SentenceEncoder.load`; any other key is refused (`InvalidArg`). */
export interface SentenceEncoderOptions {
  /** Texts per forward (default 32). */
  maxBatchSize?: number;
  /**
   * How long a new batch waits for more requests, in ms (default 0: requests that
   * arrive while a forward runs still share the next one).
   */
  maxDelayMs?: number;
  /**
   * Requests waiting (each up to `maxBatchSize` texts of one length bucket) before
   * `QueueFull` (default 1024; `Infinity` for no bound).
   */
  maxQueue?: number;
  /**
   * Increasing padded lengths whose texts share batches (default 16, 32, 48, 64, 96,
   * 128, ... up to the max sequence length).
   */
  buckets?: number[];
  /**
   * The export's dtype (the manifest's); a TorchScript
   * folder also takes `'bfloat16'`.
   */
  dtype?: 'float32' | 'bfloat16' | 'float16';
  /** Aborts the load (`Aborted`). */
  signal?: AbortSignal;
}

/** Options of `SentenceEncoder.encode`; any other key is refused (`InvalidArg`). */
export interface SentenceEncodeOptions {
  /** L2-normalize each embedding (default: the manifest's `normalize`). */
  normalize?: boolean;
  /** Aborting rejects with `Aborted` while the call's requests are still queued. */
  signal?: AbortSignal;
  /** The longest a request may wait in the queue, in milliseconds (then `Timeout`). */
  timeoutMs?: number;
}

/** `manifest.json` of a folder written by `torch-node export` (python/export_text.py). */
export interface TextModelManifest {
  format: 'torch-node/text-model';
  formatVersion: number;
  kind: 'sentence-encoder';
  /** `model.pt2` or `model.pt`. */
  program: string;
  /**
   * `'pt2'`: loaded with `AOTModule`; `'torchscript'`: with
   * `ScriptModule`.
   */
  programFormat: 'pt2' | 'torchscript';
  /**
   * `input_ids`,
   * `attention_mask` and, where the model takes them, `token_type_ids`: int64 `[batch, sequence]`, right-padded.
   */
  inputs: Array<{
    name: string;
    dtype: 'int64';
    shape: Array<string | number>;
  }>;
  /**
   * The pooled
   * embedding, float32 `[batch, dim]`, not normalized.
   */
  output: {
    name: string;
    dtype: 'float32';
    shape: Array<string | number>;
    dim: number;
  };
  pooling: 'mean' | 'cls' | 'max' | 'mean_sqrt_len_tokens';
  /** True: the program returns pooled embeddings. */
  poolingInProgram: boolean;
  /** Whether `encode` L2-normalizes by default. */
  normalize: boolean;
  /** The most tokens (special tokens included) a text keeps. */
  maxSequenceLength: number;
  padTokenId: number;
  padding: 'right';
  dtype: 'float32' | 'bfloat16' | 'float16';
  /**
   * The sizes a `.pt2`
   * accepts (null for TorchScript).
   */
  dynamicShapes: {
    batch: [number, number];
    sequence: [number, number];
  } | null;
  tokenizer: string;
  source: {
    modelType: string;
    architectures: string[] | null;
    hash: string;
  };
  exportedWith: {
    torch: string;
    transformers: string;
  };
  /** The program against the eager model at other sizes than the export's. */
  checkedMaxAbsDiff: number;
}

export declare namespace text {
  /**
   * Sentence embeddings from a folder written by `npx torch-node export`: tokenize, pad by
   * length bucket, forward (encoder + pooling), normalize. Concurrent `encode` calls share
   * forwards through a `Batcher`. Made with `SentenceEncoder.load`.
   */
  export class SentenceEncoder {
    #private;
    /** Throws `InvalidArg`: use `SentenceEncoder.load`. */
    private constructor();
    /** Reads `folder/manifest.json`, loads the program and `tokenizer.json`. Errors: `ModelLoadError`, `InvalidArg`. */
    static load(folder: string, options?: SentenceEncoderOptions): Promise<SentenceEncoder>;
    /** The embedding's size. */
    get dim(): number;
    /** The most tokens of a text the model sees (special tokens included). */
    get maxSequenceLength(): number;
    /** Whether `encode` L2-normalizes by default. */
    get normalize(): boolean;
    /** `manifest.json` as read (a copy). */
    get manifest(): TextModelManifest;
    /** The folder's tokenizer (`tokenizer.json`), as `encode` uses it: to count or inspect tokens. */
    get tokenizer(): text.Tokenizer;
    /** True once `dispose()` was called. */
    get isDisposed(): boolean;
    /** The Batcher's counts (requests are chunks of up to `maxBatchSize` texts of one bucket). */
    stats(): BatcherStats;
    /**
     * A float32 `[n, dim]` tensor, one row per text in order (n = 1 for a string); texts past
     * `maxSequenceLength` tokens are truncated, as sentence-transformers does. Errors:
     * `InvalidArg`, `QueueFull`, `Aborted`, `Timeout`, `Disposed`.
     */
    encode(input: string | string[], options?: SentenceEncodeOptions): Promise<Tensor>;
    /** Closes the Batcher (calls waiting in it reject with `Disposed`) and frees the program. */
    dispose(): void;
    [Symbol.dispose](): void;
  }
  /**
   * Text generation from a causal LM folder (python/export_causal_lm.py); the decode loop runs on
   * the executor. See docs/generation.md. Made with `CausalLM.load`.
   */
  export class CausalLM {
    #private;
    /** Throws `InvalidArg`: use `CausalLM.load`. */
    private constructor();
    /** Loads the folder on the executor. Errors: `ModelLoadError`, `InvalidArg`. */
    static load(folder: string, options?: CausalLMOptions): Promise<CausalLM>;
    /** The longest sequence (prompt and output, in tokens) served. */
    get maxContext(): number;
    /** The defaults from generation_config.json. */
    get defaults(): {
      maxNewTokens: number;
      temperature: number;
      topK: number;
      topP: number;
      minP: number;
      repetitionPenalty: number;
    };
    /**
     * What the exported program is and runs on this CPU, from manifest.json: its activations' `dtype`, its
     * weight-only `quantization` (`'int8'`, `'int4-g32'`, `'int4-g128'`, or null), the vector ISA its compiled
     * code needs (`compiledFor`, e.g. `'avx2'`, with `cpuFlags` as /proc/cpuinfo names them, checked at load;
     * null for folders exported before it was recorded), the CPU it was exported on, what its linear layers
     * multiply through (`kernels`: `{float, int8?, int4?}` → `{oneRow, rows}`, e.g.
     * `'torch_node::rows_linear_int4_runs'`, whose kernel `torch.cpu.kernelCalls()` counts), and whether this CPU
     * computes bf16 natively (`nativeBf16`: a bfloat16 program on a CPU without it runs emulated, slower than
     * float32).
     */
    get program(): ProgramInfo;
    /** Whether the model takes images in its messages (a folder python/export_vlm.py wrote). */
    get acceptsImages(): boolean;
    /** True once `dispose()` was called. */
    get isDisposed(): boolean;
    /**
     * Sequences generating and calls waiting; `steps` (decode steps, one program call each for all the sequences
     * then generating), `rows` (the sequences they carried: `rows / steps` is the mean batch) and `prefills`
     * (prompts run); with the `prefixCache` load option, `prefixCache`: the tokens held (`tokens`, each shared
     * start once, in `entries` spans of whole 16-token blocks, at most `maxTokens`), the prompts looked up
     * (`queries`) and their tokens (`queriedTokens`), the prompts that reused a prefix (`hits`), the tokens they
     * did not run (`reusedTokens`) and the spans dropped to stay within the bound (`evictions`); with the
     * `speculative` load option, `speculative`: its settings, the tokens drafted by prompt lookup
     * (`proposedTokens`), those the model agreed with (`acceptedTokens`) and their share (`acceptance`).
     */
    stats(): {
      active: number;
      queued: number;
      maxSequences: number;
      steps: number;
      rows: number;
      prefills: number;
      prefixCache?: {
        maxTokens: number;
        tokens: number;
        entries: number;
        queries: number;
        queriedTokens: number;
        hits: number;
        reusedTokens: number;
        evictions: number;
      };
      speculative?: {
        maxDraft: number;
        ngram: number;
        proposedTokens: number;
        acceptedTokens: number;
        acceptance: number;
      };
    };
    /**
     * Streams `{text, tokens}` pieces (split on whole characters; with `logprobs`, each token's too);
     * returns `{finishReason, usage}`. Bad options throw `InvalidArg` here; `QueueFull` and model errors
     * come from `next()`.
     */
    generate(input: GeneratePrompt, options?: GenerateOptions): AsyncGenerator<GeneratePiece, GenerateResult, undefined>;
    /** The whole continuation (with `logprobs`, each token's). Errors: `InvalidArg`, `QueueFull`, `Disposed`. */
    complete(input: GeneratePrompt, options?: GenerateOptions): Promise<GenerateResult & GeneratePiece>;
    /**
     * The prompt's token ids as `generate` runs them: text with the tokenizer's special tokens, a chat
     * through the chat template (with `options.tools` where it renders tools), made off the event loop
     * (for counting a prompt before generating it). A chat with images is `InvalidArg` (its image tokens
     * are expanded as it is generated). Errors: `InvalidArg`, `Disposed`.
     */
    tokenize(input: GeneratePrompt, options?: {
      tools?: ChatTool[];
    }): Promise<number[]>;
    /**
     * Ends generations in flight (`'aborted'`, as their step ends) and waiting calls (`Disposed`); the model is
     * freed once the last generation has ended.
     */
    dispose(): void;
    [Symbol.dispose](): void;
  }
}

/** One candidate for a mask. */
export interface FillMaskResult {
  /** Its probability (softmax over the whole vocabulary, targets or not). */
  score: number;
  /** Its token id. */
  token: number;
  /** The token decoded. */
  tokenStr: string;
  /**
   * The text with the mask replaced, decoded (special tokens left out
   * when the text has one mask; with several, each mask's candidates fill that mask only).
   */
  sequence: string;
}

/** Options of `FillMaskPipeline.run`; any other key is refused (`InvalidArg`). */
export interface FillMaskOptions {
  /** How many candidates per mask, best first. Default 5. */
  topK?: number;
  /**
   * Only these tokens are candidates (a word not in the
   * vocabulary stands for its first token, as in transformers).
   */
  targets?: string[] | string;
  /** Aborting rejects with `Aborted` while the call's requests are still queued. */
  signal?: AbortSignal;
  /** The longest a request may wait in the queue, in milliseconds (then `Timeout`). */
  timeoutMs?: number;
}

/**
 * A content part as transformers' chat templates take it: text, or an image given by exactly one of
 * `image` (what `CausalLM.generate` takes: a path, a data URL, a Buffer, a uint8 RGB Tensor), `url` (a
 * path or a `data:image/...;base64,` URL; http(s) URLs are not fetched here), `path`, or `base64` (the
 * file's bytes, base64-encoded).
 */
export type ImageTextPart = {
  type: 'text';
  text: string;
} | {
  type: 'image';
  image?: ChatImage;
  url?: string;
  path?: string;
  base64?: string;
};

/** A chat message: a string, or text and image parts in order. */
export interface ImageTextMessage {
  role: string;
  content: string | ImageTextPart[];
}

/**
 * One answer: `inputText`, the chat as given; `generatedText`, the chat with the assistant's turn
 * appended (`{role: 'assistant', content}`), or with `returnFullText: false` that turn's text alone.
 */
export interface ImageTextToTextResult {
  inputText: ImageTextMessage[];
  generatedText: string | ImageTextMessage[];
}

/**
 * `run`'s options: CausalLM's generation options (`maxNewTokens`, `temperature`, `topK`, `topP`,
 * `minP`, `repetitionPenalty`, `seed`, `stop`, `responseFormat`, `signal`, `timeoutMs`) and
 * `returnFullText` (default true, as transformers).
 */
export type ImageTextToTextOptions = GenerateOptions & {
  returnFullText?: boolean;
};

/**
 * The tasks `torch.pipeline` takes: transformers' names, and `'sentiment-analysis'` (text-classification),
 * `'rerank'` (text-ranking), `'embeddings'` (feature-extraction), `'ner'` (token-classification).
 */
export type PipelineTask = 'feature-extraction' | 'embeddings' | 'text-classification' | 'sentiment-analysis' | 'text-ranking' | 'rerank' | 'zero-shot-classification' | 'token-classification' | 'ner' | 'fill-mask' | 'zero-shot-image-classification' | 'image-feature-extraction' | 'depth-estimation' | 'image-segmentation' | 'image-classification' | 'object-detection' | 'zero-shot-object-detection' | 'text-generation' | 'image-text-to-text' | 'automatic-speech-recognition' | 'audio-classification' | 'zero-shot-audio-classification' | 'text-to-speech';

/** Options of `torch.pipeline`: `SentenceEncoder.load`'s (batching, queue bound, dtype, signal). */
export type PipelineOptions = SentenceEncoderOptions;

/**
 * One text to classify: a string, or a pair (`{text, textPair}`: a premise and its hypothesis, a
 * question and its answer), tokenized as the model's tokenizer joins two texts.
 */
export type TextClassificationInput = string | {
  text: string;
  textPair?: string;
};

/** A label and its score. */
export interface TextClassificationLabel {
  /** The label's name (config.json's `id2label`). */
  label: string;
  /** Its score after `functionToApply`. */
  score: number;
}

/** Options of `TextClassificationPipeline.run`; any other key is refused (`InvalidArg`). */
export interface TextClassificationOptions {
  /**
   * How many labels per input, best first (default 1); `null` or
   * `Infinity`: all of them.
   */
  topK?: number | null;
  /**
   * Default as transformers' pipeline:
   * `'none'` for `problem_type` regression, `'sigmoid'` for multi-label or one label, else `'softmax'`.
   */
  functionToApply?: 'softmax' | 'sigmoid' | 'none';
  /** Aborting rejects with `Aborted` while the call's requests are still queued. */
  signal?: AbortSignal;
  /** The longest a request may wait in the queue, in milliseconds (then `Timeout`). */
  timeoutMs?: number;
}

/** A chat message as transformers' text-generation pipeline takes and returns it. */
export interface TextGenerationMessage {
  role: string;
  content: string;
}

/**
 * One answer: for a string prompt the text (the prompt and its continuation, or the continuation
 * alone with `returnFullText: false`); for messages the conversation with the assistant's turn appended
 * (the turn alone with `returnFullText: false`).
 */
export interface TextGenerationResult {
  generatedText: string | TextGenerationMessage[];
}

/**
 * `run`'s options: CausalLM's generation options (`maxNewTokens`, `temperature`, `topK`, `topP`,
 * `minP`, `repetitionPenalty`, `seed`, `stop`, `responseFormat`, `signal`, `timeoutMs`) and
 * `returnFullText` (default true, as transformers).
 */
export type TextGenerationOptions = GenerateOptions & {
  returnFullText?: boolean;
};

/** What `TextRankingPipeline.run` ranks. */
export interface TextRankingInput {
  query: string;
  documents: string[];
}

/** One ranked document. */
export interface TextRankingResult {
  /** The document's index in `documents`. */
  index: number;
  /** Its relevance: the CrossEncoder's activation of its logit. */
  score: number;
  /** The document, with `returnDocuments`. */
  document?: string;
}

/** Options of `TextRankingPipeline.run`; any other key is refused (`InvalidArg`). */
export interface TextRankingOptions {
  /** The best `topN` documents only (default all). */
  topN?: number;
  /** Adds each document's text (default false). */
  returnDocuments?: boolean;
  /** Aborting rejects with `Aborted` while the call's requests are still queued. */
  signal?: AbortSignal;
  /** The longest a request may wait in the queue, in milliseconds (then `Timeout`). */
  timeoutMs?: number;
}

/**
 * One token (`aggregationStrategy` 'none': `entity`, `index`) or one group of tokens (the other
 * strategies: `entityGroup`, the B-/I- prefix dropped).
 */
export interface TokenClassificationEntity {
  /** The token's label (config.json's `id2label`), with 'none'. */
  entity?: string;
  /** The group's label without its B-/I- prefix, with the other strategies. */
  entityGroup?: string;
  /** The label's probability (a group's: the mean of its tokens' or words'). */
  score: number;
  /** The token's position in the model's input (special tokens counted), with 'none'. */
  index?: number;
  /** The token, or the group's tokens joined as the tokenizer's decoder joins them. */
  word: string;
  /** Where it starts in the text, as a JS string index. */
  start: number;
  /** Where it ends (exclusive): `text.slice(start, end)`. */
  end: number;
}

/** Options of `TokenClassificationPipeline.run`; any other key is refused (`InvalidArg`). */
export interface TokenClassificationOptions {
  /**
   * transformers':
   * 'none' (default) one entity per token; 'simple' adjacent tokens of one tag grouped; 'first',
   * 'average', 'max' each word's label from its first token, its tokens' mean scores or its best
   * token, then grouped.
   */
  aggregationStrategy?: 'none' | 'simple' | 'first' | 'average' | 'max';
  /** Labels (or groups) left out. Default `['O']`. */
  ignoreLabels?: string[];
  /**
   * Label all of a text longer than the model's `maxSequenceLength`, as
   * transformers' `stride`: windows of `maxSequenceLength` tokens (special tokens included), each
   * overlapping the last by `stride` tokens, their entities merged (of overlapping ones the longer,
   * then the higher score). Not with aggregationStrategy 'none'. Without it a text is truncated.
   */
  stride?: number;
  /** Aborting rejects with `Aborted` while the call's requests are still queued. */
  signal?: AbortSignal;
  /** The longest a request may wait in the queue, in milliseconds (then `Timeout`). */
  timeoutMs?: number;
}

/** One text's labels, best first. */
export interface ZeroShotClassificationResult {
  /** The text. */
  sequence: string;
  /** The candidate labels, best first. */
  labels: string[];
  /** Their scores, in the same order (summing to 1 unless `multiLabel`). */
  scores: number[];
}

/** Options of `ZeroShotClassificationPipeline.run`; any other key is refused (`InvalidArg`). */
export interface ZeroShotClassificationOptions {
  /**
   * The labels to choose from: an array, or one string of
   * comma-separated labels (as transformers takes). Required.
   */
  candidateLabels: string[] | string;
  /**
   * The hypothesis each label makes, its `{}` replaced by the label
   * (Python's `str.format`: `{{` and `}}` are braces). Default `'This example is {}.'`.
   */
  hypothesisTemplate?: string;
  /**
   * Each label scored on its own (entailment against contradiction)
   * rather than the labels against each other. Default false (true in effect for one label, as in transformers).
   */
  multiLabel?: boolean;
  /** Aborting rejects with `Aborted` while the call's requests are still queued. */
  signal?: AbortSignal;
  /** The longest a request may wait in the queue, in milliseconds (then `Timeout`). */
  timeoutMs?: number;
}

/**
 * An image as the depth and segmentation pipelines take it: a path, a `data:image/...;base64,` URL,
 * the file's bytes, or a uint8 RGB Tensor `[3, H, W]`.
 */
export type DenseImage = ImageSource | Tensor;

/** One image's depth. */
export interface DepthEstimation {
  /**
   * float32 `[H, W]` at the image's size: the model's
   * predicted_depth resized bicubic (transformers' `predicted_depth`).
   */
  predictedDepth: Tensor;
  /**
   * uint8 `[H, W]`: `predictedDepth` scaled to 0–255 by its min and max
   * (transformers' `depth` image, grayscale; `torch.image.encode(depth.expand([3, H, W]), 'png')`
   * writes it as a PNG).
   */
  depth: Tensor;
}

/** Options of `DepthEstimationPipeline.run`; any other key is refused (`InvalidArg`). */
export interface DenseRunOptions {
  /** Aborting rejects with `Aborted` while the call's images are still queued. */
  signal?: AbortSignal;
  /** The longest an image may wait in the queue, in milliseconds (then `Timeout`). */
  timeoutMs?: number;
}

/** One label of an image, as transformers' image-classification pipeline answers it. */
export interface ImageClassificationLabel {
  /** The label's name (the checkpoint's `id2label`). */
  label: string;
  /** Its score after `functionToApply`. */
  score: number;
}

/** Options of `ImageClassificationPipeline.run`; any other key is refused (`InvalidArg`). */
export interface ImageClassificationOptions {
  /**
   * How many labels per image, best first (default 5, at most the model's
   * label count, as transformers').
   */
  topK?: number;
  /**
   * Default as transformers' pipeline:
   * `'none'` for `problem_type` regression, `'sigmoid'` for multi-label or one label, else `'softmax'`.
   */
  functionToApply?: 'softmax' | 'sigmoid' | 'none';
  /** Aborting rejects with `Aborted` while the call's images are still queued. */
  signal?: AbortSignal;
  /** The longest an image may wait in the queue, in milliseconds (then `Timeout`). */
  timeoutMs?: number;
}

/** An image: a file path, a `data:image/...;base64,` URL, or the file's bytes (JPEG, PNG, WebP, GIF, BMP, TIFF). */
export type ImageSource = string | Uint8Array;

/**
 * Options of `ImageFeatureExtractionPipeline.run` and `embedText`; any other key is refused
 * (`InvalidArg`), as is an option the folder's kind does not take.
 */
export interface ImageFeatureExtractionOptions {
  /**
   * CLIP and SigLIP folders only: L2-normalize each row (default
   * `false`: get_image_features / get_text_features as they are; normalized rows make the dot
   * product the cosine similarity).
   */
  normalize?: boolean;
  /**
   * Backbone folders only: each image's pooler_output `[1, H]` instead of
   * its last_hidden_state `[1, T, H]` (default `false`, as transformers' `pool`); `InvalidArg` where
   * the model has no pooler (transformers raises ValueError).
   */
  pool?: boolean;
  /** Aborting rejects with `Aborted` while the call's requests are still queued. */
  signal?: AbortSignal;
  /** The longest a request may wait in the queue, in milliseconds (then `Timeout`). */
  timeoutMs?: number;
}

/** One segment of an image: a label's region (semantic), an object (instance), or either (panoptic). */
export interface ImageSegment {
  /**
   * The segment's score rounded to 6 decimals as transformers' (panoptic:
   * the query's class probability; instance: that times the mask's mean probability), `null` for
   * semantic segments (a semantic model scores none).
   */
  score: number | null;
  /** The label's name (the checkpoint's `id2label`). */
  label: string;
  /** uint8 `[H, W]` at the image's size: 255 where the segment is, else 0. */
  mask: Tensor;
}

/**
 * What `ImageSegmentationPipeline.run` segments: `'semantic'` (one segment per label present),
 * `'instance'` (one per object, overlapping ones painted in order) or `'panoptic'` (objects and
 * regions, each pixel in one segment).
 */
export type SegmentationSubtask = 'semantic' | 'instance' | 'panoptic';

/**
 * Options of `ImageSegmentationPipeline.run`; any other key, or a threshold the subtask does not
 * read, is refused (`InvalidArg`).
 */
export interface ImageSegmentationOptions {
  /**
   * One of the model's `subtasks`; default its first, as
   * transformers' (panoptic, else instance, else semantic).
   */
  subtask?: SegmentationSubtask;
  /**
   * Panoptic and instance: keep the segments scoring above it (panoptic)
   * or at least it (instance); default 0.9, as the pipeline's.
   */
  threshold?: number;
  /**
   * Panoptic: a query's mask covers the pixels whose weighted
   * probability is at least it; default 0.5.
   */
  maskThreshold?: number;
  /**
   * Panoptic: drop a segment keeping no more than this
   * share of its mask's area; default 0.5.
   */
  overlapMaskAreaThreshold?: number;
  /** Aborting rejects with `Aborted` while the call's images are still queued. */
  signal?: AbortSignal;
  /** The longest an image may wait in the queue, in milliseconds (then `Timeout`). */
  timeoutMs?: number;
}

/** A detection's box in the image's pixels (integers, truncated as transformers' pipeline does). */
export interface DetectionBox {
  xmin: number;
  ymin: number;
  xmax: number;
  ymax: number;
}

/** One object found in an image, as transformers' object-detection pipeline answers it. */
export interface DetectedObject {
  /** The class's probability (softmax over the classes and "no object"). */
  score: number;
  /** The class's name (the checkpoint's `id2label`). */
  label: string;
  /** Where it is. */
  box: DetectionBox;
}

/** Options of `ObjectDetectionPipeline.run`; any other key is refused (`InvalidArg`). */
export interface ObjectDetectionOptions {
  /** Keep the objects scoring above it (default 0.5, as transformers'). */
  threshold?: number;
  /** Aborting rejects with `Aborted` while the call's images are still queued. */
  signal?: AbortSignal;
  /** The longest an image may wait in the queue, in milliseconds (then `Timeout`). */
  timeoutMs?: number;
}

/** A label and its score. */
export interface ZeroShotImageClassificationLabel {
  /** One of `candidateLabels`. */
  label: string;
  /** CLIP: its softmax probability over the labels; SigLIP: its own sigmoid. */
  score: number;
}

/** Options of `ZeroShotImageClassificationPipeline.run`; any other key is refused (`InvalidArg`). */
export interface ZeroShotImageClassificationOptions {
  /** The labels to score (at least one). */
  candidateLabels: string[];
  /**
   * The sentence each label goes into at `{}` (default
   * `'This is a photo of {}.'`, as transformers').
   */
  hypothesisTemplate?: string;
  /** Aborting rejects with `Aborted` while the call's requests are still queued. */
  signal?: AbortSignal;
  /** The longest a request may wait in the queue, in milliseconds (then `Timeout`). */
  timeoutMs?: number;
}

/**
 * An image as the zero-shot object detector takes it: a path, a `data:image/...;base64` URL, the
 * file's bytes, or a uint8 RGB Tensor `[3, H, W]` (as `torch.image.load(x, { dtype: 'uint8',
 * layout: 'chw' })` gives).
 */
export type ZeroShotDetectionImage = string | Uint8Array | Tensor;

/**
 * An object found for one of the labels, as transformers' zero-shot-object-detection pipeline
 * answers it.
 */
export interface ZeroShotDetectedObject {
  /** The patch's sigmoid score for the label. */
  score: number;
  /** One of `candidateLabels`. */
  label: string;
  /**
   * Where it is, in the image's pixels (integers, truncated as
   * transformers' pipeline does; an edge may lie outside the image).
   */
  box: DetectionBox;
}

/** Options of `ZeroShotObjectDetectionPipeline.run`; any other key is refused (`InvalidArg`). */
export interface ZeroShotObjectDetectionOptions {
  /**
   * What to look for: labels (1 to 1024), or one string
   * of labels separated by commas (split as transformers does, spaces kept). Each label must fit the
   * model's text positions (16 tokens for OWL-ViT and OWLv2), as transformers' pipeline requires.
   */
  candidateLabels: string | string[];
  /** Keep the objects scoring above it (default 0.1, as transformers'). */
  threshold?: number;
  /** Keep the best `topK` of them (default: all). */
  topK?: number;
  /** Aborting rejects with `Aborted` while the call's images are still queued. */
  signal?: AbortSignal;
  /** The longest an image may wait in the queue, in milliseconds (then `Timeout`). */
  timeoutMs?: number;
}

/**
 * Sentence embeddings over a folder written by `npx torch-node export` from a text encoder: the
 * `SentenceEncoder` it wraps does the work. Made with `torch.pipeline('feature-extraction', folder)`.
 */
export interface FeatureExtractionPipeline {
  /** `'feature-extraction'`. */
  get task(): string;
  /** The SentenceEncoder that runs the calls. */
  get encoder(): text.SentenceEncoder;
  /** True once `dispose()` was called. */
  get isDisposed(): boolean;
  /** The Batcher's counts. */
  stats(): BatcherStats;
  /** `SentenceEncoder.encode`: a float32 `[n, dim]` tensor, one row per text. */
  run(input: string | string[], options?: SentenceEncodeOptions): Promise<Tensor>;
  /** Frees the program; calls waiting reject with `Disposed`. */
  dispose(): void;
  [Symbol.dispose](): void;
}

/**
 * Masked language modelling (the best tokens for each `[MASK]` of a text) over a folder written by
 * `npx torch-node export` from a `*ForMaskedLM` checkpoint. Concurrent `run` calls share forwards.
 * Made with `torch.pipeline('fill-mask', folder)`.
 */
export interface FillMaskPipeline extends EncoderPipeline {
  /** `'fill-mask'`. */
  get task(): string;
  /** The mask token (`[MASK]`, `<mask>`) a text marks the blanks with. */
  get maskToken(): string;
  /**
   * Fills the masks of one text or of each text of an array. A text with one mask gives its
   * candidates, best first; one with several an array of them per mask; an array of texts an
   * array of those (a one-text array: that text's, as transformers). Errors: `InvalidArg` (a text
   * without a mask, or with more than the export's `maskSlots`, 4), `QueueFull`, `Aborted`,
   * `Timeout`, `Disposed`.
   */
  run(input: string | string[], options?: FillMaskOptions): Promise<FillMaskResult[] | FillMaskResult[][] | FillMaskResult[][][]>;
}

export interface ImageTextToTextPipeline {
  /** `'image-text-to-text'`. */
  get task(): string;
  /** The CausalLM underneath: `generate` (streaming), `stats()`, `program`, its tokenizer. */
  get model(): text.CausalLM;
  /**
   * Answers a chat whose messages may hold images; an array of chats gives an array of answers,
   * generated concurrently (sharing the model's steps). transformers' other form, images and a raw
   * text prompt given apart, is refused (`InvalidArg`): put the images in the chat. Errors:
   * `InvalidArg`, `QueueFull`, `Disposed`.
   */
  run(input: ImageTextMessage[] | ImageTextMessage[][], options?: ImageTextToTextOptions): Promise<ImageTextToTextResult[] | ImageTextToTextResult[][]>;
  /** Frees the model; generations running end with `finishReason: 'aborted'`. */
  dispose(): void;
  [Symbol.dispose](): void;
}

/**
 * What every pipeline over an exported head has: the folder's tokenizer, its sequence length, the
 * Batcher's counts, dispose. Subclasses read the encoder through `encoder`.
 */
export interface EncoderPipeline {
  /** The folder's tokenizer (`tokenizer.json`), as `run` uses it: to count or inspect tokens. */
  get tokenizer(): text.Tokenizer;
  /** The most tokens of an input (a pair's two texts together, special tokens included) the model sees; longer ones are truncated. */
  get maxSequenceLength(): number;
  /** True once `dispose()` was called. */
  get isDisposed(): boolean;
  /** The Batcher's counts. */
  stats(): BatcherStats;
  /** Frees the program; calls waiting reject with `Disposed`. */
  dispose(): void;
  [Symbol.dispose](): void;
}

/**
 * Text classification (sentiment, topics, NLI with text pairs, ...) over a folder written by
 * `npx torch-node export` from a `*ForSequenceClassification` checkpoint. Concurrent `run` calls share
 * forwards. Made with `torch.pipeline('text-classification', folder)`.
 */
export interface TextClassificationPipeline extends EncoderPipeline {
  /** `'text-classification'`. */
  get task(): string;
  /** The labels, in the order of the model's logits (config.json's `id2label`). */
  get labels(): string[];
  /** The function `run` applies unless told (transformers' rule). */
  get functionToApply(): 'softmax' | 'sigmoid' | 'none';
  /**
   * Classifies one input or an array of them. With `topK` 1 (the default), one `{label, score}` per
   * input (a one-element array for one input, as transformers does); otherwise each input's
   * `topK` labels, best first (an array of them per input for an array). Errors: `InvalidArg`,
   * `QueueFull`, `Aborted`, `Timeout`, `Disposed`.
   */
  run(input: TextClassificationInput | TextClassificationInput[], options?: TextClassificationOptions): Promise<TextClassificationLabel[] | TextClassificationLabel[][]>;
}

export interface TextGenerationPipeline {
  /** `'text-generation'`. */
  get task(): string;
  /** The CausalLM underneath: `generate` (streaming), `stats()`, `program`, its tokenizer. */
  get model(): text.CausalLM;
  /**
   * Continues a string, or answers chat messages; an array of prompts (strings, or conversations)
   * gives an array of answers, generated concurrently. Errors: `InvalidArg`, `QueueFull`, `Disposed`.
   */
  run(input: string | TextGenerationMessage[] | Array<string | TextGenerationMessage[]>, options?: TextGenerationOptions): Promise<TextGenerationResult[] | TextGenerationResult[][]>;
  /** Frees the model; generations running end with `finishReason: 'aborted'`. */
  dispose(): void;
  [Symbol.dispose](): void;
}

/**
 * Reranking (a query against candidate documents, as a search's second stage) over a folder written
 * by `npx torch-node export` from a cross-encoder. Concurrent `run` calls share forwards. Made with
 * `torch.pipeline('text-ranking', folder)`.
 */
export interface TextRankingPipeline extends EncoderPipeline {
  /** `'text-ranking'`. */
  get task(): string;
  /**
   * Scores each document against the query; the documents best first (equal scores in their
   * order). Errors: `InvalidArg`, `QueueFull`, `Aborted`, `Timeout`, `Disposed`.
   */
  run(input: TextRankingInput, options?: TextRankingOptions): Promise<TextRankingResult[]>;
}

/**
 * Token classification over a folder written by `npx torch-node export` from a
 * `*ForTokenClassification` checkpoint. Concurrent `run` calls share forwards. Made with
 * `torch.pipeline('token-classification', folder)` (or `'ner'`).
 */
export interface TokenClassificationPipeline extends EncoderPipeline {
  /** `'token-classification'`. */
  get task(): string;
  /** The labels, in the order of the model's logits (config.json's `id2label`). */
  get labels(): string[];
  /**
   * Labels each token of one text, or of each text of an array: the entities (an array of them per
   * text for an array), in text order. Errors: `InvalidArg`, `QueueFull`, `Aborted`, `Timeout`, `Disposed`.
   */
  run(input: string | string[], options?: TokenClassificationOptions): Promise<TokenClassificationEntity[] | TokenClassificationEntity[][]>;
}

/**
 * Zero-shot text classification (labels chosen per call) over a folder written by
 * `npx torch-node export` from an NLI `*ForSequenceClassification` checkpoint (its labels include
 * entailment and contradiction). Concurrent `run` calls share forwards. Made with
 * `torch.pipeline('zero-shot-classification', folder)`.
 */
export interface ZeroShotClassificationPipeline extends EncoderPipeline {
  /** `'zero-shot-classification'`. */
  get task(): string;
  /**
   * Scores the candidate labels against one text or an array of them: one forward per (text,
   * label) pair, batched. Returns `{sequence, labels, scores}` (an array of them for an array),
   * labels best first as transformers sorts them. Errors: `InvalidArg` (no candidate labels, a
   * template without `{}`), `QueueFull`, `Aborted`, `Timeout`, `Disposed`.
   */
  run(input: string | string[], options: ZeroShotClassificationOptions): Promise<ZeroShotClassificationResult | ZeroShotClassificationResult[]>;
}

export interface ClipPipeline {
  /** `'clip'` (zero-shot scores are a softmax over the labels) or `'siglip'` (each label's sigmoid). */
  get family(): 'clip' | 'siglip';
  /** The embeddings' size. @returns {number} */
  get dim(): number;
  /** True once `dispose()` was called. */
  get isDisposed(): boolean;
  /** The text and image Batchers' counts. */
  stats(): {
    text: BatcherStats;
    image: BatcherStats;
  };
  /** Frees the programs once running batches finish; calls waiting and later ones reject with `Disposed`. */
  dispose(): void;
  [Symbol.dispose](): void;
}

/** What the depth-estimation and image-segmentation pipelines share: loading, run's loop, disposal. */
export interface DensePipeline {
  /** True once `dispose()` was called. */
  get isDisposed(): boolean;
  /** The model Batcher's counts. */
  stats(): BatcherStats;
  /** Frees the programs once running batches finish; calls waiting and later ones reject with `Disposed`. */
  dispose(): void;
  [Symbol.dispose](): void;
}

/**
 * Depth from one image: DPT or Depth Anything exported from the transformers checkpoint. Concurrent
 * calls share forwards. Made with `DepthEstimationPipeline.load(folder)`.
 */
export interface DepthEstimationPipeline extends DensePipeline {
  /** `'depth-estimation'`. */
  get task(): string;
  /**
   * The depth of one image (`{predictedDepth, depth}`) or of each of an array of images (an array of
   * those), as transformers' `pipeline('depth-estimation')`. Errors: `InvalidArg`, `InvalidImage`,
   * `QueueFull`, `Aborted`, `Timeout`, `Disposed`, `ForwardError`.
   */
  run(images: DenseImage | DenseImage[], options?: DenseRunOptions): Promise<DepthEstimation | DepthEstimation[]>;
}

/**
 * Image classification with a transformers checkpoint (ViT, ConvNeXt, DeiT, BEiT, Swin, ...
 * exported with python/export_vision.py). Concurrent calls share forwards. Made with
 * `ImageClassificationPipeline.load(folder)` or `torch.pipeline('image-classification', folder)`.
 */
export interface ImageClassificationPipeline extends DensePipeline {
  /** `'image-classification'`. */
  get task(): string;
  /** The labels, in the order of the model's logits (config.json's `id2label`). @returns {string[]} */
  get labels(): string[];
  /** The function `run` applies unless told (transformers' rule). @returns {'softmax' | 'sigmoid' | 'none'} */
  get functionToApply(): 'softmax' | 'sigmoid' | 'none';
  /**
   * The `topK` labels of one image, best first (`[{label, score}]`), or of each of an array of
   * images (an array of those), as transformers' `pipeline('image-classification')`.
   * Errors: `InvalidArg`, `InvalidImage`, `QueueFull`, `Aborted`, `Timeout`, `Disposed`, `ForwardError`.
   */
  run(images: DenseImage | DenseImage[], options?: ImageClassificationOptions): Promise<ImageClassificationLabel[] | ImageClassificationLabel[][]>;
}

/**
 * Image features: from a CLIP or SigLIP folder, image embeddings (and text embeddings in the same
 * space); from a vision backbone folder (ViT, DINOv2, DeiT, ...), each image's last_hidden_state or
 * pooler_output, as transformers' pipeline('image-feature-extraction'). Concurrent calls share
 * forwards. Made with `ImageFeatureExtractionPipeline.load(folder)` (or
 * `torch.pipeline('image-feature-extraction', folder)`).
 */
export interface ImageFeatureExtractionPipeline {
  /** `'image-feature-extraction'`. */
  get task(): string;
  /**
   * `'clip'` (a CLIP or SigLIP folder: embeddings, `embedText`) or `'backbone'` (a vision
   * backbone: hidden states, `pool`).
   */
  get kind(): 'clip' | 'backbone';
  /**
   * A CLIP folder's `'clip'` (zero-shot scores are a softmax over the labels) or `'siglip'` (each
   * label's sigmoid); null for a backbone.
   */
  get family(): 'clip' | 'siglip' | null;
  /** The embeddings' size (a backbone: the hidden size H). @returns {number} */
  get dim(): number;
  /**
   * A backbone's pooler_output shape per image, without its leading 1 (`[H]`), or null where the
   * model has no pooler (`pool` is refused) or the folder is a CLIP one.
   */
  get pooledShape(): number[] | null;
  /** The folder's tokenizer (`tokenizer.json`), as `embedText` uses it; null for a backbone. */
  get tokenizer(): any;
  /** The most tokens of a text the text tower sees (longer texts are cut); 0 for a backbone. @returns {number} */
  get maxSequenceLength(): number;
  /** True once `dispose()` was called. */
  get isDisposed(): boolean;
  /** The Batchers' counts: a CLIP folder's `{ text, image }`, a backbone's model Batcher's. */
  stats(): BatcherStats | {
    text: BatcherStats;
    image: BatcherStats;
  };
  /** Frees the programs once running batches finish; calls waiting and later ones reject with `Disposed`. */
  dispose(): void;
  [Symbol.dispose](): void;
  /**
   * How many tokens the texts are (each cut at `maxSequenceLength`, special tokens included).
   * CLIP and SigLIP folders only (`InvalidArg` for a backbone).
   */
  countTokens(texts: string[]): Promise<number>;
  /**
   * The images' features. A CLIP or SigLIP folder: their embeddings, one float32 `[n, dim]` tensor,
   * one row per image (n = 1 for one image). A backbone: per image, as transformers'
   * pipeline('image-feature-extraction', ...)(image, return_tensors=True): last_hidden_state
   * float32 `[1, T, H]`, or with `pool: true` pooler_output `[1, H]`; one image gives a Tensor,
   * an array of images an array of them (a backbone also takes uint8 RGB Tensors `[3, H, W]`).
   * Errors: `InvalidArg`, `InvalidImage`, `QueueFull`, `Aborted`, `Timeout`, `Disposed`.
   */
  run(images: ImageSource | Tensor | Array<ImageSource | Tensor>, options?: ImageFeatureExtractionOptions): Promise<Tensor | Tensor[]>;
  /**
   * The texts' embeddings in the images' space: a float32 `[n, dim]` tensor, tokenized as the
   * zero-shot pipeline does (CLIP: cut at the model's positions; SigLIP: padded to 64 tokens).
   * CLIP and SigLIP folders only. Errors as `run`.
   */
  embedText(texts: string | string[], options?: ImageFeatureExtractionOptions): Promise<Tensor>;
}

/**
 * Image segmentation: semantic (Segformer, DPT), or panoptic, instance and semantic (Mask2Former,
 * DETR), exported from the transformers checkpoint. Concurrent calls share forwards. Made with
 * `ImageSegmentationPipeline.load(folder)`.
 */
export interface ImageSegmentationPipeline extends DensePipeline {
  /**
   * The subtasks this model answers, its default first: `['semantic']` (Segformer, DPT) or
   * `['panoptic', 'instance', 'semantic']` (Mask2Former, DETR).
   */
  get subtasks(): SegmentationSubtask[];
  /** `'image-segmentation'`. */
  get task(): string;
  /** The label names by id (the checkpoint's `id2label`). @returns {Record<string, string>} */
  get labels(): Record<string, string>;
  /**
   * The segments of one image (`[{score, label, mask}]`: semantic, one per label present, score
   * `null`; instance and panoptic, one per segment kept) or of each of an array of images (an array
   * of those), as transformers' `pipeline('image-segmentation')`.
   * Errors: `InvalidArg` (also a subtask the model lacks, a threshold the subtask does not read),
   * `InvalidImage`, `QueueFull`, `Aborted`, `Timeout`, `Disposed`, `ForwardError`.
   */
  run(images: DenseImage | DenseImage[], options?: ImageSegmentationOptions): Promise<ImageSegment[] | ImageSegment[][]>;
  /** Frees the programs once running batches finish; calls waiting and later ones reject with `Disposed`. */
  dispose(): void;
}

/**
 * Object detection with a transformers checkpoint (DETR, YOLOS exported with
 * python/export_vision.py). Concurrent calls share forwards. Made with
 * `ObjectDetectionPipeline.load(folder)` or `torch.pipeline('object-detection', folder)`.
 */
export interface ObjectDetectionPipeline extends DensePipeline {
  /** `'object-detection'`. */
  get task(): string;
  /** The class names by id (the checkpoint's `id2label`). @returns {Record<string, string>} */
  get labels(): Record<string, string>;
  /**
   * The objects of one image (`[{score, label, box}]`, in the model's query order) or of each of an
   * array of images (an array of those), as transformers' `pipeline('object-detection')`.
   * Errors: `InvalidArg`, `InvalidImage`, `QueueFull`, `Aborted`, `Timeout`, `Disposed`, `ForwardError`.
   */
  run(images: DenseImage | DenseImage[], options?: ObjectDetectionOptions): Promise<DetectedObject[] | DetectedObject[][]>;
}

/**
 * Zero-shot image classification with a CLIP or SigLIP model: which of any labels fits an image
 * best. Concurrent `run` calls share forwards of both towers. Made with
 * `ZeroShotImageClassificationPipeline.load(folder)` (or `torch.pipeline('zero-shot-image-classification', folder)`).
 */
export interface ZeroShotImageClassificationPipeline extends ClipPipeline {
  /** `'zero-shot-image-classification'`. */
  get task(): string;
  /**
   * Scores `candidateLabels` for one image (an array of `{score, label}`, best first; equal scores
   * keep the labels' order) or for each of an array of images (an array of those). Errors:
   * `InvalidArg`, `InvalidImage`, `QueueFull`, `Aborted`, `Timeout`, `Disposed`.
   */
  run(images: ImageSource | ImageSource[], options: ZeroShotImageClassificationOptions): Promise<ZeroShotImageClassificationLabel[] | ZeroShotImageClassificationLabel[][]>;
}

/**
 * Zero-shot object detection with an OWL-ViT or OWLv2 model: boxes around whatever labels you name
 * ("a cat", "a remote control") in an image. Concurrent `run` calls share forwards, and the labels'
 * text embeddings are kept for later calls. Made with `ZeroShotObjectDetectionPipeline.load(folder)`
 * (or `torch.pipeline('zero-shot-object-detection', folder)`).
 */
export interface ZeroShotObjectDetectionPipeline {
  /** `'zero-shot-object-detection'`. */
  get task(): string;
  /**
   * `'owlvit'` (boxes scale with the image's width and height) or `'owlv2'` (whose processor pads
   * the image to a square: boxes scale with its longer side).
   */
  get family(): 'owlvit' | 'owlv2';
  /** True once `dispose()` was called. */
  get isDisposed(): boolean;
  /** The text and image Batchers' counts. */
  stats(): {
    text: BatcherStats;
    image: BatcherStats;
  };
  /**
   * The objects matching `candidateLabels` in one image (`[{score, label, box}]`, best first) or in
   * each of an array of images (an array of those), as transformers' `pipeline('zero-shot-object-detection')`.
   * Errors: `InvalidArg`, `InvalidImage`, `QueueFull`, `Aborted`, `Timeout`, `Disposed`.
   */
  run(images: ZeroShotDetectionImage | ZeroShotDetectionImage[], options: ZeroShotObjectDetectionOptions): Promise<ZeroShotDetectedObject[] | ZeroShotDetectedObject[][]>;
  /** Frees the programs once running batches finish; calls waiting and later ones reject with `Disposed`. */
  dispose(): void;
  [Symbol.dispose](): void;
}

/**
 * A pipeline for `task` over `folder` (written by `npx torch-node export`): `'text-classification'`
 * (a `*ForSequenceClassification` export), `'text-ranking'` or `'rerank'` (a cross-encoder: one
 * logit), `'feature-extraction'` (a sentence encoder), `'zero-shot-classification'` (an NLI
 * classifier: its labels include entailment), `'token-classification'` or `'ner'` (a
 * `*ForTokenClassification` export), `'fill-mask'` (a `*ForMaskedLM` export),
 * `'zero-shot-image-classification'` and `'image-feature-extraction'` (a CLIPModel or SiglipModel
 * export), `'depth-estimation'` (DPT, Depth Anything), `'image-segmentation'` (semantic: Segformer,
 * DPT), `'image-classification'` (a `*ForImageClassification` export: ViT, ConvNeXt, ...),
 * `'object-detection'` (DETR, YOLOS), `'zero-shot-object-detection'` (OWL-ViT, OWLv2: boxes for any
 * labels), `'text-generation'` (a causal LM: `CausalLM.load`'s options), `'image-text-to-text'` (a
 * vision-language export: chats with images),
 * `'automatic-speech-recognition'` (a WhisperForConditionalGeneration export: speech to text),
 * `'zero-shot-audio-classification'` (a ClapModel export).
 * (torchvision classifiers and detectors are ScriptModules: `torch.vision.classify`, `ScriptModule`.)
 * Concurrent `run` calls share
 * forwards.
 * Errors: `InvalidArg` (an unknown task, options), `ModelLoadError` (a folder of another task).
 */
export declare function pipeline<T extends PipelineTask>(task: T, folder: string, options?: PipelineOptions): Promise<T extends 'text-classification' | 'sentiment-analysis' ? TextClassificationPipeline : T extends 'text-ranking' | 'rerank' ? TextRankingPipeline : T extends 'zero-shot-classification' ? ZeroShotClassificationPipeline : T extends 'token-classification' | 'ner' ? TokenClassificationPipeline : T extends 'fill-mask' ? FillMaskPipeline : T extends 'zero-shot-image-classification' ? ZeroShotImageClassificationPipeline : T extends 'image-feature-extraction' ? ImageFeatureExtractionPipeline : T extends 'depth-estimation' ? DepthEstimationPipeline : T extends 'image-segmentation' ? ImageSegmentationPipeline : T extends 'image-classification' ? ImageClassificationPipeline : T extends 'object-detection' ? ObjectDetectionPipeline : T extends 'zero-shot-object-detection' ? ZeroShotObjectDetectionPipeline : T extends 'text-generation' ? TextGenerationPipeline : T extends 'image-text-to-text' ? ImageTextToTextPipeline : T extends 'automatic-speech-recognition' ? audio.SpeechRecognitionPipeline : T extends 'audio-classification' ? audio.AudioClassificationPipeline : T extends 'zero-shot-audio-classification' ? audio.ZeroShotAudioClassificationPipeline : T extends 'text-to-speech' ? audio.TextToSpeechPipeline : FeatureExtractionPipeline>;

/** One label of a clip, as transformers' audio-classification pipeline answers it. */
export interface AudioClassificationLabel {
  /** The label's name (the checkpoint's `id2label`). */
  label: string;
  /** Its score after `functionToApply`. */
  score: number;
}

/** Options of `AudioClassificationPipeline.run`; any other key is refused (`InvalidArg`). */
export interface AudioClassificationOptions {
  /**
   * How many labels, best first (default 5, at most the model's label count,
   * as transformers').
   */
  topK?: number;
  /**
   * Default as transformers' pipeline:
   * `'none'` for `problem_type` regression, `'sigmoid'` for multi-label, else `'softmax'`.
   */
  functionToApply?: 'softmax' | 'sigmoid' | 'none';
  /** Aborting rejects with `Aborted` before the model has run. */
  signal?: AbortSignal;
}

/**
 * A clip as transformers' pipelines take one as a dict: mono samples and their rate (resampled to
 * the model's when they differ). `sampling_rate` and `array` are accepted for transformers' names.
 */
export interface AudioSamples {
  /** The samples. */
  raw: Float32Array;
  /** Their rate in Hz (1..384000). */
  samplingRate: number;
}

/** Options of `AudioClassificationPipeline.load`. */
export interface AudioClassificationLoadOptions {
  /** Aborting rejects the load with `Aborted`. */
  signal?: AbortSignal;
}

/**
 * A clip `run` takes: an encoded file (bytes or a path), samples at a rate, or samples at the
 * model's rate.
 */
export type AudioInput = Uint8Array | string | AudioSamples | Float32Array;

/** Speech for one text, as transformers' text-to-speech pipeline answers it. */
export interface SpeechAudio {
  /** Mono samples in [-1, 1] (HiFi-GAN's tanh), at `samplingRate`. */
  audio: Float32Array;
  /** Samples a second (the checkpoint's: 16000 for MMS-TTS). */
  samplingRate: number;
}

/** Options of `TextToSpeechPipeline.run`; any other key is refused (`InvalidArg`). */
export interface TextToSpeechOptions {
  /**
   * Seeds the call's noise (0 ≤ seed < 2^63): the waveform equals
   * transformers' `VitsModel(**inputs)` run after `torch.manual_seed(seed)`. Each text of an array
   * gets the same seed. Without it, a random seed each call (VITS is stochastic).
   */
  seed?: number | bigint;
  /**
   * Faster (> 1) or slower speech: durations divided by it (0.1..10;
   * default the checkpoint's `speaking_rate`, 1).
   */
  speakingRate?: number;
  /**
   * The prior noise's scale (0..10; default the checkpoint's, 0.667); 0:
   * no noise in the spectrogram.
   */
  noiseScale?: number;
  /**
   * The duration noise's scale (0..10; default the checkpoint's,
   * 0.8); 0: the durations are deterministic.
   */
  noiseScaleDuration?: number;
  /**
   * Aborting rejects with `Aborted` while the call waits (a text
   * being synthesized finishes; the texts after it are not run).
   */
  signal?: AbortSignal;
}

/** Options of `TextToSpeechPipeline.load`; any other key is refused (`InvalidArg`). */
export interface TextToSpeechLoadOptions {
  /**
   * The longest text, in characters (code points) (default 4096, OpenAI's
   * limit; at most 100000): longer is `InvalidArg` before anything runs.
   */
  maxChars?: number;
  /**
   * The longest speech made, in seconds (default 600, at most 3600):
   * a text whose predicted durations pass it is `InvalidArg`, found before the decoder runs.
   */
  maxDurationS?: number;
  /**
   * Calls that may wait while one runs (default 64); past it `run` rejects
   * with `QueueFull`.
   */
  maxQueue?: number;
  /** Aborting rejects the load with `Aborted`. */
  signal?: AbortSignal;
}

/** A label and its score. */
export interface ZeroShotAudioClassificationLabel {
  /** One of `candidateLabels`. */
  label: string;
  /** Its softmax probability over the labels. */
  score: number;
}

/** Options of `ZeroShotAudioClassificationPipeline.run`; any other key is refused (`InvalidArg`). */
export interface ZeroShotAudioClassificationOptions {
  /** The labels to score (at least one). */
  candidateLabels: string[];
  /**
   * The sentence each label goes into at `{}` (default
   * `'This is a sound of {}.'`, as transformers').
   */
  hypothesisTemplate?: string;
  /** Aborting rejects with `Aborted` while the call's requests are still queued. */
  signal?: AbortSignal;
  /** The longest a request may wait in the queue, in milliseconds (then `Timeout`). */
  timeoutMs?: number;
}

/** Options of `ZeroShotAudioClassificationPipeline.load`. */
export interface ZeroShotAudioClassificationLoadOptions {
  /** The most texts or clips a tower's forward takes (default 32). */
  maxBatchSize?: number;
  /** How long a forward waits for more requests (default 0). */
  maxDelayMs?: number;
  /** The most requests a tower queues before `QueueFull` (default 1024). */
  maxQueue?: number;
  /** Aborting rejects the load with `Aborted`. */
  signal?: AbortSignal;
}

/** Speech: Whisper speech to text (docs/speech.md). */
export declare namespace audio {
  /**
   * Speech to text (Whisper): `automatic-speech-recognition` as transformers' pipeline (greedy or
   * beam search, as the checkpoint's generation config says, or `numBeams`).
   * Made with `SpeechRecognitionPipeline.load(folder)`.
   */
  export class SpeechRecognitionPipeline {
    /** Throws `InvalidArg`: use `SpeechRecognitionPipeline.load(folder)`. */
    private constructor();
    /**
     * Loads a folder python/export_whisper.py wrote from a WhisperForConditionalGeneration
     * checkpoint. Errors: `ModelLoadError`, `InvalidArg`.
     */
    static load(folder: string, options?: {}): Promise<SpeechRecognitionPipeline>;
    /** `'automatic-speech-recognition'`. */
    get task(): 'automatic-speech-recognition';
    /** The rate `Float32Array` input must be at (16000). */
    get samplingRate(): number;
    /**
     * The beams `run` searches with when `numBeams` is not given: the checkpoint's generation
     * config's `num_beams` (1 where it has none: greedy).
     */
    get numBeams(): number;
    /**
     * Transcribes (or translates) `audio`: an encoded file (a Buffer or Uint8Array of WAV, FLAC, MP3
     * or Ogg/Vorbis, or a path to one) or mono samples at `samplingRate` (a Float32Array), as
     * transformers' `pipeline('automatic-speech-recognition')` (greedy).
     *
     * Options: `language` (a code, `<|en|>` or a name; detected when not given), `task`,
     * `maxNewTokens` (per 30 s window), `maxDurationS` (longer audio is refused, `InvalidArg`;
     * default 1200, at most 10800), `returnTimestamps` (timestamp tokens generated, and `chunks`:
     * `[{ timestamp: [start, end], text, tokens }]` in seconds, `end` null where the model left the
     * last one open), `chunkLengthS` (the audio cut into chunks of this many seconds, ≤ 30, decoded
     * alone and merged where they overlap) with `strideLengthS` (the overlap, seconds or
     * `[left, right]`, default chunkLengthS / 6). Audio over 30 s needs `returnTimestamps` (decoded
     * window after window, as transformers' long-form generate) or `chunkLengthS`, else `InvalidArg`.
     *
     * Beam search, as transformers' `generate`: `numBeams` (1..16; default the checkpoint's generation
     * config's `num_beams`, 1 for OpenAI's Whisper checkpoints: greedy, where transformers' pipeline
     * would take 5; pass `numBeams: 5` for the pipeline's result), `lengthPenalty` (default 1: a
     * finished beam's score is its summed log-probability over its length to this power) and
     * `earlyStopping` (`false`, the default: stop when no running beam can beat the finished ones;
     * `true`: once `numBeams` beams have finished; `'never'`), the last two only with beams
     * (`InvalidArg` otherwise). Beams search at temperature 0; a fallback temperature above 0 samples
     * with one beam, and the later windows of that call decode with one beam too (as transformers'
     * `generate_with_fallback` leaves its config).
     *
     * Temperature fallback, as transformers' `generate`: `temperature` (default 0: greedy; a list
     * is tried in turn, each above 0 sampling, seeded by `seed`, default 0), with
     * `compressionRatioThreshold` (e.g. 2.4) and `logprobThreshold` (e.g. -1): a window whose token
     * compression ratio is over the one or average log-probability under the other is decoded again
     * at the next temperature; `noSpeechThreshold` (e.g. 0.6, needs `logprobThreshold`): a window
     * whose `<|nospeech|>` probability is over it, and log-probability under, is skipped as silence.
     * With timestamps each chunk says how its window's kept pass looked: `seek` (its first feature
     * frame, 10 ms each), `temperature`, `avgLogprob`, `compressionRatio` (of its text, as OpenAI's
     * whisper) and `noSpeechProb`.
     *
     * Resolves to `{ text, tokens, language, duration }` (+ `chunks`): the text, the decoder's tokens
     * (the prompt, then each window's tokens), the language used (given or detected) and the audio's
     * seconds. Errors: `InvalidArg` (bad options, undecodable audio: "invalid audio: ..."),
     * `Aborted`, `ForwardError`.
     */
    run(audio: Uint8Array | string | Float32Array, options?: {
      language?: string;
      task?: 'transcribe' | 'translate';
      maxNewTokens?: number;
      maxDurationS?: number;
      numBeams?: number;
      lengthPenalty?: number;
      earlyStopping?: boolean | 'never';
      returnTimestamps?: boolean;
      chunkLengthS?: number;
      strideLengthS?: number | [number, number];
      temperature?: number | number[];
      compressionRatioThreshold?: number;
      logprobThreshold?: number;
      noSpeechThreshold?: number;
      seed?: number;
      signal?: AbortSignal;
    }): Promise<{
      text: string;
      tokens: number[];
      language: string | null;
      duration: number;
      chunks?: {
        timestamp: [number | null, number | null];
        text: string;
        tokens: number[];
        seek: number;
        temperature: number;
        avgLogprob: number;
        compressionRatio: number;
        noSpeechProb: number | null;
      }[];
    }>;
    /**
     * Lets the model's programs go: they are freed once no `run` in flight holds them (at once when
     * none runs); later calls throw `Disposed`. Calling it again does nothing.
     */
    dispose(): void;
  }
  /**
   * Audio classification with a transformers checkpoint (Wav2Vec2, HuBERT, WavLM
   * `*ForSequenceClassification`, `ASTForAudioClassification` exported with python/export_audio.py). Made with
   * `AudioClassificationPipeline.load(folder)`.
   */
  export class AudioClassificationPipeline {
    #private;
    /** Throws `InvalidArg`: use `AudioClassificationPipeline.load(folder)`. */
    private constructor();
    /** Loads a folder python/export_audio.py wrote. Errors: `ModelLoadError`, `InvalidArg`, `Aborted`. */
    static load(folder: string, options?: AudioClassificationLoadOptions): Promise<AudioClassificationPipeline>;
    /** `'audio-classification'`. */
    get task(): string;
    /** The labels, in the order of the model's logits (config.json's `id2label`). @returns {string[]} */
    get labels(): string[];
    /** The sampling rate the model's samples are at (Hz; 16000 for Wav2Vec2). */
    get samplingRate(): any;
    /** The function `run` applies unless told (transformers' rule). @returns {'softmax' | 'sigmoid' | 'none'} */
    get functionToApply(): 'softmax' | 'sigmoid' | 'none';
    /** True once `dispose()` was called. */
    get isDisposed(): boolean;
    /**
     * The `topK` labels of a clip, best first (`[{label, score}]`), or of each of an array of clips
     * (an array of those), as transformers' `pipeline('audio-classification')`. A clip is an encoded
     * file (a Buffer or Uint8Array of WAV, FLAC, MP3 or Ogg/Vorbis, or a path to one: decoded,
     * down-mixed to mono and resampled to `samplingRate` off the event loop, as the speech pipeline
     * reads audio), `{ raw, samplingRate }` (mono samples at a rate, resampled when it is not the
     * model's; transformers' `sampling_rate` / `array` names too), or mono float32 samples at
     * `samplingRate` Hz. Each must be at least the model's shortest input (400 samples for
     * wav2vec2-base and for AST) and finite, and at most 20 minutes; every clip is read and checked
     * before any runs. Errors: `InvalidArg` (bad options or audio: "invalid audio: ..."), `Aborted`,
     * `Disposed`, `ForwardError`.
     */
    run(audio: AudioInput | AudioInput[], options?: AudioClassificationOptions): Promise<AudioClassificationLabel[] | AudioClassificationLabel[][]>;
    /** Frees the programs; a call running finishes, later ones reject with `Disposed`. */
    dispose(): void;
    [Symbol.dispose](): void;
  }
  /**
   * Zero-shot audio classification with a CLAP model: which of any labels fits a sound best.
   * Concurrent `run` calls share forwards of both towers, and the labels' text embeddings are kept
   * for later calls. Made with `ZeroShotAudioClassificationPipeline.load(folder)` (or
   * `torch.pipeline('zero-shot-audio-classification', folder)`).
   */
  export class ZeroShotAudioClassificationPipeline {
    #private;
    /** Throws `InvalidArg`: use `ZeroShotAudioClassificationPipeline.load(folder)`. */
    private constructor();
    /**
     * Loads a folder `npx torch-node export` (python/export_clap.py) wrote from a ClapModel checkpoint.
     * Errors: `ModelLoadError`, `InvalidArg`, `Aborted`.
     */
    static load(folder: string, options?: ZeroShotAudioClassificationLoadOptions): Promise<ZeroShotAudioClassificationPipeline>;
    /** `'zero-shot-audio-classification'`. */
    get task(): string;
    /** The sampling rate clips are resampled to (Hz; 48000 for LAION's CLAP). @returns {number} */
    get samplingRate(): number;
    /**
     * The most samples a clip may have at `samplingRate` (the feature extractor's max_length_s; a
     * longer clip is refused, as transformers would cut it at random). @returns {number}
     */
    get maxSamples(): number;
    /** The embeddings' size. @returns {number} */
    get dim(): number;
    /** True once `dispose()` was called. */
    get isDisposed(): boolean;
    /** The text and audio Batchers' counts. */
    stats(): {
      text: BatcherStats;
      audio: BatcherStats;
    };
    /**
     * Scores `candidateLabels` for one clip (an array of `{score, label}`, best first; equal scores
     * keep the labels' order) or for each of an array of clips (an array of those), as transformers'
     * `pipeline('zero-shot-audio-classification')`. A clip is an encoded file (a Buffer or Uint8Array
     * of WAV, FLAC, MP3 or Ogg/Vorbis, or a path to one: decoded, down-mixed to mono and resampled to
     * `samplingRate` off the event loop), `{ raw, samplingRate }` (mono samples at a rate, resampled
     * when it is not the model's; transformers' `array` / `sampling_rate` names too), or mono float32
     * samples at `samplingRate` Hz. Each must have 1 to `maxSamples` finite samples (a clip shorter
     * than the model's length is repeated and padded as ClapFeatureExtractor does; a longer one is
     * refused: transformers would pick random parts of it); every clip is read and checked before any
     * runs. Errors: `InvalidArg` (bad options or audio), `QueueFull`, `Aborted`, `Timeout`, `Disposed`.
     */
    run(audio: AudioInput | AudioInput[], options: ZeroShotAudioClassificationOptions): Promise<ZeroShotAudioClassificationLabel[] | ZeroShotAudioClassificationLabel[][]>;
    /** Frees the programs once running batches finish; calls waiting and later ones reject with `Disposed`. */
    dispose(): void;
    [Symbol.dispose](): void;
  }
  /**
   * Text to speech with a VITS checkpoint (Facebook's MMS-TTS, `VitsModel`, exported with
   * python/export_tts.py). Made with `TextToSpeechPipeline.load(folder)` or
   * `torch.pipeline('text-to-speech', folder)`.
   */
  export class TextToSpeechPipeline {
    #private;
    /** Throws `InvalidArg`: use `TextToSpeechPipeline.load(folder)`. */
    private constructor();
    /** Loads a folder python/export_tts.py wrote. Errors: `ModelLoadError`, `InvalidArg`, `Aborted`. */
    static load(folder: string, options?: TextToSpeechLoadOptions): Promise<TextToSpeechPipeline>;
    /** `'text-to-speech'`. @returns {'text-to-speech'} */
    get task(): 'text-to-speech';
    /** Samples a second of the speech made (the checkpoint's `sampling_rate`). */
    get samplingRate(): any;
    /** The longest text `run` takes, in characters (code points). */
    get maxChars(): any;
    /** True once `dispose()` was called. */
    get isDisposed(): boolean;
    /**
     * The token ids the model reads for `text` (transformers' VitsTokenizer: lower-cased, characters
     * outside the vocabulary dropped, a blank between characters). Errors: `InvalidArg`.
     */
    tokenize(text: string): number[];
    /**
     * Speech for `text` (`{audio, samplingRate}`), or for each of an array of texts (an array of
     * those, each text run alone), as transformers' `pipeline('text-to-speech')`. Every text is
     * checked before any runs: a string of at most `maxChars` characters with something to say (a
     * text with no character of the vocabulary is `InvalidArg`). Errors: `InvalidArg`, `QueueFull`,
     * `Aborted`, `Disposed`, `ForwardError`.
     */
    run(text: string | string[], options?: TextToSpeechOptions): Promise<SpeechAudio | SpeechAudio[]>;
    /** Frees the program once the text running ends; waiting and later calls reject with `Disposed`. */
    dispose(): void;
    [Symbol.dispose](): void;
  }
  /**
   * `audio` as a WAV file: 16-bit PCM (`'pcm16'`, the default: samples clamped to [-1, 1] and rounded
   * to ±32767, half away from zero) or 32-bit float (`'float32'`), mono, at `samplingRate`; the 44-byte RIFF header then the
   * samples, little-endian, as a Buffer (a Uint8Array: the typings need no Node types). Errors: `InvalidArg`.
   */
  export function encodeWav(audio: Float32Array, samplingRate: number, options?: {
    format?: 'pcm16' | 'float32';
  }): Uint8Array;
}

/** One class in `torch.vision.classify`'s answer. */
export interface Classification {
  /** The class name: `labels[index]`. */
  label: string;
  /** The class index: the column of the model's logits. */
  index: number;
  /** Its softmax probability over all the model's classes, in [0, 1]. */
  probability: number;
}

/** Options of `torch.vision.classify`; any other key is refused (`InvalidArg`). */
export interface ClassifyOptions {
  /**
   * How many classes per image, most probable first (default 5; at most the model's
   * class count).
   */
  topk?: number;
  /**
   * One name per class, in logit order (default `imagenetLabels`); its
   * length must equal the model's class count.
   */
  labels?: readonly string[];
  /**
   * `torch.image` options for image sources, replacing (not merged with)
   * the default `{ resize: 256, centerCrop: 224, mean: 'imagenet' }`; refused with a Tensor input.
   */
  preprocess?: ImageOptions;
  /**
   * Aborting rejects with code `Aborted`; a forward already running finishes and
   * its output is dropped.
   */
  signal?: AbortSignal;
}

export declare namespace vision {
  /**
   * Classifies images with a module that returns logits `[N, classes]`: resolves to one array per
   * image, in input order (a single image gives an array of one), of `{label, index, probability}`,
   * most probable first. `images`: a path, a Buffer/Uint8Array, an array of them (loaded off the
   * event loop into one batch with `preprocess`), or a ready input Tensor `[N, 3, H, W]` used as it
   * is (and not disposed). Errors reject: `InvalidArg`, `InvalidImage`, `ShapeMismatch` (logits not
   * `[N, classes]`), `Aborted`, or the model's own.
   */
  export function classify(module: ScriptModule, images: string | Uint8Array | Array<string | Uint8Array> | Tensor, options?: ClassifyOptions): Promise<Classification[][]>;
}

/** A tensor's name, datatype and shape in the Open Inference Protocol's model metadata. */
export interface TensorMetadata {
  name: string;
  /**
   * `'BOOL' | 'UINT8' | 'INT8' | 'INT16' | 'INT32' | 'INT64' | 'FP16' | 'FP32' | 'FP64' |
   * 'BF16'` (or another the server names).
   */
  datatype: string;
  /** Sizes, one per dim; -1 where a size varies. */
  shape: number[];
}

/** Options of `RemoteModule.load`; any other key is refused (`InvalidArg`). */
export interface RemoteModuleOptions {
  /** `'http'` (default) or `'grpc'` (implied by a `grpc://` url). */
  protocol?: 'http' | 'grpc';
  /**
   * HTTP: raw tensor bytes (the binary tensor extension, default true) or JSON number
   * arrays (false). gRPC always sends raw bytes.
   */
  binary?: boolean;
  /** The model version to call (default: the server's choice). */
  version?: string | number;
  /**
   * Extra request headers (HTTP) or metadata (gRPC), e.g. an
   * authorization token.
   */
  headers?: Record<string, string>;
  /** Bounds each request (`Unavailable` when the server does not answer in time). */
  timeoutMs?: number;
  /** Aborting rejects with `Aborted`. */
  signal?: AbortSignal;
}

/** Options of one `RemoteModule.forward` call, as its last argument. */
export interface RemoteCallOptions {
  signal?: AbortSignal;
  timeoutMs?: number;
}

/**
 * A model served by an Open Inference Protocol (KServe v2) server — Triton, KServe, or
 * `torch.oip.serve` — called as a ScriptModule is. Errors: `InvalidArg`, `ShapeMismatch`,
 * `DTypeMismatch` (inputs checked against the metadata before any request), `RemoteError`
 * (the server's 4xx/5xx, with `status`), `Unavailable`, `ModelNotFound`, `Aborted`, `Disposed`.
 */
export declare class RemoteModule {
  #private;
  /** Use `await RemoteModule.load(url, modelName, options)`. */
  private constructor();
  /** The model's name on the server. */
  get name(): string;
  /** The version asked for (undefined: the server's choice). */
  get version(): string | undefined;
  /** The server the module calls: `http://host:port` or `grpc://host:port`. */
  get url(): string;
  /** The model's inputs, in the order positional `forward` arguments take. */
  get inputs(): readonly TensorMetadata[];
  /** The model's outputs. */
  get outputs(): readonly TensorMetadata[];
  /**
   * Connects to `modelName` at `url` (`http://host:port`; gRPC: `host:port` with `protocol: 'grpc'`, or
   * `grpc://host:port`) and reads its metadata. Errors: `Unavailable` (unreachable, not ready, no answer within
   * `timeoutMs`), `ModelNotFound` (an unknown model or version), `Aborted`.
   */
  static load(url: string, modelName: string, options?: RemoteModuleOptions): Promise<RemoteModule>;
  /**
   * Runs the model remotely: positional tensors (in metadata order), or `{inputName: tensor}`; a last
   * `{signal, timeoutMs}` is the call's options. One output as a Tensor, several keyed by name.
   */
  forward(...args: Tensor[] | [...Tensor[], RemoteCallOptions] | [Record<string, Tensor>] | [Record<string, Tensor>, RemoteCallOptions]): Promise<Tensor | Record<string, Tensor>>;
  /** Closes its connections; later calls reject with `Disposed`. */
  dispose(): void;
  get isDisposed(): boolean;
  [Symbol.dispose](): void;
}

/**
 * A model `torch.oip.serve` serves, with what its metadata needs: `example`, or the inputs'
 * shapes. What is not declared is learnt by forwards at start (batch 1 and 2); a bare module
 * or path is refused (`InvalidArg`) since neither records its input shapes.
 */
export interface ServedModel {
  model: ScriptModule | AOTModule | Batcher<any> | string;
  /**
   * The inputs' metadata (shape: -1 where a size varies); name
   * defaults to the forward's argument names, datatype to `'FP32'`. Any other key is refused (`InvalidArg`).
   */
  inputs?: Array<Partial<TensorMetadata>>;
  /**
   * The outputs' metadata; what is left out is learnt from the
   * model (names `OUTPUT__i`, or a dict output's keys).
   */
  outputs?: Array<Partial<TensorMetadata>>;
  /** The version the server reports (default `'1'`). */
  version?: string | number;
  /**
   * The inputs of one call: run at start, as given and with their rows
   * doubled, to learn datatypes and shapes.
   */
  example?: Tensor | Tensor[];
}

/** Options of `torch.oip.serve` and `torch.oip.router`; any other key is refused (`InvalidArg`). */
export interface OipServeOptions {
  models: Record<string, ServedModel>;
  /** HTTP port (default 0: any free one). */
  port?: number;
  /** Address to bind (default `'127.0.0.1'`; `'0.0.0.0'` to face the network). */
  host?: string;
  /**
   * Largest request body accepted (default 64 MiB; bigger: 413 before it is
   * buffered).
   */
  maxBodyBytes?: number;
  /** Also serve gRPC (`inference.GRPCInferenceService`) on this port (0: any free one). */
  grpcPort?: number;
}

/** A running protocol server. */
export interface OipServer {
  url: string;
  port: number;
  /** `host:port` of the gRPC server, when `grpcPort` was given. */
  grpcUrl?: string;
  grpcPort?: number;
  /** The underlying `http.Server`. */
  server: {
    close(callback?: () => void): unknown;
  };
  /** Stops listening; resolves once both servers closed. */
  close: () => Promise<void>;
}

/** Options of `torch.oip.writeTritonRepository`; any other key is refused (`InvalidArg`). */
export interface TritonRepositoryOptions {
  /** The model's name in the repository. */
  name: string;
  /** A ScriptModule or a `.pt` file's path; saved as `<name>/1/model.pt`. */
  model: ScriptModule | string;
  /** Triton's `max_batch_size` (default 8 when the model runs at batch 2, else 0). */
  maxBatchSize?: number;
  /**
   * Names (default `INPUT__i`), datatypes, and sizes: Triton's `dims` (without the batch dim
   * when batching) or the protocol's `shape` (every size, the batch dim included); -1: a size
   * that varies. Any other key is refused (`InvalidArg`).
   */
  inputs?: Array<string | {
    name?: string;
    datatype?: string;
    dims?: number[];
    shape?: number[];
  }>;
  /** Names (default `OUTPUT__i`); datatypes and sizes, if given, must fit what the model returns. */
  outputs?: Array<string | {
    name?: string;
    datatype?: string;
    dims?: number[];
    shape?: number[];
  }>;
  dynamicBatching?: {
    maxQueueDelayMicroseconds?: number;
    preferredBatchSize?: number[];
  };
  /** CPU instances (`instance_group`). */
  instances?: number;
  /** The inputs of one batch-1 call, run at batch 1 and 2 to check the config. */
  example?: Tensor | Tensor[];
}

/** What `writeTritonRepository` wrote. */
export interface TritonModelConfig {
  name: string;
  maxBatchSize: number;
  inputs: Array<{
    name: string;
    datatype: string;
    dims: number[];
  }>;
  outputs: Array<{
    name: string;
    datatype: string;
    dims: number[];
  }>;
  /** The model's folder. */
  path: string;
}

/** The Open Inference Protocol (KServe v2) on the server side, and Triton model repositories. */
export declare namespace oip {
  /** Starts an HTTP (and gRPC) protocol server for `models`. */
  export function serve(options: OipServeOptions): Promise<OipServer>;
  /** A `(req, res, next)` handler for the protocol's `/v2` routes in an existing Express or `http` server. */
  export function router(options: Omit<OipServeOptions, 'port' | 'host' | 'grpcPort'>): (req: object, res: object, next?: () => void) => Promise<void>;
  /**
   * Writes `dir/<name>/config.pbtxt` (`pytorch_libtorch`) and `dir/<name>/1/model.pt`, checked against the model at
   * batch 1 and 2.
   */
  export function writeTritonRepository(dir: string, options: TritonRepositoryOptions): TritonModelConfig;
}

/**
 * A model folder `torch.serve` loads, with its load options: a causal LM's (`CausalLM.load`:
 * `dtype`, `maxSequences`, `maxQueue`, `maxContext`) or a sentence encoder's or classifier's
 * (`SentenceEncoder.load`, `torch.pipeline`: `dtype`, `maxBatchSize`, `maxDelayMs`, `maxQueue`). The
 * kind is read from the folder's manifest.json.
 */
export interface ServeModelSpec {
  /** A folder written by `npx torch-node export`. */
  folder: string;
  dtype?: 'float32' | 'bfloat16' | 'float16';
  /** Causal LMs: sequences generating at once. */
  maxSequences?: number;
  /** Causal LMs: the most tokens of a sequence. */
  maxContext?: number;
  /**
   * Requests waiting before `QueueFull` (HTTP 503); Whisper: requests in flight
   * past 1 + `maxQueue` (default 64).
   */
  maxQueue?: number;
  /** Sentence encoders and classifiers: texts per forward (default 32). */
  maxBatchSize?: number;
  /** Sentence encoders and classifiers: how long a batch waits to fill (default 2). */
  maxDelayMs?: number;
  /** Whisper: at most this many tokens a transcript (default: the folder's bound). */
  maxNewTokens?: number;
  /**
   * Whisper: longer audio is a 400 (default 1200 s, at most 10800). Text to
   * speech: longer speech is a 400 (default 600 s, at most 3600).
   */
  maxDurationS?: number;
  /** Text to speech: the longest input in characters (default 4096). */
  maxChars?: number;
  /**
   * Causal LMs: a chat template (Jinja text) to use instead of the folder's,
   * e.g. one that renders tools for a model whose own does not (`CausalLM.load`'s `chatTemplate`; the CLI's
   * `--chat-template NAME=FILE`).
   */
  chatTemplate?: string;
  /**
   * Causal LMs:
   * speculative decoding by prompt lookup (`CausalLM.load`'s `speculative`; the CLI's `--speculative`); the
   * drafted and accepted tokens are on `/metrics`.
   */
  speculative?: {
    method: 'prompt-lookup';
    maxDraft?: number;
    ngram?: number;
  };
  /**
   * Causal LMs: keep prompts' keys and values, up to `maxTokens`
   * in all, for later prompts that start the same (`CausalLM.load`'s `prefixCache`; on in `torch.serve` with
   * `maxTokens: 8192` unless given; `{ maxTokens: 0 }` turns it off).
   */
  prefixCache?: {
    maxTokens: number;
  };
}

/** Options of `torch.serve`; any other key is refused (`InvalidArg`). */
export interface ServeOptions {
  /**
   * The models by the name clients send as `model`:
   * a folder, or a folder with load options.
   */
  models: Record<string, string | ServeModelSpec>;
  /** The address to bind (default `'127.0.0.1'`; `'0.0.0.0'` to face the network). */
  host?: string;
  /** The port (default 0: any free one). */
  port?: number;
  /** Requests to `/v1/*` must send `Authorization: Bearer <apiKey>` (401 otherwise). */
  apiKey?: string;
  /** The limits on one request. */
  limits?: ServeLimits;
  /**
   * Fetch http(s) image URLs in chats (`image_url`, `input_image`,
   * Anthropic `image` blocks) and CLIP embeddings requests (`image_url` parts):
   * `true` from any host, or only from these hosts and their subdomains (vLLM's `--allowed-media-domains`);
   * at most `limits.maxImageBytes` within `limits.imageFetchTimeoutMs`, 3 redirects (each host checked), an
   * `image/*` answer. Default `false`: such a URL is a 400 (send `data:` URLs).
   */
  fetchImages?: boolean | string[];
  /**
   * Load every model on its first request rather than at start (default false:
   * the first `maxLoaded` models load at start, and a failure there rejects `serve`).
   */
  lazy?: boolean;
  /**
   * Models loaded at once (default: all). A request for another waits until
   * the least recently used one that runs nothing is unloaded; if all are busy, the least recently used one
   * takes no new requests until its running ones end.
   */
  maxLoaded?: number;
  /**
   * Unload a model after this long without requests (default 0: never); the next
   * request loads it again.
   */
  idleMs?: number;
  /**
   * Bytes the models loaded at once may take (default: no bound), counting each as
   * its folder's files plus, for a causal LM, its prefix cache's bound in keys and values. Before a load that
   * would pass it, the least recently used models that run nothing are unloaded (a busy one drains first); a
   * model larger than it alone is a 500 `ModelTooLarge`.
   */
  maxMemory?: number;
}

/** A model `torch.serve` loaded: a causal LM, a sentence encoder, a classifier's or Whisper's pipeline. */
export type ServeLoadedModel = text.CausalLM | text.SentenceEncoder | TextClassificationPipeline | TextRankingPipeline | audio.SpeechRecognitionPipeline | audio.TextToSpeechPipeline;

/** A running `torch.serve` server. */
export interface OpenAIServer {
  /** `http://host:port`; the OpenAI clients' `baseURL` is `url + '/v1'`. */
  url: string;
  port: number;
  /** The underlying `http.Server`. */
  server: {
    close(callback?: () => void): unknown;
  };
  /**
   * The models by name, as loaded now: a model not loaded
   * (`lazy`, `maxLoaded`, `idleMs`) reads `undefined` until a request loads it.
   */
  models: Record<string, ServeLoadedModel>;
  /**
   * Stops accepting requests, lets
   * those running finish for up to `timeoutMs` (default 10 000), then aborts the rest (a stream gets an error
   * event and ends), closes the connections and disposes the models.
   */
  close: (options?: {
    timeoutMs?: number;
  }) => Promise<void>;
}

/** The limits on one request (`limits` of `torch.serve`). */
export interface ServeLimits {
  /** The largest chat or completions body (default 4 MiB; bigger: 413). */
  maxBodyBytes?: number;
  /** The largest embeddings body (default 16 MiB). */
  maxEmbeddingsBodyBytes?: number;
  /** Messages of one chat (default 1024). */
  maxMessages?: number;
  /** Stop strings (default 4, as OpenAI). */
  maxStops?: number;
  /** Tools of one request (default 128, as OpenAI). */
  maxTools?: number;
  /** Texts of one embeddings request (default 2048, as OpenAI). */
  maxItems?: number;
  /** Characters of one text to embed (default 32768). */
  maxChars?: number;
  /**
   * The largest image fetched from an http(s) URL (default 20 MiB, as
   * OpenAI's); with `fetchImages` only.
   */
  maxImageBytes?: number;
  /**
   * How long fetching one image may take, redirects included
   * (default 10 000); with `fetchImages` only.
   */
  imageFetchTimeoutMs?: number;
  /**
   * Images of one chat request (`image_url`, `input_image`, `image` parts, data:
   * or http(s)) and http(s) images of one embeddings request (default 32).
   */
  maxImages?: number;
}

/**
 * Loads the model folders (off the event loop, at start or on demand) and serves them with OpenAI's API:
 * `POST /v1/chat/completions`, `/v1/completions`, `/v1/responses` (OpenAI's Responses API) and
 * `/v1/messages` (Anthropic's Messages API) for causal LMs, `/v1/embeddings` (sentence encoders),
 * `/v1/rerank` and `/v1/score` (rerankers), `/v1/classify` (classifiers), `/v1/audio/transcriptions` and
 * `/v1/audio/translations` (Whisper, multipart/form-data); `GET /v1/models`,
 * `/health`, `/metrics`. The models load at start unless `lazy` (then each on its first request); a
 * load that fails at start rejects, one that fails later is a 500 for the requests that waited on it.
 * See docs/serving.md. Errors: `InvalidArg`, `ModelLoadError` (and a model's own load errors), and the
 * listen error (`EADDRINUSE`).
 */
export declare function serve(options: ServeOptions): Promise<OpenAIServer>;

// ---- Generated below by `npm run typings` from the Rust doc comments (scripts/build.js): edit those, not this part. ----

export type TypedArray =
  | Int8Array
  | Uint8Array
  | Uint8ClampedArray
  | Int16Array
  | Uint16Array
  | Int32Array
  | Uint32Array
  | Float32Array
  | Float64Array
  | BigInt64Array
  | BigUint64Array

/**
 * A compiled `torch.export` program from a `.pt2` package (AOTInductor). Tensors in, tensors
 * out: one output is a Tensor, several an array of them. Each call checks its inputs against
 * what the package's generated code records (dtype, rank, sizes, the range of each dynamic
 * size, sizes shared by inputs) and refuses a mismatch with `DTypeMismatch`/`ShapeMismatch`;
 * a dynamic size of 1 runs, as in Python.
 */
export declare class AOTModule {
  /** Loads a `.pt2` package synchronously (blocking the event loop; prefer `AOTModule.load`). */
  constructor(path: string, options?: { device?: Device })
  /** Loads a `.pt2` package on the executor (extracting and loading its compiled code). */
  static load(path: string, options?: AotModuleOptions | undefined | null): Promise<AOTModule>
  /**
   * Runs the program on the executor; resolves to its output (a Tensor, or an array
   * of Tensors). A last argument `{signal}` aborts as in `ScriptModule.forward`.
   */
  forward<T extends Tensor | Tensor[] = Tensor>(...inputs: Tensor[] | [...Tensor[], CallOptions]): Promise<T>
  /** Runs the program on the executor while the calling thread waits. */
  forwardSync<T extends Tensor | Tensor[] = Tensor>(...inputs: Tensor[]): T
  /**
   * What the package records: AOTInductor's metadata (`AOTI_DEVICE_KEY`, ...) and the pytree
   * specs of the program's inputs and outputs (`in_spec`, `out_spec`, JSON).
   */
  metadata(): Record<string, string>
  /** The device the package runs on. */
  get device(): Device
  /** True once `dispose()` has run. */
  get isDisposed(): boolean
  /** Releases the package. Calls already running finish first; later calls throw `Disposed`. */
  dispose(): void
}
/** A TorchScript module (from `torch.jit.trace` or `torch.jit.script` + `torch.jit.save`). */
export declare class ScriptModule {
  /**
   * Loads a module synchronously (blocking the event loop; prefer `ScriptModule.load` in
   * servers): `new ScriptModule('model.pt')`, `new ScriptModule(buffer, {device: 'cuda'})`.
   */
  constructor(source: string | Uint8Array, options?: ModuleOptions)
  /** Loads a module on torch-node's executor threads, without blocking the event loop. */
  static load(source: Source, options?: ModuleOptions | undefined | null): Promise<ScriptModule>
  /**
   * Runs `forward` on torch-node's executor threads (see `torch.setInstances`); resolves to its output (a Tensor, number,
   * string, array, object, Map or null). Numbers follow the method's schema (int or float).
   * A last argument `{signal}` (an AbortSignal) is the call's options, not an input:
   * aborting rejects with code `Aborted` (a call already running finishes first).
   */
  forward<T extends IValue = Tensor>(...inputs: IValue[] | [...IValue[], CallOptions]): Promise<T>
  /**
   * Runs `forward` and returns its output; the calling thread waits while an executor thread
   * runs it (so libtorch's thread teams stay the executor's).
   */
  forwardSync<T extends IValue = Tensor>(...inputs: IValue[]): T
  /**
   * Runs another method (one exported with `@torch.jit.export`) on the executor; takes a
   * last `{signal}` argument as `forward` does.
   */
  runMethod<T extends IValue = Tensor>(name: string, ...inputs: IValue[] | [...IValue[], CallOptions]): Promise<T>
  /** Runs another method; the calling thread waits for the executor. */
  runMethodSync<T extends IValue = Tensor>(name: string, ...inputs: IValue[]): T
  /**
   * A method's declared signature (default `forward`): its arguments after `self`, with
   * TorchScript's type annotations, and its return type, e.g.
   * `{name: 'forward', args: [{name: 'x', type: 'Tensor', hasDefault: false}], returns: 'Tensor'}`.
   * Unknown methods: `MethodNotFound`.
   */
  signature(method?: string | undefined | null): MethodSignature
  /** The module's methods: `forward` and every `@torch.jit.export`ed one. */
  methodNames(): Array<string>
  /**
   * Parameters by qualified name (`{'fc.weight': Tensor, ...}`), in registration order.
   * The tensors share memory with the module.
   */
  namedParameters(): Record<string, Tensor>
  /** The parameters, in registration order. */
  parameters(): Array<Tensor>
  /** The total number of parameter elements. */
  numParameters(): number
  /**
   * Moves parameters and buffers to a device (`'cpu'`, `'cuda'`, `'cuda:N'`); inputs must
   * then be on that device too. Waits for calls in flight to finish.
   */
  to(device: Device): void
  /** Inference mode for dropout and batch norm (modules saved from `model.eval()` already are). */
  eval(): void
  /** Training mode for dropout and batch norm. */
  train(): void
  /** Whether the module is in training mode. */
  get isTraining(): boolean
  /** The device the module was loaded on or last moved to. */
  get device(): Device
  /** Saves the module as a TorchScript file (loadable from Python with `torch.jit.load`). */
  save(path: string): void
  /** True once `dispose()` has run. */
  get isDisposed(): boolean
  /**
   * Releases the module. Calls already running finish first (they hold their own
   * reference); later calls throw `Disposed`.
   */
  dispose(): void
}
/**
 * A tensor: a view (shape, strides, offset, dtype) onto storage owned by libtorch, on the CPU
 * or a CUDA device. Create one with `torch.tensor`, `torch.ones`, ...; free it early with
 * `dispose()` (otherwise the garbage collector frees it).
 */
export declare class Tensor {
  /** Not for users: tensors come from `tensor`, `ones`, `fromBuffer`, ... (`new Tensor()` throws `InvalidArg`). */
  private constructor()
  /**
   * Computes gradients of this tensor with respect to the leaves that require grad; they
   * accumulate in each leaf's `grad`. A non-scalar tensor needs `gradient` (same shape).
   */
  backward(gradient?: Tensor | undefined | null): void
  /** The gradient accumulated by `backward()`, or null. */
  get grad(): Tensor | null
  /** A view sharing this tensor's storage, cut from autograd. */
  detach(): Tensor
  /** In place: turns gradient recording on (default) or off for this leaf tensor. */
  requiresGrad_(requiresGrad?: boolean | undefined | null): this
  /**
   * A TypedArray over this tensor's own memory (no copy): writes on either side are seen
   * by the other, and the memory stays alive while the array does, even after `dispose()`.
   * Copies instead (like `toTypedArray`) when aliasing is impossible: a CUDA tensor, a
   * non-contiguous view, an empty tensor, a runtime that refuses external buffers, or over
   * 4 GiB on Node 20.
   */
  asTypedArray(): TensorTypedArray
  /**
   * The values as nested arrays (a number or boolean for a 0-dim tensor). int64 values
   * beyond ±2^53 lose precision as JS numbers: use `toTypedArray()` (BigInt64Array) for those.
   */
  toArray(): NestedArray
  /**
   * A copy of the elements, row-major, in the dtype's TypedArray: Float32Array, Float64Array,
   * Int8Array, Uint8Array (uint8 and bool), Int16Array, Int32Array, BigInt64Array (int64),
   * Uint16Array (float16 and bfloat16 raw bits).
   */
  toTypedArray(): TensorTypedArray
  /** The value of a one-element tensor as a number (boolean for bool). */
  item(): number | boolean
  /**
   * PyTorch's repr, e.g. `tensor([[1., 1.]])`, `tensor([1, 2], dtype=torch.int32)`;
   * also what `console.log` and `util.inspect` show.
   */
  toString(): string
  /** `this + other`, broadcasting. */
  add(other: Operand): Tensor
  /** `this - other`. */
  sub(other: Operand): Tensor
  /** `this * other`, element-wise. */
  mul(other: Operand): Tensor
  /** `this / other` (true division: integer inputs give float results). */
  div(other: Operand): Tensor
  /** Element-wise `==`, a bool tensor. */
  eq(other: Operand): Tensor
  /** Element-wise `!=`. */
  ne(other: Operand): Tensor
  /** Element-wise `<`. */
  lt(other: Operand): Tensor
  /** Element-wise `<=`. */
  le(other: Operand): Tensor
  /** Element-wise `>`. */
  gt(other: Operand): Tensor
  /** Element-wise `>=`. */
  ge(other: Operand): Tensor
  /** e^x. */
  exp(): Tensor
  /** Natural logarithm. */
  log(): Tensor
  /** Square root. */
  sqrt(): Tensor
  /** Absolute value. */
  abs(): Tensor
  /** Negation. */
  neg(): Tensor
  /** max(x, 0). */
  relu(): Tensor
  /** 1 / (1 + e^-x). */
  sigmoid(): Tensor
  /** Hyperbolic tangent. */
  tanh(): Tensor
  /** Rounds half to even, as PyTorch does. */
  round(): Tensor
  /** Rounds down. */
  floor(): Tensor
  /** Rounds up. */
  ceil(): Tensor
  /** In place: `this += other`. Returns this tensor. */
  add_(other: Operand): this
  /** In place: `this -= other`. */
  sub_(other: Operand): this
  /** In place: `this *= other`. */
  mul_(other: Operand): this
  /** In place: `this /= other` (the tensor must be floating). */
  div_(other: Operand): this
  /** `this ** exponent` (a copy; `pow_` writes in place). */
  pow(exponent: Operand): Tensor
  /** Matrix product with PyTorch's `matmul` broadcasting rules. */
  matmul(other: Tensor): Tensor
  /**
   * Where the bool `condition` holds this element, else `other`'s: PyTorch's
   * `x.where(condition, y)` (= `torch.where(condition, x, y)`).
   */
  where(condition: Tensor, other: Operand): Tensor
  /** Limits values to [min, max]; either bound may be null. */
  clamp(min?: number | undefined | null, max?: number | undefined | null): Tensor
  /**
   * The sum of all elements, or over `dim` (a number or an array), keeping reduced dims
   * as size 1 with `keepdim`.
   */
  sum(dim?: Dims | undefined | null, keepdim?: boolean | undefined | null): Tensor
  /** The mean of all elements, or over `dim` (floating tensors). */
  mean(dim?: Dims | undefined | null, keepdim?: boolean | undefined | null): Tensor
  /**
   * `max()`: the largest element. `max(dim, keepdim?)`: `{values, indices}` along `dim`.
   * `max(other)`: the element-wise maximum with a tensor.
   */
  max(dimOrOther?: Operand | undefined | null, keepdim?: boolean | undefined | null): Tensor | ValuesIndices
  /** `min()`, `min(dim, keepdim?)`, `min(other)`: as `max`. */
  min(dimOrOther?: Operand | undefined | null, keepdim?: boolean | undefined | null): Tensor | ValuesIndices
  /** Sorted values along `dim` (default: the last) and where they came from. */
  sort(dim?: Dim | undefined | null, descending?: boolean | undefined | null): ValuesIndices
  /** In place: `this **= exponent`. */
  pow_(exponent: Operand): this
  /** In place: `this = other` (broadcast, cast to this dtype), writing through to storage. */
  copy_(src: Operand): this
  /** In place: limits values to [min, max]. */
  clamp_(min?: number | undefined | null, max?: number | undefined | null): this
  /** In place: every element becomes `value`. */
  fill_(value: Operand): this
  /** In place: every element becomes 0. */
  zero_(): this
  /**
   * A copy on another device and/or with another dtype: `to('cuda')`, `to('float16')`,
   * `to({device: 'cpu', dtype: 'float32'})`. Returns a tensor sharing memory with this one
   * when nothing changes, as PyTorch does.
   */
  to(target: ToTarget): Tensor
  /** A copy in CPU memory (this tensor when it already is there). */
  cpu(): Tensor
  /** A copy on a CUDA device (default `cuda:0`); `DeviceUnavailable` where there is none. */
  cuda(device?: Device | undefined | null): Tensor
  /** Softmax along `dim` (default: the last). */
  softmax(dim?: Dim | undefined | null): Tensor
  /** Log-softmax along `dim` (default: the last). */
  logSoftmax(dim?: Dim | undefined | null): Tensor
  /** Index of the largest value: over all elements (flattened), or along `dim`. */
  argmax(dim?: Dim | undefined | null, keepdim?: boolean | undefined | null): Tensor
  /** Index of the smallest value: over all elements (flattened), or along `dim`. */
  argmin(dim?: Dim | undefined | null, keepdim?: boolean | undefined | null): Tensor
  /** The `k` largest values along `dim` (default: the last), sorted, with their indices. */
  topk(k: number, dim?: Dim | undefined | null): ValuesIndices
  /** Elements to step over in storage to move one position along each dimension. */
  get strides(): Array<number>
  /** Where this view starts in its storage, in elements. */
  get storageOffset(): number
  /** Whether the elements lie in storage in row-major order with no gaps. */
  isContiguous(): boolean
  /** Whether both tensors are views of the same storage. */
  sharesStorage(other: Tensor): boolean
  /** A 1-D view of the whole underlying storage (what Python prints for `t.storage()`). */
  storage(): Tensor
  /**
   * A view with another shape (one size may be -1); the tensor must be contiguous enough
   * for a view to exist — `reshape` copies when it is not. `view(2, 3)` or `view([2, 3])`.
   */
  view(...shape: Array<number | number[]>): Tensor
  /** Another shape: a view when possible, else a copy (as in PyTorch). */
  reshape(...shape: Array<number | number[]>): Tensor
  /** Swaps two dimensions (a view: strides swap). */
  transpose(dim0: Dim, dim1: Dim): Tensor
  /** The transpose of a matrix (≤ 2 dims), as `t.t()` in PyTorch. */
  t(): Tensor
  /** Reorders dimensions: `permute(2, 0, 1)` or `permute([2, 0, 1])`. */
  permute(...dims: Array<number | number[]>): Tensor
  /** `length` elements of `dim` from `start` (a view). */
  narrow(dim: Dim, start: number, length: number): Tensor
  /** The slice at `index` of `dim`, without that dim: `a.select(0, 1)` is Python's `a[1]`. */
  select(dim: Dim, index: number): Tensor
  /**
   * Python slicing along `dim`: `a.slice(0, 1)` is `a[1:]`, `a.slice(1, 0, -1, 2)` is
   * `a[:, 0:-1:2]`; negative indices count from the end, out-of-range ends are clamped.
   */
  slice(dim: Dim, start?: number | undefined | null, end?: number | undefined | null, step?: number | undefined | null): Tensor
  /** Removes dimensions of size 1 (all, or just `dim`). */
  squeeze(dim?: Dim | undefined | null): Tensor
  /** Inserts a dimension of size 1 at `dim`. */
  unsqueeze(dim: Dim): Tensor
  /** Repeats size-1 dimensions without copying (stride 0); -1 keeps a size. */
  expand(...shape: Array<number | number[]>): Tensor
  /** Merges dims `startDim..=endDim` (default: all) into one; a view when possible. */
  flatten(startDim?: Dim | undefined | null, endDim?: Dim | undefined | null): Tensor
  /** Splits `dim` into `sizes` (one may be -1). */
  unflatten(dim: Dim, sizes: Sizes): Tensor
  /** Splits into `chunks` views along `dim` (default 0). */
  chunk(chunks: number, dim?: Dim | undefined | null): Array<Tensor>
  /** Splits along `dim` (default 0) into pieces of `size`, or of the listed sizes. */
  split(sizeOrSections: Shape, dim?: Dim | undefined | null): Array<Tensor>
  /** The diagonal (offset 0: main; > 0 above; < 0 below) of dims `dim1`, `dim2` (0, 1). */
  diagonal(offset?: number | undefined | null, dim1?: Dim | undefined | null, dim2?: Dim | undefined | null): Tensor
  /**
   * A view with explicit sizes, strides and storage offset (in elements). Unchecked
   * beyond the storage's bounds, which libtorch verifies.
   */
  asStrided(size: Shape, stride: Shape, storageOffset?: number | undefined | null): Tensor
  /** A copy with its own storage (autograd-tracked, as in PyTorch). */
  clone(): Tensor
  /** This tensor if already contiguous, else a row-major copy. */
  contiguous(): Tensor
  /** The elements where the bool `mask` (broadcast to this shape) is true, as a 1-D copy. */
  maskedSelect(mask: Tensor): Tensor
  /** The entries at the int64 `index` positions along `dim`, as a copy. */
  indexSelect(dim: Dim, index: Tensor): Tensor
  /** The size of each dimension, e.g. `[1, 3, 224, 224]`. */
  get shape(): Array<number>
  /** The element type: `'float32'`, `'int64'`, `'bool'`, ... */
  get dtype(): DType
  /** Where the tensor lives: `'cpu'` or `'cuda:N'`. */
  get device(): Device
  /** The number of dimensions. */
  get ndim(): number
  /** Whether autograd records operations on this tensor. */
  get requiresGrad(): boolean
  /** The number of elements (the product of the shape). */
  numel(): number
  /** True once `dispose()` has run. */
  get isDisposed(): boolean
  /**
   * Frees the tensor's memory now instead of at garbage collection. Idempotent; any later
   * use throws an error with code `Disposed`.
   */
  dispose(): void
}
/** Options for loading a `.pt2` package. */
export interface AotModuleOptions {
  /** `'cpu'` (default) for a package compiled for CPU; `'cuda'`/`'cuda:N'` for a CUDA one. */
  device?: Device
  /**
   * `AOTModule.load` only: aborting rejects with code `Aborted` (a load already running
   * finishes and its module is dropped).
   */
  signal?: AbortSignal
}

/**
 * `arange(end)`, `arange(start, end, step?)`: values from start (inclusive) to end
 * (exclusive). int64 when every bound is an integer (as in PyTorch), else float32.
 * Options may follow the last number given: `arange(5, {dtype: 'float32'})`.
 */
export declare function arange(start: number, end?: number | TensorOptions, step?: number | TensorOptions, options?: TensorOptions): Tensor

/** Joins tensors along an existing dim (default 0) into a new tensor (a copy). */
export declare function cat(tensors: Tensor[], dim?: Dim | undefined | null): Tensor

/**
 * Options of `CausalLM.generate`/`complete` read natively (`signal` and `timeoutMs` are
 * the JS wrapper's); defaults from `generation_config.json`; any other key is `InvalidArg`.
 */
export interface CausalLMGenerateOptions {
  /** The most tokens to generate (default 256 or the config's). */
  maxNewTokens?: number
  /** 0: greedy. */
  temperature?: number
  /** Keep the k likeliest tokens (0: off). */
  topK?: number
  /** Nucleus sampling, in (0, 1]. */
  topP?: number
  /** Drop tokens below minP × the likeliest one's probability. */
  minP?: number
  /** transformers' repetition penalty (1: off). */
  repetitionPenalty?: number
  /** The same seed gives the same tokens. */
  seed?: number
  /** Stop strings: matched across tokens, never emitted (`finishReason: 'stop'`). */
  stop?: string | string[]
  /**
   * What the output must be: JSON (any object, or valid against a schema), text of a
   * Lark grammar or a regex, or tool calls; enforced by a token mask at each step. See
   * docs/generation.md#structured-output.
   */
  responseFormat?: ResponseFormat
  /**
   * Report each token's log-probability: the log-softmax of the model's raw logits at its
   * step, before the penalty, temperature, top-k/p, min-p or `responseFormat` change them.
   */
  logprobs?: boolean
  /** With `logprobs`: the likeliest tokens at each step too, 0 to 20 (default 0). */
  topLogprobs?: number
  /**
   * With a chat prompt: the tools its chat template describes to the model (OpenAI's
   * function tools), rendered natively as transformers' `apply_chat_template(messages,
   * tools=tools)`; a template that reads no tools refuses them (`InvalidArg`).
   */
  tools?: ChatTool[]
  /**
   * A prompt and `maxNewTokens` that together pass the context are `InvalidArg` (vLLM's
   * 400) rather than cut at the context (`finishReason: 'length'`).
   */
  strictContext?: boolean
}

/** Options of `torch.text.CausalLM.load`; any other key is refused (`InvalidArg`). */
export interface CausalLMOptions {
  /** The export's dtype (the manifest's); another one is `InvalidArg`. */
  dtype?: 'float32' | 'bfloat16' | 'float16'
  /**
   * Sequences generating at once, sharing each decode step and one KV cache (default 4,
   * or the export's `--max-batch` when smaller; more than `--max-batch` is `InvalidArg`).
   */
  maxSequences?: number
  /**
   * Calls waiting for a sequence slot before `QueueFull` (default 64; `Infinity` for no
   * bound).
   */
  maxQueue?: number
  /**
   * The most tokens of a sequence, prompt and output (default and upper bound: the
   * exported limit).
   */
  maxContext?: number
  /**
   * Keeps prompts' keys and values for later prompts that start the same (a system
   * prompt, a chat history), in a radix tree of 16-token blocks where a shared start is
   * held once: `{maxTokens}` bounds the tokens held (least recently used leaves first out;
   * memory: maxTokens × layers × 2 × kv heads × head dim × the dtype's bytes). Off by
   * default (`torch-node serve` turns it on). See `stats().prefixCache`.
   */
  prefixCache?: { maxTokens: number }
  /**
   * Speculative decoding by prompt lookup: each step, each sequence proposes up to
   * `maxDraft` tokens (default 5, at most 15) that followed the latest earlier occurrence
   * of its last `ngram` tokens (default 3, then shorter), and the model checks them in
   * the same call: greedy output is the same as without, sampled output has the same
   * distribution. Faster where the output quotes the prompt (summaries, extraction,
   * edits). Needs a model exported by this version (manifest format 2). See
   * `stats().speculative` and docs/generation.md#speculative-decoding.
   */
  speculative?: { method: 'prompt-lookup'; maxDraft?: number; ngram?: number }
  /**
   * A chat template (Jinja) to use instead of the folder's (`chat_template.jinja` or
   * `tokenizer_config.json`'s): one that renders tools, for a model whose own does not.
   */
  chatTemplate?: string
}

/** Options of `CausalLM.tokenize`; any other key is refused (`InvalidArg`). */
export interface CausalLMTokenizeOptions {
  /** With a chat prompt: the tools its chat template describes (as `generate`'s). */
  tools?: ChatTool[]
}

/** Options of `Tokenizer.applyChatTemplate`; any other key is refused (`InvalidArg`). */
export interface ChatTemplateOptions {
  /** Ends with the header that starts the assistant's answer. Default `false`. */
  addGenerationPrompt?: boolean
  /** Tool (function) JSON schemas, for templates that support tools. */
  tools?: Record<string, unknown>[]
  /** Documents for retrieval-augmented templates. */
  documents?: Record<string, unknown>[]
  /** A template to use instead of the tokenizer's own. */
  chatTemplate?: string
  /** More variables the template reads (`enable_thinking`, `date_string`, ...). */
  variables?: Record<string, unknown>
}

/** Options of `torch.image.decode`; any other key is refused (`InvalidArg`). */
export interface DecodeOptions {
  /**
   * `true`: decode a file that is cut short instead of refusing it (`InvalidImage`); a
   * JPEG's missing rows come out grey.
   */
  allowTruncated?: boolean
}

/** A tensor with uninitialized contents (fast; fill it before reading). */
export declare function empty(shape: Shape, options?: FactoryOptions | undefined | null): Tensor

/** Options of `torch.image.encode`; any other key is refused (`InvalidArg`). */
export interface EncodeOptions {
  /** JPEG quality, 1 to 100 (default 90). */
  quality?: number
}

/** What the executor is doing: settings, queued and running calls. */
export declare function executorStats(): ExecutorStats

/** The executor's settings and load. */
export interface ExecutorStats {
  /** Calls that run at once (`setInstances`). */
  instances: number
  /** Intra-op threads of each instance (`setNumThreads`). */
  threads: number
  /** Calls waiting for a free instance. */
  queued: number
  /** Calls running now. */
  running: number
  /** Calls finished since the process started. */
  completed: number
}

/**
 * An identity matrix of n rows and m (default n) columns: `eye(3)`, `eye(2, 3)`,
 * `eye(3, {dtype: 'int64'})`.
 */
export declare function eye(n: number, m?: number | TensorOptions, options?: TensorOptions): Tensor

/**
 * A tensor over a TypedArray's (or an ArrayBuffer's / SharedArrayBuffer's) memory, without
 * copying: writes on either side are seen by the other. The memory stays alive while any
 * tensor that may alias it lives. `dtype` defaults to the array's own (float32 for a bare
 * ArrayBuffer or SharedArrayBuffer); `byteOffset` skips bytes. Do not transfer or detach
 * the buffer while tensors use it.
 */
export declare function fromBuffer(data: BufferData, shape: Shape, options?: FromBufferOptions | undefined | null): Tensor

/** Options of `fromBuffer`; any other key is refused (`InvalidArg`). */
export interface FromBufferOptions {
  /** The element type (default: the TypedArray's own; float32 for a bare ArrayBuffer). */
  dtype?: DType
  /** Bytes to skip at the start of the memory (a multiple of the dtype's size). */
  byteOffset?: number
}

/** A tensor filled with `value` (float32 for a number, bool for a boolean, unless `dtype`). */
export declare function full(shape: Shape, value: Scalar, options?: FactoryOptions | undefined | null): Tensor

/** The number of executor instances (calls that run at once). */
export declare function getInstances(): number

/** The intra-op threads each executor instance uses. */
export declare function getNumThreads(): number

/** Options of `torch.image.load`, `loadSync` and `loadBatch`. */
export interface ImageOptions {
  /**
   * A number: the shorter side becomes this many pixels, the aspect ratio kept, as
   * `transforms.Resize(int)`; `[height, width]`: exactly that size.
   */
  resize?: number | [number, number]
  /** A number (a square) or `[height, width]`, cut from the center as `transforms.CenterCrop`. */
  centerCrop?: number | [number, number]
  /** Per-channel mean subtracted after scaling to [0, 1], or `'imagenet'` (with its std). */
  mean?: [number, number, number] | 'imagenet'
  /** Per-channel standard deviation divided by (or `'imagenet'`). */
  std?: [number, number, number] | 'imagenet'
  /** `'nchw'` (default: `[1, 3, H, W]`), `'nhwc'`, or `'chw'`/`'hwc'` without the batch dim. */
  layout?: 'nchw' | 'nhwc' | 'chw' | 'hwc'
  /** `'float32'` (default: [0, 1], then normalized) or `'uint8'` (0..255). */
  dtype?: 'float32' | 'uint8'
  /**
   * `true`: decode a file that is cut short instead of refusing it with `InvalidImage`
   * (PIL's `LOAD_TRUNCATED_IMAGES`): a JPEG's missing rows come out grey. Default `false`.
   */
  allowTruncated?: boolean
}

/**
 * The libtorch version this addon was built against, `'major.minor'` (e.g. `'2.13'`): files
 * it saves load in libtorch (or PyTorch) of that version or newer. The full version is
 * `torch.version`.
 */
export declare function libtorchVersion(): string

/** `steps` values evenly spaced from `start` to `end`, both included. */
export declare function linspace(start: number, end: number, steps: number, options?: FactoryOptions | undefined | null): Tensor

/**
 * Loads a shared library of custom ops into the process (as Python's
 * `torch.ops.load_library`): its `TORCH_LIBRARY` registrations run, and TorchScript modules
 * loaded afterwards can call its ops. Kept loaded; loading the same file again does nothing.
 * Returns whether this call loaded it. Errors: `LibraryLoadError` (a missing file, unresolved
 * symbols — named —, a registration that failed).
 */
export declare function loadLibrary(path: string): boolean

/** Seeds libtorch's random number generators (CPU and CUDA), as `torch.manual_seed`. */
export declare function manualSeed(seed: number): void

/** How many tensors are alive and how many bytes their elements take. */
export declare function memory(): MemoryInfo

/** Live tensors (JS `Tensor` objects not yet disposed or collected) and their element bytes. */
export interface MemoryInfo {
  tensors: number
  bytes: number
}

/** One argument of a TorchScript method. */
export interface MethodArg {
  /** The argument's name in the Python source (`x`, `input_ids`; traced modules: as traced). */
  name: string
  /** TorchScript's annotation: `Tensor`, `int`, `float`, `List[Tensor]`, `Dict[str, Tensor]`, ... */
  type: string
  /** Whether the argument has a default value (it may be left out). */
  hasDefault: boolean
}

/** A TorchScript method's signature (`ScriptModule.signature()`). */
export interface MethodSignature {
  /** The method's name. */
  name: string
  /** Its arguments after `self`, in order. */
  args: Array<MethodArg>
  /** Its return type's annotation (`Tensor`, `Tuple[Tensor, Tensor]`, `Dict[str, Tensor]`, ...). */
  returns: string
}

/** Options for loading a module. */
export interface ModuleOptions {
  /** Device to load parameters onto: `'cpu'` (default), `'cuda'`, `'cuda:N'`. */
  device?: Device
  /**
   * The most bytes of tensor data the file may declare (default 16 GiB): checked, with every
   * storage record against its declared size, before libtorch reads the file.
   */
  maxBytes?: number
  /**
   * Prepares the module for inference: `torch.jit.freeze` (parameters become constants) and
   * `torch.jit.optimize_for_inference` (conv/batch-norm folding, oneDNN prepacked weights),
   * as in Python. Same outputs to float rounding; a frozen module cannot `to()`, `train()` or
   * `save()`, and has no `parameters()`. `'fuse'`: freezing and oneDNN Graph fusion instead
   * (faster on CPU; needs `example`: the fusion happens during the warm-up calls).
   */
  optimize?: boolean | 'fuse'
  /**
   * Converts conv weights and 4-D inputs to the channels-last memory format (faster oneDNN
   * convolutions on CPU); outputs may come back channels-last (same values and shape).
   */
  channelsLast?: boolean
  /**
   * `'float32'` (default) or `'bfloat16'`: floating weights converted to bf16, floating
   * inputs cast in, bf16 outputs cast back to float32. About 3 significant digits; on a CPU
   * only where it computes bf16 natively (AVX512-BF16 or AMX: see
   * `torch.cpu.capabilities()`), else `DeviceUnavailable`.
   */
  dtype?: 'float32' | 'bfloat16'
  /**
   * Runs `forward(...example)` this many times at load (default 2 when `example` is given):
   * TorchScript optimizes a method's graph after its first calls, which are slow.
   */
  warmup?: number
  /** The inputs of one `forward` call (a Tensor, or an array of inputs) for `warmup`. */
  example?: Tensor | IValue[]
  /**
   * `ScriptModule.load` only: aborting rejects the promise with code `Aborted` — at once if
   * the load has not started; a load already running finishes and its module is dropped.
   */
  signal?: AbortSignal
}

/** A tensor filled with ones. `ones([2, 3])`, `ones([2, 3], {dtype: 'int64'})`, `ones([2], true)`. */
export declare function ones(shape: Shape, options?: FactoryOptions | undefined | null): Tensor

/** `prefixCache`'s options. */
export interface PrefixCacheOptions {
  /** The most tokens held, in all cached prompts (0: off). */
  maxTokens?: number
}

/** Uniform random numbers in [0, 1) (seed with `manualSeed`). */
export declare function rand(shape: Shape, options?: FactoryOptions | undefined | null): Tensor

/** Random integers in [low, high), int64 unless `dtype` says otherwise. */
export declare function randint(low: number, high: number, shape: Shape, options?: FactoryOptions | undefined | null): Tensor

/** Standard normal random numbers. */
export declare function randn(shape: Shape, options?: FactoryOptions | undefined | null): Tensor

/**
 * Sets how many calls run at once: the number of executor instances, each a native thread
 * of torch-node's own (never libuv's pool) with `getNumThreads()` intra-op threads. Default 1
 * (or `TORCH_NODE_INSTANCES`): one call at a time using every core is fastest per request;
 * 2 instances × 1 thread each can serve more requests per second on small models. Keep
 * instances × threads ≤ cores: more makes libgomp throttle every team. Shared by worker threads.
 */
export declare function setInstances(n: number): void

/**
 * Sets the number of inter-op threads; libtorch accepts this only once, before any
 * parallel work has started.
 */
export declare function setNumInteropThreads(n: number): void

/**
 * Sets how many intra-op threads (one OpenMP team) each executor instance gives a call:
 * `forward`, `runMethod`, loads and image work run on the executor (see `setInstances`).
 * Default: the usable cores ÷ instances (`torch.cpu.limits()`: the affinity mask's cores,
 * capped by a container's CPU quota, or `OMP_NUM_THREADS`). Tensor methods called directly from JS run
 * on the calling thread with one thread, so they never add a team beside the executor's.
 */
export declare function setNumThreads(n: number): void

/** The special token of each role, or null. */
export interface SpecialTokens {
  bosToken?: string
  eosToken?: string
  unkToken?: string
  sepToken?: string
  padToken?: string
  clsToken?: string
  maskToken?: string
}

/** `speculative`'s options. */
export interface SpeculativeOptions {
  /** `'prompt-lookup'` (the only method). */
  method?: 'prompt-lookup'
  /** The most tokens proposed per sequence and step (1 to 15, default 5). */
  maxDraft?: number
  /** The longest n-gram looked up (1 to 8, default 3). */
  ngram?: number
}

/** Stacks same-shape tensors along a new dim (default 0) into a new tensor (a copy). */
export declare function stack(tensors: Tensor[], dim?: Dim | undefined | null): Tensor

/**
 * A new tensor holding a copy of `data`: nested arrays of numbers, booleans or BigInts, a
 * scalar, a TypedArray (its own dtype; reshape with `options.shape`), or a Tensor (copied).
 * Numbers default to float32, booleans to bool, BigInts to int64.
 */
export declare function tensor(data: TensorData, options?: TensorOptions | undefined | null): Tensor

/** Options accepted by every factory. */
export interface TensorOptions {
  /** Element type; default float32 (int64 for `randint` and integral `arange`). */
  dtype?: DType
  /** `'cpu'` (default), `'cuda'` or `'cuda:N'`. */
  device?: Device
  /** Record operations for autograd (floating dtypes only). */
  requiresGrad?: boolean
  /**
   * `tensor()` only: the shape to view the data as (nested arrays, a flat TypedArray or a
   * tensor; the element count must match). Other factories refuse it.
   */
  shape?: Array<number>
}

/** Options of `Tokenizer.encodeBatch`; any other key is refused (`InvalidArg`). */
export interface TokenizerBatchOptions {
  /** Second texts, one per text (pairs). */
  pair?: string[]
  /** Adds the model's special tokens. Default `true`. */
  addSpecialTokens?: boolean
  /** As `encode`'s. */
  truncation?: boolean | 'longest_first' | 'only_first' | 'only_second'
  /** As `encode`'s; also the length `padding: 'maxLength'` pads to. */
  maxLength?: number
  /**
   * `'longest'` (or `true`): every row as long as the longest; `'maxLength'`: as long as
   * `maxLength`; `false`: no padding. Default `'longest'` with `returnTensors: true`, else
   * `false`. Pads with the pad token, on the config's `padding_side`.
   */
  padding?: 'longest' | 'maxLength' | boolean
  /** Rounds the padded length up to a multiple of this (8 suits tensor cores). */
  padToMultipleOf?: number
  /**
   * `true`: int64 tensors `inputIds`, `attentionMask`, `tokenTypeIds` `[n, length]`, ready
   * for `forward`; `'ragged'`: one `[1, length_i]` tensor of each per text, unpadded (what
   * a `Batcher`'s `run()` takes with `padValue`); `false` (default): one `Encoding` per text.
   */
  returnTensors?: boolean | 'ragged'
  /** Aborting rejects with `Aborted` while the call is still queued. */
  signal?: AbortSignal
}

/** Options of `Tokenizer.decode` and `decodeBatch`; any other key is refused (`InvalidArg`). */
export interface TokenizerDecodeOptions {
  /** Leaves the special tokens (`[CLS]`, `<|im_end|>`, ...) out. Default `false`. */
  skipSpecialTokens?: boolean
}

/** Options of `Tokenizer.encode`; any other key is refused (`InvalidArg`). */
export interface TokenizerEncodeOptions {
  /** A second text: the pair's (a question and its context, for a cross-encoder). */
  pair?: string
  /** Adds the model's special tokens (`[CLS]`, `[SEP]`, `<s>`, ...). Default `true`. */
  addSpecialTokens?: boolean
  /**
   * Cuts to `maxLength` tokens: `true` (`'longest_first'`), `'only_first'`,
   * `'only_second'` or `false`. Default: `true` when `maxLength` is given (as
   * transformers does), else `false`.
   */
  truncation?: boolean | 'longest_first' | 'only_first' | 'only_second'
  /**
   * The most tokens, special tokens included. Default `model_max_length` from
   * `tokenizer_config.json`.
   */
  maxLength?: number
}

/** Options of `Tokenizer.fromJSON`; any other key is refused (`InvalidArg`). */
export interface TokenizerLoadOptions {
  /**
   * `tokenizer_config.json`'s contents (a string, a Buffer or the parsed object): special
   * tokens by role, `model_max_length`, `padding_side`, `chat_template`.
   */
  config?: string | Uint8Array | Record<string, unknown>
  /** A chat template (Jinja), overriding the config's. */
  chatTemplate?: string
}

/** `Tensor.to`'s object form: where to move and what to cast to (at least one). */
export interface ToOptions {
  /** The device to move to. */
  device?: Device
  /** The dtype to cast to. */
  dtype?: DType
}

/** The values and indices of `topk`, `max(dim)`, `min(dim)`. */
export interface ValuesIndices {
  values: Tensor
  /** int64 positions along the reduced dimension. */
  indices: Tensor
}

/**
 * The version of the libtorch this addon is built against and runs, `'2.13.0'` (Python's
 * `torch.__version__` without its local part such as `+cu130`): 2.11, 2.12 or 2.13, as
 * docs/install.md says.
 */
export declare const version: string

/** A tensor filled with zeros. */
export declare function zeros(shape: Shape, options?: FactoryOptions | undefined | null): Tensor

export declare namespace cpu {
  /**
   * libtorch's view of this CPU, as Python's `torch._C._cpu._get_cpu_capability()`: ISA
   * flags (`avx512_bf16`, `amx_bf16`, `avx2`, ...), cache sizes, core counts, `cpu_name`.
   */
  export function capabilities(): Record<string, boolean | number | string>
  /**
   * The CPUs this process may use and how the executor's default team size was chosen
   * (`torch.cpu.limits()`).
   */
  export interface CpuLimits {
    /**
     * The cores the process's affinity mask allows (`taskset`, Docker's `--cpuset-cpus`):
     * what libtorch and Node's `os.availableParallelism()` count.
     */
    affinity: number
    /**
     * The cgroup CPU quota in CPUs (Docker's `--cpus`, Kubernetes' `limits.cpu`): the
     * smallest along the process's cgroup path, v2 `cpu.max` or v1 `cpu.cfs_quota_us`;
     * absent where there is none.
     */
    quota?: number
    /** The cgroup file that set `quota`. */
    quotaFile?: string
    /** min(affinity, ⌈quota⌉): the cores worth running threads on. */
    usableCores: number
    /** libtorch's own default intra-op threads (`OMP_NUM_THREADS`, or the cores it counts). */
    libtorchThreads: number
    /**
     * The executor's default intra-op threads before instances divide them (what
     * `getNumThreads()` is with one instance and no `setNumThreads`).
     */
    defaultThreads: number
    /**
     * What set `defaultThreads`: `'quota'` (`usableCores`, lower than `libtorchThreads`),
     * `'libtorch'`, or `'OMP_NUM_THREADS'` (the user's, which wins over the quota).
     * `setNumThreads` wins over all.
     */
    defaultFrom: string
  }
  /**
   * Whether this CPU computes bfloat16 natively (AVX512-BF16 or AMX-BF16): where it does,
   * `ScriptModule.load(path, {dtype: 'bfloat16'})` is available.
   */
  export function hasNativeBf16(): boolean
  /**
   * The calls of torch-node's own ops so far in this process, one entry per kernel: which
   * path a quantized `CausalLM` program (`manifest.json`'s `kernels`) took on this CPU.
   */
  export function kernelCalls(): Array<cpu.KernelCalls>
  /** How often one kernel of torch-node's own ops ran (`torch.cpu.kernelCalls()`). */
  export interface KernelCalls {
    /**
     * The op an exported program calls: `torch_node::rows_linear` (float and int8 weights)
     * or `torch_node::rows_linear_int4_runs` (int4).
     */
    op: string
    /**
     * What ran on this CPU: `'avx2'` (torch-node's kernel, chosen where the CPU has AVX2 and
     * FMA) or `'aten'` (ATen's linear: a CPU without them, or float weights past 16 rows).
     */
    kernel: string
    /** Calls so far in this process. */
    calls: number
    /** Of those, calls with one row (a decode step of one sequence). */
    oneRow: number
  }
  /**
   * The CPUs this process may use (affinity mask, cgroup quota) and the executor's default
   * team size they gave, read once as the addon loads: see docs/speed.md#containers.
   */
  export function limits(): cpu.CpuLimits
}

export declare namespace cuda {
  /** The number of CUDA devices libtorch sees (0 without CUDA). */
  export function deviceCount(): number
  /** Whether libtorch can use a CUDA device here. */
  export function isAvailable(): boolean
}

export declare namespace image {
  /**
   * Decodes an image file's bytes (JPEG, PNG, WebP, GIF's first frame, BMP, TIFF) to a uint8
   * tensor `[H, W, 3]` (RGB, channels last, EXIF orientation applied). A file cut short is
   * `InvalidImage` unless `options.allowTruncated`.
   */
  export function decode(data: Source, options?: DecodeOptions | undefined | null): Tensor
  /**
   * Encodes an image tensor as PNG or JPEG: `[3, H, W]` or `[H, W, 3]` (or with a batch dim of
   * 1), float in [0, 1] (scaled by 255, rounded, clamped) or uint8. `quality`: JPEG, 1..100
   * (default 90).
   */
  export function encode(tensor: Tensor, format: ImageFormat, options?: EncodeOptions | undefined | null): Uint8Array
  /** `loadSync` on torch-node's executor: decoding and resizing never block the event loop. */
  export function load(source: Source, options?: ImageOptions | undefined | null): Promise<Tensor>
  /**
   * Loads several images (on the thread pool) into one batch `[N, 3, H, W]`; the transforms
   * must bring them to one size.
   */
  export function loadBatch(sources: Source[], options?: ImageOptions | undefined | null): Promise<Tensor>
  /**
   * Loads an image as a model input (the calling thread waits for the executor): decode, then `resize` (a number:
   * the shorter side, as `transforms.Resize(int)`; `[h, w]`: exact), `centerCrop`, to float in
   * [0, 1], `mean`/`std` (`mean: 'imagenet'` for both presets). `layout`: `'nchw'` (default,
   * `[1, 3, H, W]`), `'nhwc'`, or `'chw'`/`'hwc'` without the batch dim; `dtype`: `'float32'`
   * (default) or `'uint8'` (0..255, no normalization).
   */
  export function loadSync(source: Source, options?: ImageOptions | undefined | null): Tensor
}

export declare namespace libtorch {
  /**
   * The libtorch ops that torch-node's bindings (tch 0.26, written for libtorch 2.13) know and
   * this libtorch lacks: empty on 2.12 and 2.13; on 2.11, 14 internal ops (`_philox_key_split`,
   * `_upsample_lanczos2d_aa`, ...) that no torch-node API calls. Calling one fails with an error
   * naming the op and the version, never a crash.
   */
  export function missingOps(): Array<string>
  /** Its version, `'2.11.0'` (the same as `torch.version`). */
  export const version: string
}

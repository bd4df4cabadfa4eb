// ESM entry: `import torch from 'torch-node'` or `import { ones, ScriptModule } from 'torch-node'`.
// The addon is a CommonJS native module; this re-exports index.js's exports by name (ESM named
// exports must be listed statically; __tests__/esm.test.js checks that the list is complete).
import { createRequire } from 'node:module'

const torch = createRequire(import.meta.url)('./index.js')

export default torch
export const {
  Tensor,
  ScriptModule,
  AOTModule,
  tensor,
  fromBuffer,
  ones,
  zeros,
  empty,
  full,
  rand,
  randn,
  randint,
  arange,
  linspace,
  eye,
  cat,
  stack,
  where,
  tidy,
  manualSeed,
  setNumThreads,
  getNumThreads,
  setNumInteropThreads,
  setInstances,
  getInstances,
  executorStats,
  memory,
  cuda,
  cpu,
  loadLibrary,
  libtorchVersion,
  version,
  libtorch,
  image,
  vision,
  text,
  audio,
  Batcher,
  ragged,
  padSequence,
  pipeline,
  RemoteModule,
  oip,
  serve,
} = torch

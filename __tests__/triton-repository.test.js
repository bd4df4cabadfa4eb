'use strict'
// torch.oip.writeTritonRepository: the config it writes follows the model's own behaviour at
// batch 1 and 2, and parses with tritonclient's model_config_pb2 where the Triton test
// environment (tools/triton-env.js) is installed.
const { describe, test } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { spawnSync } = require('node:child_process')
const torch = require('..')

const FIXTURES = path.join(__dirname, '..', 'models', 'fixtures')
const MLP = path.join(FIXTURES, 'mlp_traced.pt')
const FIXED = path.join(FIXTURES, 'fixed_batch_traced.pt')
const TRITON_PYTHON = path.join(__dirname, '..', '.triton', 'bin', 'python')

const tmp = () => fs.mkdtempSync(path.join(os.tmpdir(), 'torch-node-triton-'))

describe('writeTritonRepository', () => {
  test('a batching model: max_batch_size, dims without the batch dim, dynamic batching, instances', () => {
    const dir = tmp()
    const r = torch.oip.writeTritonRepository(dir, {
      name: 'mlp',
      model: MLP,
      example: torch.rand([1, 4]),
      outputs: ['scores'],
      dynamicBatching: { maxQueueDelayMicroseconds: 500, preferredBatchSize: [4, 8] },
      instances: 2,
    })
    assert.deepEqual(r.inputs, [{ name: 'INPUT__0', datatype: 'FP32', dims: [4] }])
    assert.deepEqual(r.outputs, [{ name: 'scores', datatype: 'FP32', dims: [3] }])
    assert.equal(r.maxBatchSize, 8)
    const config = fs.readFileSync(path.join(dir, 'mlp', 'config.pbtxt'), 'utf8')
    for (const line of [
      'platform: "pytorch_libtorch"',
      'max_batch_size: 8',
      'data_type: TYPE_FP32',
      'dims: [ 4 ]',
      'dims: [ 3 ]',
      'preferred_batch_size: [ 4, 8 ]',
      'max_queue_delay_microseconds: 500',
      'count: 2',
      `libtorch ${torch.libtorchVersion()}`,
    ]) {
      assert.ok(config.includes(line), `config.pbtxt lacks ${line}:\n${config}`)
    }
    // The copy runs as the original does.
    const copy = new torch.ScriptModule(path.join(dir, 'mlp', '1', 'model.pt'))
    const x = torch.rand([3, 4])
    assert.deepEqual(copy.forwardSync(x).toArray(), new torch.ScriptModule(MLP).forwardSync(x).toArray())
  })

  test('a model traced at a fixed batch gets max_batch_size 0, or an error when batching is asked for', () => {
    const dir = tmp()
    const r = torch.oip.writeTritonRepository(dir, { name: 'fixed', model: FIXED, example: torch.ones([1, 8]) })
    assert.equal(r.maxBatchSize, 0)
    assert.deepEqual(r.inputs[0].dims, [1, 8], 'with the batch dim')
    assert.throws(
      () =>
        torch.oip.writeTritonRepository(dir, {
          name: 'fixed',
          model: FIXED,
          example: torch.ones([1, 8]),
          maxBatchSize: 4,
        }),
      { code: 'InvalidArg', message: /does not run at batch 2.*maxBatchSize: 0/ },
    )
  })

  test('bad options are InvalidArg', () => {
    const dir = tmp()
    const base = { name: 'mlp', model: MLP, example: torch.rand([1, 4]) }
    for (const [opts, message] of [
      [{ ...base, name: 'a b' }, /name/],
      [{ ...base, model: 5 }, /model/],
      [{ name: 'mlp', model: MLP }, /example/],
      [{ ...base, inputs: ['x', 'y'] }, /inputs: expected 1 entries/],
      [{ ...base, inputs: [{ name: 'x', dims: [5] }] }, /does not fit/],
      [
        { ...base, dynamicBatching: { maxDelay: 1 } },
        /options\.dynamicBatching: unknown option 'maxDelay'; accepted: maxQueueDelayMicroseconds, preferredBatchSize$/,
      ],
      [
        { ...base, dynamicBatching: { preferredBatchSize: [4, 0] } },
        /options\.dynamicBatching\.preferredBatchSize\[1\]: expected a positive integer, got 0/,
      ],
      [{ ...base, instances: 0 }, /instances/],
      [{ ...base, extra: 1 }, /unknown option 'extra'/],
      // Every nested entry refuses what it does not know (issue 24).
      [
        { ...base, inputs: [{ name: 'x', dim: [4] }] },
        /options\.inputs\[0\]: unknown option 'dim'; accepted: name, datatype, dims, shape$/,
      ],
      [
        { ...base, outputs: [{ name: 'y', type: 'FP32' }] },
        /options\.outputs\[0\]: unknown option 'type'; accepted: name, datatype, dims, shape$/,
      ],
      [
        { ...base, outputs: [{ name: 'y', data_type: 'FP32' }] },
        /unknown option 'data_type'; accepted: name, datatype, dims, shape \(Triton's config calls it 'datatype' here/,
      ],
      [
        { ...base, inputs: [{ datatype: 'BF16' }] },
        /options\.inputs\[0\]\.datatype: expected one of 'BOOL', .*got "BF16"/,
      ],
      [{ ...base, inputs: [{ dims: [4], shape: [-1, 4] }] }, /options\.inputs\[0\]: give dims \(Triton's\) or shape/],
      [
        { ...base, outputs: [{ datatype: 'INT64' }] },
        /options\.outputs\[0\]\.datatype: INT64 does not match the model's FP32/,
      ],
      [{ ...base, outputs: [{ dims: [4] }] }, /options\.outputs\[0\]\.dims: \[4\] does not fit \[3\]/],
      // `shape` is the whole shape, as the protocol's metadata writes it; [4] meant as dims is named.
      [
        { name: 'mlp', model: MLP, inputs: [{ shape: [4] }] },
        /the model fails at batch 1 on inputs of shape \[1\] \(zeros built from options\.inputs: shape is every size, the batch dim included; dims leaves the batch dim out/,
      ],
      [
        { ...base, inputs: [{ shape: [1, 4] }] },
        /options\.inputs\[0\]\.shape: the batch dim \(dim 0\) must be -1 when max_batch_size > 0/,
      ],
    ]) {
      assert.throws(
        () => torch.oip.writeTritonRepository(dir, opts),
        { code: 'InvalidArg', message },
        JSON.stringify(Object.keys(opts)),
      )
    }
  })

  test("inputs in the protocol's words: shape (batch dim included) where Triton says dims", () => {
    const dir = tmp()
    // As RemoteModule's m.inputs and the protocol's metadata write it: no example needed.
    const r = torch.oip.writeTritonRepository(dir, {
      name: 'mlp',
      model: MLP,
      inputs: [{ name: 'INPUT__0', datatype: 'FP32', shape: [-1, 4] }],
    })
    assert.deepEqual(
      [r.maxBatchSize, r.inputs, r.outputs],
      [8, [{ name: 'INPUT__0', datatype: 'FP32', dims: [4] }], [{ name: 'OUTPUT__0', datatype: 'FP32', dims: [3] }]],
    )
    assert.ok(fs.readFileSync(path.join(dir, 'mlp', 'config.pbtxt'), 'utf8').includes('dims: [ 4 ]'))
    const fixed = torch.oip.writeTritonRepository(dir, {
      name: 'fixed',
      model: FIXED,
      inputs: [{ shape: [1, 8] }],
      outputs: [{ name: 'y', shape: [1, 8] }],
    })
    assert.deepEqual([fixed.maxBatchSize, fixed.inputs[0].dims, fixed.outputs[0].dims], [0, [1, 8], [1, 8]])
    // maxBatchSize 0: dims are every size.
    assert.deepEqual(
      torch.oip.writeTritonRepository(dir, { name: 'fixed', model: FIXED, maxBatchSize: 0, inputs: [{ dims: [1, 8] }] })
        .inputs[0].dims,
      [1, 8],
    )
  })

  test(
    "the config parses with tritonclient's model_config_pb2",
    {
      skip:
        !fs.existsSync(TRITON_PYTHON) && 'the Triton test environment (.triton/, tools/triton-env.js) is not installed',
    },
    () => {
      const dir = tmp()
      torch.oip.writeTritonRepository(dir, {
        name: 'mlp',
        model: MLP,
        example: torch.rand([1, 4]),
        dynamicBatching: { preferredBatchSize: [2] },
      })
      const py = `
import sys
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2
c = text_format.Parse(open(sys.argv[1]).read(), model_config_pb2.ModelConfig())
print(c.platform, c.max_batch_size, c.input[0].name, list(c.input[0].dims), model_config_pb2.DataType.Name(c.output[0].data_type), list(c.dynamic_batching.preferred_batch_size))`
      const r = spawnSync(TRITON_PYTHON, ['-c', py, path.join(dir, 'mlp', 'config.pbtxt')], {
        encoding: 'utf8',
        timeout: 60_000,
      })
      assert.equal(r.status, 0, r.stderr)
      assert.equal(r.stdout.trim(), 'pytorch_libtorch 8 INPUT__0 [4] TYPE_FP32 [2]')
    },
  )
})

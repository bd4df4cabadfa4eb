'use strict'
// torch.ragged (sequences packed end to end with offsets, issue 17) and torch.padSequence
// (PyTorch's pad_sequence, against goldens Python wrote in models/fixtures/sequences.json).
const { describe, test } = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const torch = require('..')
const { coded } = require('./helpers')

const GOLDEN = require(path.join(__dirname, '..', 'models', 'fixtures', 'sequences.json')).pad_sequence
const fromJson = (t) => torch.tensor(t.data, { shape: t.shape, dtype: t.dtype })

describe('torch.ragged', () => {
  const sequences = () => [
    torch.tensor([
      [1, 2],
      [3, 4],
      [5, 6],
    ]),
    torch.tensor([[7, 8]]),
    torch.tensor([
      [9, 10],
      [11, 12],
    ]),
  ]

  test('values packed along dim 0, int64 offsets from 0 and lengths', () => {
    const r = torch.ragged(sequences())
    assert.deepEqual(r.values.toArray(), [
      [1, 2],
      [3, 4],
      [5, 6],
      [7, 8],
      [9, 10],
      [11, 12],
    ])
    assert.deepEqual([r.offsets.dtype, r.offsets.toArray()], ['int64', [0, 3, 4, 6]])
    assert.deepEqual([r.lengths.dtype, r.lengths.toArray()], ['int64', [3, 1, 2]])
    assert.equal(r.count, 3)
    assert.deepEqual(r.at(2).toArray(), [
      [9, 10],
      [11, 12],
    ])
    assert.deepEqual(r.at(-2).toArray(), [[7, 8]])
    assert.ok(r.at(0).sharesStorage(r.values), 'at() is a view of values')
    assert.throws(() => r.at(3), coded('InvalidArg', /index: expected an integer in \[-3, 2\], got 3/))
    const input = torch.tensor([1, 2])
    assert.ok(!torch.ragged([input]).values.sharesStorage(input), 'values is a copy')
  })

  test('pad then unpad round-trips; the mask is true on real data', () => {
    const input = sequences()
    const r = torch.ragged(input)
    const { padded, mask, lengths } = r.pad(-1)
    assert.deepEqual(padded.toArray(), [
      [
        [1, 2],
        [3, 4],
        [5, 6],
      ],
      [
        [7, 8],
        [-1, -1],
        [-1, -1],
      ],
      [
        [9, 10],
        [11, 12],
        [-1, -1],
      ],
    ])
    assert.equal(mask.dtype, 'bool')
    assert.deepEqual(mask.toArray(), [
      [true, true, true],
      [true, false, false],
      [true, true, false],
    ])
    assert.equal(lengths, r.lengths)
    const back = r.unpad(padded)
    back.forEach((t, i) => assert.deepEqual(t.toArray(), input[i].toArray()))
    // A model's output over padded ([n, maxLen, features]) splits the same way.
    const features = padded.mul(10).sum(2, true)
    assert.deepEqual(
      r.unpad(features).map((t) => t.shape),
      [
        [3, 1],
        [1, 1],
        [2, 1],
      ],
    )
    assert.deepEqual(r.pad().padded.toArray()[1][1], [0, 0], 'default padding value 0')
  })

  test('int64, bool and 1-D sequences; a length of 0; pad leaves no temporaries behind', () => {
    const ints = torch.ragged([torch.tensor([5n, 6n]), torch.tensor(new BigInt64Array(0)), torch.tensor([7n])])
    assert.deepEqual(ints.lengths.toArray(), [2, 0, 1])
    const { padded, mask } = ints.pad(9)
    assert.deepEqual(
      [padded.dtype, padded.toArray()],
      [
        'int64',
        [
          [5, 6],
          [9, 9],
          [7, 9],
        ],
      ],
    )
    assert.deepEqual(mask.toArray(), [
      [true, true],
      [false, false],
      [true, false],
    ])
    assert.deepEqual(
      ints.unpad(padded).map((t) => t.toArray()),
      [[5, 6], [], [7]],
    )
    const bools = torch.ragged([torch.tensor([true]), torch.tensor([true, true])]).pad(false)
    assert.deepEqual(bools.padded.toArray(), [
      [true, false],
      [true, true],
    ])
    // pad makes the padded tensor and the mask, nothing else. A GC finalizing an earlier test's
    // garbage during the call can only lower the count: never more than 2, exactly 2 at least once.
    const deltas = []
    for (let i = 0; i < 5 && !deltas.includes(2); i++) {
      const before = torch.memory().tensors
      const out = ints.pad(0)
      deltas.push(torch.memory().tensors - before)
      out.padded.dispose()
      out.mask.dispose()
    }
    assert.ok(deltas.includes(2) && deltas.every((d) => d <= 2), `padded and mask only: ${deltas}`)
  })

  test('refused inputs are coded errors', () => {
    assert.throws(
      () => torch.ragged([]),
      coded('InvalidArg', /ragged: expected a non-empty array of tensors, got an empty array/),
    )
    assert.throws(() => torch.ragged(torch.ones([2])), coded('InvalidArg', /got a Tensor/))
    assert.throws(
      () => torch.ragged([torch.ones([2]), [1, 2]]),
      coded('InvalidArg', /sequence 1: expected a Tensor, got an array/),
    )
    assert.throws(() => torch.ragged([torch.tensor(1)]), coded('ShapeMismatch', /sequence 0 is a 0-dim tensor/))
    assert.throws(
      () => torch.ragged([torch.ones([2, 3]), torch.ones([2, 4])]),
      coded('ShapeMismatch', /sequence 1 has shape \[2,4\], sequence 0 \[2,3\]: only dim 0/),
    )
    assert.throws(
      () => torch.ragged([torch.ones([2]), torch.ones([2], { dtype: 'int64' })]),
      coded('DTypeMismatch', /sequence 1 is int64, sequence 0 float32/),
    )
    const r = torch.ragged([torch.ones([2]), torch.ones([3])])
    assert.throws(() => r.pad('x'), coded('InvalidArg', /Ragged\.pad: value: expected a number or a boolean/))
    assert.throws(() => r.unpad(torch.ones([2, 2])), coded('ShapeMismatch', /expected a tensor \[2, ≥ 3, \.\.\.\]/))
    assert.throws(() => r.unpad(torch.ones([3, 3])), coded('ShapeMismatch'))
    assert.throws(() => r.unpad([]), coded('InvalidArg', /expected a Tensor/))
  })

  test('dispose frees values, offsets and lengths; Symbol.dispose too', () => {
    const r = torch.ragged([torch.ones([2])])
    r[Symbol.dispose]()
    assert.deepEqual([r.values.isDisposed, r.offsets.isDisposed, r.lengths.isDisposed], [true, true, true])
  })
})

describe('torch.padSequence', () => {
  for (const [i, { sequences, options, output }] of GOLDEN.entries()) {
    test(`as PyTorch's pad_sequence: case ${i} ${JSON.stringify(options)}`, () => {
      const { batch_first: batchFirst, padding_value: paddingValue, padding_side: paddingSide } = options
      const got = torch.padSequence(sequences.map(fromJson), { batchFirst, paddingValue, paddingSide })
      assert.equal(got.dtype, output.dtype)
      assert.deepEqual(got.shape, output.shape)
      assert.deepEqual(got.toArray(), fromJson(output).toArray())
    })
  }

  test("the first sequence's dtype, as PyTorch (copy_ casts the others)", () => {
    const out = torch.padSequence([torch.tensor([1, 2], { dtype: 'int64' }), torch.tensor([3.7])], { batchFirst: true })
    assert.deepEqual(
      [out.dtype, out.toArray()],
      [
        'int64',
        [
          [1, 2],
          [3, 0],
        ],
      ],
    )
  })

  test('refused options and inputs are coded errors', () => {
    const s = [torch.ones([2])]
    assert.throws(
      () => torch.padSequence(s, { batch_first: true }),
      coded('InvalidArg', /unknown option 'batch_first'; accepted: batchFirst, paddingValue, paddingSide/),
    )
    assert.throws(
      () => torch.padSequence(s, { batchFirst: 1 }),
      coded('InvalidArg', /options\.batchFirst: expected a boolean/),
    )
    assert.throws(
      () => torch.padSequence(s, { paddingSide: 'top' }),
      coded('InvalidArg', /paddingSide: expected 'right' or 'left', got "top"/),
    )
    assert.throws(
      () => torch.padSequence(s, 5),
      coded('InvalidArg', /options: expected an options object, got number 5/),
    )
    assert.deepEqual(torch.padSequence(s, null).shape, [2, 1]) // null: no options, as in every native call
    assert.throws(() => torch.padSequence([]), coded('InvalidArg', /padSequence: expected a non-empty array/))
    assert.throws(() => torch.padSequence([torch.ones([2, 2]), torch.ones([2])]), coded('ShapeMismatch'))
  })
})

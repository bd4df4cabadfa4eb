// @ts-check
'use strict'
// ToolCallStream with `partial`: calls begin once their name is known and their arguments stream
// as the tokens come; joined, they equal what parseToolCalls reads from the whole output, in
// every format, however the output is cut into pieces.
const { describe, test } = require('node:test')
const assert = require('node:assert/strict')
const { ToolCallStream, parseToolCalls } = require('../lib/text/tool-calls')

/** @typedef {import('../lib/text/tool-calls').ToolCallFormat} ToolCallFormat */

/** Pieces of `text`: one character each, or sizes from a fixed pseudo-random sequence. */
function cuts(text, seed) {
  if (seed === 0) return [...text]
  const pieces = []
  let x = seed
  for (let i = 0; i < text.length;) {
    x = (x * 1103515245 + 12345) % 2147483648
    const n = 1 + (x % 7)
    pieces.push(text.slice(i, i + n))
    i += n
  }
  return pieces
}

/**
 * What a client joins from the stream's events: text, calls (name and joined arguments), and
 * how many pieces had gone in when each call's first arguments fragment came out.
 * @param {ToolCallFormat} format @param {string[]} pieces @param {boolean} cut
 */
function streamed(format, pieces, cut = false) {
  const stream = new ToolCallStream(format, { partial: true })
  let content = ''
  /** @type {Map<number, { name: string; arguments: string }>} */
  const calls = new Map()
  /** @type {number[]} */
  const firstArgsAt = []
  const read = (/** @type {any[]} */ events, /** @type {number} */ at) => {
    for (const e of events) {
      if (e.type === 'text') content += e.text
      else if (e.type === 'begin') {
        assert.ok(!calls.has(e.id), 'one begin per call')
        calls.set(e.id, { name: e.name, arguments: '' })
      } else if (e.type === 'arguments') {
        const c = calls.get(e.id)
        assert.ok(c, 'arguments after their begin')
        if (c.arguments === '') firstArgsAt.push(at)
        c.arguments += e.text
      } else if (!e.streamed) calls.set(e.id, { ...e.call })
      else assert.deepEqual(calls.get(e.id), e.call, 'the whole call equals the joined fragments')
    }
  }
  pieces.forEach((p, i) => read(stream.push(p), i + 1))
  read(stream.end({ cut }), pieces.length + 1)
  return { content, calls: [...calls.values()], firstArgsAt }
}

const WEATHER =
  '{"name": "get_weather", "arguments": {"city": "Paris, \\"FR\\" \\u00e9 😀", "days": 3, "hourly": true, "at": [1.50, -0, 2e3, null], "more": {"x": {}, "note": "a\\nb\\/c\\t\\ud83d\\ude00"}}}'
const PLAIN = '{"name": "f", "arguments": {}}'

/** @type {Array<[string, ToolCallFormat, string]>} */
const CASES = [
  ['hermes: text, then one block', 'hermes', `Let me check.\n<tool_call>\n${WEATHER}\n</tool_call>`],
  [
    'hermes: two blocks and text after',
    'hermes',
    `<tool_call>\n${WEATHER}\n</tool_call>\n<tool_call>\n${PLAIN}\n</tool_call> done`,
  ],
  ['hermes: a list in one block (SmolLM2)', 'hermes', `<tool_call>[${WEATHER}, ${PLAIN}]</tool_call>`],
  ['hermes: no call', 'hermes', 'Just words, a < sign and <tool and <tool_cal.'],
  ['llama3: one call', 'llama3', WEATHER.replace('"arguments"', '"parameters"')],
  ['llama3: python tag, two calls', 'llama3', `<|python_tag|>${WEATHER}; ${PLAIN}`],
  ['llama3: text', 'llama3', 'The weather is fine {not json}.'],
  ['mistral: a list', 'mistral', `Sure.[TOOL_CALLS][${WEATHER}, ${PLAIN}]`],
  [
    'mistral v11: name[ARGS]',
    'mistral',
    '[TOOL_CALLS]get_weather[ARGS]{"city": "Paris", "n": 10}[TOOL_CALLS]f[CALL_ID]abc123def[ARGS]{}',
  ],
  ['generic: one call', 'generic', `{"tool_call": ${WEATHER}}`],
  ['generic: a list', 'generic', `{"tool_calls": [${WEATHER}, ${PLAIN}]}`],
  ['generic: a text answer', 'generic', '{"response": "Hello \\"there\\" \\u00e9"}'],
]

describe('ToolCallStream: arguments streamed as they are generated', () => {
  for (const [name, format, text] of CASES) {
    test(name, () => {
      const whole = parseToolCalls(text, format)
      for (const seed of [0, 1, 7, 42]) {
        const s = streamed(format, cuts(text, seed))
        assert.deepEqual(s.calls, whole.toolCalls, `seed ${seed}`)
        assert.equal(s.content.trim(), (whole.content ?? '').trim(), `seed ${seed}`)
        for (const marker of ['<tool_call', '[TOOL_CALLS]', '<|python_tag|>', '"tool_call']) {
          assert.ok(!s.content.includes(marker), `no marker in content (seed ${seed})`)
        }
      }
    })
  }

  test("a call's arguments start before it ends", () => {
    for (const [, format, text] of CASES) {
      const s = streamed(format, cuts(text, 0))
      const pieces = cuts(text, 0).length
      // The first call (the long one) streams from its start: its first fragment is early.
      if (s.firstArgsAt.length) assert.ok(s.firstArgsAt[0] < pieces / 2, `${format}: ${s.firstArgsAt[0]} of ${pieces}`)
    }
    // The name goes out before the arguments' first value is written.
    const stream = new ToolCallStream('generic', { partial: true })
    const events = stream.push('{"tool_call": {"name": "get_weather", "arguments": {"ci')
    assert.deepEqual(events, [
      { type: 'begin', id: 0, name: 'get_weather' },
      { type: 'arguments', id: 0, text: '{"ci' },
    ])
    // A number is held back until it cannot go on.
    assert.deepEqual(stream.push('ty": 12'), [{ type: 'arguments', id: 0, text: 'ty":' }])
    assert.deepEqual(stream.push('.5}'), [{ type: 'arguments', id: 0, text: '12.5}' }])
  })

  test('a call cut by max_tokens is announced, and not finished; complete ones are whole', () => {
    const text = `{"tool_calls": [${PLAIN}, {"name": "g", "arguments": {"q": "abc`
    const s = streamed('generic', cuts(text, 3), true)
    assert.deepEqual(s.calls, [
      { name: 'f', arguments: '{}' },
      { name: 'g', arguments: '{"q":"abc' },
    ])
    // Not streamed, the cut call is dropped.
    assert.deepEqual(parseToolCalls(text, 'generic', { cut: true }).toolCalls, [{ name: 'f', arguments: '{}' }])
  })

  test('a streamed call that turns out malformed stops; the text after it still comes', () => {
    const text = '<tool_call>{"name": "f", "arguments": {"q": </tool_call> and more'
    const s = streamed('hermes', cuts(text, 0))
    assert.deepEqual(s.calls, [{ name: 'f', arguments: '{"q":' }])
    assert.equal(s.content, 'and more')
    assert.deepEqual(parseToolCalls(text, 'hermes').toolCalls, [])
  })

  test('without partial, only whole calls', () => {
    const stream = new ToolCallStream('hermes')
    const events = [...stream.push(`<tool_call>${WEATHER.slice(0, 60)}`)]
    assert.deepEqual(events, [])
  })
})

'use strict'
// lib/text/tool-calls.js: each format's tool calls parsed out of a whole output and out of the
// same output streamed one character at a time (the two must agree), text around them kept,
// malformed calls left as text, and the format told from real chat templates' markers.
const { describe, test } = require('node:test')
const assert = require('node:assert/strict')
const {
  formatOf,
  toolsVariableOf,
  parseToolCalls,
  ToolCallStream,
  genericMessages,
  TABLE,
} = require('../lib/text/tool-calls')

/** Streams `text` through a ToolCallStream in pieces of `size` characters; joins adjacent texts. */
function streamed(text, format, size = 1, cut = false) {
  const s = new ToolCallStream(format)
  const events = []
  for (let i = 0; i < text.length; i += size) events.push(...s.push(text.slice(i, i + size)))
  events.push(...s.end({ cut }))
  const joined = []
  for (const e of events) {
    if (e.type === 'text' && joined.at(-1)?.type === 'text') joined.at(-1).text += e.text
    else joined.push({ ...e })
  }
  return joined
}

/** parseToolCalls, and the stream in pieces of 1, 3 and all characters: the same calls and text. */
function check(text, format, want, { cut = false } = {}) {
  assert.deepEqual(parseToolCalls(text, format, { cut }), want)
  for (const size of [1, 3, text.length || 1]) {
    const events = streamed(text, format, size, cut)
    const calls = events.filter((e) => e.type === 'call').map((e) => e.call)
    assert.deepEqual(calls, want.toolCalls, `pieces of ${size}`)
    const content = events
      .filter((e) => e.type === 'text')
      .map((e) => e.text)
      .join('')
    assert.equal(content, want.content ?? '', `pieces of ${size}`)
  }
}

const weather = { name: 'get_weather', arguments: '{"city":"Paris","unit":"celsius"}' }

describe('hermes: <tool_call> blocks (Qwen2.5/3, Hermes, SmolLM)', () => {
  test('one call after text; arguments become a JSON string', () => {
    const text =
      'Let me look that up.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}\n</tool_call>'
    check(text, 'hermes', { content: 'Let me look that up.', toolCalls: [weather] })
  })

  test('two blocks, and a list in one block (SmolLM2); no text: content null', () => {
    const two =
      '<tool_call>\n{"name": "a", "arguments": {"x": 1}}\n</tool_call>\n<tool_call>\n{"name": "b", "arguments": {}}\n</tool_call>'
    const want = {
      content: null,
      toolCalls: [
        { name: 'a', arguments: '{"x":1}' },
        { name: 'b', arguments: '{}' },
      ],
    }
    check(two, 'hermes', want)
    check(
      '<tool_call>[{"name": "a", "arguments": {"x": 1}}, {"name": "b", "arguments": {}}]</tool_call>',
      'hermes',
      want,
    )
  })

  test('arguments already a JSON string; a block cut off by the end of the output still parses', () => {
    check(
      '<tool_call>{"name": "get_weather", "arguments": "{\\"city\\":\\"Paris\\",\\"unit\\":\\"celsius\\"}"}</tool_call>',
      'hermes',
      {
        content: null,
        toolCalls: [weather],
      },
    )
    check('<tool_call>{"name": "f", "arguments": {"q": "x"}}', 'hermes', {
      content: null,
      toolCalls: [{ name: 'f', arguments: '{"q":"x"}' }],
    })
  })

  test('a malformed block, or one that is not a call, stays text; plain text is untouched', () => {
    for (const text of [
      '<tool_call>{"name": "f", "arguments": {"q": </tool_call> and more',
      '<tool_call>{"arguments": {}}</tool_call>',
      '<tool_call>{"name": "f", "arguments": [1, 2]}</tool_call>',
      'I use <tool_ and <tool_call but never a call.  ',
      'no calls at all\n',
    ]) {
      check(text, 'hermes', { content: text, toolCalls: [] })
    }
  })
})

describe('llama3: the answer is a JSON call (Llama 3.1-3.3)', () => {
  test('{"name", "parameters"}, with or without <|python_tag|>; several joined by ;', () => {
    const want = { content: null, toolCalls: [weather] }
    check('{"name": "get_weather", "parameters": {"city": "Paris", "unit": "celsius"}}', 'llama3', want)
    check('<|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris", "unit": "celsius"}}', 'llama3', want)
    check(' {"name": "a", "parameters": {}}; {"name": "b", "arguments": {"k": true}}', 'llama3', {
      content: null,
      toolCalls: [
        { name: 'a', arguments: '{}' },
        { name: 'b', arguments: '{"k":true}' },
      ],
    })
  })

  test('an answer in words, or JSON that is not a call, is text', () => {
    check('The weather in {city} is fine.', 'llama3', { content: 'The weather in {city} is fine.', toolCalls: [] })
    check('{"temperature": 21}', 'llama3', { content: '{"temperature": 21}', toolCalls: [] })
  })
})

describe('mistral: [TOOL_CALLS]', () => {
  test('a JSON list after the marker (v3 tokenizers)', () => {
    check('[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}]', 'mistral', {
      content: null,
      toolCalls: [weather],
    })
  })

  test('name[ARGS]{...} per call (v11+), with [CALL_ID]', () => {
    check(
      'Sure.[TOOL_CALLS]get_weather[ARGS]{"city": "Paris", "unit": "celsius"}[TOOL_CALLS]b[CALL_ID]a1b2c3d4e[ARGS]{}',
      'mistral',
      {
        content: 'Sure.',
        toolCalls: [weather, { name: 'b', arguments: '{}' }],
      },
    )
  })

  test('what does not parse after the marker is text, marker included', () => {
    check('[TOOL_CALLS] oops', 'mistral', { content: '[TOOL_CALLS] oops', toolCalls: [] })
  })
})

describe("generic: one JSON object (llama.cpp's format for templates without tools)", () => {
  test('{"tool_call": ...}, {"tool_calls": [...]} and {"response": "..."}', () => {
    check('{"tool_call": {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}}', 'generic', {
      content: null,
      toolCalls: [weather],
    })
    check('{"tool_calls": [{"name": "a", "arguments": {"x": 1}}, {"name": "b", "arguments": {}}]}', 'generic', {
      content: null,
      toolCalls: [
        { name: 'a', arguments: '{"x":1}' },
        { name: 'b', arguments: '{}' },
      ],
    })
    // The text answer is decoded as it streams: escapes (a surrogate pair too) whole.
    check('{"response": "Hi \\"you\\",\\n\\u00e9 \\ud83d\\ude00 ok"}', 'generic', {
      content: 'Hi "you",\né 😀 ok',
      toolCalls: [],
    })
    const s = new ToolCallStream('generic')
    assert.deepEqual(s.push('{"response": "Hello'), [{ type: 'text', text: 'Hello' }])
    assert.deepEqual(s.push(' world\\u00'), [{ type: 'text', text: ' world' }])
    assert.deepEqual(s.push('e9"}'), [{ type: 'text', text: 'é' }])
    assert.deepEqual(s.end(), [])
  })

  test('cut by max_tokens: complete calls kept, the cut one dropped, a text answer so far kept', () => {
    const call = '{"name": "a", "arguments": {"x": 1}}'
    check(
      `{"tool_calls": [${call}, ${call}, {"name": "a", "argu`,
      'generic',
      {
        content: null,
        toolCalls: [
          { name: 'a', arguments: '{"x":1}' },
          { name: 'a', arguments: '{"x":1}' },
        ],
      },
      { cut: true },
    )
    check('{"tool_call": {"name": "a", "arguments": {"x": 1', 'generic', { content: '', toolCalls: [] }, { cut: true })
    check('{"response": "It is sun', 'generic', { content: 'It is sun', toolCalls: [] }, { cut: true })
    // Not cut, what does not parse is text (a model that was not under the grammar).
    check('hello', 'generic', { content: 'hello', toolCalls: [] })
  })

  test('the other formats drop a call cut by max_tokens too, never passing it on as text', () => {
    const one = '<tool_call>\n{"name": "a", "arguments": {}}\n</tool_call>'
    check(
      `Sure.\n${one}\n<tool_call>\n{"name": "a", "argu`,
      'hermes',
      {
        content: 'Sure.',
        toolCalls: [{ name: 'a', arguments: '{}' }],
      },
      { cut: true },
    )
    check(
      '[TOOL_CALLS][{"name": "a", "arguments": {}}, {"name": "b", "arg',
      'mistral',
      {
        content: null,
        toolCalls: [{ name: 'a', arguments: '{}' }],
      },
      { cut: true },
    )
    check('{"name": "a", "parameters": {"x": ', 'llama3', { content: '', toolCalls: [] }, { cut: true })
    // Not cut: a malformed call is still text.
    check('<tool_call>\n{"name": "a", "argu', 'hermes', { content: '<tool_call>\n{"name": "a", "argu', toolCalls: [] })
  })

  test('genericMessages: the tools and the shape in the system turn, earlier calls as the JSON written', () => {
    const tools = [{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object' } } }]
    const call = { id: 'c1', type: 'function', function: { name: 'get_weather', arguments: { city: 'Paris' } } }
    const chat = genericMessages(
      [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'Weather?' },
        { role: 'assistant', content: '', tool_calls: [call] },
        { role: 'tool', tool_call_id: 'c1', content: 'sunny' },
      ],
      tools,
      { parallel: false, text: true },
    )
    assert.equal(chat.length, 4)
    assert.equal(chat[0].role, 'system')
    assert.ok(
      chat[0].content.startsWith('Be brief.\n\nRespond in JSON format, either with `tool_call`'),
      chat[0].content,
    )
    assert.ok(chat[0].content.includes(JSON.stringify(tools, null, 2)))
    assert.ok(chat[0].content.endsWith('{"tool_call": {"name": "tool_name", "arguments": {"arg1": "some_value"}}}'))
    assert.deepEqual(chat[2], {
      role: 'assistant',
      content: '{"tool_call": {"name": "get_weather", "arguments": {"city": "Paris"}}}',
    })
    assert.deepEqual(chat[3].role, 'user')
    assert.deepEqual(JSON.parse(chat[3].content), {
      tool_response: { tool: 'get_weather', content: 'sunny', tool_call_id: 'c1' },
    })
    // Forced, a list of calls, no system message of its own: one is added; the wrappers are the table's.
    const forced = genericMessages([{ role: 'user', content: 'x' }], tools, { parallel: true, text: false })
    assert.equal(forced[0].role, 'system')
    assert.ok(forced[0].content.startsWith('Respond in JSON format with `tool_calls`'))
    assert.ok(
      forced[0].content.endsWith(
        `${TABLE.generic.begin}{"name": "tool_name", "arguments": {"arg1": "some_value"}}${TABLE.generic.end}`,
      ),
    )
  })
})

describe('formatOf: the format a chat template teaches', () => {
  test('from the markers of real templates; none when the template never reads tools', () => {
    // Shortened from the models' tokenizer_config.json: the parts that tell them apart.
    const qwen =
      '{%- if tools %}<tools>{% for tool in tools %}{{ tool | tojson }}{% endfor %}</tools> <tool_call>{%- endif %}'
    const llama = '{%- if tools is not none %}{{- "<|python_tag|>" }}{"name": ..., "parameters": ...}{%- endif %}'
    const llama32 =
      '{%- if tools is not none %}{{- \'{"name": "\' + tool_call.name + \'", \' }}{{- \'"parameters": \' }}{%- endif %}'
    const mistral =
      '{%- if tools is not none %}[AVAILABLE_TOOLS]{{ tools | tojson }}[/AVAILABLE_TOOLS]{%- endif %}[TOOL_CALLS]'
    const chatml = "{% for message in messages %}{{ '<|im_start|>' + message['role'] }}{% endfor %}"
    assert.equal(formatOf(qwen), 'hermes')
    assert.equal(formatOf(llama), 'llama3')
    assert.equal(formatOf(llama32), 'llama3')
    assert.equal(formatOf(mistral), 'mistral')
    assert.equal(formatOf('{% if tools %}{{ tools | tojson }}{% endif %}'), 'hermes')
    assert.equal(formatOf(chatml), null)
    // SmolLM3 reads its tools from xml_tools and writes <tool_call> blocks.
    const smollm3 =
      '{%- if xml_tools or python_tools -%}<tools>{%- for tool in xml_tools[:] -%}{{ tool | string }}{%- endfor -%}</tools> <tool_call>'
    assert.equal(formatOf(smollm3), 'hermes')
    assert.equal(toolsVariableOf(smollm3), 'xml_tools')
    assert.equal(toolsVariableOf(qwen), 'tools')
    assert.equal(toolsVariableOf(chatml), null)
    assert.equal(formatOf(null), null)
  })

  test('an unknown format is a TypeError', () => {
    assert.throws(() => new ToolCallStream('xml'), { name: 'TypeError', message: /unknown format xml/ })
  })
})

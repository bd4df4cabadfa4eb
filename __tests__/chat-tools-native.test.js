'use strict'
// A chat with tools rendered natively (CausalLM's `tools` option, Prompt::Messages carrying them):
// the prompt ids equal transformers' apply_chat_template(messages, tools=..., add_generation_prompt=True,
// tokenize=True) (computed here in a Python child, exact), through Qwen2.5's template (tools in
// `tools`) and SmolLM3's way (`xml_tools`: the functions alone) over qwen2-tiny's folder with the
// template swapped in; tool calls and tool results in the history reach the template; a template
// without tools refuses them; and a long chat with tools renders off the event loop.
const { test, describe, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { spawnSync } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const torch = require('..')

const REPO = path.join(__dirname, '..')
const SOURCE = path.join(REPO, 'models', 'golden', 'lm', 'qwen2-tiny')
const PYTHON = path.join(REPO, '.libtorch', 'bin', 'python')
const skip =
  (!fs.existsSync(path.join(SOURCE, 'manifest.json')) && 'qwen2-tiny is missing (node tools/models.js --lazy)') ||
  (!fs.existsSync(PYTHON) && 'no .libtorch/bin/python (transformers renders the reference)')

// Qwen2.5's chat template (hermes tool calls), as published with Qwen/Qwen2.5-0.5B-Instruct.
const QWEN25 = `{%- if tools %}
    {{- '<|im_start|>system\\n' }}
    {%- if messages[0]['role'] == 'system' %}
        {{- messages[0]['content'] }}
    {%- else %}
        {{- 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' }}
    {%- endif %}
    {{- "\\n\\n# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\nYou are provided with function signatures within <tools></tools> XML tags:\\n<tools>" }}
    {%- for tool in tools %}
        {{- "\\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\\"name\\": <function-name>, \\"arguments\\": <args-json-object>}\\n</tool_call><|im_end|>\\n" }}
{%- else %}
    {%- if messages[0]['role'] == 'system' %}
        {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}
    {%- else %}
        {{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\\n' }}
    {%- endif %}
{%- endif %}
{%- for message in messages %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) or (message.role == "assistant" and not message.tool_calls) %}
        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}
    {%- elif message.role == "assistant" %}
        {{- '<|im_start|>' + message.role }}
        {%- if message.content %}
            {{- '\\n' + message.content }}
        {%- endif %}
        {%- for tool_call in message.tool_calls %}
            {%- if tool_call.function is defined %}
                {%- set tool_call = tool_call.function %}
            {%- endif %}
            {{- '\\n<tool_call>\\n{"name": "' }}
            {{- tool_call.name }}
            {{- '", "arguments": ' }}
            {{- tool_call.arguments | tojson }}
            {{- '}\\n</tool_call>' }}
        {%- endfor %}
        {{- '<|im_end|>\\n' }}
    {%- elif message.role == "tool" %}
        {%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\\n<tool_response>\\n' }}
        {{- message.content }}
        {{- '\\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\\n' }}
{%- endif %}
`
// SmolLM3's way of reading tools: the functions alone, in xml_tools.
const XML_TOOLS = `{%- if xml_tools %}<|im_start|>system
<tools>{%- for tool in xml_tools %}
{{ tool | tojson }}{%- endfor %}
</tools><|im_end|>
{% endif %}{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + (message['content'] or '') + '<|im_end|>\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}`

const WEATHER = {
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'The weather in a city, café & <more>',
    parameters: {
      type: 'object',
      properties: { city: { type: 'string', description: 'e.g. Zürich' }, days: { type: 'integer' } },
      required: ['city'],
    },
  },
}
const TIME = { type: 'function', function: { name: 'get_time', parameters: { type: 'object', properties: {} } } }
const CHATS = {
  ask: [
    { role: 'system', content: 'Be brief.' },
    { role: 'user', content: 'Weather in Paris?' },
  ],
  // A call and its result in the history (the arguments as a mapping, as transformers documents).
  history: [
    { role: 'user', content: 'Weather in Paris?' },
    {
      role: 'assistant',
      content: null,
      tool_calls: [{ type: 'function', function: { name: 'get_weather', arguments: { city: 'Paris' } } }],
    },
    { role: 'tool', content: '{"sky": "sunny"}' },
    { role: 'user', content: 'And tomorrow?' },
  ],
}

/** A copy of qwen2-tiny's folder (model.pt2 linked) with `template` as its chat template. */
function withTemplate(dir, template) {
  fs.mkdirSync(dir)
  for (const f of fs.readdirSync(SOURCE)) {
    if (f === 'model.pt2') fs.symlinkSync(path.join(SOURCE, f), path.join(dir, f))
    else if (f !== 'chat_template.jinja') fs.copyFileSync(path.join(SOURCE, f), path.join(dir, f))
  }
  const config = JSON.parse(fs.readFileSync(path.join(dir, 'tokenizer_config.json'), 'utf8'))
  delete config.chat_template
  fs.writeFileSync(path.join(dir, 'tokenizer_config.json'), JSON.stringify(config))
  fs.writeFileSync(path.join(dir, 'chat_template.jinja'), template)
  return dir
}

describe('CausalLM: a chat with tools, rendered natively', { skip }, () => {
  let tmp
  const lms = {}
  const want = {}
  before(async () => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'chat-tools-'))
    const folders = {
      qwen: withTemplate(path.join(tmp, 'qwen'), QWEN25),
      xml: withTemplate(path.join(tmp, 'xml'), XML_TOOLS),
    }
    // transformers' ids, in one Python child: tools=TOOLS for Qwen2.5's template; SmolLM3's
    // xml_tools=[t["function"] for t in TOOLS].
    const script = `
import json, sys
from transformers import AutoTokenizer
spec = json.load(sys.stdin)
out = {}
for key, folder in spec["folders"].items():
    tok = AutoTokenizer.from_pretrained(folder)
    for name, chat in spec["chats"].items():
        extra = {"tools": spec["tools"]} if key == "qwen" else {"xml_tools": [t["function"] for t in spec["tools"]]}
        ids = tok.apply_chat_template(chat, add_generation_prompt=True, tokenize=True, return_dict=False, **extra)
        out[key + "/" + name] = list(ids)
print(json.dumps(out))
`
    const r = spawnSync(PYTHON, ['-c', script], {
      input: JSON.stringify({ folders, chats: CHATS, tools: [WEATHER, TIME] }),
      encoding: 'utf8',
      timeout: 120_000,
    })
    assert.equal(r.status, 0, r.stderr)
    Object.assign(want, JSON.parse(r.stdout))
    for (const [key, folder] of Object.entries(folders)) lms[key] = await torch.text.CausalLM.load(folder)
  })
  after(() => {
    for (const lm of Object.values(lms)) lm.dispose()
    if (tmp) fs.rmSync(tmp, { recursive: true, force: true })
  })

  test("the prompt ids equal transformers' apply_chat_template(tools=...) (exact)", async () => {
    for (const key of ['qwen', 'xml']) {
      for (const [name, chat] of Object.entries(CHATS)) {
        const ids = await lms[key].tokenize(chat, { tools: [WEATHER, TIME] })
        assert.deepEqual(ids, want[`${key}/${name}`], `${key}/${name}`)
      }
    }
    // The tools change the prompt: the tools-free rendering is shorter.
    const plain = await lms.qwen.tokenize(CHATS.ask)
    assert.ok(plain.length < want['qwen/ask'].length)
  })

  test('generate renders the same prompt (its length, as the engine counts it)', async () => {
    // Past this tiny model's 256-token context: the engine names the prompt's length, which is
    // that of the ids above, so generate rendered the tools as tokenize did.
    const n = want['qwen/history'].length
    assert.ok(n >= lms.qwen.maxContext, `${n} tokens`)
    await assert.rejects(lms.qwen.complete(CHATS.history, { tools: [WEATHER, TIME], maxNewTokens: 1 }), {
      code: 'InvalidArg',
      message: new RegExp(`the prompt has ${n} tokens`),
    })
    // A short chat with one small tool fits: the usage counts the rendered prompt.
    const tools = [TIME]
    const ids = await lms.xml.tokenize([{ role: 'user', content: 'hi' }], { tools })
    const r = await lms.xml.complete([{ role: 'user', content: 'hi' }], { tools, maxNewTokens: 2 })
    assert.equal(r.usage.promptTokens, ids.length)
  })

  test('strictContext: a prompt and maxNewTokens past the context are InvalidArg (vLLM words)', async () => {
    const chat = [{ role: 'user', content: 'hi' }]
    const n = (await lms.xml.tokenize(chat)).length
    const context = lms.xml.maxContext
    const wanted = context - n + 1
    await assert.rejects(lms.xml.complete(chat, { maxNewTokens: wanted, strictContext: true }), {
      code: 'InvalidArg',
      message: `CausalLM.generate: 'maxNewTokens' is too large: ${wanted}. This model's maximum context length is ${context} tokens and your request has ${n} input tokens (${wanted} > ${context} - ${n})`,
    })
    const fits = await lms.xml.complete(chat, { maxNewTokens: wanted - 1, strictContext: true, temperature: 0 })
    assert.ok(['stop', 'length'].includes(fits.finishReason))
  })

  test('bad tools and tools a template cannot render are coded errors', async () => {
    const chat = [{ role: 'user', content: 'hi' }]
    const bad = [
      [{ type: 'function', function: {} }, /options\.tools\[0\]\.function\.name: expected a non-empty string/],
      [{ type: 'retrieval' }, /options\.tools\[0\]: expected \{type: 'function'/],
      [{ type: 'function', function: { name: 'f', parameters: 'x' } }, /parameters: expected a JSON schema object/],
    ]
    for (const [tool, message] of bad) {
      assert.throws(() => lms.qwen.generate(chat, { tools: [tool] }), { code: 'InvalidArg', message })
    }
    assert.throws(() => lms.qwen.generate(chat, { tools: WEATHER }), {
      code: 'InvalidArg',
      message: /expected an array/,
    })
    const cycle = {}
    cycle.self = cycle
    assert.throws(() => lms.qwen.generate(chat, { tools: [cycle] }), { code: 'InvalidArg', message: /not JSON/ })
    assert.throws(() => lms.qwen.generate('text', { tools: [WEATHER] }), {
      code: 'InvalidArg',
      message: /only with a chat prompt/,
    })
    // qwen2-tiny's own template reads no tools: refused, not dropped.
    const plain = await torch.text.CausalLM.load(SOURCE)
    try {
      assert.throws(() => plain.generate(chat, { tools: [WEATHER] }), {
        code: 'InvalidArg',
        message: /chat template does not render tools/,
      })
      await assert.rejects(plain.tokenize(chat, { tools: [WEATHER] }), { code: 'InvalidArg' })
    } finally {
      plain.dispose()
    }
    // A message without content (and no tool calls), or of no role: InvalidArg naming it.
    assert.throws(() => lms.qwen.generate([{ role: 'user' }]), { code: 'InvalidArg', message: /prompt\[0\]\.content/ })
    assert.throws(() => lms.qwen.generate([{ content: 'x' }]), { code: 'InvalidArg', message: /prompt\[0\]\.role/ })
  })

  test('a long chat with tools renders off the event loop', async () => {
    // ~2 MB of turns: rendering and tokenizing them takes a while; the event loop keeps turning
    // meanwhile (setImmediate callbacks run while the promise is pending). Rendered on this thread,
    // no callback could run before the ids came back.
    const long = []
    for (let i = 0; i < 4000; i++) {
      long.push({
        role: i % 2 ? 'assistant' : 'user',
        content: `turn ${i}: ${'the quick brown fox jumps over the lazy dog '.repeat(12)}`,
      })
    }
    let ticks = 0
    let done = false
    const spin = () => {
      ticks++
      if (!done) setImmediate(spin)
    }
    setImmediate(spin)
    const ids = await lms.qwen.tokenize(long, { tools: [WEATHER, TIME] })
    done = true
    assert.ok(ids.length > 100_000, `${ids.length} ids`)
    assert.ok(ticks >= 3, `the event loop turned ${ticks} times while the chat was rendered`)
    // The same through generate: the prompt is past the context, refused once rendered off the loop.
    ticks = 0
    done = false
    setImmediate(spin)
    await assert.rejects(lms.qwen.complete(long, { tools: [WEATHER, TIME], maxNewTokens: 1 }), {
      message: new RegExp(`the prompt has ${ids.length} tokens`),
    })
    done = true
    assert.ok(ticks >= 3, `the event loop turned ${ticks} times while generate rendered the chat`)
  })
})

// `chatTemplate` at load: the chat renders with it (tools included), and a template that cannot
// render is refused at load, not on every request.
describe('CausalLM.load(folder, {chatTemplate})', () => {
  const LLAMA = path.join(REPO, 'models', 'golden', 'lm', 'llama-tiny')
  const skip = !fs.existsSync(path.join(LLAMA, 'manifest.json')) && 'no llama-tiny: run `npm run models`'
  test('renders with the given template; a syntax error or 2 MiB is InvalidArg at load', { skip }, async () => {
    const template =
      '{% if tools %}[tools {{ tools | length }}]{% endif %}{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}'
    const lm = await torch.text.CausalLM.load(LLAMA, { chatTemplate: template })
    try {
      const tokenizer = torch.text.Tokenizer.fromFile(LLAMA)
      const tools = [{ type: 'function', function: { name: 'f', parameters: { type: 'object', properties: {} } } }]
      const ids = await lm.tokenize([{ role: 'user', content: 'hi' }], { tools })
      assert.equal(tokenizer.decode(ids), '[tools 1]<user>hi')
    } finally {
      lm.dispose()
    }
    for (const [bad, message] of [
      ['{% for m in messages %}', /chat template: syntax error/],
      ['x'.repeat(2 << 20), /chat template: 2097152 bytes, at most 1 MiB/],
    ]) {
      await assert.rejects(torch.text.CausalLM.load(LLAMA, { chatTemplate: bad }), (e) => {
        assert.equal(e.code, 'InvalidArg')
        assert.match(e.message, message)
        return true
      })
    }
  })
})

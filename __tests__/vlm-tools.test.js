'use strict'
// Images and tools in one chat through torch-node serve, as the AI SDK sends them: the tiny LLaVA
// (models/make_vlm_models.py) under a chat template of its own that renders tools (Hermes'
// `<tool_call>` format), given as the model's `chatTemplate` (serve's --chat-template NAME=FILE),
// so that format applies rather than the generic one. The image is in the prompt beside the tools (usage counts its 16 tokens), a
// forced call is a valid call, and the turn after the tool's result, the image still in the
// history, is answered.
const { describe, test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const torch = require('..')

const FIXTURE = path.join(__dirname, '..', 'models', 'golden', 'vlm', 'llava-tiny')
const NO_VLM = !fs.existsSync(path.join(FIXTURE, 'manifest.json')) && 'no LLaVA fixture: run `npm run models -- --lazy`'
const TIMEOUT = { timeout: 120_000 }
// The fixture's template with a system turn naming the tools, and calls written back as Hermes'.
const TEMPLATE =
  "{% if tools %}<|im_start|>system\n{% for t in tools %}{{ t['function']['name'] }} {% endfor %}<tool_call><|im_end|>\n" +
  "{% endif %}{% for message in messages %}<|im_start|>{{ message['role'] }}\n{% if message['content'] is string %}" +
  "{{ message['content'] }}{% elif message['content'] %}{% for part in message['content'] %}{% if part['type'] == 'image' %}" +
  "<image>{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}{% endfor %}{% endif %}{% for c in message['tool_calls'] or [] %}" +
  "<tool_call>{{ c['function']['name'] }}</tool_call>{% endfor %}<|im_end|>\n{% endfor %}" +
  '{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}'

describe('images beside tools (the AI SDK through serve)', { skip: NO_VLM }, () => {
  const png = fs.readFileSync(path.join(__dirname, '..', 'models', 'images', 'coffee.png'))
  let served, ai, z, model

  before(async () => {
    served = await torch.serve({
      models: { llava: { folder: FIXTURE, chatTemplate: TEMPLATE } },
      port: 0,
      host: '127.0.0.1',
    })
    ai = await import('ai')
    ;({ z } = await import('zod'))
    const { createOpenAICompatible } = await import('@ai-sdk/openai-compatible')
    model = createOpenAICompatible({ baseURL: `${served.url}/v1`, name: 'torch-node' }).chatModel('llava')
  })
  after(async () => {
    await served?.close()
  })

  const tools = () => ({
    locate: ai.tool({ description: 'where the thing is', inputSchema: z.object({ x: z.number() }) }),
  })
  const ask = (content) => [{ role: 'user', content }]
  const run = (messages, extra = {}) =>
    ai.generateText({ model, messages, tools: tools(), temperature: 0, maxOutputTokens: 120, maxRetries: 0, ...extra })

  test('a forced call with an image in the prompt: a valid call, the image counted in usage', TIMEOUT, async () => {
    const withImage = await run(
      ask([
        { type: 'image', image: png },
        { type: 'text', text: 'Find it' },
      ]),
      {
        toolChoice: 'required',
      },
    )
    const without = await run(ask([{ type: 'text', text: 'Find it' }]), { toolChoice: 'required' })
    for (const r of [withImage, without]) {
      assert.equal(r.finishReason, 'tool-calls')
      assert.equal(r.toolCalls.length, 1)
      assert.equal(r.toolCalls[0].toolName, 'locate')
      assert.equal(typeof r.toolCalls[0].input.x, 'number')
    }
    // The image adds to the prompt what it adds without tools (the path the goldens check).
    const plain = await ai.generateText({
      model,
      messages: ask([
        { type: 'image', image: png },
        { type: 'text', text: 'Find it' },
      ]),
      temperature: 0,
      maxOutputTokens: 1,
      maxRetries: 0,
    })
    const plainWithout = await ai.generateText({
      model,
      messages: ask([{ type: 'text', text: 'Find it' }]),
      temperature: 0,
      maxOutputTokens: 1,
      maxRetries: 0,
    })
    const added = plain.usage.inputTokens - plainWithout.usage.inputTokens
    assert.ok(added >= 15, `the image's 16 tokens replace its one <image>: ${added}`)
    assert.equal(withImage.usage.inputTokens - without.usage.inputTokens, added)
  })

  test("the turn after the tool's result, the image still in the history", TIMEOUT, async () => {
    const first = ask([
      { type: 'image', image: png },
      { type: 'text', text: 'Find it' },
    ])
    const call = await run(first, { toolChoice: 'required' })
    const [c] = call.toolCalls
    const next = [
      ...first,
      {
        role: 'assistant',
        content: [{ type: 'tool-call', toolCallId: c.toolCallId, toolName: c.toolName, input: c.input }],
      },
      {
        role: 'tool',
        content: [
          {
            type: 'tool-result',
            toolCallId: c.toolCallId,
            toolName: c.toolName,
            output: { type: 'text', value: 'left' },
          },
        ],
      },
    ]
    const answer = await run(next, { toolChoice: 'auto' })
    assert.ok(['stop', 'length', 'tool-calls'].includes(answer.finishReason), answer.finishReason)
    assert.ok(
      answer.usage.inputTokens > call.usage.inputTokens,
      `the call and its result are in the prompt: ${answer.usage.inputTokens} after ${call.usage.inputTokens}`,
    )
  })
})

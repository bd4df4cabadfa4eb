'use strict'
// CausalLM.generate/complete with `responseFormat` (issue 36): whatever the model would have
// said, the output is JSON valid against the schema, text of the grammar or the regex, or tool
// calls in the model's format; bad formats are InvalidArg; constrained and free rows share a
// step without changing each other. The tiny random Llama of models/make_lm_models.py writes
// noise, which is the point: every token it would choose outside the format is masked away.
const { describe, test, after } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { z } = require('zod')
const torch = require('..')
const { parseToolCalls } = require('../lib/text/tool-calls')
const { nodeChild } = require('./helpers')

const LM = path.join(__dirname, '..', 'models', 'golden', 'lm', 'llama-tiny')
const skip = !fs.existsSync(path.join(LM, 'model.pt2')) && 'the tiny causal LM is missing (npm run models)'

const Person = z.object({
  name: z.string().max(12),
  age: z.number().int().min(0).max(150),
  role: z.enum(['admin', 'user', 'guest']),
  tags: z.array(z.string().max(6)).max(3),
})
const personSchema = z.toJSONSchema(Person)

describe('CausalLM responseFormat', { skip }, () => {
  /** @type {any} */
  let lm
  const load = async () => (lm ??= await torch.text.CausalLM.load(LM, { maxSequences: 4 }))
  after(() => lm?.dispose())

  test('json_schema: the output parses and validates (zod), and ends with stop, for several seeds', async () => {
    await load()
    for (const seed of [0, 1, 2]) {
      for (const prompt of ['Once upon a time', [{ role: 'user', content: 'Who are you?' }]]) {
        const r = await lm.complete(prompt, {
          responseFormat: { type: 'json_schema', json_schema: { name: 'person', schema: personSchema, strict: true } },
          temperature: 1,
          seed,
          maxNewTokens: 200,
        })
        assert.equal(r.finishReason, 'stop', `seed ${seed}: ${r.text}`)
        const parsed = Person.safeParse(JSON.parse(r.text))
        assert.ok(parsed.success, `seed ${seed}: ${r.text}: ${parsed.error}`)
      }
    }
  })

  test('json_object: any JSON object; greedy is deterministic', async () => {
    await load()
    const opts = { responseFormat: { type: 'json_object' }, maxNewTokens: 120 }
    const a = await lm.complete('Once upon a time', opts)
    const b = await lm.complete('Once upon a time', opts)
    assert.equal(a.text, b.text)
    if (a.finishReason === 'stop') assert.equal(typeof JSON.parse(a.text), 'object')
    // Cut by maxNewTokens, the text is a prefix of some JSON object: it starts as one.
    assert.match(a.text, /^\{/)
  })

  test('regex and grammar: the whole output matches', async () => {
    await load()
    const yn = await lm.complete('Is it raining?', {
      responseFormat: { type: 'regex', pattern: '(yes|no), [a-z]{2,5}' },
    })
    assert.match(yn.text, /^(yes|no), [a-z]{2,5}$/)
    assert.equal(yn.finishReason, 'stop')
    const grammar = 'start: "The answer is " NUM "."\nNUM: /[0-9]{1,3}/'
    const g = await lm.complete('Q: 6 x 7?', {
      responseFormat: { type: 'grammar', grammar },
      temperature: 0.8,
      seed: 3,
    })
    assert.match(g.text, /^The answer is [0-9]{1,3}\.$/)
    assert.equal(g.finishReason, 'stop')
  })

  test('tool_calls: required and a named function give calls whose arguments validate', async () => {
    await load()
    const Weather = z.object({ city: z.string().max(10), unit: z.enum(['c', 'f']) })
    const tools = [
      { type: 'function', function: { name: 'get_weather', parameters: z.toJSONSchema(Weather) } },
      {
        type: 'function',
        function: { name: 'get_time', parameters: { type: 'object', properties: {}, additionalProperties: false } },
      },
    ]
    for (const [toolChoice, names] of [
      ['required', ['get_weather', 'get_time']],
      [{ type: 'function', function: { name: 'get_weather' } }, ['get_weather']],
    ]) {
      for (const format of ['hermes', 'mistral', 'llama3', 'generic']) {
        const r = await lm.complete('What is the weather in Paris?', {
          responseFormat: { type: 'tool_calls', tools, toolChoice, format, parallel: false },
          temperature: 1,
          seed: 5,
          maxNewTokens: 150,
        })
        assert.equal(r.finishReason, 'stop', `${format}: ${r.text}`)
        const { toolCalls: calls } = parseToolCalls(r.text, format)
        assert.equal(calls.length, 1, `${format}: ${r.text}`)
        assert.ok(names.includes(calls[0].name), calls[0].name)
        if (calls[0].name === 'get_weather') assert.ok(Weather.safeParse(JSON.parse(calls[0].arguments)).success)
      }
    }
  })

  test('tool_calls auto in the generic format: a call or a text answer, one JSON object either way', async () => {
    await load()
    const tools = [
      {
        type: 'function',
        function: {
          name: 'add',
          parameters: {
            type: 'object',
            properties: { a: { type: 'integer' }, b: { type: 'integer' } },
            required: ['a', 'b'],
            additionalProperties: false,
          },
        },
      },
    ]
    const kinds = new Set()
    for (const seed of [0, 1, 2, 3, 4, 5]) {
      for (const parallel of [false, true]) {
        const r = await lm.complete('Add 2 and 3.', {
          responseFormat: { type: 'tool_calls', tools, toolChoice: 'auto', format: 'generic', parallel },
          temperature: 1,
          seed,
          maxNewTokens: 200,
        })
        if (r.finishReason !== 'stop') continue
        const value = JSON.parse(r.text)
        const [key] = Object.keys(value)
        assert.ok(['response', parallel ? 'tool_calls' : 'tool_call'].includes(key), r.text)
        kinds.add(key === 'response' ? 'text' : 'call')
        const { content, toolCalls } = parseToolCalls(r.text, 'generic')
        if (key === 'response') assert.equal(content, value.response)
        else for (const c of toolCalls) assert.equal(c.name, 'add')
      }
    }
    assert.ok(kinds.size > 0)
  })

  test("numbers: at most 16 digits in a row (llama.cpp's bound), in schemas and any JSON object", async () => {
    await load()
    const schema = {
      type: 'object',
      properties: {
        celsius: { type: 'number' },
        age: { type: 'integer' },
        list: { type: 'array', items: { type: 'number' } },
      },
      required: ['celsius', 'age', 'list'],
      additionalProperties: false,
    }
    for (const seed of [0, 1, 2, 3]) {
      for (const responseFormat of [{ type: 'json_schema', schema }, { type: 'json_object' }]) {
        const r = await lm.complete('Numbers:', { responseFormat, temperature: 1.5, seed, maxNewTokens: 300 })
        const runs = r.text.replace(/"(?:[^"\\]|\\.)*(?:"|$)/g, '""').match(/[0-9]+/g) ?? []
        assert.ok(
          runs.every((d) => d.length <= 16),
          r.text,
        )
      }
    }
  })

  test('constrained and free rows in one step: the free ones give what they give alone', async () => {
    await load()
    const free = { maxNewTokens: 24 }
    const alone = await lm.complete('Once upon a time', free)
    const json = { responseFormat: { type: 'json_schema', schema: personSchema }, maxNewTokens: 200 }
    const [a, b, c, d] = await Promise.all([
      lm.complete('Once upon a time', free),
      lm.complete('Who are you?', json),
      lm.complete('Once upon a time', free),
      lm.complete('Tell me', json),
    ])
    assert.deepEqual([a.tokens, c.tokens], [alone.tokens, alone.tokens])
    for (const r of [b, d]) assert.ok(Person.safeParse(JSON.parse(r.text)).success, r.text)
  })

  test('bad formats are InvalidArg naming the part: at the call, or from the generation once compiled', async () => {
    await load()
    const sync = (format) => {
      try {
        lm.generate('x', { responseFormat: format })
        return 'no error'
      } catch (e) {
        return `${e.code}: ${e.message}`
      }
    }
    assert.match(sync({ type: 'xml' }), /^InvalidArg: .*responseFormat\.type must be/)
    assert.match(sync('json'), /^InvalidArg: .*responseFormat: expected an object/)
    assert.match(sync({ type: 'json_schema' }), /^InvalidArg: .*schema is missing/)
    assert.match(sync({ type: 'json_schema', schema: {}, extra: 1 }), /^InvalidArg: .*unknown key 'extra'/)
    assert.match(
      sync({ type: 'tool_calls', tools: [], toolChoice: 'auto', format: 'hermes' }),
      /^InvalidArg: .*toolChoice must be 'required'/,
    )
    const cyclic = { type: 'json_schema', schema: {} }
    cyclic.schema.self = cyclic
    assert.match(sync(cyclic), /^InvalidArg: .*not JSON/)
    assert.match(sync({ type: 'json_schema', schema: { n: 1n } }), /^InvalidArg: .*not JSON \(Do not know/)
    // A getter's own throw, even a TypeError, reaches the caller as it was thrown.
    const mine = new TypeError('the getter threw')
    const getter = { type: 'json_schema', schema: {} }
    Object.defineProperty(getter.schema, 'type', {
      enumerable: true,
      get: () => {
        throw mine
      },
    })
    assert.throws(
      () => lm.generate('x', { responseFormat: getter }),
      (e) => e === mine,
    )
    const later = (format) =>
      lm.complete('x', { responseFormat: format, maxNewTokens: 4 }).then(
        () => 'no error',
        (e) => `${e.code}: ${e.message}`,
      )
    assert.match(
      await later({ type: 'json_schema', schema: { type: 'nope' } }),
      /^InvalidArg: .*responseFormat\.schema/,
    )
    assert.match(await later({ type: 'grammar', grammar: 'start: (' }), /^InvalidArg: .*responseFormat\.grammar/)
    const tools = [{ type: 'function', function: { name: 'f' } }]
    const named = { type: 'function', function: { name: 'g' } }
    assert.match(
      await later({ type: 'tool_calls', tools, toolChoice: named, format: 'hermes' }),
      /^InvalidArg: .*no tool is named 'g'/,
    )
    // The model still serves.
    assert.equal((await lm.complete('Once', { maxNewTokens: 3 })).tokens.length, 3)
  })
})

describe('CausalLM responseFormat, hostile (a child process)', { skip }, () => {
  test('a $ref cycle with no finite value, a 3 MB schema, 5,000 levels, not a schema, an ambiguous grammar: InvalidArg, and the model serves on', async () => {
    const r = await nodeChild(
      `
      const torch = require('.')
      ;(async () => {
        const lm = await torch.text.CausalLM.load(${JSON.stringify(LM)})
        const codes = {}
        const run = (name, format) => lm.complete('x', { responseFormat: format, maxNewTokens: 64 }).then(
          (r) => { codes[name] = 'ok ' + r.finishReason }, (e) => { codes[name] = e.code })
        await run('refCycle', { type: 'json_schema', schema: { $ref: '#/$defs/a', $defs: { a: { type: 'object', properties: { a: { $ref: '#/$defs/a' } }, required: ['a'] } } } })
        const props = {}
        for (let i = 0; i < 60000; i++) props['p' + i] = { type: 'string', description: 'x'.repeat(40) }
        await run('huge', { type: 'json_schema', schema: { type: 'object', properties: props } })
        let deep = { type: 'string' }
        for (let i = 0; i < 5000; i++) deep = { type: 'object', properties: { a: deep }, required: ['a'] }
        await run('deep', { type: 'json_schema', schema: deep })
        let nested = { type: 'string' }
        for (let i = 0; i < 40; i++) nested = { type: 'object', properties: { a: nested }, required: ['a'] }
        await run('nested', { type: 'json_schema', schema: nested })
        await run('ambiguous', { type: 'grammar', grammar: 'start: x+\\nx: "a" | x x' })
        await run('notSchema', { type: 'json_schema', schema: { type: 12, properties: [] } })
        const after = await lm.complete('Once', { maxNewTokens: 3 })
        console.log('OUT ' + JSON.stringify({ codes, after: after.tokens.length }))
        lm.dispose()
      })()`,
      { timeoutMs: 120_000 },
    )
    assert.equal(r.signal, null, r.stderr)
    assert.equal(r.code, 0, r.stderr)
    assert.doesNotMatch(r.stderr, /panicked|FATAL|Segmentation/)
    const out = JSON.parse(
      r.stdout
        .split('\n')
        .find((l) => l.startsWith('OUT '))
        .slice(4),
    )
    assert.deepEqual(out.codes, {
      refCycle: 'InvalidArg',
      huge: 'InvalidArg',
      deep: 'InvalidArg',
      // 40 levels is within the limits: it compiles and generates.
      nested: out.codes.nested,
      // An ambiguous grammar either completes within the constraint's time budget or fails it.
      ambiguous: out.codes.ambiguous === 'InvalidArg' ? 'InvalidArg' : out.codes.ambiguous,
      notSchema: 'InvalidArg',
    })
    assert.match(out.codes.ambiguous, /^(InvalidArg|ok (stop|length))$/)
    assert.match(out.codes.nested, /^ok (stop|length)$/)
    assert.equal(out.after, 3)
  })
})

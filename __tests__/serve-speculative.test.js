'use strict'
// `torch-node serve --speculative [NAME=]prompt-lookup[,max-draft=N][,ngram=N]`: the flag's parsing
// and errors, and a server started with it (the tiny random Llama of models/make_lm_models.py under
// two names, one speculative) answering a greedy chat with the same text as without it, the drafted
// and accepted tokens on /metrics for that model alone.
const test = require('node:test')
const assert = require('node:assert/strict')
const { spawn } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')
const { parse } = require('../lib/serve/cli')

const ROOT = path.join(__dirname, '..')
const FOLDER = path.join(ROOT, 'models', 'golden', 'lm', 'llama-tiny')
const manifest = path.join(FOLDER, 'manifest.json')
const skip =
  !(fs.existsSync(manifest) && JSON.parse(fs.readFileSync(manifest, 'utf8')).format >= 2) &&
  'the format 2 llama-tiny export is missing (npm run models)'

test('--speculative: for every causal LM, or NAME= for one (which wins whatever the order)', () => {
  const models = (argv) => parse(['--model', 'a=/x', '--model', 'b=/y', ...argv]).models
  const lookup = { method: 'prompt-lookup' }
  assert.deepEqual(models([]).a.speculative, undefined)
  let m = models(['--speculative', 'prompt-lookup'])
  assert.deepEqual([m.a.speculative, m.b.speculative], [lookup, lookup])
  m = models(['--speculative', 'b=prompt-lookup,ngram=2', '--speculative', 'prompt-lookup,max-draft=6'])
  assert.deepEqual(m.a.speculative, { ...lookup, maxDraft: 6 })
  assert.deepEqual(m.b.speculative, { ...lookup, ngram: 2 })
  m = models(['--speculative', 'a=prompt-lookup,max-draft=7,ngram=4'])
  assert.deepEqual([m.a.speculative, m.b.speculative], [{ ...lookup, maxDraft: 7, ngram: 4 }, undefined])
  const refused = [
    ['ngram', /expected \[NAME=\]prompt-lookup/],
    ['c=prompt-lookup', /no --model named "c"/],
    ['=prompt-lookup', /expected \[NAME=\]prompt-lookup/],
    ['prompt-lookup,draft=3', /expected max-draft=N or ngram=N/],
    ['prompt-lookup,max-draft', /expected max-draft=N or ngram=N/],
    ['prompt-lookup,ngram=2,ngram=3', /once each/],
    ['prompt-lookup,max-draft=0', /max-draft: expected an integer ≥ 1/],
    ['prompt-lookup,max-draft=two', /max-draft: expected an integer/],
  ]
  for (const [flag, message] of refused) assert.throws(() => models(['--speculative', flag]), message, flag)
  assert.throws(
    () => models(['--speculative', 'a=prompt-lookup', '--speculative', 'a=prompt-lookup']),
    /"a" is given twice/,
  )
})

/** `torch-node serve ARGS` on a free loopback port; resolves to `{child, url}` once it listens. */
async function start(args) {
  const child = spawn(
    process.execPath,
    [path.join(ROOT, 'bin', 'torch-node.js'), 'serve', '--host', '127.0.0.1', '--port', '0', ...args],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  )
  let log = ''
  child.stderr.on('data', (d) => (log += d))
  const url = await new Promise((resolve, reject) => {
    let out = ''
    child.stdout.on('data', (d) => {
      out += d
      const m = /listening on (http:\/\/\S+)/.exec(out)
      if (m) resolve(m[1])
    })
    child.once('exit', (code) => reject(new Error(`serve exited with ${code}: ${log}`)))
  })
  return { child, url }
}

/** The value of `name{model_name="model"}` on /metrics text; undefined when not printed. */
function metric(text, name, model) {
  const line = text.split('\n').find((l) => l.startsWith(`${name}{`) && l.includes(`model_name="${model}"`))
  return line === undefined ? undefined : Number(line.split(' ').pop())
}

test(
  'a server started with --speculative answers greedy chats as one without, drafts on /metrics',
  {
    skip,
    timeout: 180_000,
  },
  async () => {
    const { child, url } = await start([
      '--model',
      `plain=${FOLDER}`,
      '--model',
      `fast=${FOLDER}`,
      '--speculative',
      'fast=prompt-lookup,max-draft=6',
    ])
    try {
      const chat = async (model, content) => {
        const res = await fetch(`${url}/v1/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ model, messages: [{ role: 'user', content }], max_tokens: 40, temperature: 0 }),
        })
        assert.equal(res.status, 200)
        return (await res.json()).choices[0].message.content
      }
      // A prompt that repeats itself: prompt lookup drafts on most steps.
      const prompts = ['one two three four five six one two three four five six one two three', 'Hello there!']
      for (const p of prompts) assert.equal(await chat('fast', p), await chat('plain', p), p)
      const text = await (await fetch(`${url}/metrics`)).text()
      const drafted = metric(text, 'vllm:spec_decode_num_draft_tokens_total', 'fast')
      const accepted = metric(text, 'vllm:spec_decode_num_accepted_tokens_total', 'fast')
      assert.ok(drafted > 0, `drafted ${drafted}`)
      assert.ok(accepted >= 0 && accepted <= drafted, `accepted ${accepted} of ${drafted}`)
      assert.equal(metric(text, 'vllm:spec_decode_num_draft_tokens_total', 'plain'), undefined)
    } finally {
      child.kill('SIGTERM')
      await new Promise((resolve) => child.once('exit', resolve))
    }
  },
)

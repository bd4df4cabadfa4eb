'use strict'
// torch.pipeline('text-generation', folder): transformers' TextGenerationPipeline shapes over
// torch.text.CausalLM, on the tiny random Llama of models/make_lm_models.py (greedy, so each answer
// must equal lm.complete's): a string continued as it is, chat messages answered through the chat
// template, returnFullText, a batch of prompts, and coded errors.
const { describe, test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const torch = require('..')
const { coded } = require('./helpers')
const { TextGenerationPipeline } = require('../lib/text/text-generation')

const MODEL_DIR = path.join(__dirname, '..', 'models', 'golden', 'lm', 'llama-tiny')
const skip = !fs.existsSync(path.join(MODEL_DIR, 'model.pt2')) && `no ${MODEL_DIR}: run \`npm run models\``
const GREEDY = { temperature: 0, maxNewTokens: 8 }

describe("torch.pipeline('text-generation')", { skip }, () => {
  let generator
  before(async () => {
    generator = await torch.pipeline('text-generation', MODEL_DIR, { maxSequences: 2 })
  })
  after(() => generator?.dispose())

  test('a string: the prompt and its continuation (returnFullText), or the continuation alone', async () => {
    assert.ok(generator instanceof TextGenerationPipeline)
    assert.equal(generator.task, 'text-generation')
    const want = await generator.model.complete('Once upon a time', GREEDY)
    assert.deepEqual(await generator.run('Once upon a time', GREEDY), [
      { generatedText: `Once upon a time${want.text}` },
    ])
    assert.deepEqual(await generator.run('Once upon a time', { ...GREEDY, returnFullText: false }), [
      { generatedText: want.text },
    ])
  })

  test('chat messages: the conversation with the assistant turn appended', async () => {
    const messages = [{ role: 'user', content: 'Hello there!' }]
    const want = await generator.model.complete(messages, GREEDY)
    const [answer] = await generator.run(messages, GREEDY)
    assert.deepEqual(answer.generatedText, [...messages, { role: 'assistant', content: want.text }])
    const [turn] = await generator.run(messages, { ...GREEDY, returnFullText: false })
    assert.deepEqual(turn.generatedText, [{ role: 'assistant', content: want.text }])
  })

  test('an array of prompts: one answer list each, generated concurrently', async () => {
    const prompts = ['The sky is', [{ role: 'user', content: 'Hi' }]]
    const answers = await generator.run(prompts, { ...GREEDY, returnFullText: false })
    assert.equal(answers.length, 2)
    assert.equal(answers[0][0].generatedText, (await generator.model.complete('The sky is', GREEDY)).text)
    assert.equal(answers[1][0].generatedText[0].role, 'assistant')
  })

  test('coded errors: bad prompts and options; the wrong folder kind', async () => {
    await assert.rejects(generator.run(5), coded('InvalidArg'))
    await assert.rejects(generator.run('hi', { returnFullText: 'yes' }), coded('InvalidArg'))
    await assert.rejects(generator.run('hi', { maxNewTokenz: 3 }), coded('InvalidArg'))
    await assert.rejects(generator.run('hi', null), coded('InvalidArg'))
    const encoder = path.join(__dirname, '..', 'models', 'golden', 'pipeline', 'sentiment')
    if (fs.existsSync(encoder)) {
      await assert.rejects(torch.pipeline('text-generation', encoder), coded('ModelLoadError'))
    }
    assert.throws(() => new TextGenerationPipeline(Symbol('x')), coded('InvalidArg'))
  })
})

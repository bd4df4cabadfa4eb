'use strict'
// torch-node's side of bench/multimodal.js, one process: torch.pipeline on an exported folder, or
// torch.text.CausalLM's image chat (chelsea.png and a question, greedy) on an export_vlm.py folder.
//   node bench/multimodal-child.js torch-node automatic-speech-recognition FOLDER NEW_TOKENS
//   node bench/multimodal-child.js torch-node image-text-to-text FOLDER NEW_TOKENS
// Line protocol as bench/multimodal_child.py: `one N SEED` -> ms for N calls one after another;
// `many N SEED` -> ms for N calls made at once (each its own caller); `tokens` -> the tokens one
// call generates; `quit`.
const fs = require('node:fs')
const path = require('node:path')
const readline = require('node:readline')

/** One greedy image chat (bench/multimodal_child.py's VLM_QUESTION) per call. */
async function imageChat(torch, folder, newTokens) {
  const lm = await torch.text.CausalLM.load(folder)
  const image = path.join(__dirname, '..', 'models', 'images', 'chelsea.png')
  const chat = [
    {
      role: 'user',
      content: [
        { type: 'image', image },
        { type: 'text', text: 'What is in the picture?' },
      ],
    },
  ]
  return () => lm.complete(chat, { maxNewTokens: Number(newTokens) })
}

/** One transcription of the bench clip per call. */
async function speech(torch, folder, newTokens) {
  const pipe = await torch.pipeline('automatic-speech-recognition', folder)
  const bytes = fs.readFileSync(path.join(path.dirname(folder), 'speech.f32'))
  const audio = new Float32Array(bytes.buffer, bytes.byteOffset, bytes.length / 4)
  const options = { language: 'en', task: 'transcribe', maxNewTokens: Number(newTokens) }
  return () => pipe.run(audio, options)
}

async function main() {
  const [kind, task, folder, newTokens] = process.argv.slice(2)
  if (kind !== 'torch-node' || !['automatic-speech-recognition', 'image-text-to-text'].includes(task))
    throw new Error(`multimodal-child: unknown contender ${kind} ${task}`)
  const torch = require('..')
  const run =
    task === 'image-text-to-text' ? await imageChat(torch, folder, newTokens) : await speech(torch, folder, newTokens)
  await run()
  console.log(JSON.stringify({ ready: true }))
  for await (const line of readline.createInterface({ input: process.stdin })) {
    const [cmd, n] = line.split(' ')
    if (cmd === 'quit') break
    if (cmd === 'tokens') {
      console.log((await run()).tokens.length)
      continue
    }
    const t0 = performance.now()
    if (cmd === 'one') for (let i = 0; i < Number(n); i++) await run()
    else await Promise.all(Array.from({ length: Number(n) }, run))
    console.log(performance.now() - t0)
  }
  process.exit(0)
}

main().catch((e) => {
  console.error(e)
  process.exit(1)
})

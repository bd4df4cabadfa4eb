'use strict'
// A model server whose event loop stays responsive: `forward` runs on the libuv pool.
//   node examples/http-server.js   then
//   curl -s localhost:3000/predict -d '{"input": [[1, 2, 3, 4]]}'
// (Express works the same way: `app.post('/predict', async (req, res) => ...)`.)
const http = require('node:http')
const path = require('node:path')
const torch = require('..')

const model = new torch.ScriptModule(path.join(__dirname, '..', 'models', 'fixtures', 'mlp_traced.pt'))

const server = http.createServer(async (req, res) => {
  if (req.method === 'GET' && req.url === '/health') return res.end('ok')
  if (req.method !== 'POST' || req.url !== '/predict') return res.writeHead(404).end()
  let body = ''
  for await (const chunk of req) body += chunk
  try {
    const output = await model.forward(torch.tensor(JSON.parse(body).input))
    res.setHeader('content-type', 'application/json')
    res.end(JSON.stringify({ output: output.toArray() }))
  } catch (e) {
    // Bad input is an Error with a code (ShapeMismatch, InvalidArg, ...), never a crash.
    res.writeHead(400, { 'content-type': 'application/json' })
    res.end(JSON.stringify({ code: e.code, message: e.message }))
  }
})

server.listen(Number(process.env.PORT) || 3000, '127.0.0.1', () => {
  console.log(`listening on http://127.0.0.1:${server.address().port}`)
})

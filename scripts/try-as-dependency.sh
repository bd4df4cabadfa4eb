#!/usr/bin/env bash
# Proves torch-node installs as a dependency of an ordinary Express app, as a user would get it:
# `npm pack`, then `npm install <tarball>` in a fresh folder whose package.json allows our install
# script (npm 11's `allowScripts`; the `--allow-scripts` flag is refused in project installs),
# then an Express route that runs a model.
# Set LIBTORCH or LIBTORCH_USE_PYTORCH=1 (with PYTHON) to reuse a libtorch instead of a new
# virtualenv inside node_modules/torch-node/.libtorch.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
echo "[try-as-dependency] packing into $work"
tarball=$(cd "$root" && npm pack --pack-destination "$work" --silent | tail -n 1)
mkdir "$work/app"
cd "$work/app"
cat > package.json <<'JSON'
{
  "name": "express-app",
  "version": "1.0.0",
  "private": true,
  "main": "server.js",
  "dependencies": { "express": "^4.21.0" },
  "allowScripts": { "torch-node": true }
}
JSON
cat > server.js <<'JS'
const express = require('express')
const path = require('node:path')
const torch = require('torch-node')

const model = new torch.ScriptModule(path.join(require.resolve('torch-node'), '..', 'models', 'fixtures', 'mlp_traced.pt'))
const app = express()
app.use(express.json())
app.post('/predict', async (req, res) => {
  const y = await model.forward(torch.tensor(req.body.input))
  res.json({ output: y.toArray(), repr: y.toString() })
})
const server = app.listen(0, '127.0.0.1', async () => {
  const { port } = server.address()
  const r = await fetch(`http://127.0.0.1:${port}/predict`, {
    method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ input: [[1, 2, 3, 4]] }),
  })
  console.log('[try-as-dependency] POST /predict ->', r.status, JSON.stringify(await r.json()))
  server.close()
})
JS
echo "[try-as-dependency] npm install $tarball (allowScripts: torch-node)"
npm install --no-audit --no-fund "$work/$tarball"
node server.js
# The `torch-node` command is linked into node_modules/.bin; an app's install generates no models,
# so without --model it must say so in one line and exit 2.
set +e
out=$(./node_modules/.bin/torch-node classify 2>&1); code=$?
set -e
echo "[try-as-dependency] torch-node classify (no bundled model) -> exit $code: $out"
[ "$code" -eq 2 ] && [ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ]
echo "[try-as-dependency] OK: $work/app"

#!/usr/bin/env bash
# The GPU machine's half of tools/device-check.sh (copied there as .device-check/run.sh): one
# command that makes the models with that machine's Python, runs the CUDA suite against the
# staged package, then the GPU benchmarks, prints a summary and leaves its logs in OUT_DIR.
#
#   bash .device-check/run.sh OUT_DIR
#
# Needs only what the machine has: bash, a Python with torch (TORCH_NODE_PYTHON, default
# /opt/torch/.venv/bin/python) and a GPU. No Node (.device-check/ brings one), no Rust, no
# registry. Every step has a time limit so that the whole stays under 8 minutes.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${1:?usage: bash .device-check/run.sh OUT_DIR}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
PY=${TORCH_NODE_PYTHON:-/opt/torch/.venv/bin/python}
BUDGET=${TORCH_NODE_CHECK_BUDGET_S:-470}
exec > >(tee "$OUT/run.log") 2>&1
step() { echo "[device-check] ${SECONDS} s: $*"; }
left() { echo $((BUDGET - SECONDS)); }
declare -A RESULT

step "unpacking Node and the addon"
"$PY" - "$HERE" <<'EOF' || { echo 'unpacking failed'; exit 1; }
import lzma, os, shutil, sys
here = sys.argv[1]
for packed, dest in [("node.xz", "bin/node"), ("pkg/torch-node.node.xz", "pkg/torch-node.node")]:
    src, dst = os.path.join(here, packed), os.path.join(here, dest)
    if os.path.exists(dst) and os.path.getmtime(dst) >= os.path.getmtime(src):
        continue
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    with lzma.open(src) as f, open(dst + ".tmp", "wb") as g:
        shutil.copyfileobj(f, g)
    os.chmod(dst + ".tmp", 0o755)
    os.replace(dst + ".tmp", dst)
EOF
NODE="$HERE/bin/node"
TORCH_DIR=$("$PY" -c 'import os, torch; print(os.path.dirname(torch.__file__))')
ln -sfn "$TORCH_DIR" "$HERE/pkg/libtorch"
"$PY" -c 'import torch, transformers, sys; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "transformers", transformers.__version__, "gpu", torch.cuda.get_device_name(0) if torch.cuda.is_available() else None)' | tee "$OUT/versions.txt"
"$NODE" -e "const t = require('$HERE/pkg'); console.log('node', process.version, 'torch-node libtorch', t.version, 'cuda', t.cuda.isAvailable(), t.cuda.deviceCount())" |
  tee -a "$OUT/versions.txt"
RESULT[load]=${PIPESTATUS[0]}
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv >>"$OUT/versions.txt"

step "models, with this machine's Python (tools/compat_models.py --cuda)"
timeout 200 "$PY" "$HERE/tools/compat_models.py" "$HERE/fixtures" --cuda >"$OUT/models.log" 2>&1
RESULT[models]=$?
tail -5 "$OUT/models.log"

step "the CUDA suite"
TORCH_NODE_PACKAGE="$HERE/pkg" TORCH_NODE_CUDA_FIXTURES="$HERE/fixtures" timeout 150 "$NODE" --expose-gc --test \
  --test-concurrency=1 --test-reporter=spec --test-reporter-destination="$OUT/suite.txt" \
  --test-reporter=tap --test-reporter-destination="$OUT/suite.tap" "$HERE"/__tests__/cuda/*.test.js
RESULT[suite]=$?
tail -12 "$OUT/suite.txt"

step "the GPU benchmarks ($(left) s left)"
if [ "$(left)" -gt 60 ]; then
  # --deadline-s: no measurement starts after it (each takes seconds to a minute), so the run ends
  # within the budget; timeout is the backstop.
  TORCH_NODE_PACKAGE="$HERE/pkg" timeout $(($(left) - 5)) "$NODE" "$HERE/bench/cuda.js" --python "$PY" \
    --work "$HERE/bench-work" --out "$OUT/bench.md" --deadline-s $(($(left) - 60)) 2>&1 | tee "$OUT/bench.log"
  RESULT[bench]=${PIPESTATUS[0]}
else
  echo "skipped: $(left) s left"
fi

step "summary"
{
  echo "device check, $(date -u +%Y-%m-%dT%H:%MZ), ${SECONDS} s"
  cat "$OUT/versions.txt"
  for k in load models suite bench; do echo "$k: exit ${RESULT[$k]:-not run}"; done
  grep -E '^# (tests|pass|fail|skipped|todo)' "$OUT/suite.tap"
  grep -E '^not ok' "$OUT/suite.tap"
  [ -f "$OUT/bench.md" ] && cat "$OUT/bench.md"
} | tee "$OUT/summary.txt"
for k in load models suite; do [ "${RESULT[$k]:-1}" = 0 ] || exit 1; done

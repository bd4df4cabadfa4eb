#!/usr/bin/env bash
# Prepares everything the GPU check machine needs (issue 35) in the git-ignored .device-check/,
# within the 64 MiB one command may carry there, and prints what to send and the one command to
# run there. That machine has Python 3.12 with torch 2.11.0+cu130 and transformers 5.17 at
# /opt/torch/.venv, and no Node, Rust or registry; so .device-check/ holds:
#
#   node.xz                    Node 24 (the npm registry's, tools/node-lines.js), xz-compressed
#   pkg/                       the package: index.js, lib/, package.json, ..., and
#   pkg/torch-node.node.xz     the addon built here against PyPI's torch 2.11.0
#                              (tools/libtorch-compat.js 2.11, which also smoke-tests it);
#                              run.sh links pkg/libtorch to the machine's own torch
#   __tests__/cuda/, coded.js  the CUDA suite and the error validator it shares
#   bench/cuda.js, bench/cuda_peer.py   the GPU benchmarks (torch-node, and Python in its own process)
#   tools/compat_models.py, python/     the model script and the exporters it runs
#   run.sh                     tools/device-check-run.sh: the command to run there
#
#   bash tools/device-check.sh            prepare (the 2.11 build is cached in .libtorch-compat/)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
DEST=.device-check
LIMIT=$((64 * 1024 * 1024))
log() { echo "[device-check] $*"; }

log "the addon against torch 2.11 (tools/libtorch-compat.js 2.11: build and smoke suite)"
node tools/libtorch-compat.js 2.11
NODE24=$(node tools/node-lines.js 24)

mkdir -p "$DEST"
# Compressing Node takes minutes on 2 cores: only when the binary changed.
if [ ! -f "$DEST/node.xz" ] || [ "$NODE24" -nt "$DEST/node.xz" ]; then
  log "compressing Node $("$NODE24" --version) (xz)"
  xz -T0 -6 -c "$NODE24" >"$DEST/node.xz.tmp" && mv "$DEST/node.xz.tmp" "$DEST/node.xz"
fi
ADDON=.libtorch-compat/2.11/pkg/torch-node.node
if [ ! -f "$DEST/pkg/torch-node.node.xz" ] || [ "$ADDON" -nt "$DEST/pkg/torch-node.node.xz" ]; then
  rm -rf "$DEST/pkg"
  node -e "require('./tools/libtorch-compat').stagePackage(process.argv[1], process.argv[2], null)" "$DEST/pkg" "$ADDON"
  # debug sections are not needed there; the symbols stay (stack traces)
  strip --strip-debug "$DEST/pkg/torch-node.node"
  xz -T0 -6 "$DEST/pkg/torch-node.node"
else
  # the JS may have changed since: refresh everything but the addon
  node -e "
    const fs = require('node:fs'), path = require('node:path')
    const { PACKAGE_FILES } = require('./tools/libtorch-compat')
    for (const f of PACKAGE_FILES) {
      fs.rmSync(path.join(process.argv[1], f), { recursive: true, force: true })
      fs.cpSync(f, path.join(process.argv[1], f), { recursive: true })
    }" "$DEST/pkg"
fi
# What a run of run.sh here left (the unpacked Node and addon, models) would not fit in 64 MiB.
rm -rf "$DEST/__tests__" "$DEST/bench" "$DEST/tools" "$DEST/python" "$DEST/fixtures" "$DEST/bin" "$DEST/bench-work" \
  "$DEST/pkg/torch-node.node" "$DEST/pkg/libtorch"
mkdir -p "$DEST/__tests__" "$DEST/bench" "$DEST/tools"
cp -r __tests__/cuda "$DEST/__tests__/cuda"
cp __tests__/coded.js "$DEST/__tests__/"
cp bench/cuda.js bench/cuda_peer.py bench/cli.js "$DEST/bench/"
cp tools/compat_models.py "$DEST/tools/"
cp -r python "$DEST/python"
cp tools/device-check-run.sh "$DEST/run.sh"
chmod +x "$DEST/run.sh"

SIZE=$(du -sb "$DEST" | cut -f1)
log "contents of $DEST/ ($((SIZE / 1024)) KiB; the limit is $((LIMIT / 1024)) KiB):"
du -ab "$DEST" | sort -k2 | awk -v d="$DEST/" '{ sub(d, "", $2); if ($2 != "'"$DEST"'") printf "  %10d  %s\n", $1, $2 }' |
  grep -Ev '  (__tests__/cuda|python|pkg/lib|pkg/python)/.' || true
if [ "$SIZE" -gt "$LIMIT" ]; then
  log "$DEST/ is over 64 MiB: it cannot be carried to the GPU machine"
  exit 1
fi
log "send: $DEST (an ignored folder: name it in the run's carry list)"
log "run there (OUT is the folder the logs go to; under 8 minutes):"
echo
echo "  bash $DEST/run.sh \"\$OUT\""
echo

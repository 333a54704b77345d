#!/bin/sh
# The device check, in one call on a lent NVIDIA machine (docs/operations.md, "The device check"):
#   here:   node scripts/device-check/build.mjs --with-tools   (bundle, runc, node.xz in .device-check/)
#   there:  sh scripts/device-check/run.sh                      (carry: .device-check)
#   here:   sh scripts/device-check/run.sh --fake-gpu           (no GPU: a fake one, refused on time)
# Writes the JSON summary to $OUT/device-check.json when OUT is set. Runs as root (runc).
set -eu
cd "$(dirname "$0")/../.."
tools="$PWD/.device-check"
[ -f "$tools/device-check.mjs" ] || { echo "no $tools/device-check.mjs: run node scripts/device-check/build.mjs --with-tools first" >&2; exit 2; }
export PATH="$tools:$PATH"
if ! command -v runc >/dev/null 2>&1; then echo "no runc on this machine nor in $tools" >&2; exit 2; fi
node=$(command -v node || true)
if [ -z "$node" ]; then
  [ -f "$tools/node.xz" ] || { echo "no node here and no $tools/node.xz" >&2; exit 2; }
  # xz may be missing too; Python's lzma is not.
  python3 -c 'import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],"wb"))' "$tools/node.xz" /tmp/tern-node
  chmod +x /tmp/tern-node
  node=/tmp/tern-node
fi
# The interpreter that holds PyTorch (on the lent machines a venv under /opt), bound into the prover's container.
AGENT_PROVER_PYTHON=$(python3 -c 'import sys; print(sys.executable)')
export AGENT_PROVER_PYTHON AGENT_RUNNERS_DIR="$PWD/runners"
nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv,noheader >&2 || true
"$node" --version >&2
runc --version | head -1 >&2
"$AGENT_PROVER_PYTHON" runners/python/tern_prover.py backends >&2 || true
status=0
"$node" "$tools/device-check.mjs" "$@" > /tmp/device-check.json || status=$?
cat /tmp/device-check.json
[ -n "${OUT:-}" ] && cp /tmp/device-check.json "$OUT/device-check.json"
exit $status

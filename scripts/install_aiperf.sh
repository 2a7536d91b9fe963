#!/usr/bin/env bash
# Install NVIDIA's AIPerf client benchmark into its own virtual environment for the engine tests
# (tests/engine/test_peer_benchmarks.py), apart from tokenwatch's: AIPerf is never a dependency of tokenwatch.
# Idempotent: a venv that already runs this version is kept as it is.
#
#   scripts/install_aiperf.sh            # into ~/.cache/tokenwatch-test/aiperf-venv
#   TOKENWATCH_AIPERF_VENV=/elsewhere scripts/install_aiperf.sh
#
# The tests find the venv at the same place (TOKENWATCH_AIPERF_VENV or the default) and skip, saying why,
# where it is missing.
set -euo pipefail

AIPERF_VERSION="${AIPERF_VERSION:-0.13.0}"
VENV="${TOKENWATCH_AIPERF_VENV:-$HOME/.cache/tokenwatch-test/aiperf-venv}"

if [ -x "$VENV/bin/aiperf" ] && [ "$("$VENV/bin/aiperf" --version 2>/dev/null | tail -1)" = "$AIPERF_VERSION" ]; then
  echo "aiperf $AIPERF_VERSION already in $VENV"
  exit 0
fi

start=$SECONDS
echo "installing aiperf $AIPERF_VERSION into $VENV"
rm -rf "$VENV"
mkdir -p "$(dirname "$VENV")"
python3 -m venv "$VENV"
"$VENV/bin/pip" install --quiet "aiperf==$AIPERF_VERSION"
"$VENV/bin/aiperf" --version
echo "aiperf $AIPERF_VERSION installed in $((SECONDS - start)) s"
